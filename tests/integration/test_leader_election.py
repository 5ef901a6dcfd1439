"""ElectLeaders and bin/kafka-leader-election.sh in a real 3-broker cluster (ZooKeeper, the
controller), called by the tool, confluent-kafka's and kafka-python's admin clients, the
wire, and the legacy /admin/preferred_replica_election znode.

Automatic leader rebalancing is off, so leadership stays where a restart left it until an
election is asked for.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka import ElectionType as CkElectionType

from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOPIC = "lead"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("elect") / "c", brokers=3,
                 overrides={"auto.leader.rebalance.enable": "false"}) as c:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        for p in range(PARTITIONS):
            c.wait_for_leader(TOPIC, p)
        yield c


def tool(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(REPO / "bin" / "kafka-leader-election.sh"), *args], capture_output=True,
                          timeout=timeout, cwd=REPO, env=dict(os.environ))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def leader_counts(cluster: Cluster) -> dict[int, int]:
    counts = Counter(cluster.leader(TOPIC, p) for p in range(PARTITIONS))
    return {b: counts.get(b, 0) for b in range(cluster.size)}


def preferred(cluster: Cluster, p: int) -> int:
    assignment = cluster._get_json(f"/brokers/topics/{TOPIC}")["partitions"]
    return int(assignment[str(p)][0])


def restart_and_rejoin(cluster: Cluster, broker_id: int) -> None:
    """A clean restart: controlled shutdown moves its leadership away; wait until it is back
    in every ISR (and so electable again)."""
    cluster.restart(broker_id)
    cluster.wait_until(lambda: all(broker_id in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
                       timeout=60)


def test_tool_restores_the_leader_counts_after_a_restart(cluster):
    before = leader_counts(cluster)
    assert before == {0: 2, 1: 2, 2: 2}, before
    restart_and_rejoin(cluster, 0)
    skewed = leader_counts(cluster)
    assert skewed[0] == 0, skewed
    r = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    after = leader_counts(cluster)
    print(f"\nleaders per broker: before restart {before}, after restart of broker 0 {skewed}, "
          f"after kafka-leader-election.sh --election-type preferred --all-topic-partitions {after}")
    assert r.returncode == 0, r.stderr
    moved = sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS) if preferred(cluster, p) == 0)
    assert r.stdout.startswith("Successfully completed leader election (PREFERRED) for partitions "), r.stdout
    assert all(name in r.stdout for name in moved), r.stdout
    assert after == before
    # Nothing left to do: the same call elects nothing and says nothing failed.
    again = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    assert again.returncode == 0 and again.stdout == "", (again.stdout, again.stderr)
    # Asked by name, a partition already led by its preferred replica is reported as such.
    one = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
               "--topic", TOPIC, "--partition", "0")
    assert one.returncode == 0
    assert one.stdout.strip() == f"Valid replica already elected for partitions {TOPIC}-0"


def test_confluent_kafka_elect_leaders(cluster):
    restart_and_rejoin(cluster, 1)
    away = [p for p in range(PARTITIONS) if preferred(cluster, p) == 1]
    assert all(cluster.leader(TOPIC, p) != 1 for p in away)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    asked = [CkTopicPartition(TOPIC, p) for p in away]
    results = admin.elect_leaders(CkElectionType.PREFERRED, asked).result(30)
    assert {(tp.topic, tp.partition): e for tp, e in results.items()} == {(TOPIC, p): None for p in away}
    assert all(cluster.leader(TOPIC, p) == 1 for p in away)
    # Again: the right leader already leads, so librdkafka reports ELECTION_NOT_NEEDED.
    again = admin.elect_leaders(CkElectionType.PREFERRED, asked).result(30)
    assert {e.name() for e in again.values()} == {"ELECTION_NOT_NEEDED"}


def test_kafka_python_elect_leaders(cluster):
    from kafka.admin import KafkaAdminClient

    restart_and_rejoin(cluster, 2)
    assert leader_counts(cluster)[2] == 0
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        response = admin.elect_leaders(0, {TOPIC: list(range(PARTITIONS))}, timeout_ms=30000)
    finally:
        admin.close()
    codes = {(t.topic, r.partition_id): r.error_code
             for t in response.replica_election_results for r in t.partition_result}
    for p in range(PARTITIONS):
        assert codes[(TOPIC, p)] == (0 if preferred(cluster, p) == 2 else 84), codes
    assert leader_counts(cluster) == {0: 2, 1: 2, 2: 2}


def test_a_broker_that_is_not_controller_answers_not_controller(cluster):
    controller = cluster.controller_id()
    other = next(b for b in range(cluster.size) if b != controller)
    resp = cluster.request(cluster.broker(other).port, "ElectLeaders", 2, {
        "election_type": 0, "topic_partitions": [{"topic": TOPIC, "partitions": [0]}], "timeout_ms": 5000})
    assert resp.error_code == 0
    assert [(r.partition_id, r.error_code) for t in resp.replica_election_results for r in t.partition_result] \
        == [(0, 41)]


def test_unknown_partition_and_bad_file(cluster, tmp_path):
    r = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred",
             "--topic", "no-such-topic", "--partition", "0")
    assert r.returncode == 1
    assert "Error completing leader election (PREFERRED) for partition: no-such-topic-0: " \
           "UnknownTopicOrPartitionError" in r.stdout, r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "lead", "partition": 0}, {"topic": "lead", "partition": 0}]}')
    r = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--path-to-json-file", str(bad))
    assert r.returncode != 0
    assert r.stderr.strip() == "Error: Replica election data contains duplicate partitions: lead-0"


def test_legacy_preferred_replica_election_znode(cluster):
    restart_and_rejoin(cluster, 0)
    away = [p for p in range(PARTITIONS) if preferred(cluster, p) == 0]
    assert all(cluster.leader(TOPIC, p) != 0 for p in away)
    body = {"version": 1, "partitions": [{"topic": TOPIC, "partition": p} for p in away]}
    cluster.zk.create(cluster.path("/admin/preferred_replica_election"), json.dumps(body).encode(), makepath=True)
    cluster.wait_until(lambda: all(cluster.leader(TOPIC, p) == 0 for p in away), timeout=30)
    # The controller deletes the request once done, as Kafka's does.
    cluster.wait_until(lambda: not cluster.zk.exists(cluster.path("/admin/preferred_replica_election")), timeout=30)


def test_unclean_election_of_an_offline_partition(cluster, tmp_path):
    """Replicas [1, 2]: 2 stops (ISR [1]), then 1 stops: offline with ISR [1]. 2 comes back
    but may not lead cleanly; a preferred election fails (1 is down); an unclean one elects 2."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("unc", num_partitions=1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "1"})])["unc"].result(30)
    cluster.wait_for_leader("unc", 0)
    cluster.wait_until(lambda: cluster.isr("unc", 0) == [1, 2] or cluster.isr("unc", 0) == [2, 1])
    try:
        cluster.terminate(2)
        cluster.wait_until(lambda: cluster.isr("unc", 0) == [1])
        cluster.terminate(1)
        cluster.wait_until(lambda: cluster.leader("unc", 0) is None)
        cluster.broker(2).start()
        cluster.wait_for_brokers(2)
        assert cluster.leader("unc", 0) is None
        bootstrap = cluster.bootstrap_except(1)
        failed = tool("--bootstrap-server", bootstrap, "--election-type", "preferred", "--topic", "unc", "--partition", "0")
        assert failed.returncode == 1
        assert "Error completing leader election (PREFERRED) for partition: unc-0: " \
               "PreferredLeaderNotAvailableError" in failed.stdout, failed.stdout
        r = tool("--bootstrap-server", bootstrap, "--election-type", "unclean", "--topic", "unc", "--partition", "0")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "Successfully completed leader election (UNCLEAN) for partitions unc-0"
        assert cluster.leader("unc", 0) == 2
        assert cluster.isr("unc", 0) == [2]
    finally:
        for b in (1, 2):
            if not cluster.running(b):
                cluster.broker(b).start()
        cluster.wait_for_brokers(3)
