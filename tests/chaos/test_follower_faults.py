"""Invariant 3 under follower faults (replication factor 3, min.insync.replicas 2, acks=all).

1. A follower frozen with SIGSTOP for longer than replica.lag.time.max.ms drops out of the
   ISR (the leader shrinks it to 2), acks=all writes keep being acknowledged with 2 in sync
   during the pause, and after SIGCONT the follower catches up and rejoins the ISR. Short
   form: a pause just past the ISR shrink (within the ZooKeeper session timeout) and one past
   the session timeout (the follower's session expires, it registers again); `--long`: more
   rounds of both.
2. Two of three brokers down (kill -9 of both followers of the partition): acks=all writes
   are refused (NOT_ENOUGH_REPLICAS once the ISR is the leader alone; before the shrink
   they time out or fail with NOT_ENOUGH_REPLICAS_AFTER_APPEND) and NOTHING is acknowledged
   while they are down; after both restart, writes resume and nothing acknowledged is lost.
   Rounds alternate the controller between a killed follower and the surviving leader
   (short form: one of each; `--long`: two of each).

Every run ends with a read-back through the checker and byte-identical replicas.
"""
from __future__ import annotations

import random
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.chaos.replicas import create_topic, log_bytes, replicas_identical
from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION_S = ZK_SESSION_S      # the cluster's ZooKeeper session timeout (conftest), 3 s
LAG_S = 3.0                   # replica.lag.time.max.ms of the cluster (Cluster's default)
# The paused-follower test's short pause lasts past the ISR shrink (LAG_S to 1.5 * LAG_S
# after the SIGSTOP) and a second more, and must stay inside the follower's ZooKeeper
# session: a 3 s session would expire in every such pause, so that test keeps 6 s ones (each
# round prints whether the follower was still registered at SIGCONT).
PAUSE_SESSION_MS = 6000


def check_identical(cluster, topic: str) -> None:
    t0 = time.monotonic()
    try:
        cluster.wait_until(lambda: replicas_identical(cluster, topic), timeout=60,
                           message="byte-identical replicas")
    finally:
        print(f"replica log sizes {[len(log_bytes(cluster, i, topic)) for i in range(3)]} "
              f"(identical after {time.monotonic() - t0:.2f} s)")

def shrunk_isr(cluster, topic: str) -> list[int] | None:
    isr = cluster.isr(topic, 0)
    return isr if len(isr) == 2 else None


# ---- 1. a follower frozen past replica.lag.time.max.ms ------------------------------------------


@pytest.mark.zk_session_ms(PAUSE_SESSION_MS)
def test_paused_follower_leaves_and_rejoins_isr(cluster, long_run):
    # (extra seconds past the ISR shrink to stay paused): short and long pauses alternate;
    # the long one outlasts the ZooKeeper session.
    pauses = [1.0, 8.0, 1.5, 10.0, 0.5, 12.0] if long_run else [1.0, 8.0]
    topic = "follower-pause"
    create_topic(cluster, topic)
    checker = Checker()
    with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=3000, keys=None,
                       config={"log_level": 0}) as producer:
        for r, extra in enumerate(pauses):
            producer.wait_acked(producer.acked + 1500, timeout=60)
            leader = cluster.leader(topic, 0)
            ctl = cluster.controller_id()
            # A follower that is not also the controller (the test is about replication).
            f = next(i for i in range(3) if i not in (leader, ctl))
            t0 = time.monotonic()
            cluster.sigstop(f)
            try:
                isr = cluster.wait_until(lambda: shrunk_isr(cluster, topic), timeout=LAG_S + 10,
                                         message=f"ISR without paused broker {f}")
                t_shrunk = time.monotonic() - t0
                registered_at_shrink = f in cluster.broker_ids()
                assert sorted(isr) == sorted({0, 1, 2} - {f}), isr
                # The pause goes on; acks=all writes go on with 2 in sync. (Counted after the
                # backlog that the shrink released was acknowledged.)
                time.sleep(0.3)
                acked_at_shrink = producer.acked
                time.sleep(extra - 0.3)
                acked_during = producer.acked - acked_at_shrink
                registered_at_end = f in cluster.broker_ids()
            finally:
                cluster.sigcont(f)
            t_paused = time.monotonic() - t0
            cluster.wait_until(lambda: sorted(cluster.isr(topic, 0)) == [0, 1, 2], timeout=60,
                               message=f"broker {f} back in the ISR")
            t_rejoined = time.monotonic() - t0 - t_paused
            # A follower whose session expired while frozen registers again with a new one.
            cluster.wait_until(lambda: f in cluster.broker_ids(), timeout=30,
                               message=f"broker {f} registered again")
            t_registered = time.monotonic() - t0 - t_paused
            print(f"round {r}: paused follower {f} (leader {leader}, controller {ctl}) for {t_paused:.2f} s; "
                  f"ISR shrank to {sorted(isr)} after {t_shrunk:.2f} s (still registered: {registered_at_shrink}); "
                  f"{acked_during} acked in {extra - 0.3:.1f} s of the pause with 2 in sync; registered at "
                  f"SIGCONT: {registered_at_end}; back in the ISR {t_rejoined:.2f} s and registered "
                  f"{t_registered:.2f} s after SIGCONT; acked so far {producer.acked}")
            assert acked_during > 0, f"no acks=all write acknowledged with 2 in sync in {extra - 0.3:.1f} s"
            assert t_shrunk >= LAG_S - 0.5
            producer.wait_acked(producer.acked + 300, timeout=30)
    print(f"producer: {producer.sent} sent, {producer.acked} acked, {producer.failed} failed "
          f"{dict(producer.errors)}")
    read_back(cluster.bootstrap, topic, 1, checker, config={"log_level": 0})
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=1000)
    check_identical(cluster, topic)


# ---- 2. two of three brokers down -----------------------------------------------------------------


class Probe:
    """A non-idempotent acks=all producer with retries off, so that the broker's refusal
    reaches the delivery report as it is (an idempotent producer would retry it until
    message.timeout.ms and report a timeout)."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                           "retries": 0, "message.timeout.ms": 20000, "request.timeout.ms": 15000,
                           "linger.ms": 0, "log_level": 0, "topic.metadata.refresh.interval.ms": 1000})
        self.errors: Counter[str] = Counter()
        self.acked = 0
        self.n = 0

    def _report(self, err, msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors[err.name()] += 1

    def send(self) -> None:
        self.p.produce(self.topic, value=f"probe-{self.n}".encode(), partition=0, on_delivery=self._report)
        self.n += 1
        self.p.poll(0)

    def poll(self, t: float = 0.0) -> None:
        self.p.poll(t)

    def flush(self, t: float) -> int:
        return self.p.flush(t)


def test_two_brokers_down_refuses_acks_all(cluster, long_run):
    # Rounds alternate where the controller is: on a killed follower (the leader survives
    # alone and has to become controller too) or on the surviving leader. Each round has its
    # own topic, created with its leader where the round wants it.
    rounds = 4 if long_run else 2
    rng = random.Random(5)
    # Past the ISR shrink (LAG_S + up to LAG_S / 2) and past the followers' session expiry
    # (SESSION_S + up to a 500 ms tick), with seconds to spare for a busy machine.
    down_s = max(SESSION_S, LAG_S) + 4.0
    for r in range(rounds):
        ctl = cluster.controller_id()
        assert ctl is not None
        leader = (ctl + 1) % 3 if r % 2 == 0 else ctl
        followers = [i for i in range(3) if i != leader]
        topic = f"two-down-{r}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[leader, *followers]],
                                      config={"min.insync.replicas": "2"})])[topic].result(30)
        cluster.wait_until(lambda: cluster.leader(topic, 0) == leader and
                           sorted(cluster.isr(topic, 0)) == [0, 1, 2], timeout=30, message="topic ready")
        checker = Checker()
        probe = Probe(cluster.bootstrap, topic)
        with ChaosProducer(cluster.bootstrap, topic, checker, idempotence=True, rate=2000, keys=None,
                           config={"log_level": 0, "message.timeout.ms": 120000}) as producer:
            producer.wait_acked(1000, timeout=60)
            probe.send()
            assert probe.flush(15) == 0 and probe.acked > 0, f"probe before the faults: {dict(probe.errors)}"
            probe_errors_before = Counter(probe.errors)
            probe_acked_before = probe.acked
            acked_at_kill = producer.acked
            t0 = time.monotonic()
            for f in followers:
                cluster.kill9(f)
            # Acknowledgements already on their way when the followers died may still arrive
            # (the high watermark passed them before the kill): give them a moment.
            time.sleep(1.0)
            acked_settled = producer.acked
            shrunk_at = None
            next_probe = 0.0
            while time.monotonic() - t0 < down_s:
                if time.monotonic() >= next_probe:
                    probe.send()
                    next_probe = time.monotonic() + 0.1
                probe.poll(0.05)
                if shrunk_at is None and cluster.isr(topic, 0) == [leader]:
                    shrunk_at = time.monotonic() - t0
            acked_down = producer.acked - acked_settled
            probe.flush(20)   # the last probes' verdicts (refused or timed out)
            probe_acked_down = probe.acked - probe_acked_before
            probe_errors = probe.errors - probe_errors_before
            state = cluster.partition_state(topic, 0)
            print(f"round {r}: killed followers {followers} of leader {leader} (controller was {ctl}, now "
                  f"{cluster.controller_id()}); ISR {state['isr']} (leader alone after "
                  f"{shrunk_at if shrunk_at is None else round(shrunk_at, 2)} s); {down_s:.0f} s down: chaos "
                  f"producer acked {acked_down} (plus {acked_settled - acked_at_kill} in-flight acks in the "
                  f"first second), probe acked {probe_acked_down} of {probe.n - 1}, probe errors {dict(probe_errors)}")
            assert acked_down == 0, f"{acked_down} acks=all records acknowledged with 2 of 3 brokers down"
            assert probe_acked_down == 0, f"{probe_acked_down} probes acknowledged with 2 of 3 brokers down"
            assert probe_errors["NOT_ENOUGH_REPLICAS"] > 0, f"no NOT_ENOUGH_REPLICAS: {dict(probe_errors)}"
            assert set(probe_errors) <= {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                                         "REQUEST_TIMED_OUT", "_MSG_TIMED_OUT", "_TIMED_OUT"}, dict(probe_errors)
            assert shrunk_at is not None, "the leader never shrank the ISR to itself"

            for f in followers:
                cluster.wait_for_broker_gone(f, timeout=30)
            order = followers if rng.random() < 0.5 else followers[::-1]
            t_restart = time.monotonic()
            for f in order:
                cluster.restart(f)
            acked_restart = producer.acked
            producer.wait_acked(acked_restart + 500, timeout=60)
            t_resumed = time.monotonic() - t_restart
            cluster.wait_until(lambda: sorted(cluster.isr(topic, 0)) == [0, 1, 2], timeout=60,
                               message="full ISR after the restarts")
            t_full = time.monotonic() - t_restart
            probe.send()
            assert probe.flush(15) == 0
            print(f"round {r}: restarted {order}: acks=all acknowledged again after {t_resumed:.2f} s, "
                  f"ISR full after {t_full:.2f} s")
        print(f"round {r}: producer {producer.sent} sent, {producer.acked} acked, {producer.failed} failed "
              f"{dict(producer.errors)}; probe: {probe.n} sent, {probe.acked} acked, errors {dict(probe.errors)}")
        read_back(cluster.bootstrap, topic, 1, checker, config={"log_level": 0})
        report = checker.report()
        print(f"round {r}: {report}")
        report.assert_ok(min_acked=1000)
        check_identical(cluster, topic)
