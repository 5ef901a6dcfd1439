"""Where long-poll fetches and acks=all produces wait: woken at once, timed out cleanly."""
from __future__ import annotations

import asyncio

import pytest

from broker.replication.purgatory import FetchPurgatory, wait_or_resolve


def test_notify_wakes_the_waiter_within_one_loop_pass() -> None:
    """Each extra pass of a busy event loop is latency on every hop of replication."""
    async def main() -> None:
        p = FetchPurgatory()
        woken: list[bool] = []

        async def waiter() -> None:
            woken.append(await p.wait([("t", 0), ("t", 1)], 30))
        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)            # the waiter parks
        assert len(p) == 2
        p.notify(("t", 1))
        await asyncio.sleep(0)            # one pass: the waiter has run
        assert woken == [True]
        assert len(p) == 0                # every key it waited on is released
        await task
    asyncio.run(main())


def test_timeout_answers_false_and_releases_the_keys() -> None:
    async def main() -> None:
        p = FetchPurgatory()
        assert await p.wait([("t", 0)], 0.01) is False
        assert len(p) == 0
        p.notify(("t", 0))                # nobody waits: nothing happens
    asyncio.run(main())


def test_wait_or_resolve_gives_the_timeout_value_or_the_result() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        assert await wait_or_resolve(fut, 0.01, "late") == "late"
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 7)
        assert await wait_or_resolve(fut, 30, "late") == 7
        assert not [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
    asyncio.run(main())


def test_cancelling_a_waiter_cancels_its_timer_and_frees_its_keys() -> None:
    async def main() -> None:
        p = FetchPurgatory()
        task = asyncio.create_task(p.wait([("t", 0)], 30))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(p) == 0
        loop = asyncio.get_running_loop()
        assert not [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
    asyncio.run(main())
