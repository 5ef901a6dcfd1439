"""The listener: size-prefixed frames in, responses out in request order.

This layer only moves bytes. Each frame is handed to the dispatcher, which returns a
`Response` (a list of chunks: bytes and DeferredBytes file regions) or None (acks=0 produce
needs no answer). Requests on one connection are dispatched concurrently as tasks started in
arrival order, and their responses are written strictly in request order. Handlers do their
state-changing work before their first await, so tasks started in order also apply their
effects in order (an idempotent producer's five in-flight batches append in sequence).

File regions go out with `loop.sendfile(..., fallback=False)`: os.sendfile from the segment
file to the socket, never read into Python.

A frame whose size is negative or above `socket.request.max.bytes`, or that the dispatcher
rejects (unknown API, undecodable header), closes that connection only.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Any, Awaitable, Callable

from clients.protocol.types import DeferredBytes

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

# Per connection: how many requests may wait for their turn to be answered before we stop
# reading from that socket (backpressure keeps memory bounded per connection).
MAX_QUEUED_REQUESTS = 64


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
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True, limit=1 << 20)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_connection(reader, writer)
        except asyncio.CancelledError:
            # Broker shutdown. Returning normally matters: asyncio's start_server callback
            # calls task.exception(), which raises (and logs a traceback) for a cancelled task.
            pass

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_created += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        conn = ConnectionInfo(writer.get_extra_info("peername"), self.listener_name)
        pending: asyncio.Queue[asyncio.Task | None] = asyncio.Queue(MAX_QUEUED_REQUESTS)
        sender = asyncio.create_task(self._send_in_order(pending, writer, conn))
        try:
            while not conn.closed:
                try:
                    head = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                size = _SIZE.unpack(head)[0]
                if size < 0 or size > self.max_request_size:
                    log.warning("closing %s: frame of %d bytes exceeds socket.request.max.bytes=%d",
                                conn.peer, size, self.max_request_size)
                    break
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                self.bytes_in += 4 + size
                self.requests_in += 1
                request_task = asyncio.create_task(self.dispatch(memoryview(frame), conn))
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
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:
                pass
            self._connections.discard(task)
            self.connections_closed += 1

    async def _send_in_order(self, pending: asyncio.Queue, writer: asyncio.StreamWriter,
                             conn: ConnectionInfo) -> None:
        loop = asyncio.get_running_loop()
        transport = writer.transport
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
                writer.write(_SIZE.pack(response.size))
                for chunk in response.chunks:
                    if isinstance(chunk, DeferredBytes):
                        await writer.drain()
                        sent = await loop.sendfile(transport, chunk.file, chunk.position,
                                                   chunk.size, fallback=False)
                        if sent != chunk.size:
                            # The file shrank under us: the frame is now short, so the
                            # stream is unusable. Dropping the connection is the only honest option.
                            log.warning("closing %s: sendfile sent %d of %d bytes", conn.peer,
                                        sent, chunk.size)
                            conn.closed = True
                            transport.abort()
                            return
                    else:
                        writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            conn.closed = True
            transport.abort()
