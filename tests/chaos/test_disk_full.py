"""A log dir filling up under an acks=all idempotent load (issue 24), on a real small tmpfs.

Broker 0's only log dir is a tmpfs; the test fills it to the last page (a ballast file) while
the chaos producer writes to a 3-partition topic that broker 0 leads one partition of and
follows the other two. A full disk is not a failed disk (errors.LogDirFullError):

- produce to the partition broker 0 leads is answered KAFKA_STORAGE_ERROR (56, retriable:
  the idempotent producer retries), with nothing appended, not even part of a batch;
- broker 0 stays registered and its dir online (DescribeLogDirs: no error, ~0 bytes usable);
- as a follower it cannot append what it fetches: the leaders drop it from their ISRs and go
  on with the two others, so the partitions it follows keep acknowledging;
- its ZooKeeper session expiring while the disk is full (second round) does not keep it
  out: it registers again although it cannot record the new session in its log dir;
- once there is space again (the ballast deleted, or the tmpfs grown with
  `mount -o remount,size=`) broker 0 takes produce again, catches up and rejoins every ISR,
  without a restart.

At the end: 0 acknowledged records lost, duplicated or conflicting (tests/chaos/checker.py)
and every partition byte-identical on the three brokers.

Short form: two fills, the second with a session expiry. `--long` (or STROM_LONG_TESTS=1):
5 fills, the third and fourth ended by growing the file system instead of freeing it.
"""
from __future__ import annotations

import time

import pytest

from clients.admin import AdminClient
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from clients.types import TopicPartition
from tests.chaos.checker import ChaosProducer
from tests.chaos.conftest import ZK_SESSION_MS, stop_telling_a_failure
from tests.chaos.test_controller_failover import PARTITIONS, TimedChecker, all_in_sync, create_topic, leaders
from tests.chaos.test_zookeeper_outage import (LeaderChanges, acks_between, expire_session, final_checks,
                                               registered_by_new_session)
from tests.support.cluster import Cluster
from tests.support.tmpfs import Tmpfs
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "disk-full"
VICTIM = 0                  # the broker whose log dir fills up
DISK_BYTES = 16 << 20
RATE = 2000


@pytest.fixture
def full_disk_cluster(tmp_path, request):
    c = Cluster(tmp_path / "cluster", brokers=3, zookeeper_session_timeout_ms=ZK_SESSION_MS)
    disk = Tmpfs(c.broker(VICTIM).log_dir, size=DISK_BYTES).mount()
    try:
        c.start()
        yield c, disk
    finally:
        try:
            stop_telling_a_failure(c, request)
        finally:
            disk.unmount()


class Probe:
    """acks=1 produce of one record straight to broker i (no client retries hide the error);
    what it gets acknowledged goes to the checker like the producer's records."""

    def __init__(self, cluster: Cluster, checker: TimedChecker):
        self.cluster = cluster
        self.checker = checker
        self.sent = 0

    def __call__(self, i: int, partition: int) -> int:
        value = f"probe-{self.sent}".encode()
        self.sent += 1
        with WireClient("127.0.0.1", self.cluster.broker(i).port) as c:
            r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": partition,
                                                    "records": build_batch([Record(None, value)])}]}]})
        answer = r.responses[0].partition_responses[0]
        if answer.error_code == 0:
            self.checker.record_acked(partition, answer.base_offset, None, value)
        return answer.error_code


def victim_dir(admin: AdminClient, cluster: Cluster):
    return admin.describe_log_dirs([VICTIM])[VICTIM][str(cluster.broker(VICTIM).log_dir)]


def victim_leads(admin: AdminClient, cluster: Cluster) -> list[int]:
    """The partitions broker VICTIM leads, after a preferred leader election if it leads
    none (a session expiry may have moved its leadership away)."""
    def led() -> list[int]:
        return [p for p, b in leaders(cluster, TOPIC).items() if b == VICTIM]
    if not led():
        admin.elect_leaders("preferred", [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        cluster.wait_until(led, timeout=30, message=f"broker {VICTIM} leading again")
    return led()


def test_a_full_log_dir_refuses_writes_loses_nothing_and_serves_again_with_space(full_disk_cluster, long_run):
    cluster, disk = full_disk_cluster
    rounds = 5 if long_run else 2
    create_topic(cluster, TOPIC)
    changes = LeaderChanges(cluster, TOPIC)
    checker = TimedChecker()
    produce_code = Probe(cluster, checker)
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin, \
            ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, rate=RATE, keys=48,
                          config={"log_level": 0}) as producer:
        for r in range(rounds):
            producer.wait_acked(producer.acked + 1000, timeout=60)
            led = victim_leads(admin, cluster)
            followed = [p for p in range(PARTITIONS) if p not in led]
            assert followed, f"broker {VICTIM} leads every partition: {leaders(cluster, TOPIC)}"
            t0 = time.monotonic()
            disk.fill()
            # The page the active segment ends in may still take a batch or two.
            codes: list[int] = []
            cluster.wait_until(lambda: codes.append(produce_code(VICTIM, led[0])) or
                               codes[-1] == Code.KAFKA_STORAGE_ERROR, timeout=15,
                               message=f"KAFKA_STORAGE_ERROR from broker {VICTIM} (codes {codes[-5:]})")
            t_refused = time.monotonic() - t0
            cluster.wait_until(lambda: all(VICTIM not in cluster.isr(TOPIC, p) for p in followed), timeout=30,
                               message=f"broker {VICTIM} out of the ISRs it cannot append to")
            t_shrunk = time.monotonic() - t0
            # The others go on without it; the full broker stays registered and online.
            t_others = time.monotonic()
            cluster.wait_until(lambda: all(acks_between(checker, p, t_others) >= 100 for p in followed), timeout=30,
                               message=f"acks on {followed} without broker {VICTIM}")
            acks_elsewhere = {p: acks_between(checker, p, t_others) for p in followed}
            described = victim_dir(admin, cluster)
            assert described.error is None, f"the full dir went offline: {described}"
            assert VICTIM in cluster.broker_ids()
            assert described.usable_bytes is not None and described.usable_bytes < 64 << 10
            assert cluster.leader(TOPIC, led[0]) == VICTIM

            expire = r == 1
            if expire:
                # A new ZooKeeper session while the disk is full: the broker cannot record it
                # in its log dir, and must register all the same. (Once: the record stays
                # stale afterwards, and the test finds the session to end in it.)
                old_sid = expire_session(cluster, VICTIM)
                cluster.wait_until(lambda: registered_by_new_session(cluster, VICTIM, old_sid), timeout=30,
                                   message=f"broker {VICTIM} registered again while its disk is full")
                assert "cannot record ZooKeeper session" in cluster.output(VICTIM)
            grow = r % 4 >= 2
            t1 = time.monotonic()
            if grow:
                disk.resize(disk.size + (8 << 20))
            else:
                disk.free()
            # Taking produce again: as the leader it still is, or (after the expiry moved its
            # leadership away) as a follower back in every ISR, then as the leader again.
            if not expire:
                cluster.wait_until(lambda: produce_code(VICTIM, led[0]) == 0, timeout=15,
                                   message=f"broker {VICTIM} taking produce again")
            t_serving = time.monotonic() - t1
            cluster.wait_until(lambda: all_in_sync(cluster, TOPIC), timeout=60,
                               message=f"broker {VICTIM} back in every ISR")
            t_in_sync = time.monotonic() - t1
            if expire:
                led = victim_leads(admin, cluster)
                assert produce_code(VICTIM, led[0]) == 0
            producer.wait_acked(producer.acked + 500, timeout=30)
            print(f"round {r}: disk of broker {VICTIM} full: KAFKA_STORAGE_ERROR after {t_refused:.2f} s, out "
                  f"of the ISRs of {followed} after {t_shrunk:.2f} s; acks meanwhile on {acks_elsewhere}; dir "
                  f"online with {described.usable_bytes} bytes usable"
                  f"{'; its ZooKeeper session expired and it registered again' if expire else ''}. Space again "
                  f"by {'growing the tmpfs' if grow else 'freeing the ballast'}: "
                  f"{'' if expire else f'produce taken after {t_serving:.2f} s, '}every ISR full after "
                  f"{t_in_sync:.2f} s")
    print(f"{produce_code.sent} probes")
    final_checks(cluster, TOPIC, checker, producer, changes, min_acked=2000 * rounds)
    out = cluster.output(VICTIM)
    assert "writes refused until the disk has space again" in out and "appending again after" in out
    assert "is offline" not in out
    # A producer's next in-flight batch gets the storage error too, not a sequence gap that
    # makes the idempotent producer bump its epoch over and over while the disk is full.
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" not in out
