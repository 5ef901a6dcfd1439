"""api_key -> handler. The registry is also what ApiVersions answers from, so what is
advertised is exactly what is implemented.

A handler is `fn(services, request: Struct, ctx: RequestContext) -> dict | None`, or a
coroutine of that: an `async def`, or a plain function that does its work at once and
returns a coroutine only when it must wait (Produce and Fetch, so that a request that needs
no wait is answered in the pass its frame arrived in), where `services` is the broker's ApiServices seen through the handler module's own
Protocol. It raises a `KafkaError` for a whole-request failure; the one catch-all here turns
it, or any unexpected exception, into the API's error response when the API has a top-level
error code, and otherwise closes the connection (never the broker).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine

from clients.protocol.errors import Code, KafkaError
from clients.protocol.headers import RequestHeader, decode_request_header, encode_response_header, peek_api
from clients.protocol.messages import API_BY_KEY, API_BY_NAME
from clients.protocol.schema import Api, Struct
from clients.protocol.types import DecodeError, Reader, Writer

from ..quota.service import ClientQuotas
from ..stats import RequestStats, RequestTimes
from .network import CloseConnection, ConnectionInfo, Response
from .services import ApiServices
from .throttling import RequestThrottle

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18


@dataclass
class RequestContext:
    header: RequestHeader
    conn: ConnectionInfo
    api: Api
    quotas: ClientQuotas | None = None    # the broker's client quotas (their admin APIs)

    @property
    def version(self) -> int:
        return self.header.api_version


HandlerFn = Callable[[ApiServices, Any, RequestContext], "Awaitable[Any] | Any"]


@dataclass
class Handler:
    api: Api
    min_version: int
    max_version: int
    fn: HandlerFn

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, Handler] = {}


def handles(api_name: str, versions: tuple[int, int]) -> Callable[[HandlerFn], HandlerFn]:
    """Register `fn` as the handler of `api_name` for the inclusive version range."""
    api = API_BY_NAME[api_name]
    lo, hi = versions
    if lo < api.min_version or hi > api.max_version:
        raise ValueError(f"{api_name} {versions} outside declared {api.valid}")

    def register(fn: HandlerFn) -> HandlerFn:
        REGISTRY[api.key] = Handler(api, lo, hi, fn)
        return fn
    return register


def advertised_versions() -> list[tuple[int, int, int]]:
    return sorted((h.api.key, h.min_version, h.max_version) for h in REGISTRY.values())


def _encode(api: Api, version: int, correlation_id: int, body: Any,
            error_counts: dict[int, int] | None = None) -> Response:
    w = Writer()
    encode_response_header(w, correlation_id, api.response_header_version(version))
    api.encode_response(body, version, w, error_counts)
    return Response(w.chunks())


def api_versions_fallback(correlation_id: int) -> Response:
    """UNSUPPORTED_VERSION with our ranges, in v0 format, so any client can read it."""
    api = API_BY_KEY[API_VERSIONS_KEY]
    body = {"error_code": Code.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, lo, hi in advertised_versions()]}
    return _encode(api, 0, correlation_id, body)


def error_response(api: Api, version: int, code: int, message: str | None = None) -> Struct | None:
    """The API's response with its top-level error code set, or None if it has none."""
    names = {f.name for f in api.response if f.vr and version in f.vr}
    if "error_code" not in names:
        return None
    body = api.default_response(version)
    body.error_code = code
    if "error_message" in names and message:
        body.error_message = message
    return body


class Dispatcher:
    """Decodes a frame, runs its handler, encodes the response, and records the request in
    the broker's RequestStats (count, error codes counted by the encoder, total time to the
    response being ready; the response carries its RequestTimes, which the listener finishes
    when the last byte is sent). With client quotas (`quotas`), the request is accounted
    against them (broker.server.throttling) and the response carries its throttle time,
    which the listener mutes the connection for."""

    def __init__(self, services: ApiServices, stats: RequestStats, quotas: ClientQuotas | None = None):
        self.services = services
        self.stats = stats
        self.quotas = quotas
        self.throttle = RequestThrottle(quotas.managers) if quotas is not None else None

    def __call__(self, frame: memoryview, conn: ConnectionInfo
                 ) -> Response | None | Coroutine[Any, Any, Response | None]:
        """The response now, or, when the handler must wait (it returned a coroutine, or
        is itself `async def`), a coroutine of the response (see network.Dispatch)."""
        start = time.perf_counter()
        received, conn.received_at = conn.received_at or start, 0.0
        try:
            api_key, version, correlation_id = peek_api(frame)
        except DecodeError:
            raise CloseConnection("frame too short for a request header") from None
        handler = REGISTRY.get(api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {api_key}")
        api = handler.api
        if not handler.supports(version):
            if api_key == API_VERSIONS_KEY:
                return api_versions_fallback(correlation_id)
            raise CloseConnection(f"{api.name} v{version} is not supported")
        try:
            r = Reader(frame)
            header = decode_request_header(r, api.request_header_version(version))
            request = api.decode_request(r, version)
        except DecodeError as e:
            if api_key == API_VERSIONS_KEY:
                # Kafka answers a garbled ApiVersions with INVALID_REQUEST rather than silence.
                body = error_response(api, 0, Code.INVALID_REQUEST)
                return _encode(api, 0, correlation_id, body)
            raise CloseConnection(f"cannot decode {api.name} v{version}: {e}") from None
        conn.client_id = header.client_id
        ctx = RequestContext(header, conn, api, self.quotas)
        times = RequestTimes(self.stats, api.name, received, start)
        call = _Call(api, version, correlation_id, conn, request, len(frame), times)
        try:
            result = handler.fn(self.services, request, ctx)
        except Exception as e:
            result = self._failed(api, version, conn, e)
        times.local_done = time.perf_counter()
        if asyncio.iscoroutine(result):
            return self._answer_later(call, result)
        return self._answer(call, result)

    async def _answer_later(self, call: "_Call", waiting: Coroutine[Any, Any, Any]) -> Response | None:
        try:
            result = await waiting
        except asyncio.CancelledError:
            raise
        except Exception as e:
            result = self._failed(call.api, call.version, call.conn, e)
        call.resumed = time.perf_counter()
        return self._answer(call, result)

    def _failed(self, api: Api, version: int, conn: ConnectionInfo, e: Exception) -> Any:
        """The one catch-all: a KafkaError becomes the API's error response, anything else
        UNKNOWN_SERVER_ERROR and a log line; an API without a top-level error code closes
        the connection instead."""
        if isinstance(e, CloseConnection):
            raise e
        if isinstance(e, KafkaError):
            result = error_response(api, version, e.code, e.message)
        else:
            log.exception("%s v%d from %s failed", api.name, version, conn.peer, exc_info=e)
            result = error_response(api, version, Code.UNKNOWN_SERVER_ERROR, str(e))
        if result is None:
            raise CloseConnection(f"{api.name} failed: {e!r}") from None
        return result

    def _answer(self, call: "_Call", result: Any) -> Response | None:
        api, version, times = call.api, call.version, call.times
        throttle = 0
        quota = self.throttle
        if quota is not None and quota.managers.enabled:
            # The broker's time on it: until the handler first returned, and since it woke.
            busy_s = times.local_done - times.started + time.perf_counter() - (call.resumed or times.local_done)
            throttle = quota.before_encoding(api.key, version, call.request, call.conn,
                                             call.frame_size, busy_s)
            if throttle and result is not None:
                result["throttle_time_ms"] = throttle
        if result is None:
            times.ready = time.perf_counter()
            self.stats.record(api.name, version, (times.ready - times.started) * 1000.0, {})
            times.throttle_ms = throttle
            times.write_start = times.ready
            times.sent(times.ready)
            return None
        counts: dict[int, int] = {}   # every error_code of the response, tallied by the encoder
        response = _encode(api, version, call.correlation_id, result, counts)
        if quota is not None and quota.managers.enabled:
            throttle = quota.after_encoding(api, version, call.request, call.conn, response, throttle)
        times.ready = time.perf_counter()
        times.throttle_ms = throttle
        response.throttle_ms = throttle
        response.timing = times
        self.stats.record(api.name, version, (times.ready - times.started) * 1000.0, counts)
        return response


class _Call:
    """What the answer to one request needs to know of it."""

    __slots__ = ("api", "version", "correlation_id", "conn", "request", "frame_size", "times",
                 "resumed")

    def __init__(self, api: Api, version: int, correlation_id: int, conn: ConnectionInfo,
                 request: Any, frame_size: int, times: RequestTimes):
        self.api = api
        self.version = version
        self.correlation_id = correlation_id
        self.conn = conn
        self.request = request
        self.frame_size = frame_size
        self.times = times
        self.resumed = 0.0          # perf_counter when a handler that waited was resumed
