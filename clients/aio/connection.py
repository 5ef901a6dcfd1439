"""One TCP connection to a Kafka broker: the asyncio shell around `ClientProtocol`.

The shell only moves bytes: `request` encodes through the sans-io codec and writes the whole
frame at once (frames are never interleaved; encoding and writing happen without an await
in between, so wire order is correlation-id order); an asyncio `BufferedProtocol` lets the
kernel read straight into the codec's buffers (a large response, such as a follower's fetch
answer, lands in a buffer of its own and is never copied again) and completes the futures
of the responses the codec decodes. Framing, header versions, correlation checks and the
ApiVersions fallback all live in the codec.

Security (`security=`, a `clients.aio.security.ClientSecurity`): SSL and SASL_SSL wrap the
stream in TLS (asyncio's SSL transport feeds the same BufferedProtocol); SASL_PLAINTEXT and
SASL_SSL authenticate after ApiVersions, as Kafka's clients do: SaslHandshake v1 names the
mechanism, then SaslAuthenticate requests carry its tokens (`clients.aio.sasl_client`) until
the exchange completes. The TCP connect, the TLS handshake, ApiVersions and SASL all happen
within the connect timeout. A refused authentication raises `AuthenticationError` (the
broker's message), a failed TLS handshake `SslAuthenticationError`: both final, never a
KafkaConnectionError that callers would retry. When the broker grants the session a lifetime
(SaslAuthenticate v1+, KIP-368), `reauthenticate_at` says when to replace the connection.

Concurrency: any number of tasks may call `request` concurrently on one connection
(pipelining); the broker answers in order and the codec matches answers to requests.
Everything runs on the event loop of the task that called `connect`; not thread-safe.

Failure semantics (Kafka's): a request that gets no response within its timeout closes the
connection, because the responses queued behind it could no longer be told apart from late
ones; it raises `KafkaTimeoutError` and every other request in flight on the connection
fails with `KafkaConnectionError`. Losing the connection (EOF, reset, a stream the codec
cannot parse) fails every request in flight with `KafkaConnectionError` at once, and
`closed` becomes True. A closed connection is never reopened; use a new one (see
`clients.aio.pool`). Broker error codes inside responses are returned, not raised.
"""
from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
import socket
import ssl
from importlib import metadata
from typing import Any, Mapping

from clients.protocol.client_codec import ClientProtocol, ProtocolError, expects_response
from clients.protocol.errors import Code, for_code
from clients.protocol.messages import api as lookup_api
from clients.protocol.schema import Api, Struct, UnsupportedVersion

from .errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from .flow_control import WriteFlowControl
from .sasl_client import mechanism_client
from .security import PLAINTEXT, AuthenticationError, ClientSecurity, SslAuthenticationError

__all__ = ["BrokerConnection", "STROM_VERSION"]


def _strom_version() -> str:
    try:
        return metadata.version("strom")
    except metadata.PackageNotFoundError:
        return "0.0.0"


STROM_VERSION = _strom_version()

_API_VERSIONS = lookup_api("ApiVersions")
_SASL_HANDSHAKE = lookup_api("SaslHandshake")
_SASL_AUTHENTICATE = lookup_api("SaslAuthenticate")
_CLOSE_GRACE = 5.0  # seconds a graceful close waits for buffered bytes to leave
# A deadline this close when its timer fires is due (the loop runs a timer up to its clock
# resolution early).
_DEADLINE_SLACK = 0.001


def _resolve(api: str | int | Api) -> Api:
    return api if isinstance(api, Api) else lookup_api(api)


class _Protocol(WriteFlowControl, asyncio.BufferedProtocol):
    """The asyncio side of one connection: bytes in to the codec, write flow control."""

    def __init__(self, conn: "BrokerConnection"):
        super().__init__()
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.conn._codec.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.conn._received(nbytes)

    def eof_received(self) -> bool:
        self.conn._abort(KafkaConnectionError(
            f"connection to {self.conn.address} closed by the broker"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._lost_with = exc
        reason = f": {exc}" if exc is not None else ""
        self.conn._abort(KafkaConnectionError(f"connection to {self.conn.address} lost{reason}"))
        self.fail_writers()
        if not self.lost.done():
            self.lost.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport's buffer is below its high-water mark."""
        if self.lost.done():
            raise ConnectionResetError("connection lost")
        await self.wait_writable()


class BrokerConnection:
    """A connection to one broker, open and version-negotiated. Create with `connect`."""

    def __init__(self, host: str, port: int, *, client_id: str | None,
                 request_timeout: float | None, max_frame_size: int | None = None):
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._codec = ClientProtocol(client_id, max_frame_size=max_frame_size)
        self._protocol = _Protocol(self)
        self._futures: dict[int, asyncio.Future[Struct]] = {}
        # (deadline, sequence, future, api name, version, timeout) of requests awaiting an
        # answer within a timeout, a heap; one timer at its head's deadline (_watch)
        self._deadlines: list[tuple[float, int, asyncio.Future[Struct], str, int, float]] = []
        self._deadline_seq = 0
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._close_error: KafkaConnectionError | None = None
        self._broker_versions: dict[int, tuple[int, int]] = {}
        # api key -> version_for's answer, worked out once per connection (the broker's
        # ranges are known from the ApiVersions exchange on, and do not change)
        self._negotiated: dict[int, int] = {}
        self.api_versions_version = -1  # the ApiVersions version the broker answered
        # KIP-584: feature name -> the level the cluster finalized (ApiVersions v3+).
        self.finalized_features: dict[str, int] = {}
        self.security: ClientSecurity = PLAINTEXT
        # Loop time after which the connection should be replaced, as the broker ends the
        # authenticated session at its lifetime (KIP-368); None: never.
        self.reauthenticate_at: float | None = None
        self._lost_with: Exception | None = None   # what the transport reported, if anything

    @property
    def _transport(self) -> asyncio.Transport:
        transport = self._protocol.transport
        assert transport is not None, "not connected"
        return transport

    # ------------------------------------------------------------------ opening

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str | None = "strom",
                      timeout: float = 10.0, request_timeout: float | None = 30.0,
                      software: tuple[str, str] = ("strom", STROM_VERSION),
                      max_frame_size: int | None = None,
                      security: ClientSecurity = PLAINTEXT) -> "BrokerConnection":
        """Open a TCP connection (TCP_NODELAY), with TLS and SASL as `security` says, and
        negotiate versions with ApiVersions.

        `timeout` bounds the whole setup (connect, TLS handshake, ApiVersions, SASL);
        `request_timeout` is the default for later requests (None: wait forever). Raises
        KafkaConnectionError when the broker is unreachable or does not answer in time,
        AuthenticationError (SslAuthenticationError for TLS) when it refuses this client.
        """
        addr = f"{host}:{port}"
        conn = cls(host, port, client_id=client_id, request_timeout=request_timeout,
                   max_frame_size=max_frame_size)
        conn.security = security
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        tls = security.ssl_context
        try:
            async with asyncio.timeout(timeout):
                transport, _ = await loop.create_connection(
                    lambda: conn._protocol, host, port, ssl=tls,
                    server_hostname=host if tls is not None else None,
                    ssl_handshake_timeout=timeout if tls is not None else None)
        except TimeoutError:
            raise KafkaConnectionError(f"connecting to {addr} timed out after {timeout}s") from None
        except OSError as e:
            if _refused_by_tls(e):
                raise SslAuthenticationError(f"TLS handshake with {addr} failed: "
                                             f"{_tls_reason(e)}") from e
            raise KafkaConnectionError(f"cannot connect to {addr}: {e}") from e
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        step = "ApiVersions"
        try:
            await conn._negotiate(software, max(0.001, deadline - loop.time()))
            if security.uses_sasl:
                step = f"SASL {security.sasl_mechanism} authentication"
                await conn._authenticate(security, deadline)
        except KafkaTimeoutError as e:
            await conn.close()
            raise KafkaConnectionError(f"{addr} did not complete {step} within {timeout}s") from e
        except KafkaConnectionError as e:
            await conn.close()
            lost = conn._lost_with
            if lost is not None and _refused_by_tls(lost):
                # TLS 1.3: the broker checks our certificate after the handshake, and says
                # no with an alert that arrives on the first read.
                raise SslAuthenticationError(f"TLS session with {addr} refused: "
                                             f"{_tls_reason(lost)}") from e
            if tls is not None and conn.api_versions_version < 0:
                # Usually no alert arrives (an asyncio broker does not send it, a reset
                # discards it): the same close could be a broker going down, so it stays
                # retriable, but the message names the likely cause.
                raise KafkaConnectionError(
                    f"{e}, right after the TLS handshake (a listener with "
                    f"ssl.client.auth=required does this when it gets no certificate it "
                    f"trusts: see ssl.keystore.location)") from e
            if tls is None and conn.api_versions_version < 0:
                # Closed before answering ApiVersions: what a TLS listener does to a plaintext
                # client (or a broker going down: it stays retriable).
                raise KafkaConnectionError(
                    f"{e} before answering ApiVersions (a TLS listener? see "
                    f"security.protocol)") from e
            raise
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _negotiate(self, software: tuple[str, str], timeout: float) -> None:
        body = {"client_software_name": software[0], "client_software_version": software[1]}
        version = _API_VERSIONS.max_version
        while True:
            resp = await self.request(_API_VERSIONS, body, version=version, timeout=timeout)
            if resp.error_code == UnsupportedVersionError.code and version > 0:
                # The broker answered in v0 format with its ranges: retry at the highest
                # ApiVersions version it offers (v0 if it lists none), as Kafka clients do.
                offered = next((k.max_version for k in resp.api_keys
                                if k.api_key == _API_VERSIONS.key), 0)
                version = max(0, min(offered, version - 1))
                continue
            if resp.error_code:
                raise for_code(resp.error_code)(f"ApiVersions v{version} to {self.address}")
            self._broker_versions = {k.api_key: (k.min_version, k.max_version)
                                     for k in resp.api_keys}
            self._negotiated = {}
            self.api_versions_version = version
            if version >= 3 and resp.finalized_features_epoch >= 0:
                self.finalized_features = {f.name: f.max_version_level
                                           for f in resp.finalized_features or ()}
            return

    async def _authenticate(self, security: ClientSecurity, deadline: float) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done; every request
        bounded by `deadline` (loop time). AuthenticationError on any refusal."""
        assert security.sasl_mechanism and security.username and security.password is not None
        mechanism = security.sasl_mechanism
        loop = asyncio.get_running_loop()
        rng = self._broker_versions.get(_SASL_HANDSHAKE.key)
        try:
            auth_version = self.version_for(_SASL_AUTHENTICATE)
        except UnsupportedVersionError:
            rng = None
        if rng is None or rng[1] < 1:
            # SaslHandshake v0 would be followed by raw SASL tokens, which strom does not speak.
            raise AuthenticationError(
                f"{self.address} offers no SaslHandshake v1 / SaslAuthenticate: is its listener "
                f"{security.protocol}?")
        resp = await self.request(_SASL_HANDSHAKE, {"mechanism": mechanism},
                                  version=min(rng[1], _SASL_HANDSHAKE.max_version),
                                  timeout=max(0.001, deadline - loop.time()))
        if resp.error_code == Code.UNSUPPORTED_SASL_MECHANISM:
            raise AuthenticationError(
                f"SASL mechanism {mechanism} is not enabled on {self.address}; it offers "
                f"{', '.join(resp.mechanisms or ()) or 'none'}")
        if resp.error_code:
            raise AuthenticationError(
                f"SaslHandshake with {self.address} failed: {for_code(resp.error_code).name} "
                f"(mechanism {mechanism}; the broker offers "
                f"{', '.join(resp.mechanisms or ()) or 'none'})")
        client = mechanism_client(mechanism, security.username, security.password)
        token: bytes | None = client.first_token()
        while token is not None:
            resp = await self.request(_SASL_AUTHENTICATE, {"auth_bytes": token},
                                      version=auth_version,
                                      timeout=max(0.001, deadline - loop.time()))
            if resp.error_code:
                raise AuthenticationError(
                    resp.error_message or f"{for_code(resp.error_code).name}: {mechanism} "
                    f"authentication with {self.address} failed")
            if auth_version >= 1 and resp.session_lifetime_ms > 0:
                # Kafka's clients re-authenticate at 85-95% of the lifetime.
                self.reauthenticate_at = loop.time() + (
                    resp.session_lifetime_ms / 1000.0 * random.uniform(0.85, 0.95))
            token = client.respond(resp.auth_bytes)

    # ------------------------------------------------------------------ versions

    @property
    def broker_versions(self) -> Mapping[int, tuple[int, int]]:
        """api_key -> (min, max) as the broker advertised them."""
        return dict(self._broker_versions)

    def version_for(self, api_name: str | int | Api) -> int:
        """The highest version of the API that both this client and the broker support."""
        a = _resolve(api_name)
        version = self._negotiated.get(a.key)
        if version is not None:
            return version
        rng = self._broker_versions.get(a.key)
        if rng is None:
            raise UnsupportedVersionError(f"{self.address} does not support {a.name}")
        lo, hi = max(a.min_version, rng[0]), min(a.max_version, rng[1])
        if lo > hi:
            raise UnsupportedVersionError(
                f"{a.name}: {self.address} supports v{rng[0]}-{rng[1]}, "
                f"this client v{a.min_version}-{a.max_version}")
        self._negotiated[a.key] = hi
        return hi

    def _check_version(self, a: Api, version: int) -> None:
        if self._negotiated.get(a.key) == version:
            return          # version_for's own answer: checked when it was worked out
        if not a.supports(version):
            raise UnsupportedVersionError(f"{a.name} v{version} is not implemented by this client")
        rng = self._broker_versions.get(a.key)
        # ApiVersions is exempt: asking above the broker's range is how negotiation works.
        if a.key != _API_VERSIONS.key and self._broker_versions and (
                rng is None or not rng[0] <= version <= rng[1]):
            raise UnsupportedVersionError(f"{a.name} v{version} is not supported by {self.address}")

    # ------------------------------------------------------------------ requests

    async def request(self, api_name: str | int | Api, body: Any, version: int | None = None,
                      timeout: float | None = None) -> Struct:
        """Send a request and return its decoded response (error codes included, not raised).

        `version` None: `version_for(api_name)`. `timeout` None: the connection's
        `request_timeout`. On timeout the connection is closed (see the module docstring)
        and KafkaTimeoutError is raised; on connection loss KafkaConnectionError.
        """
        a, version, fut = self._write_request(api_name, body, version)
        if timeout is None:
            timeout = self.request_timeout
        cm = asyncio.timeout(timeout)
        try:
            async with cm:
                with contextlib.suppress(KafkaConnectionError):
                    await self._drain()  # a failed write aborts the connection, failing fut
                return await fut
        except TimeoutError:
            if not cm.expired():
                raise
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                return fut.result()  # answered in the same loop iteration the timer fired
            self._abort(KafkaConnectionError(
                f"connection to {self.address} closed: a {a.name} request timed out after "
                f"{timeout}s, so later responses could not be matched"))
            raise KafkaTimeoutError(f"{a.name} v{version} to {self.address}: no response "
                                    f"after {timeout}s; connection closed") from None

    def request_nowait(self, api_name: str | int | Api, body: Any, version: int | None = None,
                       timeout: float | None = None) -> "asyncio.Future[Struct]":
        """request() for a caller that takes the answer from a future (a done callback)
        instead of a task of its own per request, as a producer's sender does thousands of
        times a second: the frame is written now, and the future fails as request() raises
        (KafkaTimeoutError, KafkaConnectionError). Its timeout is watched by the
        connection's one deadline timer (_watch), not by a timeout context of its own. It
        does not wait while the transport's buffer is above its high-water mark: the caller
        bounds what it has in flight (a producer's max.in.flight.requests.per.connection).
        (request() keeps its timeout context: with it on the deadline timer too, a 3-broker
        cluster, whose replica fetchers call request(), measured a higher p99 in
        interleaved runs, for no reason found; docs/PERFORMANCE.md.)"""
        a, version, fut = self._write_request(api_name, body, version)
        if timeout is None:
            timeout = self.request_timeout
        if timeout is not None:
            self._watch(fut, timeout, a.name, version)
        return fut

    def _write_request(self, api_name: str | int | Api, body: Any,
                       version: int | None) -> tuple[Api, int, "asyncio.Future[Struct]"]:
        """Write a request that gets an answer: its API, version and answer's future."""
        a = _resolve(api_name)
        if version is None:
            version = self.version_for(a)
        if not expects_response(a, body):
            raise ValueError(f"{a.name} with acks=0 gets no response; use send()")
        fut = self._write_frame(a, body, version, True)
        assert fut is not None
        return a, version, fut

    def _watch(self, fut: "asyncio.Future[Struct]", timeout: float, name: str,
               version: int) -> None:
        """Fail `fut` with KafkaTimeoutError and close the connection if no answer comes
        within `timeout` seconds. One timer per connection, at the earliest deadline,
        instead of a timeout context (a timer handle in the loop's heap, compared in
        Python, and a context manager) per request."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._deadline_seq += 1
        heapq.heappush(self._deadlines, (deadline, self._deadline_seq, fut, name, version,
                                         timeout))
        if self._deadline_timer is None or deadline < self._deadline_timer.when():
            if self._deadline_timer is not None:
                self._deadline_timer.cancel()
            self._deadline_timer = loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """The deadline timer fired: drop what was answered, time out what is due, and
        wait for the next deadline."""
        self._deadline_timer = None
        heap = self._deadlines
        loop = asyncio.get_running_loop()
        while heap:
            deadline, _, fut, name, version, timeout = heap[0]
            if fut.done():
                heapq.heappop(heap)
                continue
            if deadline > loop.time() + _DEADLINE_SLACK:
                self._deadline_timer = loop.call_at(deadline, self._expire)
                return
            heapq.heappop(heap)
            fut.set_exception(KafkaTimeoutError(
                f"{name} v{version} to {self.address}: no response after {timeout}s; "
                f"connection closed"))
            self._abort(KafkaConnectionError(
                f"connection to {self.address} closed: a {name} request timed out after "
                f"{timeout}s, so later responses could not be matched"))
            return

    async def send(self, api_name: str | int | Api, body: Any, version: int | None = None) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        a = _resolve(api_name)
        if version is None:
            version = self.version_for(a)
        if expects_response(a, body):
            raise ValueError(f"{a.name} gets a response; use request()")
        self._write_frame(a, body, version, False)
        await self._drain()

    def _write_frame(self, a: Api, body: Any, version: int,
                     expect_response: bool) -> asyncio.Future[Struct] | None:
        # No await in here: the frame reaches the transport whole, in correlation-id order.
        if self._close_error is not None:
            raise KafkaConnectionError(str(self._close_error))
        self._check_version(a, version)
        try:
            cid, frame = self._codec.encode_request(a, body, version, expect_response=expect_response)
        except UnsupportedVersion as e:
            raise UnsupportedVersionError(str(e)) from None
        fut: asyncio.Future[Struct] | None = None
        if expect_response:
            fut = asyncio.get_running_loop().create_future()
            self._futures[cid] = fut
        self._transport.write(frame)
        return fut

    async def _drain(self) -> None:
        try:
            await self._protocol.drain()
        except OSError as e:
            err = KafkaConnectionError(f"connection to {self.address} lost while writing: {e}")
            self._abort(err)
            raise err from e

    # ------------------------------------------------------------------ reading

    def _received(self, nbytes: int) -> None:
        """Bytes arrived in the codec's buffer: complete the requests they answer."""
        if self._close_error is not None:
            return
        try:
            responses = self._codec.buffer_updated(nbytes)
        except ProtocolError as e:
            self._deliver(e.completed)
            self._abort(KafkaConnectionError(f"protocol error from {self.address}: {e}"))
            return
        except Exception as e:  # a bug, not the network: still fail everyone, loudly
            err = KafkaConnectionError(f"reader of {self.address} failed: {e!r}")
            err.__cause__ = e
            self._abort(err)
            return
        self._deliver(responses)

    def _deliver(self, responses: list[tuple[int, Struct]]) -> None:
        futures = self._futures
        for cid, body in responses:
            fut = futures.pop(cid, None)
            if fut is not None and not fut.done():  # done: its caller was cancelled
                fut.set_result(body)
        # Answered requests leave the deadline heap as they reach its head (answers come
        # in order), so that it does not keep their responses until the timer fires.
        heap = self._deadlines
        while heap and heap[0][2].done():
            heapq.heappop(heap)

    # ------------------------------------------------------------------ closing

    def _abort(self, error: KafkaConnectionError, graceful: bool = False) -> None:
        """Mark closed, fail every request in flight, close the transport. Idempotent."""
        if self._close_error is not None:
            return
        self._close_error = error
        futures, self._futures = self._futures, {}
        self._deadlines = []
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        for fut in futures.values():
            if not fut.done():
                err = KafkaConnectionError(str(error))
                err.__cause__ = error.__cause__
                fut.set_exception(err)
        transport = self._protocol.transport
        if transport is not None:
            if graceful:
                transport.close()
            else:
                transport.abort()

    async def close(self) -> None:
        """Close the connection; requests still in flight fail with KafkaConnectionError."""
        self._abort(KafkaConnectionError(f"connection to {self.address} was closed"), graceful=True)
        if self._protocol.transport is None:
            return
        try:
            async with asyncio.timeout(_CLOSE_GRACE):
                await asyncio.shield(self._protocol.lost)
        except TimeoutError:
            self._transport.abort()

    async def close_when_idle(self, timeout: float) -> None:
        """Close once every request in flight now has its answer (at most `timeout`
        seconds); used to retire a connection without failing what it carries."""
        pending = [f for f in self._futures.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        await self.close()

    @property
    def closed(self) -> bool:
        return self._close_error is not None

    @property
    def close_reason(self) -> KafkaConnectionError | None:
        return self._close_error

    @property
    def in_flight(self) -> int:
        """Requests sent and awaiting a response."""
        return self._codec.in_flight

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def __aenter__(self) -> "BrokerConnection":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"open, {self.in_flight} in flight"
        return f"<BrokerConnection {self.address} {state}>"


def _refused_by_tls(e: BaseException) -> bool:
    """A TLS failure that retrying cannot fix (verification, alerts, versions), as opposed
    to the connection dropping mid-handshake (a restarting broker, a plaintext port)."""
    return isinstance(e, ssl.SSLError) and not isinstance(
        e, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError))


def _tls_reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return e.verify_message or str(e)
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    return str(e)
