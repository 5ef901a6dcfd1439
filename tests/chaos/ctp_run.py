"""Running the consume-transform-produce application (ctp_app.py) against a test cluster:
its topics and input, the application as a restartable process, and reading its output
back. Shared by the exactly-once chaos test and the tests of the application itself."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.txn_checker import Report, check, written_by_attempt

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 3
GROUP = "ctp"                   # the application's consumer group and transactional id
TRANSACTIONAL_ID = "ctp-app"


def create_topics(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for t in ("in", "out"):
        admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[t].result(30)
        for p in range(PARTITIONS):
            cluster.wait_for_leader(t, p)


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
    """ctp_app.py as a process. `shape`: per_partition (input records a partition), max_batch,
    pace, and optionally txn_timeout (seconds, ctp_app.py's --call-timeout), group and
    transactional_id (default GROUP and TRANSACTIONAL_ID)."""

    def __init__(self, cluster, attempts_log: Path, output: Path, shape: dict):
        self.cluster = cluster
        self.shape = shape
        self.attempts_log = attempts_log
        self.output = output
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        extra = ["--call-timeout", str(self.shape["txn_timeout"])] if "txn_timeout" in self.shape else []
        extra += ["--group", self.shape.get("group", GROUP),
                  "--transactional-id", self.shape.get("transactional_id", TRANSACTIONAL_ID)]
        with open(self.output, "a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "chaos" / "ctp_app.py"), "--bootstrap", self.cluster.bootstrap,
                 "--partitions", str(PARTITIONS), "--end", str(self.shape["per_partition"]),
                 "--max-batch", str(self.shape["max_batch"]), "--pace", str(self.shape["pace"]),
                 "--attempts-log", str(self.attempts_log), "--debug", os.environ.get("STROM_CTP_DEBUG", ""),
                 *extra],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def ensure_running(self) -> None:
        """Restart it if it died (a kill, or it exited on a fatal error) before finishing."""
        if self.proc is None or (self.proc.poll() is not None and self.proc.returncode != 0):
            self.start()

    def run_to_the_end(self, deadline: float) -> None:
        """Keep it running (restarts included) until it finishes or the monotonic deadline."""
        while not self.finished and time.monotonic() < deadline:
            self.ensure_running()
            time.sleep(0.5)

    @property
    def finished(self) -> bool:
        return self.proc is not None and self.proc.poll() == 0

    def lines(self) -> list[str]:
        """Its own report lines (`ctp_app: ...`), without the clients' debug log."""
        return [line for line in self.output.read_text(errors="replace").splitlines()
                if line.startswith("ctp_app:")]

    def story(self) -> str:
        """Its output's tail, its own report lines first (a debug log would bury them)."""
        text = self.output.read_text(errors="replace")
        return "\n".join(self.lines()[-8:]) + f"\n--- output tail ---\n{text[-3000:]}"

    def attempts(self) -> dict[str, str]:
        """attempt -> "committed" / "aborted", as the application logged them."""
        outcome = {}
        for line in self.attempts_log.read_text().splitlines():
            rec = json.loads(line)
            outcome[rec["attempt"]] = rec["status"]
        return outcome


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


def check_output(cluster, app: App) -> Report:
    """The exactly-once verdict on what the application wrote to `out`."""
    return check(read(cluster, "read_committed"), app.shape["per_partition"], app.attempts(),
                 written_by_attempt(read(cluster, "read_uncommitted")))
