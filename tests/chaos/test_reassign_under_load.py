"""kafka-reassign-partitions.sh moves 20 partitions onto a fourth broker added while an
idempotent acks=all producer and a consumer run: the checker finds nothing lost or
duplicated, and every partition's replicas end byte-identical. A throttled move copies at
the configured rate (within 20 %)."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.checker import ChaosProducer, Checker, read_back
from tests.chaos.conftest import ZK_SESSION_MS, stop_telling_a_failure
from tests.chaos.replicas import log_bytes
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOPIC = "load"
PARTITIONS = 20


@pytest.fixture
def cluster(tmp_path, request):
    """Brokers 0-2 running (replication factor 3, min.insync.replicas 2); broker 3 is the one
    the test adds. A test marked broker_configs({...}) adds server.properties lines."""
    marker = request.node.get_closest_marker("broker_configs")
    extra = dict(marker.args[0]) if marker else {}
    c = Cluster(tmp_path / "cluster", brokers=4, zookeeper_session_timeout_ms=ZK_SESSION_MS,
                default_replication_factor=3, overrides={"auto.leader.rebalance.enable": "false", **extra})
    try:
        c.start(only=3)
        yield c
    finally:
        stop_telling_a_failure(c, request)


def tool(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(REPO / "bin" / "kafka-reassign-partitions.sh"), *args], capture_output=True,
                          timeout=120, cwd=REPO, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr.decode()
    return subprocess.CompletedProcess(proc.args, 0, proc.stdout.decode(), proc.stderr.decode())


def add_broker_3(c: Cluster) -> None:
    c.broker(3).start(60)
    c.wait_for_brokers(4)
    c.wait_until(lambda: len(c.request(c.broker(0).port, "Metadata", 1, {"topics": []}).brokers) == 4,
                 timeout=30, message="broker 0 knowing broker 3")


def create_topic(c: Cluster, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_except(3), "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    for p in range(partitions):
        c.wait_until(lambda p=p: len(c.isr(TOPIC, p)) == 3, timeout=30)


def assignment(c: Cluster) -> dict[int, list[int]]:
    return {int(p): r for p, r in c._get_json(f"/brokers/topics/{TOPIC}")["partitions"].items()}


def plan_onto_broker_3(c: Cluster, tmp_path: Path) -> tuple[Path, dict[int, list[int]]]:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    gen = tool("--bootstrap-server", c.bootstrap, "--generate", "--topics-to-move-json-file", str(topics),
               "--broker-list", "0,1,2,3")
    lines = gen.stdout.splitlines()
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(proposed))
    return plan_file, {e["partition"]: e["replicas"] for e in proposed["partitions"]}


def verify_until_done(c: Cluster, plan_file: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        out = tool("--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file", str(plan_file)).stdout
        if "still in progress" not in out:
            return out
        assert time.monotonic() < deadline, out
        time.sleep(0.5)


class LiveConsumer:
    """A group consumer reading the topic while the move runs, feeding the checker."""

    def __init__(self, bootstrap: str, checker: Checker):
        self.checker = checker
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "live", "log_level": 0,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": True})
        self.read = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC])
        while not self._stop.is_set():
            for m in self.consumer.consume(500, 0.2):
                if m.error() is None:
                    self.checker.record_read(m.partition(), m.offset(), m.key(), m.value())
                    self.read += 1
        self.consumer.close()

    def __enter__(self) -> "LiveConsumer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_moving_20_partitions_onto_an_added_broker_under_load_loses_nothing(cluster, tmp_path):
    create_topic(cluster, PARTITIONS)
    checker = Checker()
    with ChaosProducer(cluster.bootstrap_except(3), TOPIC, checker, rate=400, idempotence=True, keys=64) as prod, \
            LiveConsumer(cluster.bootstrap_except(3), checker) as live:
        prod.wait_acked(1000, timeout=60)
        add_broker_3(cluster)
        plan_file, plan = plan_onto_broker_3(cluster, tmp_path)
        assert sum(3 in r for r in plan.values()) == 15         # a quarter of the 60 replicas
        started = time.monotonic()
        tool("--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan_file),
             "--throttle", "50000000")
        out = verify_until_done(cluster, plan_file, timeout=120)
        took = time.monotonic() - started
        acked_during = prod.acked
        time.sleep(1)
    assert "Clearing broker-level throttles on brokers 0,1,2,3" in out
    assert assignment(cluster) == plan
    read_back(cluster.bootstrap, TOPIC, PARTITIONS, checker)
    report = checker.assert_ok(min_acked=acked_during)
    print(f"\nmoved {PARTITIONS} partitions onto broker 3 in {took:.1f}s under load: "
          f"{report.counts()}, live consumer read {live.read}")
    assert report.lost == 0 and report.duplicated == 0
    for p, replicas in plan.items():
        cluster.wait_until(lambda p=p, r=replicas: sorted(cluster.isr(TOPIC, p)) == sorted(r), timeout=30)
        cluster.wait_until(lambda p=p, r=replicas: len({log_bytes(cluster, b, TOPIC, p) for b in r}) == 1,
                           timeout=30, message=f"{TOPIC}-{p}'s replicas byte-identical")
    # (A partition no key hashes to stays empty; the others hold the run's records.)
    assert sum(len(log_bytes(cluster, r[0], TOPIC, p)) > 0 for p, r in plan.items()) >= PARTITIONS // 2


RATE = 2_000_000              # bytes/s, --throttle
PER_PARTITION = 4_000_000     # bytes to copy per partition, 4 partitions


@pytest.mark.broker_configs({
    # Kafka's default 11 one-second samples let a fresh throttle pass ten seconds' worth at
    # once (its rate is measured as if the windows before had been empty): 2 samples keep that
    # first burst to one second's worth, so the rate shows within a move of seconds.
    "replication.quota.window.num": "2",
    # Smaller fetches keep each step of the copy small against the rate (Kafka's default 1 MB
    # per partition would move a fetch's worth of several partitions at once).
    "replica.fetch.max.bytes": "262144", "replica.fetch.response.max.bytes": "524288"})
def test_a_throttled_move_copies_at_the_configured_rate(cluster, tmp_path):
    """Broker 3 copies 16 MB for its new replicas under a 2 MB/s throttle: from 25 % of the
    copy to its end, bytes arrive on its disk at 2 MB/s +/- 20 %. (A fresh throttle first
    lets (window.num - 1) windows' worth through at once, here 2 MB, as Kafka's: the measure
    starts after it.)"""
    create_topic(cluster, 4)
    # Batches of ~16 kB: a fetch returns at least one whole batch whatever the throttle
    # allows it (KIP-74), so batches of a megabyte would each overshoot a step of the copy.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_except(3), "acks": "all", "linger.ms": 50,
                         "batch.size": 16384, "log_level": 0})
    value = b"x" * 10_000
    for i in range(4 * PER_PARTITION // len(value)):
        producer.produce(TOPIC, value=value, partition=i % 4)
        producer.poll(0)
    assert producer.flush(60) == 0
    add_broker_3(cluster)
    size = sum(len(log_bytes(cluster, assignment(cluster)[p][0], TOPIC, p)) for p in range(4))
    plan_file = tmp_path / "plan.json"
    moves = {p: [3, *[b for b in assignment(cluster)[p] if b != p % 3]] for p in range(4)}
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in moves.items()]}))

    def copied() -> int:
        return sum(f.stat().st_size for p in range(4)
                   for f in (cluster.broker(3).log_dir / f"{TOPIC}-{p}").glob("*.log")
                   if (cluster.broker(3).log_dir / f"{TOPIC}-{p}").exists())

    tool("--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan_file),
         "--throttle", str(RATE))
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        samples.append((time.monotonic(), copied()))
        if samples[-1][1] >= size:
            break
        time.sleep(0.1)
    verify_until_done(cluster, plan_file, timeout=60)
    t25 = next(t for t, n in samples if n >= 0.25 * size)
    t_end = next(t for t, n in samples if n >= size)
    measured = 0.75 * size / (t_end - t25)
    print(f"\nthrottled move: {size / 1e6:.1f} MB copied to broker 3, {measured / 1e6:.2f} MB/s from 25 % "
          f"of it to the end, at a {RATE / 1e6:.2f} MB/s throttle (whole copy {samples[-1][0] - samples[0][0]:.1f} s)")
    curve = [(round(t - samples[0][0], 1), round(n / 1e6, 2)) for t, n in samples[::5]]
    assert abs(measured - RATE) <= 0.2 * RATE, f"MB on broker 3 over time: {curve}"
    # The throttles are gone once --verify saw the move complete.
    for b in range(4):
        described = cluster.request(cluster.broker(b).port, "DescribeConfigs", 1, {
            "resources": [{"resource_type": 4, "resource_name": str(b), "configuration_keys": [
                "leader.replication.throttled.rate"]}], "include_synonyms": False})
        entry = described.results[0].configs[0]
        assert entry.value == str(2 ** 63 - 1), (b, entry.value)
