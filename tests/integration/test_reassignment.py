"""AlterPartitionReassignments / ListPartitionReassignments against a real 4-broker cluster
(ZooKeeper, the controller), over the wire: a move adds the new replicas, waits for them to
be in sync, moves leadership, removes and deletes the old ones; a move that cannot finish is
listed and can be cancelled; bad requests get Kafka's error codes. The tool and the
throttled move under load are tested with bin/kafka-reassign-partitions.sh elsewhere."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("reassign") / "c", brokers=4,
                 overrides={"auto.leader.rebalance.enable": "false"}) as c:
        c.start()
        yield c


def controller_port(cluster: Cluster) -> int:
    return cluster.broker(cluster.wait_for_controller()).port


def alter(cluster: Cluster, moves: dict[tuple[str, int], list[int] | None], port: int | None = None):
    topics: dict[str, list[dict]] = {}
    for (t, p), replicas in moves.items():
        topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    return cluster.request(port or controller_port(cluster), "AlterPartitionReassignments", 0, {
        "timeout_ms": 30000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def codes(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}


def listed(cluster: Cluster) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    resp = cluster.request(controller_port(cluster), "ListPartitionReassignments", 0,
                           {"timeout_ms": 30000, "topics": None})
    assert resp.error_code == 0
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


def assignment(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    return {int(p): r for p, r in cluster._get_json(f"/brokers/topics/{topic}")["partitions"].items()}


def create(cluster: Cluster, topic: str, replicas: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas,
                                  config={"min.insync.replicas": "1"})])[topic].result(30)
    for p in range(len(replicas)):
        cluster.wait_for_leader(topic, p)
        cluster.wait_until(lambda p=p: sorted(cluster.isr(topic, p)) == sorted(replicas[p]), timeout=30)


def produce(cluster: Cluster, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=partition)
    assert p.flush(30) == 0


def consume_all(cluster: Cluster, topic: str, partition: int = 0) -> list[bytes]:
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"read-{topic}-{time.monotonic()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append(m.value())
        elif m is None and out:
            break
    c.close()
    return out


def test_a_move_adds_catches_up_switches_and_removes(cluster):
    create(cluster, "mv", [[0, 1]])
    produce(cluster, "mv", RECORDS)
    resp = alter(cluster, {("mv", 0): [3, 2]})
    assert resp.error_code == 0 and codes(resp) == {("mv", 0): 0}
    cluster.wait_until(lambda: not listed(cluster), timeout=60)
    assert assignment(cluster, "mv") == {0: [3, 2]}
    state = cluster.partition_state("mv", 0)
    assert state["leader"] in (3, 2) and sorted(state["isr"]) == [2, 3]
    # The removed replicas were stopped and their logs deleted.
    cluster.wait_until(lambda: not any((cluster.broker(b).log_dir / "mv-0").exists() for b in (0, 1)), timeout=30)
    logs = [b"".join(f.read_bytes() for f in sorted((cluster.broker(b).log_dir / "mv-0").glob("*.log")))
            for b in (2, 3)]
    assert logs[0] == logs[1] and logs[0]
    assert consume_all(cluster, "mv") == [b"v%d" % i for i in range(RECORDS)]


def test_an_unfinished_move_is_listed_and_cancelled(cluster):
    create(cluster, "cx", [[0, 1]])
    produce(cluster, "cx", 50)
    cluster.sigstop(3)           # the new replica cannot catch up while paused
    try:
        resp = alter(cluster, {("cx", 0): [0, 3]})
        assert codes(resp) == {("cx", 0): 0}
        assert listed(cluster) == {("cx", 0): ([0, 3, 1], [3], [1])}
        assert assignment(cluster, "cx") == {0: [0, 3, 1]}
        cancel = alter(cluster, {("cx", 0): None})
        assert codes(cancel) == {("cx", 0): 0}
        assert listed(cluster) == {}
        assert assignment(cluster, "cx") == {0: [0, 1]}
    finally:
        cluster.sigcont(3)
    # The cancelled addition is stopped and deleted once broker 3 runs again.
    cluster.wait_until(lambda: not (cluster.broker(3).log_dir / "cx-0").exists(), timeout=30)
    assert consume_all(cluster, "cx") == [b"v%d" % i for i in range(50)]


def test_kafka_error_codes(cluster):
    create(cluster, "bad", [[0, 1]])
    resp = alter(cluster, {("bad", 0): [0, 0], ("bad", 1): [0, 1], ("nope", 0): [0]})
    assert codes(resp) == {("bad", 0): 39, ("bad", 1): 3, ("nope", 0): 3}
    assert codes(alter(cluster, {("bad", 0): [0, 7]})) == {("bad", 0): 39}
    assert codes(alter(cluster, {("bad", 0): None})) == {("bad", 0): 85}      # NO_REASSIGNMENT_IN_PROGRESS
    other = next(b for b in range(4) if b != cluster.wait_for_controller())
    not_controller = alter(cluster, {("bad", 0): [1, 0]}, port=cluster.broker(other).port)
    assert not_controller.error_code == 41


def test_kafka_python_alter_and_list(cluster):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition

    create(cluster, "kp", [[1, 2]])
    # The paused target (it cannot catch up, so the move stays listed) is neither the
    # controller nor a replica. kafka-python asks the least loaded broker which one is the
    # controller: ask before the pause, or a new connection to the paused broker can be
    # the one it waits on (it did, under load).
    paused = next(b for b in (3, 0) if b != cluster.wait_for_controller())
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.list_partition_reassignments()
    cluster.sigstop(paused)
    try:
        admin.alter_partition_reassignments({TopicPartition("kp", 0): [2, paused]})
        found = admin.list_partition_reassignments()
        entry = found[TopicPartition("kp", 0)]
        assert (entry["replicas"], entry["adding_replicas"], entry["removing_replicas"]) == \
            ([2, paused, 1], [paused], [1])
    finally:
        cluster.sigcont(paused)
    try:
        cluster.wait_until(lambda: assignment(cluster, "kp") == {0: [2, paused]}, timeout=60)
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


def test_the_legacy_reassign_partitions_znode(cluster):
    """Kafka's /admin/reassign_partitions JSON moves the partitions like the API; the znode
    goes once they are done, and an impossible target leaves it at once."""
    import json

    create(cluster, "zk", [[0, 1], [1, 2]])
    produce(cluster, "zk", 40, partition=0)
    body = {"version": 1, "partitions": [{"topic": "zk", "partition": 0, "replicas": [2, 3]},
                                         {"topic": "zk", "partition": 1, "replicas": [1, 9]}]}
    path = cluster.path("/admin/reassign_partitions")
    cluster.zk.create(path, json.dumps(body).encode(), makepath=True)
    cluster.wait_until(lambda: assignment(cluster, "zk") == {0: [2, 3], 1: [1, 2]}, timeout=60)
    cluster.wait_until(lambda: not cluster.zk.exists(path), timeout=30)
    assert consume_all(cluster, "zk") == [b"v%d" % i for i in range(40)]
