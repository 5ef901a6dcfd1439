"""The segment list of one partition's log: Kafka's LocalLog, under PartitionLog.

Contract:
- holds the segments of the partition dir in base-offset order, contiguous and
  non-overlapping; the last one is the active segment, the only one appended to. There is
  always at least one segment (possibly empty);
- owns the log end offset (one past the last offset written, moved only by `append`,
  truncation and restarts), the recovery point (offsets below it are fsynced: `flush` moves
  it up; its owner lowers it on truncation and raises it with the log start), the offset a
  roll left unflushed, and whether the directory needs an fsync (new or renamed files);
- carries out, never decides: its owner validated and stamped the bytes it appends, chose
  when to roll and which segments retention removes. It knows nothing of the log start
  offset (callers pass it where a lookup must not go below it), the high watermark, producer
  state, leader epochs or topic policies;
- reads return file regions of whole batches (`FileRegion`, sent with sendfile); record
  bytes are never copied into Python here, except the one batch a ListOffsets-by-time
  lookup decodes (record_lookup);
- segments leave the list renamed `.deleted` and are deleted by the `SegmentDeleter` after
  file.delete.delay.ms, so regions already handed to readers stay valid; a swap of cleaned
  segments (`replace_segments`) leaves the old or the new segments after a crash at any
  instant (log_loader finishes or rolls back the rest on open).

Concurrency: not thread-safe. Only its PartitionLog calls it, on the event-loop thread;
every method is synchronous. Others may read `segments` (the cleaner, metrics) on that
thread but never change it.

Blocking I/O: `open` (recovery reads whole unflushed segments), `append` (os.write to the
page cache; every few MB the write-behind starts their writeback, on its own thread),
`roll` (creates files), reads and lookups (header preads, page cache), `flush`
(fsync of segments and the directory), truncation, removal and swaps (ftruncate, rename,
directory fsync).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from clients.protocol.batch_header import TIMESTAMP_TYPE_LOG_APPEND, BatchHeader

from . import checkpoints, record_lookup
from .config import LogConfig
from .errors import KafkaStorageError, LogDirFullError, is_disk_full
from .leader_epoch import LeaderEpochCache
from .log_loader import load_segments
from .segment import SWAP_SUFFIX, BatchInfo, FileRegion, LogSegment, SegmentDeleter
from .write_behind import WriteBehind
from .segment import now_ms as _clock


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


class LocalLog:
    """The segments of `dir`; `name` (`<topic>-<partition>`) only labels errors."""

    def __init__(self, dir: str, name: str, config: LogConfig, deleter: SegmentDeleter,
                 segments: list[LogSegment], recovery_point: int,
                 write_behind: WriteBehind | None = None):
        if not segments:
            raise ValueError(f"{name}: a log has at least one segment")
        self.dir = dir
        self.name = name
        # Set through PartitionLog.update_config only, which keeps its own copy equal.
        self.config = config
        self.deleter = deleter
        self.write_behind = write_behind if write_behind is not None and write_behind.enabled \
            else None
        self.segments = segments
        self._bases = [s.base_offset for s in segments]     # for bisect: no key= call
        self.log_end_offset = segments[-1].next_offset
        self.recovery_point = recovery_point
        self.last_flush_ms = _clock()
        self.pending_flush_offset: int | None = None        # a roll left older segments unflushed
        self._dir_dirty = False

    @classmethod
    def open(cls, dir: str, name: str, config: LogConfig, deleter: SegmentDeleter, *,
             recovery_point: int, start_offset: int, clean: bool,
             leader_epochs: LeaderEpochCache, write_behind: WriteBehind | None = None
             ) -> LocalLog:
        """Open and recover the segments of `dir` (log_loader); an empty dir gets one empty
        segment at `start_offset`. Offsets below `recovery_point` are trusted, or all of
        them after a `clean` shutdown. Epochs found while recovering go to `leader_epochs`."""
        segs = load_segments(dir, config, recovery_point, clean, leader_epochs)
        if not segs:
            segs = [LogSegment.open(dir, start_offset, config.index_interval_bytes,
                                    config.segment_index_bytes, create=True)]
        end = segs[-1].next_offset
        return cls(dir, name, config, deleter, segs,
                   end if clean else min(max(recovery_point, 0), end), write_behind)

    # =================================================================== state
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def floor_index(self, offset: int) -> int:
        """Index in `segments` of the segment that would hold `offset` (0 below the first)."""
        return max(bisect_right(self._bases, offset) - 1, 0)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.segments[-1].index_interval_bytes = config.index_interval_bytes

    # =================================================================== appends
    def append(self, data: bytes | bytearray | memoryview, infos: list[BatchInfo],
               last_offset: int) -> None:
        """Write whole, validated, offset-stamped batches to the active segment (the caller
        rolled first if they do not fit) and move the log end past `last_offset`."""
        seg = self.segments[-1]
        try:
            seg.append(data, infos)
        except OSError as e:
            if is_disk_full(e):         # the segment cut the write back: nothing changed
                raise LogDirFullError(f"{self.name}: append failed, the disk is full: {e}") from e
            raise KafkaStorageError(f"{self.name}: append failed: {e}") from e
        self.log_end_offset = last_offset + 1
        if self.write_behind is not None:
            self.write_behind.appended(seg)

    def roll(self, now_ms: int, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (or at `base_offset` if beyond it). An
        empty active segment is replaced, or returned as it is if it already starts there."""
        new_base = self.log_end_offset if base_offset is None else max(base_offset,
                                                                       self.log_end_offset)
        active = self.segments[-1]
        if active.size == 0 and active.base_offset == new_base:
            return active
        # The new segment first: if its files cannot be made, the log stays as it was.
        cfg = self.config
        try:
            seg = LogSegment.open(self.dir, new_base, cfg.index_interval_bytes,
                                  cfg.segment_index_bytes, create=True, created_ms=now_ms)
        except OSError as e:
            LogSegment.remove_files(self.dir, new_base)
            if is_disk_full(e):
                raise LogDirFullError(f"{self.name}: cannot create segment {new_base}, the disk "
                                      f"is full: {e}") from e
            raise KafkaStorageError(f"{self.name}: cannot create segment {new_base}: {e}") from e
        if active.size == 0:
            self.segments.pop()
            self._bases.pop()
            active.delete_files()
        else:
            try:
                active.on_become_inactive()
            except OSError as e:
                # Its index files lag: the flush that passes this segment writes them (or
                # fails without moving the recovery point); recovery rebuilds them anyway.
                if not is_disk_full(e):
                    seg.delete_files()
                    raise KafkaStorageError(f"{self.name}: cannot finish segment "
                                            f"{active.base_offset}: {e}") from e
        self.segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        if self.segments[0] is not seg:
            self.pending_flush_offset = new_base
        return seg

    # =================================================================== reads
    def read(self, offset: int, max_bytes: int, limit: int, min_one_batch: bool) -> FetchDataInfo:
        """File regions of whole batches from the one holding `offset`, only batches whose
        last offset is below `limit` (<= the log end), at most `max_bytes` (the first batch
        whole even if larger with `min_one_batch`), continuing into the next segments while
        the budget lasts. The caller checked `offset` against the log start and end and
        fills in the offsets of the returned FetchDataInfo."""
        segs = self.segments
        if offset >= limit:
            return FetchDataInfo(self.offset_metadata(offset), [])
        meta = None
        regions: list[FileRegion] = []
        remaining = max_bytes
        min_one = min_one_batch
        i = max(bisect_right(self._bases, offset) - 1, 0)     # floor_index, one call fewer
        cur = offset
        while i < len(segs):
            seg = segs[i]
            if seg.base_offset >= limit:
                break
            region = seg.read(cur, remaining, limit if limit < seg.next_offset else None, min_one)
            if region is not None:
                if meta is None:
                    meta = LogOffsetMetadata(offset, seg.base_offset, region.position)
                if region.size:
                    regions.append(region)
                    remaining -= region.size
                    min_one = False
                if region.position + region.size < seg.size or remaining <= 0:
                    break
            i += 1
            if i < len(segs):
                cur = segs[i].base_offset
        if meta is None:
            meta = LogOffsetMetadata(offset, segs[-1].base_offset, segs[-1].size)
        return FetchDataInfo(meta, regions)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and byte position of the batch containing `offset` (O(log n)); the end
        of the active segment for the log end or an offset in no batch."""
        if offset < self.log_end_offset:
            for seg in self.segments[self.floor_index(offset):]:
                found = seg.translate_offset(offset)
                if found is not None:
                    return LogOffsetMetadata(offset, seg.base_offset, found[0])
        active = self.segments[-1]
        return LogOffsetMetadata(offset, active.base_offset, active.size)

    def offset_for_timestamp(self, timestamp: int, start: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or above `start` with
        timestamp >= `timestamp`. The time index and headers find the first batch whose max
        timestamp reaches it; that one batch is then decoded (record_lookup)."""
        for seg in self.segments:
            if seg.largest_timestamp < timestamp:
                continue
            h = seg.find_batch_by_timestamp(timestamp, start)
            if h is None:
                continue
            if h.attributes & TIMESTAMP_TYPE_LOG_APPEND:
                # Every record of a LogAppendTime batch carries the batch's max timestamp.
                return max(h.base_offset, start), h.max_timestamp, _epoch(h)
            found = record_lookup.first_at_or_after(self._batch_bytes(h.base_offset, start),
                                                    timestamp, start)
            if found is None:
                return max(h.base_offset, start), h.max_timestamp, _epoch(h)
            return found[0], found[1], _epoch(h)
        return None

    def max_timestamp_offset(self, start: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record at or above `start` carrying
        the largest timestamp (KIP-734)."""
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
            exact = record_lookup.first_with_timestamp(self._batch_bytes(h.base_offset, start),
                                                       h.max_timestamp, start)
            offset = exact if exact is not None else h.last_offset
        return max(offset, start), h.max_timestamp, _epoch(h)

    def _batch_bytes(self, offset: int, start: int) -> bytes:
        """The bytes of the one batch holding max(`offset`, `start`) (timestamp lookups)."""
        info = self.read(max(offset, start), 1, self.log_end_offset, True)
        return record_lookup.read_regions(info.regions)

    # =================================================================== durability
    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets [recovery point, up_to) (default: the log end)
        and move the recovery point there; fsync the directory if files came or went."""
        end = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if end > self.recovery_point:
            for seg in self.segments[self.floor_index(self.recovery_point):]:
                if seg.base_offset >= end:
                    break
                try:
                    seg.flush()             # LogDirFullError: the recovery point stays
                except OSError as e:
                    raise KafkaStorageError(f"{self.name}: flush failed: {e}") from e
            self.recovery_point = end
        if self._dir_dirty:
            checkpoints.fsync_dir(self.dir)
            self._dir_dirty = False
        if self.pending_flush_offset is not None and self.pending_flush_offset <= self.recovery_point:
            self.pending_flush_offset = None
        self.last_flush_ms = _clock()

    def close(self) -> None:
        """Close the files without flushing (the owner flushed first)."""
        for seg in self.segments:
            seg.close()

    def close_handlers(self) -> None:
        """Close the file descriptors without writing anything (log dir failure)."""
        for seg in self.segments:
            seg.close_handlers()

    # =================================================================== truncation
    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding an offset >= `offset`, which must lie in
        [first segment's base, log end); returns the new log end. A batch containing
        `offset` goes whole."""
        i = self.floor_index(offset)
        self._schedule_delete(self.segments[i + 1:])
        del self.segments[i + 1:]
        del self._bases[i + 1:]
        seg = self.segments[i]
        found = seg.translate_offset(offset)
        seg.truncate_to(offset)
        # The removed batch's base offset (or `offset` itself when it lies in a gap the
        # cleaner left), never lower: offsets below it were handed out, even if compacted.
        cut = offset if found is None else min(offset, found[1].base_offset)
        self.log_end_offset = max(seg.next_offset, cut)
        if self.pending_flush_offset is not None and self.pending_flush_offset > self.log_end_offset:
            self.pending_flush_offset = None
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Retire every segment and restart with one empty segment at `offset`. The
        recovery point is the owner's to lower (it tells whoever checkpoints it)."""
        self._schedule_delete(self.segments)
        cfg = self.config
        seg = LogSegment.open(self.dir, offset, cfg.index_interval_bytes,
                              cfg.segment_index_bytes, create=True)
        self.segments = [seg]
        self._bases = [offset]
        self._dir_dirty = True
        self.log_end_offset = offset
        self.pending_flush_offset = None

    # =================================================================== removal / swaps
    def remove_oldest(self, n: int) -> None:
        """Retire the `n` oldest segments; the active one must not be among them (the
        owner rolls first when all would go)."""
        if n >= len(self.segments):
            raise ValueError(f"{self.name}: cannot remove the active segment")
        gone = self.segments[:n]
        del self.segments[:n]
        del self._bases[:n]
        self._schedule_delete(gone)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """Swap `new`, a cleaned segment written with the `.cleaned` suffix and fsynced, in
        for `old`, contiguous non-active segments starting at new's base offset (Kafka's
        LocalLog.replaceSegments). Crash-safe in two phases: rename new to `.swap` (its
        `.log` last: the commit point), take it into the list, retire the old segments,
        then drop the `.swap` suffix. A crash in between is finished or rolled back on
        open (log_loader)."""
        i = self.floor_index(old[0].base_offset) if old else -1
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

    def _schedule_delete(self, segments: list[LogSegment]) -> None:
        due = _clock() + self.config.file_delete_delay_ms
        for seg in segments:
            try:
                self.deleter.schedule(seg, due)
            except OSError as e:
                raise KafkaStorageError(f"{self.name}: cannot delete {seg.log_path}: {e}") from e

    def __repr__(self) -> str:
        return f"LocalLog({self.name}, end={self.log_end_offset}, segments={len(self.segments)})"


def _epoch(h: BatchHeader) -> int:
    return h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
