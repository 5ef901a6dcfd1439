"""ZooKeeper outages and session expiry under an acks=all idempotent load (issue 24).

1. ZooKeeper killed (kill -9) and restarted while producers run: the leaders keep serving
   produce through the outage (nothing needs ZooKeeper while the ISR does not change, as in
   Kafka), every broker and the controller are registered again once it is back, and the
   cluster then handles a leader kill -9 (a new leader is elected by the controller, the old
   one rejoins the ISR).
2. Session expiry of the controller, then of a leader that is not the controller: the
   broker's own ZooKeeper session is ended the classic way, by a client connecting with its
   session id and password (what strom records in `zookeeper-session.json` for its restarts)
   and closing. The broker gets a new session and registers again; the controller role moves
   or is won again at a higher epoch; a partition the expired leader led gets another leader
   and the old one catches up as a follower.

Every test: 0 acknowledged records lost (tests/chaos/checker.py), replicas byte-identical at
the end, and no two controllers acting: every controller epoch is won by one broker only,
every leader change in ZooKeeper carries a controller epoch no older than the one before,
and a request carrying a superseded controller epoch is refused (STALE_CONTROLLER_EPOCH).

Short form: one round of each. `--long` (or STROM_LONG_TESTS=1): 6 ZooKeeper outages of
1-8 s (every other one a SIGSTOP, after which ZooKeeper may expire every session at once),
4 expiries of each kind.
"""
from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import defaultdict
from typing import Any, Callable

import pytest

from clients.protocol.errors import Code
from tests.chaos.checker import ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_S
from tests.chaos.test_controller_failover import (PARTITIONS, TimedChecker, all_in_sync, create_topic,
                                                  leaders, wait_identical)
from tests.support.cluster import Cluster
from tests.support.wire import WireClient
from zkcoord.zk_registration import SESSION_FILE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 2000
_ELECTED = re.compile(r"controller (\d+): elected at epoch (\d+)")


# ---- faults ---------------------------------------------------------------------------------


def broker_session(cluster: Cluster, i: int) -> tuple[int, bytes]:
    """Broker i's current ZooKeeper session (id, password), from the record it keeps in its
    log dir; checked against the owner of its registration, so the test ends the right one."""
    doc = json.loads((cluster.broker(i).log_dir / SESSION_FILE).read_text())
    sid, password = int(doc["session_id"], 16), bytes.fromhex(doc["password"])
    _, stat = cluster.zk.get(cluster.path(f"/brokers/ids/{i}"))
    assert stat.ephemeralOwner == sid, \
        f"broker {i} is registered by session 0x{stat.ephemeralOwner:x}, its record says 0x{sid:x}"
    return sid, password


def expire_session(cluster: Cluster, i: int, attempts: int = 5) -> int:
    """End broker i's ZooKeeper session: connect with its id and password, then close. The
    server deletes the session's ephemeral znodes at once and the broker's next request
    meets SESSION_EXPIRED. Taking the session over drops the broker's connection, and a
    broker that reconnects before the close arrives takes the session back (the close then
    goes nowhere): tried again until the registration is no longer the session's. Returns
    the ended session's id."""
    from kazoo.client import KazooClient
    sid, password = broker_session(cluster, i)
    for _ in range(attempts):
        thief = KazooClient(hosts=cluster.zookeeper.connect, client_id=(sid, password), timeout=10.0)
        thief.start(timeout=15)
        try:
            if thief.client_id[0] != sid:
                return sid                  # expired already (kazoo got a new session instead)
        finally:
            thief.stop()
            thief.close()
        try:
            cluster.wait_until(lambda: registered_by_new_session(cluster, i, sid) or i not in cluster.broker_ids(),
                               timeout=2.0, interval=0.02)
            return sid
        except TimeoutError:
            continue
    raise AssertionError(f"broker {i}'s session 0x{sid:x} survived {attempts} attempts to end it")


def reconnecting_zk(cluster: Cluster) -> None:
    """Replace the cluster's own ZooKeeper client (its probes, the watches here) with one that
    retries its connection at least every second, as the brokers' does (zkcoord/zk_session.py).
    With kazoo's default the wait between attempts doubles through an outage: after one of 8 s
    this client came back after its 10 s session had expired, and a read failed in the test.
    (Cluster.zk itself should do this: reported to the lead.)"""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry
    cluster._close_zk()
    zk = KazooClient(hosts=cluster.zookeeper.connect, timeout=10.0,
                     connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0))
    zk.start(timeout=15)
    cluster._zk = zk


def past_own_session_loss(read: Callable[[], Any], timeout: float = 30.0) -> Any:
    """`read()` with the test's own ZooKeeper client, again while it raises SessionExpired
    or ConnectionLoss: after an outage a loaded machine can make that client miss the one
    session timeout a restarted ZooKeeper gives (as a broker may, see below); kazoo then
    opens a new session and its DataWatches register again. (CI, 2026-11-27: the first read
    after the outage raised SessionExpiredError.)"""
    from kazoo.exceptions import ConnectionLoss, SessionExpiredError
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except (SessionExpiredError, ConnectionLoss):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def registered_by_new_session(cluster: Cluster, i: int, old_sid: int) -> bool:
    from kazoo.exceptions import NoNodeError
    try:
        _, stat = cluster.zk.get(cluster.path(f"/brokers/ids/{i}"))
    except NoNodeError:
        return False
    return stat.ephemeralOwner != old_sid


# ---- what "no two controllers acting" means, checked --------------------------------------------


class LeaderChanges:
    """(leader epoch, controller epoch, leader) of every version of each partition's state
    znode, seen by DataWatches of the test's own ZooKeeper client. Leaders are chosen by the
    controller only, so along a partition's leader epochs the controller epoch must never go
    back: a stale controller electing after a newer one shows up as a step down."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int = PARTITIONS):
        self._lock = threading.Lock()
        self.seen: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for p in range(partitions):
            cluster.zk.DataWatch(cluster.path(f"/brokers/topics/{topic}/partitions/{p}/state"),
                                 self._watcher(p))

    def _watcher(self, p: int) -> Callable[[bytes | None, Any], None]:
        # Exactly two parameters: kazoo hands a third (the event) to a function that takes one.
        def changed(data: bytes | None, stat: Any) -> None:
            self._changed(p, data)
        return changed

    def _changed(self, p: int, data: bytes | None) -> None:
        if not data:
            return
        s = json.loads(data)
        entry = (int(s["leader_epoch"]), int(s["controller_epoch"]), int(s["leader"]))
        with self._lock:
            if not self.seen[p] or self.seen[p][-1] != entry:
                self.seen[p].append(entry)

    def check(self) -> int:
        """Assert the invariant; returns how many leader changes were seen."""
        changes = 0
        with self._lock:
            assert sorted(self.seen) == list(range(len(self.seen))) and self.seen, \
                f"partition states watched: {sorted(self.seen, key=str)}"
            for p, entries in self.seen.items():
                last_leader_epoch, last_ctl_epoch = -1, -1
                for leader_epoch, ctl_epoch, _ in entries:
                    assert leader_epoch >= last_leader_epoch, f"partition {p}: leader epoch went back: {entries}"
                    if leader_epoch > last_leader_epoch:
                        assert ctl_epoch >= last_ctl_epoch, \
                            f"partition {p}: an election by an older controller epoch came last: {entries}"
                        changes += 1
                        last_leader_epoch, last_ctl_epoch = leader_epoch, ctl_epoch
        return changes


def controller_terms(cluster: Cluster) -> dict[int, list[int]]:
    """Controller epoch -> the brokers whose logs say they won it."""
    won: dict[int, list[int]] = defaultdict(list)
    for i in range(cluster.size):
        for broker, epoch in _ELECTED.findall(cluster.output(i)):
            won[int(epoch)].append(int(broker))
    return dict(won)


def assert_one_controller_per_epoch(cluster: Cluster) -> dict[int, list[int]]:
    """Every epoch was won by one broker. The same broker may log one epoch twice: after a
    new session it stands down and runs again while still holding /controller, and then
    keeps its epoch (zk_election: nobody else can have won in between)."""
    terms = controller_terms(cluster)
    assert all(len(set(b)) == 1 for b in terms.values()), f"an epoch won by two brokers: {terms}"
    return terms


def stale_epoch_refused(cluster: Cluster, i: int, old_controller: int, old_epoch: int) -> int:
    """The answer of broker i to an UpdateMetadata of a superseded controller epoch (empty:
    only the epoch is judged)."""
    with WireClient("127.0.0.1", cluster.broker(i).port) as c:
        r = c.request("UpdateMetadata", 7, {"controller_id": old_controller, "controller_epoch": old_epoch,
                                            "broker_epoch": -1, "live_brokers": [], "topic_states": []})
    return r.error_code


def final_checks(cluster: Cluster, topic: str, checker: TimedChecker, producer: ChaosProducer,
                 changes: LeaderChanges, min_acked: int) -> None:
    """Read everything back (0 lost, duplicated, reordered, conflicting), byte-identical
    replicas, and the controller invariants; prints the counts."""
    print(f"producer: {producer.sent} sent, {producer.acked} acked, {producer.failed} failed "
          f"{dict(producer.errors)}")
    read_back(cluster.bootstrap, topic, PARTITIONS, checker, config={"log_level": 0})
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=min_acked)
    wait_identical(cluster, topic)
    print(f"leader changes seen in ZooKeeper: {changes.check()}; controller terms "
          f"{assert_one_controller_per_epoch(cluster)}")


def acks_between(checker: TimedChecker, partition: int, start: float, end: float = float("inf")) -> int:
    """Acknowledgements on `partition` at monotonic times in [start, end]."""
    with checker._tlock:
        return sum(1 for t in checker._times.get(partition, []) if start <= t <= end)


def kill_a_leader_and_recover(cluster: Cluster, topic: str, producer: ChaosProducer) -> str:
    """kill -9 the leader of partition 0: the controller elects another, the producer goes on;
    then the broker is restarted and every ISR fills up again. A line for the round's print."""
    victim = cluster.leader(topic, 0)
    assert victim is not None
    t0 = time.monotonic()
    cluster.kill9(victim)
    new = cluster.wait_for_leader(topic, 0, timeout=ZK_SESSION_S + 20, other_than=victim)
    t_led = time.monotonic() - t0
    producer.wait_acked(producer.acked + 300, timeout=30)
    cluster.wait_for_broker_gone(victim, timeout=30)
    cluster.restart(victim)
    cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60,
                       message=f"all ISRs full after restarting {victim}")
    return f"leader {victim} killed: partition 0 led by {new} after {t_led:.2f} s, all ISRs full " \
           f"{time.monotonic() - t0:.2f} s after the kill"


# ---- 1. ZooKeeper killed and restarted ------------------------------------------------------------


def test_zookeeper_kill9_and_restart_loses_nothing(cluster, long_run):
    rounds = 6 if long_run else 1
    rng = random.Random(24)
    topic = "zk-outage"
    reconnecting_zk(cluster)
    create_topic(cluster, topic)
    changes = LeaderChanges(cluster, topic)
    checker = TimedChecker()
    with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=RATE, keys=48,
                       config={"log_level": 0}) as producer:
        for r in range(rounds):
            producer.wait_acked(producer.acked + 1000, timeout=60)
            before = leaders(cluster, topic)
            isrs = {p: sorted(cluster.isr(topic, p)) for p in range(PARTITIONS)}
            # The first outage outlasts the brokers' session timeout: ZooKeeper restores the
            # sessions it had when it starts again, so nobody may count a broker as gone.
            # --long also freezes it (SIGSTOP) instead, every other round: when it thaws, it
            # may expire every session at once, and every broker registers again.
            frozen = r % 2 == 1
            outage = ZK_SESSION_S + 1.0 if r == 0 else rng.uniform(1.0, 8.0)
            sessions = {i: cluster.zk.get(cluster.path(f"/brokers/ids/{i}"))[1].ephemeralOwner for i in range(3)}
            t_kill = time.monotonic()
            if frozen:
                cluster.zookeeper.sigstop()
            else:
                cluster.zookeeper.kill9()
            time.sleep(outage)
            t_back = time.monotonic()
            if frozen:
                cluster.zookeeper.sigcont()
            else:
                cluster.zookeeper.start()
            t_serving = time.monotonic()
            during = {p: acks_between(checker, p, t_kill, t_back) for p in range(PARTITIONS)}
            assert all(n > 0 for n in during.values()), \
                f"a leader stopped acknowledging while ZooKeeper was down: acks per partition {during}"
            past_own_session_loss(lambda: cluster.wait_for_brokers(3, timeout=30))
            ctl = past_own_session_loss(lambda: cluster.wait_for_controller(timeout=30))
            producer.wait_acked(producer.acked + 300, timeout=30)
            cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60, message="all ISRs full")
            # A restarted ZooKeeper gives each session one timeout to come back: a broker that
            # misses it (a loaded machine) registers anew, and its partitions may move. Read
            # the leaders first: a change seen there means the old session is gone by now.
            after = leaders(cluster, topic)
            renewed = [i for i in range(3) if registered_by_new_session(cluster, i, sessions[i])
                       or i not in cluster.broker_ids()]
            assert after == before or renewed, f"leaders moved without a session lost: {before} -> {after}"
            print(f"round {r}: ZooKeeper {'frozen' if frozen else 'killed'} for {outage:.2f} s (serving again "
                  f"{t_serving - t_back:.2f} s after): acks per partition during the outage {during}; leaders "
                  f"{before} -> {after}, ISRs before {isrs}; brokers registered again in new "
                  f"sessions {renewed}; controller {ctl} at epoch {cluster.controller_epoch()}")
            # The cluster acts again: the controller hears a broker die and elects.
            print(f"round {r}: {kill_a_leader_and_recover(cluster, topic, producer)}")
    final_checks(cluster, topic, checker, producer, changes, min_acked=1000 * rounds)


# ---- 2. session expiry of the controller and of a leader ----------------------------------------


def expire_and_recover(cluster: Cluster, topic: str, producer: ChaosProducer, victim: int, what: str) -> None:
    """Expire broker `victim`'s session and wait for the cluster to be whole again; checks
    the re-registration, the controller epoch and the fencing of the old one."""
    ctl, epoch = cluster.controller_id(), cluster.controller_epoch()
    assert ctl is not None and epoch is not None
    led = [p for p, b in leaders(cluster, topic).items() if b == victim]
    t0 = time.monotonic()
    old_sid = expire_session(cluster, victim)
    cluster.wait_until(lambda: registered_by_new_session(cluster, victim, old_sid), timeout=30,
                       message=f"broker {victim} registered again in a new session")
    t_registered = time.monotonic() - t0
    new_ctl = cluster.wait_for_controller(timeout=30)
    if victim == ctl:
        # Its /controller went with the session: the role was won again, by it or another.
        cluster.wait_until(lambda: (cluster.controller_epoch() or 0) > epoch, timeout=30,
                           message="a controller elected at a higher epoch")
        new_ctl = cluster.wait_for_controller(timeout=30)
        cluster.wait_until(lambda: f"resigning at epoch {epoch}" in cluster.output(victim), timeout=30,
                           message="the expired controller standing down")
    producer.wait_acked(producer.acked + 300, timeout=30)
    cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60, message="all ISRs full again")
    t_whole = time.monotonic() - t0
    new_epoch = cluster.controller_epoch()
    assert new_epoch is not None
    moved = {p: cluster.leader(topic, p) for p in led}
    if new_epoch > epoch:
        codes = {i: stale_epoch_refused(cluster, i, ctl, epoch) for i in range(3)}
        assert all(c == Code.STALE_CONTROLLER_EPOCH for c in codes.values()), codes
    print(f"{what} {victim} expired (controller was {ctl} at epoch {epoch}, it led {led}): registered "
          f"again after {t_registered:.2f} s; controller {new_ctl} at epoch {new_epoch}; its partitions "
          f"now led by {moved}; all ISRs full after {t_whole:.2f} s")


def test_session_expiry_of_controller_and_leader(cluster, long_run):
    rounds = 4 if long_run else 1
    topic = "zk-expiry"
    create_topic(cluster, topic)
    changes = LeaderChanges(cluster, topic)
    checker = TimedChecker()
    expired_leaders: list[tuple[int, list[int]]] = []
    with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=RATE, keys=48,
                       config={"log_level": 0}) as producer:
        for r in range(rounds):
            producer.wait_acked(producer.acked + 1000, timeout=60)
            ctl = cluster.controller_id()
            assert ctl is not None
            expire_and_recover(cluster, topic, producer, ctl, f"round {r}: controller")
            producer.wait_acked(producer.acked + 500, timeout=30)
            ctl = cluster.controller_id()
            now = leaders(cluster, topic)
            victim = next((b for b in now.values() if b is not None and b != ctl), None)
            if victim is None:          # the controller leads everything: a follower's turn
                victim = next(i for i in range(3) if i != ctl)
            led = [p for p, b in now.items() if b == victim]
            expire_and_recover(cluster, topic, producer, victim, f"round {r}: leader")
            expired_leaders.append((victim, led))
    final_checks(cluster, topic, checker, producer, changes, min_acked=1500 * rounds)
    assert any(led for _, led in expired_leaders), f"no expired broker led a partition: {expired_leaders}"
