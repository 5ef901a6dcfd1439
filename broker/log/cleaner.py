"""Log compaction for topics with cleanup.policy=compact (Kafka's LogCleaner and Cleaner).

A compacted log keeps at least the last record of every key. One cleaning of one log:

1. Which part (`cleanable_range`). The cleaner checkpoint (`PartitionLog.first_dirty_offset`,
   persisted in the log dir's `cleaner-offset-checkpoint`) splits the log below the active
   segment into a clean head [log start, first dirty) and a dirty part. The dirty part
   ends at the first uncleanable offset: the lowest of the last stable offset (which is
   at most the high watermark), the active segment's base offset, and the base offset of
   the first dirty segment holding a record newer than `min.compaction.lag.ms`. This code
   works in whole segments: the segment holding the uncleanable offset is not cleaned and
   the checkpoint always names a segment boundary.
2. Whether (`LogCleaner.choose`): the dirty ratio, dirty bytes / (clean + dirty bytes), must
   exceed `min.cleanable.dirty.ratio` (strictly, as Kafka's LogCleanerManager), or the
   oldest first-batch timestamp of a dirty segment must be older than
   `max.compaction.lag.ms` (then any cleanable byte is enough). Among the candidates the
   highest ratio wins; one log per call.
3. The offset map: key -> offset of its last record in the dirty part, built by decoding
   the dirty segments (at most about `log.cleaner.dedupe.buffer.size / 24 * 0.9` keys, as
   Kafka sizes its map; the remaining dirty segments wait for the next call).
4. The rewrite: every segment from the log start up to the end of the mapped part is
   grouped (consecutive segments totalling at most `segment.bytes`, index sizes at most
   `segment.index.bytes`, offsets within an int32 of the group's base) and each group is
   rewritten into one `<base>.log.cleaned` (+ indexes) that keeps
   - a record if no later record in the map has its key; a tombstone (null value) only
     until its delete horizon (below); a record without a key never (Kafka drops them);
   - every surviving record at its offset: a batch whose records all survive is copied
     byte for byte; otherwise it is re-encoded with the original base offset, last offset
     delta (so the producer's last sequence survives), codec, producer id / epoch / base
     sequence, timestamp type, partition leader epoch and transactional flag, with gaps
     in the records' offset deltas;
   - an empty batch (header only, recordsCount 0, as Kafka's RETAIN_EMPTY) where all
     records of the last data batch of a producer still in the producer state went, and
     for the group's last batch, so that a cleaned segment ends at the same offset as the
     segments it replaces (which is what finishing a crashed swap relies on).
   The group's segment is then fsynced, given the last old segment's mtime and swapped in
   (`LocalLog.replace_segments`: `.cleaned` -> `.swap` -> final name, old segments
   deleted after file.delete.delay.ms so in-flight file regions stay readable). A group of
   one segment in which nothing changed is left alone. Offsets are never reassigned: a
   fetch from a removed offset returns the next batch that remains.

Tombstones: the delete horizon of KIP-534 (Kafka 3.1+, magic v2). The first cleaning that
keeps a tombstone rewrites its batch with the DELETE_HORIZON attribute bit set and
baseTimestamp = cleaning time + `delete.retention.ms` (record timestamp deltas are relative
to it, so record timestamps read the same); a later cleaning at or after that time drops
the tombstone. As in Kafka, such a later cleaning happens when the log is chosen again
(new dirty data above the ratio, or the max lag); a quiet log keeps its tombstones.

Transactions, as Kafka's cleaner (CleanedTransactionMetadata). The aborted transactions
overlapping a pass come from the segments' `.txnindex` entries; the whole cleanable range lies
below the last stable offset, so every transactional batch in it belongs to an ended
transaction:
  - a batch of an aborted transaction is removed (an empty header stays where it is a
    producer's last data batch, as above) and its keys do not enter the offset map;
  - a batch of a committed transaction is compacted like any other, its keys in the map;
  - a marker whose transaction had no batch left in this pass (everything of it was removed
    by earlier cleanings) gets a delete horizon (now + `delete.retention.ms`, as a tombstone)
    and is removed by the first cleaning after it; an ABORT marker that still has batches of
    its transaction before it stays, with its `.txnindex` entry in the cleaned segment.
A read_committed consumer that fetched below a removed marker sees neither the aborted data
nor the marker; one whose fetch is under way within `delete.retention.ms` still finds both.

Concurrency: event-loop thread only, like the PartitionLog it rewrites; one call is
synchronous and does blocking I/O (reads the log below the active segment, writes and
fsyncs the cleaned segments). Appends cannot interleave with a cleaning, so no segment
changes under it.
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable, Iterator

from clients.protocol import compression
from clients.protocol.batch_header import (CONTROL, DELETE_HORIZON, HEADER_SIZE, LOG_OVERHEAD,
                                           TIMESTAMP_TYPE_LOG_APPEND, TRANSACTIONAL, BatchHeader,
                                           pack_header, read_header, write_crc)
from clients.protocol.records import (ABORT, COMMIT, ConsumedRecord, append_record, iter_batches,
                                      parse_control_record)

from .errors import CorruptMessageError
from .partition_log import PartitionLog
from .segment import CLEANED_SUFFIX, INT32_MAX, LogSegment
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

DEFAULT_DEDUPE_BUFFER_SIZE = 134217728      # log.cleaner.dedupe.buffer.size
_MAP_ENTRY_BYTES = 24                       # Kafka's map entry: 16-byte key hash + offset
_MAP_LOAD_FACTOR = 0.9                      # log.cleaner.io.buffer.load.factor
_CHUNK = 1 << 20                            # read / write granularity
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_OFFSET_INDEX_ENTRY = 8
_TIME_INDEX_ENTRY = 12
NO_TIMESTAMP = -1


@dataclass(slots=True)
class LogToClean:
    """A compacted log's cleanable range, in indexes of its segment list: the clean head is
    segments[:first_dirty], the cleanable dirty part segments[first_dirty:end]."""

    log: PartitionLog
    first_dirty: int
    end: int
    clean_bytes: int
    cleanable_bytes: int
    due: bool                   # max.compaction.lag.ms passed for a dirty segment

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(slots=True)
class CleanerStats:
    segments_read: int = 0
    segments_written: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    first_dirty_offset: int = 0         # the new checkpoint


def cleanable_range(plog: PartitionLog, now_ms: int) -> LogToClean | None:
    """Kafka's LogCleanerManager.cleanableOffsets + LogToClean, in whole segments."""
    segs = plog.segments
    if len(segs) < 2:
        return None
    cfg = plog.config
    bases = [s.base_offset for s in segs]
    start = plog.log_start_offset
    dirty_offset = plog.first_dirty_offset
    if dirty_offset is None or dirty_offset < start or dirty_offset > plog.log_end_offset:
        dirty_offset = start
    d = max(bisect_right(bases, dirty_offset) - 1, 0)
    uncleanable = min(plog.last_stable_offset, segs[-1].base_offset)
    min_lag = max(cfg.min_compaction_lag_ms, 0)
    non_active_dirty = segs[d:-1]
    if min_lag > 0:
        for seg in non_active_dirty:
            if seg.largest_timestamp > now_ms - min_lag:
                uncleanable = min(uncleanable, seg.base_offset)
                break
    end = max(bisect_right(bases, uncleanable) - 1, d)
    first_ts = [ts for s in non_active_dirty
                if (ts := s.rolling_base_timestamp) is not None and ts > 0]
    due = bool(first_ts) and min(first_ts) < now_ms - max(cfg.max_compaction_lag_ms, 0)
    return LogToClean(plog, d, end, sum(s.size for s in segs[:d]),
                      sum(s.size for s in segs[d:end]), due)


class LogCleaner:
    """Chooses and cleans compacted logs, one per `clean_filthiest` call. Logs whose
    cleaning failed are skipped until restart (Kafka's uncleanable partitions)."""

    def __init__(self, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE):
        self.max_map_entries = max(1, int(dedupe_buffer_size / _MAP_ENTRY_BYTES * _MAP_LOAD_FACTOR))
        self._uncleanable: set[int] = set()     # id() of PartitionLog objects

    def forget(self, plog: PartitionLog) -> None:
        self._uncleanable.discard(id(plog))

    def is_uncleanable(self, plog: PartitionLog) -> bool:
        return id(plog) in self._uncleanable

    def choose(self, logs: Iterable[PartitionLog], now_ms: int) -> LogToClean | None:
        best: LogToClean | None = None
        for plog in logs:
            if not plog.config.compact or id(plog) in self._uncleanable:
                continue
            ltc = cleanable_range(plog, now_ms)
            if ltc is None or ltc.total_bytes == 0:
                continue
            if not ((ltc.due and ltc.cleanable_bytes > 0)
                    or ltc.ratio > plog.config.min_cleanable_dirty_ratio):
                continue
            if best is None or ltc.ratio > best.ratio:
                best = ltc
        return best

    def clean_filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> PartitionLog | None:
        """Clean the log `choose` picks; that log, or None if none needed cleaning or its
        cleaning failed (then it is logged and marked uncleanable)."""
        ltc = self.choose(logs, now_ms)
        if ltc is None:
            return None
        try:
            stats = self.clean(ltc, now_ms)
        except Exception:
            log.exception("cleaning %s failed; it will not be cleaned again until restart",
                          ltc.log.name)
            self._uncleanable.add(id(ltc.log))
            return None
        log.info("cleaned %s: %d segments (%d bytes) into %d (%d bytes), %d of %d records "
                 "removed, first dirty offset now %d", ltc.log.name, stats.segments_read,
                 stats.bytes_read, stats.segments_written, stats.bytes_written,
                 stats.records_removed, stats.records_read, stats.first_dirty_offset)
        return ltc.log

    def clean(self, ltc: LogToClean, now_ms: int) -> CleanerStats:
        """Clean `ltc` (see the module docstring) and move the log's first dirty offset to
        the end of what was mapped. Exceptions leave the log as it was, or (after a swap
        began) with some groups swapped in: consistent either way."""
        plog = ltc.log
        segs = list(plog.segments)
        dirty_start = segs[ltc.first_dirty].base_offset
        map_txns = _TxnTracker(aborted_txns(segs, dirty_start, segs[ltc.end].base_offset))
        key_map, end = _build_offset_map(segs[ltc.first_dirty:ltc.end], self.max_map_entries,
                                         map_txns)
        end += ltc.first_dirty
        end_offset = segs[end].base_offset
        cfg = plog.config
        stats = CleanerStats(first_dirty_offset=end_offset)
        ctx = _CleanContext(
            key_map, now_ms, cfg.delete_retention_ms,
            {pid: e.last_data_offset for pid, e in plog.producers.producers.items()
             if e.last_data_offset >= 0},
            _TxnTracker(aborted_txns(segs, segs[0].base_offset, end_offset)), stats)
        for group in group_segments(segs[:end], cfg.segment_bytes, cfg.segment_index_bytes,
                                    end_offset):
            _clean_group(plog, group, ctx)
        plog.first_dirty_offset = end_offset
        return stats


def group_segments(segs: list[LogSegment], max_size: int, max_index_size: int,
                   end_offset: int) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose data (and index data) fits
    one segment and whose offsets fit the indexes' int32 relative offsets."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segs):
        first = segs[i]
        group = [first]
        size = first.size
        index_size = len(first.index) * _OFFSET_INDEX_ENTRY
        time_size = len(first.time_index) * _TIME_INDEX_ENTRY
        i += 1
        while i < len(segs):
            seg = segs[i]
            last = (segs[i + 1].base_offset if i + 1 < len(segs) else end_offset) - 1
            if (size + seg.size > max_size
                    or index_size + len(seg.index) * _OFFSET_INDEX_ENTRY > max_index_size
                    or time_size + len(seg.time_index) * _TIME_INDEX_ENTRY > max_index_size
                    or (seg.size > 0 and last - first.base_offset > INT32_MAX)):
                break
            group.append(seg)
            size += seg.size
            index_size += len(seg.index) * _OFFSET_INDEX_ENTRY
            time_size += len(seg.time_index) * _TIME_INDEX_ENTRY
            i += 1
        groups.append(group)
    return groups


# ------------------------------------------------------------------------------ reading
def _segment_batches(seg: LogSegment) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a (non-active, hence unchanging) segment with its bytes, read in
    chunks of about 1 MiB (a larger batch is read on its own)."""
    pos = 0
    size = seg.size
    while pos < size:
        mv = memoryview(os.pread(seg.fd, min(_CHUNK, size - pos), pos))
        off = 0
        while len(mv) - off >= HEADER_SIZE:
            h = read_header(mv, off)
            if h.batch_length < _MIN_LENGTH:
                raise CorruptMessageError(
                    f"{seg.log_path}: bad batch length {h.batch_length} at {pos + off}")
            if off + h.total_size > len(mv):
                break
            yield h, mv[off:off + h.total_size]
            off += h.total_size
        if off == 0:
            h2 = seg.header_at(pos)
            if h2 is None:
                raise CorruptMessageError(f"{seg.log_path}: truncated batch at {pos}")
            data = os.pread(seg.fd, h2.total_size, pos)
            if len(data) < h2.total_size:
                raise CorruptMessageError(f"{seg.log_path}: truncated batch at {pos}")
            yield h2, memoryview(data)
            off = h2.total_size
        pos += off


def _records(raw: memoryview) -> list[ConsumedRecord]:
    for batch in iter_batches(raw):
        return batch.records
    raise CorruptMessageError("incomplete batch")


def aborted_txns(segs: list[LogSegment], start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions with data in [start, end): from every segment's index (an
    entry lives with its ABORT marker, which may lie after `end`)."""
    return [t for seg in segs for t in seg.txn_index.entries
            if t.last_offset >= start and t.first_offset < end]


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata, for one pass over the log in offset order: which
    transactional batches belong to aborted transactions, and which markers have no batch
    of their transaction left in the pass."""

    def __init__(self, aborted: list[AbortedTxn]):
        self._aborted = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._ongoing_aborted: dict[int, list] = {}    # producer id -> [AbortedTxn, batch seen]
        self._ongoing_committed: set[int] = set()
        self.kept_index: list[AbortedTxn] = []          # entries whose ABORT marker stays

    def _start_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            t = self._aborted[self._next]
            self._next += 1
            self._ongoing_aborted.setdefault(t.producer_id, [t, False])

    def on_batch(self, h: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction."""
        self._start_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(h.producer_id)
        if aborted is not None:
            aborted[1] = True
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, raw: memoryview) -> bool:
        """A control batch: True if no batch of its transaction came before it in this pass
        (the marker may go once its delete horizon has passed)."""
        self._start_up_to(h.last_offset)
        records = _records(raw)
        if not records:
            return True
        ctype, _ = parse_control_record(records[0])
        if ctype == ABORT:
            aborted = self._ongoing_aborted.pop(h.producer_id, None)
            if aborted is not None and aborted[1]:
                self.kept_index.append(aborted[0])
                return False
            return True
        if ctype == COMMIT:
            if h.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False


def _build_offset_map(dirty: list[LogSegment], max_entries: int, txns: _TxnTracker
                      ) -> tuple[dict[bytes, int], int]:
    """key -> last offset over the dirty segments (aborted transactional records left out),
    and how many segments it covers (whole segments; at least one, then stopping once the
    map holds `max_entries` keys)."""
    key_map: dict[bytes, int] = {}
    for n, seg in enumerate(dirty, 1):
        for h, raw in _segment_batches(seg):
            if h.is_control:
                txns.on_marker(h, raw)
                continue
            if txns.on_batch(h):
                continue
            for rec in _records(raw):
                if rec.key is not None:
                    key_map[rec.key] = rec.offset
        if len(key_map) >= max_entries and n < len(dirty):
            return key_map, n
    return key_map, len(dirty)


# ------------------------------------------------------------------------------ rewriting
@dataclass(slots=True)
class _CleanContext:
    key_map: dict[bytes, int]
    now_ms: int
    delete_retention_ms: int
    producer_last_offsets: dict[int, int]       # producer id -> offset of its last data batch
    txns: _TxnTracker
    stats: CleanerStats


def _clean_group(plog: PartitionLog, group: list[LogSegment], ctx: _CleanContext) -> None:
    cfg = plog.config
    last_offset = max((s.next_offset for s in group if s.size), default=0) - 1
    dest = LogSegment.open(plog.dir, group[0].base_offset, cfg.index_interval_bytes,
                           cfg.segment_index_bytes, create=True, created_ms=group[0].created_ms,
                           suffix=CLEANED_SUFFIX)
    stats = ctx.stats
    try:
        changed = len(group) > 1
        buf = bytearray()
        infos: list[tuple[int, int, int, int]] = []
        read = 0
        for seg in group:
            read += seg.size
            for h, raw in _segment_batches(seg):
                out = _filter_batch(h, raw, ctx, h.last_offset == last_offset)
                if out is not raw:
                    changed = True
                if out is None:
                    continue
                out_h = h if out is raw else read_header(out)
                infos.append((len(buf), out_h.last_offset, out_h.max_timestamp, len(out)))
                buf += out
                if len(buf) >= _CHUNK:
                    dest.append(buf, infos)
                    buf = bytearray()
                    infos = []
        if not changed:
            ctx.txns.kept_index.clear()     # the segment stays, with its own index
            dest.delete_files()
            return
        if buf:
            dest.append(buf, infos)
        # The index entries of the ABORT markers that stay (flushed with the segment).
        for txn in ctx.txns.kept_index:
            dest.txn_index.append(txn)
        ctx.txns.kept_index.clear()
        dest.flush()
        # As Kafka: the cleaned segment keeps the replaced segments' last modification
        # time (retention falls back to it when batches carry no timestamps).
        mtime = os.fstat(group[-1].fd).st_mtime_ns
        os.utime(dest.fd, ns=(mtime, mtime))
    except BaseException:
        dest.delete_files()
        raise
    plog.replace_segments(dest, group)
    stats.segments_read += len(group)
    stats.segments_written += 1
    stats.bytes_read += read
    stats.bytes_written += dest.size


def _filter_batch(h: BatchHeader, raw: memoryview, ctx: _CleanContext,
                  last_of_group: bool) -> memoryview | bytes | None:
    """`raw` itself if the batch stays as it is, new bytes if it is rewritten, None if it
    goes (Kafka's MemoryRecords.filterTo with the cleaner's filter)."""
    if h.is_control:
        return _filter_marker(h, raw, ctx, last_of_group)
    aborted = ctx.txns.on_batch(h)
    records = _records(raw)
    ctx.stats.records_read += len(records)
    if aborted:
        ctx.stats.records_removed += len(records)
        return _retained_empty(h, raw, ctx, last_of_group)
    has_horizon = bool(h.attributes & DELETE_HORIZON)
    retain_deletes = not has_horizon or ctx.now_ms < h.base_timestamp
    key_map = ctx.key_map
    kept: list[ConsumedRecord] = []
    tombstones = False
    for rec in records:
        key = rec.key
        if key is None or key_map.get(key, -1) > rec.offset:
            continue
        if rec.value is None:
            if not retain_deletes:
                continue
            tombstones = True
        kept.append(rec)
    ctx.stats.records_removed += len(records) - len(kept)
    if not kept:
        return _retained_empty(h, raw, ctx, last_of_group)
    if len(kept) == len(records) and (has_horizon or not tombstones):
        return raw
    if has_horizon:
        horizon: int | None = h.base_timestamp
    elif tombstones:
        horizon = ctx.now_ms + ctx.delete_retention_ms
    else:
        horizon = None
    return _encode_batch(h, kept, horizon)


def _retained_empty(h: BatchHeader, raw: memoryview, ctx: _CleanContext,
                    last_of_group: bool) -> memoryview | bytes | None:
    """A data batch that lost every record: gone, or an empty header where it is a
    producer's last data batch (its sequence) or the group's last batch (its offset)."""
    retain_empty = last_of_group or (
        h.producer_id >= 0 and ctx.producer_last_offsets.get(h.producer_id) == h.last_offset)
    if not retain_empty:
        return None
    return raw if h.records_count == 0 else _empty_batch(h)


def _filter_marker(h: BatchHeader, raw: memoryview, ctx: _CleanContext,
                   last_of_group: bool) -> memoryview | bytes | None:
    """A COMMIT/ABORT marker stays while its transaction has batches left; after that it
    gets a delete horizon, and goes at the first cleaning past it (as a tombstone)."""
    if not ctx.txns.on_marker(h, raw) or last_of_group:
        return raw
    if h.attributes & DELETE_HORIZON:
        if ctx.now_ms < h.base_timestamp:
            return raw
        ctx.stats.records_removed += h.records_count
        return None
    return _encode_batch(h, _records(raw), ctx.now_ms + ctx.delete_retention_ms)


def _empty_batch(h: BatchHeader) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader: the offsets, producer fields, flags and
    max timestamp of `h`, no records, no compression."""
    attributes = h.attributes & (TIMESTAMP_TYPE_LOG_APPEND | TRANSACTIONAL | CONTROL)
    out = bytearray(pack_header(h._replace(
        batch_length=_MIN_LENGTH, crc=0, attributes=attributes, base_timestamp=NO_TIMESTAMP,
        records_count=0)))
    write_crc(out, 0, len(out))
    return bytes(out)


def _encode_batch(h: BatchHeader, kept: list[ConsumedRecord], horizon: int | None) -> bytes:
    """Re-encode `kept` as the batch `h` was: same base offset and last offset delta (the
    records keep their offset deltas, with gaps), codec, producer fields, timestamp type,
    leader epoch and flags; DELETE_HORIZON with baseTimestamp = `horizon` if given."""
    log_append = bool(h.attributes & TIMESTAMP_TYPE_LOG_APPEND)
    base_ts = horizon if horizon is not None else kept[0].timestamp
    max_ts = h.max_timestamp if log_append else max(r.timestamp for r in kept)
    body = bytearray()
    for r in kept:
        append_record(body, r.offset - h.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
    codec = h.compression
    section = compression.compress(codec, body) if codec else bytes(body)
    attributes = h.attributes & ~DELETE_HORIZON
    if horizon is not None:
        attributes |= DELETE_HORIZON
    out = bytearray(pack_header(h._replace(
        batch_length=_MIN_LENGTH + len(section), crc=0, attributes=attributes,
        base_timestamp=base_ts, max_timestamp=max_ts, records_count=len(kept))))
    out += section
    write_crc(out, 0, len(out))
    return bytes(out)
