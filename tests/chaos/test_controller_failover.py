"""Invariants 3 and 4 under loss of the CONTROLLER broker.

1. kill -9 of the controller (repeatedly, each time restarted) while a producer writes with
   acks=all (idempotence on) to a topic whose leaders are spread over the brokers: the
   partitions the controller led need a new leader (elected by the NEW controller, after
   the ZooKeeper session of the old one expired), the others only lose a follower (their
   leaders shrink the ISR themselves). No acknowledged record is lost, and once every broker
   is back in every ISR all three replicas of every partition are byte-identical.
2. After the controller dies, a new one is elected at a HIGHER controller epoch, and a
   broker that heard from it refuses LeaderAndIsr / UpdateMetadata carrying the old epoch
   (STALE_CONTROLLER_EPOCH) without changing its leadership or its metadata.

Short form: 2 rounds. `--long` (or STROM_LONG_TESTS=1): 10 rounds.
"""
from __future__ import annotations

import bisect
import random
import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_S
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_S = ZK_SESSION_S      # the clusters' ZooKeeper session timeout (conftest)
PARTITIONS = 3


# ---- helpers ------------------------------------------------------------------------------------


def create_topic(cluster, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    for p in range(partitions):
        cluster.wait_for_leader(topic, p)
    cluster.wait_until(lambda: all(sorted(cluster.isr(topic, p)) == [0, 1, 2] for p in range(partitions)),
                       timeout=30, message="full ISRs after topic creation")


def leaders(cluster, topic: str, partitions: int = PARTITIONS) -> dict[int, int | None]:
    return {p: cluster.leader(topic, p) for p in range(partitions)}


def all_in_sync(cluster, topic: str, partitions: int = PARTITIONS) -> bool:
    return all(sorted(cluster.isr(topic, p)) == [0, 1, 2] and cluster.leader(topic, p) is not None
               for p in range(partitions))


def log_bytes(cluster, i: int, topic: str, partition: int) -> bytes:
    d = cluster.broker(i).log_dir / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def replicas_identical(cluster, topic: str, partitions: int = PARTITIONS) -> bool:
    for p in range(partitions):
        logs = [log_bytes(cluster, i, topic, p) for i in range(3)]
        if not (logs[0] == logs[1] == logs[2] and len(logs[0]) > 0):
            return False
    return True


def replica_sizes(cluster, topic: str, partitions: int = PARTITIONS) -> dict[int, list[int]]:
    return {p: [len(log_bytes(cluster, i, topic, p)) for i in range(3)] for p in range(partitions)}


def wait_identical(cluster, topic: str) -> None:
    """Until every partition's replicas are byte-identical (60 s at most); prints their sizes
    and how long that took."""
    t0 = time.monotonic()
    try:
        cluster.wait_until(lambda: replicas_identical(cluster, topic), timeout=60,
                           message="byte-identical replicas")
    finally:
        print(f"replica log sizes {replica_sizes(cluster, topic)} "
              f"(identical after {time.monotonic() - t0:.2f} s)")


class TimedChecker(Checker):
    """A Checker that also remembers when each partition acknowledged something, so that a
    round can report how long each partition stalled."""

    def __init__(self) -> None:
        super().__init__()
        self._times: dict[int, list[float]] = defaultdict(list)
        self._tlock = threading.Lock()

    def record_acked(self, partition, offset, key, value) -> None:
        super().record_acked(partition, offset, key, value)
        with self._tlock:
            self._times[partition].append(time.monotonic())

    def longest_stall(self, partition: int, start: float, end: float) -> float:
        """The longest time in [start, end] without an acknowledgement on `partition`."""
        with self._tlock:
            ts = self._times.get(partition, [])
            lo = bisect.bisect_left(ts, start)
            hi = bisect.bisect_right(ts, end)
            inside = ts[lo:hi]
        points = [start, *inside, end]
        return max(b - a for a, b in zip(points, points[1:]))


# ---- 1. kill -9 of the controller under acks=all ----------------------------------------------


def test_controller_kill9_loses_no_acked_record(cluster, long_run):
    rounds = 10 if long_run else 2
    rng = random.Random(11)
    topic = "ctl-chaos"
    create_topic(cluster, topic)
    checker = TimedChecker()
    epochs = [cluster.controller_epoch()]
    led_by_controller_total = 0
    led_by_others_total = 0
    elections: list[float] = []
    stalls_ctl: list[float] = []
    stalls_other: list[float] = []
    with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=3000, keys=48,
                       config={"log_level": 0}) as producer:
        for r in range(rounds):
            producer.wait_acked(producer.acked + 1500, timeout=60)
            time.sleep(rng.uniform(0.2, 1.0))
            ctl = cluster.controller_id()
            assert ctl is not None
            before = leaders(cluster, topic)
            on_ctl = [p for p, b in before.items() if b == ctl]
            elsewhere = [p for p, b in before.items() if b != ctl]
            led_by_controller_total += len(on_ctl)
            led_by_others_total += len(elsewhere)
            if r == 0:
                # Both paths in the first round at least: a partition that loses its leader
                # together with the controller, and one that only loses a follower.
                assert on_ctl and elsewhere, f"leaders {before}, controller {ctl}"

            t_kill = time.monotonic()
            cluster.kill9(ctl)
            new_ctl = cluster.wait_for_controller(timeout=SESSION_S + 20, other_than=ctl)
            t_elected = time.monotonic() - t_kill
            epoch = cluster.controller_epoch()
            assert epoch is not None and epoch > epochs[-1], f"controller epoch {epochs[-1]} -> {epoch}"
            epochs.append(epoch)
            for p in on_ctl:
                cluster.wait_for_leader(topic, p, timeout=30, other_than=ctl)
            t_led = time.monotonic() - t_kill
            # Every partition takes acks=all writes again (the ones that lost a follower had
            # to shrink their ISR to the two live replicas; the others needed an election).
            acked_now = producer.acked
            producer.wait_acked(acked_now + 300, timeout=30)
            t_resumed = time.monotonic()
            for p in range(PARTITIONS):
                stall = checker.longest_stall(p, t_kill, t_resumed)
                (stalls_ctl if p in on_ctl else stalls_other).append(stall)

            cluster.wait_for_broker_gone(ctl, timeout=30)
            time.sleep(rng.uniform(0.2, 1.5))
            cluster.restart(ctl)
            cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60,
                               message=f"all ISRs full after restarting {ctl}")
            elections.append(t_elected)
            print(f"round {r}: killed controller {ctl} (led partitions {on_ctl}, others led {elsewhere}); "
                  f"new controller {new_ctl} at epoch {epoch} after {t_elected:.2f} s, leaders moved after "
                  f"{t_led:.2f} s; longest ack stall per partition "
                  f"{ {p: round(checker.longest_stall(p, t_kill, t_resumed), 2) for p in range(PARTITIONS)} }; "
                  f"acked so far {checker.acked_count}")
    print(f"producer: {producer.sent} sent, {producer.acked} acked, {producer.failed} failed "
          f"{dict(producer.errors)}")
    read = read_back(cluster.bootstrap, topic, PARTITIONS, checker, config={"log_level": 0})
    report = checker.report()
    print(report)
    print(f"read back per partition {read}; controller epochs {epochs}; partitions led by the killed "
          f"controller {led_by_controller_total}, by others {led_by_others_total}; new controller after "
          f"{min(elections):.2f}-{max(elections):.2f} s; ack stalls: controller-led "
          f"{max(stalls_ctl):.2f} s max, others {max(stalls_other) if stalls_other else 0:.2f} s max")
    report.assert_ok(min_acked=1000)
    wait_identical(cluster, topic)
    assert led_by_others_total > 0 and led_by_controller_total > 0


# ---- 2. a new controller epoch fences the old one -----------------------------------------------


def wire(cluster, i: int) -> WireClient:
    return WireClient("127.0.0.1", cluster.broker(i).port)


def broker_metadata(cluster, i: int, topic: str):
    """The broker's own view (its metadata cache, fed by UpdateMetadata): (controller id,
    {partition: (leader, leader epoch, isr)}, topic id)."""
    with wire(cluster, i) as c:
        r = c.request("Metadata", 10, {"topics": [{"topic_id": None, "name": topic}],
                                       "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    t = next(t for t in r.topics if t.name == topic)
    parts = {p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes)) for p in t.partitions}
    return r.controller_id, parts, t.topic_id


def produce_acks1(cluster, i: int, topic: str, partition: int, value: bytes) -> int:
    with wire(cluster, i) as c:
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition,
                                                "records": build_batch([Record(None, value)])}]}]})
    return r.responses[0].partition_responses[0].error_code


def test_new_controller_epoch_fences_the_old(cluster):
    topic = "ctl-epoch"
    create_topic(cluster, topic)
    old_ctl = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    assert old_ctl is not None and old_epoch is not None

    t0 = time.monotonic()
    cluster.kill9(old_ctl)
    new_ctl = cluster.wait_for_controller(timeout=SESSION_S + 20, other_than=old_ctl)
    t_elected = time.monotonic() - t0
    new_epoch = cluster.controller_epoch()
    print(f"controller {old_ctl} (epoch {old_epoch}) killed; broker {new_ctl} elected at epoch "
          f"{new_epoch} after {t_elected:.2f} s")
    assert new_epoch is not None and new_epoch > old_epoch
    for p in range(PARTITIONS):
        cluster.wait_for_leader(topic, p, timeout=30, other_than=old_ctl)
    live = [i for i in range(3) if i != old_ctl]

    # Each live broker must have heard from the new controller (its metadata names it and
    # agrees with ZooKeeper) before it can tell an old epoch from the new one.
    def heard_new_controller(i: int):
        ctl_id, parts, tid = broker_metadata(cluster, i, topic)
        zk = leaders(cluster, topic)
        ok = ctl_id == new_ctl and all(parts.get(p, (None,))[0] == zk[p] for p in range(PARTITIONS))
        return (parts, tid) if ok else None

    views = {i: cluster.wait_until(lambda i=i: heard_new_controller(i), timeout=30,
                                   message=f"broker {i} has the new controller's metadata") for i in live}

    for target in live:
        parts, topic_id = views[target]
        led = [p for p, (leader, _, _) in parts.items() if leader == target]
        followed = [p for p, (leader, _, _) in parts.items() if leader != target]
        zk_before = {p: cluster.partition_state(topic, p) for p in range(PARTITIONS)}
        other = next(i for i in live if i != target)
        # What a zombie controller of the old epoch might say: every partition moves (to the
        # other live broker, or to this one), at a much higher leader epoch and zk version.
        forged = []
        for p in range(PARTITIONS):
            leader = other if parts[p][0] == target else target
            forged.append({"partition_index": p, "controller_epoch": old_epoch, "leader": leader,
                           "leader_epoch": parts[p][1] + 100, "isr": [leader], "zk_version": 10_000,
                           "replicas": [0, 1, 2], "adding_replicas": [], "removing_replicas": [],
                           "is_new": False, "leader_recovery_state": 0})
        endpoints = {i: {"port": cluster.broker(i).port, "host": "127.0.0.1", "listener": "PLAINTEXT",
                         "security_protocol": 0} for i in range(3)}
        with wire(cluster, target) as c:
            r = c.request("LeaderAndIsr", 6, {
                "controller_id": old_ctl, "controller_epoch": old_epoch, "broker_epoch": -1, "type": 0,
                "topic_states": [{"topic_name": topic, "topic_id": topic_id, "partition_states": forged}],
                "live_leaders": [{"broker_id": i, "host_name": "127.0.0.1", "port": cluster.broker(i).port}
                                 for i in live]})
            lai_code = r.error_code
            lai_partition_codes = sorted({e.error_code for t in r.topics for e in t.partition_errors})
            r = c.request("UpdateMetadata", 7, {
                "controller_id": old_ctl, "controller_epoch": old_epoch, "broker_epoch": -1,
                "live_brokers": [{"id": i, "endpoints": [endpoints[i]], "rack": None} for i in range(3)],
                "topic_states": [{"topic_name": topic, "topic_id": topic_id, "partition_states": [
                    {k: v for k, v in s.items() if k not in ("adding_replicas", "removing_replicas", "is_new",
                                                              "leader_recovery_state")} | {"offline_replicas": []}
                    for s in forged]}]})
            um_code = r.error_code
            # A control: the current epoch is accepted (an empty request changes nothing).
            r = c.request("UpdateMetadata", 7, {
                "controller_id": new_ctl, "controller_epoch": new_epoch, "broker_epoch": -1,
                "live_brokers": [{"id": i, "endpoints": [endpoints[i]], "rack": None} for i in live],
                "topic_states": []})
            current_code = r.error_code
        print(f"broker {target} (leads {led}, follows {followed}): old-epoch LeaderAndIsr -> {lai_code} "
              f"(partitions {lai_partition_codes}), UpdateMetadata -> {um_code}; current epoch -> {current_code}")
        assert lai_code == Code.STALE_CONTROLLER_EPOCH
        assert lai_partition_codes in ([], [Code.STALE_CONTROLLER_EPOCH])
        assert um_code == Code.STALE_CONTROLLER_EPOCH
        assert current_code == 0

        # Nothing changed: the broker's metadata, ZooKeeper's state, and who takes writes.
        ctl_id, parts_after, _ = broker_metadata(cluster, target, topic)
        assert ctl_id == new_ctl
        assert {p: v[:2] for p, v in parts_after.items()} == {p: v[:2] for p, v in parts.items()}, \
            f"broker {target} metadata changed: {parts} -> {parts_after}"
        assert {p: cluster.partition_state(topic, p) for p in range(PARTITIONS)} == zk_before
        for p in led:
            assert produce_acks1(cluster, target, topic, p, b"still-leader") == 0, \
                f"broker {target} no longer leads {topic}-{p}"
        for p in followed:
            assert produce_acks1(cluster, target, topic, p, b"still-follower") == \
                Code.NOT_LEADER_OR_FOLLOWER, f"broker {target} took the lead of {topic}-{p}"

    # The fenced broker still replicates with the real leaders: restart the old controller
    # and the ISRs fill up again.
    cluster.wait_for_broker_gone(old_ctl, timeout=30)
    cluster.restart(old_ctl)
    cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60, message="all ISRs full again")
    assert cluster.controller_id() == new_ctl
    assert cluster.controller_epoch() == new_epoch


# ---- 3. a frozen controller comes back as a zombie -----------------------------------------------


def test_paused_controller_is_fenced(cluster):
    """SIGSTOP of the controller (which also leads a partition) past the ZooKeeper session
    timeout: a new controller is elected at a higher epoch and moves the leadership away;
    after SIGCONT the old one (a zombie controller and a zombie leader, with requests from
    producers still sitting in its sockets) must stand down without changing anything: the
    controller and its epoch stay, no acknowledged record is lost, replicas end identical."""
    topic = "ctl-zombie"
    create_topic(cluster, topic)
    checker = TimedChecker()
    with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=3000, keys=48,
                       config={"log_level": 0, "message.timeout.ms": 120000}) as producer:
        producer.wait_acked(3000, timeout=60)
        ctl = cluster.controller_id()
        epoch = cluster.controller_epoch()
        assert ctl is not None and epoch is not None
        on_ctl = [p for p, b in leaders(cluster, topic).items() if b == ctl]
        assert on_ctl, "the controller leads no partition"
        t0 = time.monotonic()
        cluster.sigstop(ctl)
        try:
            new_ctl = cluster.wait_for_controller(timeout=SESSION_S + 20, other_than=ctl)
            t_elected = time.monotonic() - t0
            for p in on_ctl:
                cluster.wait_for_leader(topic, p, timeout=30, other_than=ctl)
            producer.wait_acked(producer.acked + 1000, timeout=30)      # without the frozen broker
            acked_at_resume = producer.acked
        finally:
            cluster.sigcont(ctl)
        t_paused = time.monotonic() - t0
        new_epoch = cluster.controller_epoch()
        cluster.wait_until(lambda: ctl in cluster.broker_ids(), timeout=30, message=f"broker {ctl} registered again")
        cluster.wait_until(lambda: all_in_sync(cluster, topic), timeout=60, message="all ISRs full again")
        t_back = time.monotonic() - t0 - t_paused
        producer.wait_acked(producer.acked + 1000, timeout=30)
        print(f"controller {ctl} (epoch {epoch}, leading {on_ctl}) frozen for {t_paused:.2f} s: broker {new_ctl} "
              f"controller at epoch {new_epoch} after {t_elected:.2f} s; {acked_at_resume} acked at SIGCONT; "
              f"all ISRs full {t_back:.2f} s after SIGCONT; controller now {cluster.controller_id()} at epoch "
              f"{cluster.controller_epoch()}")
        assert new_epoch is not None and new_epoch > epoch
        assert cluster.controller_id() == new_ctl and cluster.controller_epoch() == new_epoch
        assert f"resigning at epoch {epoch}" in cluster.output(ctl), "the zombie controller never stood down"
    print(f"producer: {producer.sent} sent, {producer.acked} acked, {producer.failed} failed {dict(producer.errors)}")
    read_back(cluster.bootstrap, topic, PARTITIONS, checker, config={"log_level": 0})
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=1000)
    wait_identical(cluster, topic)
