"""The counters the hot path updates: plain ints in dicts and lists, no locks, no prometheus.

Every update here costs O(1) per request (per partition of a request at most): message
counts come from batch headers (`AppendInfo.record_count`), byte counts from the size of the
record set as received, never from walking records. The collectors (collectors.py) turn
these into metric families at scrape time.

Single event-loop thread: updates and reads happen on the broker's loop.
"""
from __future__ import annotations

import math
import time
from bisect import bisect_left
from typing import Callable, Iterable

from clients.protocol.errors import Code

# Kafka's Errors enum names, by wire code (RequestMetrics' `error` tag).
ERROR_NAMES: dict[int, str] = {code: name for name, code in vars(Code).items() if name.isupper()}
ERROR_NAMES.setdefault(0, "NONE")

# Request latency buckets in milliseconds (Kafka reports request times in ms).
REQUEST_MS_BUCKETS: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# Event-loop lag and GC pause buckets in seconds.
LAG_S_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

# Kafka's Yammer histograms report these percentiles (JMX exporter: quantile="0.99").
QUANTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


class Histogram:
    """Fixed buckets (upper bounds, +Inf implied): cumulative counts for a Prometheus
    histogram, plus a sliding window (the current and the previous `window_s`) from which
    quantiles are estimated, so p99 reflects the last minute or so rather than all time, as
    Kafka's exponentially decaying reservoirs do. `observe` is O(log buckets)."""

    __slots__ = ("bounds", "counts", "sum", "count", "window_s", "_clock", "_cur", "_prev",
                 "_rotate_at")

    def __init__(self, bounds: Iterable[float], window_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.bounds = tuple(bounds)
        n = len(self.bounds) + 1
        self.counts = [0] * n             # per bucket, not cumulative; last is +Inf
        self.sum = 0.0
        self.count = 0
        self.window_s = window_s
        self._clock = clock
        self._cur = [0] * n
        self._prev = [0] * n
        self._rotate_at = clock() + window_s

    def observe(self, value: float) -> None:
        i = bisect_left(self.bounds, value)
        self.counts[i] += 1
        self.sum += value
        self.count += 1
        now = self._clock()
        if now >= self._rotate_at:
            self._rotate(now)
        self._cur[i] += 1

    def _rotate(self, now: float) -> None:
        # Two windows passed without observations: the previous one is empty too.
        stale = now >= self._rotate_at + self.window_s
        self._prev = [0] * len(self._cur) if stale else self._cur
        self._cur = [0] * len(self._prev)
        self._rotate_at = now + self.window_s

    def cumulative(self) -> list[tuple[str, int]]:
        """[(le, cumulative count)] with "+Inf" last, as HistogramMetricFamily wants."""
        out = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts):
            acc += c
            out.append((_le(bound), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out

    def recent_counts(self) -> list[int]:
        now = self._clock()
        if now >= self._rotate_at:
            self._rotate(now)
        return [a + b for a, b in zip(self._prev, self._cur)]

    def quantile(self, q: float) -> float:
        """Estimate of the q-quantile of the recent window (NaN when it is empty), linear
        within the bucket; the +Inf bucket reports the largest finite bound."""
        return quantile_from_buckets(self.bounds, self.recent_counts(), q)


def quantile_from_buckets(bounds: tuple[float, ...], counts: list[int], q: float) -> float:
    total = sum(counts)
    if total == 0:
        return math.nan
    rank = q * total
    acc = 0
    for i, c in enumerate(counts):
        if c and acc + c >= rank:
            if i >= len(bounds):
                return float(bounds[-1])
            lo = bounds[i - 1] if i > 0 else 0.0
            return lo + (bounds[i] - lo) * max(0.0, rank - acc) / c
        acc += c
    return float(bounds[-1])


def _le(bound: float) -> str:
    return repr(float(bound))


# BrokerTopicMetrics, in the order of the lists below (JMX name without "PerSec").
TOPIC_METRICS: tuple[tuple[str, str], ...] = (
    ("messagesin", "Messages appended, from batch headers (Kafka: MessagesInPerSec)."),
    ("bytesin", "Record bytes received from clients, the record sets as sent (BytesInPerSec)."),
    ("bytesout", "Record bytes sent to consumers (BytesOutPerSec)."),
    ("failedproducerequests", "Produce partitions that failed (FailedProduceRequestsPerSec)."),
    ("failedfetchrequests", "Fetch partitions that failed (FailedFetchRequestsPerSec)."),
    ("totalproducerequests", "Produce partitions received (TotalProduceRequestsPerSec)."),
    ("totalfetchrequests", "Fetch partitions received (TotalFetchRequestsPerSec)."),
    ("replicationbytesin", "Record bytes appended from leaders (ReplicationBytesInPerSec)."),
    ("replicationbytesout", "Record bytes sent to followers (ReplicationBytesOutPerSec)."),
)
(MESSAGES_IN, BYTES_IN, BYTES_OUT, FAILED_PRODUCE, FAILED_FETCH, TOTAL_PRODUCE, TOTAL_FETCH,
 REPL_BYTES_IN, REPL_BYTES_OUT) = range(len(TOPIC_METRICS))


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: per topic and all-topics counters. All-topics totals are
    kept separately so that deleting a topic (which drops its series) never makes a total
    counter go backwards."""

    __slots__ = ("topics", "total")

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}
        self.total = [0] * len(TOPIC_METRICS)

    def _topic(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = [0] * len(TOPIC_METRICS)
        return t

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        t = self._topic(topic)
        tot = self.total
        t[TOTAL_PRODUCE] += 1
        tot[TOTAL_PRODUCE] += 1
        t[MESSAGES_IN] += messages
        tot[MESSAGES_IN] += messages
        t[BYTES_IN] += nbytes
        tot[BYTES_IN] += nbytes

    def produce_failed(self, topic: str, known: bool = True) -> None:
        """A failed partition of a produce request; a topic the broker does not have
        (`known` False) counts in the totals only, so clients cannot mint series."""
        self.total[TOTAL_PRODUCE] += 1
        self.total[FAILED_PRODUCE] += 1
        if known:
            t = self._topic(topic)
            t[TOTAL_PRODUCE] += 1
            t[FAILED_PRODUCE] += 1

    def fetched(self, topic: str, nbytes: int, from_follower: bool, partitions: int = 1,
                failed: int = 0) -> None:
        """`partitions` of `topic` read by one request (Kafka counts a fetch per partition),
        `failed` of them answered with an error; `nbytes` the records the others returned."""
        t = self._topic(topic)
        tot = self.total
        t[TOTAL_FETCH] += partitions
        tot[TOTAL_FETCH] += partitions
        if failed:
            t[FAILED_FETCH] += failed
            tot[FAILED_FETCH] += failed
        if nbytes:
            i = REPL_BYTES_OUT if from_follower else BYTES_OUT
            t[i] += nbytes
            tot[i] += nbytes

    def replicated_in(self, topic: str, nbytes: int) -> None:
        self._topic(topic)[REPL_BYTES_IN] += nbytes
        self.total[REPL_BYTES_IN] += nbytes

    def remove_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)


class RequestStats:
    """Kafka's RequestMetrics: requests per API and version, errors per API and error code,
    and the total time of each API's requests (receipt of the frame to response ready)."""

    __slots__ = ("requests", "errors", "times", "split")

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.errors: dict[tuple[str, int], int] = {}
        self.times: dict[str, Histogram] = {}
        self.split: dict[str, RequestTimeSplit] = {}      # the other RequestMetrics times

    def record_split(self, api: str, values_ms: tuple[float, ...]) -> None:
        """One request's SPLIT_TIMES, in that order."""
        s = self.split.get(api)
        if s is None:
            s = self.split[api] = RequestTimeSplit()
        s.observe(values_ms, time.monotonic())

    def record(self, api: str, version: int, elapsed_ms: float, error_counts: dict[int, int]) -> None:
        key = (api, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        errors = self.errors
        for code, n in error_counts.items():
            k = (api, code)
            errors[k] = errors.get(k, 0) + n
        h = self.times.get(api)
        if h is None:
            h = self.times[api] = Histogram(REQUEST_MS_BUCKETS)
        h.observe(elapsed_ms)


# Kafka's RequestMetrics times besides TotalTimeMs (which RequestStats.times keeps), in the
# order RequestTimes.sent records them (JMX name without "Ms").
SPLIT_TIMES: tuple[tuple[str, str], ...] = (
    ("RequestQueueTime", "frame received to its handler started"),
    ("LocalTime", "in the handler until it answered or began to wait"),
    ("RemoteTime", "waiting (replication of acks=all, a long-polling fetch) and the answer after"),
    ("ThrottleTime", "the connection muted after the response for a quota"),
    ("ResponseQueueTime", "response ready to its write started (earlier responses in order)"),
    ("ResponseSendTime", "the response's write started to its last byte handed to the socket"),
)


class RequestTimeSplit:
    """One API's SPLIT_TIMES histograms: one clock read per request for all of them."""

    __slots__ = ("histograms", "_now")

    def __init__(self) -> None:
        self._now = time.monotonic()
        self.histograms = tuple(Histogram(REQUEST_MS_BUCKETS, clock=self._clock) for _ in SPLIT_TIMES)

    def _clock(self) -> float:
        return self._now

    def observe(self, values_ms: tuple[float, ...], now: float) -> None:
        """Histogram.observe of each, inlined: one bucket search and no clock call each."""
        self._now = now
        for h, v in zip(self.histograms, values_ms):
            i = bisect_left(h.bounds, v)
            h.counts[i] += 1
            h.sum += v
            h.count += 1
            if now >= h._rotate_at:
                h._rotate(now)
            h._cur[i] += 1

    def at(self, now: float) -> tuple[Histogram, ...]:
        """The histograms with their windows as of `now` (a scrape)."""
        self._now = now
        return self.histograms


class RequestTimes:
    """The moments of one request (perf_counter seconds), from its frame to its response's
    last byte; created by the dispatcher, finished by the listener (`write_started`, `sent`),
    which records them in the split. O(1): a few float stores and one record per request."""

    __slots__ = ("stats", "api", "received", "started", "local_done", "ready", "write_start",
                 "throttle_ms")

    def __init__(self, stats: "RequestStats", api: str, received: float, started: float):
        self.stats = stats
        self.api = api
        self.received = received
        self.started = started
        self.local_done = started
        self.ready = started
        self.write_start = started
        self.throttle_ms = 0

    def sent(self, now: float) -> None:
        self.stats.record_split(self.api, (
            (self.started - self.received) * 1000.0,
            (self.local_done - self.started) * 1000.0,
            (self.ready - self.local_done) * 1000.0,
            float(self.throttle_ms),
            (self.write_start - self.ready) * 1000.0,
            (now - self.write_start) * 1000.0))


class ControllerStats:
    """Kafka's ControllerStats: leader elections (count and time) and unclean ones."""

    __slots__ = ("election_ms", "unclean_elections")

    def __init__(self) -> None:
        self.election_ms = Histogram(REQUEST_MS_BUCKETS)
        self.unclean_elections = 0
