"""Where long-poll fetches wait: woken by an append to any partition they asked for."""
from __future__ import annotations

import asyncio
from typing import Any, Hashable, Iterable


async def wait_or_resolve(fut: asyncio.Future, timeout_s: float, on_timeout: Any) -> Any:
    """Await our own `fut`, resolved with `on_timeout` after `timeout_s` if nothing else
    resolved it first.

    asyncio.wait_for (3.11) wakes its caller through a second future, one more pass of the
    event loop per wake-up; a fetch or an acks=all produce wakes like this at every hop of
    replication, so the hop shows in end-to-end latency."""
    timer = asyncio.get_running_loop().call_later(timeout_s, _resolve, fut, on_timeout)
    try:
        return await fut
    finally:
        timer.cancel()


def _resolve(fut: asyncio.Future, value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


class FetchPurgatory:
    """Waiters keyed by partition. `notify(key)` wakes every fetch waiting on that key.

    Single event-loop thread; `wait` is a coroutine, `notify` is synchronous and cheap when
    nobody waits (the common case on the produce path).
    """

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = {}

    def __len__(self) -> int:
        return sum(len(s) for s in self._waiters.values())

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """True if woken by an append, False on timeout."""
        fut = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        try:
            return await wait_or_resolve(fut, timeout_s, False)
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[k]

    def notify(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)

    def notify_all(self) -> None:
        for key in list(self._waiters):
            self.notify(key)
