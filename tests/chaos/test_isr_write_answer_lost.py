"""A leader's ISR expansion that lands in ZooKeeper while its answer is lost.

The leader writes the new ISR, the connection drops before the reply, and the retried write
is refused for its version (the first one landed). ZooKeeper, and so the controller's next
election, now counts the returning follower in the ISR: the leader must too. Were it to keep
the old ISR, acks=all would pass without that follower, which the controller may elect
(the cause of an acknowledged-write loss seen once under load in test_kip101).

Checked: at the moment an acks=all record is acknowledged, every replica of the ISR in
ZooKeeper holds it (the follower is frozen meanwhile, so the leader must first shrink it out
of the ISR).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.replicas import log_bytes
from tests.support.cluster import CHROOT, Cluster
from tests.support.zk_answer_dropper import ZkAnswerDropper

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def proxied_cluster(tmp_path):
    """3 brokers whose ZooKeeper traffic goes through a ZkAnswerDropper."""
    dropper = ZkAnswerDropper()
    c = Cluster(tmp_path / "cluster", brokers=3, own_zookeeper=True,
                overrides={"zookeeper.connect": dropper.connect_string(CHROOT)})
    dropper.target = ("127.0.0.1", c.zookeeper.port)
    c.start()
    try:
        yield c, dropper
    finally:
        c.stop()
        dropper.close()


def test_an_isr_expansion_whose_answer_was_lost_counts_for_acks_all(proxied_cluster):
    cluster, dropper = proxied_cluster
    topic = "isr-answer-lost"
    ctl = cluster.controller_id()
    # Neither the leader nor the frozen follower is the controller: a controller frozen for
    # its session timeout would be replaced, and the new one's LeaderAndIsr hides the story.
    leader, f, g = (ctl + 1) % 3, (ctl + 2) % 3, ctl
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, g, f]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_until(lambda: cluster.leader(topic, 0) == leader and len(cluster.isr(topic, 0)) == 3,
                       timeout=30, message="leader and full ISR")

    # The follower drops out of the ISR, then comes back: the leader writes the expansion,
    # which lands, and the answer is lost.
    cluster.sigstop(f)
    cluster.wait_until(lambda: sorted(cluster.isr(topic, 0)) == sorted([leader, g]), timeout=30,
                       message=f"broker {f} out of the ISR")
    dropper.arm(f"/brokers/topics/{topic}/partitions/0/state")
    cluster.sigcont(f)
    assert dropper.dropped.wait(30), "the leader never wrote the ISR expansion"
    assert sorted(cluster.isr(topic, 0)) == [0, 1, 2]
    # kazoo reconnects (same session); the coordinator's retry of the write meets BADVERSION.
    time.sleep(1.0)

    # The follower freezes again. An acks=all record may only be acknowledged once every
    # replica of the ISR the controller would elect from holds it.
    cluster.sigstop(f)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "log_level": 0,
                         "enable.idempotence": False, "message.timeout.ms": 60000,
                         "linger.ms": 0})
    acked: list = []
    value = b"acked-while-frozen-%d" % time.time_ns()
    producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: acked.append((err, msg)))
    t0 = time.monotonic()
    assert producer.flush(60) == 0, "no answer to the acks=all produce"
    waited = time.monotonic() - t0
    isr_at_ack = sorted(cluster.isr(topic, 0))
    err, msg = acked[0]
    assert err is None, err
    holding = {i: value in log_bytes(cluster, i, topic) for i in isr_at_ack}
    print(f"acks=all answered after {waited:.2f} s at offset {msg.offset()}; ISR in ZooKeeper "
          f"then {isr_at_ack}; holding the record: {holding}")
    assert all(holding.values()), \
        f"acknowledged while ISR member(s) {[i for i, h in holding.items() if not h]} lack it: " \
        f"electing one would lose it"
    cluster.sigcont(f)
    cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3, timeout=30, message="full ISR again")

