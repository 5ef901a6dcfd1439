"""The client side of the Kafka wire protocol as a sans-io state machine.

`ClientProtocol` turns requests into frames and incoming bytes into responses; it never
touches a socket, so the asyncio shell (`clients.aio.connection`) only moves bytes in and out
of it, and every framing rule is tested in microseconds.

What it owns:
  - correlation ids (int32, increasing, wrapping to 0 after 2**31 - 1);
  - the request frame: int32 size, request header of the version the API and version
    need (v0/v1/v2), body;
  - the FIFO of requests awaiting a response. A Kafka broker answers the requests of one
    connection in the order it received them, so a response must carry the correlation id
    at the head of the FIFO; anything else is a broken stream (`CorrelationIdMismatchError`);
  - response framing across arbitrary read boundaries (a frame may arrive a byte at a time
    or many frames in one read), the response header version (ApiVersions: always v0), and
    the ApiVersions fallback: a broker that does not know the requested ApiVersions version
    answers UNSUPPORTED_VERSION in the v0 body format, which is decoded as v0.

Decoded responses keep `records` fields as memoryview slices of the frame: no per-record
work happens here. After a `ProtocolError` the stream cannot be trusted and the state
machine refuses further input; the connection must be closed.

Not safe for concurrent use from several threads; one instance belongs to one connection.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Any, NamedTuple

from .framing import FrameReceiver
from .headers import skip_tagged_fields
from .messages import api as _api
from .schema import Api, Struct
from .types import DecodeError, Reader, Writer

__all__ = [
    "ClientProtocol", "InFlight", "ProtocolError", "CorrelationIdMismatchError",
    "UnexpectedResponseError", "FrameTooLargeError", "expects_response",
]

_SIZE = struct.Struct(">i")
_INT16 = struct.Struct(">h")
# A request frame's size (written last), then request header v0..v2's fixed fields:
# api key, api version, correlation id
_FRAME_HEAD = struct.Struct(">ihhi")
_API_VERSIONS_KEY = 18
_PRODUCE_KEY = 0
_UNSUPPORTED_VERSION = 35
_MAX_CORRELATION_ID = 0x7FFFFFFF
_MAX_FRAME = 0x7FFFFFFF
# A response claiming up to this is received into one buffer of its size, allocated at once
# (a fetch asks for at most fetch.max.bytes, 50 MiB by default): grown by doubling from
# FrameReceiver's 1 MiB, a 16 MiB fetch answer took five buffers and 15 MiB of copies, a
# sixth of a consumer's CPU at 1 KiB records. A broker claiming more is met by doubling.
_BIG_RESPONSE = 64 << 20


class ProtocolError(Exception):
    """The broker's byte stream cannot be understood; the connection must be closed.

    `completed` holds the responses decoded from the same `feed` or `buffer_updated` call
    before the error, so that requests already answered are not failed along with the rest.
    """

    def __init__(self, message: str, completed: list[tuple[int, Struct]] | None = None):
        super().__init__(message)
        self.completed: list[tuple[int, Struct]] = completed or []


class CorrelationIdMismatchError(ProtocolError):
    """A response's correlation id is not the one of the oldest request in flight."""

    def __init__(self, expected: int, received: int):
        super().__init__(f"correlation id mismatch: expected {expected}, received {received}")
        self.expected = expected
        self.received = received


class UnexpectedResponseError(ProtocolError):
    """A response arrived while no request was awaiting one."""


class FrameTooLargeError(ProtocolError):
    """A frame's size prefix is negative or above the configured maximum."""


class InFlight(NamedTuple):
    """A request sent and awaiting its response. (A NamedTuple: made for every request,
    at half a frozen dataclass's cost.)"""

    correlation_id: int
    api: Api
    version: int
    response_header_version: int = 0
    read: Any = None        # the response body's decoder at `version`


def expects_response(api: Api, body: Any) -> bool:
    """Whether the broker answers this request: everything but Produce with acks=0."""
    if api.key != _PRODUCE_KEY:
        return True
    acks = body.get("acks", 0) if isinstance(body, dict) else getattr(body, "acks", 0)
    return acks != 0


class ClientProtocol:
    """Encodes requests, tracks them in flight, decodes responses in order."""

    def __init__(self, client_id: str | None = "strom", *, max_frame_size: int | None = None,
                 first_correlation_id: int = 0):
        self._client_id = client_id
        # What follows the correlation id in request headers v0, v1 and v2 (client id as a
        # nullable string; v2 then its empty tagged fields): the same bytes every request.
        if client_id is None:
            tail = _INT16.pack(-1)
        else:
            encoded = client_id.encode("utf-8")
            tail = _INT16.pack(len(encoded)) + encoded
        self._header_tails = (b"", tail, tail + b"\x00")
        # (api key, version) -> (what follows the correlation id in its request header,
        # its response header's version, the body's encoder, the answer's decoder): four
        # calls into the schema a request, otherwise
        self._wire: dict[tuple[int, int], tuple[bytes, int, Any, Any]] = {}
        self.max_frame_size = max_frame_size
        self._next_cid = first_correlation_id & _MAX_CORRELATION_ID
        self._in_flight: deque[InFlight] = deque()
        # Frames shorter than a correlation id cannot be a response.
        self._receiver = FrameReceiver(_MAX_FRAME if max_frame_size is None else max_frame_size,
                                       min_size=4, big_start=_BIG_RESPONSE)
        self._error: ProtocolError | None = None

    @property
    def client_id(self) -> str | None:
        return self._client_id

    # ------------------------------------------------------------------ sending

    def encode_request(self, api: str | int | Api, body: Any, version: int, *,
                       expect_response: bool | None = None) -> tuple[int, bytes]:
        """(correlation id, frame bytes) of a request, registered as in flight when it
        expects a response. `expect_response` defaults to `expects_response(api, body)`.

        Frames must be written to the socket in the order they are encoded.
        Raises `UnsupportedVersion` (from the schema) for a version the API does not declare.
        """
        a = api if isinstance(api, Api) else _api(api)
        if expect_response is None:
            expect_response = expects_response(a, body)
        cid = self._next_cid
        wire = self._wire.get((a.key, version))
        if wire is None:
            wire = self._wire[(a.key, version)] = (   # UnsupportedVersion: nothing kept
                self._header_tails[a.request_header_version(version)],
                a.response_header_version(version), a.request_codec(version).write,
                a.response_codec(version).read)
        # The frame in one buffer: its size, the header (one pack and the client id's
        # bytes, as encode_request_header writes them), the body; the size written last.
        w = Writer(_FRAME_HEAD.pack(0, a.key, version, cid) + wire[0])
        wire[2](w, body)                    # may raise: nothing is registered yet
        frame = w.framed()
        self._next_cid = (cid + 1) & _MAX_CORRELATION_ID
        if expect_response:
            self._in_flight.append(InFlight(cid, a, version, wire[1], wire[3]))
        return cid, frame

    # ------------------------------------------------------------------ receiving

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go (`asyncio.BufferedProtocol.get_buffer`):
        a large response is received straight into a buffer of its own, never copied."""
        return self._receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> list[tuple[int, Struct]]:
        """`nbytes` were written into the last `get_buffer()`; return the responses they
        complete, in order, as (correlation id, decoded body). Raises `ProtocolError` on a
        broken stream."""
        if self._error is not None:
            raise self._error
        out: list[tuple[int, Struct]] = []
        try:
            # The decoded Struct's memoryviews (records) point into the frame, which no
            # later read overwrites: small frames are copies, large ones own their buffer.
            # Read-only for callers, as bytes would be (a writable view cannot be hashed).
            for frame in self._receiver.buffer_updated(nbytes):
                out.append(self._decode(frame if frame.readonly else frame.toreadonly()))
            size = self._receiver.error_size
            if size is not None:
                raise FrameTooLargeError(f"invalid response frame size {size}")
        except ProtocolError as e:
            e.completed = out
            self._error = e
            raise
        return out

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[int, Struct]]:
        """`buffer_updated` for bytes read elsewhere: copies `data` in and returns the
        responses it completes. Raises `ProtocolError` on a broken stream."""
        if self._error is not None:
            raise self._error
        out: list[tuple[int, Struct]] = []
        src = memoryview(data)
        pos = 0
        while pos < len(src):
            buf = self._receiver.get_buffer()
            n = min(len(buf), len(src) - pos)
            buf[:n] = src[pos:pos + n]
            try:
                out += self.buffer_updated(n)
            except ProtocolError as e:
                e.completed = out + e.completed
                raise
            pos += n
        return out

    def _decode(self, frame: memoryview) -> tuple[int, Struct]:
        r = Reader(frame)
        try:
            received = r.int32()
        except DecodeError:
            raise ProtocolError("response frame shorter than a correlation id") from None
        if not self._in_flight:
            raise UnexpectedResponseError(f"response with correlation id {received} while "
                                          "no request is in flight")
        head = self._in_flight[0]
        if received != head.correlation_id:
            raise CorrelationIdMismatchError(head.correlation_id, received)
        self._in_flight.popleft()
        a, version = head.api, head.version
        try:
            if head.response_header_version:
                skip_tagged_fields(r)       # the rest of response header v1
            if a.key == _API_VERSIONS_KEY and version > 0 and _is_unsupported_version(r):
                # The broker did not know our version and answered in the v0 format.
                version = 0
                body = a.decode_response(r, version)
            else:
                body = head.read(r)
        except DecodeError as e:
            raise ProtocolError(f"cannot decode {a.name} v{version} response "
                                f"(correlation id {received}): {e}") from e
        return received, body

    # ------------------------------------------------------------------ state

    @property
    def in_flight(self) -> int:
        """How many requests await a response."""
        return len(self._in_flight)

    def pending(self) -> list[InFlight]:
        """The requests awaiting a response, oldest first."""
        return list(self._in_flight)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return self._receiver.buffered

    @property
    def error(self) -> ProtocolError | None:
        return self._error


def _is_unsupported_version(r: Reader) -> bool:
    if r.remaining() < 2:
        return False
    return bool(_INT16.unpack_from(r.buf, r.pos)[0] == _UNSUPPORTED_VERSION)
