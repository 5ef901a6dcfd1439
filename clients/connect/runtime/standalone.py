"""StandaloneHerder: one worker that runs every connector itself (Kafka's
`connect-standalone.sh`). Configs live in memory (from the command line's files and the
REST API), statuses in memory, source offsets in `offset.storage.file.filename`."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import AlreadyExistsError, BadRequestError, NotFoundError
from .config_store import ClusterConfigState, MemoryConfigStore
from .connector_config import check_name, check_valid, validate_connector
from .herder_base import HerderBase
from .offset_store import FileOffsetStore
from .status_store import MemoryStatusStore
from .worker_config import WorkerConfig

__all__ = ["StandaloneHerder", "TARGET_STATES", "check_connector_request"]

log = logging.getLogger("strom.connect.standalone")

# KIP-980's initial_state names -> the target states of the config topic.
TARGET_STATES = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}


def check_connector_request(name: str, config: dict[str, str]) -> dict[str, str]:
    """The name in the URL/body and in the config must agree; the config gets the name."""
    check_name(name)
    given = config.get("name")
    if given is not None and given != name:
        raise BadRequestError(f"Connector name configuration ({given}) doesn't match connector "
                              f"name in the URL ({name})")
    return {**{str(k): str(v) for k, v in config.items()}, "name": name}


class StandaloneHerder(HerderBase):
    def __init__(self, config: WorkerConfig, plugins: Any, worker_id: str):
        super().__init__(config, plugins, MemoryStatusStore(),
                         FileOffsetStore(config["offset.storage.file.filename"]), worker_id)
        self.configs = MemoryConfigStore()
        self._lock = asyncio.Lock()
        self.worker.reconfigure_requested = lambda name: self._spawn(self._reconfigure(name))

    def snapshot(self) -> ClusterConfigState:
        return self.configs.snapshot()

    async def start(self) -> None:
        await self.offsets.start()
        await self.statuses.start()
        await self.configs.start()
        try:
            self.kafka_cluster_id = await self._cluster_id()
        except Exception as e:
            log.warning("could not read the Kafka cluster id: %r", e)

    async def stop(self) -> None:
        async with self._lock:
            await self.worker.stop_all()
        for t in list(self._background):
            await asyncio.wait([t], timeout=5)
        await self.offsets.stop()
        await self.statuses.stop()
        await self.configs.stop()

    # ------------------------------------------------------------------ changes

    async def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        config = check_connector_request(name, config)
        info, _ = await asyncio.get_running_loop().run_in_executor(
            None, validate_connector, self.plugins, config)
        check_valid(info)
        async with self._lock:
            snap = self.snapshot()
            exists = name in snap.connector_configs
            if exists and not allow_replace:
                raise AlreadyExistsError(f"Connector {name} already exists")
            if exists:
                target = snap.target_states.get(name, "STARTED")
                await self._stop_connector(name)
            else:
                initial = TARGET_STATES.get((initial_state or "RUNNING").upper())
                if initial is None:
                    raise BadRequestError(f"Invalid initial state {initial_state}")
                target = initial
            await self.configs.put_connector_config(name, config, target)
            await self._start_connector(name)
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        async with self._lock:
            self._require(name)
            await self._stop_connector(name)
            await self.configs.remove_connector_config(name)
            await self.statuses.delete_connector(name)

    async def _start_connector(self, name: str) -> None:
        snap = self.snapshot()
        config = snap.connector_configs[name]
        target = snap.target_states.get(name, "STARTED")
        if not await self.worker.start_connector(name, config, target):
            return
        if target == "STOPPED":
            await self.configs.put_task_configs(name, [])
            return
        await self._update_tasks(name, target)

    async def _update_tasks(self, name: str, target: str) -> None:
        """Ask the connector for its task configs; restart the tasks when they changed."""
        try:
            configs = await self.worker.connector_task_configs(name)
        except Exception as e:
            log.error("connector %s: task_configs() failed: %s", name, e)
            self.worker.connectors[name].state.set("FAILED", repr(e))
            return
        snap = self.snapshot()
        if configs != snap.task_configs.get(name) or not self.worker.running_tasks(name):
            await self.worker.stop_tasks(self.worker.running_tasks(name))
            await self.configs.put_task_configs(name, configs)
            for i, tc in enumerate(configs):
                await self.worker.start_task((name, i), snap.connector_configs[name], tc, target)

    async def _stop_connector(self, name: str) -> None:
        await self.worker.stop_tasks(self.worker.running_tasks(name))
        await self.worker.stop_connector(name)

    async def _reconfigure(self, name: str) -> None:
        async with self._lock:
            snap = self.snapshot()
            if name in self.worker.connectors and snap.target_states.get(name) == "STARTED":
                await self._update_tasks(name, "STARTED")

    # ------------------------------------------------------------------ target states

    async def pause_connector(self, name: str) -> None:
        await self._set_target(name, "PAUSED")

    async def resume_connector(self, name: str) -> None:
        await self._set_target(name, "STARTED")

    async def stop_connector(self, name: str) -> None:
        await self._set_target(name, "STOPPED")

    async def _set_target(self, name: str, target: str) -> None:
        async with self._lock:
            snap = self._require(name)
            before = snap.target_states.get(name, "STARTED")
            await self.configs.put_target_state(name, target)
            if target == "STOPPED":
                await self.worker.stop_tasks(self.worker.running_tasks(name))
                await self.configs.put_task_configs(name, [])
                await self.worker.set_connector_state(name, target)
            elif before == "STOPPED":
                await self.worker.set_connector_state(name, target)
                await self._update_tasks(name, target)
            else:
                await self.worker.set_connector_state(name, target)
                self.worker.set_task_state(name, target)

    # ------------------------------------------------------------------ restarts (KIP-745)

    async def restart_connector(self, name: str, include_tasks: bool,
                                only_failed: bool) -> dict[str, Any] | None:
        async with self._lock:
            snap = self._require(name)
            cs = self.statuses.get_connector(name)
            connector_failed = cs is not None and cs.state == "FAILED"
            restart_connector = not only_failed or connector_failed
            tasks = []
            if include_tasks:
                for ts in self.statuses.get_all_tasks(name):
                    if not only_failed or ts.state == "FAILED":
                        tasks.append(ts.id[1])
            # Kafka answers with the plan: what is restarted shows RESTARTING.
            plan = await self.connector_status(name)
            if restart_connector:
                plan["connector"]["state"] = "RESTARTING"
            for t in plan["tasks"]:
                if t["id"] in tasks:
                    t["state"] = "RESTARTING"
            if restart_connector:
                await self.worker.stop_connector(name)
            await self.worker.stop_tasks([(name, i) for i in tasks])
            for i in tasks:
                self._report((name, i), "RESTARTING", None)
            if restart_connector:
                self._report(name, "RESTARTING", None)
                target = snap.target_states.get(name, "STARTED")
                await self.worker.start_connector(name, snap.connector_configs[name], target)
            configs = snap.task_configs.get(name, [])
            target = snap.target_states.get(name, "STARTED")
            for i in tasks:
                if i < len(configs):
                    await self.worker.start_task((name, i), snap.connector_configs[name],
                                                 configs[i], target)
        if not include_tasks and not only_failed:
            return None
        return plan

    async def restart_task(self, name: str, task_id: int) -> None:
        async with self._lock:
            snap = self._require(name)
            configs = snap.task_configs.get(name, [])
            if not 0 <= task_id < len(configs):
                raise NotFoundError(f"Task {name}-{task_id} not found")
            await self.worker.stop_tasks([(name, task_id)])
            await self.worker.start_task((name, task_id), snap.connector_configs[name],
                                         configs[task_id], snap.target_states.get(name, "STARTED"))
