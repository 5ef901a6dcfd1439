"""The two sparse indexes of a segment, in Kafka's file formats.

Offset index (`.index`): entries `relativeOffset int32 | position int32` (8 bytes,
big-endian), relative to the segment's base offset. An entry (L, P) says "the batch that
starts at file position P has last offset base+L"; entries are strictly increasing in both.
Time index (`.timeindex`): entries `timestamp int64 | relativeOffset int32` (12 bytes); an
entry (T, O) says "the largest batch max-timestamp up to offset base+O is T"; timestamps
strictly increase, offsets never decrease.

The entries live in memory (`array`), searched with `bisect` (O(log n), in C); the file
is brought up to date by `write()` (on roll, flush, truncation and close), not on every
append. That is safe because an index is only trusted after a crash for segments below
the recovery point, which were flushed (and their indexes written) as a whole; every other
segment is recovered and its indexes rebuilt.

Not thread-safe: used from the event-loop thread only. `load`, `write` and `delete` do
blocking file I/O; everything else is in memory.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._persisted = 0          # how many of the entries the file holds

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _read_file(self) -> bytes | None:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def _pack_from(self, start: int) -> bytes:
        raise NotImplementedError

    def write(self, fsync: bool = False) -> None:
        """Make the file hold exactly the in-memory entries (appending what is new)."""
        n = len(self)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            expected = self._persisted * self.entry.size
            actual = os.fstat(fd).st_size
            if actual < expected:        # not what we wrote: start over
                self._persisted = expected = 0
            if actual != expected:
                os.ftruncate(fd, expected)
            if n > self._persisted:
                data = memoryview(self._pack_from(self._persisted))
                pos = self._persisted * self.entry.size
                while data:
                    k = os.pwrite(fd, data, pos)
                    data = data[k:]
                    pos += k
                self._persisted = n
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_IndexFile):
    entry = _OFFSET_ENTRY

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        super().__init__(path, base_offset, max_index_size)
        self._rel = array("q")
        self._pos = array("q")

    def __len__(self) -> int:
        return len(self._rel)

    def load(self) -> bool:
        """Read the file; False (and empty) if it is missing or fails the sanity check."""
        data = self._read_file()
        self._rel = array("q")
        self._pos = array("q")
        self._persisted = 0
        if data is None or len(data) % 8:
            return False
        last_rel = last_pos = -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel <= last_rel or pos <= last_pos:
                self._rel = array("q")
                self._pos = array("q")
                return False
            self._rel.append(rel)
            self._pos.append(pos)
            last_rel, last_pos = rel, pos
        self._persisted = len(self._rel)
        return True

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            return
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`, else (base, 0)."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= `position` (0 if none)."""
        i = bisect_right(self._pos, position) - 1
        return self._pos[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        if not self._rel:
            return self.base_offset, 0
        return self.base_offset + self._rel[-1], self._pos[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose offset is >= `offset`."""
        i = bisect_left(self._rel, offset - self.base_offset)
        del self._rel[i:]
        del self._pos[i:]
        self._persisted = min(self._persisted, len(self._rel))

    def reset(self) -> None:
        del self._rel[:]
        del self._pos[:]
        self._persisted = 0

    def _pack_from(self, start: int) -> bytes:
        pack = _OFFSET_ENTRY.pack
        return b"".join(pack(self._rel[i], self._pos[i]) for i in range(start, len(self._rel)))


class TimeIndex(_IndexFile):
    entry = _TIME_ENTRY

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        super().__init__(path, base_offset, max_index_size)
        self._ts = array("q")
        self._rel = array("q")

    def __len__(self) -> int:
        return len(self._ts)

    def load(self) -> bool:
        data = self._read_file()
        self._ts = array("q")
        self._rel = array("q")
        self._persisted = 0
        if data is None or len(data) % 12:
            return False
        last_ts = -(2**63)
        last_rel = -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if ts <= last_ts or rel < last_rel:
                self._ts = array("q")
                self._rel = array("q")
                return False
            self._ts.append(ts)
            self._rel.append(rel)
            last_ts, last_rel = ts, rel
        self._persisted = len(self._ts)
        return True

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        rel = offset - self.base_offset
        if self._ts and (timestamp <= self._ts[-1] or rel < self._rel[-1]):
            return
        self._ts.append(timestamp)
        self._rel.append(rel)

    def last_entry_before(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry with timestamp < `timestamp`, if any."""
        i = bisect_left(self._ts, timestamp) - 1
        if i < 0:
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def last_entry(self) -> tuple[int, int] | None:
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def truncate_to(self, offset: int) -> None:
        i = bisect_left(self._rel, offset - self.base_offset)
        del self._ts[i:]
        del self._rel[i:]
        self._persisted = min(self._persisted, len(self._ts))

    def reset(self) -> None:
        del self._ts[:]
        del self._rel[:]
        self._persisted = 0

    def _pack_from(self, start: int) -> bytes:
        pack = _TIME_ENTRY.pack
        return b"".join(pack(self._ts[i], self._rel[i]) for i in range(start, len(self._ts)))
