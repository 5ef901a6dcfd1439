"""Invariant 3 under network partitions (replication factor 3, min.insync.replicas 2, acks=all,
idempotent producer): ZooKeeper and each broker run on their own host (a network namespace,
broker/testing/netns.py) behind one switch, and the switch drops packets between them
(tests/chaos/partition_faults.py). The test process is a client on both sides: its producers
and consumers are on ZooKeeper's side (CLIENT), and a probe bound to a second address
(MINORITY) goes with the brokers cut off from ZooKeeper and keeps producing to a cut-off
leader directly: a deposed leader must refuse to acknowledge, not merely be out of reach.
Cuts between brokers only (3, 4) leave every client reaching every broker.

1. The leader cut from ZooKeeper and its followers: it acknowledges nothing while cut (a
   probe keeps producing to it directly), the majority elects a new leader and keeps
   acknowledging; healed, the old leader truncates what it alone appended and rejoins the ISR.
2. A follower cut off: the ISR shrinks to the other two and writes go on; healed, it rejoins.
3. The controller cut from ZooKeeper (it still reaches the brokers): another broker becomes
   controller and the cluster keeps working (acks on a partition the old controller led and
   on one it did not, and a topic created meanwhile); healed, all partitions have full ISRs.
4. A one-way cut: the leader's packets to a follower dropped, the follower's arriving (and
   in the long form, also the reverse): the follower leaves the ISR, writes go on; healed, it
   rejoins.
5. A bridge: the leader on one side, ZooKeeper and a follower on the other, the third broker
   (the controller) seeing both: the leader acknowledges nothing while cut, the side with
   ZooKeeper elects and goes on; healed, everything converges.
6. A rejecting cut (connection refused, as from a firewall) from the controller to a broker
   restarted behind it: the controller takes the refusals for a dead process and fences the
   live broker; healed, that broker must be back in the ISRs.
7. A storm: faults drawn at random from all of partition_faults.FAULTS (the five above,
   ZooKeeper left with one broker, the controller cut from the brokers), random hold times,
   some overlapping, some healed and cut again before recovery; only safety is asked until
   it ends, then everything converges.

Every scenario ends with a read-back through the checker (0 lost, 0 duplicated, 0 reordered,
0 conflicting offsets) and byte-identical replicas of every partition, and prints its counts
and timings. Short form: one round of 1-6 each and 3 storm rounds (all share one cluster, to
stay within 120 s; each starts from a healed cluster with full ISRs). `--long`: 5 rounds of
1-6 each, roles varied, and 30 storm rounds.
Needs root (iproute2, iptables): skipped without, failed under CI.
"""
from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from typing import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from clients.protocol.records import Record, build_batch
from tests.chaos import partition_faults as pf
from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_MS, ZK_SESSION_S, notable_lines
from tests.chaos.replicas import log_bytes
from tests.support.cluster import Cluster
from tests.support.netns import require_netns
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 400                   # records/s of the chaos producer
# A cut-off leader still answers Metadata naming itself (nothing tells it otherwise): the
# client asks again each second rather than every 5 s, so a stale answer costs it little.
PRODUCER_CONFIG = {"log_level": 0, "request.timeout.ms": 5000, "socket.timeout.ms": 5000,
                   "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000}
ACKS_PER_PHASE = 200         # acknowledgements awaited before a cut, after an election, after a heal
WAIT_S = ZK_SESSION_S + 27   # bound on any one step (elections come a session timeout after a cut)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_netns()
    with pf.netns_cluster(tmp_path_factory.mktemp("partitions") / "cluster",
                          zookeeper_session_timeout_ms=ZK_SESSION_MS) as c:
        yield c


@pytest.fixture
def healed(cluster, request):
    """The shared cluster, healed and whole before and after each test; on failure the
    brokers' notable log lines are printed."""
    pf.heal(cluster)
    cluster.wait_for_brokers(3, timeout=WAIT_S)
    cluster.wait_for_controller(timeout=WAIT_S)
    yield cluster
    pf.heal(cluster)
    if getattr(request.node, "chaos_call_failed", False):
        for i in range(3):
            print(f"--- broker {i} ---\n" + "\n".join(notable_lines(cluster.output(i))))


# ---- helpers --------------------------------------------------------------------------------


def create_topic(c: Cluster, topic: str, assignment: list[list[int]]) -> None:
    """Partitions with the given replicas (the first one leads), min.insync.replicas 2,
    every ISR full."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)
    for p, replicas in enumerate(assignment):
        c.wait_until(lambda: c.leader(topic, p) == replicas[0]
                     and sorted(c.isr(topic, p)) == sorted(replicas), timeout=30,
                     message=f"{topic}-{p} led by {replicas[0]} with a full ISR")


def full_isr(c: Cluster, topic: str, partitions: int) -> bool:
    return all(sorted(c.isr(topic, p)) == [0, 1, 2] for p in range(partitions))


def replicas_identical(c: Cluster, topic: str, partitions: int) -> bool:
    for p in range(partitions):
        logs = [log_bytes(c, i, topic, p) for i in range(3)]
        if not (logs[0] == logs[1] == logs[2] and logs[0]):
            return False
    return True


class Timer:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: list[str] = []

    def mark(self, what: str) -> float:
        took = time.monotonic() - self.t0
        self.marks.append(f"{what} {took:.1f}s")
        return took

    def __str__(self) -> str:
        return ", ".join(self.marks)


class LeaderProbe:
    """Produces acks=all straight to one broker, again and again, from a thread, as a client
    on the cut-off side (MINORITY): what a client that still reaches a deposed leader gets
    from it. Records every answer's error code (0 = acknowledged) and the offsets
    acknowledged."""

    def __init__(self, c: Cluster, broker: int, topic: str, partition: int = 0):
        self.address = (c.broker(broker).host, c.broker(broker).port)
        self.source = pf.minority_address(c)
        self.topic, self.partition = topic, partition
        self.codes: Counter[int] = Counter()
        self.acked_offsets: list[int] = []
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-probe", daemon=True)

    def __enter__(self) -> "LeaderProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                with WireClient(*self.address, timeout=5, source_ip=self.source) as w:
                    while not self._stop.is_set():
                        seq += 1
                        r = w.request("Produce", 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
                            {"name": self.topic, "partition_data": [{"index": self.partition, "records":
                                build_batch([Record(None, f"probe-{seq}".encode())])}]}]})
                        part = r.responses[0].partition_responses[0]
                        self.codes[part.error_code] += 1
                        if part.error_code == 0:
                            self.acked_offsets.append(part.base_offset)
            except OSError as e:
                self.errors[type(e).__name__] += 1
                self._stop.wait(0.2)

    @property
    def answers(self) -> int:
        return sum(self.codes.values())


class PartitionCounts(Checker):
    """A Checker that also counts acknowledgements per partition."""

    def __init__(self) -> None:
        super().__init__()
        self.per_partition: Counter[int] = Counter()

    def record_acked(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        super().record_acked(partition, offset, key, value)
        self.per_partition[partition] += 1


def producer(c: Cluster, topic: str, checker: Checker) -> ChaosProducer:
    return ChaosProducer(c.bootstrap, topic, checker, rate=RATE, idempotence=True, keys=16,
                         config=PRODUCER_CONFIG)


def more_acks(p: ChaosProducer, n: int = ACKS_PER_PHASE) -> int:
    return p.wait_acked(p.acked + n, timeout=WAIT_S)


def finish(c: Cluster, topic: str, partitions: int, checker: Checker, timer: Timer) -> None:
    """Read everything back, check it, and wait for byte-identical replicas."""
    read_back(c.bootstrap, topic, partitions, checker, timeout=60)
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=3 * ACKS_PER_PHASE)
    c.wait_until(lambda: replicas_identical(c, topic, partitions), timeout=60,
                 message="byte-identical replicas")
    timer.mark("replicas identical")
    print(f"timings: {timer}")


def heal_and_rejoin(c: Cluster, topic: str, partitions: int, p: ChaosProducer, timer: Timer,
                    who: str) -> None:
    """Heal; wait until `who` is back and every ISR of `topic` full; wait for more acks."""
    pf.heal(c)
    timer.mark("healed")
    c.wait_until(lambda: full_isr(c, topic, partitions), timeout=WAIT_S, message=f"{who} back in the ISRs")
    timer.mark(f"{who} in the ISRs")
    more_acks(p)


def scenario_rounds(c: Cluster, name: str, long_run: bool) -> Iterator[tuple[int, str, int]]:
    """(round, its topic, the controller as it begins) for 1 round, or 5 with --long."""
    for r in range(5 if long_run else 1):
        controller = c.controller_id()
        assert controller is not None, "no controller at the start of a round"
        yield r, f"{name}-{r}", controller


def deposed_leader_round(c: Cluster, topic: str, leader: int, cut: Callable[[], pf.PartitionFault],
                         r: int) -> None:
    """One round of a fault that takes `leader` (of `topic`-0) from ZooKeeper and its
    followers: while cut it acknowledges nothing to the probe, ZooKeeper's side elects and
    goes on; healed, the old leader truncates its own tail and rejoins the ISR."""
    checker, timer = Checker(), Timer()
    with producer(c, topic, checker) as p:
        more_acks(p)
        print(f"round {r}: {cut()}")
        timer.mark("cut")
        with LeaderProbe(c, leader, topic) as probe:
            new_leader = c.wait_for_leader(topic, 0, timeout=WAIT_S, other_than=leader)
            timer.mark(f"broker {new_leader} elected")
            more_acks(p)
            timer.mark("majority acknowledging")
            # The old leader must keep refusing for as long as the cut lasts.
            c.wait_until(lambda: probe.answers >= 3, timeout=WAIT_S, message="answers from the cut-off leader")
        cut_off_log = log_bytes(c, leader, topic)
        heal_and_rejoin(c, topic, 1, p, timer, "the old leader")
    print(f"probe to the cut-off leader {leader}: answers {dict(probe.codes)} (error code: count), "
          f"connection errors {dict(probe.errors)}")
    assert probe.codes[0] == 0, f"the cut-off leader acknowledged offsets {probe.acked_offsets}"
    finish(c, topic, 1, checker, timer)
    # It had appended the probe's records (and maybe the producer's) that nobody else has:
    # its log then must not be a prefix of what it holds now.
    assert not log_bytes(c, leader, topic).startswith(cut_off_log), \
        "the old leader's unreplicated tail was not truncated"


def follower_out_round(c: Cluster, topic: str, leader: int, in_sync: list[int],
                       cut: Callable[[], pf.PartitionFault], r: int) -> None:
    """One round of a fault that takes a follower of `topic`-0 from its leader: the ISR
    shrinks to `in_sync` and writes go on; healed, the follower rejoins."""
    checker, timer = Checker(), Timer()
    with producer(c, topic, checker) as p:
        more_acks(p)
        print(f"round {r}: {cut()}")
        timer.mark("cut")
        c.wait_until(lambda: sorted(c.isr(topic, 0)) == sorted(in_sync), timeout=WAIT_S,
                     message=f"ISR shrunk to {sorted(in_sync)}")
        timer.mark("ISR shrunk")
        more_acks(p)
        timer.mark("acknowledging with 2 in sync")
        assert c.leader(topic, 0) == leader
        heal_and_rejoin(c, topic, 1, p, timer, "the follower")
    finish(c, topic, 1, checker, timer)


# ---- 1. the leader cut off ----------------------------------------------------------------------


def test_isolated_leader_acknowledges_nothing_and_the_majority_elects(healed, long_run):
    c = healed
    for r, topic, controller in scenario_rounds(c, "cut-leader", long_run):
        # The leader is not the controller (even rounds), then it is (odd rounds).
        leader = controller if r % 2 else (controller + 1) % 3
        create_topic(c, topic, [[leader, (leader + 1) % 3, (leader + 2) % 3]])
        deposed_leader_round(c, topic, leader, lambda: pf.isolate_leader(c, topic), r)


# ---- 2. a follower cut off ----------------------------------------------------------------------


def test_isolated_follower_leaves_the_isr_and_rejoins(healed, long_run):
    c = healed
    for r, topic, controller in scenario_rounds(c, "cut-follower", long_run):
        leader = (controller + 1) % 3
        # The follower cut off is not the controller (even rounds), then it is (odd rounds).
        victim = controller if r % 2 else (controller + 2) % 3
        other = 3 - leader - victim
        create_topic(c, topic, [[leader, victim, other]])
        follower_out_round(c, topic, leader, [leader, other],
                           lambda: pf.isolate_follower(c, topic, victim=victim), r)


# ---- 3. the controller cut off from ZooKeeper ------------------------------------------------


def test_controller_cut_from_zookeeper_is_replaced_and_the_cluster_keeps_working(healed, long_run):
    c = healed
    for r, topic, controller in scenario_rounds(c, "cut-controller", long_run):
        a, b = (controller + 1) % 3, (controller + 2) % 3
        # Partition 0 led by the controller, partition 1 by another broker.
        create_topic(c, topic, [[controller, a, b], [a, b, controller]])
        checker, timer = PartitionCounts(), Timer()
        with producer(c, topic, checker) as p:
            more_acks(p)
            print(f"round {r}: {pf.cut_controller_from_zookeeper(c, topic)}")
            timer.mark("cut")
            new_controller = c.wait_for_controller(timeout=WAIT_S, other_than=controller)
            timer.mark(f"broker {new_controller} controller")
            c.wait_for_leader(topic, 0, timeout=WAIT_S, other_than=controller)
            timer.mark("partition 0 re-elected")
            before = dict(checker.per_partition)
            c.wait_until(lambda: all(checker.per_partition[q] >= before.get(q, 0) + ACKS_PER_PHASE // 4
                                     for q in (0, 1)), timeout=WAIT_S,
                         message="acknowledgements on both partitions during the cut")
            timer.mark("both partitions acknowledging")
            # Two brokers are registered now: a topic of replication factor 2.
            created = f"made-during-cut-{r}"
            admin = AdminClient({"bootstrap.servers": c.bootstrap_except(controller), "log_level": 0})
            admin.create_topics([NewTopic(created, 1, 2)])[created].result(30)
            c.wait_for_leader(created, 0, timeout=WAIT_S)
            timer.mark("topic created")
            heal_and_rejoin(c, topic, 2, p, timer, f"the old controller {controller}")
            c.wait_until(lambda: len(c.isr(created, 0)) == 2, timeout=WAIT_S, message=f"{created}'s ISR")
        print(f"acknowledged per partition: {dict(checker.per_partition)}")
        finish(c, topic, 2, checker, timer)


# ---- 4. a one-way cut ------------------------------------------------------------------------


def test_one_way_cut_between_leader_and_follower(healed, long_run):
    c = healed
    for r, topic, controller in scenario_rounds(c, "one-way", long_run):
        leader, follower = (controller + 1) % 3, (controller + 2) % 3
        create_topic(c, topic, [[leader, follower, controller]])
        # The leader's packets to the follower (even rounds), then the reverse (odd ones).
        follower_out_round(c, topic, leader, [leader, controller],
                           lambda: pf.one_way(c, topic, leader_to_follower=r % 2 == 0, follower=follower), r)


# ---- 5. a bridge ------------------------------------------------------------------------------


def test_bridge_partition(healed, long_run):
    c = healed
    for r, topic, controller in scenario_rounds(c, "bridge", long_run):
        leader = (controller + 1) % 3
        other = (controller + 2) % 3
        # The leader alone on one side, ZooKeeper and a follower on the other, the other
        # follower seeing both: the controller (even rounds), or not (odd rounds: the
        # controller is then on ZooKeeper's side). The follower on ZooKeeper's side comes
        # next in the replica order: the new leader is across the cut from the old one.
        middle, far = (controller, other) if r % 2 == 0 else (other, controller)
        create_topic(c, topic, [[leader, far, middle]])
        deposed_leader_round(c, topic, leader, lambda: pf.bridge(c, topic, middle=middle), r)


# ---- 6. a rejecting cut ----------------------------------------------------------------------


def test_rejecting_cut_never_fences_a_live_broker_for_good(healed, long_run):
    """A firewall that rejects (connection refused) the controller's packets to a broker that
    restarts behind it: to the controller's liveness watch (zkcoord/liveness.py) a refused
    connection means a dead process, so it fences the broker although it runs and keeps its
    ZooKeeper registration. The broker's own connections to the controller only time out
    (the answers are what is refused), so the controller stays; in the long form odd rounds
    reject both ways, and then the broker, refused too, deposes the controller, and whichever
    wins the election fences the other. Once the firewall goes, the fenced broker must be
    back: in the ISRs again, nothing lost."""
    c = healed
    for r, topic, controller in scenario_rounds(c, "reject", long_run):
        victim, other = (controller + 1) % 3, (controller + 2) % 3
        create_topic(c, topic, [[victim, other, controller], [controller, victim, other]])
        checker, timer = Checker(), Timer()
        with producer(c, topic, checker) as p:
            more_acks(p)
            c.kill9(victim)
            c.wait_for_leader(topic, 0, timeout=WAIT_S, other_than=victim)
            timer.mark(f"broker {victim} killed, partition 0 re-elected")
            if r % 2 == 0:
                pf.network(c).cut_one_way(pf.host(controller), pf.host(victim), reject=True)
            else:
                pf.network(c).cut(pf.host(victim), pf.host(controller), reject=True)
            c.restart(victim)
            timer.mark(f"broker {victim} restarted behind a rejecting cut from controller {controller}")
            c.wait_for_brokers(3, timeout=WAIT_S)
            more_acks(p)
            time.sleep(2.0)             # the watches meet the refusals
            print(f"round {r}: controller now {c.controller_id()}, ISRs "
                  f"{[c.isr(topic, q) for q in (0, 1)]} before the heal")
            heal_and_rejoin(c, topic, 2, p, timer, "every broker")
        finish(c, topic, 2, checker, timer)


# ---- 7. a storm of them ----------------------------------------------------------------------


def test_partition_storm(healed, long_run):
    """Faults drawn at random from partition_faults.FAULTS against a 3-partition topic, held
    for random times (some end before a session can expire, some during the elections that
    follow), sometimes two at once, sometimes healed and cut again before the cluster has
    recovered. Only safety is asked during the storm; afterwards everything must converge."""
    c = healed
    # The short form draws the same storm each run (its time is budgeted); --long a new one.
    seed = int(os.environ.get("STROM_STORM_SEED", "0")) or (random.randrange(1, 10**6) if long_run else 24)
    print(f"storm seed {seed} (STROM_STORM_SEED={seed} draws the same faults and hold times)")
    rng = random.Random(seed)
    topic, partitions = "storm", 3
    controller = c.controller_id()
    assert controller is not None
    create_topic(c, topic, [[(controller + p) % 3, (controller + p + 1) % 3, (controller + p + 2) % 3]
                            for p in range(partitions)])
    checker, timer = Checker(), Timer()
    kinds: Counter[str] = Counter()
    with producer(c, topic, checker) as p:
        more_acks(p)
        for r in range(30 if long_run else 3):
            fault = pf.draw(c, topic, rng, partition=rng.randrange(partitions))
            kinds[fault.kind] += 1
            if rng.random() < 0.2:
                second = pf.draw(c, topic, rng, partition=rng.randrange(partitions))
                kinds[second.kind] += 1
                fault = pf.PartitionFault(f"{fault.kind}+{second.kind}", f"{fault}; {second}", fault.leader)
            hold = rng.choice([rng.uniform(0.5, 2.0), rng.uniform(ZK_SESSION_S, ZK_SESSION_S + 2.0),
                               rng.uniform(5.0, 9.0)])
            time.sleep(hold)
            pf.heal(c)
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0.2, 2.0))          # cut again before it has recovered
                recovered = "not awaited"
            else:
                t = time.monotonic()
                c.wait_until(lambda: full_isr(c, topic, partitions), timeout=WAIT_S,
                             message=f"full ISRs after {fault}")
                recovered = f"{time.monotonic() - t:.1f}s"
            print(f"round {r}: {fault}; held {hold:.1f}s; full ISRs again: {recovered}; "
                  f"acked {p.acked}")
        c.wait_until(lambda: full_isr(c, topic, partitions), timeout=WAIT_S, message="full ISRs after the storm")
        timer.mark("storm over, full ISRs")
        more_acks(p)
    print(f"faults: {dict(kinds)}")
    finish(c, topic, partitions, checker, timer)
