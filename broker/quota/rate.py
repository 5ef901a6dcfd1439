"""A rate over sampled windows, as Kafka's metrics `Rate` over a `WindowedSum`: sans-io (the
caller passes the time), O(1) per record, no clock of its own.

Kafka's quota sensors keep `quota.window.num` (11) samples of `quota.window.size.seconds`
(1 s). A sample starts with the first record after the previous one completed; samples older
than num x size are forgotten. The rate is the sum of the samples kept over the time since the
oldest one started, and that time is never taken as shorter than num - 1 windows: a client
that has just appeared (or was idle for longer than the samples reach) is measured as if the
windows before had been empty, so a first burst is not mistaken for a high rate (the first-window rule of newer Kafka's
`Rate.windowSize`).

Single event-loop thread.
"""
from __future__ import annotations

__all__ = ["SampledRate"]


class SampledRate:
    """Units recorded per second. Times are in milliseconds."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_current")

    def __init__(self, samples: int = 11, window_ms: int = 1000, now_ms: float = 0.0):
        if samples < 2 or window_ms <= 0:
            raise ValueError("a rate needs at least 2 samples of a positive window")
        self.samples = samples
        self.window_ms = window_ms
        self._starts = [now_ms] * samples
        self._values = [0.0] * samples
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:
            i = self._current = (i + 1) % self.samples
            self._starts[i] = now_ms
            self._values[i] = 0.0
        self._values[i] += value

    def unrecord(self, value: float, now_ms: float) -> None:
        """Take back what `record` just added (Kafka unrecords a throttled fetch's bytes)."""
        self.record(-value, now_ms)

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        starts = self._starts
        if now_ms - min(starts) < expire:       # nothing old enough (the common case)
            return
        values = self._values
        for i in range(self.samples):
            if now_ms - starts[i] >= expire:
                starts[i] = now_ms
                values[i] = 0.0

    def window_size_ms(self, now_ms: float) -> float:
        """The time the rate is measured over: since the oldest sample kept started, padded
        to at least samples - 1 whole windows (never below 1 ms)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def total_and_window(self, now_ms: float) -> tuple[float, float]:
        """(`total`, `window_size_ms`) with one purge."""
        window = self.window_size_ms(now_ms)
        return sum(self._values), window

    def total(self, now_ms: float) -> float:
        """The sum of the samples kept."""
        self._purge(now_ms)
        return sum(self._values)

    def measure(self, now_ms: float) -> float:
        """Units per second over the windows kept."""
        window = self.window_size_ms(now_ms)
        return sum(self._values) * 1000.0 / window
