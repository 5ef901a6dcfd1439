"""KIP-101 (truncation by leader epoch instead of the high watermark) under kill -9.

1. A follower that restarts, catches up, rejoins the ISR and is elected leader at once
   (the other two replicas are killed the moment it is back in the ISR) loses none of the
   records acknowledged before; the old leader and follower, restarted, truncate whatever
   tail the new leader never had and end byte-identical to it.
2. The leader and a follower killed at (nearly) the same instant, each with a tail the
   remaining replica does not have (acks=1 writes run next to acks=all writes on the same
   partition; the remaining replica, then the follower, are frozen a moment before the kill
   so that the tails exist and differ), restarted in the opposite order: they truncate to the new leader's history
   and all three replicas end byte-identical (no divergence); no acks=all record is lost
   (acks=1 records may be: their count is printed, not checked).

Short form: 2 rounds of 1 (the second with the new leader lagging a moment before the kill,
so that the other two hold a tail it never had), 1 round of 2. `--long` (or
STROM_LONG_TESTS=1): 6 and 4 rounds.
"""
from __future__ import annotations

import random
import time

import pytest

from tests.chaos.replicas import create_topic, log_bytes, replicas_identical
from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_S = ZK_SESSION_S      # the clusters' ZooKeeper session timeout (conftest)
# A replica frozen to make a tail must keep its ZooKeeper session (kazoo renews it every
# third of SESSION_S, so it may expire 2/3 * SESSION_S after the SIGSTOP): were it to expire,
# the controller would drop the replica from the ISR before the kills and the partition would
# have no live ISR member to elect. The freezes below last well under a second.
# The restarted-follower test keeps 6 s sessions: it asserts that the first leader after the
# kill is the restarted follower, and with 3 s sessions the two killed brokers' sessions
# expired in different 500 ms ticks often enough (once in 5 rounds) for the new controller
# to elect the other killed broker, still registered, for the 0.4 s between the expiries.
ELECTED_AT_ONCE_SESSION_MS = 6000


def check_identical(cluster, topic: str) -> bytes:
    t0 = time.monotonic()
    try:
        cluster.wait_until(lambda: replicas_identical(cluster, topic), timeout=60,
                           message="byte-identical replicas")
    finally:
        print(f"replica log sizes {[len(log_bytes(cluster, i, topic)) for i in range(3)]} "
              f"(identical after {time.monotonic() - t0:.2f} s)")
    return log_bytes(cluster, 0, topic)


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:                       # binary search on prefix equality
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class ByProducer:
    """Feeds each record read to the checker of the producer that wrote it (values are
    b"<producer>-<seq>"), so the acks=1 producer's losses, duplicates and reorderings stay
    out of the acks=all producer's report."""

    def __init__(self, checkers: dict[str, Checker]):
        self.checkers = checkers

    def record_read(self, partition: int, offset: int, key, value: bytes) -> None:
        name = value.rpartition(b"-")[0].decode(errors="replace")
        checker = self.checkers.get(name)
        if checker is not None:
            checker.record_read(partition, offset, key, value)


def full_isr(cluster, topic: str) -> bool:
    return sorted(cluster.isr(topic, 0)) == [0, 1, 2]


# ---- 1. a restarted follower elected leader at once --------------------------------------------


@pytest.mark.zk_session_ms(ELECTED_AT_ONCE_SESSION_MS)
def test_restarted_follower_elected_at_once_keeps_acked_records(cluster, long_run):
    rounds = 6 if long_run else 2
    rng = random.Random(101)
    topic = "kip101-a"
    create_topic(cluster, topic)
    checker = Checker()
    checker_one = Checker()
    kills: list[tuple[int, bool, dict[int, bytes]]] = []
    # The acks=all producer is what is checked. A small acks=1 producer on the same partition
    # gives the leader a tail of its own when a follower lags (acks=all writes alone stop at
    # the producer's 5 in-flight requests, which the lagging follower has usually been sent).
    producer = ChaosProducer(cluster.bootstrap, topic, checker, "all", idempotence=True, rate=3000,
                             keys=None, config={"log_level": 0, "message.timeout.ms": 120000})
    side = ChaosProducer(cluster.bootstrap, topic, checker_one, "one", rate=2000, keys=None,
                         config={"log_level": 0, "acks": "1", "message.timeout.ms": 120000})
    try:
        with producer, side:
            rounds_with_restarted_follower_elected(cluster, topic, producer, rounds, rng, kills)
    except Exception as e:
        # A producer that failed (e.g. a fatal idempotence error) must not hide what was
        # lost: read everything back and report before failing.
        report_after_failure(cluster, topic, checker, checker_one)
        raise AssertionError(f"the rounds failed: {e!r}") from e
    print(f"acks=all producer: {producer.sent} sent, {producer.acked} acked, {producer.failed} failed "
          f"{dict(producer.errors)}")
    print(f"acks=1 producer: {side.sent} sent, {side.acked} acked, {side.failed} failed {dict(side.errors)}")
    final = check_identical(cluster, topic)
    for r, lagging, at_kill in kills:
        cut = {i: len(b) - common_prefix(b, final) for i, b in at_kill.items()}
        print(f"round {r}: bytes of each replica's log at the kill truncated since: {cut}"
              f"{' (the new leader lagged)' if lagging else ''}")
        if lagging:     # the truncation path was exercised: both killed replicas had a tail to drop
            assert sorted(cut.values())[1] > 0, cut
    split = ByProducer({"all": checker, "one": checker_one})
    read_back(cluster.bootstrap, topic, 1, split, config={"log_level": 0})  # type: ignore[arg-type]
    print(f"acks=1 (informational): {checker_one.report()}")
    report = checker.report()
    print(f"acks=all: {report}")
    report.assert_ok(min_acked=1000)


def rounds_with_restarted_follower_elected(cluster, topic: str, producer: ChaosProducer, rounds: int,
                                           rng: random.Random, kills: list) -> None:
    checker = producer.checker
    for r in range(rounds):
        producer.wait_acked(producer.acked + 1500, timeout=60)
        leader = cluster.leader(topic, 0)
        f = rng.choice([i for i in range(3) if i != leader])
        g = next(i for i in range(3) if i not in (leader, f))
        ctl = cluster.controller_id()

        t0 = time.monotonic()
        cluster.kill9(f)
        cluster.wait_until(lambda: f not in cluster.isr(topic, 0), timeout=30,
                           message=f"broker {f} out of the ISR")
        cluster.wait_for_broker_gone(f, timeout=30)
        producer.wait_acked(producer.acked + 500, timeout=30)     # the ISR is {leader, g}
        cluster.restart(f)
        cluster.wait_until(lambda: full_isr(cluster, topic), timeout=60,
                           message=f"broker {f} back in the ISR")
        t_rejoined = time.monotonic() - t0
        lagging = r % 2 == 1
        if lagging:
            # f (in the ISR) falls behind for a moment, so that the leader and g hold a
            # tail f never gets (unacknowledged: f is needed for the high watermark).
            cluster.sigstop(f)
            time.sleep(0.8)
        # At once: the leader and the other follower die; f is the only live ISR member.
        acked_before = checker.acked_count
        cluster.kill9(leader)
        cluster.kill9(g)
        t1 = time.monotonic()
        at_kill = {i: log_bytes(cluster, i, topic) for i in (leader, g, f)}
        sizes = {i: len(b) for i, b in at_kill.items()}
        if lagging:
            cluster.sigcont(f)
            assert sizes[leader] > sizes[f], f"no tail beyond the lagging follower: {sizes}"
        # f must end up leading. Another killed broker may lead for a moment first: killed
        # one after the other, the second can notice the first's death in the milliseconds
        # between the kills, become controller and elect itself (a CI run: 0 at epoch 5, then
        # 2 at epoch 6 86 ms later); it acknowledges nothing there, being killed at once.
        cluster.wait_until(lambda: cluster.leader(topic, 0) == f,
                           timeout=ELECTED_AT_ONCE_SESSION_MS / 1000 + 30,
                           message=f"{f} (the only live ISR member) leading")
        t_elected = time.monotonic() - t1
        state = cluster.partition_state(topic, 0)
        cluster.wait_for_broker_gone(leader, timeout=30)
        cluster.wait_for_broker_gone(g, timeout=30)
        order = [leader, g] if rng.random() < 0.5 else [g, leader]
        for i in order:
            cluster.restart(i)
        cluster.wait_until(lambda: full_isr(cluster, topic), timeout=60, message="full ISR again")
        t_full = time.monotonic() - t1
        producer.wait_acked(producer.acked + 500, timeout=60)
        kills.append((r, lagging, at_kill))
        print(f"round {r}: leader {leader}, controller {ctl}; follower {f} killed, restarted and back in "
              f"the ISR after {t_rejoined:.2f} s; then{' (' + str(f) + ' lagging)' if lagging else ''} "
              f"{leader} and {g} killed with {acked_before} acked "
              f"(log bytes at the kill: {sizes}); {f} leads at epoch "
              f"{state['leader_epoch']} with ISR "
              f"{state['isr']} after {t_elected:.2f} s (controller now {cluster.controller_id()}); "
              f"restarted {order}, ISR full after {t_full:.2f} s; acked so far {producer.acked}")


def report_after_failure(cluster, topic: str, checker: Checker, checker_one: Checker) -> None:
    """Every broker back and the partition fully replicated, then what was acknowledged and
    what is there, printed (the caller fails anyway)."""
    try:
        for i in range(3):
            if i in cluster._paused:
                cluster.sigcont(i)
            if not cluster.running(i):
                cluster.restart(i)
        cluster.wait_until(lambda: full_isr(cluster, topic), timeout=60, message="full ISR again")
        split = ByProducer({"all": checker, "one": checker_one})
        read_back(cluster.bootstrap, topic, 1, split, config={"log_level": 0})  # type: ignore[arg-type]
        print(f"after the failure, acks=all: {checker.report().details()}")
    except Exception as e:              # the report is a courtesy: the original failure wins
        print(f"no report after the failure: {e!r}")


# ---- 2. two brokers with divergent tails do not diverge ------------------------------------------


def test_two_failed_brokers_with_tails_do_not_diverge(cluster, long_run):
    rounds = 4 if long_run else 1
    rng = random.Random(279)
    topic = "kip101-b"
    create_topic(cluster, topic)
    checker_all = Checker()
    checker_one = Checker()
    truncated: list[str] = []
    kills: list[dict[int, bytes]] = []
    with ChaosProducer(cluster.bootstrap, topic, checker_all, "all", idempotence=True, rate=2000, keys=None,
                       config={"log_level": 0, "message.timeout.ms": 120000}) as p_all, \
            ChaosProducer(cluster.bootstrap, topic, checker_one, "one", rate=8000, keys=None,
                          config={"log_level": 0, "acks": "1", "message.timeout.ms": 120000}) as p_one:
        for r in range(rounds):
            p_all.wait_acked(p_all.acked + 1000, timeout=60)
            p_one.wait_acked(p_one.acked + 3000, timeout=60)
            cluster.wait_until(lambda: full_isr(cluster, topic), timeout=60, message="full ISR")
            leader = cluster.leader(topic, 0)
            follower = rng.choice([i for i in range(3) if i != leader])
            rest = next(i for i in range(3) if i not in (leader, follower))
            ctl = cluster.controller_id()
            first, second = (leader, follower) if r % 2 == 0 else (follower, leader)
            # Tails: the remaining replica stops fetching for a moment (staying in the ISR,
            # well within replica.lag.time.max.ms and its ZooKeeper session), then the
            # follower too; the leader takes acks=1 writes all along. At the kill the leader
            # holds the longest log, the follower a shorter one, the remaining replica the
            # shortest.
            t_frozen = time.monotonic()
            cluster.sigstop(rest)
            time.sleep(0.4)
            cluster.sigstop(follower)
            time.sleep(0.25)
            acked_all = p_all.acked
            cluster.kill9(first)
            cluster.kill9(second)
            t0 = time.monotonic()
            at_kill = {i: log_bytes(cluster, i, topic) for i in (leader, follower, rest)}
            cluster.sigcont(rest)
            frozen_s = time.monotonic() - t_frozen
            sizes = {i: len(b) for i, b in at_kill.items()}
            assert sizes[leader] > sizes[follower] > sizes[rest], f"no divergent tails: {sizes}"
            kills.append({i: at_kill[i] for i in (leader, follower)})
            new_leader = cluster.wait_for_leader(topic, 0, timeout=SESSION_S + 30, other_than=leader)
            assert new_leader == rest, cluster.partition_state(topic, 0)
            cluster.wait_for_broker_gone(leader, timeout=30)
            cluster.wait_for_broker_gone(follower, timeout=30)
            state_down = cluster.partition_state(topic, 0)
            # Restart in the opposite order of the kills.
            cluster.restart(second)
            time.sleep(rng.uniform(0.2, 1.5))
            cluster.restart(first)
            cluster.wait_until(lambda: full_isr(cluster, topic), timeout=60, message="full ISR after restarts")
            t_full = time.monotonic() - t0
            p_all.wait_acked(p_all.acked + 500, timeout=60)
            print(f"round {r}: killed {first} then {second} (leader {leader}, follower {follower}, controller "
                  f"{ctl}) with {acked_all} acks=all acked; log bytes at the kill {sizes} ({rest} frozen "
                  f"{frozen_s:.2f} s); "
                  f"while down: leader {state_down['leader']} epoch {state_down['leader_epoch']} ISR "
                  f"{state_down['isr']}; restarted {second} then {first}; ISR full after {t_full:.2f} s")
        final_leader = cluster.leader(topic, 0)
    print(f"acks=all producer: {p_all.sent} sent, {p_all.acked} acked, {p_all.failed} failed {dict(p_all.errors)}")
    print(f"acks=1 producer: {p_one.sent} sent, {p_one.acked} acked, {p_one.failed} failed {dict(p_one.errors)}")
    final = check_identical(cluster, topic)
    for r, logs in enumerate(kills):
        for i, b in logs.items():
            keep = common_prefix(b, final)
            truncated.append(f"round {r} broker {i}: {len(b) - keep} of {len(b)} bytes truncated")
    print("divergent tails: " + "; ".join(truncated) + f" (final leader {final_leader})")
    assert all(len(b) > common_prefix(b, final) for logs in kills for b in logs.values()), \
        "a killed replica's tail was not truncated (and yet the replicas are identical?)"
    split = ByProducer({"all": checker_all, "one": checker_one})
    read_back(cluster.bootstrap, topic, 1, split, config={"log_level": 0})  # type: ignore[arg-type]
    report_one = checker_one.report()
    print(f"acks=1 (informational): {report_one}")
    report = checker_all.report()
    print(f"acks=all: {report}")
    report.assert_ok(min_acked=1000)
