"""What a running task is made of besides its plugin: the connector's transformation chain
and converters, the status it reports, the topics it used (KIP-558) and its counters.
The worker builds one `TaskParts` per task; the task loops only call it."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine

from clients.types import TIMESTAMP_LOG_APPEND_TIME, ConsumerRecord

from ..api import ConnectRecord, SinkRecord
from .plugin_calls import PluginCaller

__all__ = ["TaskParts", "TaskState", "TaskMetrics", "TaskRunner"]

log = logging.getLogger("strom.connect.task")

_TIMESTAMP_TYPES = {0: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}


class TaskState:
    """A connector's or task's state, reported to the status store on every change."""

    def __init__(self, report: Callable[[str, str | None], None]):
        self.value = "UNASSIGNED"
        self.trace: str | None = None
        self._report = report

    def set(self, state: str, trace: str | None = None) -> None:
        if state == self.value and trace == self.trace:
            return
        self.value, self.trace = state, trace
        self._report(state, trace)


@dataclass
class TaskMetrics:
    """Counters of one task, exported with the names Kafka's JMX exporter gives them."""

    kind: str
    records_polled: int = 0          # source: source-record-poll-total; sink: sink-record-read-total
    records_written: int = 0         # source: source-record-write-total; sink: sink-record-send-total
    records_filtered: int = 0        # dropped by a transform
    records_skipped: int = 0         # errors.tolerance=all: a record that failed conversion
    put_batches: int = 0
    commits_ok: int = 0
    commits_failed: int = 0
    commit_seconds_max: float = 0.0
    commit_seconds_sum: float = 0.0
    started_at: float = field(default_factory=time.monotonic)
    running_seconds: float = 0.0

    def polled(self, n: int) -> None:
        self.records_polled += n

    def written(self, n: int, filtered: int = 0) -> None:
        self.records_written += n
        self.records_filtered += filtered

    def commit(self, ok: bool, seconds: float) -> None:
        if ok:
            self.commits_ok += 1
        else:
            self.commits_failed += 1
        self.commit_seconds_sum += seconds
        self.commit_seconds_max = max(self.commit_seconds_max, seconds)


class TaskParts:
    """See the module docstring. `converters` = (key, value, header) converter instances."""

    def __init__(self, *, kind: str, chain: Any, key_converter: Any, value_converter: Any,
                 header_converter: Any, tolerate_errors: bool,
                 report: Callable[[str, str | None], None], topic_used: Callable[[str], None],
                 offset_flush_interval: float, offset_flush_timeout: float):
        self.kind = kind
        self.chain = chain
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.header_converter = header_converter
        self.tolerate_errors = tolerate_errors
        self.report = report
        self.topic_used = topic_used
        self.offset_flush_interval = offset_flush_interval
        self.offset_flush_timeout = offset_flush_timeout
        self.metrics = TaskMetrics(kind)
        self.no_transforms = not getattr(chain, "transformations", None)

    def transform(self, record: ConnectRecord) -> Any:
        if self.no_transforms:
            return record
        try:
            return self.chain.apply(record)
        except Exception as e:
            if not self.tolerate_errors:
                raise
            self.metrics.records_skipped += 1
            log.warning("transform failed, record skipped (errors.tolerance=all): %r", e)
            return None

    def header_bytes(self, topic: str, headers: Any) -> list[tuple[str, bytes | None]]:
        """A source record's headers as the header converter writes them."""
        hc = self.header_converter
        return [(k, hc.from_connect_header(topic, k, None, v)) for k, v in headers]

    def sink_record(self, r: ConsumerRecord) -> SinkRecord | None:
        """A consumed record in Connect's model, transformed (None: dropped or skipped)."""
        topic = r.topic
        try:
            key_schema, key = self.key_converter.to_connect_data(topic, r.key)
            value_schema, value = self.value_converter.to_connect_data(topic, r.value)
            headers: tuple[tuple[str, Any], ...] = ()
            if r.headers:
                hc = self.header_converter
                headers = tuple((k, hc.to_connect_header(topic, k, v)[1]) for k, v in r.headers)
        except Exception as e:
            if not self.tolerate_errors:
                raise
            self.metrics.records_skipped += 1
            log.warning("%s-%d@%d: conversion failed, record skipped (errors.tolerance=all): %s",
                        topic, r.partition, r.offset, e)
            return None
        record = SinkRecord(topic, r.partition, key_schema, key, value_schema, value,
                            r.timestamp if r.timestamp >= 0 else None, headers, r.offset,
                            _TIMESTAMP_TYPES.get(r.timestamp_type, "NoTimestampType"))
        out = self.transform(record)
        if out is None:
            self.metrics.records_filtered += 1
        return out


class TaskRunner:
    """What a source and a sink task at work share: identity, state, the plugin caller, the
    runner task and waiting for it to end. Subclasses write `_run()`."""

    kind = ""

    def __init__(self, connector: str, task_id: int, task: Any, config: dict[str, str],
                 parts: TaskParts):
        self.connector = connector
        self.task_id = task_id
        self.task = task
        self.config = config
        self.parts = parts
        self.state = TaskState(parts.report)
        self.caller = PluginCaller(f"{connector}-{task_id}")
        self.metrics = parts.metrics
        self._stopping = asyncio.Event()
        self._topics: set[str] = set()
        self._runner: asyncio.Task[None] | None = None

    def _run(self) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    def _start_runner(self) -> None:
        self._runner = asyncio.get_running_loop().create_task(
            self._run(), name=f"connect-{self.kind}-{self.connector}-{self.task_id}")

    async def _wait_runner(self, timeout: float) -> None:
        """Wait for the loop to end after `_stopping` was set; cancel it after `timeout`."""
        if self._runner is None:
            return
        done, _ = await asyncio.wait([self._runner], timeout=timeout)
        if not done:
            log.warning("task %s-%d did not stop within %.1fs: abandoned",
                        self.connector, self.task_id, timeout)
            self._runner.cancel()
            await asyncio.wait([self._runner])

    @property
    def done(self) -> bool:
        return self._runner is not None and self._runner.done()
