"""The sync Consumer's round trip to its I/O thread (`_UserThread.run` over
`LoopThread.spawn`): the coroutine's result or exception comes back to the caller, and while
the caller waits it runs what the loop asks of its thread (a rebalance listener, say)."""
from __future__ import annotations

import asyncio
import threading

import pytest

from clients._loop import LoopThread
from clients.consumer import _UserThread


@pytest.fixture
def user():
    lt = LoopThread("test-round-trip")
    yield _UserThread(lt)
    lt.close()


def test_the_result_comes_back(user):
    async def forty_two() -> int:
        await asyncio.sleep(0)
        return 42
    assert [user.run(forty_two()) for _ in range(100)] == [42] * 100


def test_an_exception_comes_back_as_raised(user):
    class Refused(Exception):
        pass

    async def refuse() -> None:
        raise Refused("no")
    with pytest.raises(Refused, match="no"):
        user.run(refuse())
    async def fine() -> str:
        return "after"
    assert user.run(fine()) == "after"          # the thread serves on after a failure


def test_calls_from_the_loop_run_in_the_callers_thread_meanwhile(user):
    caller = threading.current_thread()
    seen: list[bool] = []

    def listener(x: int) -> int:
        seen.append(threading.current_thread() is caller)
        return x + 1

    async def rebalance() -> int:
        return await user.call(listener, 1) + await user.call(listener, 10)
    assert user.run(rebalance()) == 13
    assert seen == [True, True]


def test_a_closed_loop_refuses_at_once():
    lt = LoopThread("test-closed")
    user = _UserThread(lt)
    lt.close()

    async def never() -> None:
        raise AssertionError("ran")
    with pytest.raises(RuntimeError, match="closed"):
        user.run(never())
