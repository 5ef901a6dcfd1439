"""Transactions of strom's own client (clients.producer.Producer with transactional.id, and
clients.consumer.Consumer with isolation.level) in a real 3-broker cluster: commit and abort
over several partitions as read_committed / read_uncommitted consumers (strom's and
confluent-kafka's) see them; consume-transform-produce committing the input offsets in the
transaction; a second producer with the same transactional id fencing the first."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients.aio.transactions import TransactionAbortedError, TransactionStateError
from clients.consumer import Consumer
from clients.producer import Producer
from clients.protocol.errors import ProducerFencedError
from clients.types import TopicPartition
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("client-txn") / "c", brokers=3) as c:
        yield c


def new_topic(c: Cluster, partitions: int = PARTITIONS) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(30)
    for p in range(partitions):
        c.wait_for_leader(name, p)
    return name


def txn_producer(c: Cluster, tid: str) -> Producer:
    p = Producer(bootstrap_servers=c.bootstrap, transactional_id=tid, linger_ms=2)
    p.init_transactions(60)
    return p


def strom_read(c: Cluster, topic: str, isolation: str, partitions: int = PARTITIONS,
               quiet_s: float = 2.0) -> list[bytes]:
    """Values a strom consumer with `isolation` reads, until nothing new came for `quiet_s`."""
    got: list[bytes] = []
    with Consumer(bootstrap_servers=c.bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        last = time.monotonic()
        deadline = last + 30
        while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
            records = consumer.poll(0.2)
            if records:
                got += [r.value for r in records]
                last = time.monotonic()
    return sorted(got)


def ck_read(c: Cluster, topic: str, isolation: str, partitions: int = PARTITIONS,
            quiet_s: float = 2.0) -> list[bytes]:
    consumer = CKConsumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{uuid.uuid4()}",
                           "isolation.level": isolation, "enable.auto.commit": False, "log_level": 0})
    consumer.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    last = time.monotonic()
    deadline = last + 30
    try:
        while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
                last = time.monotonic()
    finally:
        consumer.close()
    return sorted(got)


def test_commit_and_abort_over_three_partitions(cluster):
    c = cluster
    topic = new_topic(c)
    p = txn_producer(c, f"tx-{uuid.uuid4()}")
    with pytest.raises(TransactionStateError):
        p.send(topic, b"outside", partition=0)          # no transaction open
    p.begin_transaction()
    with pytest.raises(TransactionStateError):
        p.begin_transaction()
    futs = [p.send(topic, b"commit-%02d" % i, partition=i % PARTITIONS) for i in range(30)]
    p.commit_transaction(30)
    assert all(f.done() and f.exception() is None for f in futs)
    assert {f.result().partition for f in futs} == set(range(PARTITIONS))

    p.begin_transaction()
    aborted = [p.send(topic, b"abort-%02d" % i, partition=i % PARTITIONS) for i in range(12)]
    p.flush(30)                                          # on the brokers, then aborted
    assert all(f.exception() is None for f in aborted)
    p.abort_transaction(30)

    p.begin_transaction()
    p.send(topic, b"last", partition=0)
    p.commit_transaction(30)
    p.close()

    # A record still lingering when the transaction is aborted is dropped, never sent (a
    # linger longer than the test, so that no scheduling delay can let it go out first).
    lingering = Producer(bootstrap_servers=c.bootstrap, transactional_id=f"tx-{uuid.uuid4()}",
                         linger_ms=600_000)
    lingering.init_transactions(60)
    lingering.begin_transaction()
    never = lingering.send(topic, b"never-sent", partition=1)
    lingering.abort_transaction(30)
    assert isinstance(never.exception(5), TransactionAbortedError)
    lingering.close()

    committed = sorted([b"commit-%02d" % i for i in range(30)] + [b"last"])
    everything = sorted(committed + [b"abort-%02d" % i for i in range(12)])
    assert strom_read(c, topic, "read_committed") == committed
    assert strom_read(c, topic, "read_uncommitted") == everything
    assert ck_read(c, topic, "read_committed") == committed


def test_consume_transform_produce_commits_offsets_in_the_transaction(cluster):
    c = cluster
    source, sink = new_topic(c, 1), new_topic(c, 1)
    with Producer(bootstrap_servers=c.bootstrap) as feed:
        for i in range(20):
            feed.send(source, b"%d" % i, partition=0)
        feed.flush(30)
    group = f"ctp-{uuid.uuid4()}"
    producer = txn_producer(c, f"ctp-{group}")

    def step(abort: bool) -> int:
        with Consumer(bootstrap_servers=c.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, isolation_level="read_committed") as consumer:
            consumer.subscribe([source])
            batch = []
            deadline = time.monotonic() + 30
            while len(batch) < 10 and time.monotonic() < deadline:
                batch += consumer.poll(0.5, max_records=10 - len(batch))
            assert len(batch) == 10
            meta = consumer.group_metadata()
            assert meta.group_id == group and meta.generation_id >= 0 and meta.member_id
            producer.begin_transaction()
            for r in batch:
                producer.send(sink, b"x" + r.value, partition=0)
            producer.send_offsets_to_transaction({TopicPartition(source, 0): batch[-1].offset + 1},
                                                 meta)
            if abort:
                producer.flush(30)            # the output reaches the log, then is aborted
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
            # The offsets become visible once the coordinator wrote the markers, just after
            # EndTxn was answered (the broker does not answer OffsetFetch's require_stable
            # with UNSTABLE_OFFSET_COMMIT): wait a little for the expected value.
            expected = None if abort else batch[-1].offset + 1
            tp = TopicPartition(source, 0)
            deadline = time.monotonic() + 10
            while True:
                found = consumer.committed([tp])[tp]
                committed = None if found is None else found.offset
                if committed == expected or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            return batch[0].offset, committed

    assert step(abort=True) == (0, None)      # aborted: neither the output nor the offsets
    assert step(abort=False) == (0, 10)       # so the same input is read again
    assert step(abort=False) == (10, 20)
    producer.close()
    assert strom_read(c, sink, "read_committed", 1) == sorted(b"x%d" % i for i in range(20))
    assert len(strom_read(c, sink, "read_uncommitted", 1)) == 30


def test_a_second_producer_with_the_same_id_fences_the_first(cluster):
    c = cluster
    topic = new_topic(c)
    tid = f"zombie-{uuid.uuid4()}"
    old = txn_producer(c, tid)
    old.begin_transaction()
    old.send(topic, b"zombie-before", partition=0)
    old.flush(30)
    new = txn_producer(c, tid)             # aborts the old instance's open transaction
    new.begin_transaction()
    new.send(topic, b"new", partition=1)
    new.commit_transaction(30)

    late = old.send(topic, b"zombie-after", partition=2)
    with pytest.raises(ProducerFencedError):
        old.commit_transaction(30)
    assert isinstance(late.exception(5), ProducerFencedError)
    with pytest.raises(ProducerFencedError):           # fatal: every later call raises
        old.send(topic, b"zombie-later", partition=0)
    with pytest.raises(ProducerFencedError):
        old.begin_transaction()
    old.close()
    new.close()
    assert strom_read(c, topic, "read_committed") == [b"new"]
    assert ck_read(c, topic, "read_committed") == [b"new"]
    assert strom_read(c, topic, "read_uncommitted") == [b"new", b"zombie-before"]


def test_the_client_uses_transaction_version_2_with_strom(cluster):
    """strom's brokers finalize transaction.version 2, so the client ends each transaction
    with EndTxn v5: the coordinator bumps the epoch at every end (KIP-890 part 2), and the
    client goes on with the epoch it was given (else its next batch would be fenced)."""
    from clients.admin import AdminClient as StromAdmin

    c = cluster
    topic = new_topic(c)
    tid = f"tv2-{uuid.uuid4()}"
    p = txn_producer(c, tid)
    with StromAdmin(bootstrap_servers=c.bootstrap) as admin:
        epochs = [admin.describe_transactions([tid])[tid].producer_epoch]
        for i in range(3):
            p.begin_transaction()
            p.send(topic, b"tv2-%d" % i, partition=i % PARTITIONS)
            if i == 1:
                p.flush(30)                 # sent, so the transaction started at the broker
                p.abort_transaction(30)
            else:
                p.commit_transaction(30)
            epochs.append(admin.describe_transactions([tid])[tid].producer_epoch)
    p.close()
    assert epochs == [epochs[0] + n for n in range(4)], epochs
    assert sorted(strom_read(c, topic, "read_committed")) == [b"tv2-0", b"tv2-2"]
