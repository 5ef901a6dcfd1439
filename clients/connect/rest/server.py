"""Kafka Connect's REST API on aiohttp: the routes of Kafka's RootResource, ConnectorsResource,
ConnectorPluginsResource and LoggingResource, `/health` (KIP-1017), Kafka's error bodies, and
the forwarding of a request to the group's leader.

One middleware holds the policy every route shares:
- every error is `{"error_code": <status>, "message": ...}` with that status: the herder's
  `ConnectRestError`s by their `.status`, aiohttp's own (404 unknown path, 405 wrong method,
  413 body over 10 MiB), and any other exception as a logged 500;
- a handler that runs past `request_timeout` answers 500 "Request timed out", as Kafka does;
- `NotLeaderError(msg, leader_url)` sends the same request to the leader and answers with the
  leader's status and body. As in Kafka, `?forward` counts the hops: a request without it is
  sent on with `forward=true`, one with `forward=true` is sent on with `forward=false`, and one
  with `forward=false` (or no leader known) is answered 409.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Iterable

import aiohttp
from aiohttp import web
from multidict import MultiDict
from yarl import URL

from clients.connect.errors import ConflictError, ConnectRestError, NotLeaderError
from clients.connect.rest.bodies import error_response, json_response
from clients.connect.rest.loggers import LoggingResource
from clients.connect.rest.resources import ConnectorPluginsResource, ConnectorsResource
from clients.connect.runtime.herder import Herder
from clients.http_listeners import parse_listener, start_sites

__all__ = ["ConnectRestServer", "parse_listener", "MAX_BODY_BYTES", "REQUEST_TIMEOUT_S"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 10 * 1024 * 1024
REQUEST_TIMEOUT_S = 90.0            # Kafka's ConnectorsResource.REQUEST_TIMEOUT_MS
HEALTHY = {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}
STARTING = {"status": "starting", "message": "Worker is still starting up."}
UNHEALTHY_MESSAGE = "Worker was unable to handle a request in time and may be unable to handle others: "
HEALTH_TIMEOUT_S = 10.0
CONFLICT_MESSAGE = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
NO_LEADER_MESSAGE = ("Cannot complete request momentarily due to no known leader URL, "
                     "likely because a rebalance was underway.")
_FORWARDED_REQUEST_HEADERS = ("Content-Type", "Accept", "Authorization")
_FORWARDED_ANSWER_HEADERS = ("Content-Type", "Location")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConnectRestServer:
    """The REST API of one worker. `app` is usable without `start()` (aiohttp's TestServer);
    `start()` binds the listeners (port 0: a free port, then readable as `.port`) and
    `stop()` closes them. The client session used to forward requests is opened and closed
    with the application (its startup and cleanup signals)."""

    def __init__(self, herder: Herder, listeners: list[str], advertised_url: str | None,
                 version: str, commit: str, extra_routes: Iterable[web.AbstractRouteDef] | None = None,
                 *, request_timeout: float = REQUEST_TIMEOUT_S):
        if not listeners:
            raise ValueError("at least one listener is required")
        self.herder = herder
        self.listeners = [parse_listener(x) for x in listeners]
        self.advertised_url = advertised_url
        self.version = version
        self.commit = commit
        self.request_timeout = request_timeout
        self._bound_port: int | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.ready = True           # the worker sets False before start(), True once started
        self.app = web.Application(middlewares=[self._middleware], client_max_size=MAX_BODY_BYTES)
        self.app.add_routes([web.get("/", self.server_info), web.get("/health", self.health)])
        self.app.add_routes(ConnectorsResource(herder).routes())
        self.app.add_routes(ConnectorPluginsResource(herder).routes())
        self.app.add_routes(LoggingResource().routes())
        if extra_routes is not None:
            self.app.add_routes(extra_routes)
        self.app.on_startup.append(self._open_session)
        self.app.on_cleanup.append(self._close_session)

    @property
    def port(self) -> int:
        """The first listener's port: the bound one once started (port 0 resolved)."""
        return self._bound_port if self._bound_port is not None else self.listeners[0][1]

    @property
    def url(self) -> str:
        """The advertised URL, else `http://<host>:<port>/` of the first listener (the
        machine's host name when it listens on every interface), as Kafka's advertisedUrl."""
        if self.advertised_url:
            return self.advertised_url
        host = self.listeners[0][0]
        if host in ("0.0.0.0", "::"):
            host = socket.gethostname()
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/"

    async def start(self) -> None:
        """Bind every listener; answers requests from then on."""
        runner = web.AppRunner(self.app, shutdown_timeout=10.0)
        await runner.setup()
        self._bound_port = await start_sites(runner, self.listeners)
        self._runner = runner
        log.info("REST server listening at %s, advertising %s", self.listeners, self.url)

    async def stop(self) -> None:
        """Close the listeners (waiting briefly for requests in flight) and the forwarding session."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _open_session(self, app: web.Application) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))

    async def _close_session(self, app: web.Application) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def server_info(self, request: web.Request) -> web.Response:
        return json_response({"version": self.version, "commit": self.commit,
                              "kafka_cluster_id": self.herder.kafka_cluster_id})

    async def health(self, request: web.Request) -> web.Response:
        """KIP-1017: 200 "healthy" when the herder answers a cheap request within
        HEALTH_TIMEOUT_S, else 500 "unhealthy" with the reason (a probe for liveness checks)."""
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await self.herder.connectors()
        except Exception as e:
            reason = "it timed out" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
            return json_response({"status": "unhealthy", "message": UNHEALTHY_MESSAGE + reason}, 500)
        return json_response(HEALTHY)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.ready:
            # The listener opens before the herder has started (the worker's id needs the
            # bound port); until then every request gets 503, as KIP-1017's "starting".
            if request.path == "/health":
                return json_response(STARTING, 503)
            return error_response(503, "Worker is still starting up.")
        try:
            try:
                async with asyncio.timeout(self.request_timeout):
                    return await handler(request)
            except NotLeaderError as e:
                return await self._forward(request, e)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return error_response(e.status, _http_error_message(e), _allow(e))
        except ConnectRestError as e:
            return error_response(e.status, e.message)
        except TimeoutError:
            return error_response(500, "Request timed out")
        except Exception as e:
            log.exception("Uncaught exception in REST call to %s %s", request.method, request.path)
            return error_response(500, str(e) or type(e).__name__)

    async def _forward(self, request: web.Request, error: NotLeaderError) -> web.Response:
        forward = request.query.get("forward")
        if forward == "false":
            # The right worker is found within two hops; a third means the group moved on.
            raise ConflictError(CONFLICT_MESSAGE)
        if error.leader_url is None:
            raise ConflictError(NO_LEADER_MESSAGE)
        query = MultiDict((k, v) for k, v in request.query.items() if k != "forward")
        query["forward"] = "false" if forward == "true" else "true"
        target = URL(error.leader_url.rstrip("/") + request.rel_url.raw_path, encoded=True).with_query(query)
        body = await request.read()
        headers = {h: request.headers[h] for h in _FORWARDED_REQUEST_HEADERS if h in request.headers}
        if self._session is None:
            raise ConnectRestError("The REST server is not running")
        log.debug("Forwarding request %s %s to the leader", request.method, target)
        try:
            async with self._session.request(request.method, target, data=body or None,
                                             headers=headers) as answer:
                payload = await answer.read()
                kept = {h: answer.headers[h] for h in _FORWARDED_ANSWER_HEADERS if h in answer.headers}
                kept.setdefault("Content-Type", "application/json")
                return web.Response(body=payload, status=answer.status, headers=kept)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ConnectRestError(f"IO Error trying to forward REST request: {e!r}") from e


def _http_error_message(e: web.HTTPException) -> str:
    if e.status in (404, 405):
        return f"HTTP {e.status} {e.reason}"       # as Jersey words them
    return e.text or e.reason


def _allow(e: web.HTTPException) -> dict[str, str] | None:
    allow = e.headers.get("Allow")
    return {"Allow": allow} if allow else None
