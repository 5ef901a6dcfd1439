"""A consumer subscribed to a topic that does not exist yet starts reading it soon after
it is created (as Kafka's consumer keeps asking for the metadata of a missing subscribed
topic), not after metadata.max.age.ms (5 minutes): a Connect sink created before its
source's first record depends on it."""
from __future__ import annotations

import asyncio
import time

import pytest

from clients.aio import AsyncConsumer, AsyncProducer


@pytest.mark.alone
def test_subscribed_topic_created_later_is_consumed_within_seconds(broker):
    async def main() -> float:
        consumer = AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id="early",
                                 auto_offset_reset="earliest")
        await consumer.subscribe(["late-topic"])
        await consumer.poll(1.0)                 # joined: the topic has no partitions yet
        producer = AsyncProducer(bootstrap_servers=broker.bootstrap)
        await producer.send_and_wait("late-topic", b"hello")
        await producer.close()
        created = time.monotonic()
        try:
            while time.monotonic() - created < 30:
                records = await consumer.poll(0.5)
                if records:
                    assert [r.value for r in records] == [b"hello"]
                    return time.monotonic() - created
            raise AssertionError("the record of the topic created later never arrived")
        finally:
            await consumer.close()
    took = asyncio.run(main())
    print(f"consumed {took:.1f}s after the topic was created")
    assert took < 10
