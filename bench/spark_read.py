"""Benchmark (not a test): rows/s of `.format("strom")` reads with local Spark.

Loads N records of SIZE-byte values (default 1,000,000 x 100 B) into a topic of a fresh
broker (or --bootstrap's), then measures, REPEAT times each:
  - batch:     spark.read ... .agg(count(*), sum(length(value)), max(offset)).collect()
  - streaming: spark.readStream ... maxOffsetsPerTrigger=--per-trigger, Trigger.AvailableNow,
               into the noop sink; from query start to termination
and prints a table (median and best rows/s). Every run goes to a results file of its own
(bench/results/spark_read-<date>-<time>[-<label>]/), the medians to summary.json there;
--json FILE writes the summary too.

    .venv/bin/python bench/spark_read.py                      # 1M records, local[2]
    .venv/bin/python bench/spark_read.py --records 200000 --repeat 2 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import Results, add_results_args, plain_broker_processes, runs_note  # noqa: E402


def load(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> float:
    """Create `topic` and write `records` values of `size` bytes round-robin; returns s."""
    from clients import AdminClient, NewTopic

    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    started = time.perf_counter()
    value = b"v" * size
    try:
        from confluent_kafka import Producer as CKProducer   # librdkafka: loads 10x faster
        p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                        "queue.buffering.max.messages": 1_000_000, "log_level": 0})
        for i in range(records):
            while True:
                try:
                    p.produce(topic, value, key=b"%d" % i, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 10_000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
    except ImportError:
        from clients import Producer
        with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20) as sp:
            for i in range(records):
                sp.send(topic, value, key=b"%d" % i, partition=i % partitions)
            sp.flush()
    return time.perf_counter() - started


def batch_read(spark, bootstrap: str, topic: str) -> tuple[int, float]:
    from pyspark.sql import functions as F
    started = time.perf_counter()
    row = (spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).load()
           .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"),
                F.max("offset").alias("max_offset")).collect()[0])
    return row["n"], time.perf_counter() - started


def stream_read(spark, bootstrap: str, topic: str, per_trigger: int, workdir: str) -> tuple[int, float, int]:
    started = time.perf_counter()
    q = (spark.readStream.format("strom").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", str(per_trigger)).load()
         .writeStream.format("noop").trigger(availableNow=True)
         .option("checkpointLocation", tempfile.mkdtemp(dir=workdir)).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - started
    progress = q.recentProgress
    return sum(p["numInputRows"] for p in progress), elapsed, sum(
        1 for p in progress if p["numInputRows"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--partitions", type=int, default=4, help="topic partitions")
    ap.add_argument("--per-trigger", type=int, default=250_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--repeat", "--repeats", dest="repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--bootstrap", help="use this cluster instead of starting a broker")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    add_results_args(ap)
    args = ap.parse_args(argv)
    runs = Results("spark_read", args, {"master": args.master})

    from tests.support.broker_process import BrokerProcess

    workdir = tempfile.mkdtemp(prefix="strom-bench-spark-")
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        plain_broker_processes()
        broker = BrokerProcess(Path(workdir) / "broker").start()
        bootstrap = broker.bootstrap
    topic = f"bench-spark-{os.getpid()}"
    try:
        load_s = load(bootstrap, topic, args.partitions, args.records, args.size)
        print(f"loaded {args.records:,} records of {args.size} B into {args.partitions} "
              f"partitions in {load_s:.1f}s", flush=True)
        from spark_jobs.session import strom_spark_session
        spark = strom_spark_session("bench-spark-read", master=args.master)
        batch_read(spark, bootstrap, topic)          # warm-up: JIT, Python workers
        results: dict[str, list[float]] = {"batch": [], "streaming": []}
        for i in range(args.repeat):
            n, s = batch_read(spark, bootstrap, topic)
            assert n == args.records, (n, args.records)
            results["batch"].append(n / s)
            print(f"  batch     run {i + 1}: {n:,} rows in {s:.2f}s = {n / s:,.0f} rows/s", flush=True)
            runs.run(f"batch-run{i}", {"read": "batch", "rows": n, "seconds": s, "rows_per_s": n / s})
            n, s, batches = stream_read(spark, bootstrap, topic, args.per_trigger, workdir)
            assert n == args.records, (n, args.records)
            results["streaming"].append(n / s)
            print(f"  streaming run {i + 1}: {n:,} rows in {batches} batches in {s:.2f}s = "
                  f"{n / s:,.0f} rows/s", flush=True)
            runs.run(f"streaming-run{i}", {"read": "streaming", "rows": n, "seconds": s,
                                           "micro_batches": batches, "rows_per_s": n / s})
        spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    targets = {"batch": 400_000, "streaming": 250_000}
    print()
    print(f"{'read':<11}{'records':>11}{'median rows/s':>16}{'best rows/s':>14}{'target':>10}"
          f"   ({runs_note(args.repeat)})")
    out = {"records": args.records, "value_bytes": args.size, "partitions": args.partitions,
           "master": args.master, "max_offsets_per_trigger": args.per_trigger, "results": {}}
    for name, rates in results.items():
        best, median = max(rates), statistics.median(rates)
        print(f"{name:<11}{args.records:>11,}{median:>16,.0f}{best:>14,.0f}{targets[name]:>10,}")
        out["results"][name] = {"runs_rows_per_s": [round(r) for r in rates],
                                "best_rows_per_s": round(best),
                                "median_rows_per_s": round(median),
                                "target_rows_per_s": targets[name]}
    runs.summary(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
