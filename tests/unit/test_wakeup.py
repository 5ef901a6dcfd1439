"""The producer sender's wake-up flag (clients/aio/wakeup.py): set before or during a wait
ends it, a timeout ends it unset, and a wait leaves no task or timer behind. Broadcast (a
producer's wait for buffer memory): notify() wakes every waiter of the moment, a timeout
or a cancel ends one wait, and none leaves a task, timer or waiter behind."""
import asyncio

import pytest

from clients.aio.wakeup import Broadcast, Wakeup


def run(coro):
    return asyncio.run(coro)


def test_a_flag_set_before_the_wait_returns_at_once():
    async def main():
        w = Wakeup()
        w.set()
        assert w.is_set()
        assert await w.wait(10) is True
        w.clear()
        assert not w.is_set()
    run(main())


def test_a_set_during_the_wait_ends_it():
    async def main():
        w = Wakeup()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, w.set)
        t0 = loop.time()
        assert await w.wait(5) is True
        assert loop.time() - t0 < 1
    run(main())


def test_the_timeout_ends_the_wait_unset_and_cancels_nothing_else():
    async def main():
        w = Wakeup()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await w.wait(0.02) is False
        assert 0.015 <= loop.time() - t0 < 1
        # the timer of a wait that was set early is cancelled, not left to fire
        loop.call_soon(w.set)
        assert await w.wait(60) is True
        assert [h for h in loop._scheduled if not h.cancelled()] == []
        assert asyncio.all_tasks() == {asyncio.current_task()}
    run(main())


def test_without_a_timeout_it_waits_until_set():
    async def main():
        w = Wakeup()
        waiter = asyncio.ensure_future(w.wait())
        await asyncio.sleep(0.02)
        assert not waiter.done()
        w.set()
        assert await waiter is True
    run(main())


def test_a_cancelled_wait_leaves_the_flag_usable():
    async def main():
        w = Wakeup()
        waiter = asyncio.ensure_future(w.wait(60))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        w.set()
        assert await w.wait(1) is True
    run(main())


def test_one_waiter_at_a_time():
    async def main():
        w = Wakeup()
        first = asyncio.ensure_future(w.wait(60))
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError):
            await w.wait(1)
        w.set()
        assert await first is True
    run(main())


def _leftovers(loop):
    return [h for h in loop._scheduled if not h.cancelled()], asyncio.all_tasks()


def test_notify_wakes_every_waiter_of_the_moment_and_no_later_one():
    async def main():
        b = Broadcast()
        loop = asyncio.get_running_loop()
        b.notify()                          # nobody waits: nothing is remembered
        waits = [asyncio.ensure_future(b.wait(60)) for _ in range(3)]
        await asyncio.sleep(0)
        assert b.waiting == 3 and not any(w.done() for w in waits)
        b.notify()
        await asyncio.gather(*waits)
        assert b.waiting == 0
        t0 = loop.time()
        await b.wait(0.02)                  # the earlier notify does not end a new wait
        assert loop.time() - t0 >= 0.015
        assert _leftovers(loop) == ([], {asyncio.current_task()})
    run(main())


def test_a_timed_out_or_cancelled_wait_leaves_nothing_behind():
    async def main():
        b = Broadcast()
        loop = asyncio.get_running_loop()
        stays = asyncio.ensure_future(b.wait())
        goes = asyncio.ensure_future(b.wait(60))
        await asyncio.sleep(0)
        goes.cancel()
        with pytest.raises(asyncio.CancelledError):
            await goes
        await b.wait(0.01)
        assert b.waiting == 1 and not stays.done()
        loop.call_soon(b.notify)
        await stays
        assert b.waiting == 0
        assert _leftovers(loop) == ([], {asyncio.current_task()})
    run(main())
