"""A record's timestamp must be a Kafka Long that is not negative (0..2^63-1 ms): Kafka's
ProducerRecord refuses anything else with IllegalArgumentException "Invalid timestamp". A
timestamp out of that range is refused when the record is handed over (ValueError; one
that is not an int, TypeError) and never reaches the sender: one bad record cannot stop
the producer (before, the batch holding it failed to encode on every pass of the sender,
and nothing more was sent). AsyncProducer.send and send_batch raise; the sync Producer,
which hands records to the same append on its I/O thread, fails the record's future.
Against a real broker."""
from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

from clients.admin import AdminClient, NewTopic
from clients.aio.producer import AsyncProducer
from clients.producer import Producer
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "timestamps"
BAD = [-1, -2**63, 2**63, 10**20, 99999999999999999999]
MAX = 2**63 - 1


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = BrokerProcess(tmp_path_factory.mktemp("ts-broker")).start()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
    yield broker.bootstrap
    broker.stop()


def config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "linger.ms": 0, "delivery.timeout.ms": 10_000,
            "request.timeout.ms": 5_000}


def test_async_send_refuses_it_and_goes_on(bootstrap: str) -> None:
    async def main() -> list[int]:
        async with AsyncProducer(config(bootstrap)) as p:
            await p.send_and_wait(TOPIC, b"first")      # metadata known: send's fast path
            for ts in BAD:
                with pytest.raises(ValueError, match=f"Invalid timestamp: {ts}"):
                    await p.send(TOPIC, b"bad", timestamp_ms=ts)
                with pytest.raises(ValueError, match=f"Invalid timestamp: {ts}"):
                    await p.send(TOPIC, b"bad", partition=0, timestamp_ms=ts)
            with pytest.raises(TypeError, match="timestamp_ms must be an int"):
                await p.send(TOPIC, b"bad", timestamp_ms=1.5)      # a Long in Kafka, too
            edges = [await asyncio.wait_for(p.send_and_wait(TOPIC, b"edge", timestamp_ms=ts), 10)
                     for ts in (0, MAX)]
            return [md.timestamp for md in edges]

    assert asyncio.run(main()) == [0, MAX]


def test_a_fresh_producer_refuses_it_on_the_path_that_waits_for_metadata(bootstrap: str) -> None:
    async def main() -> int:
        async with AsyncProducer(config(bootstrap)) as p:
            with pytest.raises(ValueError, match="Invalid timestamp: -5"):
                await p.send(TOPIC, b"bad", timestamp_ms=-5)
            md = await asyncio.wait_for(p.send_and_wait(TOPIC, b"good", timestamp_ms=1234), 10)
            return md.timestamp

    assert asyncio.run(main()) == 1234


def test_send_batch_refuses_it_and_goes_on(bootstrap: str) -> None:
    async def main() -> int:
        async with AsyncProducer(config(bootstrap)) as p:
            for ts in BAD:
                with pytest.raises(ValueError, match=f"Invalid timestamp: {ts}"):
                    await p.send_batch(TOPIC, [(None, b"ok", None, 5, None),
                                               (None, b"bad", None, ts, None)])
            with pytest.raises(TypeError, match="timestamp_ms must be an int"):
                await p.send_batch(TOPIC, [(None, b"bad", None, 1e12, None)])
            done = await p.send_batch(TOPIC, [(None, b"a", None, 7, 0), (None, b"b", None, None, None)])
            count = await asyncio.wait_for(done, 10)
            # Nothing of a refused record stayed reserved in the buffer.
            await asyncio.wait_for(p.flush(), 10)
            assert p._acc.used == 0
            return count

    assert asyncio.run(main()) == 2


def test_the_sync_producer_fails_its_future_and_goes_on(bootstrap: str) -> None:
    with Producer(config(bootstrap)) as p:
        for ts in BAD:
            with pytest.raises(ValueError, match=f"Invalid timestamp: {ts}"):
                p.send(TOPIC, b"bad", timestamp_ms=ts).result(10)
        assert p.send(TOPIC, b"good", timestamp_ms=42).result(10).timestamp == 42
