"""The listener: size-prefixed frames in, responses out in request order.

This layer only moves bytes. Each frame is handed to the dispatcher, which returns a
`Response` (a list of chunks: bytes and DeferredBytes file regions) or None (acks=0 produce
needs no answer). Requests on one connection are dispatched concurrently as tasks started in
arrival order, and their responses are written strictly in request order. Handlers do their
state-changing work before their first await, so tasks started in order also apply their
effects in order (an idempotent producer's five in-flight batches append in sequence).

File regions go out with `loop.sendfile(..., fallback=False)`: os.sendfile from the segment
file to the socket, never read into Python.

Frames come in through `_FrameProtocol`, an asyncio BufferedProtocol around
`clients.protocol.framing.FrameReceiver` (the client's connections use the same): the
kernel copies socket bytes straight into our buffers (recv_into), small frames are cut out
of a reused 256 KiB buffer, and a large frame (a produce request) gets a buffer of its own
that the rest of it is received into, so its bytes are copied once from the kernel and
never again before os.write puts them in the log.

A frame whose size is negative or above `socket.request.max.bytes`, or that the dispatcher
rejects (unknown API, undecodable header), closes that connection only.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import struct
from typing import Any, Awaitable, Callable

from clients.aio.flow_control import WriteFlowControl
from clients.protocol.framing import FrameReceiver
from clients.protocol.types import DeferredBytes

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

# Per connection: how many requests may wait for their turn to be answered before we stop
# reading from that socket (backpressure keeps memory bounded per connection).
MAX_QUEUED_REQUESTS = 64
# Frames received but not yet dispatched before the socket stops being read.
MAX_BUFFERED_FRAMES = 16
# Bytes of a file region sent by direct os.sendfile calls before the rest goes through
# loop.sendfile: a fast reader could otherwise keep the loop in one region for tens of ms.
_DIRECT_SENDFILE_MAX = 4 << 20


class _FrameProtocol(WriteFlowControl, asyncio.BufferedProtocol):
    """Splits the byte stream into frames (see the module docstring) and implements write
    flow control for `drain()`. One per connection; runs on the event loop only."""

    def __init__(self, server: "KafkaServer"):
        super().__init__()
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.receiver = FrameReceiver(server.max_request_size)
        self.frames: collections.deque[memoryview] = collections.deque()
        self.error: str | None = None   # a frame-size violation: close after the queued frames
        self.eof = False
        self._waiter: asyncio.Future | None = None
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()

    # -- asyncio callbacks
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.server._accept(self, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.server.bytes_in += nbytes
        # Large frames come out writable on purpose: nothing else holds their buffer, so
        # the log may patch offsets into it instead of copying it (append_as_leader).
        for frame in self.receiver.buffer_updated(nbytes):
            self._push(frame)
        size = self.receiver.error_size
        if size is not None and self.error is None:
            self.error = (f"frame of {size} bytes exceeds socket.request.max.bytes="
                          f"{self.server.max_request_size}")
            if self.transport is not None:
                self.transport.pause_reading()
            self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return True     # half-closed: the answers to frames already read still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()
        self.fail_writers()
        if not self.closed.done():
            self.closed.set_result(None)

    # -- frames
    def _push(self, frame: memoryview) -> None:
        self.frames.append(frame)
        if len(self.frames) >= MAX_BUFFERED_FRAMES and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- used by the connection task
    async def next_frame(self) -> memoryview | None:
        """The next frame, or None at end of stream or after a bad frame size."""
        while not self.frames:
            if self.eof or self.error is not None:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self.frames.popleft()
        if len(self.frames) < MAX_BUFFERED_FRAMES // 2 and self.error is None \
                and self.transport is not None and not self.transport.is_reading() \
                and not self.transport.is_closing():
            self.transport.resume_reading()
        return frame

    async def drain(self) -> None:
        if self.transport is None or self.transport.is_closing():
            await asyncio.sleep(0)
            if self.closed.done():
                raise ConnectionResetError("connection lost")
        await self.wait_writable()


class CloseConnection(Exception):
    """Raised by the dispatcher: the request is not answerable, drop the connection."""


class Response:
    """An encoded response frame body (header + body) as ordered chunks."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[Any]):
        self.chunks = chunks
        self.size = sum(c.size if isinstance(c, DeferredBytes) else len(c) for c in chunks)


Dispatch = Callable[[memoryview, "ConnectionInfo"], Awaitable[Response | None]]


class ConnectionInfo:
    """What a handler may know about the connection a request came on."""

    __slots__ = ("peer", "listener", "client_id", "closed", "state")

    def __init__(self, peer: Any, listener: str):
        self.peer = peer
        self.listener = listener
        self.client_id: str | None = None
        self.closed = False
        self.state: dict[str, Any] = {}   # per-connection state (SASL, etc.)


class KafkaServer:
    """One TCP listener bound to (host, port), serving every connection with `dispatch`."""

    def __init__(self, host: str, port: int, dispatch: Dispatch, *, listener_name: str = "PLAINTEXT",
                 max_request_size: int = 104857600, send_buffer: int = -1, receive_buffer: int = -1):
        self.host = host
        self.port = port
        self.dispatch = dispatch
        self.listener_name = listener_name
        self.max_request_size = max_request_size
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        # Kafka's socket-server-metrics, read by broker.metrics at scrape time.
        self.connections_created = 0
        self.connections_closed = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.requests_in = 0
        self.responses_out = 0

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _FrameProtocol(self), self.host, self.port,
                                                reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    @property
    def bound_port(self) -> int:
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._connections):
            t.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _accept(self, proto: _FrameProtocol, transport: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(proto, transport))
        self._connections.add(task)

    async def _serve(self, proto: _FrameProtocol, transport: Any) -> None:
        try:
            await self._serve_connection(proto, transport)
        except asyncio.CancelledError:
            # Broker shutdown: the connection is closed below; nothing else to report.
            pass
        finally:
            self._connections.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _serve_connection(self, proto: _FrameProtocol, transport: Any) -> None:
        self.connections_created += 1
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        conn = ConnectionInfo(transport.get_extra_info("peername"), self.listener_name)
        pending: asyncio.Queue[asyncio.Task | None] = asyncio.Queue(MAX_QUEUED_REQUESTS)
        sender = asyncio.create_task(self._send_in_order(pending, proto, transport, conn))
        try:
            while not conn.closed:
                frame = await proto.next_frame()
                if frame is None:
                    if proto.error is not None:
                        log.warning("closing %s: %s", conn.peer, proto.error)
                    break
                self.requests_in += 1
                request_task = asyncio.create_task(self.dispatch(frame, conn))
                await pending.put(request_task)
                if sender.done():
                    break
        finally:
            conn.closed = True
            if not sender.done():
                try:
                    pending.put_nowait(None)
                except asyncio.QueueFull:
                    sender.cancel()
                try:
                    await sender
                except (asyncio.CancelledError, Exception):
                    pass
            while not pending.empty():
                t = pending.get_nowait()
                if t is not None:
                    t.cancel()
            transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(proto.closed), 5)
            except Exception:
                transport.abort()
            self.connections_closed += 1

    async def _send_in_order(self, pending: asyncio.Queue, proto: _FrameProtocol, transport: Any,
                             conn: ConnectionInfo) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                request_task = await pending.get()
                if request_task is None:
                    return
                try:
                    response = await request_task
                except CloseConnection as e:
                    log.info("closing %s: %s", conn.peer, e)
                    conn.closed = True
                    transport.abort()
                    return
                except Exception:
                    log.exception("closing %s: request failed unexpectedly", conn.peer)
                    conn.closed = True
                    transport.abort()
                    return
                if response is None or transport.is_closing():
                    continue
                self.bytes_out += 4 + response.size
                self.responses_out += 1
                # Bytes chunks between file regions go out in one write each (the size
                # prefix with the first): a syscall and a TCP segment per write.
                head: list[Any] = [_SIZE.pack(response.size)]
                for chunk in response.chunks:
                    if not isinstance(chunk, DeferredBytes):
                        head.append(chunk)
                        continue
                    transport.write(head[0] if len(head) == 1 else b"".join(head))
                    head = []
                    sent = await _send_region(loop, proto, transport, chunk)
                    if sent != chunk.size:
                        # The file shrank under us: the frame is now short, so the
                        # stream is unusable. Dropping the connection is the only honest option.
                        log.warning("closing %s: sendfile sent %d of %d bytes", conn.peer,
                                    sent, chunk.size)
                        conn.closed = True
                        transport.abort()
                        return
                if head:
                    transport.write(head[0] if len(head) == 1 else b"".join(head))
                await proto.drain()
        except (ConnectionError, asyncio.CancelledError):
            conn.closed = True
            transport.abort()
        except Exception:
            # Anything else while writing (an OSError of sendfile, a bug): the frame on the
            # wire may be cut short, so the stream is unusable. Close it, loudly.
            log.exception("closing %s: writing a response failed", conn.peer)
            conn.closed = True
            transport.abort()
        finally:
            # Nothing takes from `pending` after this: the reader may be waiting for room
            # in it, so empty it (the connection is done) and let that put finish.
            while not pending.empty():
                t = pending.get_nowait()
                if t is not None:
                    t.cancel()


async def _send_region(loop: asyncio.AbstractEventLoop, proto: _FrameProtocol, transport: Any,
                       region: Any) -> int:
    """Send a file region after what the transport already holds; the bytes sent.

    When the transport's buffer is empty, os.sendfile goes straight to the non-blocking
    socket until it would block: a fetch answer of a few KiB costs one syscall. Only the
    rest (a full socket) goes through loop.sendfile, which waits for writability, pauses
    reading and registers the socket with the selector for every call."""
    sent = 0
    size = region.size
    if not transport.get_write_buffer_size() and not transport.is_closing():
        sock = transport.get_extra_info("socket")
        if sock is not None:
            out, fd, position = sock.fileno(), region.fileno, region.position
            while sent < size and sent < _DIRECT_SENDFILE_MAX:
                try:
                    n = os.sendfile(out, fd, position + sent, size - sent)
                except (BlockingIOError, InterruptedError):
                    break
                if n == 0:          # end of file: the region is gone, the caller closes
                    return sent
                sent += n
    if sent < size:
        await proto.drain()
        sent += await loop.sendfile(transport, region.file, region.position + sent,
                                    size - sent, fallback=False)
    return sent
