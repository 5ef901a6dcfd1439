"""LogManager: every partition log in the broker's log dirs.

Each log dir holds `<topic>-<partition>/` directories plus Kafka's per-dir files:
`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint` (with the cleaner enabled) and, while the broker is cleanly
shut down, `.kafka_cleanshutdown`. At construction every partition dir is
opened; without the clean-shutdown marker each log recovers its segments from its
recovery point on (see PartitionLog). New partitions go to the dir holding the fewest.
Deleted partitions are renamed `<topic>-<partition>.<uuid>-delete` and removed, like
deleted segments, `file.delete.delay.ms` later (`tick`), so in-flight sendfiles finish.

The broker calls, on the event-loop thread: `flush_due` and `tick` about every second,
`run_retention` every log.retention.check.interval.ms, `checkpoint_recovery_points_async`
every log.flush.offset.checkpoint.interval.ms (its files are written and fsynced on a
thread of their own), `run_cleaner` repeatedly (again at once
while it returns 1, after log.cleaner.backoff.ms when it returns 0), `close` at
shutdown. All methods but `checkpoint_recovery_points_async` are synchronous and do
blocking file I/O (construction may take
long after a crash: the caller can run it in a thread before the event loop serves
requests).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import uuid
from typing import Mapping

from . import checkpoints
from .cleaner import DEFAULT_DEDUPE_BUFFER_SIZE, LogCleaner
from .config import LogConfig
from .errors import CheckpointError, KafkaStorageError
from .partition_log import PartitionLog
from .segment import SegmentDeleter
from .segment import now_ms as _clock

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    topic, sep, index = name.rpartition("-")
    if not sep or not topic or not index.isdigit() or "." in index:
        return None
    return topic, int(index)


class LogManager:
    """`cleaner_enabled` is log.cleaner.enable; `cleaner_dedupe_buffer_size`
    log.cleaner.dedupe.buffer.size (bounds how much dirty log one cleaning maps)."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig,
                 topic_configs: Mapping[str, LogConfig] | None = None, *,
                 producer_id_expiration_ms: int = 86400000, cleaner_enabled: bool = True,
                 cleaner_dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE):
        self._checkpoint_writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._fsync_failures: list[str] = []     # files the background fsync could not sync
        self._closed = False
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.cleaner_enabled = cleaner_enabled
        self.cleaner = LogCleaner(cleaner_dedupe_buffer_size)
        self.deleter = SegmentDeleter()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._dirs_to_delete: list[tuple[int, str, PartitionLog | None]] = []
        configs = dict(topic_configs or {})
        for d in self.log_dirs:
            self._load_dir(d, configs)

    # ----------------------------------------------------------------- loading
    def _load_dir(self, log_dir: str, configs: Mapping[str, LogConfig]) -> None:
        os.makedirs(log_dir, exist_ok=True)
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery = self._read_checkpoint(log_dir, checkpoints.RECOVERY_POINT_FILE)
        starts = self._read_checkpoint(log_dir, checkpoints.LOG_START_OFFSET_FILE)
        cleaned = self._read_checkpoint(log_dir, checkpoints.CLEANER_OFFSET_FILE)
        high_watermarks = self._read_checkpoint(log_dir, checkpoints.REPLICATION_OFFSET_FILE)
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._dirs_to_delete.append((0, path, None))
                continue
            tp = parse_log_dir_name(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise KafkaStorageError(f"{tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}")
            plog = PartitionLog(path, configs.get(tp[0], self.default_config), topic=tp[0],
                                partition=tp[1], recovery_point=recovery.get(tp, 0),
                                log_start_offset=starts.get(tp, 0), clean_shutdown=clean,
                                deleter=self.deleter, first_dirty_offset=cleaned.get(tp),
                                fsync_later=self._fsync_later)
            # The setter clamps to the recovered log, which may have lost its tail.
            plog.high_watermark = high_watermarks.get(tp, 0)
            self._attach(plog, log_dir)
        if clean:
            # From now on a crash must be recovered from.
            os.unlink(marker)
            checkpoints.fsync_dir(log_dir)

    @staticmethod
    def _read_checkpoint(log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return checkpoints.read_offsets(os.path.join(log_dir, name))
        except (CheckpointError, OSError) as e:
            log.warning("ignoring %s in %s (every log there recovers fully): %s", name, log_dir, e)
            return {}

    def _attach(self, plog: PartitionLog, log_dir: str) -> None:
        tp = (plog.topic, plog.partition)
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        plog.on_recovery_point_lowered = lambda _log, d=log_dir: self._checkpoint_dir(d)

    # ----------------------------------------------------------------- partitions
    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create_log(self, topic: str, partition: int,
                   config: LogConfig | None = None) -> PartitionLog:
        """The partition's log, created empty in the least loaded log dir if missing."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        path = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            plog = PartitionLog(path, config or self.default_config, topic=topic,
                                partition=partition, deleter=self.deleter,
                                fsync_later=self._fsync_later)
            checkpoints.fsync_dir(log_dir)
        except OSError as e:
            raise KafkaStorageError(f"cannot create log {topic}-{partition}: {e}") from e
        self._attach(plog, log_dir)
        return plog

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Remove the partition's log: renamed now, files removed after file.delete.delay.ms."""
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        if plog is None:
            return False
        self.cleaner.forget(plog)
        log_dir = self._dir_of.pop(tp)
        target = os.path.join(log_dir, f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(plog.dir, target)
        plog.dir = target
        checkpoints.fsync_dir(log_dir)
        due = (_clock() if now_ms is None else now_ms) + plog.config.file_delete_delay_ms
        self._dirs_to_delete.append((due, target, plog))
        self._checkpoint_dir(log_dir)
        return True

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    # ----------------------------------------------------------------- periodic work
    def checkpoint_recovery_points(self) -> None:
        """Write every log dir's recovery point and log start offset checkpoints (blocking)."""
        if self._after_close("checkpoint"):
            return
        self._checkpoints_thread().submit(_write_checkpoints, self._snapshot_all()).result()

    async def checkpoint_recovery_points_async(self) -> None:
        """The periodic checkpoint: the offsets are taken on the loop, the files written and
        fsynced on the checkpoint thread. An fsync waits for the file system's journal,
        which under heavy writes took 0.4-0.75 s and held every request of the broker."""
        if self._after_close("periodic checkpoint"):
            return
        snapshot = self._snapshot_all()
        await asyncio.wrap_future(self._checkpoints_thread().submit(_write_checkpoints, snapshot))

    def _after_close(self, what: str) -> bool:
        # After close() the files and the clean-shutdown marker are final.
        if self._closed:
            log.warning("%s after the log manager closed: skipped", what)
        return self._closed

    def _fsync_later(self, path: str) -> None:
        """fsync a file just written (a producer snapshot) and its directory on the
        checkpoint thread, off the event loop: with many producers that fsync took seconds
        at a segment roll. After close(), at once."""
        if self._closed:
            self._record_fsync(_fsync_file(path), path)
            return
        self._checkpoints_thread().submit(
            lambda: self._record_fsync(_fsync_file(path), path))

    def _record_fsync(self, ok: bool, path: str) -> None:
        if not ok:
            self._fsync_failures.append(path)

    def _checkpoints_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        # One thread: writes of the same files happen one at a time, in the order their
        # offsets were taken, so a later snapshot is never overwritten by an earlier one.
        if self._checkpoint_writer is None:
            self._checkpoint_writer = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="strom-checkpoints")
        return self._checkpoint_writer

    def _snapshot_all(self) -> list[tuple[str, dict[TopicPartition, int]]]:
        return [entry for d in self.log_dirs for entry in self._snapshot_dir(d)]

    def _snapshot_dir(self, log_dir: str) -> list[tuple[str, dict[TopicPartition, int]]]:
        logs = [(tp, lg) for tp, lg in self._logs.items() if self._dir_of[tp] == log_dir]
        out = [(os.path.join(log_dir, checkpoints.RECOVERY_POINT_FILE),
                {tp: lg.recovery_point for tp, lg in logs}),
               (os.path.join(log_dir, checkpoints.LOG_START_OFFSET_FILE),
                {tp: lg.log_start_offset for tp, lg in logs}),
               (os.path.join(log_dir, checkpoints.REPLICATION_OFFSET_FILE),
                {tp: lg.high_watermark for tp, lg in logs})]
        if self.cleaner_enabled:
            out.append((os.path.join(log_dir, checkpoints.CLEANER_OFFSET_FILE),
                        {tp: lg.first_dirty_offset for tp, lg in logs
                         if lg.first_dirty_offset is not None and lg.config.compact}))
        return out

    def _checkpoint_dir(self, log_dir: str) -> None:
        """Blocking, after any checkpoint write in flight (truncation, deletion, cleaning
        must be on disk before they return)."""
        if self._after_close("checkpoint"):
            return
        self._checkpoints_thread().submit(_write_checkpoints, self._snapshot_dir(log_dir)).result()

    def flush_due(self, now_ms: int) -> int:
        """Flush the logs whose flush.ms elapsed with unflushed data, and the segments that
        a roll left behind (Kafka flushes those right after the roll). Returns how many."""
        flushed = 0
        for plog in self._logs.values():
            if plog.pending_flush_offset is not None:
                plog.flush(plog.pending_flush_offset)
                flushed += 1
            if plog.unflushed_messages > 0 and now_ms - plog.last_flush_ms >= plog.config.flush_ms:
                plog.flush()
                flushed += 1
        return flushed

    def run_retention(self, now_ms: int) -> int:
        """Apply retention (and producer id expiration) to every log; segments deleted."""
        deleted = 0
        for plog in list(self._logs.values()):
            try:
                deleted += plog.delete_retention_segments(now_ms)
            except Exception:             # one log's failure must not stop the others'
                log.exception("retention failed for %s", plog.name)
            plog.producers.remove_expired(now_ms, self.producer_id_expiration_ms)
        return deleted

    def run_cleaner(self, now_ms: int) -> int:
        """Compact the one compacted log that most needs it (Kafka's choice: the highest
        dirty ratio above min.cleanable.dirty.ratio, or any whose max.compaction.lag.ms
        passed) and checkpoint its new first dirty offset. Returns 1 if a log was cleaned
        (call again soon), 0 if none needed it (back off for log.cleaner.backoff.ms).
        Blocking: reads the log below its active segment (the dirty part at most about
        log.cleaner.dedupe.buffer.size's worth of keys) and writes the cleaned segments.
        A log whose cleaning fails is logged and skipped until restart, as Kafka does."""
        if not self.cleaner_enabled:
            return 0
        for plog in self._logs.values():
            if not plog.config.compact:
                plog.first_dirty_offset = None
        cleaned = self.cleaner.clean_filthiest(self._logs.values(), now_ms)
        if cleaned is None:
            return 0
        try:
            self._checkpoint_dir(self._dir_of[(cleaned.topic, cleaned.partition)])
        except OSError:
            log.exception("cannot write the cleaner checkpoint of %s", cleaned.name)
        return 1

    def tick(self, now_ms: int) -> int:
        """Delete the segments and partition dirs whose delete delay has passed."""
        done = self.deleter.run_due(now_ms)
        due = [(t, p, lg) for t, p, lg in self._dirs_to_delete if t <= now_ms]
        if due:
            self._dirs_to_delete = [x for x in self._dirs_to_delete if x[0] > now_ms]
            for _, path, plog in due:
                if plog is not None:
                    plog.close_handlers()
                shutil.rmtree(path, ignore_errors=True)
                done += 1
        return done

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write the checkpoints and the
        clean-shutdown marker (so the next start skips recovery)."""
        for plog in self._logs.values():
            plog.close()
        try:
            self.checkpoint_recovery_points()
        finally:
            self._closed = True
            if self._checkpoint_writer is not None:
                self._checkpoint_writer.shutdown(wait=True)
                self._checkpoint_writer = None
        self.deleter.run_all()
        for _, path, deleted in self._dirs_to_delete:
            if deleted is not None:
                deleted.close_handlers()
            shutil.rmtree(path, ignore_errors=True)
        self._dirs_to_delete = []
        if self._fsync_failures:
            # Not clean: the next start must not trust what may not be on disk.
            log.error("not marking a clean shutdown: %d fsync(s) failed, first %s",
                      len(self._fsync_failures), self._fsync_failures[0])
            return
        for d in self.log_dirs:
            checkpoints.atomic_write(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"")


def _fsync_file(path: str) -> bool:
    """fsync `path` and its directory; gone already (deleted meanwhile) is fine. False
    (and logged) if the disk refused."""
    try:
        checkpoints.fsync_file(path)
    except OSError as e:
        log.error("fsync of %s failed: %s", path, e)
        return False
    try:
        checkpoints.fsync_dir(os.path.dirname(path))
    except FileNotFoundError:
        pass                              # the log was deleted meanwhile
    except OSError as e:
        log.error("fsync of the directory of %s failed: %s", path, e)
        return False
    return True


def _write_checkpoints(snapshot: list[tuple[str, dict[TopicPartition, int]]]) -> None:
    """The checkpoint thread's work: each file replaced atomically and fsynced."""
    for path, offsets in snapshot:
        checkpoints.write_offsets(path, offsets)
