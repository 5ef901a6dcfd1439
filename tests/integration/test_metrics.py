"""Broker metrics against a real broker process: exact message and byte counts, consumer lag,
the Prometheus text parsing with prometheus_client's own parser, and the endpoint staying
responsive under a produce load; the strom-metrics CLI as a subprocess."""
from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.render import sample_value
from clients.protocol.records import Record, build_batch
from tests.support.broker_process import REPO, BrokerProcess, free_port
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def scrape(port: int, path: str = "/metrics", timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        assert r.status == 200
        return r.read()


def scrape_json(port: int) -> dict:
    return json.loads(scrape(port, "/metrics.json"))


@pytest.fixture
def mbroker(broker_factory):
    """A standalone broker with its metrics port set; `.metrics_port` says which."""
    port = free_port()
    b = broker_factory({"metrics.port": str(port), "num.partitions": "3"})
    return b


def _create(c: WireClient, name: str, partitions: int) -> None:
    r = c.request("CreateTopics", 7, {"topics": [{"name": name, "num_partitions": partitions,
                                                  "replication_factor": 1}], "timeout_ms": 5000})
    assert r.topics[0].error_code == 0


def test_messages_in_and_bytes_in_are_exact_and_fetch_moves_bytes_out(mbroker):
    # Batches built here, so their exact sizes are known: bytes in is, as in Kafka, the size
    # of each partition's record set as received; messages in the batch headers' counts.
    batches = [build_batch([Record(b"k%d" % i, b"v" * (10 + 7 * i)) for i in range(n)])
               for n in (1, 5, 17, 3, 40)]
    sent_records = 1 + 5 + 17 + 3 + 40
    with WireClient("127.0.0.1", mbroker.port) as c:
        _create(c, "exact", 1)
        for b in batches[:3]:      # one batch per request
            r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": "exact", "partition_data": [{"index": 0, "records": b}]}]})
            assert r.responses[0].partition_responses[0].error_code == 0
        two = batches[3] + batches[4]   # two batches in one record set
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "exact", "partition_data": [{"index": 0, "records": two}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0
        # A failed produce (no such partition) counts as failed, and adds no bytes.
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "exact", "partition_data": [{"index": 7, "records": batches[0]}]}]})
        assert r.responses[0].partition_responses[0].error_code != 0
        # A topic the broker does not have counts in the totals but gets no series of its
        # own: clients must not be able to mint series (memory) with made-up names.
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "made-up", "partition_data": [{"index": 0, "records": batches[0]}]}]})
        assert r.responses[0].partition_responses[0].error_code != 0
    sent_bytes = sum(len(b) for b in batches)

    doc = scrape_json(mbroker.metrics_port)
    t = {"topic": "exact"}
    msgs = sample_value(doc, "kafka_server_brokertopicmetrics_messagesin", t)
    bytes_in = sample_value(doc, "kafka_server_brokertopicmetrics_bytesin", t)
    print(f"\nsent {sent_records} records in {sent_bytes} bytes; broker: messagesin={msgs} bytesin={bytes_in}")
    assert msgs == sent_records
    assert bytes_in == sent_bytes
    assert sample_value(doc, "kafka_server_brokertopicmetrics_messagesin") == sent_records  # all topics
    assert sample_value(doc, "kafka_server_brokertopicmetrics_failedproducerequests", t) == 1
    assert sample_value(doc, "kafka_server_brokertopicmetrics_totalproducerequests", t) == 5
    assert sample_value(doc, "kafka_server_brokertopicmetrics_failedproducerequests") == 2
    assert sample_value(doc, "kafka_server_brokertopicmetrics_failedproducerequests",
                        {"topic": "made-up"}) is None
    assert sample_value(doc, "kafka_server_brokertopicmetrics_bytesout", t) == 0
    assert sample_value(doc, "kafka_network_requestmetrics_requests",
                        {"request": "Produce", "version": "9"}) == 6
    assert sample_value(doc, "kafka_network_requestmetrics_errors",
                        {"request": "Produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"}) == 2
    assert sample_value(doc, "kafka_log_log_logendoffset", {"topic": "exact", "partition": "0"}) == sent_records
    assert sample_value(doc, "kafka_log_log_size", {"topic": "exact", "partition": "0"}) == sent_bytes

    consumer = Consumer({"bootstrap.servers": mbroker.bootstrap, "group.id": "exact-reader",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition("exact", 0, 0)])
    got = 0
    deadline = time.monotonic() + 20
    while got < sent_records and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and not m.error():
            got += 1
    consumer.close()
    assert got == sent_records
    bytes_out = sample_value(scrape_json(mbroker.metrics_port), "kafka_server_brokertopicmetrics_bytesout", t)
    print(f"consumed {got} records; broker: bytesout={bytes_out}")
    assert bytes_out >= sent_bytes


def test_consumer_lag_is_log_end_minus_committed_offset(mbroker):
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "log_level": 0})
    ends = {0: 10, 1: 25, 2: 40}
    with WireClient("127.0.0.1", mbroker.port) as c:
        _create(c, "lagged", 3)
    for part, n in ends.items():
        for i in range(n):
            p.produce("lagged", value=b"x%d" % i, partition=part)
    assert p.flush(30) == 0
    committed = {0: 3, 1: 25, 2: 0}
    consumer = Consumer({"bootstrap.servers": mbroker.bootstrap, "group.id": "lag-group",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.commit(offsets=[TopicPartition("lagged", part, off) for part, off in committed.items()],
                    asynchronous=False)
    consumer.close()

    doc = scrape_json(mbroker.metrics_port)
    for part in ends:
        labels = {"consumergroup": "lag-group", "topic": "lagged", "partition": str(part)}
        lag = sample_value(doc, "kafka_consumergroup_lag", labels)
        end = sample_value(doc, "kafka_log_log_logendoffset", {"topic": "lagged", "partition": str(part)})
        print(f"partition {part}: log end {end}, committed {committed[part]}, lag {lag}")
        assert end == ends[part]
        assert sample_value(doc, "kafka_consumergroup_current_offset", labels) == committed[part]
        assert lag == ends[part] - committed[part]
    assert sample_value(doc, "kafka_consumergroup_lag_sum", {"consumergroup": "lag-group", "topic": "lagged"}) \
        == sum(ends[p] - committed[p] for p in ends)
    # Committing more moves the lag down.
    consumer = Consumer({"bootstrap.servers": mbroker.bootstrap, "group.id": "lag-group",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.commit(offsets=[TopicPartition("lagged", 2, 33)], asynchronous=False)
    consumer.close()
    lag = sample_value(scrape_json(mbroker.metrics_port), "kafka_consumergroup_lag",
                       {"consumergroup": "lag-group", "topic": "lagged", "partition": "2"})
    assert lag == 40 - 33


class _Load:
    """confluent-kafka producing 100-byte records as fast as it can, in a thread."""

    def __init__(self, bootstrap: str, topic: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "1",
                                  "log_level": 0})
        self.topic = topic
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"x" * 100)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.005)
            if self.sent % 1000 == 0:
                self.producer.poll(0)
        self.producer.flush(30)

    def __enter__(self) -> "_Load":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def test_metrics_parse_and_endpoint_stays_responsive_under_produce_load(mbroker):
    port = mbroker.metrics_port
    with _Load(mbroker.bootstrap, "loaded") as load:
        time.sleep(1.0)
        latencies = []
        counts = []
        for _ in range(40):
            t0 = time.monotonic()
            text = scrape(port, timeout=5).decode()
            latencies.append(time.monotonic() - t0)
            families = {f.name: f for f in text_string_to_metric_families(text)}
            counts.append(next(s.value for s in families["kafka_server_brokertopicmetrics_messagesin"].samples
                               if s.labels.get("topic") == "loaded"))
            time.sleep(0.05)
        sent = load.sent
    latencies.sort()
    print(f"\n40 scrapes under load ({sent} records produced): median {latencies[20] * 1000:.1f} ms, "
          f"max {latencies[-1] * 1000:.1f} ms; messagesin went {counts[0]:.0f} -> {counts[-1]:.0f}")
    assert latencies[-1] < 1.0
    assert counts[-1] > counts[0] > 0
    # Every family the docs promise is there and typed as Prometheus expects.
    for name, type_ in [("kafka_server_brokertopicmetrics_bytesin", "counter"),
                        ("kafka_network_requestmetrics_totaltimems", "summary"),
                        ("strom_request_total_time_ms", "histogram"),
                        ("kafka_server_replicamanager_underreplicatedpartitions", "gauge"),
                        ("kafka_controller_kafkacontroller_activecontrollercount", "gauge"),
                        ("kafka_log_log_size", "gauge"),
                        ("kafka_server_socket_server_metrics_connection_count", "gauge"),
                        ("kafka_server_socket_server_metrics_incoming_byte", "counter"),
                        ("process_resident_memory_bytes", "gauge"),
                        ("process_open_fds", "gauge"),
                        ("python_gc_collections", "counter"),
                        ("strom_event_loop_lag_seconds", "gauge"),
                        ("strom_event_loop_lag_distribution_seconds", "histogram"),
                        ("strom_gc_pause_seconds", "histogram")]:
        assert families[name].type == type_, name
    p99 = [s.value for s in families["kafka_network_requestmetrics_totaltimems"].samples
           if s.labels == {"request": "Produce", "quantile": "0.99"}]
    lag = families["strom_event_loop_lag_seconds"].samples[0].value
    print(f"Produce p99 {p99[0]:.2f} ms; event-loop lag {lag * 1000:.2f} ms")
    assert p99 and p99[0] >= 0
    # The standalone broker is its own controller.
    assert families["kafka_controller_kafkacontroller_activecontrollercount"].samples[0].value == 1
    # JSON holds the same families as the text.
    doc = scrape_json(port)
    assert set(doc["metrics"]) == set(families)
    assert doc["broker_id"] == 0
    only = json.loads(scrape(port, "/metrics.json?name=kafka_server_replicamanager_"))
    assert only["metrics"] and all(k.startswith("kafka_server_replicamanager_") for k in only["metrics"])
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(port, "/nope")
    assert e.value.code == 404


def test_metrics_are_off_unless_configured(broker):
    from broker.config import BrokerConfig
    assert BrokerConfig.load(broker.config_path).metrics_port == -1
    assert "listening on" in broker.output() and "metrics http://" not in broker.output()


def test_strom_metrics_cli_prints_a_cluster_summary(mbroker):
    p = Producer({"bootstrap.servers": mbroker.bootstrap, "log_level": 0})
    for i in range(500):
        p.produce("cli-topic", value=b"y" * 100, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": mbroker.bootstrap, "group.id": "cli-group", "log_level": 0})
    c.commit(offsets=[TopicPartition("cli-topic", 0, 100)], asynchronous=False)
    c.close()
    out = subprocess.run([str(REPO / "bin/strom-metrics.sh"), "--bootstrap-server", mbroker.bootstrap,
                          "--interval", "0.5"], capture_output=True, text=True, timeout=60)
    print(out.stdout, out.stderr)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "brokers 1/1" in text
    assert "controller 0" in text
    assert "cli-group" in text and "400" in text        # lag of the group: 500 - 100
    watch = subprocess.run([str(REPO / "bin/strom-metrics.sh"), "--bootstrap-server", mbroker.bootstrap,
                            "--watch", "0.5", "--count", "2"], capture_output=True, text=True, timeout=60)
    assert watch.returncode == 0, watch.stderr
    assert watch.stdout.count("brokers 1/1") == 2


def test_strom_metrics_cli_reaches_a_secured_broker_with_command_config(tmp_path):
    from tests.support.security import SecurityKit, client_config, secure_overrides
    kit = SecurityKit(tmp_path / "kit")
    props = {**secure_overrides(kit, {"SASL_SSL": "{port}"}), "metrics.port": str(free_port())}
    b = BrokerProcess(tmp_path / "b", overrides=props).start()
    try:
        cfg = tmp_path / "client.properties"
        conf = client_config(kit, "SASL_SSL", b.bootstrap, user="admin")
        cfg.write_text("".join(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers"))
        cmd = [str(REPO / "bin/strom-metrics.sh"), "--bootstrap-server", b.bootstrap, "--interval", "0"]
        refused = subprocess.run(cmd + ["--timeout", "3"], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        out = subprocess.run(cmd + ["--command-config", str(cfg)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert "brokers 1/1" in out.stdout
    finally:
        b.stop()
