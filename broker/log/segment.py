"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex` (and a
`.txnindex` once an aborted transaction ends in it, see txn_index.py).

The `.log` file is a plain concatenation of v2 record batches exactly as they go on the
wire. The segment never looks inside a batch: it reads 61-byte batch headers with
`os.pread` on the file descriptor (never `read`, never the file position) and appends whole
record sets with `os.write` on an O_APPEND descriptor. A read returns a `FileRegion`
(file, position, size) that the network layer sends with sendfile, so record bytes are
never copied into Python on the fetch path. Offset lookup is a binary search in the sparse
offset index followed by a forward scan of at most ~`index.interval.bytes` of headers.

Recovery (`recover`) is the one place that reads whole batches: it checks framing, magic,
CRC-32C and offset order batch by batch, rebuilds both indexes, and truncates the file at
the first torn or invalid batch.

A segment's files may carry a suffix after their usual names: `.cleaned` while the log
cleaner writes a replacement segment, `.swap` while that replacement is being swapped in
(Kafka's protocol, see LocalLog.replace_segments and log_loader), `.deleted` once it
left the log.

Not thread-safe: every method runs on the event-loop thread. Reads of headers (`pread`),
appends (`write` to the page cache) and index writes are blocking I/O, normally served from
the page cache; `flush` fsyncs.
"""
from __future__ import annotations

import errno
import io
import logging
import os
import struct
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD,
                                           BatchHeader, read_header)
from clients.protocol.records import read_control_marker
from clients.protocol.types import DeferredBytes
import crc32c

from .errors import CorruptMessageError, LogDirFullError, is_disk_full
from .index import OffsetIndex, TimeIndex
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 2**31 - 1
MAGIC = 2
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_LENGTH = struct.Struct(">i")
_RECOVERY_CHUNK = 1 << 20

log = logging.getLogger(__name__)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True, eq=False)
class FileRegion(DeferredBytes):
    """A byte range of a segment file, sent by the network layer.

    Send it with explicit offsets (os.sendfile / loop.sendfile(file, position, size)); the
    file object is shared by every reader of the segment, so its seek position means
    nothing. The descriptor stays open until the segment is deleted, which happens at least
    `file.delete.delay.ms` after it left the log.
    """

    file: io.FileIO
    fileno: int
    position: int
    size: int


BatchInfo = tuple[int, int, int, int]
"""(position in the appended buffer, last offset, max timestamp, size) of one batch."""


class LogSegment:
    """A segment's files and in-memory state (size, next offset, largest timestamp)."""

    def __init__(self, dir: str, base_offset: int, file: io.FileIO, index: OffsetIndex,
                 time_index: TimeIndex, index_interval_bytes: int, created_ms: int,
                 suffix: str = "", txn_index: TransactionIndex | None = None):
        self.dir = dir
        self.suffix = suffix            # "", CLEANED_SUFFIX or SWAP_SUFFIX
        self.base_offset = base_offset
        self.file = file
        self.fd = file.fileno()
        self.index = index
        self.time_index = time_index
        # Aborted transactions whose marker is in this segment (a file only once there is one).
        self.txn_index = txn_index if txn_index is not None else TransactionIndex(
            os.path.join(dir, segment_name(base_offset) + TXN_INDEX_SUFFIX + suffix), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.size = os.fstat(self.fd).st_size
        # Where the bytes not yet handed to the write-behind start (write_behind.py): what
        # the file held at open is the kernel's business.
        self.writeback_from = self.size
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.deleted = False
        self._bytes_since_index = 0
        self._next_offset: int | None = None if self.size else base_offset
        self._rolling_ts: int | None = None
        self._rolling_known = self.size == 0

    # ----------------------------------------------------------------- opening
    @classmethod
    def _paths(cls, dir: str, base_offset: int, suffix: str = "") -> tuple[str, str, str]:
        stem = os.path.join(dir, segment_name(base_offset))
        return (stem + LOG_SUFFIX + suffix, stem + INDEX_SUFFIX + suffix,
                stem + TIME_INDEX_SUFFIX + suffix)

    @classmethod
    def open(cls, dir: str, base_offset: int, index_interval_bytes: int, max_index_size: int,
             create: bool = False, created_ms: int | None = None,
             suffix: str = "") -> "LogSegment":
        """Open (or with `create`, create empty) the segment's files, named with `suffix`
        after the usual names. Indexes are not loaded: call `load_indexes()` or `recover()`."""
        log_path, index_path, time_path = cls._paths(dir, base_offset, suffix)
        f = open(log_path, "a+b", buffering=0)
        if create:
            os.ftruncate(f.fileno(), 0)
        seg = cls(dir, base_offset, f, OffsetIndex(index_path, base_offset, max_index_size),
                  TimeIndex(time_path, base_offset, max_index_size), index_interval_bytes,
                  now_ms() if created_ms is None else created_ms, suffix)
        if create:
            seg.index.write()
            seg.time_index.write()
            seg.txn_index.reset()
        return seg

    @classmethod
    def remove_files(cls, dir: str, base_offset: int) -> None:
        """Remove whatever files of the segment exist (a creation that failed halfway).
        Best effort: unlinking needs no space, and the files are empty."""
        for path in (*cls._paths(dir, base_offset),
                     os.path.join(dir, segment_name(base_offset) + TXN_INDEX_SUFFIX)):
            try:
                os.unlink(path)
            except OSError:
                pass

    def load_indexes(self) -> bool:
        """Load both index files; False if either is missing or fails the sanity check
        (then the caller runs `recover()`, which rebuilds them)."""
        if not (self.index.load() and self.time_index.load()):
            return False
        if len(self.index):
            offset, pos = self.index.last_entry()
            try:
                h = self.header_at(pos)
            except CorruptMessageError:
                return False
            if h is None or h.last_offset != offset:
                return False
        last = self.time_index.last_entry()
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        return True

    # ----------------------------------------------------------------- headers
    def header_at(self, position: int) -> BatchHeader | None:
        """The batch header at `position`, or None at (or past) the end of the data."""
        if position + HEADER_SIZE > self.size:
            return None
        data = os.pread(self.fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        h = read_header(data)
        if h.batch_length < _MIN_LENGTH or position + h.total_size > self.size:
            raise CorruptMessageError(
                f"{self.log_path}: bad batch length {h.batch_length} at position {position}")
        return h

    def batches_from(self, position: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from `position` (a batch start) to the end."""
        while True:
            h = self.header_at(position)
            if h is None:
                return
            yield position, h
            position += h.total_size

    def control_marker(self, position: int, h: BatchHeader) -> tuple[int, int]:
        """(control type, coordinator epoch) of the control batch `h` at `position`."""
        return read_control_marker(os.pread(self.fd, h.total_size, position), 0, h)

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        _, position = self.index.lookup(offset)
        for position, h in self.batches_from(position):
            if h.last_offset >= offset:
                return position, h
        return None

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when empty)."""
        if self._next_offset is None:
            nxt = self.base_offset
            for _, h in self.batches_from(self.index.last_entry()[1]):
                nxt = h.last_offset + 1
            self._next_offset = nxt
        return self._next_offset

    @property
    def log_path(self) -> str:
        return os.path.join(self.dir, segment_name(self.base_offset) + LOG_SUFFIX) + self.suffix + (
            DELETED_SUFFIX if self.deleted else "")

    @property
    def rolling_base_timestamp(self) -> int | None:
        """The first batch's max timestamp, what `segment.ms` counts from (as Kafka)."""
        if not self._rolling_known:
            h = self.header_at(0)
            self._rolling_ts = h.max_timestamp if h is not None else None
            self._rolling_known = True
        return self._rolling_ts

    @property
    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's mtime when no batch has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # ----------------------------------------------------------------- appending
    def should_roll(self, incoming_size: int, incoming_max_ts: int, incoming_last_offset: int,
                    now: int, segment_bytes: int, segment_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: size, age (`segment.ms`, measured from the first
        batch's timestamp to the incoming one, or from creation), a full index, or an
        offset that does not fit the indexes' int32 relative offsets."""
        if self.size > segment_bytes - incoming_size:
            return True
        if self.size > 0:
            rolling = self.rolling_base_timestamp
            if rolling is not None and rolling >= 0 and incoming_max_ts >= 0:
                waited = incoming_max_ts - rolling
            else:
                waited = now - self.created_ms
            if waited > segment_ms:
                return True
        if self.index.is_full or self.time_index.is_full:
            return True
        return incoming_last_offset - self.base_offset > INT32_MAX

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[BatchInfo]) -> None:
        """Append whole batches with os.write (all or nothing) and index them. A failed write
        (ENOSPC after part of the data, typically) is cut back to the last whole batch and
        re-raised; if even that fails, an EIO OSError says the file now ends in a torn batch
        (the next O_APPEND write would land after it: the dir must go offline)."""
        start = self.size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as e:
            try:
                os.ftruncate(self.fd, start)
            except OSError as undo:
                raise OSError(errno.EIO, f"{self.log_path}: a failed append ({e}) could not be cut "
                                         f"back to {start} bytes: {undo}") from e
            raise
        if start == 0 and batches:
            self._rolling_ts = batches[0][2]
            self._rolling_known = True
        self._index_batches(start, batches)
        self.size = start + len(data)
        self._next_offset = batches[-1][1] + 1

    def _index_batches(self, start: int, batches: Sequence[BatchInfo]) -> None:
        since = self._bytes_since_index
        interval = self.index_interval_bytes
        max_ts = self.max_timestamp
        off_max = self.offset_of_max_timestamp
        for pos, last, ts, size in batches:
            if ts > max_ts:
                max_ts, off_max = ts, last
            if since > interval:
                self.index.append(last, start + pos)
                if max_ts >= 0:
                    self.time_index.maybe_append(max_ts, off_max)
                since = 0
            since += size
        self._bytes_since_index = since
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = off_max

    # ----------------------------------------------------------------- reading
    def read(self, offset: int, max_size: int, max_offset: int | None,
             min_one: bool) -> FileRegion | None:
        """Whole batches from the one containing `offset`, at most `max_size` bytes (except
        with `min_one`: the first batch even if larger), only batches whose last offset is
        below `max_offset`. None if no batch here has last offset >= `offset`."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, first = found
        limit = self.size
        if max_offset is not None and max_offset < self.next_offset:
            stop = self.translate_offset(max_offset)
            if stop is not None:
                limit = stop[0]
        if start >= limit:
            end = start
        elif first.total_size > max_size:
            end = start + first.total_size if min_one else start
        elif start + max_size >= limit:
            end = limit
        else:
            end = self._boundary_at_or_before(start + max_size, start + first.total_size)
        return FileRegion(self.file, self.fd, start, end - start)

    def _boundary_at_or_before(self, position: int, low: int) -> int:
        """The largest batch boundary <= `position`, given `low` is a boundary <= it."""
        pos = max(self.index.floor_position(position), low)
        while True:
            h = self.header_at(pos)
            if h is None or pos + h.total_size > position:
                return pos
            pos += h.total_size

    def find_batch_by_timestamp(self, timestamp: int, start_offset: int) -> BatchHeader | None:
        """The first batch with max timestamp >= `timestamp` and last offset >= start_offset
        that holds records (compaction leaves empty batches, which answer nothing)."""
        entry = self.time_index.last_entry_before(timestamp)
        position = self.index.lookup(entry[1])[1] if entry is not None else 0
        for _, h in self.batches_from(position):
            if h.max_timestamp >= timestamp and h.last_offset >= start_offset and h.records_count:
                return h
        return None

    # ----------------------------------------------------------------- recovery
    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Validate every batch (framing, magic, CRC, offset order), rebuild the indexes and
        truncate at the first invalid byte. Returns the number of bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        file_size = os.fstat(self.fd).st_size
        reader = _ChunkReader(self.fd, file_size)
        pos = 0
        prev_last = self.base_offset - 1
        first_ts: int | None = None
        while pos < file_size:
            head = reader.get(pos, LOG_OVERHEAD)
            if head is None:
                break
            length = _LENGTH.unpack_from(head, 8)[0]
            if length < _MIN_LENGTH:
                break
            total = length + LOG_OVERHEAD
            buf = reader.get(pos, total)
            if buf is None:
                break
            h = read_header(buf)
            if (h.magic != MAGIC or crc32c.crc32c(buf[ATTRIBUTES_OFFSET:]) != h.crc
                    or h.base_offset <= prev_last or h.last_offset_delta < 0
                    or h.records_count < 0 or h.last_offset - self.base_offset > INT32_MAX):
                break
            if first_ts is None:
                first_ts = h.max_timestamp
            self._index_batches(pos, ((0, h.last_offset, h.max_timestamp, total),))
            if on_batch is not None:
                on_batch(h)
            prev_last = h.last_offset
            pos += total
        if pos < file_size:
            os.ftruncate(self.fd, pos)
        self.size = pos
        self.writeback_from = min(self.writeback_from, pos)
        self._next_offset = prev_last + 1
        self._rolling_ts, self._rolling_known = first_ts, True
        self.index.write()
        self.time_index.write()
        return file_size - pos

    # ----------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing `offset` and everything after it; bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.writeback_from = min(self.writeback_from, position)
        self._next_offset = None if position else self.base_offset
        self._bytes_since_index = 0
        self._recompute_max_timestamp()
        if position == 0:
            self._rolling_ts, self._rolling_known = None, True
            self.created_ms = now_ms()
        self.index.write()
        self.time_index.write()
        return removed

    def _recompute_max_timestamp(self) -> None:
        last = self.time_index.last_entry()
        ts, off = last if last is not None else (-1, -1)
        position = self.index.lookup(off)[1] if last is not None else 0
        for _, h in self.batches_from(position):
            if h.max_timestamp > ts:
                ts, off = h.max_timestamp, h.last_offset
        self.max_timestamp, self.offset_of_max_timestamp = ts, off

    # ----------------------------------------------------------------- durability / lifecycle
    def _final_time_entry(self) -> None:
        # As Kafka on roll/close: the time index's last entry holds the segment's true
        # largest timestamp, so a reload without recovery knows it.
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        """fsync the data and write + fsync the indexes (blocking). The indexes failing for
        lack of space raise LogDirFullError: they are rebuilt from the data by recovery, and
        the caller does not move the recovery point. An fsync of the data that fails (even
        ENOSPC: the kernel may have dropped the pages) is an OSError like any other."""
        os.fsync(self.fd)
        try:
            self._final_time_entry()
            self.index.write(fsync=True)
            self.time_index.write(fsync=True)
            self.txn_index.flush()
        except OSError as e:
            if is_disk_full(e):
                raise LogDirFullError(f"{self.log_path}: indexes not written: {e}") from e
            raise

    def on_become_inactive(self) -> None:
        """Called when a newer segment becomes active: bring the index files up to date."""
        self._final_time_entry()
        self.index.write()
        self.time_index.write()

    def close(self) -> None:
        if not self.file.closed:
            if not self.deleted:
                self.on_become_inactive()
            self.file.close()
        self.txn_index.close()

    def close_handlers(self) -> None:
        self.file.close()
        self.txn_index.close()

    def change_suffix(self, suffix: str) -> None:
        """Rename the three files from the current suffix to `suffix` (Kafka's
        changeFileSuffixes). The `.log` goes last: its rename is what a reopen acts on (a
        `.log.swap` means the swap was committed), so the indexes never lag behind it.
        The descriptor stays open; the caller fsyncs the directory."""
        if suffix == self.suffix:
            return
        log_path, index_path, time_path = self._paths(self.dir, self.base_offset, suffix)
        self.index.rename(index_path)
        self.time_index.rename(time_path)
        self.txn_index.rename(os.path.join(self.dir, segment_name(self.base_offset)
                                           + TXN_INDEX_SUFFIX + suffix))
        os.replace(self.log_path, log_path)
        self.suffix = suffix

    def rename_to_deleted(self) -> None:
        """Rename the files to `*.deleted`; the descriptor stays open for in-flight reads."""
        if self.deleted:
            return
        log_path = self.log_path
        os.replace(log_path, log_path + DELETED_SUFFIX)
        self.index.rename(self.index.path + DELETED_SUFFIX)
        self.time_index.rename(self.time_index.path + DELETED_SUFFIX)
        self.txn_index.rename(self.txn_index.path + DELETED_SUFFIX)
        self.deleted = True

    def delete_files(self) -> None:
        """Close the descriptor and unlink the files (under whatever name they have now)."""
        path = self.log_path
        self.file.close()
        self.txn_index.close()
        for p in (path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, dir={self.dir!r})"


class _ChunkReader:
    """pread in 1 MiB chunks for recovery, so a segment of small batches costs few calls."""

    def __init__(self, fd: int, file_size: int):
        self.fd = fd
        self.file_size = file_size
        self.start = 0
        self.buf = memoryview(b"")

    def get(self, position: int, n: int) -> memoryview | None:
        if position + n > self.file_size:
            return None
        off = position - self.start
        if off < 0 or off + n > len(self.buf):
            self.buf = memoryview(os.pread(self.fd, max(n, _RECOVERY_CHUNK), position))
            self.start = position
            off = 0
            if len(self.buf) < n:
                return None
        return self.buf[off:off + n]


class SegmentDeleter:
    """Deletes segments that left a log once `file.delete.delay.ms` has passed, so that a
    sendfile already handed a region of one still reads valid bytes. Owned by the
    LogManager (one per broker); `run_due` is called from its `tick`."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, LogSegment]] = []

    def schedule(self, segment: LogSegment, due_ms: int) -> None:
        segment.rename_to_deleted()
        self._pending.append((due_ms, segment))

    def run_due(self, now: int) -> int:
        due = [s for t, s in self._pending if t <= now]
        if due:
            self._pending = [(t, s) for t, s in self._pending if t > now]
            for seg in due:
                try:
                    seg.delete_files()
                except OSError as e:
                    # A failed log dir: its files stay until an operator replaces the disk.
                    log.warning("cannot delete %s: %s", seg.log_path, e)
        return len(due)

    def run_all(self) -> int:
        return self.run_due(2**63 - 1)

    def __len__(self) -> int:
        return len(self._pending)
