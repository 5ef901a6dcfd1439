"""A consumer reading partitions that end at different offsets does not stall for
fetch.max.wait.ms when one of them reaches its end, against a real broker process.

One fetch is in flight per broker. A fetch that names only partitions at their end is held
by the broker for fetch.max.wait.ms; the partitions whose buffers were full when it was
sent have their next fetch queued behind it while poll() empties them, so poll() waited
out the rest of the broker's wait with nothing to return (~0.5 s by default: 488-496 ms
stalls in 3 of 10 runs reading 100,000 records of 1 KiB from 16 partitions, 0.2 s runs
without one). Such partitions now go with the full partitions' next fetch instead; with
nothing else to fetch, a consumer at the end of every partition still long-polls.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer as CKProducer

from clients.aio import AsyncConsumer
from clients.consumer import Consumer
from clients.types import TopicPartition
from tests.support.broker_process import BrokerProcess
from tests.support.topics import create_topic

pytestmark = pytest.mark.integration

QUIET = {"log_level": 0}
WAIT_MS = 4000          # fetch.max.wait.ms: a stall behind the broker's wait is obvious
LONG, SHORT = 2000, 5   # records in the long partition (0) and the short one (1)
CONFIG = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
          "fetch.max.wait.ms": WAIT_MS,
          # ~4 of the long partition's small batches a fetch: it needs hundreds of fetches,
          # and its buffer fills (two fetches) whenever poll() is not taking records.
          "max.partition.fetch.bytes": 4096}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("partition-end") / "b0").start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def topic(broker):
    name = "uneven"
    create_topic(broker.bootstrap, name, 2)
    # batch.size 1 KiB: the long partition is many small batches
    p = CKProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "batch.size": 1024,
                    **QUIET})
    for i in range(LONG):
        p.produce(name, value=b"long-%06d" % i + b"." * 90, partition=0)
        if i < SHORT:
            p.produce(name, value=b"short-%d" % i, partition=1)
    assert p.flush(30) == 0
    return name


def expected(records) -> None:
    by_partition: dict[int, list[int]] = {0: [], 1: []}
    for r in records:
        by_partition[r.partition].append(r.offset)
    assert by_partition == {0: list(range(LONG)), 1: list(range(SHORT))}


def test_async_consumer_reads_past_a_partition_end_without_waiting(broker, topic):
    async def main() -> tuple[float, list]:
        c = AsyncConsumer(config={"bootstrap.servers": broker.bootstrap, **CONFIG})
        await c.start()
        try:
            tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            await c.assign(tps)
            await c.seek_to_beginning(*tps)
            records = list(await c.poll(5.0, 1))    # positions known, fetching under way
            # Let the fetcher fill the long partition's buffer and find the short one's end.
            await asyncio.sleep(1.0)
            start = time.monotonic()
            while len(records) < LONG + SHORT and time.monotonic() - start < 3 * WAIT_MS / 1000:
                records += await c.poll(WAIT_MS / 1000, 100)
            return time.monotonic() - start, records
        finally:
            await c.close(autocommit=False)

    took, records = asyncio.run(main())
    expected(records)
    # 2,000 small records take milliseconds; one stall behind the broker's wait is 4 s.
    assert took < WAIT_MS / 1000 / 2, f"reading took {took:.2f} s: stalled behind a long poll"


def test_sync_consumer_reads_past_a_partition_end_without_waiting(broker, topic):
    c = Consumer(config={"bootstrap.servers": broker.bootstrap, **CONFIG})
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        records = list(c.poll(5.0, 1))
        time.sleep(1.0)
        start = time.monotonic()
        while len(records) < LONG + SHORT and time.monotonic() - start < 3 * WAIT_MS / 1000:
            records += c.poll(WAIT_MS / 1000, 100)
        took = time.monotonic() - start
        expected(records)
        assert took < WAIT_MS / 1000 / 2, f"reading took {took:.2f} s: stalled behind a long poll"
    finally:
        c.close(autocommit=False)


def test_a_consumer_at_the_end_of_every_partition_still_long_polls(broker):
    """Holding fetches back applies only beside a full buffer: with every partition at its
    end the fetcher sends one fetch per fetch.max.wait.ms, not a stream of them, and a record
    produced meanwhile arrives without waiting out that fetch."""
    topic = "all-at-end"
    create_topic(broker.bootstrap, topic, 2)

    async def main() -> tuple[int, float, list]:
        c = AsyncConsumer(config={"bootstrap.servers": broker.bootstrap, **CONFIG,
                                  "fetch.max.wait.ms": 1000})
        await c.start()
        try:
            tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            await c.assign(tps)
            await c.seek_to_end(*tps)
            fetches = 0
            fetch = c._f._fetch

            async def counted(node, parts):
                nonlocal fetches
                fetches += 1
                return await fetch(node, parts)
            c._f._fetch = counted
            c._f.wake()
            assert await c.poll(2.5) == []
            p = CKProducer({"bootstrap.servers": broker.bootstrap, **QUIET})
            p.produce(topic, value=b"late", partition=1)
            assert p.flush(10) == 0
            sent = time.monotonic()
            late = await c.poll(5.0)
            return fetches, time.monotonic() - sent, late
        finally:
            await c.close(autocommit=False)

    fetches, waited, late = asyncio.run(main())
    assert [(r.partition, r.value) for r in late] == [(1, b"late")]
    assert fetches <= 4, f"{fetches} fetches in 2.5 s at fetch.max.wait.ms=1000"
    assert waited < 0.5, f"the late record took {waited:.2f} s"
