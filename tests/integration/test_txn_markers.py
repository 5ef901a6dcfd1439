"""Transaction markers in a real 3-broker cluster (replication factor 3): transactional
batches produced over the wire, COMMIT/ABORT markers written with WriteTxnMarkers (as the
transaction coordinator will), and what real consumers make of them.

read_committed consumers of confluent-kafka and kafka-python see only committed and plain
records, never past an open transaction (the LSO); read_uncommitted ones see aborted data
too; neither ever gets a control record, and offsets are dense apart from the markers. A
marker from an older coordinator epoch is refused, and the aborted-transaction index is
replicated: a follower that becomes leader hides the same records."""
from __future__ import annotations

import itertools
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.support.cluster import Cluster
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "txn-markers"
_PIDS = itertools.count(7000)      # each test's producers are new to the partition


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # This test plays the transaction coordinator by hand, so the leaders must not ask the
    # real one about these producers (KIP-890 verification, tested in test_transactions.py).
    with Cluster(tmp_path_factory.mktemp("txn") / "c", brokers=3,
                 overrides={"transaction.partition.verification.enable": "false"}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[TOPIC].result(30)
        c.wait_for_leader(TOPIC, 0)
        c.wait_until(lambda: len(c.isr(TOPIC, 0)) == 3)
        yield c


class Writer:
    """Speaks to the partition's leader as a transactional producer and as the coordinator."""

    def __init__(self, c: Cluster):
        leader = c.leader(TOPIC, 0)
        self.wire = WireClient("127.0.0.1", c.broker(leader).port)
        self.seq: dict[int, int] = {}

    def produce(self, batch: bytes) -> int:
        r = self.wire.request("Produce", 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                             "topic_data": [{"name": TOPIC, "partition_data": [
                                                 {"index": 0, "records": batch}]}]})
        p = r.responses[0].partition_responses[0]
        assert p.error_code == 0, Code(p.error_code).name
        return p.base_offset

    def plain(self, value: bytes) -> int:
        return self.produce(build_batch([Record(None, value)]))

    def txn(self, pid: int, *values: bytes) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(values)
        return self.produce(build_batch([Record(None, v) for v in values], producer_id=pid,
                                        producer_epoch=0, base_sequence=seq, is_transactional=True))

    def end(self, pid: int, commit: bool, coordinator_epoch: int = 0) -> int:
        r = self.wire.request("WriteTxnMarkers", 1, {"markers": [{
            "producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
            "topics": [{"name": TOPIC, "partition_indexes": [0]}],
            "coordinator_epoch": coordinator_epoch}]})
        return r.markers[0].topics[0].partitions[0].error_code

    def latest(self, isolation: int) -> int:
        r = self.wire.request("ListOffsets", 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        return r.topics[0].partitions[0].offset


def confluent_read(c: Cluster, isolation: str, end: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
            position = consumer.position([TopicPartition(TOPIC, 0)])[0].offset
            if position >= end:
                break
        return got
    finally:
        consumer.close()


def kafka_python_read(c: Cluster, isolation: str, end: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and consumer.position(tp) < end:
            for batch in consumer.poll(500).values():
                got.extend((m.offset, m.value) for m in batch)
        return got
    finally:
        consumer.close()


READERS = {"confluent-kafka": confluent_read, "kafka-python": kafka_python_read}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_committed_aborted_and_open_transactions_as_real_consumers_see_them(cluster, reader):
    c = cluster
    w = Writer(c)
    P, Q = next(_PIDS), next(_PIDS)
    base = w.plain(b"plain-0")
    w.txn(P, b"a1", b"a2")
    w.txn(Q, b"c1")
    w.txn(P, b"a3")
    # Both transactions open: read_committed stops at P's first record.
    assert w.latest(0) == base + 5 and w.latest(1) == base + 1
    assert w.end(P, commit=False) == 0
    assert w.latest(1) == base + 3                  # Q is still open
    assert w.end(Q, commit=True) == 0
    w.plain(b"plain-1")
    end = base + 8
    assert w.latest(1) == w.latest(0) == end

    read = READERS[reader]
    committed = [(o, v) for o, v in read(c, "read_committed", end) if o >= base]
    assert committed == [(base, b"plain-0"), (base + 3, b"c1"), (base + 7, b"plain-1")]
    uncommitted = [(o, v) for o, v in read(c, "read_uncommitted", end) if o >= base]
    assert uncommitted == [(base, b"plain-0"), (base + 1, b"a1"), (base + 2, b"a2"),
                           (base + 3, b"c1"), (base + 4, b"a3"), (base + 7, b"plain-1")]
    w.wire.close()


def test_a_marker_of_an_older_coordinator_epoch_is_fenced(cluster):
    w = Writer(cluster)
    pid = next(_PIDS)
    w.txn(pid, b"x")
    assert w.end(pid, commit=True, coordinator_epoch=3) == 0
    w.txn(pid, b"y")
    assert w.end(pid, commit=False, coordinator_epoch=2) == Code.TRANSACTION_COORDINATOR_FENCED
    assert w.end(pid, commit=False, coordinator_epoch=3) == 0
    w.wire.close()


def test_a_new_leader_hides_the_same_aborted_records(cluster):
    c = cluster
    w = Writer(c)
    pid = next(_PIDS)
    base = w.txn(pid, b"lost-1", b"lost-2")
    assert w.end(pid, commit=False) == 0
    kept = w.plain(b"kept")
    w.wire.close()
    old_leader = c.leader(TOPIC, 0)
    c.kill9(old_leader)
    try:
        c.wait_for_leader(TOPIC, 0, other_than=old_leader)
        got = [(o, v) for o, v in confluent_read(c, "read_committed", kept + 1) if o >= base]
        assert got == [(kept, b"kept")]
    finally:
        c.restart(old_leader)
