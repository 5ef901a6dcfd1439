"""End-to-end latency (produce call -> record in the consumer's hands) at a fixed rate, with
confluent-kafka against a 3-broker strom cluster (replication factor 3, acks=all) and, in
the same run, librdkafka's 3-broker mock cluster as the ceiling.

    .venv/bin/python bench/latency.py                       # 50 MB/s of 1 KiB, 15 s, 2 repeats
    .venv/bin/python bench/latency.py --quick               # 1 repeat, 6 s
    .venv/bin/python bench/latency.py --rate-mb 50 --seconds 20 --systems strom-3 --json lat.json
    .venv/bin/python bench/latency.py --page-cache full     # as on a host that has run a while

Each record carries its send time (perf_counter_ns, CLOCK_MONOTONIC: one clock for every
process on the host) in its first 8 bytes; the consumer runs in a spawned process of its own
and polls record by record. The first --warmup seconds are not counted. The producer and the
consumer need CPU on time: on a busy 2-core machine the figures measure the starvation (see
docs/PERFORMANCE.md).
"""
from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (MB, MockCluster, PageCacheFill, StromCluster,  # noqa: E402
                           best_and_spread, loadavg, log, machine, percentile, print_table,
                           use_broker_repo, workdir, write_json)

_TS = struct.Struct(">q")
FETCH_WAIT_MS = 5     # the mock cluster answers a fetch only after this (no long-poll wake-up)


def set_fetch_wait(ms: int) -> None:
    global FETCH_WAIT_MS
    FETCH_WAIT_MS = ms


def _consume(bootstrap: str, topic: str, partitions: int, fetch_wait_ms: int, start_ns,
             stop, ready, out) -> None:
    """The consumer, in a process of its own (spawned): in a thread of the producing process
    it competed for the GIL with the producer's loop and fell seconds behind."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "latest",
                  "fetch.wait.max.ms": fetch_wait_ms, "fetch.min.bytes": 1, "log_level": 3})
    c.assign([TopicPartition(topic, i, -1) for i in range(partitions)])   # OFFSET_END
    lat: list[float] = []
    # poll(), not consume(n, timeout): consume() returns only when n records are there or
    # the timeout passes, which would add up to the timeout to every latency.
    now = time.perf_counter_ns      # CLOCK_MONOTONIC: the same clock in both processes
    poll = c.poll
    poll(1.0)
    ready.set()
    while not stop.is_set():
        m = poll(0.05)
        if m is None or m.error() is not None:
            continue
        t = now()
        sent = _TS.unpack_from(m.value())[0]
        if sent >= start_ns.value:
            lat.append((t - sent) / 1e6)
    c.close()
    lat.sort()
    out.put({"records": len(lat), "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
             "p999_ms": percentile(lat, 99.9), "max_ms": lat[-1] if lat else None})


def run_once(bootstrap: str, topic: str, partitions: int, size: int, rate_mb: float,
             seconds: float, warmup: float) -> dict:
    import multiprocessing as mp

    from confluent_kafka import Producer
    rate = rate_mb * MB / size     # records per second
    ctx = mp.get_context("spawn")   # no fork of a process running librdkafka threads
    start_ns = ctx.Value("q", 2 ** 62)
    stop, ready, out = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_consume, args=(bootstrap, topic, partitions, FETCH_WAIT_MS,
                                              start_ns, stop, ready, out), daemon=True)
    proc.start()
    ready.wait(60)
    time.sleep(1.0)     # let the assignment resolve its offsets
    # At most 5 requests in flight per connection, as Java's producer (librdkafka's own
    # default is 1,000,000: one request per linger.ms whatever the broker's pace, a queue
    # without bound on any broker slower than that, the mock included). Not idempotent:
    # librdkafka's idempotent producer keeps one request per partition in flight and, while
    # one waits for acks=all, its broker threads poll in a loop (0.7 of this machine's 2
    # cores against a 3-broker strom cluster, measured), which starves the brokers it waits on.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                  "batch.size": 1_000_000, "enable.idempotence": False,
                  "max.in.flight.requests.per.connection": 5, "log_level": 3,
                  "queue.buffering.max.kbytes": 1_048_576,
                  "queue.buffering.max.messages": 1_000_000})
    pad = b"x" * (size - 8)
    produce_batch = p.produce_batch
    now = time.perf_counter_ns
    t0 = now()
    start_ns.value = t0 + int(warmup * 1e9)
    end = t0 + int((warmup + seconds) * 1e9)
    sent = 0
    part = 0
    # Every 0.5 ms, the records due by now, each stamped as it is made, in one produce_batch
    # call (one Python call per record cost this process 50 % more CPU).
    due_records: list[dict] = []
    while True:
        t = now()
        if t >= end:
            break
        due = int((t - t0) / 1e9 * rate)
        while sent + len(due_records) < due:
            due_records.append({"value": _TS.pack(now()) + pad, "partition": part})
            part = (part + 1) % partitions
        if due_records:
            queued = produce_batch(topic, due_records)
            sent += queued
            # A full queue (the cluster is not keeping up): the rest keep their stamps and
            # go with the next call, so their wait counts in their latency.
            due_records = [m for m in due_records if m.pop("_error", None) is not None] \
                if queued < len(due_records) else []
        p.poll(0)
        time.sleep(0.0005)
    p.flush(30)
    achieved = sent * size / ((now() - t0) / 1e9) / MB
    time.sleep(1.0)
    stop.set()
    res = out.get(timeout=60)
    proc.join(10)
    return {"achieved_mb_s": achieved, **res}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="strom-3,mock-3")
    ap.add_argument("--rate-mb", type=float, default=50.0, help="MB/s (10^6 bytes) offered")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--fetch-wait-ms", type=int, default=FETCH_WAIT_MS,
                    help="consumer fetch.wait.max.ms (librdkafka's mock answers only after it)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--broker-repo", metavar="DIR", help="run strom from this checkout (before/after)")
    ap.add_argument("--page-cache", choices=["as-is", "full"], default="as-is",
                    help="full: fill free memory with clean page cache before every run, as on a "
                         "host that has been running a while (see produce_consume.py)")
    ap.add_argument("--json")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.repeats, a.seconds, a.warmup = 1, 6.0, 2.0
    set_fetch_wait(a.fetch_wait_ms)
    info = machine()
    use_broker_repo(a.broker_repo, info)
    results = []
    with workdir() as wd:
        fill = PageCacheFill(wd / "ballast") if a.page_cache == "full" else None
        for system in a.systems.split(","):
            log(f"starting {system}")
            sut = StromCluster(wd, 3) if system == "strom-3" else MockCluster(3)
            try:
                runs = []
                for r in range(a.repeats):
                    topic = f"lat-{r}"
                    sut.create_topic(topic, a.partitions, 3)
                    filled = fill.top_up() if fill else None
                    load = loadavg()
                    res = run_once(sut.bootstrap, topic, a.partitions, a.record_size, a.rate_mb,
                                   a.seconds, a.warmup)
                    res["loadavg"] = load
                    if filled:
                        res["page_cache_fill"] = filled
                    log(f"{system} run {r}: {res}")
                    runs.append(res)
            finally:
                sut.close()
            results.append({"system": system, "runs": runs,
                            **{k: best_and_spread([x[k] for x in runs], higher_is_better=False)
                               for k in ("p50_ms", "p99_ms", "p999_ms")}})
        if fill:
            fill.close()
    print()
    print(f"end-to-end latency, {a.rate_mb} MB/s offered, {a.record_size} B records, "
          f"{a.partitions} partitions, rf=3 acks=all; best of {a.repeats} runs of {a.seconds}s; "
          f"page cache {'full' if fill else 'as found'}")
    rows = []
    for r in results:
        best = min(r["runs"], key=lambda x: x["p99_ms"])
        rows.append([r["system"], best["achieved_mb_s"], best["records"], r["p50_ms"]["best"],
                     r["p99_ms"]["best"], f"{r['p99_ms']['spread']:.0%}", r["p999_ms"]["best"],
                     best["max_ms"]])
    print_table(["system", "MB/s", "records", "p50 ms", "p99 ms", "p99 spr", "p99.9 ms",
                 "max ms"], rows)
    write_json(a.json, {"benchmark": "latency", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
