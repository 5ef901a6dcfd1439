"""Where long-poll fetches wait: woken by an append to any partition they asked for."""
from __future__ import annotations

import asyncio
from typing import Hashable, Iterable


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
            await asyncio.wait_for(fut, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
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
                    fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._waiters):
            self.notify(key)
