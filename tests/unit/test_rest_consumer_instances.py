"""The REST proxy's registry of v2 consumer instances (clients.rest.consumer_instances), on a
clock the test moves: names are unique per group, each request restarts the idle clock,
an instance idle past consumer.instance.timeout.ms is 404/40403 and closed, one serving a
request is never expired, requests to one instance run one at a time, delete waits for
the request in flight, and close() closes every instance.

The consumers are real AsyncConsumers that never connect (closing one that never started
only marks it closed), so no broker is needed."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from clients.aio.consumer import AsyncConsumer
from clients.rest.consumer_instances import ConsumerInstance, ConsumerInstances, InstanceSettings
from clients.rest.errors import RestError
from clients.rest.kafka import ANONYMOUS, Principal

TIMEOUT_MS = 3000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(test: Callable[[ConsumerInstances, Clock], Awaitable[Any]]) -> Any:
    clock = Clock()
    instances = ConsumerInstances(TIMEOUT_MS, clock=clock)

    async def main() -> Any:
        try:
            return await test(instances, clock)
        finally:
            await instances.close()
    return asyncio.run(main())


def make(instances: ConsumerInstances, group: str, name: str,
         owner: Principal = ANONYMOUS) -> ConsumerInstance:
    consumer = AsyncConsumer(config={"bootstrap.servers": "127.0.0.1:1", "group.id": group})
    instance = ConsumerInstance(group, name, consumer, InstanceSettings("binary", 1000),
                                instances.clock(), owner)
    instances.add(instance)
    return instance


def assert_not_found(e: pytest.ExceptionInfo[RestError]) -> None:
    assert (e.value.status, e.value.error_code, e.value.message) == (
        404, 40403, "Consumer instance not found.")


async def use(instances: ConsumerInstances, group: str, name: str,
              principal: Principal = ANONYMOUS) -> ConsumerInstance:
    async with instances.use(group, name, principal) as instance:
        return instance


def test_names_are_unique_per_group() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        first = make(instances, "g", "a")
        with pytest.raises(RestError) as e:
            make(instances, "g", "a")
        assert (e.value.status, e.value.error_code) == (409, 40902)
        assert e.value.message == ("Consumer with specified consumer ID already exists in the "
                                   "specified consumer group.")
        other = make(instances, "h", "a")           # the same name in another group is another
        assert await use(instances, "g", "a") is first
        assert await use(instances, "h", "a") is other
        with pytest.raises(RestError) as nf:
            await use(instances, "g", "b")
        assert_not_found(nf)
    run(test)


def test_idle_instance_is_gone_and_closed_and_each_request_restarts_the_clock() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        kept, idle = make(instances, "g", "kept"), make(instances, "g", "idle")
        for _ in range(5):                          # 5 x 1 s: kept is used every second
            clock.now += 1.0
            assert await use(instances, "g", "kept") is kept
        with pytest.raises(RestError) as e:         # idle for 5 s > 3 s
            await use(instances, "g", "idle")
        assert_not_found(e)
        await instances.wait_closed()
        assert idle.closed and not kept.closed
        assert len(instances) == 1
        clock.now += 2.999
        assert instances.expire() == []
        clock.now += 0.001
        assert instances.expire() == [kept]         # the background sweep's step
        await instances.wait_closed()
        assert kept.closed and len(instances) == 0
    run(test)


def test_the_name_of_an_expired_instance_can_be_taken_before_the_sweep() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        old = make(instances, "g", "a")
        clock.now += 3.0
        new = make(instances, "g", "a")
        await instances.wait_closed()
        assert old.closed and not new.closed
        assert await use(instances, "g", "a") is new
    run(test)


def test_an_instance_serving_a_request_is_not_expired() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        busy = make(instances, "g", "busy")
        entered, release = asyncio.Event(), asyncio.Event()

        async def long_read() -> None:
            async with instances.use("g", "busy", ANONYMOUS):
                entered.set()
                await release.wait()
        task = asyncio.ensure_future(long_read())
        await entered.wait()
        clock.now += 60.0                           # a read far longer than the idle timeout
        assert instances.expire() == []
        release.set()
        await task
        clock.now += 2.0                            # the clock restarted when the read ended
        assert await use(instances, "g", "busy") is busy
        assert not busy.closed
    run(test)


def test_requests_to_one_instance_run_one_at_a_time_and_delete_waits() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> list[str]:
        make(instances, "g", "a")
        order: list[str] = []
        entered, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with instances.use("g", "a", ANONYMOUS):
                order.append("first in")
                entered.set()
                await release.wait()
                order.append("first out")

        async def second() -> None:
            try:
                async with instances.use("g", "a", ANONYMOUS):
                    order.append("second in")
            except RestError as e:
                order.append(f"second {e.error_code}")

        async def delete() -> None:
            await instances.delete("g", "a", ANONYMOUS)
            order.append("deleted")
        t1 = asyncio.ensure_future(first())
        await entered.wait()
        t2 = asyncio.ensure_future(second())        # waits for the lock
        t3 = asyncio.ensure_future(delete())        # waits for the lock too
        await asyncio.sleep(0.01)
        assert order == ["first in"]
        release.set()
        await asyncio.gather(t1, t2, t3)
        return order
    # The second request was queued before the delete: it runs, then the delete closes.
    assert run(test) == ["first in", "first out", "second in", "deleted"]


def test_a_request_queued_behind_a_delete_finds_no_instance() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        a = make(instances, "g", "a")
        entered, release = asyncio.Event(), asyncio.Event()

        async def first() -> None:
            async with instances.use("g", "a", ANONYMOUS):
                entered.set()
                await release.wait()
        t1 = asyncio.ensure_future(first())
        await entered.wait()
        deleting = asyncio.ensure_future(instances.delete("g", "a", ANONYMOUS))
        await asyncio.sleep(0)
        with pytest.raises(RestError) as e:         # deleted: not found, though still closing
            await use(instances, "g", "a")
        assert_not_found(e)
        release.set()
        await asyncio.gather(t1, deleting)
        assert a.closed
        with pytest.raises(RestError) as again:
            await instances.delete("g", "a", ANONYMOUS)
        assert_not_found(again)
    run(test)


def test_close_closes_every_instance_and_refuses_new_ones() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        made = [make(instances, "g", str(i)) for i in range(3)]
        await instances.close()
        assert all(i.closed for i in made) and len(instances) == 0
        with pytest.raises(RestError) as e:
            make(instances, "g", "late")
        assert e.value.status == 503
    run(test)


def test_the_background_sweep_closes_idle_instances() -> None:
    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        idle = make(instances, "g", "idle")
        clock.now += 3.0
        for _ in range(100):                        # the sweep runs every 0.75 s here
            if idle.closed:
                break
            await asyncio.sleep(0.05)
        assert idle.closed and len(instances) == 0
    run(test)


def test_an_instance_answers_only_the_principal_that_created_it() -> None:
    alice = Principal("alice", "alice-secret")

    async def test(instances: ConsumerInstances, clock: Clock) -> None:
        mine = make(instances, "g", "a", owner=alice)
        clock.now += 2.0
        for stranger in (Principal("bob", "bob-secret"), Principal("alice", "guessed"),
                         ANONYMOUS):
            with pytest.raises(RestError) as e:
                await use(instances, "g", "a", stranger)
            assert_not_found(e)
            with pytest.raises(RestError) as d:
                await instances.delete("g", "a", stranger)
            assert_not_found(d)
        assert not mine.closed and len(instances) == 1
        clock.now += 1.0                # strangers' requests did not restart its idle clock
        assert instances.expire() == [mine]
        other = make(instances, "g", "b", owner=alice)
        assert await use(instances, "g", "b", Principal("alice", "alice-secret")) is other
        await instances.delete("g", "b", alice)
        assert other.closed and len(instances) == 0
    run(test)
