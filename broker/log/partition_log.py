"""A partition's log: offsets, appends, reads, truncation and retention (Kafka's UnifiedLog).

Layering (Kafka's): LogSegment (files of one segment) -> LocalLog (local_log.py: the
sorted segment list, the log end offset, the recovery point, flushes) -> PartitionLog (log
start, high watermark, leader epoch cache, producer state, validation and offset
assignment, the last stable offset, retention decisions) -> LogManager (all partitions of
the broker's log dirs). PartitionLog decides; its LocalLog carries out on the segments.

Invariants kept here:
- offsets are dense and strictly increasing: the leader assigns `log_end_offset`,
  `log_end_offset + 1`, ... by patching each batch's baseOffset in place; a request's
  batches are validated completely, then written with one os.write, or not at all;
- reads never pass `max_offset` (the caller's high watermark or last stable offset) and
  return file regions of whole batches; records are never decoded, decompressed or copied
  into Python (only 61-byte headers are read, with os.pread); appends neither, except on a
  topic whose compression.type names a codec (recompress.py rewrites batches in another
  one) or a compacted one (every record needs a key);
- after a crash at any instant, opening recovers every segment from the recovery point on
  (framing + CRC of each batch) and truncates the torn tail, so the log ends on the last
  whole valid batch and the next append continues densely from there;
- on compacted topics the log cleaner (cleaner.py) may remove records below the active
  segment, leaving gaps in the offsets: offsets are never reassigned, a read from a removed
  offset starts at the next batch that remains, and `replace_segments` swaps cleaned
  segments in so that a crash at any instant leaves the old or the new segments.

An I/O error of the log's files (any OSError of a guarded call: appends, rolls, reads,
flushes, truncation, retention) goes to `on_io_error` (the log manager takes the log dir
offline, Kafka's LogDirFailureChannel) and reaches the caller as KafkaStorageError.

Except a full disk where a write can be undone (errors.LogDirFullError): an append whose
write hit ENOSPC is cut back to the last whole batch before anything else changed (offsets,
producer state, epochs), and the caller gets KAFKA_STORAGE_ERROR with the dir still online;
the same append succeeds once there is space. Files that recovery rebuilds above the
recovery point (offset, time and transaction indexes, the leader epoch checkpoint, producer
snapshots) may lag while the disk is full: a flush writes them before it moves the recovery
point, or fails without moving it.

Hot path: an append or a read costs one call into the LocalLog (and its I/O guard), no
per-record work.

Concurrency: everything runs on the one event-loop thread; every method is synchronous.
Blocking I/O: opening (recovery reads whole unflushed segments), `append_*` (os.write to
the page cache; a roll creates files and fsyncs a producer snapshot), `read` and the offset
lookups (header preads, page cache), `flush` (fsync), truncation / deletion / retention
(ftruncate, rename), leader epoch changes (checkpoint fsync). CPU-bound on the loop: the
rewrite of batches on a topic whose compression.type names a codec (bounded by
recompress.decompression_budget).
"""
from __future__ import annotations

import functools
import logging
import os
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

from clients.protocol.records import read_control_marker
from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_LOG_APPEND,
                                           BatchHeader, patch_base_offset,
                                           patch_partition_leader_epoch, write_crc)

from . import checkpoints
from .config import LogConfig
from .errors import (KafkaStorageError, LogDirFullError, OffsetOutOfRangeError,
                     RecordListTooLargeError, is_disk_full)
from .leader_epoch import LeaderEpochCache
from .local_log import FetchDataInfo, LocalLog, LogOffsetMetadata
from .log_loader import aborted_entry, batch_epochs, rebuild_producer_state
from .producer_state import ORIGIN_CLIENT, CompletedTxn, Markers, ProducerStateManager
from .txn_index import AbortedTxn
from .recompress import recompress_batches, target_codec
from .segment import BatchInfo, LogSegment, SegmentDeleter
from .segment import now_ms as _clock
from .validation import (scan_batches, validate_follower_batches, validate_leader_batches,
                         validate_record_keys)
from .write_behind import WriteBehind

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

_MAX_TIMESTAMP_OFFSET = 35          # maxTimestamp int64 within the batch header
# Free bytes beyond an append's own that a full disk must show before it is tried again
# (a page: for the indexes and checkpoints that follow it).
_FULL_DISK_MARGIN = 4096
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")

log = logging.getLogger(__name__)

_Method = TypeVar("_Method", bound=Callable[..., Any])


def _storage_guarded(method: _Method) -> _Method:
    """Kafka's maybeHandleIOException: an I/O error of the log's disk reports the log as
    failed (`on_io_error`: its owner takes the whole log dir offline) and reaches the caller
    as KafkaStorageError (code 56, retriable: clients look for the partition elsewhere)."""
    @functools.wraps(method)
    def guarded(self: "PartitionLog", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except LogDirFullError as e:
            self._disk_full(e)          # undone: the dir stays online
            raise
        except KafkaStorageError as e:
            self._io_failed(e)
            raise
        except OSError as e:
            self._io_failed(e)
            raise KafkaStorageError(f"{self.name}: {e}") from e
    return cast(_Method, guarded)


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int            # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    record_count: int
    max_timestamp: int = -1
    size: int = 0                   # bytes appended (0 for a duplicate)
    duplicate: bool = False         # a retried idempotent batch: nothing was appended


class PartitionLog:
    """One partition's log in `dir` (named `<topic>-<partition>`), opened and recovered by
    the constructor. `recovery_point`: offsets below it were fsynced and are trusted;
    `clean_shutdown`: the broker closed cleanly, nothing needs recovery;
    `first_dirty_offset`: where the log cleaner stopped (its checkpoint), None if unknown;
    `write_behind`: its broker's (write_behind.py), None for none."""

    def __init__(self, dir: str, config: LogConfig, *, topic: str | None = None,
                 partition: int | None = None, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = False,
                 deleter: SegmentDeleter | None = None, first_dirty_offset: int | None = None,
                 fsync_later: Callable[[str], None] | None = None,
                 write_behind: WriteBehind | None = None):
        self.dir = dir
        if topic is None or partition is None:
            name, _, index = os.path.basename(os.path.normpath(dir)).rpartition("-")
            topic, partition = name, int(index)
        self.topic = topic
        self.partition = partition
        # Also held by the LocalLog; update_config changes both.
        self.config = config
        self.deleter = deleter if deleter is not None else SegmentDeleter()
        self.log_start_offset = log_start_offset
        self._hw = 0
        # The cleaner's progress: offsets below it were compacted (None: nothing known, the
        # cleaner starts at the log start). Lowered by truncation.
        self.first_dirty_offset = first_dirty_offset
        # Called after the recovery point (or the first dirty offset) moved backwards
        # (truncation) so the owner can rewrite its checkpoints before more data lands.
        self.on_recovery_point_lowered: Callable[[PartitionLog], None] | None = None
        # Called with the error when a read or write of this log's files failed (the disk,
        # not the data): its log manager takes the log dir offline (Kafka's
        # LogDirFailureChannel). Called again by nested calls: the handler is idempotent.
        self.on_io_error: Callable[[PartitionLog, BaseException], None] | None = None
        # Called with the new log end after a truncation (a future copy of this log in
        # another dir must drop the same tail: see dir_mover).
        self.on_truncated: Callable[[PartitionLog, int], None] | None = None
        # Since when (monotonic s) writes have met a full disk; None while they succeed.
        self.disk_full_since: float | None = None
        os.makedirs(dir, exist_ok=True)
        self.leader_epochs = LeaderEpochCache(os.path.join(dir, checkpoints.LEADER_EPOCH_FILE),
                                              fsync_later)
        self.producers = ProducerStateManager(dir, fsync_later)
        self.local_log = LocalLog.open(dir, f"{topic}-{partition}", config, self.deleter,
                                       recovery_point=recovery_point, start_offset=log_start_offset,
                                       clean=clean_shutdown, leader_epochs=self.leader_epochs,
                                       write_behind=write_behind)
        self._load(log_start_offset, None if clean_shutdown else recovery_point)

    # =================================================================== loading
    def _load(self, log_start_offset: int, recovered_from: int | None) -> None:
        """The partition's own state over the segments just opened (LocalLog.open)."""
        local = self.local_log
        leo = local.log_end_offset
        self.log_start_offset = max(log_start_offset, local.segments[0].base_offset)
        if self.log_start_offset > leo:
            # Everything left is below a log start that was already exposed: restart empty
            # there rather than hand out offsets consumers have seen.
            self.truncate_fully_and_start_at(self.log_start_offset)
            return
        if self.leader_epochs.lost:
            self.leader_epochs.rebuild(batch_epochs(local.segments))
        self.leader_epochs.truncate_from_end(leo)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        reindex_from = None
        if recovered_from is not None:
            # The segments load_segments recovered (the one holding the recovery point on):
            # their aborted-transaction indexes may lag their data, so they are rebuilt.
            segs = local.segments
            reindex_from = segs[local.floor_index(recovered_from)].base_offset
        self._rebuild_producer_state(reindex_from)
        self._hw = self.log_start_offset
        self.producers.on_high_watermark(self._hw)

    def _rebuild_producer_state(self, reindex_from: int | None = None) -> None:
        rebuild_producer_state(self.producers, self.local_log.segments,
                               self.local_log.log_end_offset, reindex_from)

    # =================================================================== properties
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (the LocalLog's list: read it, never change it)."""
        return self.local_log.segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return self.local_log.size_in_bytes

    @property
    def recovery_point(self) -> int:
        """Offsets below it were fsynced and are trusted after a crash."""
        return self.local_log.recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self.local_log.recovery_point = offset

    @property
    def pending_flush_offset(self) -> int | None:
        """Set by a roll: the older segments below it are not fsynced yet."""
        return self.local_log.pending_flush_offset

    @property
    def last_flush_ms(self) -> int:
        return self.local_log.last_flush_ms

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Clamped to [log start, log end] as Kafka's updateHighWatermark."""
        self._hw = min(max(offset, self.log_start_offset), self.local_log.log_end_offset)
        self.producers.on_high_watermark(self._hw)

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, held back by the first offset of any open transaction."""
        first_unstable = self.producers.first_unstable_offset()
        if first_unstable is None:
            return self._hw
        return min(self._hw, max(first_unstable, self.log_start_offset))

    @property
    def unflushed_messages(self) -> int:
        return self.local_log.log_end_offset - self.local_log.recovery_point

    @property
    def latest_epoch(self) -> int:
        return self.leader_epochs.latest_epoch

    # =================================================================== appends
    @_storage_guarded
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int | None = None, origin: str = ORIGIN_CLIENT) -> AppendInfo:
        """Validate a produce record set by its batch headers, assign offsets from the log
        end, stamp `leader_epoch`, and append it whole (or raise and append nothing).

        `origin` is "client" (full checks) or "coordinator" (the broker's own writes, e.g.
        transaction markers: no sequence checks, control batches allowed). A duplicate of
        one of the producer's last 5 batches appends nothing and returns the original
        offsets with `duplicate=True`.

        A writable memoryview (a produce request's bytes, which the network layer received
        into a buffer of their own) is handed over: its batches are patched in place and it
        must not be used for anything else afterwards. Anything else (bytes, bytearray,
        read-only views) is copied once before patching."""
        if self.disk_full_since is not None:
            self._refuse_while_full(len(records))
        view = _byte_view(records)
        now = _clock() if now_ms is None else now_ms
        cfg = self.config
        batches = scan_batches(view)
        validate_leader_batches(batches, cfg, now, origin)
        if cfg.compact:
            validate_record_keys(view, batches, self.name)
        codec = target_codec(cfg.compression_type)
        if codec is not None and origin == ORIGIN_CLIENT:
            rebuilt = recompress_batches(view, batches, codec, cfg.max_message_bytes)
            if rebuilt is not None:
                # Ours now, patched in place below. Sizes changed: check them again, as
                # Kafka does after recompressing.
                records = view = memoryview(rebuilt)
                batches = scan_batches(view)
                validate_leader_batches(batches, cfg, now, origin)
        if len(view) > cfg.segment_bytes:
            raise RecordListTooLargeError(
                f"record set of {len(view)} bytes exceeds segment.bytes {cfg.segment_bytes}")
        log_append = cfg.log_append_time
        first_offset = offset = self.local_log.log_end_offset
        planned: list[tuple[BatchHeader, int, int]] = []
        markers: Markers | None = None
        max_ts = -1
        count = 0
        for pos, h in batches:
            ts = now if log_append else h.max_timestamp
            planned.append((h, offset, ts))
            if h.is_control:              # only the coordinator's markers get here
                markers = markers or {}
                markers[offset] = read_control_marker(view, pos, h)
            offset += h.last_offset_delta + 1
            count += h.records_count
            max_ts = max(max_ts, ts)
        last_offset = offset - 1
        pending = self.producers.prepare(planned, origin, markers)
        if pending.duplicate is not None:
            d = pending.duplicate
            return AppendInfo(d.first_offset, d.last_offset, d.timestamp if log_append else -1,
                              self.log_start_offset, d.last_offset - d.first_offset + 1,
                              d.timestamp, 0, duplicate=True)
        # Offsets and epochs are patched in place: in the caller's buffer when it was handed
        # over (see the docstring), otherwise in the one copy made here.
        buf: bytearray | memoryview = (view if isinstance(records, memoryview) and not view.readonly
                                       else bytearray(view))
        infos: list[BatchInfo] = []
        for (pos, h), (_, base, ts) in zip(batches, planned):
            patch_base_offset(buf, pos, base)
            patch_partition_leader_epoch(buf, pos, leader_epoch)
            if log_append:
                _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, h.attributes | TIMESTAMP_TYPE_LOG_APPEND)
                _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, now)
                write_crc(buf, pos, h.total_size)
            infos.append((pos, base + h.last_offset_delta, ts, h.total_size))
        self._write(buf, infos, first_offset, last_offset, max_ts, now)
        self.leader_epochs.assign(leader_epoch, first_offset)
        self.producers.commit(pending, self.local_log.log_end_offset)
        if pending.completed:
            self._index_aborted(pending.completed)
        self._maybe_flush()
        return AppendInfo(first_offset, last_offset, now if log_append else -1,
                          self.log_start_offset, count, max_ts, len(buf))

    @_storage_guarded
    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> AppendInfo:
        """Append batches fetched from the leader with the leader's offsets and epochs.
        Framing and CRC are checked; a trailing partial batch is ignored (fetch responses may
        end with one); a first offset below the log end raises UnexpectedAppendOffsetError."""
        if self.disk_full_since is not None:
            self._refuse_while_full(len(records))
        view = _byte_view(records)
        batches = scan_batches(view, allow_partial_tail=True)
        if not batches:
            return AppendInfo(-1, -1, -1, self.log_start_offset, 0)
        validate_follower_batches(batches, self.local_log.log_end_offset)
        end = batches[-1][0] + batches[-1][1].total_size
        if end > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"record set of {end} bytes exceeds segment.bytes {self.config.segment_bytes}")
        first = batches[0][1].base_offset
        last = batches[-1][1].last_offset
        infos = [(pos, h.last_offset, h.max_timestamp, h.total_size) for pos, h in batches]
        max_ts = max(h.max_timestamp for _, h in batches)
        self._write(view[:end], infos, first, last, max_ts, _clock() if now_ms is None else now_ms)
        for pos, h in batches:
            if h.partition_leader_epoch >= 0:
                self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
            if not h.is_control:
                self.producers.apply_batch(h)
                continue
            done = self.producers.apply_batch(h, read_control_marker(view, pos, h))
            if done is not None:
                # Now, before a later marker of this append ends another transaction.
                self._index_aborted([done])
        self._maybe_flush()
        return AppendInfo(first, last, -1, self.log_start_offset,
                          sum(h.records_count for _, h in batches), max_ts, end)

    def _io_failed(self, error: BaseException) -> None:
        if self.on_io_error is not None:
            self.on_io_error(self, error)

    def _disk_full(self, error: BaseException) -> None:
        if self.disk_full_since is None:
            self.disk_full_since = time.monotonic()
            log.warning("%s: writes refused until the disk has space again (KAFKA_STORAGE_ERROR): %s",
                        self.name, error)

    def _refuse_while_full(self, size: int) -> None:
        """While writes meet a full disk, an append is refused before it is even validated
        unless the file system now has room for it: a producer's next in-flight batch must get
        the same retriable KAFKA_STORAGE_ERROR as the one that failed, not an out-of-order
        sequence for the gap that one left (which makes an idempotent producer bump its epoch,
        again and again while the disk stays full)."""
        st = os.statvfs(self.dir)
        free = st.f_bavail * st.f_frsize
        if free < size + _FULL_DISK_MARGIN:
            raise LogDirFullError(f"{self.name}: the disk is still full ({free} bytes free)")

    def _space_again(self) -> None:
        assert self.disk_full_since is not None
        log.info("%s: appending again after %.1f s of a full disk", self.name,
                 time.monotonic() - self.disk_full_since)
        self.disk_full_since = None

    def _index_aborted(self, completed: list[CompletedTxn]) -> None:
        """Index the aborted ones in the active segment, which holds their markers now."""
        seg = self.local_log.segments[-1]
        for done in completed:
            if done.aborted:
                seg.txn_index.append(aborted_entry(self.producers, done))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), for a
        read_committed fetch (Kafka's collectAbortedTransactions): the segments' indexes
        from the one holding `fetch_offset` on, until one says no later one matters."""
        local = self.local_log
        out: list[AbortedTxn] = []
        for seg in local.segments[max(local.floor_index(fetch_offset), 0):]:
            if seg.base_offset >= upper_bound_offset:
                break
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
        return out

    def _write(self, data: bytes | bytearray | memoryview, infos: list[BatchInfo],
               first_offset: int, last_offset: int, max_ts: int, now: int) -> None:
        # Kafka's maybeRoll: the roll is the partition's decision (it snapshots producers).
        cfg = self.config
        local = self.local_log
        if local.segments[-1].should_roll(len(data), max_ts, last_offset, now, cfg.segment_bytes,
                                          cfg.max_segment_ms):
            self.roll(now, first_offset)
        local.append(data, infos, last_offset)
        if self.disk_full_since is not None:
            self._space_again()

    def _maybe_flush(self) -> None:
        local = self.local_log          # unflushed_messages inlined: one call fewer per append
        if local.log_end_offset - local.recovery_point >= self.config.flush_messages:
            try:
                self._flush(None)
            except LogDirFullError as e:
                # The append itself is done; the flush is tried again (flush_due).
                self._disk_full(e)

    @_storage_guarded
    def roll(self, now_ms: int | None = None, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (or at `base_offset` if beyond it)."""
        local = self.local_log
        active = local.segments[-1]
        seg = local.roll(_clock() if now_ms is None else now_ms, base_offset)
        if seg is active:
            return seg
        self.log_start_offset = max(self.log_start_offset, local.segments[0].base_offset)
        # As Kafka: a producer state snapshot at every segment boundary bounds the replay
        # needed after a restart to the active segment.
        self.producers.map_end_offset = seg.base_offset
        try:
            self.producers.take_snapshot()
        except OSError as e:
            if not is_disk_full(e):
                raise
            # An optimisation: without it a restart replays from an older snapshot.
            log.warning("%s: no producer snapshot at %d, the disk is full: %s", self.name,
                        seg.base_offset, e)
        return seg

    # =================================================================== reads
    @_storage_guarded
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchDataInfo:
        """File regions of whole batches starting with the batch that contains `offset`.

        At most `max_bytes` (the first batch whole even if larger when `min_one_batch`, as
        KIP-74), only batches whose last offset is below `max_offset` (default: the log end;
        pass the high watermark or last stable offset for consumers). Continues into the
        next segments while the budget lasts. O(log n): segment bisect, index bisect and a
        header scan of about index.interval.bytes. Raises OffsetOutOfRangeError below the
        log start or above the log end."""
        local = self.local_log
        leo = local.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"{self.name}: offset {offset} is outside [{self.log_start_offset}, {leo}]")
        info = local.read(offset, max_bytes, leo if max_offset is None else min(max_offset, leo),
                          min_one_batch)
        info.high_watermark = self._hw
        info.log_start_offset = self.log_start_offset
        info.log_end_offset = leo
        info.last_stable_offset = self.last_stable_offset
        return info

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and byte position of the batch containing `offset` (O(log n))."""
        return self.local_log.offset_metadata(offset)

    # =================================================================== offsets by time / epoch
    def latest_offset(self) -> int:
        """The log end offset (ListOffsets -1 answers the high watermark or LSO instead:
        the caller's choice, by isolation level)."""
        return self.local_log.log_end_offset

    def earliest_offset(self) -> int:
        return self.log_start_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) for ListOffsets by time: the first record with
        timestamp >= `timestamp`, as Kafka answers (LocalLog.offset_for_timestamp: one batch
        is decoded). Not used on the produce or fetch path."""
        return self.local_log.offset_for_timestamp(timestamp, self.log_start_offset)

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets -3 (KIP-734): the first record carrying the largest timestamp."""
        return self.local_log.max_timestamp_offset(self.log_start_offset)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets in one call: the special timestamps -1 (log end), -2 / -4 (log
        start), -3 (max timestamp), -5 (no tiered storage: offset -1), else by time."""
        if timestamp == LATEST_TIMESTAMP:
            return self.local_log.log_end_offset, -1, self.leader_epochs.latest_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            earliest = self.leader_epochs.earliest_entry()
            epoch = earliest[0] if earliest and earliest[1] <= self.log_start_offset else -1
            return self.log_start_offset, -1, epoch
        if timestamp == MAX_TIMESTAMP:
            return self.max_timestamp_offset()
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return -1, -1, -1
        return self.offset_for_timestamp(timestamp)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) if unknown."""
        return self.leader_epochs.end_offset_for(leader_epoch, self.local_log.log_end_offset)

    # =================================================================== durability
    @_storage_guarded
    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets [recovery point, up_to) (default: the log end)
        and move the recovery point there."""
        self._flush(up_to)

    def _flush(self, up_to: int | None) -> None:
        # What a full disk left unwritten goes first: past the recovery point, recovery no
        # longer rebuilds it.
        try:
            self.leader_epochs.write_pending()
        except OSError as e:
            if is_disk_full(e):
                raise LogDirFullError(f"{self.name}: leader epoch checkpoint not written: {e}") from e
            raise
        self.local_log.flush(up_to)

    @_storage_guarded
    def take_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end. Snapshots at segment boundaries are
        kept (a truncation falls back to them); older ones inside the active segment go."""
        ps = self.producers
        leo = self.local_log.log_end_offset
        ps.map_end_offset = leo
        ps.take_snapshot()
        ps.delete_snapshots_between(self.local_log.segments[-1].base_offset, leo)

    def close(self) -> None:
        """Flush, snapshot the producer state, close the files (clean shutdown)."""
        self.flush()
        self.take_producer_snapshot()
        self.local_log.close()

    def close_handlers(self) -> None:
        """Close the file descriptors without writing anything (log dir failure)."""
        self.local_log.close_handlers()

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.local_log.update_config(config)

    # =================================================================== truncation
    @_storage_guarded
    def truncate_to(self, offset: int) -> bool:
        """Drop every batch holding an offset >= `offset` (a batch containing `offset` goes
        whole, so the log end becomes its base offset). False if nothing was beyond."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        local = self.local_log
        if offset >= local.log_end_offset:
            return False
        if local.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        leo = local.truncate_to(offset)
        self.log_start_offset = min(self.log_start_offset, leo)
        self._hw = min(self._hw, leo)
        self.leader_epochs.truncate_from_end(leo)
        self.producers.delete_snapshots_after(leo)
        self._rebuild_producer_state()
        dirty_lowered = self._lower_first_dirty_offset(leo)
        if not self._lower_recovery_point(leo) and dirty_lowered:
            self._notify_checkpoint()
        if self.on_truncated is not None:
            self.on_truncated(self, leo)
        return True

    @_storage_guarded
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset`."""
        self.local_log.truncate_fully_and_start_at(offset)
        self._hw = self.log_start_offset = offset
        self.leader_epochs.clear()
        self.producers.clear()
        self.producers.delete_snapshots_after(-1)
        self.producers.map_end_offset = offset
        self._lower_first_dirty_offset(offset)
        self._lower_recovery_point(offset, force=True)
        if self.on_truncated is not None:
            self.on_truncated(self, offset)

    def _lower_recovery_point(self, offset: int, force: bool = False) -> bool:
        if force or offset < self.local_log.recovery_point:
            self.local_log.recovery_point = offset
            self._notify_checkpoint()
            return True
        return False

    def _lower_first_dirty_offset(self, offset: int) -> bool:
        if self.first_dirty_offset is not None and self.first_dirty_offset > offset:
            self.first_dirty_offset = offset
            return True
        return False

    def _notify_checkpoint(self) -> None:
        if self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered(self)

    # =================================================================== compaction
    @_storage_guarded
    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap `new`, a cleaned segment written with the `.cleaned` suffix and fsynced, in
        for `old`, contiguous non-active segments of this log starting at new's base offset
        (LocalLog.replace_segments: crash-safe, old segments deleted after
        file.delete.delay.ms)."""
        self.local_log.replace_segments(new, old)

    # =================================================================== deletion / retention
    @_storage_guarded
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` (-1: the high watermark), delete the
        segments wholly below it; returns the new log start. Beyond the high watermark:
        OffsetOutOfRangeError."""
        if offset == -1:
            offset = self._hw
        if offset < 0 or offset > self._hw:
            raise OffsetOutOfRangeError(
                f"{self.name}: cannot delete records before {offset}, the high watermark is "
                f"{self._hw}")
        if offset > self.log_start_offset:
            self._move_log_start(offset)
            # Never the active segment, as Kafka: the log start moves inside it instead.
            self._delete_oldest(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset)
        return self.log_start_offset

    @_storage_guarded
    def delete_retention_segments(self, now_ms: int) -> int:
        """Delete the oldest segments that are wholly below the log start, older than
        retention.ms (largest timestamp) or beyond retention.bytes; returns how many.

        As Kafka (UnifiedLog.deletableSegments): the active segment goes too once it breaches
        retention and everything in it is replicated, so an idle topic does not keep expired
        records; a new empty segment is rolled at the log end first (the log start moves
        there, offsets continue). Never a segment holding offsets at or above the high
        watermark, and only with cleanup.policy containing "delete" for the time and size
        limits."""
        deleted = self._delete_oldest(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset)
        cfg = self.config
        if not cfg.delete_enabled:
            return deleted
        if cfg.retention_bytes >= 0:
            excess = self.size_in_bytes - cfg.retention_bytes
            if excess > 0:
                budget = [excess]

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    if budget[0] - seg.size < 0:
                        return False
                    budget[0] -= seg.size
                    return True
                deleted += self._delete_oldest(over_size)
        if cfg.retention_ms >= 0:
            deleted += self._delete_oldest(
                lambda seg, nxt: now_ms - seg.largest_timestamp > cfg.retention_ms)
        return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        """Delete the oldest segments while `predicate(segment, next segment or None)` holds
        and the high watermark is past the segment's last offset; an empty active segment
        stays. When all of them go, a new active segment is rolled at the log end first: a
        log always has one."""
        n = 0
        local = self.local_log
        segs = local.segments
        while n < len(segs):
            nxt = segs[n + 1] if n + 1 < len(segs) else None
            upper = local.log_end_offset if nxt is None else nxt.base_offset
            if self._hw < upper or (nxt is None and segs[n].size == 0) or \
                    not predicate(segs[n], nxt):
                break
            n += 1
        if n == 0:
            return 0
        if n == len(segs):
            self.roll()
        local.remove_oldest(n)
        first = local.segments[0].base_offset
        self._move_log_start(first)
        self.producers.delete_snapshots_before(first)
        return n

    def _move_log_start(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self._hw = max(self._hw, offset)
        self.leader_epochs.truncate_from_start(offset)
        # Producer state stays (KIP-360): a producer whose batches all went is still known,
        # so its retries are still duplicates and older epochs still fenced, until
        # producer.id.expiration.ms.
        if self.local_log.recovery_point < offset:
            self.local_log.recovery_point = offset

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"hw={self._hw}, segments={len(self.local_log.segments)})")


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = records if isinstance(records, memoryview) else memoryview(records)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


