"""The worker: runs the connectors and tasks a herder gives it (Kafka's Worker).

It builds each instance from the plugin registry, with the converters and transforms its
connector config names (the connector's `key.converter` etc. over the worker's), a producer
per source task (transactional under exactly-once) and a consumer per sink task (group
`connect-<connector>`), and reports every state change through `report(id, state, trace)`.
Which instances run where, and when, is the herder's business: the worker only starts,
pauses, resumes and stops what it is told. Single event loop.
"""
from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any, Callable, Mapping, Union

from clients.aio import AsyncConsumer, AsyncProducer

from ..api import Connector, ConnectorContext, SinkConnector, SourceConnector
from .connector_config import client_overrides, connector_kind, sink_topics
from .offset_store import OffsetStore
from .plugin_calls import PluginCaller
from .task_parts import TaskParts, TaskState
from .worker_config import WorkerConfig
from .worker_sink import WorkerSinkTask
from .worker_source import WorkerSourceTask

__all__ = ["Worker", "WorkerConnector", "TaskId"]

log = logging.getLogger("strom.connect.worker")

TaskId = tuple[str, int]
InstanceId = Union[str, TaskId]
WorkerTask = Union[WorkerSourceTask, WorkerSinkTask]


class WorkerConnector:
    """One running connector: started, paused (stopped but kept), resumed, stopped."""

    def __init__(self, name: str, connector: Connector, config: dict[str, str],
                 state: TaskState, on_reconfigure: Callable[[str], None]):
        self.name = name
        self.connector = connector
        self.config = config
        self.state = state
        self.caller = PluginCaller(f"connector-{name}")
        self.started = False
        self.kind = connector_kind(type(connector))
        connector.initialize(ConnectorContext(lambda: on_reconfigure(name), self._fail))

    def _fail(self, error: BaseException) -> None:
        self.state.set("FAILED", "".join(traceback.format_exception(error)))

    async def start(self) -> bool:
        try:
            await self.caller.call(self.connector.start, dict(self.config))
        except Exception as e:
            log.error("connector %s failed to start: %s", self.name, e, exc_info=True)
            self._fail(e)
            return False
        self.started = True
        return True

    async def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            await self.caller.call(self.connector.stop)
        except Exception as e:
            log.warning("connector %s: stop() failed: %r", self.name, e)

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        configs = await self.caller.call(self.connector.task_configs, max_tasks)
        task_class = self.connector.task_class()
        out = []
        for c in configs:
            c = {str(k): str(v) for k, v in c.items()}
            c["task.class"] = f"{task_class.__module__}.{task_class.__qualname__}"
            if self.kind == "sink":     # a sink's tasks must know the topics (Kafka adds them)
                for key in ("topics", "topics.regex"):
                    if key in self.config:
                        c[key] = self.config[key]
            out.append(c)
        return out


class Worker:
    def __init__(self, config: WorkerConfig, plugins: Any, offsets: OffsetStore,
                 report: Callable[[InstanceId, str, str | None], None],
                 topic_used: Callable[[str, int, str], None], worker_id: str):
        self.config = config
        self.plugins = plugins
        self.offsets = offsets
        self.report = report
        self.topic_used = topic_used
        self.worker_id = worker_id
        self.connectors: dict[str, WorkerConnector] = {}
        self.tasks: dict[TaskId, WorkerTask] = {}
        self.reconfigure_requested: Callable[[str], None] = lambda name: None
        self.group_id: str = config.get("group.id") or "connect-standalone"
        self.graceful_timeout = config["task.shutdown.graceful.timeout.ms"] / 1000.0

    # ------------------------------------------------------------------ connectors

    async def start_connector(self, name: str, config: dict[str, str], target_state: str) -> bool:
        """Start (or, PAUSED/STOPPED, only instantiate) a connector; False if it failed."""
        state = TaskState(lambda s, t: self.report(name, s, t))
        try:
            cls = self.plugins.connector_class(config["connector.class"])
            connector = cls()
        except Exception as e:
            state.set("FAILED", "".join(traceback.format_exception(e)))
            return False
        wc = WorkerConnector(name, connector, config, state,
                             lambda n: self.reconfigure_requested(n))
        self.connectors[name] = wc
        if target_state == "STARTED":
            if not await wc.start():
                return False
            state.set("RUNNING")
        else:
            state.set("PAUSED" if target_state == "PAUSED" else "STOPPED")
        return True

    async def stop_connector(self, name: str) -> None:
        wc = self.connectors.pop(name, None)
        if wc is not None:
            await wc.stop()
            wc.caller.close()

    async def set_connector_state(self, name: str, target_state: str) -> None:
        wc = self.connectors.get(name)
        if wc is None:
            return
        if target_state == "STARTED":
            if not wc.started and await wc.start():
                wc.state.set("RUNNING")
        else:
            await wc.stop()
            wc.state.set("PAUSED" if target_state == "PAUSED" else "STOPPED")

    async def connector_task_configs(self, name: str) -> list[dict[str, str]]:
        wc = self.connectors[name]
        max_tasks = int(wc.config.get("tasks.max", "1"))
        configs = await wc.task_configs(max_tasks)
        enforce = wc.config.get("tasks.max.enforce", "true").lower() != "false"
        if len(configs) > max_tasks and enforce:
            raise ValueError(f"connector {name} generated {len(configs)} task configs, "
                             f"more than tasks.max={max_tasks}")
        return configs

    # ------------------------------------------------------------------ tasks

    async def start_task(self, tid: TaskId, connector_config: dict[str, str],
                         task_config: dict[str, str], target_state: str) -> bool:
        name, index = tid
        report = lambda s, t: self.report(tid, s, t)          # noqa: E731
        try:
            connector_cls = self.plugins.connector_class(connector_config["connector.class"])
            task_cls = connector_cls().task_class()
            task = task_cls()
            parts = self._parts(tid, connector_config, report)
            if issubclass(connector_cls, SourceConnector):
                wt: WorkerTask = self._source_task(tid, task, task_config, connector_config, parts)
            elif issubclass(connector_cls, SinkConnector):
                wt = self._sink_task(tid, task, task_config, connector_config, parts)
            else:
                raise TypeError(f"{connector_cls} is neither a SourceConnector nor a SinkConnector")
        except Exception as e:
            log.error("task %s-%d could not be created: %s", name, index, e, exc_info=True)
            TaskState(report).set("FAILED", "".join(traceback.format_exception(e)))
            return False
        self.tasks[tid] = wt
        wt.start(paused=target_state != "STARTED")
        return True

    async def stop_tasks(self, tids: list[TaskId]) -> None:
        running = [self.tasks.pop(t) for t in tids if t in self.tasks]
        if running:
            await asyncio.gather(*(t.stop(self.graceful_timeout) for t in running))

    def set_task_state(self, name: str, target_state: str) -> None:
        for (connector, _), wt in self.tasks.items():
            if connector == name:
                if target_state == "STARTED":
                    wt.resume()
                else:
                    wt.pause()

    async def stop_all(self) -> None:
        await self.stop_tasks(list(self.tasks))
        for name in list(self.connectors):
            await self.stop_connector(name)

    # ------------------------------------------------------------------ building

    def _converter(self, role: str, connector_config: Mapping[str, str]) -> Any:
        """Kafka's rule: the connector's converter with its `role.*` keys, else the worker's."""
        if connector_config.get(role):
            name, props = connector_config[role], connector_config
        else:
            name, props = self.config[role], self.config.raw
        converter = self.plugins.resolve(name, "header_converter" if role == "header.converter"
                                         else "converter")()
        prefix = role + "."
        own = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
        if role == "header.converter":
            if hasattr(converter, "configure"):
                try:
                    converter.configure(own, False)
                except TypeError:
                    converter.configure(own)
        else:
            converter.configure(own, role == "key.converter")
        return converter

    def _parts(self, tid: TaskId, connector_config: dict[str, str],
               report: Callable[[str, str | None], None]) -> TaskParts:
        from ..transforms import TransformationChain
        name, index = tid
        kind = connector_kind(self.plugins.connector_class(connector_config["connector.class"]))
        return TaskParts(
            kind=kind,
            chain=TransformationChain.from_connector_config(connector_config, self.plugins.resolve),
            key_converter=self._converter("key.converter", connector_config),
            value_converter=self._converter("value.converter", connector_config),
            header_converter=self._converter("header.converter", connector_config),
            tolerate_errors=connector_config.get("errors.tolerance", "none") == "all",
            report=report,
            topic_used=lambda topic: self.topic_used(name, index, topic),
            offset_flush_interval=self.config["offset.flush.interval.ms"] / 1000.0,
            offset_flush_timeout=self.config["offset.flush.timeout.ms"] / 1000.0)

    def _source_task(self, tid: TaskId, task: Any, task_config: dict[str, str],
                     connector_config: dict[str, str], parts: TaskParts) -> WorkerSourceTask:
        name, index = tid
        overrides = client_overrides(connector_config, "producer")
        cfg = self.config.client_config("producer", overrides)
        cfg.setdefault("client.id", f"connector-producer-{name}-{index}")
        exactly_once = self.config.exactly_once and self.config.mode == "distributed"
        if exactly_once:
            cfg["transactional.id"] = f"{self.group_id}-{name}-{index}"
            cfg["enable.idempotence"] = "true"
            cfg["acks"] = "all"
        else:   # Kafka's defaults for source producers: nothing acknowledged is lost
            cfg.setdefault("acks", "all")
            cfg.setdefault("enable.idempotence", "true")
        cfg.setdefault("linger.ms", "5")
        producer = AsyncProducer(cfg)
        return WorkerSourceTask(name, index, task, task_config, parts, producer, self.offsets,
                                exactly_once, getattr(self.offsets, "topic", None))

    def _sink_task(self, tid: TaskId, task: Any, task_config: dict[str, str],
                   connector_config: dict[str, str], parts: TaskParts) -> WorkerSinkTask:
        name, index = tid
        overrides = client_overrides(connector_config, "consumer")
        cfg = self.config.client_config("consumer", overrides)
        cfg["group.id"] = f"connect-{name}"
        cfg["enable.auto.commit"] = "false"
        cfg.setdefault("auto.offset.reset", "earliest")
        cfg.setdefault("client.id", f"connector-consumer-{name}-{index}")
        topics, regex = sink_topics(connector_config)
        return WorkerSinkTask(name, index, task, task_config, parts, AsyncConsumer(config=cfg),
                              topics, regex)

    # ------------------------------------------------------------------ views

    def running_tasks(self, name: str) -> list[TaskId]:
        return sorted(t for t in self.tasks if t[0] == name)

    def task_metrics(self) -> list[tuple[TaskId, WorkerTask]]:
        return sorted(self.tasks.items(), key=lambda kv: kv[0])
