"""A wake-up flag for one waiting task: asyncio.Event's set/clear/is_set, and a wait with
a timeout that costs one future and one timer handle. `Broadcast`: the same wait for any
number of tasks, each woken by the next `notify()`.

A producer's sender waits for work after every request it sends, with a timeout (the next
batch's linger.ms). `asyncio.wait_for(event.wait(), timeout)` wraps the wait in a Task of
its own each time, with a done callback, and cancels that task (one more loop iteration)
when the timeout wins: a measurable share of the sender's Python per request. One waiter
at a time: the task that owns the flag.

A producer whose buffer.memory is full waits for a batch to complete; at 1 KiB records a
send_batch() waited once per batch, and wait_for's task, its done callback and the
wait_for machinery were 8 % of the producer's CPU. Those waits use `Broadcast`.
"""
from __future__ import annotations

import asyncio

__all__ = ["Wakeup", "Broadcast"]


def _release(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_result(None)


class Wakeup:
    """Set from the loop's thread by anyone; waited for by one task."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        if not self._set:
            self._set = True
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout: float | None = None) -> bool:
        """Until set or `timeout` seconds have passed (None: no limit); True when set."""
        if self._set:
            return True
        if self._waiter is not None:
            raise RuntimeError("Wakeup has one waiter at a time")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _release, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._set


class Broadcast:
    """Wakes every task waiting when `notify()` is called (not a flag: a wait always waits
    for the next notify); any number of waiters, each costing one future and, with a
    timeout, one timer handle."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def notify(self) -> None:
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    @property
    def waiting(self) -> int:
        """How many waits are under way."""
        return len(self._waiters)

    async def wait(self, timeout: float | None = None) -> None:
        """Until the next notify() or `timeout` seconds have passed (None: no limit)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _release, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if self._waiters:       # timed out or cancelled: forget it
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass                # notify() took it
