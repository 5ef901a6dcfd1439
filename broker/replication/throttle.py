"""Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): a cap on the bytes per
second that catching-up replicas copy, so a reassignment does not starve clients.

Each broker has two: the leader side (`leader.replication.throttled.rate`, for the replicas a
topic lists in `leader.replication.throttled.replicas` as partition:this-broker) caps what it
sends to followers; the follower side (`follower.replication.throttled.rate`,
`follower.replication.throttled.replicas`) caps what it fetches. As Kafka, only a replica
outside the ISR is throttled (an in-sync replica must keep up, or acks=all would stall), and
a throttled partition is left out of a fetch while the side's rate is over its limit; the
bytes of throttled partitions are what the rate counts. Rates are measured over
`replication.quota.window.num` samples of `replication.quota.window.size.seconds`.

The rate and the replica lists are read at each use (they are dynamic configs); with no rate
set (Long.MAX, the default) nothing is parsed or counted.
"""
from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Callable

from ..config.throttles import FOLLOWER_REPLICAS_KEY, LEADER_REPLICAS_KEY, UNLIMITED, ThrottledReplicas
from ..quota.rate import SampledRate


@lru_cache(maxsize=1024)
def _parsed(raw: str | None) -> ThrottledReplicas:
    return ThrottledReplicas.parse(raw)


class ReplicationThrottle:
    """One side's throttle on one broker. `rate()` is the limit in bytes/s now;
    `replicas(topic)` the topic's `*.replication.throttled.replicas` value as stored."""

    def __init__(self, broker_id: int, rate: Callable[[], int], replicas: Callable[[str], str | None],
                 samples: int = 11, window_s: int = 1, clock_ms: Callable[[], float] | None = None):
        self.broker_id = broker_id
        self.rate = rate
        self.replicas = replicas
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)
        self._measured = SampledRate(max(2, samples), window_s * 1000, self._clock_ms())
        self._in_flight = 0          # bytes reserved by fetches not yet answered

    def applies(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Whether this replica's traffic counts against (and may be held by) the throttle."""
        if in_sync or self.rate() >= UNLIMITED:
            return False
        return _parsed(self.replicas(topic)).covers(partition, self.broker_id)

    def exceeded(self) -> bool:
        limit = self.rate()
        return limit < UNLIMITED and self._measured.measure(self._clock_ms()) > limit

    def record(self, size: int) -> None:
        self._measured.record(size, self._clock_ms())

    def reserve(self, wanted: int) -> int:
        """Bytes that may be fetched now, up to `wanted`, held back from other fetches until
        `settle` (several fetches in flight would each see the same headroom otherwise and
        overshoot together)."""
        limit = self.rate()
        if limit >= UNLIMITED:
            return wanted
        total, window_ms = self._measured.total_and_window(self._clock_ms())
        granted = int(max(0.0, min(wanted, limit * window_ms / 1000.0 - total - self._in_flight)))
        self._in_flight += granted
        return granted

    def settle(self, granted: int, used: int) -> None:
        """A reserved fetch ended: `used` of its `granted` bytes were copied."""
        self._in_flight -= granted
        if used:
            self.record(used)


def replication_throttles(broker_id: int, config: Any, topic_config: Callable[[str, str], str | None]
                          ) -> tuple[ReplicationThrottle, ReplicationThrottle]:
    """(leader side, follower side) for this broker: the rates from the broker's config
    (its dynamic layers included), the replica lists from `topic_config(topic, key)`."""
    samples = int(config.get("replication.quota.window.num"))
    window_s = int(config.get("replication.quota.window.size.seconds"))

    def side(rate_key: str, replicas_key: str) -> ReplicationThrottle:
        return ReplicationThrottle(broker_id, lambda: int(config.get(rate_key)),
                                   lambda topic: topic_config(topic, replicas_key), samples, window_s)
    return (side("leader.replication.throttled.rate", LEADER_REPLICAS_KEY),
            side("follower.replication.throttled.rate", FOLLOWER_REPLICAS_KEY))
