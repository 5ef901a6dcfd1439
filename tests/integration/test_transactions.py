"""Transactions end to end in a real 3-broker cluster (replication factor 3, real ZooKeeper):
the transactional producers of confluent-kafka, kafka-python and aiokafka commit and abort,
and read_committed / read_uncommitted consumers see exactly the committed / all data; a
consume-transform-produce step commits its input offsets in the same transaction; a second
producer with the same transactional id fences the first; a transaction left open is aborted
after its timeout and the last stable offset moves on."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("transactions") / "c", brokers=3,
                 overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}) as c:
        yield c


def new_topic(c: Cluster, partitions: int = PARTITIONS) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(30)
    for p in range(partitions):
        c.wait_for_leader(name, p)
    return name


def txn_producer(c: Cluster, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "log_level": 0, **extra})
    p.init_transactions(60)
    return p


def read_all(c: Cluster, topic: str, isolation: str, partitions: int = PARTITIONS,
             quiet_s: float = 3.0) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of everything a consumer with `isolation` gets, read until
    nothing new came for `quiet_s`."""
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"r-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    last = time.monotonic()
    deadline = last + 60
    try:
        while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset(), m.value()))
                last = time.monotonic()
    finally:
        consumer.close()
    return sorted(got)


def values(records: list[tuple[int, int, bytes]]) -> list[bytes]:
    return sorted(v for _, _, v in records)


def test_confluent_commit_and_abort_as_both_isolation_levels_see_them(cluster):
    c = cluster
    topic = new_topic(c)
    p = txn_producer(c, f"tx-{uuid.uuid4()}")
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, b"commit-%02d" % i, partition=i % PARTITIONS)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, b"abort-%02d" % i, partition=i % PARTITIONS)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"last", partition=0)
    p.commit_transaction(30)

    committed = read_all(c, topic, "read_committed")
    assert values(committed) == sorted([b"commit-%02d" % i for i in range(30)] + [b"last"])
    everything = read_all(c, topic, "read_uncommitted")
    assert values(everything) == sorted([b"commit-%02d" % i for i in range(30)]
                                        + [b"abort-%02d" % i for i in range(12)] + [b"last"])
    # Offsets are dense apart from the markers: partition 0 has the first transaction's
    # marker and the abort's between its records ("last" is there), the others only the first.
    for part in range(PARTITIONS):
        offsets = [o for pp, o, _ in everything if pp == part]
        gaps = [b - a - 1 for a, b in zip(offsets, offsets[1:]) if b - a > 1]
        assert gaps == ([1, 1] if part == 0 else [1])
    # The other libraries' consumers get exactly the same records at the same offsets.
    for isolation, expected in (("read_committed", committed), ("read_uncommitted", everything)):
        assert kafka_python_read(c, topic, isolation) == expected, f"kafka-python {isolation}"
        assert aiokafka_read(c, topic, isolation) == expected, f"aiokafka {isolation}"


def kafka_python_read(c: Cluster, topic: str, isolation: str) -> list[tuple[int, int, bytes]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    consumer = KafkaConsumer(bootstrap_servers=c.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        return sorted((m.partition, m.offset, m.value) for m in consumer)
    finally:
        consumer.close()


def aiokafka_read(c: Cluster, topic: str, isolation: str) -> list[tuple[int, int, bytes]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    async def read() -> list[tuple[int, int, bytes]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=c.bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            got: list[tuple[int, int, bytes]] = []
            while True:
                batch = await consumer.getmany(timeout_ms=2000)
                if not batch:
                    return sorted(got)
                got.extend((m.partition, m.offset, m.value) for ms in batch.values() for m in ms)
        finally:
            await consumer.stop()
    return asyncio.run(read())


def test_kafka_python_and_aiokafka_transactional_producers(cluster):
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer
    c = cluster
    topic = new_topic(c)
    kp = KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id=f"kp-{uuid.uuid4()}")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(6):
        kp.send(topic, b"kp-commit-%d" % i, partition=i % PARTITIONS)
    kp.commit_transaction()
    kp.begin_transaction()
    for i in range(4):
        kp.send(topic, b"kp-abort-%d" % i, partition=i % PARTITIONS)
    kp.flush()
    kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        ap = AIOKafkaProducer(bootstrap_servers=c.bootstrap, transactional_id=f"ap-{uuid.uuid4()}")
        await ap.start()
        try:
            async with ap.transaction():
                for i in range(6):
                    await ap.send(topic, b"ap-commit-%d" % i, partition=i % PARTITIONS)
            await ap.begin_transaction()
            for i in range(4):
                await ap.send(topic, b"ap-abort-%d" % i, partition=i % PARTITIONS)
            await ap.abort_transaction()
        finally:
            await ap.stop()
    asyncio.run(aio())

    committed = values(read_all(c, topic, "read_committed"))
    assert committed == sorted([b"kp-commit-%d" % i for i in range(6)] + [b"ap-commit-%d" % i for i in range(6)])
    everything = values(read_all(c, topic, "read_uncommitted"))
    assert len(everything) == 20 and set(committed) < set(everything)


def test_consume_transform_produce_commits_input_offsets_with_the_output(cluster):
    c = cluster
    source, sink = new_topic(c, 1), new_topic(c, 1)
    feed = Producer({"bootstrap.servers": c.bootstrap, "log_level": 0})
    for i in range(20):
        feed.produce(source, b"%d" % i, partition=0)
    assert feed.flush(30) == 0
    group = f"ctp-{uuid.uuid4()}"

    def step(abort: bool) -> int:
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 0})
        consumer.subscribe([source])
        producer = txn_producer(c, f"ctp-{group}")
        batch = []
        deadline = time.monotonic() + 30
        while len(batch) < 10 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                batch.append(m)
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, b"x" + m.value(), partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, batch[-1].offset() + 1)], consumer.consumer_group_metadata())
        if abort:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
        first = batch[0].offset()
        consumer.close()
        return first

    assert step(abort=True) == 0          # aborted: neither the output nor the offsets count
    assert step(abort=False) == 0         # so the same input is read again
    assert step(abort=False) == 10
    assert values(read_all(c, sink, "read_committed", 1)) == sorted(b"x%d" % i for i in range(20))
    check = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "log_level": 0})
    assert check.committed([TopicPartition(source, 0)], 30)[0].offset == 20
    check.close()


def test_a_second_producer_with_the_same_id_fences_the_first(cluster):
    c = cluster
    topic = new_topic(c)
    tid = f"zombie-{uuid.uuid4()}"
    old = txn_producer(c, tid)
    old.begin_transaction()
    old.produce(topic, b"zombie-before", partition=0)
    old.flush(30)
    new = txn_producer(c, tid)             # aborts the old instance's open transaction
    new.begin_transaction()
    new.produce(topic, b"new", partition=1)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as caught:
        old.produce(topic, b"zombie-after", partition=2)
        old.commit_transaction(30)
    assert caught.value.args[0].fatal() or "fenced" in str(caught.value).lower()
    assert values(read_all(c, topic, "read_committed")) == [b"new"]


def test_an_abandoned_transaction_is_aborted_after_its_timeout(cluster):
    c = cluster
    topic = new_topic(c, 1)
    p = txn_producer(c, f"abandoned-{uuid.uuid4()}", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, b"abandoned", partition=0)
    p.flush(30)
    # Never committed: the LSO stays at 0 until the coordinator aborts it.
    plain = Producer({"bootstrap.servers": c.bootstrap, "log_level": 0})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(30) == 0
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"lso-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = None
    while got is None and time.monotonic() - started < 30:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got = m.value()
    consumer.close()
    waited = time.monotonic() - started
    assert got == b"after"
    assert waited < 15, f"the LSO moved after {waited:.1f} s"


def test_offset_fetch_with_require_stable_waits_for_the_transactional_commit(cluster):
    """KIP-447: while a transactional offset commit waits for its transaction's marker,
    OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for that partition; once
    committed, the offset."""
    from clients.protocol.errors import Code
    from tests.support.wire import WireClient
    c = cluster
    source = new_topic(c, 1)
    group = f"stable-{uuid.uuid4()}"
    producer = txn_producer(c, f"stable-{group}")
    producer.begin_transaction()
    producer.produce(source, b"x", partition=0)
    member = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "log_level": 0})
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], member.consumer_group_metadata())
    member.close()
    with WireClient("127.0.0.1", c.broker(0).port) as w:
        found = w.request("FindCoordinator", 3, {"key": group, "key_type": 0})
    body = {"group_id": group, "topics": [{"name": source, "partition_indexes": [0]}], "require_stable": True}

    def fetch() -> tuple[int, int]:
        with WireClient(found.host, found.port) as w:
            p = w.request("OffsetFetch", 7, body).topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert fetch() == (Code.UNSTABLE_OFFSET_COMMIT, -1)
    producer.commit_transaction(30)
    assert c.wait_until(lambda: fetch() == (0, 7), timeout=10)


def test_the_next_transaction_can_start_while_the_last_one_completes(cluster):
    """AddPartitionsToTxn sent the moment EndTxn is answered finds the last transaction still
    writing its markers; the coordinator waits for it to settle instead of answering
    CONCURRENT_TRANSACTIONS, which would cost the client its retry backoff."""
    from clients.aio.transactions import _add_partitions_code
    from tests.support.wire import WireClient

    topic = new_topic(cluster)
    tid = f"settle-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 30
    coordinator = None
    while coordinator is None:
        with WireClient("127.0.0.1", cluster.broker(0).port) as w:
            r = w.request("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": [tid]})
            if r.coordinators[0].error_code == 0:
                coordinator = r.coordinators[0].node_id
        assert time.monotonic() < deadline
        time.sleep(0.2)
    with WireClient("127.0.0.1", cluster.broker(coordinator).port) as w:
        init = w.request("InitProducerId", 4, {"transactional_id": tid,
                                               "transaction_timeout_ms": 60000,
                                               "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == 0
        add = {"v3_and_below_transactional_id": tid,
               "v3_and_below_producer_id": init.producer_id,
               "v3_and_below_producer_epoch": init.producer_epoch,
               "v3_and_below_topics": [{"name": topic, "partitions": list(range(PARTITIONS))}]}
        end = {"transactional_id": tid, "producer_id": init.producer_id,
               "producer_epoch": init.producer_epoch, "committed": True}
        codes = []
        assert _add_partitions_code(w.request("AddPartitionsToTxn", 3, add)) == 0
        for _ in range(5):
            assert w.request("EndTxn", 3, end).error_code == 0
            codes.append(_add_partitions_code(w.request("AddPartitionsToTxn", 3, add)))
        assert codes == [0] * 5, codes              # 51 would be CONCURRENT_TRANSACTIONS
        assert w.request("EndTxn", 3, end).error_code == 0
