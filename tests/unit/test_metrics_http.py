"""The metrics HTTP listener (broker/metrics/http.py, on aiohttp) in process, over raw
sockets: its routes and answers, content negotiation (OpenMetrics), gzip, malformed requests,
port 0, the scrape counter; and that a broker without metrics.port never loads aiohttp."""
from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from broker.metrics.http import MetricsHttpServer
from tests.support.broker_process import REPO

# What Prometheus 2.x and 3.x send by default.
PROMETHEUS_2_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                       "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
PROMETHEUS_3_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                       "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;"
                       "escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")


def _registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("kafka_server_brokertopicmetrics_messagesin", "Messages in.", ["topic"],
            registry=reg).labels("t").inc(42)
    Counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks.", registry=reg).inc(2)
    Histogram("strom_request_total_time_ms", "Request time.", buckets=(1, 10, 100),
              registry=reg).observe(5)
    return reg


class Answer:
    def __init__(self, raw: bytes):
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}


async def _send(port: int, raw: bytes) -> Answer:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)      # until the server closes
    writer.close()
    return Answer(data)


async def _get(port: int, target: str, method: str = "GET", **headers: str) -> Answer:
    lines = [f"{method} {target} HTTP/1.1", "Host: test", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return await _send(port, ("\r\n".join(lines) + "\r\n\r\n").encode())


def _serve(test):
    """Run `test(server)` against a started listener on port 0 (a registry of 3 families)."""
    reg = _registry()

    async def main():
        server = MetricsHttpServer("127.0.0.1", 0, lambda: list(reg.collect()), broker_id=3)
        await server.start()
        try:
            assert server.port > 0
            await test(server)
        finally:
            await server.stop()
    asyncio.run(main())


def test_routes_methods_and_the_scrape_counter():
    async def test(server: MetricsHttpServer):
        text = await _get(server.port, "/metrics")
        assert text.status == 200
        assert text.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8"
        assert "content-encoding" not in text.headers
        families = {f.name: f for f in parse_text(text.body.decode())}
        assert families["kafka_server_brokertopicmetrics_messagesin"].samples[0].value == 42
        head = await _get(server.port, "/metrics", "HEAD")
        assert head.status == 200 and head.body == b""
        assert int(head.headers["content-length"]) == len(text.body)
        doc = json.loads((await _get(server.port, "/metrics.json")).body)
        assert doc["broker_id"] == 3 and len(doc["metrics"]) == 3
        only = await _get(server.port, "/metrics.json?name=kafka_server_replicamanager_&name=strom_")
        assert only.headers["content-type"] == "application/json"
        assert set(json.loads(only.body)["metrics"]) == {"kafka_server_replicamanager_isrshrinks",
                                                         "strom_request_total_time_ms"}
        everything = json.loads((await _get(server.port, "/metrics.json?name=")).body)
        assert len(everything["metrics"]) == 3
        index = await _get(server.port, "/")
        assert index.status == 200 and b"/metrics.json" in index.body
        assert server.scrapes == 5                      # /metrics twice (HEAD too), JSON thrice
        missing = await _get(server.port, "/nope")
        assert missing.status == 404 and missing.body.startswith(b"not found: try /metrics, ")
        for method, target in [("POST", "/metrics"), ("DELETE", "/nope"), ("PUT", "/")]:
            refused = await _get(server.port, target, method, Content_Length="0")
            assert refused.status == 405, (method, target)
            assert refused.body == b"GET or HEAD\n" and refused.headers["allow"] == "GET, HEAD"
        assert server.scrapes == 5
    _serve(test)


def test_openmetrics_when_the_scraper_asks_for_it():
    async def test(server: MetricsHttpServer):
        for accept in (PROMETHEUS_2_ACCEPT, PROMETHEUS_3_ACCEPT, "application/openmetrics-text"):
            a = await _get(server.port, "/metrics", Accept=accept)
            assert a.status == 200
            assert a.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0;")
            text = a.body.decode()
            assert text.endswith("# EOF\n")
            families = {f.name: f for f in parse_openmetrics(text)}    # the strict parser
            assert families["kafka_server_brokertopicmetrics_messagesin"].type == "counter"
            assert families["strom_request_total_time_ms"].type == "histogram"
        # Plain text for anything else, as before (a version OpenMetrics lacks included).
        for accept in ("text/plain;version=0.0.4", "*/*", "application/openmetrics-text;version=0.0.1",
                       "application/openmetrics-text;version=bogus"):
            a = await _get(server.port, "/metrics", Accept=accept)
            assert a.headers["content-type"] == "text/plain; version=1.0.0; charset=utf-8", accept
            assert not a.body.decode().endswith("# EOF\n")
    _serve(test)


def test_gzip_when_the_client_accepts_it():
    async def test(server: MetricsHttpServer):
        plain = await _get(server.port, "/metrics")
        zipped = await _get(server.port, "/metrics", Accept_Encoding="gzip, deflate")
        assert zipped.headers["content-encoding"] == "gzip"
        assert zipped.headers["vary"] == "Accept-Encoding"
        assert int(zipped.headers["content-length"]) == len(zipped.body)
        unzipped = gzip.decompress(zipped.body).decode()
        assert [f.name for f in parse_text(unzipped)] == [f.name for f in parse_text(plain.body.decode())]
        om = await _get(server.port, "/metrics", Accept=PROMETHEUS_3_ACCEPT, Accept_Encoding="gzip")
        assert om.headers["content-encoding"] == "gzip"
        assert gzip.decompress(om.body).decode().endswith("# EOF\n")
        js = await _get(server.port, "/metrics.json", Accept_Encoding="GZIP;q=1.0")
        assert js.headers["content-encoding"] == "gzip"
        assert json.loads(gzip.decompress(js.body))["broker_id"] == 3
        identity = await _get(server.port, "/metrics", Accept_Encoding="identity")
        assert "content-encoding" not in identity.headers
    _serve(test)


def test_a_malformed_request_gets_400_and_the_listener_serves_on(caplog):
    async def test(server: MetricsHttpServer):
        for garbage in (b"garbage\r\n\r\n", b"GET /metrics HTTP/9\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\r\n\r\n",
                        b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
                        b"GET /" + b"x" * 20000 + b" HTTP/1.1\r\n\r\n"):
            a = await _send(server.port, garbage)
            assert a.status == 400, garbage[:30]
        assert (await _get(server.port, "/metrics")).status == 200
    with caplog.at_level("INFO"):
        _serve(test)
    # The client's fault: nothing at INFO or above (aiohttp's own logging is at debug).
    assert not [r for r in caplog.records if r.levelname != "DEBUG"], caplog.text


def test_a_failing_collector_is_a_logged_500_and_the_next_scrape_works(caplog):
    calls = []
    reg = _registry()

    def collect():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("collector broke")
        return list(reg.collect())

    async def main():
        server = MetricsHttpServer("127.0.0.1", 0, collect, broker_id=0)
        await server.start()
        try:
            assert (await _get(server.port, "/metrics")).status == 500
            assert (await _get(server.port, "/metrics")).status == 200
        finally:
            await server.stop()
    asyncio.run(main())
    assert "collector broke" in caplog.text


def test_keep_alive_serves_several_scrapes_on_one_connection_and_stop_closes_it():
    async def main():
        reg = _registry()
        server = MetricsHttpServer("127.0.0.1", 0, lambda: list(reg.collect()), broker_id=0)
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        for _ in range(3):
            writer.write(b"GET /metrics.json HTTP/1.1\r\nHost: t\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
                         .split(b":")[1])
            assert json.loads(await reader.readexactly(length))["broker_id"] == 0
        await asyncio.wait_for(server.stop(), 5)          # an idle keep-alive does not hold it up
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert server.scrapes == 3
    asyncio.run(main())


def test_the_broker_loads_aiohttp_only_with_metrics_port():
    # `python -m broker --help`: the whole broker imported, no metrics port: no aiohttp.
    code = ("import runpy, sys\n"
            "sys.argv = ['broker', '--help']\n"
            "try:\n    runpy.run_module('broker', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'yarl', 'multidict'))\n"
            "assert not loaded, loaded\n"
            "from broker.metrics.http import load_http_framework\n"
            "load_http_framework()\n"
            "assert 'aiohttp.web' in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
