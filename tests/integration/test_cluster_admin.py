"""Topic administration and consumer groups in a real 3-broker cluster (ZooKeeper, the
controller): CreatePartitions and DeleteTopics go through the controller; a consumer group
works whichever broker coordinates it."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path):
    with Cluster(tmp_path / "c", brokers=3) as c:
        c.start()
        yield c


def test_create_partitions_and_delete_topic(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("adm", 2, 3)])["adm"].result(30)
    admin.create_partitions([NewPartitions("adm", 4)])["adm"].result(30)
    for p in range(4):
        cluster.wait_for_leader("adm", p)
    cluster.wait_until(lambda: len(admin.list_topics("adm", timeout=10).topics["adm"].partitions) == 4)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(40):
        p.produce("adm", value=b"%d" % i, partition=i % 4)
    assert p.flush(30) == 0

    admin.delete_topics(["adm"], operation_timeout=30)["adm"].result(30)
    cluster.wait_until(lambda: "adm" not in admin.list_topics(timeout=10).topics, timeout=30)
    # StopReplica(delete) removed every replica's log (after the delayed delete).
    cluster.wait_until(lambda: not any((cluster.broker(i).log_dir / f"adm-{p}").exists()
                                       for i in range(3) for p in range(4)), timeout=30)
    assert cluster.partition_state("adm", 0) is None


def test_consumer_group_across_brokers(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("grp", 6, 3)])["grp"].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(600):
        p.produce("grp", key=b"%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    consumers = [Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g-cluster",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "session.timeout.ms": 6000, "log_level": 0}) for _ in range(2)]
    for c in consumers:
        c.subscribe(["grp"])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 600 and time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.add((m.partition(), m.offset()))
                c.commit(m, asynchronous=False)
    assert len(seen) == 600
    assignments = [set(tp.partition for tp in c.assignment()) for c in consumers]
    assert assignments[0].isdisjoint(assignments[1]) and assignments[0] | assignments[1] == set(range(6))
    for c in consumers:
        c.close()
    offsets = admin.list_consumer_group_offsets(
        [__import__("confluent_kafka").ConsumerGroupTopicPartitions("g-cluster")])["g-cluster"].result(30)
    assert sum(tp.offset for tp in offsets.topic_partitions) == 600


def test_topic_config_change_reaches_every_replica(tmp_path):
    """AlterConfigs lands on one broker; every broker's replicas of the topic must obey it
    (Kafka: each broker watches /config/changes). Observed on disk: retention.ms lowered
    after the records were written deletes them on the leader and on both followers."""
    with Cluster(tmp_path / "c", brokers=3, overrides={
            "log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "100"}) as c:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("cfgx", 3, 3)])["cfgx"].result(30)
        for p in range(3):
            c.wait_for_leader("cfgx", p)
        old = int(time.time() * 1000) - 3_600_000
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "log_level": 0})
        for i in range(300):
            p.produce("cfgx", value=b"%d" % i, partition=i % 3, timestamp=old + i)
        assert p.flush(30) == 0

        def log_bases(i: int, part: int) -> list[int]:
            return sorted(int(f.stem) for f in (c.broker(i).log_dir / f"cfgx-{part}").glob("*.log"))
        # Every replica has its 100 records (followers caught up: acks=all, ISR of 3).
        c.wait_until(lambda: all(len(c.isr("cfgx", part)) == 3 for part in range(3)),
                     message="full ISRs")
        assert all(log_bases(i, part) == [0] for i in range(3) for part in range(3))

        res = ConfigResource(ConfigResource.Type.TOPIC, "cfgx", set_config={"retention.ms": "1000"})
        admin.alter_configs([res])[res].result(30)
        # On all three brokers, for all three partitions: expired, rolled and deleted.
        c.wait_until(lambda: all(log_bases(i, part) == [100] for i in range(3) for part in range(3)),
                     timeout=30, message="retention applied on every replica")
