"""Primitive wire types of the Kafka protocol: a bounds-checked Reader and a chunked Writer.

Sans-io: nothing here touches a socket. The Reader works over a memoryview so that large
byte fields (record batches) are sliced, not copied. The Writer keeps a list of chunks so a
response can carry *deferred* byte regions (e.g. a slice of a segment file sent later with
sendfile) whose length is known now but whose bytes are never read into Python.
"""
from __future__ import annotations

import struct
import uuid as _uuid
from typing import Any, Iterable


class DecodeError(ValueError):
    """The bytes are not a valid encoding (truncated, negative length, absurd count...)."""


class DeferredBytes:
    """A byte region of known size that the transport sends itself (e.g. via sendfile).

    A base class rather than a typing.Protocol: `isinstance` runs for every chunk of every
    response, and a runtime-checkable Protocol's check walks its attributes in Python
    (it cost ~5 % of a replicating broker's CPU)."""

    __slots__ = ()

    size: int


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = _uuid.UUID(int=0)


class Reader:
    """Reads primitives from a buffer, raising DecodeError on any overrun."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        buf = memoryview(data) if not isinstance(data, memoryview) else data
        # Bytes, whatever view we are given: a signed or wider item would read as a
        # negative or huge length (the codecs index single bytes).
        self.buf = buf if buf.format == "B" else buf.cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"need {n} bytes at {p}, only {self.end - p} left")
        self.pos = p + n
        return p

    def _unpack(self, st: struct.Struct) -> Any:
        p = self._take(st.size)
        return st.unpack_from(self.buf, p)[0]

    def int8(self) -> int:
        return self._unpack(_I8)

    def int16(self) -> int:
        return self._unpack(_I16)

    def uint16(self) -> int:
        return self._unpack(_U16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def uint32(self) -> int:
        return self._unpack(_U32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def float64(self) -> float:
        return self._unpack(_F64)

    def boolean(self) -> bool:
        return self._unpack(_I8) != 0

    def uuid(self) -> _uuid.UUID:
        p = self._take(16)
        return _uuid.UUID(bytes=bytes(self.buf[p:p + 16]))

    def uvarint(self) -> int:
        value = 0
        shift = 0
        buf = self.buf
        while True:
            if self.pos >= self.end:
                raise DecodeError("truncated varint")
            b = buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise DecodeError("varint too long")

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> memoryview:
        p = self._take(n)
        return self.buf[p:p + n]

    def skip(self, n: int) -> None:
        self._take(n)

    # Length-prefixed values. `compact` means uvarint(length + 1), 0 = null.
    def _length(self, compact: bool, wide: bool = False) -> int:
        if compact:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self, compact: bool = False) -> str | None:
        n = self._length(compact)
        if n < 0:
            return None
        try:
            return str(self.raw(n), "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"invalid utf-8 string: {e}") from None

    def bytes_view(self, compact: bool = False) -> memoryview | None:
        n = self._length(compact, wide=True)
        if n < 0:
            return None
        return self.raw(n)

    def array_length(self, compact: bool = False) -> int:
        n = self._length(compact, wide=True)
        # Every element takes at least one byte; a larger count is a lie that must not
        # make us allocate or loop for billions of elements.
        if n > self.remaining():
            raise DecodeError(f"array count {n} exceeds the {self.remaining()} bytes left")
        return n


class Writer:
    """Accumulates an encoding; may hold DeferredBytes chunks between byte chunks."""

    __slots__ = ("_buf", "_chunks", "_deferred_size")

    def __init__(self, start: bytes = b"") -> None:
        self._buf = bytearray(start)
        self._chunks: list[Any] = []
        self._deferred_size = 0

    def __len__(self) -> int:
        return sum(len(c) if not isinstance(c, DeferredBytes) else c.size
                   for c in self._chunks) + len(self._buf)

    def int8(self, v: int) -> None:
        self._buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self._buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self._buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self._buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self._buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self._buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self._buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self._buf.append(1 if v else 0)

    def uuid(self, v: _uuid.UUID | bytes | None) -> None:
        if v is None:
            v = ZERO_UUID
        self._buf += v.bytes if isinstance(v, _uuid.UUID) else bytes(v)

    def uvarint(self, v: int) -> None:
        buf = self._buf
        while v >= 0x80:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def _length(self, n: int, compact: bool, wide: bool = False) -> None:
        if compact:
            self.uvarint(n + 1)
        elif wide:
            self.int32(n)
        else:
            self.int16(n)

    def string(self, v: str | None, compact: bool = False) -> None:
        if v is None:
            self._length(-1, compact)
            return
        data = v.encode("utf-8")
        self._length(len(data), compact)
        self._buf += data

    def bytes_(self, v: Any, compact: bool = False) -> None:
        """Bytes, or for `records` fields: bytes-like, DeferredBytes, or a list of them."""
        if v is None:
            self._length(-1, compact, wide=True)
            return
        if isinstance(v, (bytes, bytearray, memoryview)):
            self._length(len(v), compact, wide=True)
            self._buf += v
            return
        parts: Iterable[Any] = v if isinstance(v, (list, tuple)) else (v,)
        parts = list(parts)
        total = sum(p.size if isinstance(p, DeferredBytes) else len(p) for p in parts)
        self._length(total, compact, wide=True)
        for p in parts:
            if isinstance(p, DeferredBytes):
                if self._buf:
                    self._chunks.append(bytes(self._buf))
                    self._buf = bytearray()
                self._chunks.append(p)
            else:
                self._buf += p

    def array_length(self, n: int | None, compact: bool = False) -> None:
        self._length(-1 if n is None else n, compact, wide=True)

    def chunks(self) -> list[Any]:
        """All chunks in order: bytes and DeferredBytes objects."""
        out = list(self._chunks)
        if self._buf:
            out.append(bytes(self._buf))
        return out

    def getvalue(self) -> bytes:
        """The whole encoding as bytes; only valid when nothing is deferred."""
        if any(isinstance(c, DeferredBytes) for c in self._chunks):
            raise TypeError("encoding holds deferred chunks; use chunks()")
        return b"".join(self._chunks) + bytes(self._buf)

    def framed(self) -> bytes:
        """getvalue() of an encoding that starts with 4 bytes reserved for its size: those
        set to the length of the rest (a Kafka frame's size prefix), with one copy. The
        Writer is empty afterwards."""
        if self._chunks:        # (only a DeferredBytes starts a chunk)
            raise TypeError("encoding holds deferred chunks; use chunks()")
        out, self._buf = self._buf, bytearray()
        _I32.pack_into(out, 0, len(out) - 4)
        return bytes(out)
