"""One source task at work: poll() -> transforms -> converters -> the producer, and the
task's offsets committed once what they cover is acknowledged.

At least once (the default): every offset.flush.interval.ms (and when the task stops) the
offsets of everything polled so far are snapshotted, the producer is flushed, and only if
every record was acknowledged are the offsets written (Kafka's WorkerSourceTask before
KIP-618). A crash between a write and the next commit re-reads from the last commit:
duplicates, never loss.

Exactly once (KIP-618, `exactly.once.source.support=enabled`): the task's producer is
transactional (`<group.id>-<connector>-<task>`); each poll() batch is one transaction that
holds its records and the offset records for the offsets topic, so a batch and its offsets
become visible together or not at all (transaction.boundary=poll). Starting the producer
(InitProducerId) fences a zombie instance of the same task and aborts its open transaction.
"""
from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any

from clients.aio import AsyncProducer

from ..api import ConnectError, OffsetStorageReader, SourceRecord, SourceTask, SourceTaskContext
from .offset_store import OffsetStore, offset_key, offset_value
from .task_parts import TaskParts, TaskRunner

__all__ = ["WorkerSourceTask"]

log = logging.getLogger("strom.connect.source")


class WorkerSourceTask(TaskRunner):
    """Runs `task` until stop(); `state` is RUNNING, PAUSED, FAILED or UNASSIGNED."""

    kind = "source"

    def __init__(self, connector: str, task_id: int, task: SourceTask, config: dict[str, str],
                 parts: TaskParts, producer: AsyncProducer, offsets: OffsetStore,
                 exactly_once: bool, offsets_topic: str | None):
        super().__init__(connector, task_id, task, config, parts)
        self.task: SourceTask = task
        self.producer = producer
        self.offsets = offsets
        self.exactly_once = exactly_once
        self.offsets_topic = offsets_topic
        self._running = asyncio.Event()       # cleared while paused
        self._running.set()
        self._pending: dict[Any, tuple[Any, Any]] = {}     # partition key -> (partition, offset)
        self._unacked: list[asyncio.Future] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self, paused: bool) -> None:
        if paused:
            self._running.clear()
        self._start_runner()

    def pause(self) -> None:
        self._running.clear()
        self.state.set("PAUSED")

    def resume(self) -> None:
        self._running.set()
        self.state.set("RUNNING")

    async def stop(self, timeout: float) -> None:
        """Stop polling, commit what is acknowledged, stop the task (waiting at most
        `timeout` seconds for a blocked poll()), close the producer."""
        self._stopping.set()
        self._running.set()
        stop_call = self.task.stop
        try:
            if asyncio.iscoroutinefunction(stop_call):
                await asyncio.wait_for(stop_call(), timeout)
            else:   # from another thread, so it can interrupt a blocked poll() (as Kafka)
                await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, stop_call), timeout)
        except Exception as e:
            log.warning("task %s-%d: stop() failed: %r", self.connector, self.task_id, e)
        await self._wait_runner(timeout)
        self.caller.close()
        try:
            await self.producer.close(timeout=timeout)
        except Exception as e:
            log.info("task %s-%d: closing the producer: %r", self.connector, self.task_id, e)

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        try:
            await self.producer.start()
            if self.exactly_once:
                await self.producer.init_transactions()     # fences a zombie of this task
                await self.offsets.read_to_end()            # its aborted batch is not read
            connector, store = self.connector, self.offsets
            reader = OffsetStorageReader(lambda p: store.get(connector, p))
            self.task.initialize(SourceTaskContext(self.config, reader))
            await self.caller.call(self.task.start, dict(self.config))
            if not self._stopping.is_set():
                self.state.set("RUNNING" if self._running.is_set() else "PAUSED")
            await self._loop()
            if not self.exactly_once:
                await self._commit()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            log.error("task %s-%d failed: %s", self.connector, self.task_id, e, exc_info=True)
            self.state.set("FAILED", "".join(traceback.format_exception(e)))
            return

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.parts.offset_flush_interval
        next_commit = loop.time() + interval
        while not self._stopping.is_set():
            if not self._running.is_set():
                await self._running.wait()
                continue
            records = await self.caller.call(self.task.poll)
            if self._stopping.is_set() and not records:
                break
            if records:
                self.metrics.polled(len(records))
                if self.exactly_once:
                    await self._send_transaction(records)
                else:
                    await self._send(records)
            if not self.exactly_once and loop.time() >= next_commit:
                await self._commit()
                next_commit = loop.time() + interval

    async def _send(self, records: list[SourceRecord]) -> None:
        """Transform, convert and send the records (one send_batch per run of records for
        the same topic, in order); remember each source partition's latest offset. One
        tight loop: this is the worker's per-record path."""
        parts = self.parts
        pending = self._pending
        connector = self.connector
        transform = None if parts.no_transforms else parts.transform
        key_to_bytes = parts.key_converter.from_connect_data
        value_to_bytes = parts.value_converter.from_connect_data
        headers_to_bytes = parts.header_bytes
        # The source partition seen last (most tasks reuse one dict), its key in the
        # offsets store and its latest offset: written to `pending` when it changes.
        last_partition: Any = None
        last_key: Any = None
        last_offset: Any = None
        run: list[tuple[Any, Any, Any, Any, Any]] = []
        add = run.append
        run_topic: str | None = None
        sent = 0
        for record in records:
            out = record if transform is None else transform(record)
            if out is not None:
                topic = out.topic
                if topic != run_topic:
                    if run:
                        await self._send_run(run_topic, run)   # type: ignore[arg-type]
                        run = []
                        add = run.append
                    run_topic = topic
                    if topic not in self._topics:
                        self._topics.add(topic)
                        parts.topic_used(topic)
                key = out.key
                add((None if key is None and out.key_schema is None
                     else key_to_bytes(topic, out.key_schema, key),
                     value_to_bytes(topic, out.value_schema, out.value),
                     headers_to_bytes(topic, out.headers) if out.headers else None,
                     out.timestamp, out.kafka_partition))
                sent += 1
            sp = record.source_partition
            if sp is not None and record.source_offset is not None:
                if sp is not last_partition:
                    if last_partition is not None:
                        pending[last_key] = (last_partition, last_offset)
                    last_partition, last_key = sp, offset_key(connector, sp)
                last_offset = record.source_offset
        if last_partition is not None:
            pending[last_key] = (last_partition, last_offset)
        if run:
            await self._send_run(run_topic, run)   # type: ignore[arg-type]
        self.metrics.written(sent, len(records) - sent)

    async def _send_run(self, topic: str, run: list[tuple[Any, Any, Any, Any, Any]]) -> None:
        self._unacked.append(await self.producer.send_batch(topic, run))

    async def _commit(self) -> None:
        """Write the offsets of everything sent so far, once all of it is acknowledged."""
        if not self._pending and not self._unacked:
            return
        pending, self._pending = self._pending, {}
        unacked, self._unacked = self._unacked, []
        started = time.monotonic()
        try:
            await self.producer.flush(self.parts.offset_flush_timeout)
            if not all(f.done() for f in unacked):
                raise TimeoutError("a batch of records is still in flight")
        except Exception as e:
            # Not everything is acknowledged yet: keep the offsets for the next commit.
            log.warning("task %s-%d: offset commit skipped, records unacknowledged: %s",
                        self.connector, self.task_id, e)
            pending.update(self._pending)
            self._pending = pending
            self._unacked = unacked + self._unacked
            self.metrics.commit(False, time.monotonic() - started)
            return
        for fut in unacked:
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                raise ConnectError(f"Unrecoverable exception from producer send callback: "
                                   f"{fut.exception()}")
        await self.offsets.write(self.connector, list(pending.values()))
        await self.caller.call(self.task.commit)
        self.metrics.commit(True, time.monotonic() - started)

    async def _send_transaction(self, records: list[SourceRecord]) -> None:
        """One poll() batch and its offsets in one transaction (transaction.boundary=poll)."""
        started = time.monotonic()
        producer = self.producer
        await producer.begin_transaction()
        try:
            await self._send(records)
            pending, self._pending = self._pending, {}
            self._unacked = []
            assert self.offsets_topic is not None
            for key, (partition, offset) in pending.items():
                await producer.send(self.offsets_topic, offset_value(offset), key)
            await producer.commit_transaction()
        except BaseException:
            try:
                await producer.abort_transaction()
            except Exception as e:
                log.info("task %s-%d: abort failed: %r", self.connector, self.task_id, e)
            raise
        self.metrics.commit(True, time.monotonic() - started)
        await self.caller.call(self.task.commit)
