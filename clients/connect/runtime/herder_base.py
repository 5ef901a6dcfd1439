"""What both herders share (Kafka's AbstractHerder): statuses from the status store,
config validation, plugin listings, a connector's topics and its offsets (KIP-875).
`StandaloneHerder` and `DistributedHerder` add where configs live and who runs what."""
from __future__ import annotations

import asyncio
import collections
import json
import logging
from typing import Any

from clients.aio import AsyncAdminClient
from clients.types import OffsetAndMetadata, TopicPartition

from ..errors import BadRequestError, NotFoundError
from .config_store import ClusterConfigState
from .connector_config import connector_kind, validate_connector
from .herder import connector_info_json
from .offset_store import OffsetStore
from .status_store import ConnectorStatus, StatusStore, TaskStatus
from .worker import InstanceId, Worker
from .worker_config import WorkerConfig

__all__ = ["HerderBase"]

log = logging.getLogger("strom.connect.herder")


class HerderBase:
    """Needs `self.snapshot()` (the config state) from the subclass."""

    def __init__(self, config: WorkerConfig, plugins: Any, statuses: StatusStore,
                 offsets: OffsetStore, worker_id: str):
        self.config = config
        self.plugins = plugins
        self.statuses = statuses
        self.offsets = offsets
        self.worker_id = worker_id
        self.kafka_cluster_id = ""
        self.generation = 0
        self._background: set[asyncio.Task[Any]] = set()
        self._status_queue: collections.deque[Any] = collections.deque()
        self._status_writer: asyncio.Task[None] | None = None
        self.worker = Worker(config, plugins, offsets, self._report, self._topic_used, worker_id)

    def snapshot(self) -> ClusterConfigState:
        raise NotImplementedError

    # ------------------------------------------------------------------ background writes

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _report(self, instance: InstanceId, state: str, trace: str | None) -> None:
        if isinstance(instance, str):
            status: Any = ConnectorStatus(instance, state, trace, self.worker_id, self.generation)
        else:
            status = TaskStatus(instance, state, trace, self.worker_id, self.generation)
        log.info("%s is %s", instance if isinstance(instance, str) else "%s-%d" % instance, state)
        # One writer, in order: RUNNING then PAUSED must not land as PAUSED then RUNNING.
        self._status_queue.append(status)
        if self._status_writer is None or self._status_writer.done():
            self._status_writer = asyncio.get_running_loop().create_task(self._write_statuses())
            self._background.add(self._status_writer)
            self._status_writer.add_done_callback(self._background.discard)

    async def _write_statuses(self) -> None:
        while self._status_queue:
            status = self._status_queue.popleft()
            try:
                await self.statuses.put(status)
            except Exception as e:
                log.warning("status of %s not written: %r", status.id, e)

    def _topic_used(self, connector: str, task: int, topic: str) -> None:
        self._spawn(self.statuses.put_topic(connector, topic, task))

    async def _cluster_id(self) -> str:
        admin = AsyncAdminClient(self.config.client_config("admin"))
        try:
            return (await admin.describe_cluster()).cluster_id or ""
        finally:
            await admin.close()

    # ------------------------------------------------------------------ changes

    async def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        raise NotImplementedError

    async def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> dict[str, Any]:
        """KIP-477: the current config with `patch` merged in (a None value removes a key)."""
        current = await self.connector_config(name)
        for k, v in patch.items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = str(v)
        _, info = await self.put_connector_config(name, current, allow_replace=True)
        return info

    # ------------------------------------------------------------------ reads

    def _require(self, name: str) -> ClusterConfigState:
        snap = self.snapshot()
        if name not in snap.connector_configs:
            raise NotFoundError(f"Connector {name} not found")
        return snap

    def _kind(self, config: dict[str, str]) -> str | None:
        try:
            return connector_kind(self.plugins.connector_class(config["connector.class"]))
        except Exception:
            return None

    async def connectors(self) -> list[str]:
        return sorted(self.snapshot().connector_configs)

    async def connector_info(self, name: str) -> dict[str, Any]:
        snap = self._require(name)
        config = snap.connector_configs[name]
        return connector_info_json(name, config, len(snap.task_configs.get(name, [])),
                                   self._kind(config))

    async def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._require(name).connector_configs[name])

    async def task_configs(self, name: str) -> list[dict[str, Any]]:
        snap = self._require(name)
        return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                for i, c in enumerate(snap.task_configs.get(name, []))]

    @staticmethod
    def _status_json(s: Any) -> dict[str, Any]:
        out = {"state": s.state, "worker_id": s.worker_id}
        if s.trace:
            out["trace"] = s.trace
        return out

    async def connector_status(self, name: str) -> dict[str, Any]:
        snap = self._require(name)
        cs = self.statuses.get_connector(name)
        if cs is None:
            raise NotFoundError(f"No status found for connector {name}")
        tasks = []
        count = len(snap.task_configs.get(name, []))
        for ts in self.statuses.get_all_tasks(name):
            index = ts.id[1]
            if index < count:
                tasks.append({"id": index, **self._status_json(ts)})
        tasks.sort(key=lambda t: t["id"])
        return {"name": name, "connector": self._status_json(cs), "tasks": tasks,
                "type": self._kind(snap.connector_configs[name]) or "unknown"}

    async def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        snap = self._require(name)
        if task_id >= len(snap.task_configs.get(name, [])) or task_id < 0:
            raise NotFoundError(f"Unknown task {name}-{task_id}")
        ts = self.statuses.get_task(name, task_id)
        if ts is None:
            raise NotFoundError(f"No status found for task {name}-{task_id}")
        return {"id": task_id, **self._status_json(ts)}

    async def connector_topics(self, name: str) -> list[str]:
        self._require(name)
        return sorted(self.statuses.topics(name))

    async def reset_connector_topics(self, name: str) -> None:
        self._require(name)
        await self.statuses.delete_topics(name)

    # ------------------------------------------------------------------ plugins

    def connector_plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        if connectors_only:
            return [p for p in self.plugins.plugins(None) if p["type"] in ("source", "sink")]
        return self.plugins.plugins(None)

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        for kind in ("connector", "converter", "header_converter", "transformation", "predicate"):
            try:
                cls = self.plugins.resolve(plugin, kind)
            except Exception:
                continue
            return [k.definition_json() for k in cls().config().keys.values()]
        raise NotFoundError(f"Unknown plugin {plugin}.")

    async def validate_connector_config(self, plugin: str | None,
                                        config: dict[str, str]) -> dict[str, Any]:
        config = dict(config)
        if plugin is not None:
            config.setdefault("connector.class", plugin)
        info, _ = await asyncio.get_running_loop().run_in_executor(
            None, validate_connector, self.plugins, config)
        return info

    # ------------------------------------------------------------------ offsets (KIP-875)

    def _check_stopped(self, name: str) -> ClusterConfigState:
        snap = self._require(name)
        if snap.target_states.get(name, "STARTED") != "STOPPED":
            raise BadRequestError(f"Connectors must be in the STOPPED state before their offsets "
                                  f"can be modified. This can be done for the specified connector "
                                  f"by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")
        return snap

    async def connector_offsets(self, name: str) -> dict[str, Any]:
        snap = self._require(name)
        if self._kind(snap.connector_configs[name]) == "sink":
            admin = AsyncAdminClient(self.config.client_config("admin"))
            try:
                committed = await admin.list_group_offsets(f"connect-{name}")
            finally:
                await admin.close()
            return {"offsets": [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                                 "offset": {"kafka_offset": om.offset}}
                                for tp, om in sorted(committed.items())]}
        await self.offsets.read_to_end()
        return {"offsets": [{"partition": p, "offset": o}
                            for p, o in self.offsets.connector_offsets(name)]}

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        snap = self._check_stopped(name)
        if self._kind(snap.connector_configs[name]) == "sink":
            changes: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for entry in offsets:
                p, o = entry.get("partition") or {}, entry.get("offset")
                try:
                    tp = TopicPartition(str(p["kafka_topic"]), int(p["kafka_partition"]))
                except (KeyError, TypeError, ValueError):
                    raise BadRequestError("Partitions must contain kafka_topic and kafka_partition: "
                                          f"{json.dumps(p)}") from None
                if o is None:     # needs OffsetDelete, which strom's brokers do not serve yet
                    raise BadRequestError("Resetting the offset of one sink partition (a null "
                                          "offset) is not supported; reset them all with DELETE")
                else:
                    try:
                        changes[tp] = OffsetAndMetadata(int(o["kafka_offset"]))
                    except (KeyError, TypeError, ValueError):
                        raise BadRequestError(f"Offset must contain kafka_offset: {json.dumps(o)}") from None
            await self._alter_sink_offsets(name, changes)
            return "The Connect framework-managed offsets for this connector have been altered successfully. However, if this connector manages offsets externally, they will need to be manually altered in the system that the connector uses."
        pairs = []
        for entry in offsets:
            p = entry.get("partition")
            if not isinstance(p, dict):
                raise BadRequestError("Each entry needs a partition object")
            o = entry.get("offset")
            if o is not None and not isinstance(o, dict):
                raise BadRequestError("An offset must be an object or null")
            pairs.append((p, o))
        await self.offsets.write(name, pairs)
        return "The offsets for this connector have been altered successfully"

    async def reset_connector_offsets(self, name: str) -> str:
        snap = self._check_stopped(name)
        if self._kind(snap.connector_configs[name]) == "sink":
            admin = AsyncAdminClient(self.config.client_config("admin"))
            try:
                await admin.delete_groups([f"connect-{name}"])
            except Exception as e:
                if "GROUP_ID_NOT_FOUND" not in repr(e) and "GroupIdNotFound" not in repr(e):
                    raise
            finally:
                await admin.close()
            return "The Connect framework-managed offsets for this connector have been reset successfully. However, if this connector manages offsets externally, they will need to be manually reset in the system that the connector uses."
        await self.offsets.read_to_end()
        pairs = [(p, None) for p, _ in self.offsets.connector_offsets(name)]
        await self.offsets.write(name, pairs)
        return "The offsets for this connector have been reset successfully"

    async def _alter_sink_offsets(self, name: str,
                                  changes: dict[TopicPartition, OffsetAndMetadata | None]) -> None:
        admin = AsyncAdminClient(self.config.client_config("admin"))
        try:
            keep = {tp: om for tp, om in changes.items() if om is not None}
            if keep:
                await admin.alter_group_offsets(f"connect-{name}", keep)
        finally:
            await admin.close()
