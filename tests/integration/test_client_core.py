"""The client core against a real broker: bootstrap, metadata refresh and interest,
coordinator lookup, unreachable brokers, and the loop thread the sync clients run on."""
from __future__ import annotations

import asyncio
import time

import pytest

from clients._loop import LoopThread
from clients.aio.client import KafkaClient
from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError
from clients.config import resolve
from clients.protocol.errors import UnknownTopicOrPartitionError
from tests.support.broker_process import free_port

pytestmark = pytest.mark.integration


def run(coro):
    return asyncio.run(coro)


def client_for(bootstrap: str, **kw) -> KafkaClient:
    return KafkaClient(resolve("admin", bootstrap_servers=bootstrap, **kw))


def test_bootstrap_learns_brokers_and_tracks_topics(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": "true", "num.partitions": "3"})

    async def main():
        c = KafkaClient(resolve("consumer", bootstrap_servers=broker.bootstrap,
                                allow_auto_create_topics=True))
        await c.start()
        try:
            assert list(c.cluster.brokers) == [0]
            assert c.cluster.brokers[0].port == int(broker.bootstrap.rsplit(":", 1)[1])
            # Tracking a topic asks for it (auto-creating it here) until it has leaders.
            info = await c.metadata.wait_for_topic("tracked", timeout=10)
            assert sorted(info.partitions) == [0, 1, 2]
            assert c.cluster.leader_for("tracked", 1) == 0
            # A one-off lookup of another topic does not make the client forget its own.
            await c.metadata.refresh(["other"])
            assert c.cluster.partitions_for("tracked") == [0, 1, 2]
            assert "other" in c.cluster.topics
            # The background refresher follows a requested update.
            fresh = await c.metadata.wait_for_update(timeout=5)
            assert fresh.partitions_for("tracked") == [0, 1, 2]
        finally:
            await c.close()
    run(main())


def test_unknown_topic_is_reported_after_the_wait(broker):
    async def main():
        c = client_for(broker.bootstrap)
        await c.start()
        try:
            started = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="nope not available"):
                await c.metadata.wait_for_topic("nope", timeout=1.0)
            assert time.monotonic() - started < 5
            assert c.cluster.topic_error("nope") == UnknownTopicOrPartitionError.code
        finally:
            await c.close()
    run(main())


def test_coordinator_lookup_is_cached_until_forgotten(broker):
    async def main():
        c = client_for(broker.bootstrap)
        await c.start()
        try:
            assert await c.coordinator("g1") == 0
            assert c._coordinators[(0, "g1")] == 0
            c.forget_coordinator("g1")
            assert (0, "g1") not in c._coordinators
            assert await c.coordinator("g1") == 0
            resp = await c.request_any("Metadata", {"topics": []})
            assert [b.node_id for b in resp.brokers] == [0]
        finally:
            await c.close()
    run(main())


def test_unreachable_bootstrap_fails_within_the_timeout_naming_it():
    port = free_port()  # nothing listens here

    async def main():
        c = client_for(f"127.0.0.1:{port}", request_timeout_ms=1000)
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}"):
            await c.start()
        elapsed = time.monotonic() - started
        await c.close()
        return elapsed
    assert run(main()) < 3.0


def test_loop_thread_runs_coroutines_and_reraises_their_errors():
    lt = LoopThread()
    try:
        async def add(a, b):
            await asyncio.sleep(0)
            return a + b

        async def fail():
            raise UnknownTopicOrPartitionError("topic x")

        assert lt.run(add(2, 3)) == 5
        with pytest.raises(UnknownTopicOrPartitionError, match="topic x"):
            lt.run(fail())
        with pytest.raises(TimeoutError):
            lt.run(asyncio.sleep(5), timeout=0.05)
        assert lt.submit(add(1, 1)).result(1) == 2
    finally:
        lt.close()
    with pytest.raises(RuntimeError, match="closed"):
        lt.submit(add(1, 1))
