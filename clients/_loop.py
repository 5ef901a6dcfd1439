"""The thread a synchronous client runs its asyncio core on.

Each sync client (`Producer`, `Consumer`, `AdminClient`) owns one `LoopThread`: a daemon
thread running an event loop, like the I/O thread of Kafka's Java client or librdkafka.
Calls from the user's threads are handed to it with `run` (wait for the result) or
`submit` (a concurrent.futures.Future). Exceptions raised in the loop re-raise in the caller
unchanged, so sync and async clients raise the same classes.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop on a daemon thread of its own. Thread-safe."""

    def __init__(self, name: str = "strom-client"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        # Let cancelled tasks finish their cleanup before the loop is closed.
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> "concurrent.futures.Future[T]":
        """Schedule `coro` on the loop; returns a concurrent.futures.Future."""
        if self._closed:
            coro.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start `coro` as a task on the loop, no future to wait on: for a caller that hears
        of the outcome its own way. A third of submit()'s cost per call, which a consumer's
        poll() pays every time (concurrent.futures' Future, its Condition and chaining)."""
        if self._closed:
            coro.close()
            raise RuntimeError("the client is closed")
        self.loop.call_soon_threadsafe(self.loop.create_task, coro)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (re-raising its exception).
        On `timeout` the coroutine is cancelled and TimeoutError raised."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("a blocking client call was made from the client's own "
                               "I/O thread (inside a callback?)")
        fut = self.submit(coro)
        # Not fut.result(timeout): its TimeoutError could not be told from a TimeoutError
        # (KafkaTimeoutError) raised by the coroutine itself, which must reach the caller.
        done, _ = concurrent.futures.wait([fut], timeout)
        if not done:
            fut.cancel()
            raise TimeoutError(f"timed out after {timeout}s")
        return fut.result()

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a plain function on the loop thread (fire and forget)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self, final: Awaitable[Any] | None = None, timeout: float = 30.0) -> None:
        """Run `final` (e.g. the async client's close) then stop the loop and join."""
        if self._closed:
            return
        try:
            if final is not None:
                self.run(final, timeout)  # type: ignore[arg-type]
        finally:
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_loop_thread:
                self._thread.join(timeout)
