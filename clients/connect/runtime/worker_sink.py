"""One sink task at work: a consumer in group `connect-<connector>` feeds put(); offsets
are committed every offset.flush.interval.ms after pre_commit() (by default flush()) says
what the external system holds, and before partitions are revoked (Kafka's
WorkerSinkTask). A crash re-delivers what came after the last commit: at least once.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import traceback
from operator import attrgetter
from typing import Any

from clients.aio import AsyncConsumer
from clients.types import OffsetAndMetadata, TopicPartition

from ..api import RetriableError, SinkTask, SinkTaskContext
from .task_parts import TaskParts, TaskRunner

__all__ = ["WorkerSinkTask"]

log = logging.getLogger("strom.connect.sink")

# Fields of a ConsumerRecord (a tuple), read in C over a whole batch.
_TOPIC = attrgetter("topic")
_TOPIC_PARTITION = attrgetter("topic", "partition")
_OFFSET = attrgetter("offset")


class WorkerSinkTask(TaskRunner):
    kind = "sink"

    def __init__(self, connector: str, task_id: int, task: SinkTask, config: dict[str, str],
                 parts: TaskParts, consumer: AsyncConsumer, topics: list[str], regex: str | None):
        super().__init__(connector, task_id, task, config, parts)
        self.task: SinkTask = task
        self.consumer = consumer
        self.topics = topics
        self.regex = regex
        self.context = SinkTaskContext(config)
        self._paused = False
        self._current: dict[TopicPartition, int] = {}     # next offset to commit, per partition
        self._committed: dict[TopicPartition, int] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self, paused: bool) -> None:
        self._paused = paused
        self._start_runner()

    def pause(self) -> None:
        self._paused = True
        self.state.set("PAUSED")

    def resume(self) -> None:
        self._paused = False
        self.state.set("RUNNING")

    async def stop(self, timeout: float) -> None:
        self._stopping.set()
        await self._wait_runner(timeout)
        try:    # leaving the group closes the task's partitions (close()) first, as Kafka's
            await self.consumer.close(autocommit=False)
        except Exception as e:
            log.info("task %s-%d: closing the consumer: %r", self.connector, self.task_id, e)
        try:
            await self.caller.call(self.task.stop)
        except Exception as e:
            log.warning("task %s-%d: stop() failed: %r", self.connector, self.task_id, e)
        self.caller.close()

    # ------------------------------------------------------------------ rebalance listener

    async def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        if not tps:
            return
        self.context._assignment |= set(tps)
        for tp in tps:
            self._current.pop(tp, None)
        await self.caller.call(self.task.open, sorted(tps))
        await self._apply_rewinds()

    async def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        if not tps:
            return
        await self._commit(only=set(tps))
        await self.caller.call(self.task.close, sorted(tps))
        self.context._assignment -= set(tps)
        for tp in tps:
            self._current.pop(tp, None)
            self._committed.pop(tp, None)

    async def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        if tps:
            await self.caller.call(self.task.close, sorted(tps))
        self.context._assignment -= set(tps)
        for tp in tps:
            self._current.pop(tp, None)

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        try:
            self.task.initialize(self.context)
            await self.caller.call(self.task.start, dict(self.config))
            if self.regex:
                await self.consumer.subscribe(pattern=re.compile(self.regex), listener=self)
            else:
                await self.consumer.subscribe(self.topics, listener=self)
            self.state.set("PAUSED" if self._paused else "RUNNING")
            await self._loop()
            await self._commit()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            log.error("task %s-%d failed: %s", self.connector, self.task_id, e, exc_info=True)
            self.state.set("FAILED", "".join(traceback.format_exception(e)))

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.parts.offset_flush_interval
        next_commit = loop.time() + interval
        paused_now: set[TopicPartition] = set()
        while not self._stopping.is_set():
            # Pausing keeps polling (the group membership stays) with every partition paused.
            want = set(self.context._assignment) if self._paused else set(self.context.paused)
            if want != paused_now:
                await self.consumer.resume(*(paused_now - want))
                await self.consumer.pause(*(want & await self.consumer.assignment()))
                paused_now = want
            batch = await self.consumer.poll(0.2)
            if batch:
                await self._deliver(batch)
            if self.context.commit_requested or loop.time() >= next_commit:
                self.context.commit_requested = False
                await self._commit()
                next_commit = loop.time() + interval

    async def _deliver(self, batch: list[Any]) -> None:
        parts = self.parts
        self.metrics.polled(len(batch))
        # Per batch, not per record: the topics seen and (below) the offsets to commit.
        # poll() returns a partition's records in a row, in offset order, so a batch whose
        # first and last records are of one partition holds no other (the common case).
        first, last = batch[0], batch[-1]
        one = first.topic == last.topic and first.partition == last.partition
        for topic in ({first.topic} if one else set(map(_TOPIC, batch))) - self._topics:
            self._topics.add(topic)
            parts.topic_used(topic)
        sink_record = parts.sink_record
        records = [sr for sr in map(sink_record, batch) if sr is not None]
        while True:
            try:
                await self.caller.call(self.task.put, records)
                break
            except RetriableError as e:
                wait = (self.context.requested_timeout_ms or 1000) / 1000.0
                log.info("task %s-%d: put() asked to retry in %.1fs: %s",
                         self.connector, self.task_id, wait, e)
                await asyncio.sleep(wait)
                if self._stopping.is_set():
                    return      # not acknowledged: the next owner reads it again
        self.metrics.put_batches += 1
        self.metrics.written(len(records), 0)
        current = self._current
        if one:
            current[TopicPartition(last.topic, last.partition)] = last.offset + 1
        else:
            for (topic, partition), offset in dict(zip(map(_TOPIC_PARTITION, batch),
                                                       map(_OFFSET, batch))).items():
                current[TopicPartition(topic, partition)] = offset + 1
        await self._apply_rewinds()

    async def _apply_rewinds(self) -> None:
        """SinkTaskContext.offset(): the task keeps its own offsets and asks to rewind."""
        ctx = self.context
        if not ctx.requested_offsets:
            return
        requested, ctx.requested_offsets = ctx.requested_offsets, {}
        owned = await self.consumer.assignment()
        for tp, offset in requested.items():
            if tp in owned:
                await self.consumer.seek(tp, offset)
                self._current[tp] = offset

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        current = {tp: o for tp, o in self._current.items() if only is None or tp in only}
        if not current:
            return
        started = time.monotonic()
        try:
            if type(self.task).pre_commit is SinkTask.pre_commit:
                await self.caller.call(self.task.flush, dict(current))
                offsets = current
            else:
                offsets = await self.caller.call(self.task.pre_commit, dict(current)) or {}
            todo = {tp: OffsetAndMetadata(o) for tp, o in offsets.items()
                    if self._committed.get(tp) != o}
            if todo:
                await self.consumer.commit(todo)
                for tp, o in todo.items():
                    self._committed[tp] = o.offset
            self.metrics.commit(True, time.monotonic() - started)
        except Exception as e:
            self.metrics.commit(False, time.monotonic() - started)
            log.warning("task %s-%d: offset commit failed: %r", self.connector, self.task_id, e)
