"""spark.readStream.format("strom"): admission control (maxOffsetsPerTrigger split by lag,
minOffsetsPerTrigger), Trigger.AvailableNow in limited batches, new partitions and topics,
and exactly-once into parquet across SIGKILLs of the driver mid-batch."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from clients import AdminClient
from clients.types import TopicPartition
from spark_jobs.source.planning import rate_limit
from tests.spark.conftest import create_topic, produce
from tests.spark.driver_kill import batch_ids, kill_when
from tests.spark.stream_job import start_query

JOB = Path(__file__).with_name("stream_job.py")


def stream(spark, bootstrap: str, **options):
    reader = spark.readStream.format("strom").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def fill(bootstrap: str, topic: str, per_partition: int, partitions: int = 3, tag: str = "r"):
    produce(bootstrap, topic, [{"value": f"{tag}-{p}-{i}".encode(), "partition": p}
                               for i in range(per_partition) for p in range(partitions)])


def batch_sizes(q) -> list[int]:
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_rate_limit_splits_by_lag_and_never_starves_a_partition():
    a, b, c = (TopicPartition("t", i) for i in range(3))
    start = {a: 0, b: 100, c: 5}
    latest = {a: 600, b: 400, c: 6}                # lags 600, 300, 1
    end = rate_limit(90, start, latest)
    assert end == {a: 0 + 59, b: 100 + 29, c: 6}    # floor(90*600/901), floor(90*300/901), ceil(<1)
    assert rate_limit(10_000, start, latest) == latest
    assert rate_limit(5, {a: 7}, {a: 7}) == {a: 7}


def test_max_offsets_per_trigger_makes_micro_batches_of_the_expected_size(spark, spark_broker):
    topic = "stream-limited"
    create_topic(spark_broker.bootstrap, topic, 3)
    fill(spark_broker.bootstrap, topic, 300)           # 900 records, lag 300 per partition
    q = (stream(spark, spark_broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="240")
         .writeStream.format("memory").queryName("limited").start())
    try:
        q.processAllAvailable()
        sizes = batch_sizes(q)
        # 80 per partition per batch while every partition has 300 waiting, then the rest
        assert sizes == [240, 240, 240, 180], sizes
        print("maxOffsetsPerTrigger=240, 900 records: micro-batches of", sizes)

        fill(spark_broker.bootstrap, topic, 10, tag="more")
        q.processAllAvailable()
        assert batch_sizes(q)[-1] == 30
        rows = spark.sql("SELECT partition, offset FROM limited").collect()
        assert len(rows) == 930 and len({(r.partition, r.offset) for r in rows}) == 930
    finally:
        q.stop()


def test_min_offsets_per_trigger_waits_for_enough_records(spark, spark_broker):
    topic = "stream-min"
    create_topic(spark_broker.bootstrap, topic, 1)
    q = (stream(spark, spark_broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="50", maxTriggerDelay="1h")
         .writeStream.format("memory").queryName("minrows").trigger(processingTime="200 milliseconds")
         .start())
    try:
        produce(spark_broker.bootstrap, topic, [{"value": b"x"}] * 20)
        time.sleep(2.0)
        assert batch_sizes(q) == []                    # 20 < 50: held back
        produce(spark_broker.bootstrap, topic, [{"value": b"y"}] * 40)
        deadline = time.monotonic() + 30
        while not batch_sizes(q) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert batch_sizes(q) == [60]
    finally:
        q.stop()


def test_available_now_reads_what_was_there_at_start_in_limited_batches(spark, spark_broker):
    topic = "stream-available-now"
    create_topic(spark_broker.bootstrap, topic, 3)
    fill(spark_broker.bootstrap, topic, 100)           # 300 records present at start
    seen: list[int] = []

    def each_batch(df, batch_id):
        seen.append(df.count())
        if batch_id == 0:   # records arriving while the query runs are not part of it
            fill(spark_broker.bootstrap, topic, 50, tag="late")

    q = (stream(spark, spark_broker.bootstrap, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="90")
         .writeStream.foreachBatch(each_batch).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert seen == [90, 90, 90, 30], seen
    print("Trigger.AvailableNow with maxOffsetsPerTrigger=90 over 300 records:", seen)


def test_new_partitions_and_new_topics_are_picked_up_from_earliest(spark, spark_broker):
    create_topic(spark_broker.bootstrap, "grow-a", 2)
    fill(spark_broker.bootstrap, "grow-a", 5, partitions=2)
    q = (stream(spark, spark_broker.bootstrap, subscribePattern="grow-.*",
                startingOffsets="earliest")
         .writeStream.format("memory").queryName("grow").start())
    try:
        q.processAllAvailable()
        with AdminClient(bootstrap_servers=spark_broker.bootstrap) as admin:
            admin.create_partitions({"grow-a": 3})
        produce(spark_broker.bootstrap, "grow-a", [{"value": f"new-{i}".encode(), "partition": 2}
                                                   for i in range(7)])
        create_topic(spark_broker.bootstrap, "grow-b", 1)
        fill(spark_broker.bootstrap, "grow-b", 4, partitions=1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            q.processAllAvailable()
            if spark.sql("SELECT count(*) AS n FROM grow").collect()[0].n >= 21:
                break
            time.sleep(0.2)
        rows = spark.sql("SELECT topic, partition, offset FROM grow").collect()
        got = sorted((r.topic, r.partition, r.offset) for r in rows)
        want = sorted([("grow-a", p, o) for p in (0, 1) for o in range(5)]
                      + [("grow-a", 2, o) for o in range(7)] + [("grow-b", 0, o) for o in range(4)])
        assert got == want
    finally:
        q.stop()


def test_killing_the_driver_mid_batch_and_restarting_gives_each_record_once(spark, spark_broker,
                                                                            tmp_path, long_run):
    """One SIGKILL mid-batch (two with --long: a restarted run is killed again); each
    driver start costs a JVM start, so the default keeps to one."""
    wanted_kills = 2 if long_run else 1
    topic = "stream-kill"
    create_topic(spark_broker.bootstrap, topic, 3)
    n = 1500
    produce(spark_broker.bootstrap, topic, [{"value": f"v{i}".encode(), "partition": i % 3}
                                            for i in range(n)])
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"
    cmd = [sys.executable, str(JOB), spark_broker.bootstrap, topic, str(checkpoint), str(output),
           "300"]                                                  # 5 micro-batches
    kills: list[tuple[int, int]] = []                               # (in-flight batch, committed)
    t0 = time.monotonic()
    for attempt in range(wanted_kills):
        committed_before = max(batch_ids(checkpoint / "commits"), default=-1)

        def mid_batch() -> int | None:
            # planned (offset log written) but not committed, and at least one batch of
            # this run done so that each run makes progress
            top = max(batch_ids(checkpoint / "offsets"), default=-1)
            commits = batch_ids(checkpoint / "commits")
            return top if top >= committed_before + 2 and top not in commits else None
        top = kill_when(cmd, tmp_path / f"run{attempt}.log", mid_batch, timeout=180)
        if top is not None:
            kills.append((top, max(batch_ids(checkpoint / "commits"), default=-1)))
    assert len(kills) == wanted_kills and all(top > committed for top, committed in kills), (
        kills, (tmp_path / "run0.log").read_text()[-3000:])

    killed_at = time.monotonic() - t0
    # The restart: the same query from the same checkpoint, in this process's session
    # (one JVM start less); it replays the batch that was in flight, then goes on.
    q = start_query(spark, spark_broker.bootstrap, topic, str(checkpoint), str(output), "300")
    assert q.awaitTermination(180) and q.exception() is None
    replayed = q.recentProgress[0]["batchId"]
    assert replayed == kills[-1][0]          # the batch in flight, from the offset log
    rows = spark.read.parquet(str(output)).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == n, f"{len(keys)} rows for {n} records: duplicates or gaps"
    assert set(keys) == {(p, o) for p in range(3) for o in range(n // 3)}
    assert sorted(r.value for r in rows) == sorted(f"v{i}" for i in range(n))
    print(f"[{time.monotonic() - t0:.1f}s] killed the driver mid-batch at (batch in flight, "
          f"last committed) {kills} (after {killed_at:.1f}s); the "
          f"restart replayed batch {replayed}: {len(rows)} rows for {n} records, each once")
