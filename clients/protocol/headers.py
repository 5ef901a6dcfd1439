"""Request header v0-v2 and response header v0-v1 (sans-io)."""
from __future__ import annotations

from dataclasses import dataclass

from .types import DecodeError, Reader, Writer


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from a frame without knowing the header version."""
    r = Reader(frame)
    return r.int16(), r.int16(), r.int32()


def decode_request_header(r: Reader, header_version: int) -> RequestHeader:
    h = RequestHeader(r.int16(), r.int16(), r.int32())
    if header_version >= 1:
        # client_id stays a classic (int16-length) nullable string even in header v2.
        h.client_id = r.string(False)
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
        for _ in range(r.uvarint()):
            r.uvarint()
            r.skip(r.uvarint())
    return cid


__all__ = ["RequestHeader", "peek_api", "decode_request_header", "encode_request_header",
           "encode_response_header", "decode_response_header", "DecodeError"]
