"""The sink's exactly-once mode (spark_jobs/source/exactly_once.py) against 3 real brokers
with replication factor 3.

First the two-phase commit step by step, without Spark processes (each task's write and the
driver's commit called directly, so a driver that dies between two commits is exact); then
the real thing: a streaming query's driver killed with SIGKILL mid-batch and restarted, its
output read back by read_committed consumers.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from clients import AdminClient, Consumer, NewTopic
from clients.protocol.errors import BY_NAME
from clients.types import TopicPartition
from spark_jobs.source import exactly_once
from spark_jobs.source.exactly_once import (TaskIds, commit_prepared, committed_before,
                                            transactional_id, write_prepared)
from spark_jobs.source.options import parse_sink_options
from tests.spark.conftest import produce
from tests.spark.driver_kill import batch_ids, kill_when
from tests.spark.sink_job import start_query
from tests.support.cluster import Cluster

JOB = Path(__file__).with_name("sink_job.py")
PARTITIONS = 3
_ENDED = tuple(BY_NAME[n] for n in ("INVALID_TXN_STATE", "PRODUCER_FENCED",
                                     "INVALID_PRODUCER_EPOCH"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("sink-eos") / "c", brokers=3) as c:
        yield c


def new_topic(c: Cluster, partitions: int = PARTITIONS) -> str:
    name = f"eos-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=c.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 3)])
    for p in range(partitions):
        c.wait_for_leader(name, p)
    return name


def read_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value of `topic` a consumer with `isolation` reads, up to the end offsets
    (the last stable offsets for read_committed)."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        ends = admin.list_offsets({tp: "latest" for tp in tps}, isolation)
    got: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign(tps)
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp].offset for tp in tps):
            assert time.monotonic() < deadline, "the consumer did not reach the end offsets"
            got.extend(r.value for r in consumer.poll(0.2))
    return got


def rows(tag: str, n: int = 30) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": [f"{tag}-{i}".encode() for i in range(n)],
                                       "partition": [i % PARTITIONS for i in range(n)]})


def sink_options(c: Cluster, topic: str):
    return parse_sink_options({"kafka.bootstrap.servers": c.bootstrap, "topic": topic,
                               "exactlyOnce": "true", "kafka.linger.ms": "2"})


def run_tasks(opts, query: str, batch: int) -> list:
    return [write_prepared(opts, iter([rows(f"task{p}")]), TaskIds(query, batch, p))
            for p in range(PARTITIONS)]


def want_values() -> list[bytes]:
    return sorted(v for p in range(PARTITIONS) for v in rows(f"task{p}").column(0).to_pylist())


def test_a_rerun_after_the_driver_died_between_two_commits_writes_each_record_once(cluster):
    topic = new_topic(cluster)
    opts = sink_options(cluster, topic)
    query = str(uuid.uuid4())
    first = run_tasks(opts, query, 7)
    assert [m.records for m in first] == [30, 30, 30]
    assert read_values(cluster.bootstrap, topic, "read_committed") == []    # only prepared
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        admin.complete_transaction(first[0].prepared)      # the driver commits task 0 ... dies
        states = admin.describe_transactions(
            [transactional_id(opts.transactional_id_prefix, TaskIds(query, 7, p))
             for p in range(PARTITIONS)])
    assert states[transactional_id(opts.transactional_id_prefix, TaskIds(query, 7, 0))].state in (
        "PrepareCommit", "CompleteCommit")
    assert [s.state for s in states.values()][1:] == ["Ongoing", "Ongoing"]

    rerun = run_tasks(opts, query, 7)                      # Spark runs batch 7 again
    assert rerun[0].prepared is None and rerun[0].records == 0     # committed before: skipped
    assert all(m.prepared is not None and m.records == 30 for m in rerun[1:])
    commit_prepared(opts, rerun, 7)

    committed = read_values(cluster.bootstrap, topic, "read_committed")
    assert sorted(committed) == want_values(), "not each record exactly once"
    everything = read_values(cluster.bootstrap, topic, "read_uncommitted")
    assert len(everything) == 150          # task 1 and 2 of the first run: there, but aborted
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin, pytest.raises(_ENDED):
        admin.complete_transaction(first[1].prepared)       # the dead driver's late commit
    assert sorted(read_values(cluster.bootstrap, topic, "read_committed")) == want_values()


def test_without_the_look_back_a_rerun_duplicates(cluster, monkeypatch):
    """The control: the same crash with the committed-before check switched off writes
    task 0's records twice, so the test above can fail."""
    topic = new_topic(cluster)
    opts = sink_options(cluster, topic)
    query = str(uuid.uuid4())
    first = run_tasks(opts, query, 3)
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        admin.complete_transaction(first[0].prepared)
    monkeypatch.setattr(exactly_once, "committed_before", lambda admin, tid: False)
    commit_prepared(opts, run_tasks(opts, query, 3), 3)
    committed = read_values(cluster.bootstrap, topic, "read_committed")
    assert len(committed) == 120 and len(set(committed)) == 90


class LateCommit:
    """An AdminClient whose first look at a transaction lets the dead driver's commit of it
    land right after (the race `committed_before` must win)."""

    def __init__(self, admin: AdminClient, prepared):
        self.admin, self.prepared, self.looks = admin, prepared, 0

    def describe_transactions(self, ids):
        found = self.admin.describe_transactions(ids)
        self.looks += 1
        if self.looks == 1:
            self.admin.complete_transaction(self.prepared, commit=True)
        return found

    def complete_transaction(self, prepared, commit=True):
        return self.admin.complete_transaction(prepared, commit)


def test_a_commit_landing_between_the_look_and_the_abort_is_seen_as_committed(cluster):
    topic = new_topic(cluster)
    opts = sink_options(cluster, topic)
    ids = TaskIds(str(uuid.uuid4()), 0, 0)
    prepared = write_prepared(opts, iter([rows("late")]), ids).prepared
    tid = transactional_id(opts.transactional_id_prefix, ids)
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        racing = LateCommit(admin, prepared)
        assert committed_before(racing, tid) is True       # type: ignore[arg-type]
        assert racing.looks == 2                           # the abort failed; looked again
    assert sorted(read_values(cluster.bootstrap, topic, "read_committed")) == sorted(
        rows("late").column(0).to_pylist())


# ------------------------------------------------------------------ the driver killed


def _prepared_not_committed(admin: AdminClient, topic: str) -> bool:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    end = admin.list_offsets({tp: "latest" for tp in tps})
    stable = admin.list_offsets({tp: "latest" for tp in tps}, "read_committed")
    return any(end[tp].offset > stable[tp].offset for tp in tps)


def test_killing_the_driver_mid_batch_leaves_each_record_once_in_the_output(
        spark, cluster, tmp_path, long_run):
    """SIGKILL the driver while a micro-batch's transactions are prepared but not committed
    (or, failing to catch that, while the batch is in flight); restart it from the
    checkpoint. Once by default, 4 kills with --long (each restart is a JVM start)."""
    wanted_kills = 4 if long_run else 1
    source, output = new_topic(cluster), new_topic(cluster)
    n = 3000
    produce(cluster.bootstrap, source, [{"value": f"v{i}".encode(), "key": f"k{i}".encode(),
                                         "partition": i % PARTITIONS} for i in range(n)])
    checkpoint = tmp_path / "checkpoint"
    cmd = [sys.executable, str(JOB), cluster.bootstrap, source, output, str(checkpoint),
           "300"]                                                  # 10 micro-batches
    kills: list[tuple[int, int, bool]] = []     # (batch in flight, last committed, prepared)
    t0 = time.monotonic()
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        for attempt in range(wanted_kills):
            committed_at_start = max(batch_ids(checkpoint / "commits"), default=-1)
            in_flight_since: list[float] = []

            def mid_batch() -> tuple[int, bool] | None:
                top = max(batch_ids(checkpoint / "offsets"), default=-1)
                if top < committed_at_start + 2 or top in batch_ids(checkpoint / "commits"):
                    in_flight_since.clear()
                    return None
                in_flight_since[:] = in_flight_since or [time.monotonic()]
                prepared = _prepared_not_committed(admin, output)
                if prepared or time.monotonic() - in_flight_since[0] > 5:
                    return top, prepared
                return None
            found = kill_when(cmd, tmp_path / f"run{attempt}.log", mid_batch)
            if found is not None:
                kills.append((found[0], max(batch_ids(checkpoint / "commits"), default=-1),
                              found[1]))
    assert len(kills) == wanted_kills, (kills, (tmp_path / "run0.log").read_text()[-3000:])
    killed_at = time.monotonic() - t0

    q = start_query(spark, cluster.bootstrap, source, output, str(checkpoint), "300")
    assert q.awaitTermination(240) and q.exception() is None
    replayed = q.recentProgress[0]["batchId"]
    assert replayed == kills[-1][0]              # the batch in flight, from the offset log

    committed = read_values(cluster.bootstrap, output, "read_committed")
    want = sorted(f"V{i}".encode() for i in range(n))
    duplicates = len(committed) - len(set(committed))
    assert sorted(committed) == want, (
        f"{len(committed)} records for {n}: {duplicates} duplicates, "
        f"{len(set(want) - set(committed))} lost")
    everything = read_values(cluster.bootstrap, output, "read_uncommitted")
    print(f"[{time.monotonic() - t0:.1f}s] killed the driver at (batch in flight, last "
          f"committed, transactions prepared) {kills} (after {killed_at:.1f}s); the restart "
          f"replayed batch {replayed}: read_committed {len(committed)} records for {n}, each "
          f"once; read_uncommitted {len(everything)} (the killed runs' aborted writes)")


def test_a_batch_run_again_after_its_commit_is_not_written_twice(spark, cluster, tmp_path):
    """The driver died after its commit() but before Spark wrote the batch to the commit log
    (played by removing commits/0): the restart runs batch 0 again, every task finds its
    transaction committed and writes nothing, and the output holds each record once."""
    source, output = new_topic(cluster), new_topic(cluster)
    n = 300
    produce(cluster.bootstrap, source, [{"value": f"v{i}".encode(), "key": f"k{i}".encode(),
                                         "partition": i % PARTITIONS} for i in range(n)])
    checkpoint = tmp_path / "checkpoint"
    q = start_query(spark, cluster.bootstrap, source, output, str(checkpoint), "1000")
    assert q.awaitTermination(120) and q.exception() is None
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"]] == [0]
    for f in (checkpoint / "commits").iterdir():
        f.unlink()                          # commits/0 and its checksum file
    again = start_query(spark, cluster.bootstrap, source, output, str(checkpoint), "1000")
    assert again.awaitTermination(120) and again.exception() is None
    assert again.recentProgress[0]["batchId"] == 0                  # run again
    committed = read_values(cluster.bootstrap, output, "read_committed")
    assert sorted(committed) == sorted(f"V{i}".encode() for i in range(n))
    assert len(read_values(cluster.bootstrap, output, "read_uncommitted")) == n   # none written
