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

The scratch buffer starts at `initial_scratch` and doubles up to `scratch` whenever a read
fills it, so an idle connection (or a flood of them) costs a few KiB each while a busy one
soon reads up to `scratch` bytes a call; frames of a quarter of the scratch or more get
their own buffer while it is small.

A size below `min_size` or above `max_size` sets `error_size` and ends the stream: frames
completed before it are still returned, nothing after it is parsed.
"""
from __future__ import annotations

import struct

__all__ = ["FrameReceiver", "BIG_START"]

BIG_START = 1 << 20     # the first size of a large frame's own buffer, by default

_SIZE = struct.Struct(">i")


class FrameReceiver:
    """Splits a byte stream into frames, receiving into buffers it owns."""

    def __init__(self, max_size: int, *, min_size: int = 0, scratch: int = 256 * 1024,
                 own_buffer_at: int = 64 * 1024, big_start: int = BIG_START,
                 initial_scratch: int | None = None):
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
        self._big_got = 0
        self._big_size = 0              # the size its header claims
        self.error_size: int | None = None  # the size prefix that ended the stream

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (never empty)."""
        if self._big is not None:
            if self._big_got == len(self._big):       # full but the frame is not: grow
                grown = bytearray(min(self._big_size, 2 * len(self._big)))
                grown[:self._big_got] = self._big
                self._big = grown
            return memoryview(self._big)[self._big_got:]
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
            frame = memoryview(self._big)
            self._big = None
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
            elif size >= self.own_buffer_at:
                big = bytearray(min(size, max(self.big_start, 2 * have)))
                big[:have] = self._view[start + 4:end]
                self._big, self._big_got, self._big_size = big, have, size
                start = end = 0
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames
