"""ReplicationThrottle without sockets: which replicas it covers, and the follower side's
reservations, which keep several fetches in flight from overshooting the rate together."""
from __future__ import annotations

from broker.config.throttles import UNLIMITED
from broker.replication.throttle import ReplicationThrottle


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


def throttle(rate: int, replicas: str | None = "0:1,1:1", clock: Clock | None = None) -> ReplicationThrottle:
    return ReplicationThrottle(1, lambda: rate, lambda topic: replicas if topic == "t" else None,
                               samples=2, window_s=1, clock_ms=clock or Clock())


def test_covers_listed_out_of_sync_replicas_of_this_broker_only():
    t = throttle(1000)
    assert t.applies("t", 0, in_sync=False)
    assert not t.applies("t", 0, in_sync=True)          # an in-sync replica must keep up
    assert not t.applies("t", 2, in_sync=False)         # not listed
    assert not t.applies("u", 0, in_sync=False)         # another topic
    assert throttle(1000, "*").applies("t", 7, in_sync=False)
    assert not throttle(UNLIMITED, "*").applies("t", 7, in_sync=False)   # no rate: nothing throttled


def test_reservations_in_flight_share_one_budget():
    clock = Clock()
    t = throttle(1_000_000, clock=clock)
    first = t.reserve(800_000)
    second = t.reserve(800_000)
    assert first == 800_000 and second == 200_000       # one second's worth in all
    assert t.reserve(1) == 0
    t.settle(first, 100_000)                             # the answer used little of it
    t.settle(second, 0)
    third = t.reserve(2_000_000)
    assert third == 900_000
    t.settle(third, 900_000)
    assert t.reserve(1) == 0 and t.exceeded() is False   # at the rate, not over it
    clock.ms += 2500                                     # the samples have moved on
    assert t.reserve(2_000_000) == 1_000_000


def test_an_unlimited_rate_grants_everything():
    t = throttle(UNLIMITED)
    assert t.reserve(5_000_000) == 5_000_000
    assert not t.exceeded()
