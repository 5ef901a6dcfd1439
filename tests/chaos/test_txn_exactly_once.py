"""Exactly-once consume-transform-produce under kill -9 (the promise transactions exist for).

A confluent-kafka application (tests/chaos/ctp_app.py, its own process) reads `in` with
read_committed, writes one transformed record per input record to `out` and commits the
input offsets in the same transaction. Meanwhile faults are injected at random moments,
each followed by a restart: kill -9 of the application, of the broker coordinating its
transactional id, and of the leader of an `out` partition. Once the application has
consumed everything, the checker (txn_checker.py) reads `out` with read_committed and finds
no aborted read, lost committed write, torn transaction, duplicate or missing record, and
every partition in input order.

Short form: 3 faults (one of each kind). `--long` (or STROM_LONG_TESTS=1): 50 faults.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.txn_checker import check, written_by_attempt

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
# The long form paces the application so that its work lasts about as long as 50 faults.
SHORT = {"per_partition": 3000, "max_batch": 200, "pace": 0.0}
LONG = {"per_partition": 10000, "max_batch": 100, "pace": 0.1}


def fill_input(cluster, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                  "log_level": 0})
    for part in range(PARTITIONS):
        for i in range(per_partition):
            p.produce("in", f"{part}:{i}".encode(), partition=part)
            if i % 1000 == 999:
                p.poll(0)
    assert p.flush(60) == 0


class App:
    def __init__(self, cluster, attempts_log: Path, output: Path, shape: dict):
        self.cluster = cluster
        self.shape = shape
        self.attempts_log = attempts_log
        self.output = output
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = open(self.output, "a")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "chaos" / "ctp_app.py"), "--bootstrap", self.cluster.bootstrap,
             "--partitions", str(PARTITIONS), "--end", str(self.shape["per_partition"]),
             "--max-batch", str(self.shape["max_batch"]), "--pace", str(self.shape["pace"]),
             "--attempts-log", str(self.attempts_log)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def ensure_running(self) -> None:
        """Restart it if it died (a kill, or it exited on a fatal error) before finishing."""
        if self.proc is None or (self.proc.poll() is not None and self.proc.returncode != 0):
            self.start()

    @property
    def finished(self) -> bool:
        return self.proc is not None and self.proc.poll() == 0


def read(cluster, isolation: str) -> dict[int, list[str]]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "isolation.level": isolation, "log_level": 0})
    consumer.assign([TopicPartition("out", p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    last = time.monotonic()
    while time.monotonic() - last < 5:
        for m in consumer.consume(1000, 0.5):
            if m.error() is None:
                got[m.partition()].append(m.value().decode())
                last = time.monotonic()
    consumer.close()
    return got


def test_consume_transform_produce_is_exactly_once_under_kill9(cluster, tmp_path, long_run):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for t in ("in", "out"):
        admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[t].result(30)
        for p in range(PARTITIONS):
            cluster.wait_for_leader(t, p)
    shape = LONG if long_run else SHORT
    fill_input(cluster, shape["per_partition"])
    app = App(cluster, tmp_path / "attempts.jsonl", tmp_path / "app.out", shape)
    app.start()
    faults = 50 if long_run else 3
    kinds = ["app", "coordinator", "leader"]
    done_faults = []
    deadline = time.monotonic() + (1800 if long_run else 300)
    for n in range(faults):
        time.sleep(random.uniform(0.5, 2.5))
        app.ensure_running()
        if app.finished:
            break
        kind = kinds[n % 3] if n < 3 else random.choice(kinds)
        if kind == "app":
            app.kill9()
            app.start()
        else:
            victim = (cluster.transaction_coordinator("ctp-app") if kind == "coordinator"
                      else cluster.leader("out", random.randrange(PARTITIONS)))
            if victim is None or victim < 0:
                continue
            cluster.kill9(victim)
            # Its ZooKeeper registration outlives it until the session expires; a broker
            # restarted before that refuses to start (broker.id in use), as Kafka's does.
            cluster.wait_for_broker_gone(victim)
            cluster.restart(victim)
        done_faults.append(kind)
    while not app.finished and time.monotonic() < deadline:
        app.ensure_running()
        time.sleep(0.5)
    assert app.finished, f"the application never finished:\n{Path(app.output).read_text()[-3000:]}"

    attempts = {}
    for line in Path(app.attempts_log).read_text().splitlines():
        rec = json.loads(line)
        attempts[rec["attempt"]] = rec["status"]
    report = check(read(cluster, "read_committed"), shape["per_partition"], attempts,
                   written_by_attempt(read(cluster, "read_uncommitted")))
    print(f"\n{len(done_faults)} faults ({', '.join(done_faults)}), {app.starts} application starts, "
          f"{sum(s == 'committed' for s in attempts.values())} commits, "
          f"{sum(s == 'aborted' for s in attempts.values())} aborts seen by the app: {report.summary()}")
    assert report.ok, report
