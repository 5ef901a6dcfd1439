"""The metrics HTTP listener, served by aiohttp from the broker's own event loop.

GET /metrics        Prometheus text (prometheus_client.generate_latest); OpenMetrics
                    (prometheus_client.openmetrics) when the scraper's Accept asks for
                    `application/openmetrics-text`, as Prometheus does by default
GET /metrics.json   the same samples as JSON (render.py); ?name=PREFIX (repeatable) filters
GET /healthz        liveness: 200 "ok" whenever the broker's loop answers
GET /readyz         readiness (readiness.py): 200 when serving and caught up, else 503; a
                    JSON body either way, saying why not
GET /               a one-line index
HEAD                as GET, without the body; any other method is 405, any other path 404.

Both scrape endpoints answer gzip when the request's Accept-Encoding has it (as
prometheus_client's own handlers do).

Collecting runs on the loop (collectors read live broker state, which only the loop may
touch, and cost O(partitions)); turning the collected families into text or JSON, and
compressing it, the bigger part of a scrape, runs in a worker thread on that immutable
snapshot, so the loop keeps serving clients meanwhile. Connections are kept alive between
scrapes (up to KEEPALIVE_S idle); a malformed request gets aiohttp's 400 and is logged at
debug level only (it is the client's fault, not the broker's).

aiohttp is never imported by importing this module: a broker without `metrics.port` does
not pay for loading it. With the port set, the broker loads it before opening its Kafka
listeners (load_http_framework); start() loads it in a thread if nobody did.
"""
from __future__ import annotations

import asyncio
import gzip
import importlib
import json
import logging
import sys
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder, gzip_accepted

from .render import render_json

if TYPE_CHECKING:
    from aiohttp import web

    from .readiness import ReadinessReport

log = logging.getLogger(__name__)

KEEPALIVE_S = 75.0          # idle keep-alive connections (and silent new ones) close after this
SHUTDOWN_S = 2.0            # stop() waits this long for scrapes in flight
INDEX = b"strom broker metrics: /metrics (Prometheus), /metrics.json, /healthz, /readyz\n"
NOT_FOUND = b"not found: try /metrics, /metrics.json, /healthz or /readyz\n"

Encoder = Callable[[Any], bytes]


def load_http_framework() -> None:
    """Import aiohttp (a few hundred ms of CPU and ~11 MiB). The broker calls this before
    its Kafka listeners open when `metrics.port` is set, so no client waits on the import
    and the metrics port opens right after the Kafka listeners, as it always has."""
    importlib.import_module("aiohttp.web")


class _Snapshot:
    """A registry stand-in for generate_latest: already collected families."""

    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class MetricsHttpServer:
    """`readiness`: what /readyz reports (without it, /readyz is not served)."""

    def __init__(self, host: str, port: int, collect: Callable[[], list[Metric]], broker_id: int,
                 readiness: Callable[[], ReadinessReport] | None = None):
        self.host = host
        self.port = port
        self.collect = collect
        self.broker_id = broker_id
        self.readiness = readiness
        self.scrapes = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind host:port (0: a free port, then readable as `.port`) and serve."""
        if "aiohttp.web" not in sys.modules:
            # Not loaded beforehand (load_http_framework): in a thread, so the loop keeps
            # serving clients meanwhile.
            await asyncio.to_thread(load_http_framework)
        from aiohttp import web

        app = web.Application(middlewares=[web.middleware(_policy)])
        app.add_routes([web.get("/metrics", self._metrics), web.get("/metrics.json", self._json),
                        web.get("/healthz", self._healthz), web.get("/", self._index)])
        if self.readiness is not None:
            app.add_routes([web.get("/readyz", self._readyz)])
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=KEEPALIVE_S,
                               shutdown_timeout=SHUTDOWN_S, logger=_ServerLog(log))
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port, reuse_address=True).start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, ctype = _encoder(request.headers.get("Accept", ""))
        families = self.collect()
        self.scrapes += 1
        return await _rendered(request, ctype, encoder, _Snapshot(families))

    async def _json(self, request: web.Request) -> web.Response:
        families = self.collect()
        self.scrapes += 1
        prefixes = [p for p in request.query.getall("name", []) if p] or None
        return await _rendered(request, "application/json", _json, families, self.broker_id, prefixes)

    async def _index(self, request: web.Request) -> web.Response:
        return _plain(200, INDEX)

    async def _healthz(self, request: web.Request) -> web.Response:
        # Answered by the loop itself: a loop held by a long callback does not answer.
        return _plain(200, b"ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        from aiohttp import web

        assert self.readiness is not None
        report = self.readiness()
        return web.Response(status=200 if report.ready else 503,
                            body=json.dumps(report.as_dict()).encode() + b"\n",
                            headers={"Content-Type": "application/json", "Cache-Control": "no-store"})


def _encoder(accept: str) -> tuple[Encoder, str]:
    """OpenMetrics (in the version and name escaping asked for) when Accept asks for it;
    otherwise the Prometheus text format, as this endpoint has always served it."""
    try:
        encoder, ctype = choose_encoder(accept)
    except Exception:       # a version prometheus_client cannot compare ("version=x")
        return generate_latest, CONTENT_TYPE_LATEST
    if ctype.startswith("application/openmetrics-text"):
        return encoder, ctype
    return generate_latest, CONTENT_TYPE_LATEST


async def _rendered(request: web.Request, ctype: str, render: Callable[..., bytes],
                    *args: Any) -> web.Response:
    """`render(*args)`, gzipped when the client accepts it, both in a worker thread."""
    from aiohttp import web

    compress = gzip_accepted(request.headers.get("Accept-Encoding", ""))
    body = await asyncio.get_running_loop().run_in_executor(None, _encode, compress, render, *args)
    headers = {"Content-Type": ctype, "Vary": "Accept-Encoding"}
    if compress:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


def _encode(compress: bool, render: Callable[..., bytes], *args: Any) -> bytes:
    body = render(*args)
    return gzip.compress(body) if compress else body


def _json(families: list[Metric], broker_id: int, prefixes: list[str] | None) -> bytes:
    return render_json(families, broker_id=broker_id, timestamp_ms=int(time.time() * 1000),
                       name_prefixes=prefixes)


def _plain(status: int, body: bytes, **headers: str) -> web.Response:
    from aiohttp import web

    return web.Response(status=status, body=body, headers={"Content-Type": "text/plain", **headers})


async def _policy(request: web.Request,
                  handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """The answers the listener has always given: 405 for any method but GET and HEAD (on
    any path), 404 with a hint for an unknown path, and a failing handler logged as a 500."""
    from aiohttp import web

    if request.method not in ("GET", "HEAD"):
        return _plain(405, b"GET or HEAD\n", Allow="GET, HEAD")
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _plain(404, NOT_FOUND)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("metrics request %s %s failed", request.method, request.path_qs)
        return _plain(500, b"metrics request failed\n")


class _ServerLog(logging.LoggerAdapter):
    """aiohttp's server logger. aiohttp logs every malformed request it answers 400 with
    `.exception()` (an ERROR and a traceback); those are the client's fault, so they go to
    debug here. Anything else aiohttp reports stays an error."""

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(exc, HttpProcessingError):
            self.debug(f"{msg}: %s", *args, exc, **kwargs)
        else:
            self.error(msg, *args, exc_info=exc_info, **kwargs)
