"""kcat's balanced consumer (`kcat -G <group> <topic>`, Debian kcat 1.7.1 on librdkafka
2.0.2) against a real broker process.

Two kcat -G processes share a 4-partition topic (2 partitions each, read from kcat's
"% Group ... rebalanced (memberid ...): assigned: t [0], t [1]" stderr lines) and consume
every produced record exactly once between them. They are stopped with SIGTERM, which
makes kcat close its consumer: librdkafka commits the offsets its auto-commit stored, and
the commits are checked with kafka-python. A third kcat -G in the same group (with `-e`)
then resumes from those commits: it reads exactly the records produced after the first two
stopped, and exits at the end.

Every kcat here runs with `-X auto.offset.reset=earliest` and no `-o`: in -G mode kcat 1.7.1
applies `-o <offset>` to every assignment it receives (rebalance_cb in kcat.c sets
`partitions->elems[i].offset = conf.offset` before rd_kafka_assign), so `-o beginning`
would re-read the whole topic whatever the group committed. Without `-o` librdkafka starts
each partition at the committed offset, and at auto.offset.reset only where there is none.
"""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.groups2_harness import wait_for
from tests.support.groups2_scenario import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120),
              pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")]

PARTITIONS = 4
FIRST = 4_000
SECOND = 2_000
REBALANCED = re.compile(r"^% Group (\S+) rebalanced \(memberid ([^)]*)\): (assigned|revoked): (.*)$")


class Kcat:
    def __init__(self, workdir: Path, name: str, bootstrap: str, group: str, topic: str, *extra: str):
        self.name = name
        self.out_path = workdir / f"{name}.out"
        self.err_path = workdir / f"{name}.err"
        self.proc = subprocess.Popen(
            ["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-u",
             "-f", r"%p %o %s\n",
             "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=1000",
             "-X", "auto.commit.interval.ms=500", *extra, topic],
            stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"))

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def assigned(self, topic: str) -> set[int] | None:
        """The partitions of the last rebalance line on stderr (None before the first)."""
        cur = None
        for line in self.stderr().splitlines():
            m = REBALANCED.match(line)
            if m:
                cur = set()
                if m.group(3) == "assigned":
                    for t, p in re.findall(r"(\S+) \[(\d+)\]", m.group(4)):
                        assert t == topic, line
                        cur.add(int(p))
        return cur

    def records(self) -> list[tuple[int, int, str]]:
        data = self.out_path.read_text(errors="replace").split("\n")
        data.pop()          # "" after the last newline, or a line still being written
        return [(int(p), int(o), v) for p, o, v in (line.split(" ", 2) for line in data)]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{self.name} did not exit after SIGTERM:\n{self.stderr()}")

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def produce(bootstrap: str, topic: str, first: int, n: int) -> dict[tuple[int, int], str]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [(i, producer.send(topic, key=b"k-%d" % (i % 200), value=f"v-{i}".encode()))
                   for i in range(first, first + n)]
        producer.flush(30)
        out = {}
        for i, f in futures:
            md = f.get(timeout=0)
            out[(md.partition, md.offset)] = f"v-{i}"
        return out
    finally:
        producer.close(5)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        c.close(autocommit=False)


def ends(produced: dict[tuple[int, int], str]) -> dict[int, int]:
    out = {p: 0 for p in range(PARTITIONS)}
    for p, o in produced:
        out[p] = max(out[p], o + 1)
    return out


def as_map(name: str, recs: list[tuple[int, int, str]]) -> dict[tuple[int, int], str]:
    out: dict[tuple[int, int], str] = {}
    for p, o, v in recs:
        assert (p, o) not in out, f"{name} read {(p, o)} twice"
        out[(p, o)] = v
    return out


def test_kcat_balanced_consumers_share_and_resume(broker, tmp_path):
    topic, group = "groups2-kcat", "groups2-kcat-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    a = Kcat(tmp_path, "kcat-a", broker.bootstrap, group, topic)
    b = Kcat(tmp_path, "kcat-b", broker.bootstrap, group, topic)
    c: Kcat | None = None
    try:
        def shared():
            for k in (a, b):
                assert k.alive(), f"{k.name} exited:\n{k.stderr()}"
            sa, sb = a.assigned(topic), b.assigned(topic)
            if sa and sb and not sa & sb and sa | sb == set(range(PARTITIONS)):
                return sa, sb
            return None

        sa, sb = wait_for(shared, 40, "the two kcat -G to share the 4 partitions", interval=0.1)
        assert len(sa) == len(sb) == 2, (sa, sb)

        first = produce(broker.bootstrap, topic, 0, FIRST)

        def consumed_first():
            for k in (a, b):
                assert k.alive(), f"{k.name} exited:\n{k.stderr()}"
            return len(a.records()) + len(b.records()) >= FIRST

        wait_for(consumed_first, 30, f"the two kcat -G to consume {FIRST} records", interval=0.2)
        assert (a.assigned(topic), b.assigned(topic)) == (sa, sb), "rebalanced while consuming"
        for k in (a, b):
            assert k.stop() == 0, k.stderr()
            assert "ERROR" not in k.stderr(), k.stderr()
        got_a, got_b = as_map("kcat-a", a.records()), as_map("kcat-b", b.records())
        assert not set(got_a) & set(got_b), "a record was read by both kcat -G"
        assert {p for p, _ in got_a} <= sa and {p for p, _ in got_b} <= sb, (sa, sb)
        assert {**got_a, **got_b} == first

        # kcat closed its consumer on SIGTERM: the offsets auto-commit stored are committed.
        assert committed(broker.bootstrap, group, topic) == ends(first)

        second = produce(broker.bootstrap, topic, FIRST, SECOND)
        c = Kcat(tmp_path, "kcat-c", broker.bootstrap, group, topic, "-e")
        try:
            rc = c.proc.wait(40)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"kcat-c (-e) did not reach the end:\n{c.stderr()}")
        assert rc == 0 and "ERROR" not in c.stderr(), c.stderr()
        assert c.assigned(topic) is not None, c.stderr()
        got_c = as_map("kcat-c", c.records())
        assert not set(got_c) & set(first), \
            f"kcat-c re-read {len(set(got_c) & set(first))} records committed before it started"
        assert got_c == second
        assert committed(broker.bootstrap, group, topic) == ends({**first, **second})
    finally:
        started: list[Kcat | None] = [a, b, c]
        for proc in started:
            if proc is not None:
                proc.cleanup()
