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

from ..stats import RequestStats
from .network import CloseConnection, ConnectionInfo, Response
from .services import ApiServices

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18


@dataclass
class RequestContext:
    header: RequestHeader
    conn: ConnectionInfo
    api: Api

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
    the broker's RequestStats (count, error codes counted by the encoder, total time)."""

    def __init__(self, services: ApiServices, stats: RequestStats):
        self.services = services
        self.stats = stats

    def __call__(self, frame: memoryview, conn: ConnectionInfo
                 ) -> Response | None | Coroutine[Any, Any, Response | None]:
        """The response now, or, when the handler must wait (it returned a coroutine, or
        is itself `async def`), a coroutine of the response (see network.Dispatch)."""
        start = time.perf_counter()
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
        ctx = RequestContext(header, conn, api)
        try:
            result = handler.fn(self.services, request, ctx)
        except Exception as e:
            result = self._failed(api, version, conn, e)
        if asyncio.iscoroutine(result):
            return self._answer_later(api, version, correlation_id, conn, result, start)
        return self._answer(api, version, correlation_id, result, start)

    async def _answer_later(self, api: Api, version: int, correlation_id: int, conn: ConnectionInfo,
                            waiting: Coroutine[Any, Any, Any], start: float) -> Response | None:
        try:
            result = await waiting
        except asyncio.CancelledError:
            raise
        except Exception as e:
            result = self._failed(api, version, conn, e)
        return self._answer(api, version, correlation_id, result, start)

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

    def _answer(self, api: Api, version: int, correlation_id: int, result: Any, start: float) -> Response | None:
        if result is None:
            self.stats.record(api.name, version, (time.perf_counter() - start) * 1000.0, {})
            return None
        counts: dict[int, int] = {}   # every error_code of the response, tallied by the encoder
        response = _encode(api, version, correlation_id, result, counts)
        self.stats.record(api.name, version, (time.perf_counter() - start) * 1000.0, counts)
        return response
