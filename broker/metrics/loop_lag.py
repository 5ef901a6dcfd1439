"""Event-loop lag and GC pauses: the Python counterparts of the JVM's GC pause metrics.

A broker serves everything from one asyncio loop, so anything that holds the loop (a long
callback, a big GC pass, a blocking syscall) delays every client at once. `LoopLagMonitor`
schedules a callback every `interval_s` and records how late it ran: the time between when
it was due and when the loop got to it. `GcPauseMonitor` times each collection with
`gc.callbacks`.

Loop thread only (the GC callback runs on whichever thread collects: it only appends to
its own histogram).
"""
from __future__ import annotations

import asyncio
import gc
import time
from typing import Any, Callable

from ..stats import LAG_S_BUCKETS, Histogram


class LoopLagMonitor:
    """`observe(due, now)` is the pure part: lag = max(0, now - due). `last` is the latest
    lag, `max_recent` the largest since the previous `take_max()` (a scrape), `histogram`
    the distribution."""

    def __init__(self, interval_s: float = 0.1, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.histogram = Histogram(LAG_S_BUCKETS, clock=clock)
        self.last = 0.0
        self.max_recent = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def observe(self, due: float, now: float) -> float:
        lag = max(0.0, now - due)
        self.last = lag
        if lag > self.max_recent:
            self.max_recent = lag
        self.histogram.observe(lag)
        return lag

    def take_max(self) -> float:
        """The largest lag since the last call (at least the latest one), then reset."""
        m = max(self.max_recent, self.last)
        self.max_recent = 0.0
        return m

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._schedule(self._loop.time() + self.interval_s)

    def _schedule(self, due: float) -> None:
        assert self._loop is not None
        self._handle = self._loop.call_at(due, self._tick, due)

    def _tick(self, due: float) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.observe(due, now)
        self._schedule(now + self.interval_s)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class GcPauseMonitor:
    """Duration of every garbage collection, from gc.callbacks' start/stop events."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.histogram = Histogram(LAG_S_BUCKETS)
        self._clock = clock
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self._clock()
        elif self._started is not None:
            self.histogram.observe(self._clock() - self._started)
            self._started = None

    def start(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def stop(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
