"""Failover in seconds with Kafka's default ZooKeeper session timeout (18 s): after kill -9
of a partition leader, acks=all produce resumes within 2 s, because the controller sees the
process die (its listener refuses connections: zkcoord/liveness.py) instead of waiting for
the session to expire; when the dead leader was also the controller, another broker removes
/controller and a new controller is elected at once. A broker that is only paused (SIGSTOP)
keeps its leadership: only a refused connection counts as death. Nothing acknowledged is lost.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import stop_telling_a_failure
from tests.chaos.test_leader_failover import unavailability
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "chaos"
DEFAULT_SESSION_MS = 18000        # zookeeper.session.timeout.ms, Kafka's default
BOUND_S = 2.0


@pytest.fixture
def cluster(tmp_path, request):
    c = Cluster(tmp_path / "cluster", brokers=3, zookeeper_session_timeout_ms=DEFAULT_SESSION_MS)
    c.start()
    try:
        yield c
    finally:
        stop_telling_a_failure(c, request)


def create_topic(cluster: Cluster, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    for p in range(partitions):
        cluster.wait_for_leader(TOPIC, p)
        cluster.wait_until(lambda p=p: len(cluster.isr(TOPIC, p)) == 3, timeout=30)


@pytest.mark.parametrize("victim", ["leader", "controller"])
def test_kill9_of_a_leader_unavailable_at_most_2s(cluster, victim):
    create_topic(cluster, partitions=3)
    controller = cluster.controller_id()
    leaders = {p: cluster.leader(TOPIC, p) for p in range(3)}
    # Three partitions on three brokers: each broker, the controller too, leads one.
    if victim == "controller":
        p = next(p for p, b in leaders.items() if b == controller)
    else:
        p = next(p for p, b in leaders.items() if b != controller)
    dead = leaders[p]
    checker = Checker()
    with ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, keys=None,
                       config={"log_level": 0}) as producer:
        producer.wait_acked(2000, timeout=60)
        took = unavailability(cluster, lambda: cluster.kill9(dead), p)
        producer.wait_acked(checker.acked_count + 2000, timeout=60)
    role = "the leader and controller" if victim == "controller" else "the leader"
    print(f"\nunavailable after kill -9 of {role} (broker {dead}) of partition {p}, "
          f"zookeeper.session.timeout.ms={DEFAULT_SESSION_MS}: {took:.2f} s (bound {BOUND_S:.0f} s)")
    assert cluster.leader(TOPIC, p) not in (None, dead)
    assert dead not in cluster.isr(TOPIC, p)
    if victim == "controller":
        assert cluster.controller_id() not in (None, dead)
    # The dead broker is still registered (its session lives on): it was fenced, not expired.
    assert dead in cluster.broker_ids()
    read_back(cluster.bootstrap_except(dead), TOPIC, 3, checker)
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=4000)
    assert took <= BOUND_S


def test_a_paused_broker_is_not_fenced(cluster):
    """SIGSTOP for 4 s: its listener still accepts connections (the kernel does), so no one
    calls it dead; it keeps its leadership and its registration."""
    create_topic(cluster, partitions=3)
    controller = cluster.controller_id()
    p, paused = next((p, cluster.leader(TOPIC, p)) for p in range(3) if cluster.leader(TOPIC, p) != controller)
    epoch = cluster.partition_state(TOPIC, p)["leader_epoch"]
    cluster.sigstop(paused)
    try:
        time.sleep(4.0)
        assert cluster.leader(TOPIC, p) == paused
        assert cluster.partition_state(TOPIC, p)["leader_epoch"] == epoch
    finally:
        cluster.sigcont(paused)
    assert paused in cluster.broker_ids()
