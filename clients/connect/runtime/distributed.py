"""DistributedHerder: one worker of a Connect cluster (Kafka's DistributedHerder).

Workers with the same `group.id` are members of one group of protocol type `connect`
(`member.py`); the leader assigns connectors and tasks with incremental cooperative
rebalancing (`assignor.py`). Connector configs, task configs and target states live in the
config topic, source offsets in the offsets topic, statuses in the status topic; every
worker reads all three and reacts to what it reads:

  - a new or removed connector, or new task configs: the leader rejoins so the assignment
    follows; a changed connector config: its owner restarts it and asks it for task configs;
  - task configs are written by the leader only: the owner of a connector that is not the
    leader sends them to the leader's internal endpoint;
  - a target state (pause, resume, stop): each worker applies it to what it runs.

REST requests that change configs need the leader; a follower answers NotLeaderError with
the leader's URL and the REST layer forwards the request there. A restart goes to the
worker that runs the instance. Single event loop; `_lock` orders the tick's changes with
the REST requests' ones.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import web

from clients.aio.client import KafkaClient
from clients.config import resolve

from ..api import ExactlyOnceSupport, SourceConnector
from ..errors import AlreadyExistsError, BadRequestError, NotFoundError, NotLeaderError, RequestTimeoutError
from .config_store import ClusterConfigState, KafkaConfigStore
from .connector_config import check_valid, validate_connector
from .herder_base import HerderBase
from .member import WorkerGroupMember
from .offset_store import KafkaOffsetStore
from .standalone import TARGET_STATES, check_connector_request
from .status_store import KafkaStatusStore
from .worker_config import WorkerConfig

__all__ = ["DistributedHerder"]

log = logging.getLogger("strom.connect.distributed")


def check_exactly_once(cls: type, config: dict[str, str]) -> None:
    """KIP-618's checks of a source connector on a worker with exactly-once support:
    `exactly.once.support=required` needs the connector to say SUPPORTED, and strom commits
    a transaction per poll() batch only (`transaction.boundary=poll`)."""
    if not issubclass(cls, SourceConnector):
        return
    boundary = config.get("transaction.boundary", "poll").lower()
    if boundary != "poll":
        raise BadRequestError(f"Invalid value {boundary} for configuration transaction.boundary: "
                              "strom's workers define transactions per poll() batch only (poll)")
    if config.get("exactly.once.support", "requested").lower() == "required":
        support = cls().exactly_once_support(config)
        if support != ExactlyOnceSupport.SUPPORTED:
            raise BadRequestError(
                "The connector does not support exactly-once semantics with the provided "
                f"configuration (exactly.once.support=required; it answered {support})")


class DistributedHerder(HerderBase):
    def __init__(self, config: WorkerConfig, plugins: Any, worker_id: str):
        shared = config.shared_client_config()
        super().__init__(
            config, plugins,
            KafkaStatusStore(shared, config["status.storage.topic"],
                             config["status.storage.partitions"],
                             config["status.storage.replication.factor"]),
            KafkaOffsetStore(shared, config["offset.storage.topic"],
                             config["offset.storage.partitions"],
                             config["offset.storage.replication.factor"]),
            worker_id)
        self.configs = KafkaConfigStore(shared, config["config.storage.topic"],
                                        config["config.storage.replication.factor"])
        self.rest_url = ""
        self.member: WorkerGroupMember | None = None
        self.rebalances = 0
        self._lock = asyncio.Lock()
        self._joined = asyncio.Event()              # the first assignment is applied
        self._wake = asyncio.Event()
        self._stopping = False
        self._runner: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._dirty_connectors: set[str] = set()     # config changed: restart + new task configs
        self._dirty_tasks: set[str] = set()          # task configs changed: restart my tasks
        self._targets: set[str] = set()              # target state changed
        self._reconfigure: set[str] = set()          # connector asked for new task configs
        self.worker.reconfigure_requested = self._request_reconfigure
        self.configs.add_listener(self._on_config_event)

    def snapshot(self) -> ClusterConfigState:
        return self.configs.snapshot()

    def internal_routes(self) -> list[web.RouteDef]:
        return [web.post("/strom-internal/connectors/{name}/tasks", self._put_tasks_route)]

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.configs.start()
        await self.statuses.start()
        await self.offsets.start()
        try:
            self.kafka_cluster_id = await self._cluster_id()
        except Exception as e:
            log.warning("could not read the Kafka cluster id: %r", e)
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=90))
        cfg = self.config.client_config("consumer")
        cfg["client.id"] = f"connect-{self.worker_id}"
        c = self.config
        self.member = WorkerGroupMember(
            KafkaClient(resolve("consumer", cfg)), c["group.id"], self.rest_url,
            session_timeout_ms=c["session.timeout.ms"],
            rebalance_timeout_ms=c["rebalance.timeout.ms"],
            heartbeat_interval_ms=c["heartbeat.interval.ms"],
            scheduled_rebalance_max_delay_ms=c["scheduled.rebalance.max.delay.ms"],
            protocol=c["connect.protocol"],
            unsync_backoff_ms=c["worker.unsync.backoff.ms"],
            config_snapshot=self._config_snapshot, catch_up=self._catch_up)
        self._runner = asyncio.get_running_loop().create_task(self._run(), name="connect-herder")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.wait([self._runner])
        async with self._lock:
            await self.worker.stop_all()
        if self.member is not None:
            await self.member.leave()
            await self.member.close()
        for t in list(self._background):
            await asyncio.wait([t], timeout=5)
        if self._session is not None:
            await self._session.close()
        await self.offsets.stop()
        await self.statuses.stop()
        await self.configs.stop()

    def _config_snapshot(self) -> tuple[int, dict[str, int]]:
        snap = self.snapshot()
        return snap.offset, {c: len(snap.task_configs.get(c, [])) for c in snap.connector_configs}

    async def _catch_up(self, offset: int) -> bool:
        try:
            await asyncio.wait_for(self.configs.read_to_end(), self.config["worker.sync.timeout.ms"] / 1000)
        except asyncio.TimeoutError:
            return False
        return self.snapshot().offset >= offset

    # ------------------------------------------------------------------ config events

    def _on_config_event(self, event: Any) -> None:
        kind = type(event).__name__
        name = event.name
        if kind == "ConnectorConfigUpdated":
            self._dirty_connectors.add(name)
        elif kind == "ConnectorRemoved":
            self._dirty_connectors.add(name)
        elif kind == "TasksCommitted":
            self._dirty_tasks.add(name)
        elif kind == "TargetStateChanged":
            self._targets.add(name)
        self._wake.set()

    def _request_reconfigure(self, name: str) -> None:
        self._reconfigure.add(name)
        self._wake.set()

    # ------------------------------------------------------------------ the tick

    async def _run(self) -> None:
        assert self.member is not None
        member = self.member
        while not self._stopping:
            try:
                if member.need_rejoin:
                    assignment = await member.ensure_active()
                    self.rebalances += 1
                    async with self._lock:
                        await self._apply_assignment(assignment)
                    self._joined.set()
                async with self._lock:
                    await self._handle_changes()
                self._wake.clear()
                waiters = [asyncio.ensure_future(self._wake.wait()),
                           asyncio.ensure_future(member.changed.wait())]
                await asyncio.wait(waiters, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                for w in waiters:
                    w.cancel()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("herder tick failed: %s", e, exc_info=True)
                await asyncio.sleep(1.0)

    async def _apply_assignment(self, a: Any) -> None:
        assert self.member is not None
        self.generation = self.member.generation
        if a.error:
            log.info("assignment error %d (config offset %d): reading configs and rejoining",
                     a.error, a.config_offset)
            await self._catch_up(a.config_offset)
            self.member.request_rejoin("config offset mismatch")
            return
        if not await self._catch_up(a.config_offset):
            log.warning("configs not read up to %d within worker.sync.timeout.ms", a.config_offset)
        await self._reconcile()

    async def _reconcile(self) -> None:
        """Run exactly what the cumulative assignment says, with the current configs."""
        assert self.member is not None
        connectors, tasks = self.member.assignment.connectors, self.member.assignment.tasks
        snap = self.snapshot()
        want_tasks = {(c, i) for c, i in tasks
                      if c in snap.connector_configs and i < len(snap.task_configs.get(c, []))}
        stop = [t for t in self.worker.tasks if t not in want_tasks]
        await self.worker.stop_tasks(stop)
        for name in list(self.worker.connectors):
            if name not in connectors or name not in snap.connector_configs:
                await self.worker.stop_connector(name)
        for name in connectors:
            if name in snap.connector_configs and name not in self.worker.connectors:
                await self._start_connector(name, snap)
        for tid in sorted(want_tasks):
            if tid not in self.worker.tasks:
                c, i = tid
                await self.worker.start_task(tid, snap.connector_configs[c],
                                             snap.task_configs[c][i],
                                             snap.target_states.get(c, "STARTED"))

    async def _start_connector(self, name: str, snap: ClusterConfigState) -> None:
        target = snap.target_states.get(name, "STARTED")
        if await self.worker.start_connector(name, snap.connector_configs[name], target):
            if target != "STOPPED":
                self._reconfigure.add(name)

    async def _handle_changes(self) -> None:
        assert self.member is not None
        snap = self.snapshot()
        dirty, self._dirty_connectors = self._dirty_connectors, set()
        tasks_changed, self._dirty_tasks = self._dirty_tasks, set()
        targets, self._targets = self._targets, set()
        for name in dirty:
            if name in self.worker.connectors:      # changed or removed: restart it (or not)
                await self.worker.stop_tasks(self.worker.running_tasks(name))
                await self.worker.stop_connector(name)
                if name in snap.connector_configs and name in self.member.assignment.connectors:
                    await self._start_connector(name, snap)
            if self.member.is_leader:
                self.member.request_rejoin(f"connector {name} changed")
        for name in tasks_changed:
            mine = self.worker.running_tasks(name)
            configs = snap.task_configs.get(name, [])
            restart = [t for t in mine if t[1] >= len(configs)
                       or self.worker.tasks[t].config != configs[t[1]]]
            await self.worker.stop_tasks(restart)
            if self.member.is_leader:
                self.member.request_rejoin(f"tasks of {name} changed")
        for name in targets:
            target = snap.target_states.get(name, "STARTED")
            if target == "STOPPED":
                await self.worker.stop_tasks(self.worker.running_tasks(name))
                if self.member.is_leader and snap.task_configs.get(name):
                    await self.configs.put_task_configs(name, [])
            await self.worker.set_connector_state(name, target)
            self.worker.set_task_state(name, target)
            if target != "STOPPED" and name in self.worker.connectors and not snap.task_configs.get(name):
                self._reconfigure.add(name)
        reconfigure, self._reconfigure = self._reconfigure, set()
        for name in reconfigure:
            await self._publish_task_configs(name)
        if dirty or tasks_changed or targets:
            await self._reconcile()

    async def _publish_task_configs(self, name: str) -> None:
        """Ask the connector for task configs; the leader writes them if they changed."""
        wc = self.worker.connectors.get(name)
        snap = self.snapshot()
        if wc is None or not wc.started or snap.target_states.get(name, "STARTED") == "STOPPED":
            return
        try:
            configs = await self.worker.connector_task_configs(name)
        except Exception as e:
            log.error("connector %s: task_configs() failed: %s", name, e)
            wc.state.set("FAILED", repr(e))
            return
        if configs == snap.task_configs.get(name):
            return
        await self._send_task_configs(name, configs)

    async def _send_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        assert self.member is not None
        if self.member.is_leader:
            await self.configs.put_task_configs(name, configs)
            return
        url = self.member.leader_url
        if not url or self._session is None:
            self._reconfigure.add(name)          # no leader yet: try again next tick
            return
        try:
            async with self._session.post(f"{url}/strom-internal/connectors/{name}/tasks",
                                          json=configs) as resp:
                if resp.status >= 300:
                    raise RuntimeError(f"{resp.status} {await resp.text()}")
        except Exception as e:
            log.warning("task configs of %s not sent to the leader %s: %s", name, url, e)
            self._reconfigure.add(name)
            asyncio.get_running_loop().call_later(1.0, self._wake.set)

    async def _put_tasks_route(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            configs = await request.json()
            assert isinstance(configs, list) and all(isinstance(c, dict) for c in configs)
        except Exception:
            return web.json_response({"error_code": 400, "message": "a list of task configs"},
                                     status=400)
        if self.member is None or not self.member.is_leader:
            return web.json_response({"error_code": 409, "message": "not the leader"}, status=409)
        if name not in self.snapshot().connector_configs:
            return web.json_response({"error_code": 404, "message": f"Connector {name} not found"},
                                     status=404)
        await self.configs.put_task_configs(name, [{str(k): str(v) for k, v in c.items()}
                                                   for c in configs])
        return web.Response(status=204)

    # ------------------------------------------------------------------ REST: config changes

    async def _leader_only(self, what: str) -> None:
        """NotLeaderError unless this worker leads; a request that arrives while the
        worker is still joining its group waits for the join (as Kafka's queued requests)."""
        if not self._joined.is_set():
            try:
                await asyncio.wait_for(self._joined.wait(), self.config["rebalance.timeout.ms"] / 1000)
            except asyncio.TimeoutError:
                raise RequestTimeoutError("Request timed out: the worker has not joined its group") from None
        if self.member is None or not self.member.is_leader:
            url = self.member.leader_url if self.member is not None else None
            raise NotLeaderError(f"Cannot {what}: this worker is not the leader", url or None)

    async def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                                   initial_state: str | None = None) -> tuple[bool, dict[str, Any]]:
        config = check_connector_request(name, config)
        await self._leader_only("create or change a connector")
        info, cls = await asyncio.get_running_loop().run_in_executor(
            None, validate_connector, self.plugins, config)
        check_valid(info)
        if self.config.exactly_once:
            check_exactly_once(cls, config)
        await self.configs.read_to_end()
        snap = self.snapshot()
        exists = name in snap.connector_configs
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        target = None
        if not exists:
            target = TARGET_STATES.get((initial_state or "RUNNING").upper())
            if target is None:
                raise BadRequestError(f"Invalid initial state {initial_state}")
        await self.configs.put_connector_config(name, config, target)
        await self.configs.read_to_end()
        return not exists, await self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        await self._leader_only("delete a connector")
        await self.configs.read_to_end()
        self._require(name)
        await self.configs.remove_connector_config(name)
        await self.configs.read_to_end()
        await self.statuses.delete_connector(name)

    async def pause_connector(self, name: str) -> None:
        await self._put_target(name, "PAUSED")

    async def resume_connector(self, name: str) -> None:
        await self._put_target(name, "STARTED")

    async def stop_connector(self, name: str) -> None:
        await self._leader_only("stop a connector")
        await self._put_target(name, "STOPPED")
        await self.configs.put_task_configs(name, [])
        await self.configs.read_to_end()

    async def _put_target(self, name: str, target: str) -> None:
        await self.configs.read_to_end()
        self._require(name)
        await self.configs.put_target_state(name, target)
        await self.configs.read_to_end()

    async def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        await self._leader_only("alter offsets")
        return await super().alter_connector_offsets(name, offsets)

    async def reset_connector_offsets(self, name: str) -> str:
        await self._leader_only("reset offsets")
        return await super().reset_connector_offsets(name)

    # ------------------------------------------------------------------ REST: restarts

    def _owner_url(self, status: Any) -> str | None:
        if status is None or not status.worker_id or status.worker_id == self.worker_id:
            return None
        return f"http://{status.worker_id}"

    async def restart_connector(self, name: str, include_tasks: bool,
                                only_failed: bool) -> dict[str, Any] | None:
        snap = self._require(name)
        cs = self.statuses.get_connector(name)
        restart_connector = not only_failed or (cs is not None and cs.state == "FAILED")
        tasks = [ts for ts in self.statuses.get_all_tasks(name)
                 if include_tasks and ts.id[1] < len(snap.task_configs.get(name, []))
                 and (not only_failed or ts.state == "FAILED")]
        plan = await self.connector_status(name)
        if restart_connector:
            plan["connector"]["state"] = "RESTARTING"
            await self._restart_instance(name, None, cs)
        for ts in tasks:
            for t in plan["tasks"]:
                if t["id"] == ts.id[1]:
                    t["state"] = "RESTARTING"
            await self._restart_instance(name, ts.id[1], ts)
        if not include_tasks and not only_failed:
            return None
        return plan

    async def restart_task(self, name: str, task_id: int) -> None:
        snap = self._require(name)
        if not 0 <= task_id < len(snap.task_configs.get(name, [])):
            raise NotFoundError(f"Task {name}-{task_id} not found")
        await self._restart_instance(name, task_id, self.statuses.get_task(name, task_id))

    async def _restart_instance(self, name: str, task_id: int | None, status: Any) -> None:
        owner = self._owner_url(status)
        if owner is not None and self._session is not None:
            path = (f"/connectors/{name}/restart" if task_id is None
                    else f"/connectors/{name}/tasks/{task_id}/restart")
            try:
                async with self._session.post(owner + path, params={"forward": "false"}) as resp:
                    if resp.status < 300:
                        return
                    text = await resp.text()
            except Exception as e:
                text = repr(e)
            log.warning("restart of %s%s on %s failed: %s", name,
                        "" if task_id is None else f"-{task_id}", owner, text)
            raise RequestTimeoutError(f"Restart of {name} on {owner} failed: {text}")
        async with self._lock:
            snap = self.snapshot()
            if task_id is None:
                if name in self.worker.connectors:
                    await self.worker.stop_connector(name)
                    self._report(name, "RESTARTING", None)
                    await self._start_connector(name, snap)
                    self._wake.set()
            elif (name, task_id) in self.worker.tasks:
                await self.worker.stop_tasks([(name, task_id)])
                self._report((name, task_id), "RESTARTING", None)
                await self.worker.start_task((name, task_id), snap.connector_configs[name],
                                             snap.task_configs[name][task_id],
                                             snap.target_states.get(name, "STARTED"))
