"""AsyncProducer.send_batch: many records of one topic with one future for all (Kafka
Connect's source tasks use it): delivered in order with keys, headers, timestamps and
partitions intact; the future resolves to the count only when all are acknowledged; an
error of the call is raised at once; inside a transaction the records commit or abort with
it."""
from __future__ import annotations

import asyncio

import pytest

from clients.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer
from clients.protocol.errors import KafkaError
from clients.types import NewTopic, TopicPartition


async def _read(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted"):
    consumer = AsyncConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    await consumer.assign(tps)
    ends = await consumer.end_offsets(tps)
    got = []
    while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
        got.extend(await consumer.poll(1.0))
    await consumer.close()
    return got


def test_send_batch_delivers_in_order_with_one_future(broker):
    async def main() -> None:
        admin = AsyncAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.create_topics([NewTopic("batched", 2, 1)])
        await admin.close()
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        records = [(f"k{i}".encode(), f"v{i}", [("h", b"x")], 1_700_000_000_000 + i, i % 2)
                   for i in range(5000)]
        fut = await producer.send_batch("batched", records)
        assert await asyncio.wait_for(fut, 30) == 5000
        keyless = await producer.send_batch("batched", [(None, b"free", None, None, None)] * 10)
        assert await keyless == 10
        await producer.close()
        got = await _read(broker.bootstrap, "batched", 2)
        by_partition = {p: [r for r in got if r.partition == p and r.key is not None] for p in (0, 1)}
        for p in (0, 1):
            values = [r.value for r in by_partition[p]]
            assert values == [f"v{i}".encode() for i in range(p, 5000, 2)]
            first = by_partition[p][0]
            assert first.key == f"k{p}".encode() and list(first.headers) == [("h", b"x")]
            assert first.timestamp == 1_700_000_000_000 + p
        assert sum(1 for r in got if r.value == b"free") == 10
    asyncio.run(main())


def test_runs_for_one_partition_and_keyless_runs_keep_their_places_and_order(broker):
    # send_batch adds a record straight to the batch of the record before it when both are
    # for the same explicit partition, or both keyless (the sticky partition): runs of each,
    # interleaved, small batches so that runs cross batch boundaries.
    async def main() -> None:
        admin = AsyncAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.create_topics([NewTopic("runs", 3, 1)])
        await admin.close()
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=5,
                                 batch_size=2000)
        records = []
        for i in range(3000):
            block = (i // 150) % 4          # 0, 1, 2: that partition; 3: keyless
            records.append((None, b"%d" % i, None, None, None if block == 3 else block))
        assert await asyncio.wait_for(await producer.send_batch("runs", records), 30) == 3000
        await producer.close()
        got = await _read(broker.bootstrap, "runs", 3)
        assert sorted(int(r.value) for r in got) == list(range(3000))
        for p in range(3):
            mine = [int(r.value) for r in got if r.partition == p]
            explicit = [i for i in mine if (i // 150) % 4 == p]
            assert explicit == [i for i in range(3000) if (i // 150) % 4 == p]
            assert mine == sorted(mine)     # keyless ones too, in send order
    asyncio.run(main())


def test_send_batch_raises_at_once_for_a_record_too_large(broker):
    async def main() -> None:
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, max_request_size=10_000)
        with pytest.raises(KafkaError, match="max.request.size"):
            await producer.send_batch("big", [(None, b"x" * 20_000, None, None, None)])
        await producer.close()
    asyncio.run(main())


def test_send_batch_in_a_transaction_commits_and_aborts_with_it(broker):
    async def main() -> None:
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap, transactional_id="sb-txn")
        await producer.init_transactions()
        await producer.begin_transaction()
        await producer.send_batch("txn-batched", [(None, b"aborted", None, None, 0)] * 3)
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.send_batch("txn-batched", [(None, b"committed", None, None, 0)] * 4)
        await producer.commit_transaction()
        await producer.close()
        got = await _read(broker.bootstrap, "txn-batched", 1, "read_committed")
        assert [r.value for r in got] == [b"committed"] * 4
    asyncio.run(main())
