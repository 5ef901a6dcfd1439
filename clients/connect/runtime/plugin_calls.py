"""How the worker calls a plugin's method: `async def` methods on the event loop, plain
ones in the instance's own thread (one thread per connector or task, as Kafka runs each),
so a blocking poll() stalls only its task and never the worker's heartbeats or REST."""
from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

__all__ = ["PluginCaller"]


class PluginCaller:
    """Runs one instance's methods one at a time; `close()` when the instance is done."""

    def __init__(self, name: str):
        self.name = name
        self._pool: ThreadPoolExecutor | None = None

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"connect-{self.name}")
        result = await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        if inspect.isawaitable(result):     # a plain method that returned a coroutine
            result = await result
        return result

    def close(self) -> None:
        if self._pool is not None:
            # A method still blocked in the thread is abandoned, not waited for (Kafka's
            # task.shutdown.graceful.timeout.ms); the thread ends when it returns.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
