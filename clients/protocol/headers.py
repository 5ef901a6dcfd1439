"""Request header v0-v2 and response header v0-v1 (sans-io)."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .types import DecodeError, Reader, Writer

# api_key, api_version, correlation_id: the start of every request header version.
_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from a frame without knowing the header version."""
    if len(frame) < _HEAD.size:
        raise DecodeError(f"need {_HEAD.size} bytes at 0, only {len(frame)} left")
    return _HEAD.unpack_from(frame, 0)


def decode_request_header(r: Reader, header_version: int) -> RequestHeader:
    # Read in place, not through the Reader's methods: a broker decodes one per request,
    # and a dozen Python calls for three integers and a name were a measurable share of
    # its cost of a small request.
    buf, pos, end = r.buf, r.pos, r.end
    if pos + _HEAD.size > end:
        raise DecodeError(f"need {_HEAD.size} bytes at {pos}, only {end - pos} left")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, pos)
    pos += _HEAD.size
    client_id = None
    if header_version >= 1:
        # client_id stays a classic (int16-length) nullable string even in header v2.
        if pos + 2 > end:
            raise DecodeError(f"need 2 bytes at {pos}, only {end - pos} left")
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n >= 0:
            if pos + n > end:
                raise DecodeError(f"need {n} bytes at {pos}, only {end - pos} left")
            try:
                client_id = str(buf[pos:pos + n], "utf-8")
            except UnicodeDecodeError as e:
                raise DecodeError(f"invalid utf-8 string: {e}") from None
            pos += n
    r.pos = pos
    h = RequestHeader(api_key, api_version, correlation_id, client_id)
    if header_version >= 2:
        for _ in range(r.uvarint()):
            r.uvarint()
            r.skip(r.uvarint())
    return h


def encode_request_header(w: Writer, h: RequestHeader, header_version: int) -> None:
    w.int16(h.api_key)
    w.int16(h.api_version)
    w.int32(h.correlation_id)
    if header_version >= 1:
        w.string(h.client_id, False)
    if header_version >= 2:
        w.uvarint(0)


def encode_response_header(w: Writer, correlation_id: int, header_version: int) -> None:
    w.int32(correlation_id)
    if header_version >= 1:
        w.uvarint(0)


def decode_response_header(r: Reader, header_version: int) -> int:
    cid = r.int32()
    if header_version >= 1:
        skip_tagged_fields(r)
    return cid


def skip_tagged_fields(r: Reader) -> None:
    """Read past a tagged-field section (response header v1 keeps none that we read)."""
    for _ in range(r.uvarint()):
        r.uvarint()
        r.skip(r.uvarint())


__all__ = ["RequestHeader", "peek_api", "decode_request_header", "encode_request_header",
           "encode_response_header", "decode_response_header", "skip_tagged_fields",
           "DecodeError"]
