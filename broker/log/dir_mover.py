"""Moving replicas between this broker's log dirs (KIP-113): Kafka's ReplicaAlterLogDirsThread.

A move starts when AlterReplicaLogDirs makes a future log in the target dir
(LogManager.create_future_log). The mover copies the current log's batches into it from its
log end on, in chunks, as a follower copies its leader (offsets, epochs and producer state
come with the batches); appends to the current log go on meanwhile. When the future log's
end reaches the current one's, both checks and the swap (LogManager.replace_current_with_future)
run in one synchronous step on the event loop, so no append can land in between: every
acknowledged record is in the log that is current afterwards. A truncation of the current
log truncates the future one with it (LogManager), so the copy is always a prefix of its
source.

`max_bytes_per_second()` is replica.alter.log.dirs.io.max.bytes.per.second (None or <= 0:
unlimited); asked before each chunk, so a changed limit applies at once.

Event-loop thread: the copy reads (pread) and appends (write) one chunk of at most
`chunk_bytes` at a time, blocking, then yields to the loop (or sleeps for the rate limit).
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from .errors import KafkaStorageError, UnexpectedAppendOffsetError
from .log_manager import LogManager, TopicPartition
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

DEFAULT_CHUNK_BYTES = 1 << 20
IDLE_PAUSE_S = 0.05             # no move could go on (nothing readable yet): wait a little


class LogDirMover:
    def __init__(self, logs: LogManager, max_bytes_per_second: Callable[[], int | None] = lambda: None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        self.logs = logs
        self.max_bytes_per_second = max_bytes_per_second
        self.chunk_bytes = chunk_bytes
        self.moves_completed = 0
        self._work = asyncio.Event()
        self._task: asyncio.Task | None = None
        logs.on_future_created = self.wake

    def start(self) -> None:
        """Run the moves (those found at start included) until stop()."""
        if self._task is None:
            self._work.set()
            self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._work.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            futures = self.logs.future_logs()
            if not futures:
                self._work.clear()
                await self._work.wait()
                continue
            progressed = False
            for tp, future in futures.items():
                moved, copied = self._step(tp, future)
                progressed = progressed or moved
                rate = self.max_bytes_per_second()
                await asyncio.sleep(copied / rate if rate and rate > 0 else 0)
            if not progressed:
                await asyncio.sleep(IDLE_PAUSE_S)

    def _step(self, tp: TopicPartition, future: PartitionLog) -> tuple[bool, int]:
        """Copy one chunk into `future`, or swap it in once caught up: (whether anything
        happened, bytes copied)."""
        topic, partition = tp
        current = self.logs.get_log(topic, partition)
        if current is None or self.logs.future_log(topic, partition) is not future:
            return False, 0             # deleted or failed meanwhile (the manager dropped it)
        try:
            if future.log_end_offset < current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            elif future.log_end_offset > current.log_end_offset:
                future.truncate_to(current.log_end_offset)      # never expected: see module doc
            copied = 0
            if future.log_end_offset < current.log_end_offset:
                copied = self._copy_chunk(current, future)
            if future.log_end_offset == current.log_end_offset:
                # Caught up, and nothing can be appended before the swap: it is synchronous.
                self.logs.replace_current_with_future(topic, partition)
                self.moves_completed += 1
                return True, copied
            return copied > 0, copied
        except KafkaStorageError as e:
            # A dir went offline (the manager dropped what was there), or the swap failed
            # and the move was cancelled.
            log.error("%s: the move between log dirs stopped: %s", current.name, e)
        except OSError as e:
            # Reading the current log's files (the copy's own writes are guarded).
            source = self.logs.log_dir_of(topic, partition)
            if source is not None:
                self.logs.mark_dir_offline(source, e)
        except Exception:                   # noqa: BLE001 - one move must not stop the others
            log.exception("%s: cancelling the move between log dirs", current.name)
            self.logs.abort_future_log(topic, partition)
        return False, 0

    def _copy_chunk(self, current: PartitionLog, future: PartitionLog) -> int:
        # A follower append may not exceed a segment (Kafka's check too).
        info = current.read(future.log_end_offset, min(self.chunk_bytes, future.config.segment_bytes))
        data = b"".join(_read_region(r.fileno, r.position, r.size) for r in info.regions)
        if not data:
            return 0
        try:
            future.append_as_follower(data)
        except UnexpectedAppendOffsetError as e:
            if future.log_end_offset != future.log_start_offset:
                raise
            # An empty copy starting inside a batch (the log start was moved into it): start
            # at that batch instead, as Kafka's follower does.
            future.truncate_fully_and_start_at(e.first_offset)
            future.append_as_follower(data)
        return len(data)


def _read_region(fd: int, position: int, size: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) != size:
        raise OSError(f"short read of {len(data)} bytes of {size} at {position}")
    return data
