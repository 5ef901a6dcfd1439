"""kafkajs (Node.js) against real strom processes, driven through tests/js/roundtrip.js:

- its admin creates topics and reads a group's committed offsets, state and listing;
- its idempotent producer writes records (none and gzip, the codecs kafkajs has without
  plugins) that both kafkajs and confluent-kafka read back intact;
- two kafkajs consumers share one group and split the partitions;
- against a 3-broker cluster, its idempotent acks=all producer loses and duplicates nothing
  while the leader of a partition is killed with SIGKILL (one partition per send(): see
  roundtrip.js on kafkajs's own retry bug, tulios/kafkajs#1798).

bin/run-tests.sh installs kafkajs into tests/js/node_modules (`npm ci`, pinned by
tests/js/package-lock.json)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster import Cluster
from tests.support.roundtrip import (Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)

JS_DIR = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def kafkajs_installed() -> None:
    if NODE is not None and (JS_DIR / "node_modules" / "kafkajs").is_dir():
        return
    why = "node or kafkajs not installed (bin/run-tests.sh runs `npm ci` in tests/js)"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)        # in CI a missing client is a broken set-up, not a skip
    pytest.skip(why)

N = 20_000


def js(bootstrap: str, command: str, timeout: float = 240, **args) -> tuple[dict, list[dict]]:
    """Run one command of roundtrip.js; its result and the JSON lines printed before it."""
    p = subprocess.run([NODE, str(JS_DIR / "roundtrip.js"), bootstrap, command, json.dumps(args)],
                       capture_output=True, text=True, timeout=timeout, cwd=JS_DIR)
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else {}
    assert p.returncode == 0 and "result" in last, \
        f"kafkajs {command} failed: {last.get('error')}\n{p.stderr[-3000:]}"
    return last["result"], lines[:-1]


def as_seen(r: dict) -> Seen:
    return Seen(r["partition"], r["offset"], r["key"].encode(), r["value"].encode(),
                [(k, None if v is None else v.encode()) for k, v in r["headers"]], r["timestamp"])


def confluent_read(bootstrap: str, topic: str, partitions: int, n: int) -> list[Seen]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Seen] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < n and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                assert m.error() is None, m.error()
                seen.append(Seen(m.partition(), m.offset(), m.key(), m.value(),
                                 list(m.headers() or []), m.timestamp()[1]))
    finally:
        c.close()
    return seen


def assert_group_done(bootstrap: str, topic: str, group: str) -> None:
    state, _ = js(bootstrap, "groupState", topic=topic, groupId=group)
    assert state["committed"] == state["end"], state      # every consumed offset committed
    assert state["listed"] and state["state"] == "Empty", state
    assert state["protocolType"] == "consumer", state


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_roundtrip(broker, codec):
    topic = f"kafkajs-{codec}"
    created, _ = js(broker.bootstrap, "createTopic", topic=topic, partitions=3)
    assert created == {"created": True, "partitions": 3}
    produced, _ = js(broker.bootstrap, "produce", topic=topic, n=N, codec=codec)
    assert produced == {"acked": N}

    consumed, records = js(broker.bootstrap, "consumeGroup", topic=topic, groupId=f"g-{codec}", n=N)
    assert consumed["consumed"] == N and len(records) == N      # one member: nothing twice
    verify([as_seen(r) for r in records], N, codec)
    assert_group_done(broker.bootstrap, topic, f"g-{codec}")
    # What kafkajs wrote is Kafka's format for every client, not only for kafkajs.
    verify(confluent_read(broker.bootstrap, topic, 3, N), N, codec)


def test_two_kafkajs_consumers_split_a_group_fed_by_confluent(broker):
    topic, group, codec = "kafkajs-group", "g-two", "gzip"
    js(broker.bootstrap, "createTopic", topic=topic, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 5, "log_level": 0})
    for i in range(N):
        p.produce(topic, key=key_of(i), value=value_of(i, codec), headers=headers_of(i, codec),
                  timestamp=timestamp_of(i))
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0

    consumed, records = js(broker.bootstrap, "consumeGroup", topic=topic, groupId=group, n=N,
                           members=2)
    final = {int(m): set(ps) for m, ps in consumed["assignments"].items()}
    assert set(final) == {0, 1} and all(final.values()), consumed       # both got partitions
    assert final[0].isdisjoint(final[1]) and final[0] | final[1] == {0, 1, 2}, consumed
    # Each record intact; a rebalance between the joins may hand a partition over, so a record
    # may come twice, but never changed and never missing.
    seen = [as_seen(r) for r in records]
    verify(list({(s.partition, s.offset): s for s in seen}.values()), N, codec)
    assert {r["member"] for r in records} == {0, 1}
    assert_group_done(broker.bootstrap, topic, group)


@pytest.mark.slow
def test_kafkajs_idempotent_producer_survives_a_killed_leader(tmp_path):
    topic, partitions, n = "kafkajs-failover", 3, 60_000
    # The killed leader is noticed when its ZooKeeper session expires: 3 s rather than the
    # cluster's 6 s shortens the producer's stall and changes nothing else it goes through.
    with Cluster(tmp_path / "c", brokers=3, zookeeper_session_timeout_ms=3000) as cluster:
        cluster.start()
        created, _ = js(cluster.bootstrap, "createTopic", topic=topic, partitions=partitions,
                        replicationFactor=3)
        assert created["partitions"] == partitions
        victim = cluster.wait_for_leader(topic, 0)
        args = json.dumps({"topic": topic, "n": n, "codec": "none", "chunk": 2000,
                           "progress": True, "partitions": partitions})
        proc = subprocess.Popen([NODE, str(JS_DIR / "roundtrip.js"), cluster.bootstrap, "produce",
                                 args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=JS_DIR)
        lines = []
        killed_at = None
        for line in proc.stdout:
            msg = json.loads(line)
            lines.append(msg)
            if killed_at is None and msg.get("progress", 0) >= n // 4:
                cluster.kill9(victim)          # mid-stream, with requests in flight
                killed_at = msg["progress"]
        proc.wait(240)
        assert killed_at is not None and killed_at < n, lines[-3:]
        assert proc.returncode == 0 and lines[-1] == {"result": {"acked": n}}, \
            (lines[-3:], proc.stderr.read()[-3000:])
        cluster.wait_for_leader(topic, 0, other_than=victim)
        # Back for the group: __consumer_offsets needs 3 live brokers to be created
        # (offsets.topic.replication.factor=3, as in Kafka).
        cluster.restart(victim)

        consumed, records = js(cluster.bootstrap, "consumeGroup", topic=topic, groupId="g-fail",
                               n=n)
        verify([as_seen(r) for r in records], n, "none", partitions=partitions)
