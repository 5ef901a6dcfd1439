"""The listener: size-prefixed frames in, responses out in request order.

This layer only moves bytes. Each frame is handed to the dispatcher, a plain call that
returns a `Response` (a list of chunks: bytes and DeferredBytes file regions), None (acks=0
produce needs no answer), or a coroutine that will return one of those once the request
has waited for what it needs (replication, data to fetch). Requests on one connection run
concurrently, started in arrival order, and their responses are written strictly in
request order. The dispatcher does a request's state-changing work before it returns, so
requests started in order also apply their effects in order (an idempotent producer's five
in-flight batches append in sequence). Produce and Fetch are dispatched as their frame
arrives and a response goes out as soon as it is next in order, without a task or an
event-loop pass in between (_FrameProtocol); only a request that must wait gets a task.

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

Security (docs/SECURITY.md): a TLS listener wraps the same protocol in asyncio's SSL
transport, and its file regions are read and written through TLS in pieces, since sendfile
would bypass the encryption. On a SASL listener a connection is unauthenticated until
SaslAuthenticate succeeds: until then only ApiVersions, SaslHandshake and SaslAuthenticate
are served, and a frame above `sasl.server.max.receive.size` closes it, so a stranger cannot
make the broker hold large buffers (CVE-2022-34917).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import ssl
import struct
import time
from typing import Any, Callable, Coroutine

from clients.aio.flow_control import WriteFlowControl
from clients.protocol.acl import ANONYMOUS
from clients.protocol.framing import BIG_START, FrameReceiver
from clients.protocol.types import DeferredBytes

from .connection_quotas import ConnectionQuotas

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

# Per connection: how many requests may wait for their turn to be answered before we stop
# reading from that socket (backpressure keeps memory bounded per connection).
MAX_QUEUED_REQUESTS = 64
# A client that does not read the responses to its closing connection is cut off after this.
_CLOSE_GRACE_S = 5.0
# Bytes of a file region sent by direct os.sendfile calls before the rest goes through
# loop.sendfile: a fast reader could otherwise keep the loop in one region for tens of ms.
_DIRECT_SENDFILE_MAX = 4 << 20
# A region sent through TLS is read in pieces of this size, waiting for the transport to
# drain between them, so a large fetch answer does not sit in memory whole.
_TLS_READ_PIECE = 1 << 20
# A connection's first read buffer; FrameReceiver doubles it while reads fill it.
_INITIAL_SCRATCH = 16 * 1024
# What an unauthenticated connection may send: ApiVersions, SaslHandshake, SaslAuthenticate.
PRE_AUTH_API_KEYS = frozenset({18, 17, 36})


class _Pending:
    """One request of a connection, from its frame to its response being written."""

    __slots__ = ("done", "response", "error", "task", "received")

    def __init__(self, received: float) -> None:
        self.received = received    # perf_counter when its frame was read (RequestQueueTime)
        self.done = False
        self.response: Response | None = None
        self.error: BaseException | None = None
        self.task: asyncio.Task | None = None


class _RegionRest(DeferredBytes):
    """What is left of a file region after a partial sendfile."""

    __slots__ = ("file", "fileno", "position", "size")

    def __init__(self, region: Any, sent: int):
        self.file, self.fileno = region.file, region.fileno
        self.position, self.size = region.position + sent, region.size - sent


class _FrameProtocol(WriteFlowControl, asyncio.BufferedProtocol):
    """One connection: splits the byte stream into frames (see the module docstring),
    dispatches each frame as it arrives and writes the responses in request order.

    Runs on the event loop only. A frame of Produce or Fetch (the server's `eager_api_keys`)
    is dispatched at once, inside `buffer_updated`, until its first real wait, and a response
    ready in request order is written at once: an acks=1 produce or a fetch with data is
    answered in the event-loop pass its frame arrived in, and a parked one in the pass that
    wakes it (every pass of a busy loop is latency at each hop of replication). Other
    requests run as tasks in arrival order, and while one of those is unfinished, later
    frames wait their turn as tasks too, so effects still apply in request order."""

    def __init__(self, server: "KafkaServer"):
        super().__init__()
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.conn = ConnectionInfo(None, server.listener_name, server.security_protocol)
        # Buffers start small and grow with what the peer actually sends: a connection
        # costs a few KiB until it is busy, and before authentication a frame's buffer
        # grows only as its bytes arrive (a flood of connections stays cheap).
        # No spare large buffers per connection: the broker keeps freed memory for the
        # whole process (heap.retain_freed_memory), and spares would stay with every idle one.
        self.receiver = FrameReceiver(server.max_request_size, initial_scratch=_INITIAL_SCRATCH,
                                      max_spares=0)
        if not self.conn.authenticated:
            self.receiver.max_size = min(server.max_request_size, server.sasl_max_receive_size)
            self.receiver.big_start = _INITIAL_SCRATCH
        self.pending: collections.deque[_Pending] = collections.deque()
        # Frames received while MAX_QUEUED_REQUESTS are pending: dispatched as room frees.
        self.waiting: collections.deque[memoryview] = collections.deque()
        self.lazy_unfinished = 0    # requests running as tasks started in a later pass
        self.sender: asyncio.Task | None = None    # writing a response that must wait
        self.reading_paused = False     # too many requests pending: backpressure
        # KIP-219: after a throttled response, nothing is read until this loop time.
        self.muted_until = 0.0
        self._mute_timer: asyncio.TimerHandle | None = None
        self._sending: Any = None       # the RequestTimes of the response the sender writes
        self._frame_received = 0.0      # perf_counter of the read the frames being cut came in
        self.closing = False        # no more requests: answer those received, then close
        self._pumping = False       # _send_ready is running (it is re-entered by eager answers)
        self._pump_again = False
        self._close_timer: asyncio.TimerHandle | None = None
        self._close_delay_s = 0.0   # after a failed authentication (Kafka's delay)
        self.counted = False        # admitted by the server's ConnectionQuotas
        self.last_active = self.loop.time()     # of a read or an answer (idle connections)
        self.closed: asyncio.Future = self.loop.create_future()

    # -- asyncio callbacks
    def connection_made(self, transport: Any) -> None:
        # On a TLS listener asyncio calls this once the handshake is done.
        self.transport = transport
        self.conn.peer = transport.get_extra_info("peername")
        quotas = self.server.quotas
        if quotas is not None:
            refused = quotas.admit(self.server.listener_name, self.conn.host)
            if refused is not None:
                log.info("closing %s at once: %s", self.conn.peer, refused)
                self.server._accept(self, transport)
                self._abort()
                return
            self.counted = True
        if self.server.ssl_principal is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            try:
                self.conn.principal = self.server.ssl_principal(cert)
            except Exception as e:      # a DN no mapping rule accepts
                log.warning("closing %s: no principal for its certificate: %s", self.conn.peer, e)
                self.server._accept(self, transport)
                self._abort()
                return
        self.server._accept(self, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.server.bytes_in += nbytes
        self.last_active = self.loop.time()
        self._frame_received = time.perf_counter()
        # Large frames come out writable on purpose: nothing else holds their buffer, so
        # the log may patch offsets into it instead of copying it (append_as_leader).
        for frame in self.receiver.buffer_updated(nbytes):
            if self.closing:
                return
            if self.waiting or len(self.pending) >= MAX_QUEUED_REQUESTS:
                self.waiting.append(frame)      # a 256 KiB read may hold thousands
            else:
                self._dispatch(frame)
        if len(self.pending) >= MAX_QUEUED_REQUESTS and not self.reading_paused \
                and self.transport is not None and not self.closing:
            self.reading_paused = True
            self._update_reading()
        size = self.receiver.error_size
        if size is not None and not self.closing:
            log.warning("closing %s: frame of %d bytes exceeds socket.request.max.bytes=%d",
                        self.conn.peer, size, self.server.max_request_size)
            self._stop_reading()

    def eof_received(self) -> bool:
        self._stop_reading()
        # Half-closed: the answers to frames already read still go out. TLS has no half
        # close (asyncio warns and closes); there the answers go out until the close.
        return self.server.ssl_context is None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.conn.closed = True
        if self.counted and self.server.quotas is not None:
            self.counted = False
            self.server.quotas.release(self.server.listener_name, self.conn.host)
        self.fail_writers()
        for entry in self.pending:
            if entry.task is not None:
                entry.task.cancel()
        self.pending.clear()
        self.waiting.clear()
        if self.sender is not None:
            self.sender.cancel()
        if self._close_timer is not None:
            self._close_timer.cancel()
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self.server._closed(self)
        if not self.closed.done():
            self.closed.set_result(None)

    # -- requests
    def _dispatch(self, frame: memoryview) -> None:
        self.server.requests_in += 1
        received = self._frame_received
        if self.conn.state.get("sasl_raw_tokens") and self.server.raw_sasl is not None:
            self._raw_sasl_token(frame)
            return
        if not self.conn.authenticated and (
                len(frame) < 2 or (frame[0] << 8 | frame[1]) not in PRE_AUTH_API_KEYS):
            # Kafka's SaslServerAuthenticator: anything else before authentication is an
            # illegal state, answered by closing the connection.
            api_key = frame[0] << 8 | frame[1] if len(frame) >= 2 else -1
            log.info("closing %s: API key %d before SASL authentication", self.conn.peer, api_key)
            self._stop_reading()
            return
        entry = _Pending(received)
        self.pending.append(entry)
        if not self.lazy_unfinished and len(frame) >= 2 \
                and (frame[0] << 8 | frame[1]) in self.server.eager_api_keys:
            try:
                self.conn.received_at = received
                result = self.server.dispatch(frame, self.conn)
            except Exception as e:      # CloseConnection, or a bug: _send_ready closes
                entry.error = e
                self._finished(entry)
                return
            if result is None or isinstance(result, Response):
                entry.response = result
                self._finished(entry)
            else:                       # it waits: a task carries it on
                entry.task = self.loop.create_task(self._run(entry, None, result))
                # Cancelled before its first step, the task never starts the coroutine:
                # close it, or Python warns it was never awaited.
                entry.task.add_done_callback(lambda _: result.close())
        else:
            self.lazy_unfinished += 1
            entry.task = self.loop.create_task(self._run(entry, frame, None))

    def _raw_sasl_token(self, frame: memoryview) -> None:
        """After SaslHandshake v0 the SASL tokens come as bare frames, and each answer is a
        bare frame too (Kafka's pre-KIP-152 exchange); a failure closes the connection."""
        entry = _Pending(time.perf_counter())
        self.pending.append(entry)
        try:
            assert self.server.raw_sasl is not None
            entry.response = Response([self.server.raw_sasl(self.conn, bytes(frame))])
        except Exception as e:
            entry.error = CloseConnection(f"SASL authentication failed: {e}")
        self._finished(entry)

    async def _run(self, entry: _Pending, frame: memoryview | None,
                   waiting: Coroutine[Any, Any, Response | None] | None) -> None:
        """A request in a task: dispatched here (`frame`), or the rest of one dispatched
        as its frame arrived (`waiting`)."""
        try:
            if waiting is None:
                assert frame is not None
                self.conn.received_at = entry.received
                result = self.server.dispatch(frame, self.conn)
                if result is None or isinstance(result, Response):
                    entry.response = result
                else:
                    waiting = result
            if waiting is not None:
                entry.response = await waiting
        except asyncio.CancelledError as e:
            if self.closing:
                raise           # the connection is going away: nothing to answer
            entry.error = e     # something cancelled what the handler awaited: close
        except Exception as e:  # CloseConnection, or a bug: _send_ready closes
            entry.error = e
        finally:
            if frame is not None:
                self.lazy_unfinished -= 1
        entry.task = None
        self._finished(entry)

    def _finished(self, entry: _Pending) -> None:
        entry.done = True
        self.last_active = self.loop.time()
        if self.conn.state.get("close_after_answer") and not self.closing:
            # A failed SASL authentication: answer, then close after
            # connection.failed.authentication.delay.ms, as Kafka does (a client reads the
            # error before the close; a password guesser is slowed down).
            self._close_delay_s = self.server.failed_authentication_delay_s
            self._stop_reading()
        elif self.conn.authenticated and self.receiver.max_size != self.server.max_request_size:
            self.receiver.max_size = self.server.max_request_size
            self.receiver.big_start = BIG_START
        self._send_ready()

    def _stop_reading(self) -> None:
        """No more requests (end of stream, a bad frame, the server stopping): close once
        those received are answered."""
        self.closing = True
        self.conn.closed = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self._send_ready()

    # -- responses
    def _send_ready(self) -> None:
        """Write every response that is ready in request order, dispatch the frames that
        waited for room; what cannot be written without waiting (a full socket) continues
        in the sender task. Re-entered when a frame it dispatches is answered at once:
        then the outer call goes round again instead of nesting."""
        if self._pumping:
            self._pump_again = True
            return
        self._pumping = True
        try:
            self._pump_again = True
            while self._pump_again:
                self._pump_again = False
                if not self._write_ready():
                    return
                while self.waiting and len(self.pending) < MAX_QUEUED_REQUESTS \
                        and self.transport is not None and not self.transport.is_closing():
                    self._frame_received = time.perf_counter()
                    self._dispatch(self.waiting.popleft())
        finally:
            self._pumping = False
        transport = self.transport
        if transport is None or self.sender is not None:
            return
        if self.reading_paused and not self.closing and not self.waiting \
                and len(self.pending) < MAX_QUEUED_REQUESTS // 2:
            self.reading_paused = False
        self._update_reading()
        if self.closing and not self.pending and not self.waiting and not transport.is_closing() \
                and self._close_timer is None:
            if self._close_delay_s > 0:
                self._close_timer = self.loop.call_later(self._close_delay_s, self._close_now)
            else:
                self._close_now()

    # -- reading on and off: backpressure and quota mutes
    def _update_reading(self) -> None:
        """Read from the socket only while neither backpressure nor a quota mute says no.
        Never turned back on while the sender writes a response: loop.sendfile has reading
        paused and turns it back on itself when it ends, if it was on when it began."""
        transport = self.transport
        if transport is None or self.closing or transport.is_closing():
            return
        off = self.reading_paused or self.muted_until > 0.0
        if off:
            if transport.is_reading():
                transport.pause_reading()
        elif self.sender is None and not transport.is_reading():
            transport.resume_reading()

    def mute(self, throttle_ms: int) -> None:
        """KIP-219: read nothing from this connection for `throttle_ms` (a throttled
        response is going out); a longer throttle extends a mute in progress."""
        until = self.loop.time() + throttle_ms / 1000.0
        if until <= self.muted_until:
            return
        self.muted_until = until
        self.server.throttled_ms += throttle_ms
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._mute_timer = self.loop.call_at(until, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self._mute_timer = None
        self.muted_until = 0.0
        self._update_reading()

    def _close_now(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.close()
        # A client that never reads would hold the connection open forever.
        self._close_timer = self.loop.call_later(_CLOSE_GRACE_S, transport.abort)

    def _write_ready(self) -> bool:
        """Write the responses ready in order; False if the connection is being dropped."""
        transport = self.transport
        if self.sender is not None or transport is None:
            return True
        pending = self.pending
        try:
            while pending and pending[0].done:
                entry = pending.popleft()
                if entry.error is not None:
                    self._close_for(entry.error)
                    return False
                if entry.response is None or transport.is_closing():
                    continue
                rest = self._write(entry.response)
                if rest is not None or self._write_paused:
                    self._sending = entry.response.timing
                    self.sender = self.loop.create_task(self._send_rest(rest or []))
                    return True
                if entry.response.timing is not None:
                    entry.response.timing.sent(time.perf_counter())
        except _Truncated as e:
            log.warning("closing %s: %s", self.conn.peer, e)
            self._abort()
            return False
        except ConnectionError as e:
            # The peer went away (a killed follower or consumer): routine, as in _send_rest.
            log.debug("closing %s: %s", self.conn.peer, e)
            self._abort()
            return False
        except Exception:
            # An OSError of sendfile, a bug: the frame on the wire may be cut short, so
            # the stream is unusable. Close it, loudly.
            log.exception("closing %s: writing a response failed", self.conn.peer)
            self._abort()
            return False
        return True

    def _write(self, response: Response) -> list[Any] | None:
        """Write what can go out now; the chunks left (a region partly sent first), or None."""
        transport = self.transport
        assert transport is not None
        self.server.bytes_out += 4 + response.size
        self.server.responses_out += 1
        timing = response.timing
        if timing is not None:
            timing.write_start = time.perf_counter()
        if response.throttle_ms > 0:
            self.mute(response.throttle_ms)
        # Bytes chunks between file regions go out in one write each (the size prefix
        # with the first): a syscall and a TCP segment per write.
        head: list[Any] = [_SIZE.pack(response.size)]
        chunks = response.chunks
        for i, chunk in enumerate(chunks):
            if not isinstance(chunk, DeferredBytes):
                head.append(chunk)
                continue
            if self.server.ssl_context is not None:
                # TLS: the regions are read through Python in the sender task.
                transport.write(b"".join(head))
                return list(chunks[i:])
            transport.write(head[0] if len(head) == 1 else b"".join(head))
            head = []
            sent, ended = _sendfile_now(transport, chunk)
            if ended:
                raise _Truncated(f"sendfile sent {sent} of {chunk.size} bytes: the file ended")
            if sent < chunk.size:
                return [_RegionRest(chunk, sent), *chunks[i + 1:]]
        if head:
            transport.write(head[0] if len(head) == 1 else b"".join(head))
        return None

    async def _send_rest(self, chunks: list[Any]) -> None:
        """The rest of a response, waiting for the socket; then the responses behind it."""
        transport = self.transport
        assert transport is not None
        try:
            head: list[Any] = []
            for chunk in chunks:
                if not isinstance(chunk, DeferredBytes):
                    head.append(chunk)
                    continue
                if head:
                    transport.write(b"".join(head))
                    head = []
                if self.server.ssl_context is not None:
                    await _write_region(self, transport, chunk)
                    continue
                sent = await _send_region(self.loop, self, transport, chunk)
                if sent != chunk.size:
                    raise _Truncated(f"sendfile sent {sent} of {chunk.size} bytes")
            if head:
                transport.write(b"".join(head))
            await self.drain()
        except (ConnectionError, asyncio.CancelledError):
            self._abort()
            return
        except _Truncated as e:
            # The file shrank under us: the frame is now short, so the stream is
            # unusable. Dropping the connection is the only honest option.
            log.warning("closing %s: %s", self.conn.peer, e)
            self._abort()
            return
        except Exception:
            log.exception("closing %s: writing a response failed", self.conn.peer)
            self._abort()
            return
        self.sender = None
        if self._sending is not None:
            self._sending.sent(time.perf_counter())
            self._sending = None
        self._send_ready()

    async def drain(self) -> None:
        if self.transport is None or self.transport.is_closing():
            await asyncio.sleep(0)
            if self.closed.done():
                raise ConnectionResetError("connection lost")
        await self.wait_writable()

    def _close_for(self, error: BaseException) -> None:
        if isinstance(error, (CloseConnection, asyncio.CancelledError)):
            log.info("closing %s: %s", self.conn.peer, error or type(error).__name__)
        else:
            log.error("closing %s: request failed unexpectedly", self.conn.peer,
                      exc_info=(type(error), error, error.__traceback__))
        self._abort()

    def _abort(self) -> None:
        self.closing = True
        self.conn.closed = True
        if self.transport is not None:
            self.transport.abort()


class _Truncated(Exception):
    """A file region came out shorter than its size (the file shrank under us)."""


def _sendfile_now(transport: Any, region: Any) -> tuple[int, bool]:
    """os.sendfile of a region straight to the non-blocking socket, when nothing is
    buffered ahead of it, until done or the socket is full: (bytes sent, whether the file
    ended before the region did)."""
    sent = 0
    if transport.get_write_buffer_size() or transport.is_closing():
        return 0, False
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0, False
    out, fd, position, size = sock.fileno(), region.fileno, region.position, region.size
    while sent < size and sent < _DIRECT_SENDFILE_MAX:
        try:
            n = os.sendfile(out, fd, position + sent, size - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:          # end of file: the region is gone
            return sent, True
        sent += n
    return sent, False


class CloseConnection(Exception):
    """Raised by the dispatcher: the request is not answerable, drop the connection."""


class Response:
    """An encoded response frame body (header + body) as ordered chunks."""

    __slots__ = ("chunks", "size", "throttle_ms", "timing")

    def __init__(self, chunks: list[Any]):
        self.chunks = chunks
        self.throttle_ms = 0        # mute the connection this long once it is written (KIP-219)
        self.timing: Any = None     # the request's broker.stats.RequestTimes, finished when sent
        self.size = sum(c.size if isinstance(c, DeferredBytes) else len(c) for c in chunks)


# A frame -> its response, None (no answer), or an awaitable of either when it must wait.
Dispatch = Callable[[memoryview, "ConnectionInfo"], "Response | None | Coroutine[Any, Any, Response | None]"]


class ConnectionInfo:
    """What a handler may know about the connection a request came on: where from, on which
    listener, and who it is (the principal the authorizer is asked about)."""

    __slots__ = ("peer", "listener", "client_id", "closed", "state", "security_protocol",
                 "principal", "authenticated", "sasl", "received_at")

    def __init__(self, peer: Any, listener: str, security_protocol: str = "PLAINTEXT"):
        self.peer = peer
        self.listener = listener
        self.client_id: str | None = None
        self.closed = False
        self.state: dict[str, Any] = {}   # per-connection state of handlers
        self.security_protocol = security_protocol
        # PLAINTEXT and SSL connections are who they are from the start (ANONYMOUS, or the
        # client certificate's principal); a SASL one only after SaslAuthenticate succeeds.
        self.principal = ANONYMOUS
        self.authenticated = not security_protocol.startswith("SASL_")
        self.sasl: Any = None             # the SASL exchange in progress (handlers/sasl.py)
        # perf_counter when the frame being dispatched was read; the dispatcher takes it.
        self.received_at = 0.0

    @property
    def host(self) -> str:
        """The peer's IP address ("" when unknown), as ACLs name hosts."""
        return str(self.peer[0]) if isinstance(self.peer, tuple) and self.peer else ""


class KafkaServer:
    """One TCP listener bound to (host, port), serving every connection with `dispatch`.

    `eager_api_keys`: the APIs dispatched as their frame arrives, outside any task (see
    _FrameProtocol); the others are dispatched in a task of their own, so that their
    handlers may use asyncio.timeout and the like from the start."""

    def __init__(self, host: str, port: int, dispatch: Dispatch, *, listener_name: str = "PLAINTEXT",
                 max_request_size: int = 104857600, send_buffer: int = -1, receive_buffer: int = -1,
                 eager_api_keys: frozenset[int] = frozenset(), security_protocol: str = "PLAINTEXT",
                 ssl_context: ssl.SSLContext | None = None,
                 ssl_principal: Callable[[bytes | None], str] | None = None,
                 sasl_max_receive_size: int = 524288,
                 raw_sasl: Callable[["ConnectionInfo", bytes], bytes] | None = None,
                 failed_authentication_delay_ms: int = 100,
                 quotas: ConnectionQuotas | None = None, idle_timeout_ms: int = -1):
        """`ssl_context`: serve TLS (SSL and SASL_SSL listeners); `ssl_principal`: the
        principal of a client certificate (SSL listeners: who the connection is);
        `sasl_max_receive_size`: the largest frame before SASL authentication; `raw_sasl`:
        steps a connection's SASL exchange with a bare token (after SaslHandshake v0);
        `failed_authentication_delay_ms`: how long a refused connection stays open after
        its answer; `quotas`: the broker's connection limits (shared by its listeners);
        `idle_timeout_ms`: close a connection with nothing asked or answered for this long
        (connections.max.idle.ms; -1: never)."""
        self.host = host
        self.port = port
        self.dispatch = dispatch
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.ssl_context = ssl_context
        self.ssl_principal = ssl_principal
        self.sasl_max_receive_size = sasl_max_receive_size
        self.raw_sasl = raw_sasl
        self.failed_authentication_delay_s = failed_authentication_delay_ms / 1000.0
        self.quotas = quotas
        self.idle_timeout_s = idle_timeout_ms / 1000.0 if idle_timeout_ms > 0 else None
        self._idle_sweeper: asyncio.Task | None = None
        self.max_request_size = max_request_size
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.eager_api_keys = eager_api_keys
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[_FrameProtocol] = set()
        # Kafka's socket-server-metrics, read by broker.metrics at scrape time.
        self.connections_created = 0
        self.connections_closed = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.requests_in = 0
        self.responses_out = 0
        self.throttled_ms = 0       # total quota mutes of this listener's connections

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _FrameProtocol(self), self.host, self.port,
                                                reuse_address=True, ssl=self.ssl_context)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        if self.idle_timeout_s is not None:
            self._idle_sweeper = loop.create_task(self._close_idle(self.idle_timeout_s))

    async def _close_idle(self, idle_s: float) -> None:
        """Kafka's connections.max.idle.ms: a connection that asked nothing and was answered
        nothing for that long is closed (a long-polling fetch is not idle: it is pending)."""
        while True:
            await asyncio.sleep(min(idle_s / 2, 30.0))
            now = asyncio.get_running_loop().time()
            for proto in list(self._connections):
                if not proto.pending and not proto.closing and now - proto.last_active > idle_s:
                    log.debug("closing %s: idle for %.0f s", proto.conn.peer, now - proto.last_active)
                    proto._stop_reading()

    @property
    def bound_port(self) -> int:
        return self.port

    async def stop(self) -> None:
        if self._idle_sweeper is not None:
            self._idle_sweeper.cancel()
        if self._server is not None:
            self._server.close()
        protos = list(self._connections)
        for proto in protos:
            proto._stop_reading()       # what was asked is answered, then closed
        if protos:
            await asyncio.wait([p.closed for p in protos], timeout=_CLOSE_GRACE_S)
            for proto in protos:
                if not proto.closed.done():
                    proto._abort()
            await asyncio.wait([p.closed for p in protos], timeout=1)
        if self._server is not None:
            await self._server.wait_closed()

    def _accept(self, proto: _FrameProtocol, transport: Any) -> None:
        self.connections_created += 1
        self._connections.add(proto)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)

    def _closed(self, proto: _FrameProtocol) -> None:
        if proto in self._connections:
            self._connections.discard(proto)
            self.connections_closed += 1


async def _send_region(loop: asyncio.AbstractEventLoop, proto: _FrameProtocol, transport: Any,
                       region: Any) -> int:
    """Send a file region after what the transport already holds; the bytes sent.

    When the transport's buffer is empty, os.sendfile goes straight to the non-blocking
    socket until it would block: a fetch answer of a few KiB costs one syscall. Only the
    rest (a full socket) goes through loop.sendfile, which waits for writability, pauses
    reading and registers the socket with the selector for every call."""
    sent, ended = _sendfile_now(transport, region)
    if ended:
        return sent         # the caller closes: the frame can no longer be completed
    if sent < region.size:
        await proto.drain()
        sent += await loop.sendfile(transport, region.file, region.position + sent,
                                    region.size - sent, fallback=False)
    return sent


async def _write_region(proto: _FrameProtocol, transport: Any, region: Any) -> None:
    """A file region through a TLS transport: read in pieces (os.pread, no shared file
    position), each written once the transport has drained the one before."""
    position, left = region.position, region.size
    while left > 0:
        piece = os.pread(region.fileno, min(left, _TLS_READ_PIECE), position)
        if not piece:
            raise _Truncated(f"read {region.size - left} of {region.size} bytes: the file ended")
        transport.write(piece)
        position += len(piece)
        left -= len(piece)
        await proto.drain()
