"""An AsyncConsumer assigned a partition whose position cannot be looked up (a partition
number the topic does not have, a topic that does not exist) still reads its other
partitions, and poll(timeout) keeps its timeout, as Kafka's consumer does: position
lookups are bounded by the poll's timer, the offsets found are used at once and the
missing partitions are looked up again on later polls. Found by the REST proxy's v2
consumer instances, whose reads each poll: every poll(1.0) spent default.api.timeout.ms
(60 s) retrying the missing partition, then raised KafkaTimeoutError and dropped the
offsets it had found, so the existing partition's records never came.

- poll(1.0) with [t-0 holding records, t-2147483647] returns t-0's records, each poll
  within 1.5 s, with and without group.id (OffsetFetch first, as the REST proxy's
  consumers); the same with a partition of a topic that does not exist.
- position() of the existing partition is not held up by the missing one either.
- A real error still surfaces: a partition of a topic the user may not describe makes
  poll() raise TopicAuthorizationFailedError (SASL broker with Kafka's ACL authorizer).
- A poll() (or position()) task cancelled while the missing partition's lookup is in flight
  ends within 0.5 s, also when the cancellation arrives in the same loop iteration as a
  metadata update (Python 3.11's asyncio.wait_for returns normally then, swallowing it).

Real broker processes: one plain broker serves the module, a SASL one with ACLs the
authorization test."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator

import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from clients.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer
from clients.protocol.errors import TopicAuthorizationFailedError
from clients.types import NewTopic, TopicPartition
from tests.support.broker_process import BrokerProcess
from tests.support.security import USERS, sasl_plain_overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

N = 30                          # records in the existing partition
POLL_S = 1.0
POLL_LIMIT_S = 1.5              # a poll(1.0) returns within this
CANCEL_LIMIT_S = 0.5            # a cancelled poll ends within this
NO_SUCH_PARTITION = 2147483647


@pytest.fixture(scope="module")
def pbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("consumer-positions") / "b0").start()
    yield b
    b.stop()


async def topic_with_records(config: dict[str, Any], topic: str, n: int = N) -> None:
    """`topic` with one partition holding records b"0" .. b"<n-1>"."""
    admin = AsyncAdminClient(config=config)
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    async with AsyncProducer(config=config) as producer:
        for i in range(n):
            await producer.send(topic, str(i).encode(), partition=0)
        await producer.flush()


async def timed_poll(consumer: AsyncConsumer, timings: list[float]) -> list:
    """poll(1.0), its duration appended to `timings`; a poll still running after 5 s is
    cancelled and fails the test at once (without the fix it ran for 60 s)."""
    start = time.monotonic()
    task = asyncio.ensure_future(consumer.poll(POLL_S))
    done, _ = await asyncio.wait({task}, timeout=5.0)
    timings.append(time.monotonic() - start)
    if task not in done:
        task.cancel()
        await asyncio.wait({task}, timeout=5.0)
        raise AssertionError(f"poll({POLL_S}) still running after 5 s (poll times: {timings})")
    return task.result()


async def read_existing_partition(config: dict[str, Any], topic: str,
                                  missing: TopicPartition) -> None:
    """Assign [topic-0, missing]; poll until topic-0's N records came, then once more."""
    consumer = AsyncConsumer(config={**config, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False})
    timings: list[float] = []
    try:
        await consumer.assign([TopicPartition(topic, 0), missing])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < N:
            assert time.monotonic() < deadline, f"{len(got)} of {N} records; poll times {timings}"
            got += [r.value for r in await timed_poll(consumer, timings)]
        assert got == [str(i).encode() for i in range(N)]
        assert await timed_poll(consumer, timings) == []     # nothing more: waits out 1 s
        assert timings[-1] >= POLL_S - 0.05, timings
        assert max(timings) < POLL_LIMIT_S, timings
        assert await consumer.position(TopicPartition(topic, 0)) == N
    finally:
        await consumer.close()


@pytest.mark.parametrize("group", [None, "positions-group"])
def test_poll_reads_a_partition_beside_one_the_topic_does_not_have(pbroker, group):
    topic = f"present-{group or 'nogroup'}"

    async def main() -> None:
        config = {"bootstrap.servers": pbroker.bootstrap}
        await topic_with_records(config, topic)
        await read_existing_partition({**config, "group.id": group}, topic,
                                      TopicPartition(topic, NO_SUCH_PARTITION))
    asyncio.run(main())


@pytest.mark.parametrize("group", [None, "positions-group"])
def test_poll_reads_a_partition_beside_one_of_a_topic_that_does_not_exist(pbroker, group):
    topic = f"present-beside-absent-{group or 'nogroup'}"

    async def main() -> None:
        config = {"bootstrap.servers": pbroker.bootstrap}
        await topic_with_records(config, topic)
        await read_existing_partition({**config, "group.id": group}, topic,
                                      TopicPartition("no-such-topic", 0))
    asyncio.run(main())


@pytest.mark.alone
def test_position_of_a_partition_is_not_held_up_by_a_missing_one(pbroker):
    """seek_to_beginning() of both, then position() of the existing one: it looks up that
    one, not every partition waiting for a reset (which took 60 s and raised)."""
    topic = "present-position"

    async def main() -> None:
        config = {"bootstrap.servers": pbroker.bootstrap}
        await topic_with_records(config, topic)
        consumer = AsyncConsumer(config={**config, "enable.auto.commit": False})
        try:
            tp, missing = TopicPartition(topic, 0), TopicPartition(topic, NO_SUCH_PARTITION)
            await consumer.assign([tp, missing])
            await consumer.seek_to_beginning(tp, missing)
            start = time.monotonic()
            task = asyncio.ensure_future(consumer.position(tp))
            done, _ = await asyncio.wait({task}, timeout=5.0)
            took = time.monotonic() - start
            if task not in done:
                task.cancel()
                await asyncio.wait({task}, timeout=5.0)
                raise AssertionError("position() of the existing partition still running after 5 s")
            assert task.result() == 0
            assert took < POLL_LIMIT_S, took
        finally:
            await consumer.close()
    asyncio.run(main())


@pytest.mark.parametrize("call", ["poll", "position"])
def test_cancelled_lookup_of_a_missing_partition_ends_promptly(pbroker, call):
    """The task is cancelled five times 0.3 s into its lookup, and five times in the loop
    iteration in which a metadata update lands (the test waits for that update itself:
    its wakeup comes right after those of the waiters registered before it, such as the
    lookup's); each time it must end within 0.5 s."""
    async def main() -> None:
        consumer = AsyncConsumer(config={"bootstrap.servers": pbroker.bootstrap,
                                         "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
        missing = TopicPartition("cancel-no-such-topic", 0)
        slow: list[str] = []
        try:
            await consumer.assign([missing])
            for attempt in range(10):
                if call == "poll":
                    task = asyncio.ensure_future(consumer.poll(30.0))
                else:
                    task = asyncio.ensure_future(consumer.position(missing))
                await asyncio.sleep(0.3)
                assert not task.done(), task
                if attempt % 2:
                    await consumer._client.metadata.wait_for_update()
                task.cancel()
                start = time.monotonic()
                done, _ = await asyncio.wait({task}, timeout=5.0)
                took = time.monotonic() - start
                if task not in done:
                    task.cancel()
                    await asyncio.wait({task}, timeout=5.0)
                if task not in done or took > CANCEL_LIMIT_S or not task.cancelled():
                    slow.append(f"attempt {attempt}: {took:.2f}s, "
                                f"{'cancelled' if task.cancelled() else task}")
                    break
            assert not slow, f"cancelled {call}() did not end promptly: {slow}"
        finally:
            await consumer.close()
    asyncio.run(main())


# ---------------------------------------------------------------------------- authorization

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("consumer-positions-acl") / "b0",
                      overrides=sasl_plain_overrides(acls=True)).start()
    yield b
    b.stop()


def sasl(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def test_unauthorized_partition_still_fails_poll(secured):
    """alice may read "readable" but not even describe "secret": a poll() of both raises
    TopicAuthorizationFailedError (before the fix: KafkaTimeoutError after 60 s)."""
    async def main() -> None:
        await topic_with_records(sasl(secured, "admin"), "readable")
        await topic_with_records(sasl(secured, "admin"), "secret", 1)
        admin = AdminClient({"bootstrap.servers": secured.bootstrap,
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                             "sasl.username": "admin", "sasl.password": USERS["admin"]})
        grants = [AclBinding(ResourceType.TOPIC, "readable", ResourcePatternType.LITERAL,
                             "User:alice", "*", op, AclPermissionType.ALLOW)
                  for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        for f in admin.create_acls(grants).values():
            f.result(30)
        consumer = AsyncConsumer(config={**sasl(secured, "alice"), "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False})
        timings: list[float] = []
        try:
            await consumer.assign([TopicPartition("readable", 0), TopicPartition("secret", 0)])
            deadline = time.monotonic() + 10
            while True:
                assert time.monotonic() < deadline, f"no authorization error; poll times {timings}"
                try:
                    await timed_poll(consumer, timings)
                except TopicAuthorizationFailedError as e:
                    assert "secret" in str(e), e
                    break
            assert max(timings) < POLL_LIMIT_S, timings
        finally:
            await consumer.close()
    asyncio.run(main())
