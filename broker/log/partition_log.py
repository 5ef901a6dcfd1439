"""A partition's log: its segments, offsets, appends, reads, truncation and retention.

Layering (Kafka's): LogSegment (files of one segment) -> the sorted segment list kept
here -> PartitionLog (log start, log end, high watermark, recovery point, leader epoch
cache, producer state) -> LogManager (all partitions of the broker's log dirs).

Invariants kept here (DESIGN.md 1, 2, 6):
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

Concurrency: everything runs on the one event-loop thread; every method is synchronous.
Blocking I/O: opening (recovery reads whole unflushed segments), `append_*` (os.write to
the page cache; a roll creates files and fsyncs a producer snapshot), `read` and the offset
lookups (header preads, page cache), `flush` (fsync), truncation / deletion / retention
(ftruncate, rename), leader epoch changes (checkpoint fsync). CPU-bound on the loop: the
rewrite of batches on a topic whose compression.type names a codec (bounded by
recompress.decompression_budget).
"""
from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Callable

from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_LOG_APPEND,
                                           BatchHeader, patch_base_offset,
                                           patch_partition_leader_epoch, write_crc)

from . import checkpoints, record_lookup
from .config import LogConfig
from .errors import KafkaStorageError, OffsetOutOfRangeError, RecordListTooLargeError
from .leader_epoch import LeaderEpochCache
from .producer_state import ORIGIN_CLIENT, ProducerStateManager
from .recompress import recompress_batches, target_codec
from .log_loader import load_segments, rebuild_producer_state
from .segment import SWAP_SUFFIX, BatchInfo, FileRegion, LogSegment, SegmentDeleter
from .segment import now_ms as _clock
from .validation import (scan_batches, validate_follower_batches, validate_leader_batches,
                         validate_record_keys)

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

_MAX_TIMESTAMP_OFFSET = 35          # maxTimestamp int64 within the batch header
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")

log = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """Where an offset lives: the segment and the byte position of its batch."""

    offset: int
    segment_base_offset: int
    position: int


@dataclass(slots=True)
class FetchDataInfo:
    offset_metadata: LogOffsetMetadata
    regions: list[FileRegion] = field(default_factory=list)
    high_watermark: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    last_stable_offset: int = 0

    @property
    def size(self) -> int:
        return sum(r.size for r in self.regions)


class PartitionLog:
    """One partition's log in `dir` (named `<topic>-<partition>`), opened and recovered by
    the constructor. `recovery_point`: offsets below it were fsynced and are trusted;
    `clean_shutdown`: the broker closed cleanly, nothing needs recovery;
    `first_dirty_offset`: where the log cleaner stopped (its checkpoint), None if unknown."""

    def __init__(self, dir: str, config: LogConfig, *, topic: str | None = None,
                 partition: int | None = None, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = False,
                 deleter: SegmentDeleter | None = None, first_dirty_offset: int | None = None,
                 fsync_later: Callable[[str], None] | None = None):
        self.dir = dir
        if topic is None or partition is None:
            name, _, index = os.path.basename(os.path.normpath(dir)).rpartition("-")
            topic, partition = name, int(index)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.deleter = deleter if deleter is not None else SegmentDeleter()
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self._leo = 0
        self._hw = 0
        self.last_flush_ms = _clock()
        self.pending_flush_offset: int | None = None   # a roll left older segments unflushed
        # The cleaner's progress: offsets below it were compacted (None: nothing known, the
        # cleaner starts at the log start). Lowered by truncation.
        self.first_dirty_offset = first_dirty_offset
        self._dir_dirty = False
        # Called after the recovery point (or the first dirty offset) moved backwards
        # (truncation) so the owner can rewrite its checkpoints before more data lands.
        self.on_recovery_point_lowered: Callable[[PartitionLog], None] | None = None
        os.makedirs(dir, exist_ok=True)
        self.leader_epochs = LeaderEpochCache(os.path.join(dir, checkpoints.LEADER_EPOCH_FILE))
        self.producers = ProducerStateManager(dir, fsync_later)
        self._load(recovery_point, log_start_offset, clean_shutdown)

    # =================================================================== loading
    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        cfg = self.config
        segs = load_segments(self.dir, cfg, recovery_point, clean, self.leader_epochs)
        if not segs:
            segs = [LogSegment.open(self.dir, log_start_offset, cfg.index_interval_bytes,
                                    cfg.segment_index_bytes, create=True)]
        self.segments = segs
        self._bases = [s.base_offset for s in segs]
        self._leo = segs[-1].next_offset
        self.log_start_offset = max(log_start_offset, segs[0].base_offset)
        if self.log_start_offset > self._leo:
            # Everything left is below a log start that was already exposed: restart empty
            # there rather than hand out offsets consumers have seen.
            self.truncate_fully_and_start_at(self.log_start_offset)
            return
        self.recovery_point = self._leo if clean else min(max(recovery_point, 0), self._leo)
        self.leader_epochs.truncate_from_end(self._leo)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self._rebuild_producer_state()
        self._hw = self.log_start_offset

    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producers, self.segments, self._leo)

    # =================================================================== properties
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Clamped to [log start, log end] as Kafka's updateHighWatermark."""
        self._hw = min(max(offset, self.log_start_offset), self._leo)

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, held back by the first offset of any open transaction."""
        first_unstable = self.producers.first_unstable_offset()
        if first_unstable is None:
            return self._hw
        return min(self._hw, max(first_unstable, self.log_start_offset))

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self.recovery_point

    @property
    def latest_epoch(self) -> int:
        return self.leader_epochs.latest_epoch

    def _floor_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    # =================================================================== appends
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
        first_offset = offset = self._leo
        planned: list[tuple[BatchHeader, int, int]] = []
        max_ts = -1
        count = 0
        for _, h in batches:
            ts = now if log_append else h.max_timestamp
            planned.append((h, offset, ts))
            offset += h.last_offset_delta + 1
            count += h.records_count
            max_ts = max(max_ts, ts)
        last_offset = offset - 1
        pending = self.producers.prepare(planned, origin)
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
        self.producers.commit(pending, self._leo)
        self._maybe_flush()
        return AppendInfo(first_offset, last_offset, now if log_append else -1,
                          self.log_start_offset, count, max_ts, len(buf))

    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> AppendInfo:
        """Append batches fetched from the leader with the leader's offsets and epochs.
        Framing and CRC are checked; a trailing partial batch is ignored (fetch responses may
        end with one); a first offset below the log end raises UnexpectedAppendOffsetError."""
        view = _byte_view(records)
        batches = scan_batches(view, allow_partial_tail=True)
        if not batches:
            return AppendInfo(-1, -1, -1, self.log_start_offset, 0)
        validate_follower_batches(batches, self._leo)
        end = batches[-1][0] + batches[-1][1].total_size
        if end > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"record set of {end} bytes exceeds segment.bytes {self.config.segment_bytes}")
        first = batches[0][1].base_offset
        last = batches[-1][1].last_offset
        infos = [(pos, h.last_offset, h.max_timestamp, h.total_size) for pos, h in batches]
        max_ts = max(h.max_timestamp for _, h in batches)
        self._write(view[:end], infos, first, last, max_ts, _clock() if now_ms is None else now_ms)
        for _, h in batches:
            if h.partition_leader_epoch >= 0:
                self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
            self.producers.apply_batch(h)
        self._maybe_flush()
        return AppendInfo(first, last, -1, self.log_start_offset,
                          sum(h.records_count for _, h in batches), max_ts, end)

    def _write(self, data: bytes | bytearray | memoryview, infos: list[BatchInfo],
               first_offset: int, last_offset: int, max_ts: int, now: int) -> None:
        seg = self.segments[-1]
        if seg.should_roll(len(data), max_ts, last_offset, now, self.config.segment_bytes,
                           self.config.max_segment_ms):
            seg = self.roll(now, first_offset)
        try:
            seg.append(data, infos)
        except OSError as e:
            raise KafkaStorageError(f"{self.name}: append failed: {e}") from e
        self._leo = last_offset + 1

    def _maybe_flush(self) -> None:
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def roll(self, now_ms: int | None = None, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (or at `base_offset` if beyond it)."""
        now = _clock() if now_ms is None else now_ms
        new_base = self._leo if base_offset is None else max(base_offset, self._leo)
        active = self.segments[-1]
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            self.segments.pop()
            self._bases.pop()
            active.delete_files()
        else:
            active.on_become_inactive()
        cfg = self.config
        try:
            seg = LogSegment.open(self.dir, new_base, cfg.index_interval_bytes,
                                  cfg.segment_index_bytes, create=True, created_ms=now)
        except OSError as e:
            raise KafkaStorageError(f"{self.name}: cannot create segment {new_base}: {e}") from e
        self.segments.append(seg)
        self._bases.append(new_base)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._dir_dirty = True
        if self.segments[0] is not seg:
            self.pending_flush_offset = new_base
        # As Kafka: a producer state snapshot at every segment boundary bounds the replay
        # needed after a restart to the active segment.
        self.producers.map_end_offset = new_base
        self.producers.take_snapshot()
        return seg

    # =================================================================== reads
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchDataInfo:
        """File regions of whole batches starting with the batch that contains `offset`.

        At most `max_bytes` (the first batch whole even if larger when `min_one_batch`, as
        KIP-74), only batches whose last offset is below `max_offset` (default: the log end;
        pass the high watermark or last stable offset for consumers). Continues into the
        next segments while the budget lasts. O(log n): segment bisect, index bisect and a
        header scan of about index.interval.bytes. Raises OffsetOutOfRangeError below the
        log start or above the log end."""
        leo = self._leo
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"{self.name}: offset {offset} is outside [{self.log_start_offset}, {leo}]")
        limit = leo if max_offset is None else min(max_offset, leo)
        info = FetchDataInfo(LogOffsetMetadata(offset, self.segments[-1].base_offset,
                                               self.segments[-1].size),
                             [], self._hw, self.log_start_offset, leo, self.last_stable_offset)
        if offset >= limit:
            if offset < leo:
                info.offset_metadata = self.offset_metadata(offset)
            return info
        remaining = max_bytes
        min_one = min_one_batch
        i = self._floor_index(offset)
        cur = offset
        first = True
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.base_offset >= limit:
                break
            region = seg.read(cur, remaining, limit if limit < seg.next_offset else None, min_one)
            if region is not None:
                if first:
                    info.offset_metadata = LogOffsetMetadata(offset, seg.base_offset, region.position)
                    first = False
                if region.size:
                    info.regions.append(region)
                    remaining -= region.size
                    min_one = False
                if region.position + region.size < seg.size or remaining <= 0:
                    break
            i += 1
            if i < len(self.segments):
                cur = self.segments[i].base_offset
        return info

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and byte position of the batch containing `offset` (O(log n))."""
        if offset < self._leo:
            for seg in self.segments[self._floor_index(offset):]:
                found = seg.translate_offset(offset)
                if found is not None:
                    return LogOffsetMetadata(offset, seg.base_offset, found[0])
        active = self.segments[-1]
        return LogOffsetMetadata(offset, active.base_offset, active.size)

    # =================================================================== offsets by time / epoch
    def latest_offset(self) -> int:
        """The log end offset (ListOffsets -1 answers the high watermark or LSO instead:
        the caller's choice, by isolation level)."""
        return self._leo

    def earliest_offset(self) -> int:
        return self.log_start_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) for ListOffsets by time: the first record with
        timestamp >= `timestamp`, as Kafka answers. The time index and headers find the
        first batch whose max timestamp reaches the target; that one batch is then decoded
        (record_lookup) to pick the record. Not used on the produce or fetch path."""
        start = self.log_start_offset
        for seg in self.segments:
            if seg.largest_timestamp < timestamp:
                continue
            h = seg.find_batch_by_timestamp(timestamp, start)
            if h is None:
                continue
            if h.attributes & TIMESTAMP_TYPE_LOG_APPEND:
                # Every record of a LogAppendTime batch carries the batch's max timestamp.
                return max(h.base_offset, start), h.max_timestamp, _epoch(h)
            found = record_lookup.first_at_or_after(self._batch_bytes(h.base_offset), timestamp, start)
            if found is None:
                return max(h.base_offset, start), h.max_timestamp, _epoch(h)
            return found[0], found[1], _epoch(h)
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets -3 (KIP-734): the first record carrying the largest timestamp."""
        best = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        found = best.translate_offset(best.offset_of_max_timestamp)
        if found is None:
            return None
        h = found[1]
        if h.attributes & TIMESTAMP_TYPE_LOG_APPEND:
            offset = h.base_offset
        else:
            exact = record_lookup.first_with_timestamp(self._batch_bytes(h.base_offset), h.max_timestamp,
                                                       self.log_start_offset)
            offset = exact if exact is not None else h.last_offset
        return max(offset, self.log_start_offset), h.max_timestamp, _epoch(h)

    def _batch_bytes(self, offset: int) -> bytes:
        """The bytes of the one batch holding `offset` (for the lookups above only)."""
        info = self.read(max(offset, self.log_start_offset), 1, None, True)
        return record_lookup.read_regions(info.regions)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets in one call: the special timestamps -1 (log end), -2 / -4 (log
        start), -3 (max timestamp), -5 (no tiered storage: offset -1), else by time."""
        if timestamp == LATEST_TIMESTAMP:
            return self._leo, -1, self.leader_epochs.latest_epoch
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
        return self.leader_epochs.end_offset_for(leader_epoch, self._leo)

    # =================================================================== durability
    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets [recovery point, up_to) (default: the log end)
        and move the recovery point there."""
        end = self._leo if up_to is None else min(up_to, self._leo)
        if end > self.recovery_point:
            for seg in self.segments[self._floor_index(self.recovery_point):]:
                if seg.base_offset >= end:
                    break
                try:
                    seg.flush()
                except OSError as e:
                    raise KafkaStorageError(f"{self.name}: flush failed: {e}") from e
            self.recovery_point = end
        if self._dir_dirty:
            checkpoints.fsync_dir(self.dir)
            self._dir_dirty = False
        if self.pending_flush_offset is not None and self.pending_flush_offset <= self.recovery_point:
            self.pending_flush_offset = None
        self.last_flush_ms = _clock()

    def take_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end. Snapshots at segment boundaries are
        kept (a truncation falls back to them); older ones inside the active segment go."""
        ps = self.producers
        ps.map_end_offset = self._leo
        ps.take_snapshot()
        base = self.segments[-1].base_offset
        ps.delete_snapshots_between(base, self._leo)

    def close(self) -> None:
        """Flush, snapshot the producer state, close the files (clean shutdown)."""
        self.flush()
        self.take_producer_snapshot()
        for seg in self.segments:
            seg.close()

    def close_handlers(self) -> None:
        """Close the file descriptors without writing anything (log dir failure)."""
        for seg in self.segments:
            seg.close_handlers()

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.segments[-1].index_interval_bytes = config.index_interval_bytes

    # =================================================================== truncation
    def truncate_to(self, offset: int) -> bool:
        """Drop every batch holding an offset >= `offset` (a batch containing `offset` goes
        whole, so the log end becomes its base offset). False if nothing was beyond."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._leo:
            return False
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        i = self._floor_index(offset)
        self._schedule_delete(self.segments[i + 1:])
        del self.segments[i + 1:]
        del self._bases[i + 1:]
        seg = self.segments[i]
        found = seg.translate_offset(offset)
        seg.truncate_to(offset)
        # The removed batch's base offset (or `offset` itself when it lies in a gap the
        # cleaner left), never lower: offsets below it were handed out, even if compacted.
        cut = offset if found is None else min(offset, found[1].base_offset)
        self._leo = max(seg.next_offset, cut)
        self.log_start_offset = min(self.log_start_offset, self._leo)
        self._hw = min(self._hw, self._leo)
        if self.pending_flush_offset is not None and self.pending_flush_offset > self._leo:
            self.pending_flush_offset = None
        self.leader_epochs.truncate_from_end(self._leo)
        self.producers.delete_snapshots_after(self._leo)
        self._rebuild_producer_state()
        dirty_lowered = self._lower_first_dirty_offset(self._leo)
        if not self._lower_recovery_point(self._leo) and dirty_lowered:
            self._notify_checkpoint()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset`."""
        self._schedule_delete(self.segments)
        cfg = self.config
        seg = LogSegment.open(self.dir, offset, cfg.index_interval_bytes,
                              cfg.segment_index_bytes, create=True)
        self.segments = [seg]
        self._bases = [offset]
        self._dir_dirty = True
        self._leo = self._hw = self.log_start_offset = offset
        self.pending_flush_offset = None
        self.leader_epochs.clear()
        self.producers.clear()
        self.producers.delete_snapshots_after(-1)
        self.producers.map_end_offset = offset
        self._lower_first_dirty_offset(offset)
        self._lower_recovery_point(offset, force=True)

    def _lower_recovery_point(self, offset: int, force: bool = False) -> bool:
        if force or offset < self.recovery_point:
            self.recovery_point = offset
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
    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap `new`, a cleaned segment written with the `.cleaned` suffix and fsynced, in
        for `old`, contiguous non-active segments of this log starting at new's base offset
        (Kafka's LocalLog.replaceSegments). Crash-safe in two phases: rename new to `.swap`
        (its `.log` last: the commit point), take it into the segment list, retire the old
        segments (renamed `.deleted`, deleted after file.delete.delay.ms, so file regions
        already handed to readers stay valid), then drop the `.swap` suffix. A crash in
        between is finished or rolled back on open (log_loader)."""
        i = self._floor_index(old[0].base_offset) if old else -1
        if (not old or new.base_offset != old[0].base_offset
                or self.segments[i:i + len(old)] != old or i + len(old) >= len(self.segments)):
            raise ValueError(f"{self.name}: {old} are not contiguous non-active segments "
                             f"replaceable by {new}")
        try:
            new.change_suffix(SWAP_SUFFIX)
            checkpoints.fsync_dir(self.dir)
            self.segments[i:i + len(old)] = [new]
            self._bases[i:i + len(old)] = [new.base_offset]
            self._schedule_delete(old)
            new.change_suffix("")
            checkpoints.fsync_dir(self.dir)
        except OSError as e:
            raise KafkaStorageError(f"{self.name}: swapping in cleaned segment {new.base_offset} "
                                    f"failed: {e}") from e

    # =================================================================== deletion / retention
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
        segs = self.segments
        while n < len(segs):
            nxt = segs[n + 1] if n + 1 < len(segs) else None
            upper = self._leo if nxt is None else nxt.base_offset
            if self._hw < upper or (nxt is None and segs[n].size == 0) or \
                    not predicate(segs[n], nxt):
                break
            n += 1
        if n == 0:
            return 0
        if n == len(segs):
            self.roll()
        gone = segs[:n]
        del segs[:n]
        del self._bases[:n]
        self._schedule_delete(gone)
        self._move_log_start(segs[0].base_offset)
        self.producers.delete_snapshots_before(segs[0].base_offset)
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
        if self.recovery_point < offset:
            self.recovery_point = offset

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        due = _clock() + self.config.file_delete_delay_ms
        for seg in segments:
            try:
                self.deleter.schedule(seg, due)
            except OSError as e:
                raise KafkaStorageError(f"{self.name}: cannot delete {seg.log_path}: {e}") from e

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, end={self._leo}, "
                f"hw={self._hw}, segments={len(self.segments)})")


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = records if isinstance(records, memoryview) else memoryview(records)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


def _epoch(h: BatchHeader) -> int:
    return h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1


