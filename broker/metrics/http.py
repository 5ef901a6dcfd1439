"""The metrics HTTP listener, served from the broker's own event loop.

GET /metrics        Prometheus text (prometheus_client.generate_latest)
GET /metrics.json   the same samples as JSON (render.py); ?name=PREFIX (repeatable) filters
GET /               a one-line index

Collecting runs on the loop (collectors read live broker state, which only the loop may
touch, and cost O(partitions)); turning the collected families into text or JSON, the bigger
part of a scrape, runs in a worker thread on that immutable snapshot, so the loop keeps
serving clients meanwhile. One request per connection (`Connection: close`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import Metric

from .render import render_json

log = logging.getLogger(__name__)

MAX_HEAD = 16384
READ_TIMEOUT_S = 10.0


class _Snapshot:
    """A registry stand-in for generate_latest: already collected families."""

    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class MetricsHttpServer:
    def __init__(self, host: str, port: int, collect: Callable[[], list[Metric]], broker_id: int):
        self.host = host
        self.port = port
        self.collect = collect
        self.broker_id = broker_id
        self.scrapes = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port,
                                                  reuse_address=True, limit=MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, ctype, body = await self._answer(head)
            method = head.split(b" ", 1)[0]
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode())
            if method != b"HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ConnectionError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> tuple[str, str, bytes]:
        try:
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except ValueError:
            return "400 Bad Request", "text/plain", b"bad request line\n"
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET or HEAD\n"
        url = urlsplit(target)
        loop = asyncio.get_running_loop()
        if url.path == "/metrics":
            families = self.collect()
            self.scrapes += 1
            body = await loop.run_in_executor(None, generate_latest, _Snapshot(families))
            return "200 OK", CONTENT_TYPE_LATEST, body
        if url.path == "/metrics.json":
            families = self.collect()
            self.scrapes += 1
            prefixes = parse_qs(url.query).get("name")
            body = await loop.run_in_executor(None, _json, families, self.broker_id, prefixes)
            return "200 OK", "application/json", body
        if url.path == "/":
            return "200 OK", "text/plain", b"strom broker metrics: /metrics (Prometheus), /metrics.json\n"
        return "404 Not Found", "text/plain", b"not found: try /metrics or /metrics.json\n"


def _json(families: list[Metric], broker_id: int, prefixes: Any) -> bytes:
    return render_json(families, broker_id=broker_id, timestamp_ms=int(time.time() * 1000),
                       name_prefixes=prefixes)
