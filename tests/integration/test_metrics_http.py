"""The broker's metrics endpoint as Prometheus scrapes it, against a real broker process:
OpenMetrics (checked with prometheus_client's strict OpenMetrics parser) and gzip on a broker
with topics, traffic and a consumer group; a malformed request over a raw socket gets a 400,
and the broker keeps serving Kafka clients and the next scrape."""
from __future__ import annotations

import gzip
import socket
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.support.broker_process import free_port
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
                     "application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;"
                     "escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")


def fetch(port: int, path: str = "/metrics", **headers: str):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 headers={k.replace("_", "-"): v for k, v in headers.items()})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


@pytest.fixture
def mbroker(broker_factory):
    port = free_port()
    return broker_factory({"metrics.port": str(port)})    # b.metrics_port: where it listens


def _traffic(b) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "log_level": 0})
    for i in range(200):
        p.produce("om-topic", value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "om-group", "log_level": 0})
    c.commit(offsets=[TopicPartition("om-topic", 0, 50)], asynchronous=False)
    c.close()


def test_openmetrics_and_gzip_as_prometheus_asks(mbroker):
    _traffic(mbroker)
    status, headers, body = fetch(mbroker.metrics_port, Accept=PROMETHEUS_ACCEPT, Accept_Encoding="gzip")
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0;")
    assert headers["Content-Encoding"] == "gzip"
    text = gzip.decompress(body).decode()
    assert text.endswith("# EOF\n")
    om = {f.name: f for f in parse_openmetrics(text)}          # the strict parser: every family
    plain = {f.name: f for f in parse_text(fetch(mbroker.metrics_port)[2].decode())}
    print(f"\nOpenMetrics: {len(om)} families, {len(body)} bytes gzipped, {len(text)} plain")
    # The same families either way (OpenMetrics names counters without `_total`, as the
    # text parser does), with the same types.
    assert set(om) == set(plain)
    for name in ("kafka_server_brokertopicmetrics_messagesin", "kafka_consumergroup_lag",
                 "strom_request_total_time_ms", "kafka_network_requestmetrics_totaltimems"):
        assert om[name].type == plain[name].type, name
    lag = [s.value for s in om["kafka_consumergroup_lag"].samples
           if s.labels.get("consumergroup") == "om-group"]
    assert lag == [150]
    msgs = [s.value for s in om["kafka_server_brokertopicmetrics_messagesin"].samples
            if s.labels.get("topic") == "om-topic" and s.name.endswith("_total")]
    assert msgs == [200]
    # gzip is as much for /metrics.json; plain text stays the default.
    _, jheaders, jbody = fetch(mbroker.metrics_port, "/metrics.json", Accept_Encoding="gzip")
    assert jheaders["Content-Encoding"] == "gzip" and b'"broker_id"' in gzip.decompress(jbody)
    _, pheaders, _ = fetch(mbroker.metrics_port)
    assert pheaders["Content-Type"] == "text/plain; version=1.0.0; charset=utf-8"
    assert "Content-Encoding" not in pheaders


def test_a_malformed_request_gets_400_and_the_broker_serves_on(mbroker):
    for garbage in (b"\x00\x01garbage line\r\n\r\n", b"GET\r\n\r\n", b"\x16\x03\x01\x00\x05hello"):
        with socket.create_connection(("127.0.0.1", mbroker.metrics_port), timeout=10) as s:
            s.sendall(garbage)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"400", (garbage, answer[:100])
    # Kafka clients are served ...
    with WireClient("127.0.0.1", mbroker.port) as c:
        r = c.request("CreateTopics", 7, {"topics": [{"name": "after-garbage", "num_partitions": 1,
                                                      "replication_factor": 1}], "timeout_ms": 5000})
        assert r.topics[0].error_code == 0
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "log_level": 0})
    for i in range(10):
        p.produce("after-garbage", value=b"x", partition=0)
    assert p.flush(30) == 0
    # ... and so is the next scrape, which sees them.
    status, _, body = fetch(mbroker.metrics_port)
    assert status == 200
    families = {f.name: f for f in parse_text(body.decode())}
    assert [s.value for s in families["kafka_server_brokertopicmetrics_messagesin"].samples
            if s.labels.get("topic") == "after-garbage"] == [10]
    # Nothing of it in the broker's log above debug level.
    log = mbroker.log_path.read_text()
    assert "Error handling request" not in log and "Traceback" not in log, log[-3000:]
