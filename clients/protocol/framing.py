"""Receiving Kafka's size-prefixed frames with as few copies as Python allows (sans-io).

Both ends of a connection read the same framing: an int32 size, then that many bytes. A
`FrameReceiver` owns the buffers the socket is read into (asyncio's `BufferedProtocol`
hands `get_buffer()` to `recv_into`), so bytes are copied once, by the kernel, and frames
come out whole whatever the read boundaries:

- small frames are cut from one reused scratch buffer, as read-only `bytes` views (one copy
  out of the scratch, which is then free for the next read);
- a frame of `own_buffer_at` bytes or more gets a `bytearray` of its own that the rest of it
  is received into directly, and comes out as a writable view nobody else holds (the broker
  patches produce offsets in place). That buffer is sized for what has arrived, doubling
  from `big_start` as bytes come, so a peer that only *claims* a huge frame cannot make us
  allocate it.

Large frames' buffers are used again: the receiver keeps the last `max_spares` of them (and
no more than `max_spare_bytes` in all) and takes one whose frame nobody refers to any more
(no view of it is alive) for the next large frame. A new buffer costs more than its size
suggests: glibc hands freed megabytes back to the kernel, and each page of a new one is
faulted in again (a consumer reading 1 KiB records took ~127 page faults per 1 MiB fetch
answer, most of them zeroing the new buffer). After `_IDLE_FRAMES` small frames in a row (a
connection no longer carrying large ones) the spares are let go. The clients keep spares (a
few connections each); the broker does not (`max_spares=0`): it keeps freed memory for the
whole process instead (broker/heap.py), where spares would be held by every idle connection.

The scratch buffer starts at `initial_scratch` and doubles up to `scratch` whenever a read
fills it, so an idle connection (or a flood of them) costs a few KiB each while a busy one
soon reads up to `scratch` bytes a call; frames of a quarter of the scratch or more get
their own buffer while it is small.

A size below `min_size` or above `max_size` sets `error_size` and ends the stream: frames
completed before it are still returned, nothing after it is parsed.
"""
from __future__ import annotations

import struct
from sys import getrefcount

__all__ = ["FrameReceiver", "BIG_START"]

BIG_START = 1 << 20     # the first size of a large frame's own buffer, by default

_SIZE = struct.Struct(">i")
_IDLE_FRAMES = 64      # small frames in a row after which the spare large buffers are let go


class FrameReceiver:
    """Splits a byte stream into frames, receiving into buffers it owns."""

    def __init__(self, max_size: int, *, min_size: int = 0, scratch: int = 256 * 1024,
                 own_buffer_at: int = 64 * 1024, big_start: int = BIG_START,
                 initial_scratch: int | None = None, max_spares: int = 4,
                 max_spare_bytes: int = 64 << 20):
        self.max_size = max_size
        self.min_size = min_size
        self.scratch = scratch
        self.own_buffer_at_max = own_buffer_at
        self.big_start = big_start
        self._buf = bytearray(min(scratch, initial_scratch or scratch))
        # A frame this large is received into a buffer of its own; at most a quarter of the
        # scratch, so a partial smaller frame always leaves room in the scratch to read into.
        self.own_buffer_at = min(own_buffer_at, len(self._buf) // 4)
        self._view = memoryview(self._buf)
        self._start = 0                 # unparsed bytes are _buf[_start:_end]
        self._end = 0
        self._big: bytearray | None = None  # a large frame being received into its own buffer
        self._big_cap = 0               # how much of _big it may fill for now (a spare is larger)
        self._big_got = 0
        self._big_size = 0              # the size its header claims
        self.max_spares = max_spares
        self.max_spare_bytes = max_spare_bytes
        self._spares: list[bytearray] = []  # buffers of large frames handed out, newest last
        self._small_in_a_row = 0
        self.error_size: int | None = None  # the size prefix that ended the stream

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (never empty)."""
        if self._big is not None:
            if self._big_got == self._big_cap:       # full but the frame is not: grow
                old = self._big
                self._big_cap = min(self._big_size, 2 * self._big_cap)
                self._big = self._buffer_of(self._big_cap)
                self._big[:self._big_got] = memoryview(old)[:self._big_got]
                self._keep_spare(old)
            return memoryview(self._big)[self._big_got:self._big_cap]
        if self._start and len(self._buf) - self._end < self.own_buffer_at:
            n = self._end - self._start     # < own_buffer_at + 4: a short move
            self._buf[:n] = self._view[self._start:self._end]
            self._start, self._end = 0, n
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """`nbytes` were written into the last `get_buffer()`; the frames now complete."""
        if self._big is not None:
            self._big_got += nbytes
            if self._big_got < self._big_size:
                return []
            big, self._big = self._big, None
            frame = memoryview(big)
            if len(big) > self._big_size:
                frame = frame[:self._big_size]
            self._keep_spare(big)
            self._small_in_a_row = 0
            return [frame]
        self._end += nbytes
        filled = self._end == len(self._buf)
        frames = self._parse()
        if filled and len(self._buf) < self.scratch:
            self._grow()
        return frames

    def _grow(self) -> None:
        """Double the scratch (up to `scratch`), keeping the unparsed bytes. Frames already
        returned are copies, so nothing refers to the old buffer."""
        n = self._end - self._start
        grown = bytearray(min(self.scratch, 2 * len(self._buf)))
        grown[:n] = self._view[self._start:self._end]
        self._buf, self._view = grown, memoryview(grown)
        self._start, self._end = 0, n
        self.own_buffer_at = min(self.own_buffer_at_max, len(grown) // 4)

    @property
    def buffered(self) -> int:
        """Bytes received that are not yet part of a complete frame."""
        if self._big is not None:
            return 4 + self._big_got
        return self._end - self._start

    def _buffer_of(self, n: int) -> bytearray:
        """A buffer of at least `n` bytes: a spare that no view refers to any more, or new."""
        spares = self._spares
        for i in range(len(spares)):
            # References: the list's and getrefcount's argument; a live view of the buffer
            # (a frame, a record set sliced from it) holds one more.
            if len(spares[i]) >= n and getrefcount(spares[i]) == 2:
                return spares.pop(i)
        return bytearray(n)

    def _keep_spare(self, buf: bytearray) -> None:
        if not self.max_spares:
            return
        spares = self._spares
        spares.append(buf)
        while len(spares) > self.max_spares or (
                len(spares) > 1 and sum(map(len, spares)) > self.max_spare_bytes):
            del spares[0]

    def _parse(self) -> list[memoryview]:
        frames: list[memoryview] = []
        buf, start, end = self._buf, self._start, self._end
        while end - start >= 4 and self.error_size is None:
            size = _SIZE.unpack_from(buf, start)[0]
            if size < self.min_size or size > self.max_size:
                self.error_size = size
                break
            have = end - start - 4
            if have >= size:
                frames.append(memoryview(bytes(self._view[start + 4:start + 4 + size])))
                start += 4 + size
                self._small_in_a_row += 1
                if self._small_in_a_row >= _IDLE_FRAMES and self._spares:
                    self._spares.clear()
            elif size >= self.own_buffer_at:
                cap = min(size, max(self.big_start, 2 * have))
                big = self._buffer_of(cap)
                big[:have] = self._view[start + 4:end]
                self._big, self._big_cap, self._big_got, self._big_size = big, cap, have, size
                start = end = 0
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames
