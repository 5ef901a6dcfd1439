"""The REST proxy's HTTP server on aiohttp: the routes of the v3 and v2 resources, the
answers Confluent's proxy gives outside them, and one middleware for errors.

The middleware writes every error as `{"error_code": ..., "message": ...}`:
- a handler's `RestError` with its status, code and headers;
- a Kafka error by rest-utils' KafkaExceptionMapper (`errors.from_kafka`);
- aiohttp's own answers as JAX-RS words them (404 "HTTP 404 Not Found", 405, 413 for a
  body over `MAX_BODY_BYTES`), the status as the code;
- anything else as a logged 500.
Errors under `/v3` are `application/json`, the rest `application/vnd.kafka.v2+json`, as
each API's resources produce.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from clients.aio.errors import KafkaClientError
from clients.http_listeners import parse_listener, start_sites
from clients.protocol.errors import KafkaError
from clients.rest.bodies import JSON, V2, error_response, json_response
from clients.rest.config import RestProxyConfig
from clients.rest.errors import RestError, from_kafka
from clients.rest.kafka import ClientPool
from clients.rest.v2_consumers import V2ConsumersResource
from clients.rest.v2_topics import V2TopicsResource
from clients.rest.v3_admin import V3AdminResource
from clients.rest.v3_records import V3RecordsResource

__all__ = ["RestProxyServer", "MAX_BODY_BYTES"]

log = logging.getLogger("strom.rest")

# A body above this is 413 before any handler reads it. Records above the producer's
# max.request.size are refused by the produce routes with Confluent's per-API answer.
MAX_BODY_BYTES = 64 * 1024 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Resource(Protocol):
    def routes(self) -> list[web.RouteDef]: ...

    async def close(self) -> None: ...


class RestProxyServer:
    """One proxy: `app` is usable without `start()` (aiohttp's TestServer); `start()` binds
    the listeners (port 0: a free port, then readable as `.port`) and `stop()` closes them,
    the consumer instances and the Kafka clients."""

    def __init__(self, config: RestProxyConfig, pool: ClientPool | None = None):
        self.config = config
        self.listeners = [parse_listener(x) for x in config.listeners]
        self.pool = pool or ClientPool(config)
        self.resources: list[Resource] = []
        if config.api_v3_enable:
            self.resources += [V3AdminResource(self.pool, config), V3RecordsResource(self.pool, config)]
        if config.api_v2_enable:
            self.resources += [V2TopicsResource(self.pool, config), V2ConsumersResource(self.pool, config)]
        self.app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        self.app.add_routes([web.get("/", self.root)])
        for resource in self.resources:
            self.app.add_routes(resource.routes())
        self.app.on_cleanup.append(self._close)
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None

    @property
    def port(self) -> int:
        return self._bound_port if self._bound_port is not None else self.listeners[0][1]

    @property
    def url(self) -> str:
        host = self.listeners[0][0]
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        # No access log: a line per request costs more than a small produce request itself
        # (measured: ~1 s of 4,700 one-record POSTs); errors are still logged.
        runner = web.AppRunner(self.app, shutdown_timeout=5.0, access_log=None)
        await runner.setup()
        self._bound_port = await start_sites(runner, self.listeners)
        self._runner = runner
        log.info("REST proxy listening at %s", ", ".join(f"http://{h}:{p}" for h, p in self.listeners))

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()      # runs on_cleanup: the resources and the pool

    async def _close(self, app: web.Application) -> None:
        for resource in self.resources:
            try:
                await resource.close()
            except Exception:
                log.exception("closing %s failed", type(resource).__name__)
        await self.pool.close()

    async def root(self, request: web.Request) -> web.Response:
        """Confluent's RootResource: an empty JSON object (a liveness probe)."""
        return json_response({}, content_type=V2)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        content_type = JSON if request.path.startswith("/v3") else V2
        try:
            # The principal is checked first (401 without credentials under BASIC) and
            # counted as in use until the answer is written, streams included.
            async with self.pool.using(request):
                return await handler(request)
        except RestError as e:
            return error_response(e.status, e.error_code, e.message, content_type, e.headers)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            headers = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else None
            return error_response(e.status, e.status, f"HTTP {e.status} {e.reason}", content_type, headers)
        except (KafkaError, KafkaClientError) as e:
            r = from_kafka(e)
            return error_response(r.status, r.error_code, r.message, content_type)
        except Exception:
            log.exception("Uncaught exception in REST call to %s %s", request.method, request.path)
            return error_response(500, 500, "Internal Server Error", content_type)
