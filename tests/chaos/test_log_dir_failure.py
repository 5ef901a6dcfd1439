"""A log dir that fails under a running broker (KIP-112): 3 brokers with 2 log dirs each, an
idempotent acks=all producer feeding the chaos checker, and one dir of a leader made to fail.

The failure is real, not simulated: the dir is a small tmpfs mounted for the test, and it
turns read-only under the broker as a disk does when its file system meets errors (ext4's
errors=remount-ro): an empty read-only tmpfs is mounted over it, so the broker's next file
created or renamed there (its periodic checkpoints, a segment roll) gets EROFS from the
kernel. (A full disk is not a failed one: strom answers KAFKA_STORAGE_ERROR and goes on once
there is space, tests/chaos/test_disk_full.py.) Tests run as root here, so permissions cannot
make a dir fail; a tmpfs needs root to mount (skipped otherwise).

What the broker does alone (always tested): the dir goes offline (DescribeLogDirs answers
KAFKA_STORAGE_ERROR for it), produce to its partitions answers KAFKA_STORAGE_ERROR, the other
dir keeps serving (acks=all produce to a partition led there succeeds), and the broker
announces the failure in /log_dir_event_notification. What needs the controller (tested when
it handles those notifications): the failed dir's partitions get leaders on other brokers,
and the checker counts 0 lost and 0 duplicated acknowledged records.

Short form: about 3 s of load after the failure. `--long`: 20 s.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient as CkAdmin, NewTopic

from clients.admin import AdminClient
from clients.aio.log_dir_types import TopicPartitionReplica
from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.chaos.conftest import ZK_SESSION_MS, stop_telling_a_failure
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TOPIC = "dirfail"
PARTITIONS = 6
TMPFS_BYTES = 64 << 20
RATE = 2000             # records/s: enough load, and a read-back of seconds


class Tmpfs:
    """A small tmpfs mounted at `path` (root only); `fail()` turns it read-only under the
    processes using it."""

    def __init__(self, path: Path, size: int = TMPFS_BYTES):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs to fail a log dir on (needs root): {done.stderr.strip()}")

    def fail(self) -> None:
        """An empty read-only tmpfs over the dir: files open already keep writing to the
        hidden one, anything opened, created or renamed by path fails with EROFS."""
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(self.path)],
                       check=True, capture_output=True)
        self.mounts = 2

    def unmount(self) -> None:
        for _ in range(getattr(self, "mounts", 1)):
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


class DirFailureCluster:
    """Three brokers, each with log dirs <broker>/disk-ok and <broker>/disk-tmpfs (a tmpfs)."""

    def __init__(self, workdir: Path):
        self.disks: dict[int, tuple[str, str]] = {}
        self.tmpfs: list[Tmpfs] = []
        overrides = {}
        for i in range(3):
            ok, failing = workdir / f"disks-{i}" / "disk-ok", workdir / f"disks-{i}" / "disk-tmpfs"
            ok.mkdir(parents=True, exist_ok=True)
            self.tmpfs.append(Tmpfs(failing))
            self.disks[i] = (str(ok), str(failing))
            # The periodic checkpoint (60 s by default) is what meets a read-only dir first.
            overrides[i] = {"log.dirs": f"{ok},{failing}", "log.flush.offset.checkpoint.interval.ms": "500"}
        self.cluster = Cluster(workdir / "cluster", brokers=3, zookeeper_session_timeout_ms=ZK_SESSION_MS,
                               broker_overrides=overrides)

    def close(self, request) -> None:
        try:
            stop_telling_a_failure(self.cluster, request)
        finally:
            for t in self.tmpfs:
                t.unmount()


@pytest.fixture
def dir_cluster(tmp_path, request):
    setup = DirFailureCluster(tmp_path)
    try:
        setup.cluster.start()
        yield setup
    finally:
        setup.close(request)


def where(dir_cluster: DirFailureCluster, broker: int, partition: int) -> str | None:
    for d in dir_cluster.disks[broker]:
        if os.path.isdir(os.path.join(d, f"{TOPIC}-{partition}")):
            return d
    return None


def prepare(dir_cluster: DirFailureCluster, admin: AdminClient) -> tuple[int, list[int], list[int]]:
    """Create the topic; pick the victim (leader of partition 0) and place its led partitions
    half in its tmpfs dir, half in its other dir (AlterReplicaLogDirs). Returns (victim,
    partitions it leads in the dir that will fail, partitions it leads in the other)."""
    cluster = dir_cluster.cluster
    ck = CkAdmin({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    ck.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    for p in range(PARTITIONS):
        cluster.wait_for_leader(TOPIC, p)
    victim = cluster.leader(TOPIC, 0)
    assert victim is not None
    led = [p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == victim]
    assert len(led) >= 2, led
    ok, failing = dir_cluster.disks[victim]
    doomed, spared = led[::2], led[1::2]
    moves = {TopicPartitionReplica(TOPIC, p, victim): failing for p in doomed}
    moves.update({TopicPartitionReplica(TOPIC, p, victim): ok for p in spared})
    assert all(e is None for e in admin.alter_replica_log_dirs(moves).values())
    cluster.wait_until(lambda: all(where(dir_cluster, victim, p) == failing for p in doomed)
                       and all(where(dir_cluster, victim, p) == ok for p in spared), timeout=30)
    return victim, doomed, spared


def acks_all_produce(bootstrap: str, partition: int, timeout: float = 10.0) -> str | None:
    """One acks=all record to `partition`: None when acknowledged, else the error's name."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0,
                  "message.timeout.ms": int(timeout * 1000), "retries": 0})
    out: list = []
    p.produce(TOPIC, b"probe", partition=partition, on_delivery=lambda err, msg: out.append(err))
    p.flush(timeout + 5)
    return None if out and out[0] is None else (out[0].name() if out and out[0] else "no answer")


def fail_dir(dir_cluster: DirFailureCluster, admin: AdminClient, victim: int, doomed: list[int]) -> float:
    """Fail the victim's tmpfs under load and wait until its broker reports the dir offline;
    returns the seconds from the failure to the report."""
    dir_cluster.tmpfs[victim].fail()
    t0 = time.monotonic()
    failing = dir_cluster.disks[victim][1]

    def offline() -> bool:
        d = admin.describe_log_dirs([victim])[victim][failing]
        return d.error is not None and d.error.code == 56
    dir_cluster.cluster.wait_until(offline, timeout=30)
    return time.monotonic() - t0


class PartitionsChecker(Checker):
    """A checker of some partitions only: acknowledgements from the others are not counted
    (without the controller's part, the failed dir's partitions cannot be read back)."""

    def __init__(self, partitions: set[int]):
        super().__init__()
        self.partitions = partitions

    def record_acked(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        if partition in self.partitions:
            super().record_acked(partition, offset, key, value)


def test_a_failed_log_dir_goes_offline_and_the_broker_keeps_serving_its_other_dir(dir_cluster, long_run):
    cluster = dir_cluster.cluster
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        victim, doomed, spared = prepare(dir_cluster, admin)
        checker = PartitionsChecker({p for p in range(PARTITIONS) if p not in doomed})
        # Records to the failed dir's partitions wait for a leader that, without the
        # controller, never comes: they fail after 5 s instead of holding the final flush.
        with ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, keys=None, rate=RATE,
                           config={"log_level": 0, "message.timeout.ms": 5000}) as producer:
            producer.wait_acked(500, timeout=60)
            took = fail_dir(dir_cluster, admin, victim, doomed)
            print(f"\nbroker {victim}: log dir {dir_cluster.disks[victim][1]} reported offline {took:.2f} s "
                  f"after it turned read-only; partitions there: {doomed}")
            described = admin.describe_log_dirs([victim])[victim]
            assert described[dir_cluster.disks[victim][0]].error is None
            assert not any(tp.partition in doomed and tp.topic == TOPIC
                           for tp in described[dir_cluster.disks[victim][0]].replicas)
            # The other dir keeps serving: acks=all to a partition the victim leads there.
            for p in spared:
                assert cluster.leader(TOPIC, p) == victim
                assert acks_all_produce(cluster.bootstrap, p) is None
            acked_before = producer.acked
            time.sleep(20 if long_run else 3)
            assert producer.acked > acked_before            # the load goes on
    # The broker told the controller (the controller deletes what it handled).
    assert "announced a log dir failure" in cluster.output(victim)
    read_back(cluster.bootstrap, TOPIC, [p for p in range(PARTITIONS) if p not in doomed], checker,
              timeout=60)
    report = checker.report()
    print(f"partitions outside the failed dir: {report}")
    report.assert_ok(min_acked=500)


def test_a_failed_log_dir_moves_its_partitions_and_nothing_acknowledged_is_lost(dir_cluster, long_run):
    cluster = dir_cluster.cluster
    checker = Checker()
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        victim, doomed, spared = prepare(dir_cluster, admin)
        with ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, keys=None, rate=RATE,
                           config={"log_level": 0}) as producer:
            producer.wait_acked(500, timeout=60)
            t0 = time.monotonic()
            fail_dir(dir_cluster, admin, victim, doomed)
            cluster.wait_until(lambda: all(cluster.leader(TOPIC, p) not in (None, victim)
                                           and victim not in cluster.isr(TOPIC, p) for p in doomed),
                               timeout=30)
            moved_in = time.monotonic() - t0
            for p in spared:
                assert cluster.leader(TOPIC, p) == victim
            acked_before = producer.acked
            time.sleep(20 if long_run else 3)
            assert producer.acked > acked_before
    read_back(cluster.bootstrap, TOPIC, PARTITIONS, checker, timeout=60)
    report = checker.report()
    print(f"\nlog dir of broker {victim} failed: partitions {doomed} led elsewhere {moved_in:.2f} s "
          f"after the disk turned read-only, {spared} still served by it; {report}")
    report.assert_ok(min_acked=1000)
