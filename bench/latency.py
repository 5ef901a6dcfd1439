"""End-to-end latency (produce call -> record in the consumer's hands) at a fixed rate, with
confluent-kafka against a 3-broker strom cluster (replication factor 3, acks=all) and, in
the same run, librdkafka's 3-broker mock cluster as the ceiling.

    .venv/bin/python bench/latency.py                       # 50 MB/s of 1 KiB, 15 s, 3 repeats
    .venv/bin/python bench/latency.py --quick               # 1 repeat, 6 s (a smoke test)
    .venv/bin/python bench/latency.py --rate-mb 50 --seconds 20 --systems strom-3 --label after
    .venv/bin/python bench/latency.py --page-cache full     # as on a host that has run a while
    .venv/bin/python bench/latency.py --seconds 60 --label steady   # issue 25's steady state
    .venv/bin/python bench/latency.py --seconds 60 --systems strom-3,strom-3-nowriteback

The systems' runs are interleaved (strom, mock, strom, mock, ...), each run on a system
started for it and closed after it, so that a change in the machine over the minutes of a
series (another process, the kernel's writeback, the host) falls on both alike;
`--order grouped` runs all of one system's runs first, on one started system, as before
2026-11-27.

Each record carries its send time (perf_counter_ns, CLOCK_MONOTONIC: one clock for every
process on the host) in its first 8 bytes and a sequence number in the next 8; the consumer
runs in a spawned process of its own and polls record by record. The first --warmup seconds
are not counted. Records have no key and no partition: librdkafka's default partitioner puts
them on a random partition and sticks to it for sticky.partitioning.linger.ms (10 ms), as
for any keyless record (confluent-kafka's produce_batch ignores a per-record partition).

Every record of the measured window is accounted for: the producer counts what the brokers
acknowledged (queued minus delivery failures, once flush() has returned 0), the consumer
counts the distinct sequence numbers it received, and a run whose acknowledged records did
not all arrive within --drain seconds after flush() reports them as lost; a run with lost
records, delivery errors or records flush() left unacknowledged makes the script exit 1.

For strom, bench/loop_blocked.py samples each broker's event-loop thread every 5 ms for the
time it spends in the kernel unable to run (state D: an append waiting for the kernel's
writeback, say), per second of the window and in total, with the kernel functions it waited
in, and from each loop thread's schedstat the ms it ran and the ms it was ready to run but
waited for a CPU (the machine's run queue); for every system, the share of the machine's
CPU that was busy, per second. strom-3-nowriteback is strom with
log.writeback.interval.bytes=0 (the kernel alone decides when the logs are written back),
for the write-behind's before/after.

The table shows, per system, the run with the median p99 of --repeats runs (every figure of
a row comes from that one run). Every run is written to
bench/results/latency-<date>-<time>[-<label>]/ as it finishes. The producer and the consumer
need CPU on time: on a busy 2-core machine the figures measure the starvation (see
docs/PERFORMANCE.md).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import loop_blocked  # noqa: E402
from bench._common import (MB, DeliveryCounter, MockCluster, PageCacheFill, Results,  # noqa: E402
                           StromCluster, add_results_args, failures_status, loadavg, log, machine,
                           median_of_runs, median_run, percentile, print_table, run_main,
                           runs_note, use_broker_repo, workdir, write_json)

_STAMP = struct.Struct(">qq")     # send time (perf_counter_ns), sequence number
FETCH_WAIT_MS = 5     # the mock cluster answers a fetch only after this (no long-poll wake-up)


def set_fetch_wait(ms: int) -> None:
    global FETCH_WAIT_MS
    FETCH_WAIT_MS = ms


def _consume(bootstrap: str, topic: str, partitions: int, fetch_wait_ms: int, start_ns,
             expected, stop, ready, done, out, capacity: int) -> None:
    """The consumer, in a process of its own (spawned): in a thread of the producing process
    it competed for the GIL with the producer's loop and fell seconds behind. Counts the
    records sent at or after start_ns, once each (by sequence number), until it has
    `expected` of them (set when the producer's flush() has returned) or `stop` is set.

    What it keeps per record is allocated and written before the run, for `capacity`
    sequence numbers: lists and a set that grow during the run take new memory in the
    middle of it, and on this VM that memory costs host-side faults once the brokers' page
    cache has used up the cheap part (about 8 GB into a 60 s run at 50 MB/s, rf 3): the
    consumer then stood 1-2 s in the kernel, and the records it did not take meanwhile
    counted as the brokers' latency (docs/PERFORMANCE.md, "Writeback stalls")."""
    from array import array

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "latest",
                  "fetch.wait.max.ms": fetch_wait_ms, "fetch.min.bytes": 1, "log_level": 3})
    c.assign([TopicPartition(topic, i, -1) for i in range(partitions)])   # OFFSET_END
    lat = array("d", [0.0]) * capacity          # written now: the pages are mapped
    arrived = array("q", [0]) * capacity        # when each of lat's records arrived
    seen = bytearray(b"\x01") * capacity        # 1: not yet seen (each page written)
    overflow: set[int] = set()                  # sequence numbers past capacity (none if sized)
    n = 0
    duplicates = 0
    # poll(), not consume(n, timeout): consume() returns only when n records are there or
    # the timeout passes, which would add up to the timeout to every latency.
    now = time.perf_counter_ns      # CLOCK_MONOTONIC: the same clock in both processes
    poll = c.poll
    unpack = _STAMP.unpack_from
    poll(1.0)
    ready.set()
    while not stop.is_set():
        m = poll(0.05)
        if m is not None and m.error() is None:
            t = now()
            sent, seq = unpack(m.value())  # type: ignore[arg-type]
            if sent >= start_ns.value:
                if seq < capacity:
                    fresh = seen[seq]
                    seen[seq] = 0
                else:
                    fresh = seq not in overflow
                    overflow.add(seq)
                if not fresh:
                    duplicates += 1
                elif n < capacity:
                    lat[n] = (t - sent) / 1e6
                    arrived[n] = t
                    n += 1
                else:
                    lat.append((t - sent) / 1e6)
                    arrived.append(t)
                    n += 1
        want = expected.value
        if 0 <= want <= n:
            break
    c.close()
    per_second = by_second(arrived[:n], lat[:n], start_ns.value)
    lat = sorted(lat[:n])
    out.put({"received": len(lat), "duplicates": duplicates, "p50_ms": percentile(lat, 50),
             "p99_ms": percentile(lat, 99), "p999_ms": percentile(lat, 99.9),
             "max_ms": lat[-1] if lat else None, "per_second": per_second})
    done.set()


def by_second(arrived_ns: Sequence[int], lat_ms: Sequence[float], start_ns: int
              ) -> list[list[float]]:
    """[second of the window, records arrived in it, their p50, p99, max]: when in a run the
    tail comes (the kernel's writeback, a collection) rather than only how long it is."""
    buckets: dict[int, list[float]] = {}
    for t, ms in zip(arrived_ns, lat_ms):
        buckets.setdefault(max(0, (t - start_ns) // 1_000_000_000), []).append(ms)
    out = []
    for sec in sorted(buckets):
        xs = sorted(buckets[sec])
        out.append([sec, len(xs), round(percentile(xs, 50), 2), round(percentile(xs, 99), 2),
                    round(xs[-1], 2)])
    return out


def loop_blocked_window(lines: list[dict], pids: list[int], warmup: float,
                        seconds: float) -> dict[str, Any]:
    """bench/loop_blocked.py's lines for the measured window (its second s is the window's
    second s - warmup): per second [s, ms of each broker's loop in D], each broker's total
    and the worst second of any broker, and the kernel functions it waited in. Nothing for
    a system without broker pids (the mock)."""
    if not pids:
        return {}
    first, last = int(round(warmup)), int(round(warmup + seconds))
    rows = [x for x in lines if first <= x["t"] < last]
    by_second = [[x["t"] - first, *(x["blocked_ms"].get(str(p), 0) for p in pids)] for x in rows]
    waits: dict[str, int] = {}
    for x in rows:
        for fn, n in x["waits"].items():
            waits[fn] = waits.get(fn, 0) + n
    # [s, ms each loop ran..., ms each loop waited for a CPU...] (lines of samplers before
    # the run-queue figures have neither)
    sched = [[x["t"] - first, *(x.get("cpu_ms", {}).get(str(p), 0) for p in pids),
              *(x.get("runq_ms", {}).get(str(p), 0) for p in pids)] for x in rows]
    n = len(pids)
    return {"loop_blocked_ms_by_second": by_second,
            "loop_blocked_ms": [sum(r[i + 1] for r in by_second) for i in range(len(pids))],
            "loop_blocked_worst_second_ms": max((max(r[1:]) for r in by_second), default=0),
            "loop_blocked_waits": dict(sorted(waits.items(), key=lambda kv: -kv[1])[:8]),
            "loop_cpu_runq_ms_by_second": sched,
            "loop_cpu_ms": [round(sum(r[1 + i] for r in sched), 1) for i in range(n)],
            "loop_runq_ms": [round(sum(r[1 + n + i] for r in sched), 1) for i in range(n)]}


def cpu_times() -> list[int]:
    """The machine's CPU time so far, in ticks: /proc/stat's first line (user, nice, system,
    idle, iowait, irq, softirq, steal, ...)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def busy_pct(before: Sequence[int], after: Sequence[int]) -> float:
    """The share of the machine's CPU time between two cpu_times() that was not idle (idle
    and iowait are idle)."""
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    return round(100.0 * (total - delta[3] - delta[4]) / total, 1) if total else 0.0


def _memory_sampler(stop: Any, samples: list[list[float]], t0: float,
                    busy: list[list[float]]) -> None:
    """Every second: the kernel's dirty and writeback page cache and free memory (MB) into
    `samples`; the share of the machine's CPUs that was busy (%) into `busy`."""
    last = cpu_times()
    while not stop.wait(1.0):
        try:
            info = dict(line.split(":", 1) for line in open("/proc/meminfo"))
            now = cpu_times()
        except OSError:
            return
        t = round(time.monotonic() - t0, 1)
        samples.append([t, *(int(info[k].split()[0]) // 1024
                             for k in ("Dirty", "Writeback", "MemFree"))])
        busy.append([t, busy_pct(last, now)])
        last = now


class _WindowFailures(DeliveryCounter):
    """Delivery failures (only failures are reported), and how many of them were records of
    the measured window (sequence number >= first_seq)."""

    def __init__(self) -> None:
        super().__init__(every=False)
        self.first_seq = 2 ** 62
        self.failed_in_window = 0

    def __call__(self, err, msg=None) -> None:
        super().__call__(err, msg)
        if err is not None and msg is not None and msg.value() is not None:
            if _STAMP.unpack_from(msg.value())[1] >= self.first_seq:
                self.failed_in_window += 1


def window_accounting(created_in_window: int, unqueued_in_window: int, failed_in_window: int,
                      unflushed: int, received: int, duplicates: int = 0) -> dict:
    """What happened to the records of the measured window: queued = created - never queued
    (still waiting for room when the run ended); acknowledged = queued - delivery failures
    (exact once flush() has returned 0, i.e. unflushed == 0); lost = acknowledged records
    the consumer did not receive. `problems` lists what makes the run untrustworthy."""
    queued = created_in_window - unqueued_in_window
    acked = queued - failed_in_window
    lost = max(0, acked - received)
    problems = []
    if failed_in_window:
        problems.append(f"{failed_in_window} delivery error(s)")
    if unflushed:
        problems.append(f"{unflushed} record(s) unacknowledged after flush()")
    if lost:
        problems.append(f"{lost} of {acked} acknowledged records never arrived (LOST)")
    if received > acked:
        problems.append(f"{received - acked} more records received than acknowledged")
    return {"queued": queued, "acknowledged": acked, "received": received, "lost": lost,
            "duplicates": duplicates, "delivery_errors": failed_in_window,
            "unacknowledged": unflushed, "problems": problems}


def run_once(bootstrap: str, topic: str, partitions: int, size: int, rate_mb: float,
             seconds: float, warmup: float, drain: float = 10.0,
             broker_pids: list[int] | None = None) -> dict:
    """One run; with `broker_pids`, bench/loop_blocked.py samples their event loops."""
    import multiprocessing as mp
    import subprocess
    import tempfile

    from confluent_kafka import Producer
    if size < _STAMP.size:
        raise SystemExit(f"--record-size must be at least {_STAMP.size} (send time and sequence)")
    rate = rate_mb * MB / size     # records per second
    ctx = mp.get_context("spawn")   # no fork of a process running librdkafka threads
    start_ns = ctx.Value("q", 2 ** 62)
    expected = ctx.Value("q", -1, lock=False)
    stop, ready, done, out = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue()
    capacity = int(rate * (warmup + seconds) * 1.2) + 10_000     # sequence numbers to come
    proc = ctx.Process(target=_consume, args=(bootstrap, topic, partitions, FETCH_WAIT_MS,
                                              start_ns, expected, stop, ready, done, out,
                                              capacity),
                       daemon=True)
    proc.start()
    ready.wait(60)
    time.sleep(1.0)     # let the assignment resolve its offsets
    failures = _WindowFailures()
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
                  "queue.buffering.max.messages": 1_000_000, **failures.config()})
    pad = b"x" * (size - _STAMP.size)
    pack = _STAMP.pack
    import threading
    memory: list[list[float]] = []       # [s since the window began, dirty, writeback, free MB]
    busy: list[list[float]] = []         # [s since the window began, machine CPU busy %]
    memory_stop = threading.Event()
    threading.Thread(target=_memory_sampler, args=(memory_stop, memory,
                                                   time.monotonic() + warmup, busy),
                     daemon=True).start()
    produce_batch = p.produce_batch
    blocked_file = tempfile.NamedTemporaryFile(prefix="loop-blocked-", suffix=".jsonl",
                                               delete=False).name
    sampler = subprocess.Popen([sys.executable, "-m", "bench.loop_blocked", blocked_file,
                                ",".join(map(str, broker_pids))],
                               cwd=Path(__file__).resolve().parents[1]) if broker_pids else None
    now = time.perf_counter_ns
    t0 = now()
    start = t0 + int(warmup * 1e9)
    start_ns.value = start
    end = t0 + int((warmup + seconds) * 1e9)
    sent = 0
    seq = 0
    # Every 0.5 ms, the records due by now, each stamped as it is made, in one produce_batch
    # call (one Python call per record cost this process 50 % more CPU).
    due_records: list[dict] = []
    while True:
        t = now()
        if t >= end:
            break
        due = int((t - t0) / 1e9 * rate)
        while sent + len(due_records) < due:
            stamp = now()
            if stamp >= start and failures.first_seq > seq:
                failures.first_seq = seq      # the first record of the measured window
            due_records.append({"value": pack(stamp, seq) + pad})
            seq += 1
        if due_records:
            queued = produce_batch(topic, due_records, on_delivery=failures)
            sent += queued
            # A full queue (the cluster is not keeping up): the rest keep their stamps and
            # go with the next call, so their wait counts in their latency.
            due_records = [m for m in due_records if m.pop("_error", None) is not None] \
                if queued < len(due_records) else []
        p.poll(0)
        time.sleep(0.0005)
    memory_stop.set()
    if sampler is not None:
        sampler.terminate()
        sampler.wait(10)
    blocked = loop_blocked_window(loop_blocked.read(blocked_file), broker_pids or [], warmup,
                                  seconds)
    os.unlink(blocked_file)
    unflushed = p.flush(30)
    achieved = sent * size / ((now() - t0) / 1e9) / MB
    first = failures.first_seq
    created_in_window = max(0, seq - first)
    unqueued_in_window = sum(1 for m in due_records if _STAMP.unpack_from(m["value"])[1] >= first)
    acked_in_window = created_in_window - unqueued_in_window - failures.failed_in_window
    expected.value = acked_in_window     # the consumer stops once it has them all
    done.wait(drain)
    stop.set()
    res = out.get(timeout=60)
    proc.join(10)
    acct = window_accounting(created_in_window, unqueued_in_window, failures.failed_in_window,
                             unflushed, res["received"], res["duplicates"])
    in_window = [b for t, b in busy if 0 <= t < seconds]
    return {"achieved_mb_s": achieved, "records": res["received"], **acct,
            **{k: res[k] for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")},
            "per_second": res["per_second"], "memory_mb_by_second": memory,
            "cpu_busy_pct_by_second": busy,
            "cpu_busy_pct_median": statistics.median(in_window) if in_window else None,
            **blocked}


def _cores(run: dict) -> str:
    """The brokers' loops over a run's window: CPU they ran on and CPU they waited for, in
    cores (ms per second of window / 1000), summed over the brokers."""
    seconds = max(1, len(run["loop_cpu_runq_ms_by_second"]))
    return f"{sum(run['loop_cpu_ms']) / seconds / 1000:.2f}/{sum(run['loop_runq_ms']) / seconds / 1000:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="strom-3,mock-3",
                    help="of strom-3, strom-3-nowriteback (log.writeback.interval.bytes=0: the "
                         "kernel alone decides when the logs are written back), mock-3")
    ap.add_argument("--rate-mb", type=float, default=50.0, help="MB/s (10^6 bytes) offered")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--drain", type=float, default=10.0,
                    help="seconds after flush() for the last acknowledged records to arrive; "
                         "those that do not are reported lost")
    ap.add_argument("--fetch-wait-ms", type=int, default=FETCH_WAIT_MS,
                    help="consumer fetch.wait.max.ms (librdkafka's mock answers only after it)")
    ap.add_argument("--quick", action="store_true", help="1 repeat of 6 s (a smoke test)")
    ap.add_argument("--order", choices=["interleaved", "grouped"], default="interleaved",
                    help="interleaved: a system started for each run, the systems' runs "
                         "alternating; grouped: one system's runs in a row on one started system")
    ap.add_argument("--broker-repo", metavar="DIR", help="run strom from this checkout (before/after)")
    ap.add_argument("--page-cache", choices=["as-is", "full"], default="as-is",
                    help="full: fill free memory with clean page cache before every run, as on a "
                         "host that has been running a while (see produce_consume.py)")
    ap.add_argument("--json", help="also write the summary to this file")
    add_results_args(ap)
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.repeats, a.seconds, a.warmup = 1, 6.0, 2.0
    set_fetch_wait(a.fetch_wait_ms)
    info = machine()
    use_broker_repo(a.broker_repo, info)
    out = Results("latency", a, info)
    results: list[dict[str, Any]] = []
    failed: list[str] = []
    systems = a.systems.split(",")
    runs_of: dict[str, list[dict]] = {system: [] for system in systems}
    with workdir() as wd:
        fill = PageCacheFill(wd / "ballast") if a.page_cache == "full" else None

        def start(system: str, n: int) -> Any:
            log(f"starting {system}")
            if system == "strom-3":
                return StromCluster(wd / f"{system}-{n}", 3)
            if system == "strom-3-nowriteback":
                return StromCluster(wd / f"{system}-{n}", 3,
                                    {"log.writeback.interval.bytes": "0"})
            if system == "mock-3":
                return MockCluster(3)
            raise SystemExit(f"unknown system {system!r}")

        def one_run(system: str, sut: Any, r: int) -> None:
            topic = f"lat-{r}"
            sut.create_topic(topic, a.partitions, 3)
            filled = fill.top_up() if fill else None
            load = loadavg()
            res = run_once(sut.bootstrap, topic, a.partitions, a.record_size, a.rate_mb,
                           a.seconds, a.warmup, a.drain,
                           sut.pids() if isinstance(sut, StromCluster) else None)
            res["loadavg"] = load
            if filled:
                res["page_cache_fill"] = filled
            log(f"{system} run {r}: " + str({k: v for k, v in res.items()
                                             if k not in ("per_second", "memory_mb_by_second",
                                                          "loop_blocked_ms_by_second",
                                                          "loop_cpu_runq_ms_by_second",
                                                          "cpu_busy_pct_by_second")}))
            for problem in res["problems"]:
                failed.append(f"{system} run {r}: {problem}")
                log(f"{system} run {r}: {problem}")
            out.run(f"{system}-run{r}", {"system": system, "repeat": r, "order": a.order,
                                         **res})
            runs_of[system].append(res)

        if a.order == "interleaved":
            for r in range(a.repeats):
                for system in systems:
                    sut = start(system, r)
                    try:
                        one_run(system, sut, r)
                    finally:
                        sut.close()
                        # a 60 s run at 50 MB/s leaves 9 GB of logs (rf 3)
                        shutil.rmtree(wd / f"{system}-{r}", ignore_errors=True)
        else:
            for system in systems:
                sut = start(system, 0)
                try:
                    for r in range(a.repeats):
                        one_run(system, sut, r)
                finally:
                    sut.close()
        for system in systems:
            runs = runs_of[system]
            results.append({"system": system, "runs": runs,
                            "median_run_by_p99": median_run(runs, "p99_ms"),
                            **{k: median_of_runs([x[k] for x in runs])
                               for k in ("p50_ms", "p99_ms", "p999_ms")}})
        if fill:
            fill.close()
    print()
    print(f"end-to-end latency, {a.rate_mb} MB/s offered, {a.record_size} B records, "
          f"{a.partitions} partitions, rf=3 acks=all, {a.seconds} s per run, runs {a.order}; "
          f"per system the run "
          f"with the median p99 of its runs ({runs_note(a.repeats)}; every figure of a row from "
          f"that one run); page cache {'full' if fill else 'as found'}")
    rows = []
    for res_of in results:
        m = res_of["median_run_by_p99"]
        if m is None:
            continue
        rows.append([res_of["system"], m["achieved_mb_s"], m["acknowledged"], m["received"],
                     m["lost"], m["p50_ms"], m["p99_ms"], m["p999_ms"], m["max_ms"],
                     " / ".join(f"{x['p99_ms']:.1f}" for x in res_of["runs"]),
                     f"{res_of['p99_ms']['spread']:.0%}" if res_of["p99_ms"]["spread"] is not None
                     else None,
                     " / ".join(f"{sum(x['loop_blocked_ms'])}" for x in res_of["runs"])
                     if "loop_blocked_ms" in m else None,
                     " / ".join(f"{x['loop_blocked_worst_second_ms']}" for x in res_of["runs"])
                     if "loop_blocked_ms" in m else None,
                     " / ".join(_cores(x) for x in res_of["runs"]) if "loop_cpu_ms" in m else None,
                     " / ".join(f"{x['cpu_busy_pct_median']:.0f}" for x in res_of["runs"]
                                if x.get("cpu_busy_pct_median") is not None)])
    print_table(["system", "MB/s", "acked", "received", "lost", "p50 ms", "p99 ms", "p99.9 ms",
                 "max ms", "p99 of each run", "p99 spr", "loops in D ms (each run)",
                 "worst s of a loop in D, ms (each run)",
                 "loops ran / waited for a CPU, cores (each run)",
                 "machine CPU busy %, median s (each run)"], rows)
    out.summary({"results": results, "failed": failed})
    write_json(a.json, {"benchmark": "latency", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir),
                        "results": results, "failed": failed})
    return failures_status(failed)


if __name__ == "__main__":
    run_main(main)
