"""Concurrent HTTP producers against the REST proxy's v3 produce route, for the load test
(tests/integration/rest/test_rest_load.py) and the benchmark (bench/rest.py).

Each producer is one aiohttp session. In "stream" mode it opens ONE request with a chunked
body and writes records into it for the whole run (Confluent's streaming produce), at most
`window` records sent and not yet answered, reading the delivery reports (concatenated JSON)
as they come. In "request" mode it makes one POST per record, waiting for each answer.
Every record's value is a unique id "<producer>-<seq>"; a record counts as delivered only
when its report says error_code 200, and the run keeps those ids so the caller can check the
topic holds exactly them (none lost, none doubled). Latency is per record: from writing it
(or sending its request) to reading its report.
"""
from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import AsyncIterator

import aiohttp

__all__ = ["LoadResult", "run_load"]


@dataclass
class LoadResult:
    delivered: list[str] = field(default_factory=list)      # ids answered 200
    failed: list[tuple[str, object]] = field(default_factory=list)   # (id, report) otherwise
    latencies: list[float] = field(default_factory=list)    # seconds, delivered records
    seconds: float = 0.0                                    # first send to last report

    @property
    def rate(self) -> float:
        return len(self.delivered) / self.seconds if self.seconds else 0.0


def _record(rid: str) -> bytes:
    return b'{"value":{"type":"STRING","data":"%s"}}' % rid.encode()


async def _stream_producer(session: aiohttp.ClientSession, url: str, name: str, stop_at: float,
                           window: int, out: LoadResult) -> None:
    sent: deque[tuple[str, float]] = deque()
    has_room = asyncio.Event()
    has_room.set()

    async def body() -> AsyncIterator[bytes]:
        seq = 0
        while time.monotonic() < stop_at:
            await has_room.wait()
            # Whatever room the window has, as one chunk (at most 32 records).
            n = min(window - len(sent), 32)
            if n <= 0:
                has_room.clear()
                continue
            now = time.monotonic()
            chunk = []
            for _ in range(n):
                rid = f"{name}-{seq}"
                seq += 1
                sent.append((rid, now))
                chunk.append(_record(rid))
            yield b"".join(chunk)

    decoder = json.JSONDecoder()
    async with session.post(url, data=body(), headers={"Content-Type": "application/json"}) as resp:
        if resp.status != 200:
            out.failed.append((name, f"HTTP {resp.status}: {await resp.text()}"))
            return
        buf = ""
        async for data in resp.content.iter_any():
            buf += data.decode()
            pos = 0
            while True:
                while pos < len(buf) and buf[pos] in " \r\n\t":
                    pos += 1
                if pos >= len(buf):
                    break
                try:
                    report, pos = decoder.raw_decode(buf, pos)
                except ValueError:
                    break
                rid, t0 = sent.popleft()
                has_room.set()
                if isinstance(report, dict) and report.get("error_code") == 200:
                    out.delivered.append(rid)
                    out.latencies.append(time.monotonic() - t0)
                else:
                    out.failed.append((rid, report))
            buf = buf[pos:]
    for rid, _ in sent:
        out.failed.append((rid, "no report"))


async def _request_producer(session: aiohttp.ClientSession, url: str, name: str, stop_at: float,
                            out: LoadResult) -> None:
    seq = 0
    while time.monotonic() < stop_at:
        rid = f"{name}-{seq}"
        seq += 1
        t0 = time.monotonic()
        async with session.post(url, data=_record(rid), headers={"Content-Type": "application/json"}) as resp:
            report = await resp.json(content_type=None)
        if resp.status == 200 and isinstance(report, dict) and report.get("error_code") == 200:
            out.delivered.append(rid)
            out.latencies.append(time.monotonic() - t0)
        else:
            out.failed.append((rid, report))


async def run_load(base_url: str, cluster_id: str, topic: str, *, producers: int = 50,
                   seconds: float = 60.0, mode: str = "stream", window: int = 64) -> LoadResult:
    """`producers` concurrent HTTP producers for `seconds`; see the module docstring."""
    url = f"{base_url}/v3/clusters/{cluster_id}/topics/{topic}/records"
    out = LoadResult()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        t0 = time.monotonic()
        stop_at = t0 + seconds
        if mode == "stream":
            jobs = [_stream_producer(session, url, f"p{i}", stop_at, window, out) for i in range(producers)]
        elif mode == "request":
            jobs = [_request_producer(session, url, f"p{i}", stop_at, out) for i in range(producers)]
        else:
            raise ValueError(f"unknown mode {mode!r}")
        await asyncio.gather(*jobs)
        out.seconds = time.monotonic() - t0
    return out
