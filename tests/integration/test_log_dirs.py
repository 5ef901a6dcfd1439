"""Several log dirs on a real broker: partitions spread over them, DescribeLogDirs through
kafka-python's admin, strom's admin and bin/kafka-log-dirs.sh, and AlterReplicaLogDirs moving
partitions to the other dir while an idempotent acks=all producer runs, losing nothing."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CkTopicPartition

from clients.admin import AdminClient
from clients.aio.log_dir_types import TopicPartitionReplica
from clients.types import NewTopic, TopicPartition

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def two_dir_broker(broker_factory, tmp_path):
    dirs = [str(tmp_path / "disk-a"), str(tmp_path / "disk-b")]
    return broker_factory({"log.dirs": ",".join(dirs)}), dirs


def partition_dirs(dirs: list[str], topic: str) -> dict[int, str]:
    """Where each partition's log is on disk (current logs only)."""
    out = {}
    for d in dirs:
        for name in os.listdir(d):
            t, _, p = name.rpartition("-")
            if t == topic and p.isdigit():
                out[int(p)] = d
    return out


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, b"x" * 100, partition=i % partitions)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def test_partitions_spread_over_the_dirs_and_every_tool_describes_them(broker_factory, tmp_path):
    broker, dirs = two_dir_broker(broker_factory, tmp_path)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("spread", 4, 1)])
        produce(broker.bootstrap, "spread", 400, 4)
        placed = partition_dirs(dirs, "spread")
        assert sorted(placed.values()) == sorted(dirs * 2)       # 2 partitions in each dir
        for d in dirs:
            assert (Path(d) / "meta.properties").read_text().startswith("version=0\nbroker.id=0\n")

        # strom's admin
        described = admin.describe_log_dirs()
        assert list(described) == [0] and sorted(described[0]) == sorted(dirs)
        for d, desc in described[0].items():
            assert desc.error is None and desc.total_bytes and desc.usable_bytes
            mine = {tp.partition: r for tp, r in desc.replicas.items() if tp.topic == "spread"}
            assert sorted(mine) == sorted(p for p, pd in placed.items() if pd == d)
            for p, r in mine.items():
                assert r.size == sum(f.stat().st_size for f in (Path(d) / f"spread-{p}").glob("*.log"))
                assert r.size > 0 and r.offset_lag == 0 and not r.is_future

    # kafka-python's admin: describe, then move partition 0 to the other dir and back
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartitionReplica as KpReplica

    from tests.support.cluster import Cluster
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = kp.describe_log_dirs()
        home = placed[0]
        other = next(d for d in dirs if d != home)
        moved = kp.alter_replica_log_dirs({KpReplica("spread", 0, 0): other})
        assert [e.__name__ for e in moved.values()] == ["NoError"], moved
        # .get: for a moment during the swap neither dir holds a current spread-0
        Cluster.wait_until(lambda: partition_dirs(dirs, "spread").get(0) == other, timeout=30)
        kp.alter_replica_log_dirs({KpReplica("spread", 0, 0): home})
        Cluster.wait_until(lambda: partition_dirs(dirs, "spread").get(0) == home, timeout=30)
    finally:
        kp.close()
    assert [b["broker"] for b in answer] == [0]
    seen = {}
    for result in answer[0]["log_dirs"]:
        assert result["error_code"] == 0
        for t in result["topics"]:
            for p in t["partitions"]:
                if t["name"] == "spread":
                    seen[p["partition_index"]] = result["log_dir"]
    assert seen == placed

    # the tool
    out = subprocess.run([str(REPO / "bin" / "kafka-log-dirs.sh"), "--bootstrap-server", broker.bootstrap,
                          "--describe", "--broker-list", "0", "--topic-list", "spread"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [0]
    tool_placed = {int(p["partition"].rsplit("-", 1)[1]): d["logDir"]
                   for d in doc["brokers"][0]["logDirs"] for p in d["partitions"]}
    assert tool_placed == placed
    assert all(d["error"] is None for d in doc["brokers"][0]["logDirs"])
    bad = subprocess.run([str(REPO / "bin" / "kafka-log-dirs.sh"), "--bootstrap-server", broker.bootstrap,
                          "--describe", "--broker-list", "5"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "do not exist from --broker-list: 5" in bad.stdout + bad.stderr


def test_alter_replica_log_dirs_moves_partitions_under_load_and_loses_nothing(broker_factory, tmp_path):
    broker, dirs = two_dir_broker(broker_factory, tmp_path)
    topic, partitions = "moving", 2
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        produce(broker.bootstrap, topic, 40000, partitions)      # ~4 MB to copy: the move takes a while
        before = partition_dirs(dirs, topic)
        acked: list[bytes] = []
        errors: list = []
        stop = threading.Event()

        def load() -> None:
            p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                          "linger.ms": 2})

            def on_delivery(err, msg) -> None:
                (errors if err is not None else acked).append(err or msg.value())
            i = 0
            while not stop.is_set():
                p.produce(topic, b"load-%d" % i, partition=i % partitions, on_delivery=on_delivery)
                p.poll(0)
                i += 1
                if i % 200 == 0:
                    time.sleep(0.01)
            p.flush(30)
        loader = threading.Thread(target=load)
        loader.start()
        try:
            time.sleep(0.5)
            moves = {TopicPartitionReplica(topic, p, 0): next(d for d in dirs if d != before[p])
                     for p in range(partitions)}
            assert admin.alter_replica_log_dirs(moves) == {r: None for r in moves}

            def moved() -> bool:
                dirs_now = admin.describe_log_dirs([0])[0]
                futures = [tp for d in dirs_now.values() for tp, r in d.replicas.items() if r.is_future]
                where = {tp.partition: path for path, d in dirs_now.items() for tp in d.replicas
                         if tp.topic == topic and not d.replicas[tp].is_future}
                return not futures and all(where.get(p) == moves[TopicPartitionReplica(topic, p, 0)]
                                           for p in range(partitions))
            deadline = time.monotonic() + 60
            while not moved():
                assert time.monotonic() < deadline, "the move did not finish"
                time.sleep(0.2)
            time.sleep(0.5)                                 # the load goes on in the new dirs
        finally:
            stop.set()
            loader.join(60)
        assert not errors
        assert len(acked) > 1000
        assert partition_dirs(dirs, topic) == {p: moves[TopicPartitionReplica(topic, p, 0)]
                                               for p in range(partitions)}
        ends = admin.list_offsets({TopicPartition(topic, p): "latest" for p in range(partitions)})

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    read: list[bytes] = []
    total = sum(r.offset for r in ends.values())
    deadline = time.monotonic() + 60
    while len(read) < total and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            assert m.error() is None
            read.append(m.value())
    c.close()
    assert len(read) == total
    loaded = [v for v in read if v.startswith(b"load-")]
    assert len(loaded) == len(set(loaded))                  # nothing doubled
    assert not set(acked) - set(loaded)                     # nothing acknowledged lost
    print(f"\nmoved {partitions} partitions between log dirs under load: {len(acked)} acknowledged, "
          f"0 lost, 0 duplicated")
