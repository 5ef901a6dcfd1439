"""A 3-broker strom cluster in containers (`StromClusterContainer`): the leader's container is
disconnected from the Docker network (`docker network disconnect`) while an idempotent
acks=all producer runs, then connected again. The majority elects a new leader and goes on
acknowledging; the cut-off leader acknowledges nothing it could lose (min.insync.replicas=2
and no follower reaches it); once back it rejoins every ISR. The delivery checker then reads
everything back: 0 acknowledged records lost, no duplicate, no reordering, no conflicting
offset."""
from __future__ import annotations

import time

import pytest

from broker.testing.container_support import wait_until
from broker.testing.containers import StromClusterContainer
from tests.chaos.checker import ChaosProducer, Checker, read_back

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "cut-off"
PARTITIONS = 3
SESSION_MS = 4000          # the brokers' ZooKeeper sessions: how long a cut leader keeps its own
RATE = 300                 # records per second


def all_isrs_full(cluster: StromClusterContainer) -> bool | None:
    """True when every broker says every partition has a leader and all 3 replicas in sync."""
    for i in range(cluster.size):
        for p in range(PARTITIONS):
            state = cluster.partition_state(TOPIC, p, brokers=[i])
            if state is None or state[1] != [0, 1, 2]:
                return None
    return True


def new_leader(cluster: StromClusterContainer, asked: list[int], old: int) -> int | None:
    """The leader of partition 0 that the `asked` brokers know, once it is not `old`."""
    state = cluster.partition_state(TOPIC, 0, asked)
    return state[0] if state is not None and state[0] != old else None


def test_leader_disconnected_from_the_network_loses_nothing_acknowledged(strom_image):
    from confluent_kafka.admin import AdminClient, NewTopic
    with StromClusterContainer(3, strom_image, zookeeper_session_timeout_ms=SESSION_MS) as cluster:
        bootstrap = cluster.get_bootstrap_server()
        print(f"3 brokers and ZooKeeper in containers ready in {cluster.start_seconds:.2f} s: {bootstrap}")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_until("every ISR full", lambda: all_isrs_full(cluster), 30)
        old = cluster.leader(TOPIC, 0)

        checker = Checker()
        producer = ChaosProducer(bootstrap, TOPIC, checker, "p0", rate=RATE, idempotence=True,
                                 config={"request.timeout.ms": 5000})
        with producer:
            producer.wait_acked(300, timeout=30)
            before_cut = producer.acked
            cut = time.monotonic()
            cluster.disconnect(old)
            others = [i for i in range(3) if i != old]
            new = wait_until(f"a new leader of {TOPIC}/0 among {others}",
                             lambda: new_leader(cluster, others, old), 60)
            failover = time.monotonic() - cut
            producer.wait_acked(producer.acked + 300, timeout=30)
            during_cut = producer.acked - before_cut
            cluster.reconnect(old)
            back = time.monotonic()
            wait_until(f"broker {old} back in every ISR", lambda: all_isrs_full(cluster), 60)
            rejoined = time.monotonic() - back
            producer.wait_acked(producer.acked + 300, timeout=30)
        read_back(bootstrap, TOPIC, PARTITIONS, checker, timeout=60)
        report = checker.report()
        print(f"leader {old} cut off: broker {new} leads after {failover:.1f} s "
              f"(sessions {SESSION_MS / 1000:.0f} s); {during_cut} acknowledged while it was off; "
              f"back in every ISR {rejoined:.1f} s after reconnecting")
        print(report)
        report.assert_ok(min_acked=900)
        assert during_cut >= 300
