"""aiokafka against a real broker process: create a 3-partition topic with
AIOKafkaAdminClient, produce 100,000 keyed records with headers per codec with an idempotent
AIOKafkaProducer (sends gathered in chunks), consume them all back with an assign()-ed
AIOKafkaConsumer (group_id=None) and verify them."""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.roundtrip import (CODECS, Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)

pytestmark = pytest.mark.integration

N = 100_000
CHUNK = 10_000


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="roundtrip-admin")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        described = await admin.describe_topics([topic])
        assert len(described) == 1 and described[0]["error_code"] == 0, described
        assert len(described[0]["partitions"]) == partitions, described
    finally:
        await admin.close()


async def produce_all(bootstrap: str, topic: str, codec: str, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                                compression_type=None if codec == "none" else codec,
                                linger_ms=20, max_batch_size=256 * 1024,
                                max_request_size=4 * 2**20)
    await producer.start()
    try:
        for start in range(0, n, CHUNK):
            futures = []
            for i in range(start, min(n, start + CHUNK)):
                futures.append(await producer.send(
                    topic, key=key_of(i), value=value_of(i, codec), timestamp_ms=timestamp_of(i),
                    headers=headers_of(i, codec)))
            await asyncio.gather(*futures)    # raises the first delivery error
        # Idempotence really was in force: the broker handed out a producer id.
        assert producer._txn_manager is not None and producer._txn_manager.producer_id >= 0
    finally:
        await producer.stop()


async def consume_all(bootstrap: str, topic: str, partitions: int, n: int,
                      timeout: float = 120) -> list[Seen]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest", fetch_max_bytes=8 * 2**20,
                                max_partition_fetch_bytes=4 * 2**20)
    await consumer.start()
    seen: list[Seen] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        assert sum(end.values()) == n, end
        deadline = time.monotonic() + timeout
        remaining = set(tps)
        while remaining:
            assert time.monotonic() < deadline, f"timed out after {len(seen)} records"
            batches = await consumer.getmany(*remaining, timeout_ms=1000, max_records=50_000)
            for tp, records in batches.items():
                for m in records:
                    seen.append(Seen(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                     m.timestamp))
            for tp in list(remaining):
                if await consumer.position(tp) >= end[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()
    return seen


async def roundtrip(bootstrap: str, codec: str) -> list[Seen]:
    topic = f"aiokafka-{codec}"
    await create_topic(bootstrap, topic, 3)
    await produce_all(bootstrap, topic, codec, N)
    return await consume_all(bootstrap, topic, 3, N)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_roundtrip(broker, codec):
    verify(asyncio.run(roundtrip(broker.bootstrap, codec)), N, codec)
