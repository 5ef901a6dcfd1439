"""strom's own Producer against real broker processes.

- interop: strom Producer -> confluent-kafka Consumer and kafka-python consumer, for every
  codec, with keys, headers (one with a None value) and explicit timestamps;
- partitioning: for 10,000 random keys strom picks the partition librdkafka's
  murmur2_random picks (the Java client's default), both in the partitioner and in the
  RecordMetadata of records actually produced;
- kill -9 of the broker in the middle of an idempotent stream: every record exactly once,
  in order per partition;
- acks=0 / acks=1, delivery callbacks, flush, LogAppendTime, unknown topic, max.request.size.
"""
from __future__ import annotations

import random
import threading
import time
from concurrent.futures import wait as wait_futures

import pytest
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient, NewTopic

from clients.aio.errors import KafkaTimeoutError
from clients.aio.transactions import TransactionStateError
from clients.config import ConfigError
from clients.partitioner import partition_for_key
from clients.producer import Producer
from clients.protocol.errors import BY_NAME
from tests.integration.test_confluent_roundtrip import consume_all as ck_consume_all
from tests.integration.test_kafka_python_roundtrip import consume_all as kp_consume_all
from tests.support.broker_process import BrokerProcess
from tests.support.roundtrip import (CODECS, Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)

pytestmark = pytest.mark.integration

N = 2000


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the tests that only need topics of their own."""
    b = BrokerProcess(tmp_path_factory.mktemp("producer-broker")).start()
    yield b
    b.stop()


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def strip_none_header(seen: list[Seen]) -> list[Seen]:
    """Check the extra header with a None value survived, then drop it for `verify`."""
    for r in seen:
        assert r.headers[-1] == ("nil", None), r.headers
        r.headers = r.headers[:-1]
    return seen


@pytest.mark.parametrize("codec", CODECS)
def test_interop_with_confluent_and_kafka_python_consumers(shared_broker, codec):
    topic = f"strom-producer-{codec}"
    create_topic(shared_broker.bootstrap, topic, 3)
    with Producer(bootstrap_servers=shared_broker.bootstrap, compression_type=codec,
                  linger_ms=10, batch_size=64 * 1024) as p:
        futs = [p.send(topic, value_of(i, codec), key=key_of(i), timestamp_ms=timestamp_of(i),
                       headers=headers_of(i, codec) + [("nil", None)]) for i in range(N)]
        p.flush(30)
    mds = [f.result(0) for f in futs]
    assert [md.timestamp for md in mds] == [timestamp_of(i) for i in range(N)]

    for name, consume in (("confluent-kafka", ck_consume_all), ("kafka-python", kp_consume_all)):
        seen = consume(shared_broker.bootstrap, topic, 3, N)
        # RecordMetadata told the truth: record i is where the consumer finds it.
        at = {(r.partition, r.offset): int(r.value.split(b"-")[1]) for r in seen}
        assert all(at[(md.partition, md.offset)] == i for i, md in enumerate(mds)), name
        verify(strip_none_header(seen), N, codec)
        print(f"{codec}: {N} records read back intact and in order by {name}")


def test_partitions_agree_with_librdkafka_murmur2_random(shared_broker):
    topic = "strom-partitioner"
    partitions = 16
    create_topic(shared_broker.bootstrap, topic, partitions)
    rng = random.Random(20240605)
    keys = [b""] + [rng.randbytes(rng.randint(1, 40)) for _ in range(9_999)]

    ck = CKProducer({"bootstrap.servers": shared_broker.bootstrap,
                     "partitioner": "murmur2_random", "linger.ms": 5})
    theirs: dict[int, int] = {}
    for i, k in enumerate(keys):
        ck.produce(topic, value=b"%d" % i, key=k,
                   on_delivery=lambda err, msg, i=i: theirs.__setitem__(i, msg.partition()))
    assert ck.flush(30) == 0 and len(theirs) == len(keys)

    with Producer(bootstrap_servers=shared_broker.bootstrap) as p:
        assert p.partitions_for(topic) == list(range(partitions))
        futs = [p.send(topic, b"%d" % i, key=k) for i, k in enumerate(keys)]
        p.flush(30)
    ours_md = [f.result(0).partition for f in futs]
    ours = [partition_for_key(k, partitions) for k in keys]
    agree = sum(1 for i in range(len(keys)) if ours[i] == theirs[i] == ours_md[i])
    print(f"{agree}/{len(keys)} keys agree (strom partitioner, strom RecordMetadata, "
          f"librdkafka murmur2_random)")
    assert agree == len(keys)
    assert len(set(ours)) == partitions


def test_every_record_exactly_once_across_broker_kill9(broker_factory, long_run):
    # acks=all on one broker answers once the batch is written to the log file. kill -9
    # ends the process, not the machine: written pages are in the OS page cache and
    # survive (test_crash_recovery.py checks exactly that), so an acknowledged batch is
    # durable here without flushing per message; the recovered producer state (from the
    # log) then recognises the retries of batches whose answer was lost.
    # Short form: one kill; --long: five, each mid-stream.
    b = broker_factory()
    topic = "strom-idempotent"
    create_topic(b.bootstrap, topic, 3)
    rounds = 5 if long_run else 1
    total = 20_000 * rounds + 10_000
    kills = {10_000 + 20_000 * r: 20_000 + 20_000 * r for r in range(rounds)}  # kill -> restart
    restarts = set(kills.values())
    p = Producer(bootstrap_servers=b.bootstrap, linger_ms=2, batch_size=4096,
                 request_timeout_ms=5000, delivery_timeout_ms=60_000)
    try:
        assert p._core.idempotent
        futs = []
        outages = []
        for i in range(total):
            if i in kills:
                # Some of the records sent so far are acknowledged, others in flight.
                wait_futures(futs[:i - 5_000], timeout=60)
                b.kill9()
                killed = time.monotonic()
            if i in restarts:
                b.start()
                outages.append(time.monotonic() - killed)
            futs.append(p.send(topic, b"%d" % i, key=b"k%d" % (i % 97)))
        p.flush(60)
        errors = [f.exception(0) for f in futs if f.exception(0) is not None]
        assert not errors, f"{len(errors)} failed, e.g. {errors[:3]}"
        retried = p.retried_batches
    finally:
        p.close(10)
    assert retried > 0, "the outage did not make the producer retry anything"

    seen = ck_consume_all(b.bootstrap, topic, 3, total)
    numbers = [int(r.value) for r in seen]
    dupes = len(numbers) - len(set(numbers))
    print(f"{rounds} kill -9 rounds, outages {', '.join(f'{o:.1f}s' for o in outages)}, "
          f"{retried} batch retries; {len(seen)} records read back, {dupes} duplicates")
    assert dupes == 0
    assert set(numbers) == set(range(total))
    for part in range(3):
        in_log = [int(r.value) for r in sorted(seen, key=lambda r: r.offset) if r.partition == part]
        assert in_log == sorted(in_log), f"partition {part}: order not kept"
    # And RecordMetadata agrees with the log.
    at = {(r.partition, r.offset): int(r.value) for r in seen}
    assert all(at[(f.result().partition, f.result().offset)] == i for i, f in enumerate(futs))


def test_acks_0_and_1(shared_broker):
    topic = "strom-acks"
    create_topic(shared_broker.bootstrap, topic, 1)
    with Producer(bootstrap_servers=shared_broker.bootstrap, acks="0") as p0:
        assert not p0._core.idempotent        # the default gives way to acks=0 (Kafka's rule)
        f0 = [p0.send(topic, b"zero-%d" % i) for i in range(100)]
        p0.flush(10)
    assert {f.result(0).offset for f in f0} == {-1}
    with Producer(bootstrap_servers=shared_broker.bootstrap, acks=1) as p1:
        f1 = [p1.send(topic, b"one-%d" % i) for i in range(100)]
        p1.flush(10)
    assert [f.result(0).offset for f in f1] == list(range(100, 200))
    seen = ck_consume_all(shared_broker.bootstrap, topic, 1, 200)
    assert [r.value for r in sorted(seen, key=lambda r: r.offset)] == \
        [b"zero-%d" % i for i in range(100)] + [b"one-%d" % i for i in range(100)]
    with pytest.raises(ConfigError, match="acks"):
        Producer(bootstrap_servers=shared_broker.bootstrap, acks="1", enable_idempotence=True)


@pytest.mark.alone
def test_delivery_callbacks_and_flush(shared_broker):
    topic = "strom-callbacks"
    create_topic(shared_broker.bootstrap, topic, 2)
    calls = []

    def on_delivery(err, md):
        calls.append((err, md, threading.current_thread().name))

    # A long linger: only flush() makes these go out quickly.
    with Producer(bootstrap_servers=shared_broker.bootstrap, linger_ms=60_000) as p:
        futs = [p.send(topic, b"v%d" % i, key=b"k%d" % i, on_delivery=on_delivery)
                for i in range(500)]
        time.sleep(0.2)
        assert not any(f.done() for f in futs), "sent before linger.ms or flush"
        t0 = time.monotonic()
        p.flush(10)
        took = time.monotonic() - t0
        assert all(f.done() for f in futs)     # flush waited for every one
    assert took < 5
    assert len(calls) == 500
    assert all(err is None for err, _, _ in calls)
    assert {name for _, _, name in calls} == {"strom-producer"}  # the I/O thread
    assert sorted(md for _, md, _ in calls) == sorted(f.result() for f in futs)


def test_log_append_time_is_reported(shared_broker):
    topic = "strom-logappend"
    create_topic(shared_broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer(bootstrap_servers=shared_broker.bootstrap) as p:
        md = p.send(topic, b"v", timestamp_ms=1000).result(10)
    assert md.timestamp >= before - 1000 and md.timestamp != 1000


def test_unknown_topic_times_out_clearly(broker_factory):
    # As in Kafka's Java client, send() returns at once and the record's future (and its
    # callback) carry the max.block.ms timeout.
    b = broker_factory({"auto.create.topics.enable": "false"})
    reported = []
    with Producer(bootstrap_servers=b.bootstrap, max_block_ms=500) as p:
        t0 = time.monotonic()
        fut = p.send("no-such-topic", b"v", on_delivery=lambda e, md: reported.append(e))
        assert time.monotonic() - t0 < 0.4
        with pytest.raises(KafkaTimeoutError, match="no-such-topic"):
            fut.result(10)
        assert 0.4 < time.monotonic() - t0 < 5
        p.flush(5)
    assert len(reported) == 1 and isinstance(reported[0], KafkaTimeoutError)


def test_an_unexpected_error_in_answer_handling_fails_the_batch_instead_of_hanging(
        shared_broker, monkeypatch):
    from clients.aio.producer import AsyncProducer
    topic = "strom-unexpected"
    create_topic(shared_broker.bootstrap, topic, 1)
    real = AsyncProducer._handle
    calls = []

    def broken_once(self, b, p):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected")
        return real(self, b, p)

    monkeypatch.setattr(AsyncProducer, "_handle", broken_once)
    p = Producer(bootstrap_servers=shared_broker.bootstrap, linger_ms=0)
    try:
        first = p.send(topic, b"first")
        p.flush(10)                                  # returns: nothing is left in flight
        assert isinstance(first.exception(0), RuntimeError)
        assert p.send(topic, b"second").result(10).offset >= 0   # and the producer goes on
    finally:
        p.close(5)


def test_flush_timeout_and_max_block_hold_for_queued_records(broker_factory):
    # Three records to a topic that never appears, each allowed max.block.ms=1.5s: they
    # all fail about 1.5s after send() (the clock starts at send, not when the I/O thread
    # gets to each record in turn), and flush(0.5) gives up after 0.5s instead of waiting.
    b = broker_factory({"auto.create.topics.enable": "false"})
    with Producer(bootstrap_servers=b.bootstrap, max_block_ms=1500) as p:
        t0 = time.monotonic()
        futs = [p.send("never", b"v%d" % i) for i in range(3)]
        with pytest.raises(KafkaTimeoutError):
            p.flush(0.5)
        assert time.monotonic() - t0 < 1.2
        wait_futures(futs, 10)
        assert all(isinstance(f.exception(), KafkaTimeoutError) for f in futs)
        assert time.monotonic() - t0 < 3.0, "each record waited its own max.block.ms in turn"


def test_a_new_topic_is_auto_created_as_for_kafkas_producers(shared_broker):
    # Producers ask Metadata to auto-create (the broker's auto.create.topics.enable,
    # true by default, decides), as Kafka's Java client and librdkafka do.
    with Producer(bootstrap_servers=shared_broker.bootstrap, max_block_ms=10000) as p:
        md = p.send("strom-auto-created", b"v").result(15)
    assert (md.topic, md.offset) == ("strom-auto-created", 0)


def test_max_request_size_is_enforced_at_send(shared_broker):
    topic = "strom-max-request"
    create_topic(shared_broker.bootstrap, topic, 1)
    with Producer(bootstrap_servers=shared_broker.bootstrap, max_request_size=1000) as p:
        with pytest.raises(BY_NAME["MESSAGE_TOO_LARGE"], match="max.request.size"):
            p.send(topic, b"x" * 2000).result(10)
        assert p.send(topic, b"x" * 500).result(10).offset == 0


def test_transactions_need_idempotence_and_a_transactional_id(shared_broker):
    # Kafka's rules: transactional.id needs the idempotent producer, so a setting that
    # conflicts with it is an error even when enable.idempotence is left at its default.
    with pytest.raises(ConfigError, match="enable.idempotence"):
        Producer(bootstrap_servers="127.0.0.1:1", transactional_id="tx", enable_idempotence=False)
    with pytest.raises(ConfigError, match="acks"):
        Producer(bootstrap_servers="127.0.0.1:1", transactional_id="tx", acks=1)
    with pytest.raises(ConfigError, match="transactional.id"):
        Producer(bootstrap_servers="127.0.0.1:1", transactional_id="")
    with Producer(bootstrap_servers=shared_broker.bootstrap) as p:
        with pytest.raises(TransactionStateError, match="transactional.id"):
            p.begin_transaction()
        with pytest.raises(TransactionStateError, match="transactional.id"):
            p.init_transactions(5)
    with Producer(bootstrap_servers=shared_broker.bootstrap, transactional_id="tx-unit") as t:
        with pytest.raises(TransactionStateError, match="init_transactions"):
            t.send("strom-txn-refused", b"v")
        with pytest.raises(TransactionStateError):
            t.begin_transaction()


def test_a_tight_loop_of_async_sends_lets_full_batches_go_out(shared_broker):
    # A loop of `await send()` that never has to wait used never to yield to the event
    # loop: full batches piled up in the buffer until it ended (or buffer.memory ran out),
    # and kafka-producer-perf-test reported seconds of latency. The sender now gets each
    # full batch while the loop goes on: records are acknowledged before it ends.
    import asyncio

    from clients.aio.producer import AsyncProducer

    async def main() -> tuple[int, int]:
        p = AsyncProducer(bootstrap_servers=shared_broker.bootstrap, linger_ms=60_000,
                          batch_size=16384)
        await p.partitions_for("tight-loop")
        futs = [await p.send("tight-loop", b"x" * 100) for _ in range(30_000)]
        acknowledged_during_loop = sum(1 for f in futs if f.done())
        await p.flush()
        await p.close()
        return acknowledged_during_loop, sum(1 for f in futs if f.done() and not f.exception())

    during, total = asyncio.run(main())
    assert total == 30_000
    assert during > 3_000, f"only {during} of 30,000 records acknowledged while sending"


def test_a_sync_producer_fills_its_batches(shared_broker):
    # The I/O thread appends all the records handed to it at a time; each new batch must
    # start its linger when it is opened, not when the hand-off was taken (a batch stamped
    # with a stale time looked lingered at once and went out with a few records: 5x the
    # requests, and the broker's CPU with them).
    from clients.protocol.records import iter_batch_headers

    topic = "sync-full-batches"
    create_topic(shared_broker.bootstrap, topic, 1)
    records = 50_000
    with Producer(bootstrap_servers=shared_broker.bootstrap, linger_ms=20, batch_size=16384,
                  enable_idempotence=False, acks=1) as p:
        for _ in range(records):
            p.send(topic, b"x" * 100, partition=0)
        p.flush()
    per_batch = 16384 // 121                       # 100 B records, ~121 B encoded
    ideal = records // per_batch + 1
    segment = shared_broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    headers = [h for _, h in iter_batch_headers(segment.read_bytes())]
    assert sum(h.records_count for h in headers) == records
    assert len(headers) <= 2 * ideal, f"{len(headers)} batches for {records} records (ideal {ideal})"
