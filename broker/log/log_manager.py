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

Several log dirs (JBOD, KIP-112/KIP-113): a new partition goes to the online dir holding
the fewest partitions (or the dir AlterReplicaLogDirs preferred for it), an existing one is
found wherever it is at start. Each dir has its own checkpoints, clean-shutdown marker and
meta.properties. An I/O error in a dir (a read, write, flush, roll or checkpoint failing:
Kafka's IOException) takes the whole dir offline: its logs leave the manager and
`on_dir_failure` tells the replica manager which partitions went with it; the other dirs go
on. A full disk does not, where the write can be undone or waited for (an append, a flush's
index writes, the periodic checkpoints: see partition_log and errors.LogDirFullError): the
dir stays online, refuses appends, serves reads and takes writes again once there is space.
A dir unusable at start is offline from the start; all of them: the broker cannot start.
A replica moving to another dir has a "future" log `<topic>-<partition>.<uuid>-future` there
(created by `create_future_log`, filled by dir_mover.LogDirMover, swapped in by
`replace_current_with_future`); one found at start resumes its move, or becomes the current
log if the swap was cut short by a crash.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping

from . import checkpoints
from .cleaner import DEFAULT_DEDUPE_BUFFER_SIZE, LogCleaner
from .config import LogConfig
from .errors import (CheckpointError, KafkaStorageError, LogDirFullError, LogDirNotFoundError,
                     is_disk_full)
from .partition_log import PartitionLog
from .producer_state import snapshot_file_name
from .segment import SegmentDeleter
from .segment import now_ms as _clock
from .write_behind import WriteBehind

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
_FUTURE_DIR_NAME = re.compile(r"^(.+)-(\d+)\.[0-9a-f]{32}-future$")

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    topic, sep, index = name.rpartition("-")
    if not sep or not topic or not index.isdigit() or "." in index:
        return None
    return topic, int(index)


def parse_future_dir_name(name: str) -> TopicPartition | None:
    """`<topic>-<partition>.<uuid>-future` -> (topic, partition); None for anything else."""
    m = _FUTURE_DIR_NAME.match(name)
    return (m.group(1), int(m.group(2))) if m else None


@dataclass(frozen=True, slots=True)
class ReplicaDirInfo:
    """One replica in a log dir, as DescribeLogDirs reports it."""

    topic: str
    partition: int
    size: int
    offset_lag: int         # a future replica: how far behind the current one; else 0
    is_future: bool


@dataclass(slots=True)
class LogDirInfo:
    """One log dir: `error` None when online, else why it went offline."""

    path: str
    error: str | None
    total_bytes: int = -1
    usable_bytes: int = -1
    replicas: list[ReplicaDirInfo] = field(default_factory=list)


class LogManager:
    """`cleaner_enabled` is log.cleaner.enable; `cleaner_dedupe_buffer_size`
    log.cleaner.dedupe.buffer.size (bounds how much dirty log one cleaning maps);
    `writeback_interval_bytes` log.writeback.interval.bytes (write_behind.py; 0: off)."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig,
                 topic_configs: Mapping[str, LogConfig] | None = None, *,
                 producer_id_expiration_ms: int = 86400000, cleaner_enabled: bool = True,
                 cleaner_dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
                 writeback_interval_bytes: int = 0):
        self._checkpoint_writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._fsync_failures: list[str] = []     # files the background fsync could not sync
        self._closing = False
        self._failed_while_closing: set[str] = set()
        self._closed = False
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.cleaner_enabled = cleaner_enabled
        self.cleaner = LogCleaner(cleaner_dedupe_buffer_size)
        self.deleter = SegmentDeleter()
        self.write_behind = WriteBehind.for_this_os(writeback_interval_bytes)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._dirs_to_delete: list[tuple[int, str, PartitionLog | None]] = []
        self._offline: dict[str, str] = {}              # failed dir -> why
        self._dirs_full: set[str] = set()              # dirs whose last periodic checkpoint met ENOSPC
        self._futures: dict[TopicPartition, PartitionLog] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self._preferred_dir: dict[TopicPartition, str] = {}
        # (failed dir, partitions whose current log was there): set by the replica manager.
        self.on_dir_failure: Callable[[str, list[TopicPartition]], None] | None = None
        # (partition, its new current log) after a future log was swapped in.
        self.on_log_replaced: Callable[[TopicPartition, PartitionLog], None] | None = None
        # A future log was created: the mover has work (set by dir_mover.LogDirMover).
        self.on_future_created: Callable[[], None] | None = None
        configs = dict(topic_configs or {})
        for d in self.log_dirs:
            try:
                self._load_dir(d, configs)
            except (OSError, KafkaStorageError) as e:
                # Kafka: a dir that cannot be loaded is offline from the start.
                self._forget_dir(d)
                self._offline[d] = f"cannot be loaded: {e}"
                log.error("log dir %s is offline: it cannot be loaded: %s", d, e)
        if not self.online_dirs:
            raise KafkaStorageError(f"no log dir is usable: " + "; ".join(
                f"{d} {why}" for d, why in self._offline.items()))
        self._adopt_loaded_futures()

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
            future_tp = parse_future_dir_name(name)
            if future_tp is not None:
                if future_tp in self._futures:
                    raise KafkaStorageError(f"{name}: a second future log of {future_tp[0]}-{future_tp[1]}")
                self._futures[future_tp] = self._open_log(
                    path, future_tp, configs.get(future_tp[0], self.default_config),
                    recovery.get(future_tp, 0), starts.get(future_tp, 0), clean, None)
                self._future_dir_of[future_tp] = log_dir
                continue
            tp = parse_log_dir_name(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise KafkaStorageError(f"{tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}")
            plog = self._open_log(path, tp, configs.get(tp[0], self.default_config),
                                  recovery.get(tp, 0), starts.get(tp, 0), clean, cleaned.get(tp))
            # The setter clamps to the recovered log, which may have lost its tail.
            plog.high_watermark = high_watermarks.get(tp, 0)
            self._attach(plog, log_dir)
        if clean:
            # From now on a crash must be recovered from.
            os.unlink(marker)
            checkpoints.fsync_dir(log_dir)

    def _open_log(self, path: str, tp: TopicPartition, config: LogConfig, recovery_point: int,
                  log_start_offset: int, clean: bool, first_dirty: int | None) -> PartitionLog:
        return PartitionLog(path, config, topic=tp[0], partition=tp[1],
                            recovery_point=recovery_point, log_start_offset=log_start_offset,
                            clean_shutdown=clean, deleter=self.deleter,
                            first_dirty_offset=first_dirty, fsync_later=self._fsync_later,
                            write_behind=self.write_behind)

    def _adopt_loaded_futures(self) -> None:
        """Future logs found at start: with their current log they go on moving; without
        one, a crash came between the two renames of a swap (the current log was already
        renamed for deletion, the future one fully copied): the future log becomes current."""
        for tp, future in list(self._futures.items()):
            log_dir = self._future_dir_of[tp]
            if log_dir in self._offline:
                self._futures.pop(tp)
                self._future_dir_of.pop(tp)
            elif tp in self._logs:
                future.on_io_error = lambda _log, e, d=log_dir: self.mark_dir_offline(d, e)
            else:
                log.info("%s: completing the move to %s cut short by a restart", future.name, log_dir)
                self._futures.pop(tp)
                self._future_dir_of.pop(tp)
                target = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
                future.close()
                os.replace(future.dir, target)
                checkpoints.fsync_dir(log_dir)
                plog = self._open_log(target, tp, future.config, future.log_end_offset,
                                      future.log_start_offset, True, None)
                plog.high_watermark = future.high_watermark
                self._attach(plog, log_dir)

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
        plog.on_io_error = lambda _log, e, d=log_dir: self.mark_dir_offline(d, e)
        plog.on_truncated = self._current_truncated

    def _current_truncated(self, current: PartitionLog, log_end: int) -> None:
        """The future copy drops the tail the current log dropped, so it copies the new one
        (the two never diverge: a copy is always a prefix of its source)."""
        future = self._futures.get((current.topic, current.partition))
        if future is None:
            return
        try:
            if log_end < future.log_start_offset or current.log_end_offset == current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            elif log_end < future.log_end_offset:
                future.truncate_to(log_end)
        except KafkaStorageError:
            pass                # the future's dir went offline, and the move with it

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
        log_dir = self._dir_for_new_log((topic, partition))
        path = os.path.join(log_dir, f"{topic}-{partition}")
        try:
            plog = PartitionLog(path, config or self.default_config, topic=topic,
                                partition=partition, deleter=self.deleter,
                                fsync_later=self._fsync_later,
                                write_behind=self.write_behind)
            checkpoints.fsync_dir(log_dir)
        except OSError as e:
            self.mark_dir_offline(log_dir, e)
            raise KafkaStorageError(f"cannot create log {topic}-{partition} in {log_dir}: {e}") from e
        self._attach(plog, log_dir)
        return plog

    def _dir_for_new_log(self, tp: TopicPartition) -> str:
        """The dir AlterReplicaLogDirs preferred for the partition, else Kafka's choice:
        the online dir holding the fewest partitions (current and future logs)."""
        preferred = self._preferred_dir.pop(tp, None)
        if preferred is not None and preferred not in self._offline:
            return preferred
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"cannot create log {tp[0]}-{tp[1]}: every log dir is offline")
        counts = {d: 0 for d in online}
        for d in (*self._dir_of.values(), *self._future_dir_of.values()):
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Remove the partition's log: renamed now, files removed after file.delete.delay.ms."""
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        if plog is None:
            return False
        self.cleaner.forget(plog)
        log_dir = self._dir_of.pop(tp)
        self.abort_future_log(topic, partition)
        self._preferred_dir.pop(tp, None)
        try:
            self._rename_for_deletion(plog, log_dir, now_ms)
        except OSError as e:
            self.mark_dir_offline(log_dir, e)
            raise KafkaStorageError(f"cannot delete log {topic}-{partition}: {e}") from e
        self._checkpoint_dir(log_dir)
        return True

    def _rename_for_deletion(self, plog: PartitionLog, log_dir: str, now_ms: int | None = None) -> None:
        """`<topic>-<partition>.<uuid>-delete`, removed after file.delete.delay.ms (its open
        files may still be read by sendfiles in flight)."""
        # A log that left the manager reports nothing: a late use of it (its files are closed
        # after the delay) must not take the dir offline.
        plog.on_io_error = None
        plog.on_truncated = None
        target = os.path.join(log_dir, f"{plog.topic}-{plog.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(plog.dir, target)
        plog.dir = target
        checkpoints.fsync_dir(log_dir)
        due = (_clock() if now_ms is None else now_ms) + plog.config.file_delete_delay_ms
        self._dirs_to_delete.append((due, target, plog))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    # ----------------------------------------------------------------- log dirs
    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self._offline]

    @property
    def offline_dirs(self) -> dict[str, str]:
        """Failed dir -> why."""
        return dict(self._offline)

    def mark_dir_offline(self, log_dir: str, cause: BaseException | str) -> None:
        """Take `log_dir` offline after an I/O error there (Kafka's handleLogDirFailure):
        its logs and future logs leave the manager (their files are closed, nothing more is
        written there), moves out of it and into it stop, and `on_dir_failure` hears which
        partitions went. Idempotent; an unknown dir is ignored."""
        if log_dir not in self.log_dirs or log_dir in self._offline:
            return
        if self._closing:
            # Shutting down: files get closed, and a late write failing need not be a disk
            # fault; the dir is only denied its clean-shutdown marker.
            log.warning("I/O error in %s while closing: %s", log_dir, cause)
            self._failed_while_closing.add(log_dir)
            return
        self._offline[log_dir] = str(cause)
        log.error("log dir %s is offline after an I/O error: %s", log_dir, cause)
        lost = self._forget_dir(log_dir)
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, lost)

    def _forget_dir(self, log_dir: str) -> list[TopicPartition]:
        """Drop every log of `log_dir` (and the future logs of those, wherever they are);
        the partitions whose current log was there."""
        lost = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
        for tp in lost:
            plog = self._logs.pop(tp)
            self._dir_of.pop(tp)
            self.cleaner.forget(plog)
            _close_quietly(plog)
        for tp in [tp for tp, d in self._future_dir_of.items() if d == log_dir or tp in lost]:
            future = self._futures.pop(tp)
            future_dir = self._future_dir_of.pop(tp)
            if future_dir == log_dir:
                _close_quietly(future)
            else:
                # Its source is gone: what it holds is an incomplete copy.
                self._discard_future(future, future_dir)
        self._dirs_to_delete = [x for x in self._dirs_to_delete
                                if os.path.dirname(x[1]) != log_dir]
        for tp, d in list(self._preferred_dir.items()):
            if d == log_dir:
                del self._preferred_dir[tp]
        return lost

    def dir_usage(self, log_dir: str) -> tuple[int, int]:
        """(total bytes, usable bytes) of the file system holding `log_dir`; (-1, -1) if
        it cannot be asked."""
        try:
            st = os.statvfs(log_dir)
        except OSError:
            return -1, -1
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    def describe_dirs(self, wanted: Callable[[str, int], bool] | None = None) -> list[LogDirInfo]:
        """Every log dir with its replicas (current and future) that `wanted(topic,
        partition)` selects (default: all), as DescribeLogDirs reports them."""
        out = []
        for d in self.log_dirs:
            if d in self._offline:
                out.append(LogDirInfo(d, self._offline[d]))
                continue
            total, usable = self.dir_usage(d)
            info = LogDirInfo(d, None, total, usable)
            for (topic, index), plog in sorted(self._logs.items()):
                if self._dir_of[(topic, index)] == d and (wanted is None or wanted(topic, index)):
                    info.replicas.append(ReplicaDirInfo(topic, index, plog.size_in_bytes, 0, False))
            for (topic, index), future in sorted(self._futures.items()):
                if self._future_dir_of[(topic, index)] == d and (wanted is None or wanted(topic, index)):
                    current = self._logs.get((topic, index))
                    lag = max(current.log_end_offset - future.log_end_offset, 0) if current else 0
                    info.replicas.append(ReplicaDirInfo(topic, index, future.size_in_bytes, lag, True))
            out.append(info)
        return out

    def write_meta_properties(self, broker_id: int, cluster_id: str | None) -> None:
        """Kafka's meta.properties in every online dir: which broker (and cluster) the dir
        belongs to. Rewritten only when it changed; a dir that cannot take it goes offline."""
        text = f"version=0\nbroker.id={broker_id}\n" + (f"cluster.id={cluster_id}\n" if cluster_id else "")
        for d in self.online_dirs:
            path = os.path.join(d, META_PROPERTIES_FILE)
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() == text:
                        continue
            except FileNotFoundError:
                pass
            except OSError as e:
                self.mark_dir_offline(d, e)
                continue
            try:
                checkpoints.atomic_write(path, text.encode())
            except OSError as e:
                self.mark_dir_offline(d, e)

    # ----------------------------------------------------------------- moves between dirs
    def set_preferred_dir(self, topic: str, partition: int, log_dir: str) -> str:
        """Remember where the partition's log should live (AlterReplicaLogDirs): a log
        created later goes there. Returns the dir as an absolute path; LogDirNotFoundError
        for a dir that is not one of ours, KafkaStorageError for an offline one."""
        target = self._known_dir(log_dir)
        self._preferred_dir[(topic, partition)] = target
        return target

    def _known_dir(self, log_dir: str) -> str:
        target = os.path.abspath(log_dir)
        if target not in self.log_dirs:
            raise LogDirNotFoundError(f"log dir {log_dir} is not one of this broker's log.dirs")
        if target in self._offline:
            raise KafkaStorageError(f"log dir {target} is offline")
        return target

    def future_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def future_logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._futures)

    def create_future_log(self, topic: str, partition: int, log_dir: str) -> PartitionLog | None:
        """Start moving the partition's current log to `log_dir`: an empty future log
        there, at the current log's start offset, that dir_mover fills and swaps in. None if
        the log is already there (its move, if any, is cancelled). A move to another dir
        in progress is cancelled and restarted. KafkaStorageError / LogDirNotFoundError as
        set_preferred_dir; KafkaStorageError if the partition has no current log here."""
        tp = (topic, partition)
        target = self._known_dir(log_dir)
        current = self._logs.get(tp)
        if current is None:
            raise KafkaStorageError(f"{topic}-{partition} has no log on this broker")
        existing = self._future_dir_of.get(tp)
        if existing == target:
            return self._futures[tp]
        if existing is not None:
            self.abort_future_log(topic, partition)
        if self._dir_of[tp] == target:
            return None
        path = os.path.join(target, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
        try:
            future = PartitionLog(path, current.config, topic=topic, partition=partition,
                                  log_start_offset=current.log_start_offset, deleter=self.deleter,
                                  fsync_later=self._fsync_later,
                                  write_behind=self.write_behind)
            checkpoints.fsync_dir(target)
        except OSError as e:
            self.mark_dir_offline(target, e)
            raise KafkaStorageError(f"cannot create the future log of {topic}-{partition}: {e}") from e
        future.on_io_error = lambda _log, e, d=target: self.mark_dir_offline(d, e)
        self._futures[tp] = future
        self._future_dir_of[tp] = target
        log.info("%s: moving from %s to %s", current.name, self._dir_of[tp], target)
        if self.on_future_created is not None:
            self.on_future_created()
        return future

    def abort_future_log(self, topic: str, partition: int) -> bool:
        """Cancel the partition's move: its future log is deleted. False if none."""
        tp = (topic, partition)
        future = self._futures.pop(tp, None)
        if future is None:
            return False
        self._discard_future(future, self._future_dir_of.pop(tp))
        return True

    def _discard_future(self, future: PartitionLog, log_dir: str) -> None:
        try:
            self._rename_for_deletion(future, log_dir)
        except OSError as e:
            self.mark_dir_offline(log_dir, e)

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """Swap the future log in for the current one, which it must equal in log end
        (the caller, on the event loop, checked that with no append in between). The
        future log takes the current one's high watermark, log start, leader epochs and
        producer state, is flushed and renamed `<topic>-<partition>`, the current one is
        renamed for deletion; a crash between the two renames leaves only the future log,
        which the next start makes current. Returns the new current log (also handed to
        `on_log_replaced`)."""
        tp = (topic, partition)
        current, future = self._logs[tp], self._futures[tp]
        if current.log_end_offset != future.log_end_offset:
            raise ValueError(f"{current.name}: the future log ends at {future.log_end_offset}, "
                             f"the current one at {current.log_end_offset}")
        source_dir, target_dir = self._dir_of[tp], self._future_dir_of[tp]
        high_watermark = current.high_watermark
        try:
            future.high_watermark = high_watermark
            if current.log_start_offset > future.log_start_offset:
                future.delete_records_before(min(current.log_start_offset, high_watermark))
            current.take_producer_snapshot()
            future.close()
            # The current log's producer state and epochs (entries no batch carries, e.g. an
            # epoch begun with no append yet, or producers whose batches retention removed).
            for name in (checkpoints.LEADER_EPOCH_FILE, snapshot_file_name(current.log_end_offset)):
                source = os.path.join(current.dir, name)
                if os.path.exists(source):
                    with open(source, "rb") as f:
                        checkpoints.atomic_write(os.path.join(future.dir, name), f.read())
        except (OSError, KafkaStorageError) as e:
            # A failed log (guarded calls) took its dir offline already; a failed copy did not.
            if isinstance(e, OSError):
                self.mark_dir_offline(target_dir, e)
            self.abort_future_log(topic, partition)
            raise KafkaStorageError(f"{current.name}: cannot finish the move: {e}") from e
        self._futures.pop(tp)
        self._future_dir_of.pop(tp)
        self._logs.pop(tp)
        self._dir_of.pop(tp)
        self.cleaner.forget(current)
        try:
            self._rename_for_deletion(current, source_dir)
        except OSError as e:
            self.mark_dir_offline(source_dir, e)
        final = os.path.join(target_dir, f"{topic}-{partition}")
        try:
            os.replace(future.dir, final)
            checkpoints.fsync_dir(target_dir)
            plog = self._open_log(final, tp, current.config, future.log_end_offset,
                                  future.log_start_offset, True, None)
        except OSError as e:
            self.mark_dir_offline(target_dir, e)
            raise KafkaStorageError(f"{current.name}: cannot open the moved log: {e}") from e
        plog.high_watermark = high_watermark
        self._attach(plog, target_dir)
        self._checkpoint_dir(target_dir)
        log.info("%s: moved from %s to %s", plog.name, source_dir, target_dir)
        if self.on_log_replaced is not None:
            self.on_log_replaced(tp, plog)
        return plog

    # ----------------------------------------------------------------- periodic work
    def checkpoint_recovery_points(self) -> None:
        """Write every log dir's recovery point and log start offset checkpoints (blocking)."""
        if self._after_close("checkpoint"):
            return
        failed = self._checkpoints_thread().submit(_write_checkpoints, self._snapshot_all()).result()
        self._dirs_failed(failed)

    async def checkpoint_recovery_points_async(self) -> None:
        """The periodic checkpoint: the offsets are taken on the loop, the files written and
        fsynced on the checkpoint thread. An fsync waits for the file system's journal,
        which under heavy writes took 0.4-0.75 s and held every request of the broker."""
        if self._after_close("periodic checkpoint"):
            return
        snapshot = self._snapshot_all()
        failed = await asyncio.wrap_future(self._checkpoints_thread().submit(_write_checkpoints, snapshot))
        self._dirs_failed(failed, full_is_fine=True)

    def _dirs_failed(self, failed: list[tuple[str, OSError]], full_is_fine: bool = False) -> None:
        """Take the dirs of checkpoints that could not be written offline. `full_is_fine`:
        the periodic checkpoint of offsets that only move up (truncation writes its own at
        once): a full disk keeps the older file, still true, and the next period tries again."""
        full = set()
        for path, error in failed:
            log_dir = os.path.dirname(path)
            if full_is_fine and is_disk_full(error):
                full.add(log_dir)
            else:
                self.mark_dir_offline(log_dir, error)
        if not full_is_fine:
            return
        for log_dir in sorted(full - self._dirs_full):
            log.warning("log dir %s is full: its checkpoints keep older offsets until there is "
                        "space again", log_dir)
        for log_dir in sorted(self._dirs_full - full):
            log.info("log dir %s: checkpoints written again", log_dir)
        self._dirs_full = full

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
        return [entry for d in self.online_dirs for entry in self._snapshot_dir(d)]

    def _snapshot_dir(self, log_dir: str) -> list[tuple[str, dict[TopicPartition, int]]]:
        # A dir holds a partition's current log or its future log, never both (Kafka keeps
        # both in the dir's checkpoints too).
        logs = [(tp, lg) for tp, lg in self._logs.items() if self._dir_of[tp] == log_dir]
        logs += [(tp, lg) for tp, lg in self._futures.items() if self._future_dir_of[tp] == log_dir]
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
        if self._after_close("checkpoint") or log_dir in self._offline:
            return
        failed = self._checkpoints_thread().submit(_write_checkpoints, self._snapshot_dir(log_dir)).result()
        self._dirs_failed(failed)

    def flush_due(self, now_ms: int) -> int:
        """Flush the logs whose flush.ms elapsed with unflushed data, and the segments that
        a roll left behind (Kafka flushes those right after the roll). Returns how many."""
        flushed = 0
        for plog in [*self._logs.values(), *self._futures.values()]:
            try:
                if plog.pending_flush_offset is not None:
                    plog.flush(plog.pending_flush_offset)
                    flushed += 1
                if plog.unflushed_messages > 0 and now_ms - plog.last_flush_ms >= plog.config.flush_ms:
                    plog.flush()
                    flushed += 1
            except KafkaStorageError:
                pass            # its dir went offline (on_io_error); the other dirs go on
        return flushed

    def run_retention(self, now_ms: int) -> int:
        """Apply retention (and producer id expiration) to every log; segments deleted."""
        deleted = 0
        for plog in list(self._logs.values()):
            if self._logs.get((plog.topic, plog.partition)) is not plog:
                continue                  # its dir went offline during this pass
            try:
                deleted += plog.delete_retention_segments(now_ms)
            except KafkaStorageError:
                continue                  # its dir went offline (on_io_error)
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
        clean-shutdown marker (so the next start skips recovery) in every online dir."""
        self._closing = True
        dirs = {id(plog): self._dir_of[tp] for tp, plog in self._logs.items()}
        dirs.update({id(plog): self._future_dir_of[tp] for tp, plog in self._futures.items()})
        for plog in [*self._logs.values(), *self._futures.values()]:
            try:
                plog.close()
            except LogDirFullError as e:
                # Not flushed: the next start must recover this dir, not trust it.
                log.error("cannot close %s cleanly, the disk is full: %s", plog.name, e)
                self._failed_while_closing.add(dirs[id(plog)])
            except KafkaStorageError:
                pass            # its dir went offline: no marker is written there
        try:
            self.checkpoint_recovery_points()
        finally:
            self._closed = True
            if self._checkpoint_writer is not None:
                self._checkpoint_writer.shutdown(wait=True)
                self._checkpoint_writer = None
        self.write_behind.close()
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
        for d in self.online_dirs:
            if d in self._failed_while_closing:
                continue
            try:
                checkpoints.atomic_write(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"")
            except OSError as e:
                log.error("cannot mark the clean shutdown of %s: %s", d, e)


def _close_quietly(plog: PartitionLog) -> None:
    """Close a failed dir's log files; errors are expected there and change nothing."""
    try:
        plog.close_handlers()
    except OSError:
        pass


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


def _write_checkpoints(snapshot: list[tuple[str, dict[TopicPartition, int]]]) -> list[tuple[str, OSError]]:
    """The checkpoint thread's work: each file replaced atomically and fsynced. Returns the
    files that could not be written (their dirs are failing), with why."""
    failed = []
    for path, offsets in snapshot:
        try:
            checkpoints.write_offsets(path, offsets)
        except OSError as e:
            failed.append((path, e))
    return failed
