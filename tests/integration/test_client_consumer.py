"""strom's Consumer against real broker processes.

- Interop: confluent-kafka's and kafka-python's producers write 2,000 records per codec
  (none, gzip, snappy, lz4, zstd) with keys, headers (one null-valued; empty from
  kafka-python, which refuses null header values) and explicit
  timestamps; strom's Consumer reads every one back once, intact, in order per partition.
- assign() with position / seek / seek_to_beginning / seek_to_end / pause / resume,
  offsets_for_times, beginning/end offsets, deserializers, manual commit (+ metadata,
  leader epoch) and committed(), commit_async with its callback.
- isolation.level: both levels accepted and read committed data; the read_committed filter
  drops aborted transactions and control batches (on a hand-built record set: strom's
  broker has no transactions yet).
- Leader change: in a 3-broker cluster (real ZooKeeper) the leader of a replicated topic is
  killed mid-consumption; the consumer goes on from the same position at the new leader,
  reading every record exactly once, in order.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer as CKProducer

from clients.consumer import Consumer
from clients.protocol.errors import KafkaError
from clients.types import OffsetAndMetadata, TopicPartition
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.roundtrip import (CODECS, Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)
from tests.support.topics import create_topic
from tests.support.zk_process import zookeeper_available

pytestmark = pytest.mark.integration

N = 2_000
QUIET = {"log_level": 0}


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory):
    """One broker for the module (starting one per test would dominate the runtime)."""
    b = BrokerProcess(tmp_path_factory.mktemp("client-consumer") / "b0").start()
    yield b
    b.stop()


def headers_with_null(i: int, codec: str, null: bytes | None = None) -> list[tuple[str, bytes | None]]:
    """The round-trip headers plus one with a null value (kafka-python refuses null header
    values, so it sends an empty one: that must stay empty, not become null)."""
    return headers_of(i, codec) + [("absent", null)]


def produce_confluent(bootstrap: str, topic: str, codec: str, n: int) -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 10,
                    "partitioner": "murmur2_random", **QUIET})
    errors: list = []
    for i in range(n):
        p.produce(topic, key=key_of(i), value=value_of(i, codec), headers=headers_with_null(i, codec),
                  timestamp=timestamp_of(i), on_delivery=lambda e, m: errors.append(e) if e else None)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and errors == []


def produce_kafka_python(bootstrap: str, topic: str, codec: str, n: int) -> None:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      linger_ms=10)
    try:
        futures = [p.send(topic, key=key_of(i), value=value_of(i, codec),
                          headers=headers_with_null(i, codec, b""), timestamp_ms=timestamp_of(i))
                   for i in range(n)]
        p.flush(timeout=60)
        for f in futures:
            f.get(timeout=0)
    finally:
        p.close(timeout=10)


def consume(consumer: Consumer, n: int, timeout: float = 60.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} records after {timeout}s"
        out.extend(consumer.poll(0.5))
    return out


# ====================================================================== interop


@pytest.mark.parametrize("producer", ["confluent", "kafka-python"])
@pytest.mark.parametrize("codec", CODECS)
def test_foreign_producers_to_strom_consumer(mbroker, producer, codec):
    topic = f"interop-{producer}-{codec}"
    create_topic(mbroker.bootstrap, topic, 3)
    (produce_confluent if producer == "confluent" else produce_kafka_python)(mbroker.bootstrap, topic, codec, N)
    with Consumer(topic, bootstrap_servers=mbroker.bootstrap, group_id=f"g-{topic}",
                  auto_offset_reset="earliest", max_poll_records=300) as c:
        records = consume(c, N)
        # Nothing more arrives: each record was returned once.
        assert c.poll(0.3) == []
    seen = []
    for r in records:
        assert r.topic == topic
        assert r.headers[-1] == ("absent", None if producer == "confluent" else b""), r.headers
        assert r.serialized_value_size == len(r.value) and r.serialized_key_size == len(r.key)
        seen.append(Seen(r.partition, r.offset, r.key, r.value, list(r.headers[:-1]), r.timestamp))
    verify(seen, N, codec, partitions=3)


# ====================================================================== positions, seeks, commits


def test_assign_seek_pause_offsets_for_times_and_commits(mbroker):
    topic = "positions"
    create_topic(mbroker.bootstrap, topic, 2)
    p = CKProducer({"bootstrap.servers": mbroker.bootstrap, **QUIET})
    for part in (0, 1):
        for i in range(100):
            p.produce(topic, partition=part, key=b"k", value=b"%d-%d" % (part, i), timestamp=timestamp_of(i))
    assert p.flush(30) == 0
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c = Consumer(bootstrap_servers=mbroker.bootstrap, group_id="positions-g",
                 auto_offset_reset="earliest", enable_auto_commit=False,
                 value_deserializer=lambda topic, data: data.decode())
    try:
        c.assign([tp0, tp1])
        assert c.assignment() == {tp0, tp1}
        assert c.position(tp0) == 0                            # no commit: earliest
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 100, tp1: 100}

        c.seek(tp0, 50)
        c.pause(tp1)
        assert c.paused() == {tp1}
        got = consume(c, 50)
        assert [(r.partition, r.offset) for r in got] == [(0, o) for o in range(50, 100)]
        assert got[0].value == "0-50"                           # value.deserializer applied
        assert c.poll(0.3) == []                                 # tp1 paused: nothing
        assert c.position(tp0) == 100 and c.position(tp1) == 0
        c.resume(tp1)
        got = consume(c, 100)
        assert [r.offset for r in got] == list(range(100)) and {r.partition for r in got} == {1}

        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        c.seek_to_end(tp0)
        assert c.position(tp0) == 100

        found = c.offsets_for_times({tp0: timestamp_of(37), tp1: timestamp_of(1000)})
        assert found[tp0].offset == 37 and found[tp0].timestamp == timestamp_of(37)
        assert found[tp1] is None                               # nothing that late

        c.commit({tp0: OffsetAndMetadata(42, "my-meta", 0), tp1: 7})
        committed = c.committed([tp0, tp1])
        assert committed[tp0] == OffsetAndMetadata(42, "my-meta", 0)
        assert committed[tp1].offset == 7 and committed[tp1].metadata == ""

        c.seek(tp1, 60)
        c.commit()                                              # current positions
        assert c.committed([tp0, tp1]) == {tp0: OffsetAndMetadata(100, "", 0),
                                           tp1: OffsetAndMetadata(60, "", -1)}
        calls: list = []
        c.commit_async({tp1: OffsetAndMetadata(61, "async")}, callback=lambda err, offs: calls.append((err, offs)))
        deadline = time.monotonic() + 10
        while not calls:
            assert time.monotonic() < deadline, "commit callback never ran"
            c.poll(0.1)                                         # callbacks run inside poll
        assert calls == [(None, {tp1: OffsetAndMetadata(61, "async")})]
    finally:
        c.close()
    # A new consumer in the group starts at the committed offsets.
    with Consumer(bootstrap_servers=mbroker.bootstrap, group_id="positions-g") as c2:
        c2.assign([tp0, tp1])
        assert c2.position(tp0) == 100 and c2.position(tp1) == 61
    # auto.offset.reset=none without a commit raises instead of guessing.
    with Consumer(bootstrap_servers=mbroker.bootstrap, group_id="positions-none",
                  auto_offset_reset="none") as c3:
        c3.assign([tp0])
        with pytest.raises(KafkaError):
            c3.poll(0.5)


def test_isolation_level_read_committed_is_accepted_and_reads_to_the_stable_offset(mbroker):
    """strom's broker has no transactions yet, so every record is committed: both levels
    read the same records, and read_committed's end offset (the LSO) is the log end."""
    topic = "iso-levels"
    create_topic(mbroker.bootstrap, topic, 1)
    p = CKProducer({"bootstrap.servers": mbroker.bootstrap, **QUIET})
    for i in range(30):
        p.produce(topic, partition=0, value=b"v%d" % i)
    assert p.flush(30) == 0
    tp = TopicPartition(topic, 0)
    for level in ("read_committed", "read_uncommitted"):
        with Consumer(bootstrap_servers=mbroker.bootstrap, isolation_level=level,
                      auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.assign([tp])
            assert c.end_offsets([tp]) == {tp: 30}
            assert [r.value for r in consume(c, 30)] == [b"v%d" % i for i in range(30)]
    with pytest.raises(Exception, match="isolation.level"):
        Consumer(bootstrap_servers=mbroker.bootstrap, isolation_level="read_everything")


def test_read_committed_filter_drops_aborted_transactions_and_control_batches():
    """The fetch-response logic of read_committed on a hand-built record set: producer 7's
    aborted transaction (listed in aborted_transactions) is dropped up to its ABORT marker,
    producer 8's committed one and plain records stay, control batches never show."""
    from clients.protocol.read_committed import aborted_filter
    from clients.protocol.records import (ABORT, COMMIT, Record, build_batch, build_control_batch,
                                          records_from_fetch)

    def data(base: int, pid: int, values: list[bytes], txn: bool = True) -> bytes:
        return build_batch([Record(None, v) for v in values], base_offset=base, producer_id=pid,
                           producer_epoch=0, base_sequence=0, is_transactional=txn)
    buf = b"".join([
        data(0, 7, [b"abort-1", b"abort-2"]),             # 0-1 aborted
        data(2, 8, [b"commit-1"]),                        # 2   committed
        build_control_batch(ABORT, producer_id=7, producer_epoch=0, base_offset=3),
        data(4, -1, [b"plain"], txn=False),               # 4   not transactional
        build_control_batch(COMMIT, producer_id=8, producer_epoch=0, base_offset=5),
        data(6, 7, [b"after-abort"]),                     # 6   a new txn of 7, committed
    ])
    kept = aborted_filter(buf, 0, [{"producer_id": 7, "first_offset": 0}])
    assert [r.value for r in kept] == [b"commit-1", b"plain", b"after-abort"]
    assert [r.offset for r in aborted_filter(buf, 4, [{"producer_id": 7, "first_offset": 0}])] == [4, 6]
    # read_uncommitted: everything but the control batches.
    assert [r.offset for r in records_from_fetch(buf)] == [0, 1, 2, 4, 6]


# ====================================================================== leader change


@pytest.mark.skipif(not zookeeper_available(), reason="ZooKeeper not installed")
def test_consumer_follows_leader_change_without_losing_position(tmp_path):
    topic, n = "moving", 3_000
    with Cluster(tmp_path / "cluster", brokers=3) as cluster:
        create_topic(cluster.bootstrap, topic, 1, rf=3)
        # Small batches (20 records), so small fetches really are small.
        p = CKProducer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                        "batch.num.messages": 20, **QUIET})
        for i in range(n):
            p.produce(topic, partition=0, value=b"%d" % i + b"." * 100)
        assert p.flush(30) == 0
        cluster.wait_until(lambda: len(cluster.isr(topic, 0)) == 3 or None, timeout=30)
        old_leader = cluster.leader(topic, 0)
        tp = TopicPartition(topic, 0)
        # Small fetches, so most records must come from the new leader after the kill.
        c = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                     enable_auto_commit=False, max_partition_fetch_bytes=8192,
                     fetch_max_bytes=16384, metadata_max_age_ms=2000,
                     request_timeout_ms=10000)
        try:
            c.assign([tp])
            got = consume(c, 500)
            cluster.kill9(old_leader)
            # The records fetched so far (returned or prefetched) end well short of the
            # log end: most of the rest must come from the new leader.
            st = c._c._fetcher.states[tp]
            fetched_to = st.buffer[-1].next_offset if st.buffer else st.position
            assert fetched_to < n - 1000, fetched_to
            # No waiting for the election here: the consumer has to find the new leader.
            got += consume(c, n - len(got), timeout=90)
            assert c.poll(0.5) == []
        finally:
            c.close()
        offsets = [r.offset for r in got]
        assert offsets == list(range(n)), "records lost, repeated or out of order"
        assert [int(r.value.split(b".")[0]) for r in got] == list(range(n))
        assert cluster.wait_for_leader(topic, 0, timeout=5, other_than=old_leader) != old_leader


def test_consumer_uses_fetch_sessions_and_survives_losing_them(broker_factory):
    """KIP-227 from strom's consumer: one full fetch, then incremental ones naming only what
    changed (40 partitions, records arriving on 3); a broker restart loses the session, the
    consumer starts a new one and reads on, every record once; close() ends the session on
    the broker (its incremental session count goes back to 0)."""
    import asyncio
    import urllib.request

    from clients.aio.consumer import AsyncConsumer
    from tests.support.broker_process import free_port
    b = broker_factory({"metrics.port": str(free_port())})
    port = b.metrics_port           # where it listens (it moves if another process took it)
    create_topic(b.bootstrap, "sess", 40)

    def sessions_on_broker() -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        line = next(x for x in text.splitlines()
                    if x.startswith("kafka_server_fetchsessioncache_numincrementalfetchsessions"))
        return float(line.split()[-1])

    def produce(start: int, n: int) -> None:
        p = CKProducer({"bootstrap.servers": b.bootstrap, **QUIET})
        for i in range(start, start + n):
            p.produce("sess", value=b"%d" % i, partition=(0, 17, 39)[i % 3])
        assert p.flush(30) == 0

    async def run() -> None:
        c = AsyncConsumer(bootstrap_servers=b.bootstrap, group_id=None, fetch_max_wait_ms=100,
                          enable_auto_commit=False)
        await c.assign([TopicPartition("sess", p) for p in range(40)])
        await c.seek_to_beginning()
        got: list[int] = []

        async def read(upto: int) -> None:
            deadline = time.monotonic() + 60
            while len(got) < upto:
                assert time.monotonic() < deadline, f"only {len(got)} of {upto} records"
                got.extend(int(r.value) for r in await c.poll(0.5))
        for round_ in range(5):
            await asyncio.to_thread(produce, round_ * 30, 30)
            await read((round_ + 1) * 30)
        (node, session), = c._f._sessions.items()
        assert session.session_id != 0
        assert session.incremental_requests > 3 * session.full_requests, vars(session)
        assert sessions_on_broker() == 1

        fulls = session.full_requests
        await asyncio.to_thread(b.stop)               # the session dies with the broker
        await asyncio.to_thread(b.start)
        for round_ in range(5, 8):
            await asyncio.to_thread(produce, round_ * 30, 30)
            await read((round_ + 1) * 30)
        assert session.full_requests > fulls and session.incremental_requests > 0
        assert sorted(got) == list(range(240))       # every record once, none lost
        await c.close()
        assert sessions_on_broker() == 0

    asyncio.run(run())
