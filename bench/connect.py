"""Kafka Connect on one standalone strom broker and one standalone worker (both processes):
file source to topic and topic to file sink in lines/s (target >= 100,000 lines/s each), and
syslog datagrams/s over UDP without drops, each beside ceilings measured in the same run.

    .venv/bin/python bench/connect.py                 # 3 runs of 1,000,000 lines, ~10 min
    .venv/bin/python bench/connect.py --quick         # 1 run of 20,000 lines (a smoke test)
    .venv/bin/python bench/connect.py --parts source,sink --lines 500000 --label after

Every run starts a fresh broker (`python -m broker`) and a fresh worker
(`python -m clients.connect.main standalone`, `offset.flush.interval.ms` = --flush-interval-ms)
and writes the source file beforehand: --lines lines of 100 B ("line-<n> " and filler, 99
bytes and "\\n"). Topics have one partition, so the sink file must equal the source file byte
for byte (checked after every sink run). Order within a run: the ceilings, then the worker.

1. **source** (file -> topic): a FileStreamSource connector is created over REST (one per
   converter variant: StringConverter keys and values; JsonConverter with schemas, whose
   records carry the schema envelope). lines/s = the lines in the topic (its end offset, read
   every 25 ms with strom's Consumer.end_offsets) over the time from the POST to the moment
   the end offset reached --lines; "10-90 %" is the rate between 10 % and 90 % of them
   (start-up and the tail left out). Ceilings, same broker, same run, same lines:
   - strom's AsyncProducer sending the file's lines from a plain `for line in file` loop with
     the worker's source-producer settings (acks=all, idempotent, linger.ms=5, strom's
     defaults otherwise): what the worker's own producer can do with nothing around it, so
     the ratio is what the Connect runtime (task thread, SourceRecord, converter, offsets)
     costs on top of it;
   - confluent-kafka (librdkafka, C) producing the same lines with produce_batch (2,000 a
     call, acks=all, idempotent, the produce benchmarks' batching): what the broker takes from
     a client whose per-record cost is C, the most any Python worker could reach here.
   Both ceilings count only acknowledged lines (the end offset after flush must be --lines).
2. **sink** (topic -> file): a FileStreamSink connector drains the source run's topic (each
   variant its own) into a new file. lines/s = the file's size / 100 B over the time from the
   POST to the moment the file holds every line; the sink writes through a 1 MiB buffer and its
   last bytes reach the file at flush() (flush + fsync) on the offset commit, so that time
   includes up to one --flush-interval-ms; "10-90 %" leaves it out. The time the group's
   committed offset reached the end (after that fsync) is in the results file. Ceilings:
   strom's AsyncConsumer (assigned, the sink consumer's defaults, no group join) and
   confluent-kafka's consumer (`_common.consume_run`: timed from its first batch) reading the
   same topic to the end.
3. **syslog**: a SyslogSource connector (JsonConverter without schemas) on a UDP port;
   `tests/support/syslog_sender.py` in a separate process sends its RFC 5424/3164 mix at each
   --syslog-rates rate for --syslog-seconds. A step has no drops when the worker's counters
   (`/metrics`: kafka_connect_syslog_datagrams_received_total, ..._dropped_total (queue full),
   kafka_connect_syslog_socket_drops_total (receive buffer full)) show every datagram sent as
   received and none dropped, and the topic holds every one. "topic dgrams/s" is the records
   over the time from the first to the last one seen in the topic (25 ms polling); "worker CPU
   us/dgram" the worker process's CPU over the step per datagram received. Ceiling:
   the same sender into a plain Python reader process (blocking recvfrom loop, the same 8 MiB
   receive buffer) at the same rates in the same run.

"CPU us/line" is the worker process's CPU (user+system, every thread) per line for the worker
rows, and this process's (the client's, all its threads) for the ceilings: on a shared 2-core
machine it says more about cost than lines/s does.

Tables show medians over --runs (3 by default) with spread (max-min)/median; ratios are
medians of per-run ratios. Every run goes to bench/results/connect-<date>-<time>[-<label>]/
as it finishes, the medians to summary.json there. A run that does not deliver every line
prints `FAILED: <why>` and exits 1.
"""
from __future__ import annotations

import argparse
import asyncio
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (REPO, BenchFailure, DeliveryCounter, Results,  # noqa: E402
                           StromBroker, add_results_args, consume_run, cpu_seconds_of, loadavg,
                           log, machine, median_of_runs, print_table, producer_config, run_main,
                           runs_note, workdir, write_json)
from tests.support.broker_process import free_port  # noqa: E402
from tests.support.connect_worker import ConnectWorker  # noqa: E402
from tests.support.connect_worker import rest as http  # noqa: E402

TARGET_LINES_S = 100_000
LINE_BYTES = 100
POLL_S = 0.025
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
VARIANTS = {"string": {"key.converter": STRING, "value.converter": STRING},
            "json": {"key.converter": JSON, "value.converter": JSON,
                     "key.converter.schemas.enable": "true",
                     "value.converter.schemas.enable": "true"}}
SYSLOG_METRICS = ("syslog_datagrams_received_total", "syslog_datagrams_dropped_total",
                  "syslog_socket_drops_total")


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="source,sink,syslog", help="comma list of source, sink, syslog")
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines of 100 B in the source file")
    ap.add_argument("--variants", default="string,json",
                    help="converters of the file connectors: string (StringConverter), json "
                         "(JsonConverter with schemas)")
    ap.add_argument("--flush-interval-ms", type=int, default=1000,
                    help="the worker's offset.flush.interval.ms (the sink's flush+fsync)")
    ap.add_argument("--syslog-rates", default="10000,20000,40000,80000",
                    help="datagrams a second of the syslog steps, in this order")
    ap.add_argument("--syslog-seconds", type=float, default=5.0, help="length of each step")
    ap.add_argument("--runs", type=int, default=3, help="runs; the tables show medians")
    ap.add_argument("--quick", action="store_true",
                    help="1 run of 20,000 lines, syslog at 5,000 and 10,000/s for 2 s (a smoke test)")
    ap.add_argument("--json", help="also write the summary to this file")
    add_results_args(ap)
    a = ap.parse_args(argv)
    if a.quick:
        a.runs, a.lines, a.syslog_rates, a.syslog_seconds = 1, 20_000, "5000,10000", 2.0
    return a


# ---- measuring -------------------------------------------------------------------------------

def write_lines(path: Path, n: int) -> None:
    """n lines of exactly LINE_BYTES bytes (the newline included), numbered."""
    fill = b"x" * (LINE_BYTES - 16)
    with open(path, "wb") as f:
        for base in range(0, n, 100_000):
            f.write(b"".join(b"line-%09d %s\n" % (i, fill) for i in range(base, min(n, base + 100_000))))


def follow(read: Callable[[], int], target: int, t0: float, timeout: float, what: str) -> dict[str, Any]:
    """Poll read() every POLL_S until it reaches target; the times (from t0) it first moved,
    passed 10 % and 90 % of target, and reached it. More than target, or not reaching it
    within timeout, fails the run."""
    marks: dict[str, float] = {}
    deadline = time.perf_counter() + timeout
    while True:
        v = read()
        t = time.perf_counter() - t0
        if v > 0:
            marks.setdefault("first", t)
        if v >= target * 0.1:
            marks.setdefault("p10", t)
        if v >= target * 0.9:
            marks.setdefault("p90", t)
        if v >= target:
            if v > target:
                raise BenchFailure(f"{what}: {v:,} where {target:,} were expected (duplicates?)")
            marks["done"] = t
            return marks
        if time.perf_counter() > deadline:
            raise BenchFailure(f"{what}: {v:,} of {target:,} after {timeout:.0f} s")
        time.sleep(POLL_S)


def rates(n: int, marks: dict[str, float]) -> dict[str, Any]:
    steady = marks["p90"] - marks["p10"]
    return {"lines": n, "seconds": marks["done"], "lines_per_s": n / marks["done"],
            "steady_lines_per_s": 0.8 * n / steady if steady > 0 else None, "marks": marks}


class Ends:
    """End offsets (and a group's committed offset) of one-partition topics, read with strom's
    own blocking Consumer."""

    def __init__(self, bootstrap: str):
        from clients import Consumer
        self.bootstrap = bootstrap
        self.c = Consumer(config={"bootstrap.servers": bootstrap, "client.id": "bench-ends"})
        self.groups: dict[str, Any] = {}

    def __call__(self, topic: str) -> int:
        from clients import TopicPartition
        tp = TopicPartition(topic, 0)
        return self.c.end_offsets([tp])[tp]

    def committed(self, group: str, topic: str) -> int:
        from clients import Consumer, TopicPartition
        if group not in self.groups:      # OffsetFetch only: this consumer joins no group
            self.groups[group] = Consumer(config={"bootstrap.servers": self.bootstrap,
                                                  "group.id": group, "enable.auto.commit": False})
        tp = TopicPartition(topic, 0)
        got = self.groups[group].committed([tp]).get(tp)
        return got.offset if got is not None else 0

    def close(self) -> None:
        for c in [self.c, *self.groups.values()]:
            c.close(autocommit=False)


class Cpu:
    """CPU seconds of the worker, the broker and this process (the ceilings' client, all its
    threads) over one measurement, and per line."""

    def __init__(self, worker: int, broker: int):
        self.pids = {"worker": worker, "broker": broker}
        self.at = {k: cpu_seconds_of(p) for k, p in self.pids.items()}
        self.client = time.process_time()

    def since(self, lines: int) -> dict[str, float]:
        out = {f"{k}_cpu_s": cpu_seconds_of(p) - self.at[k] for k, p in self.pids.items()}
        out["client_cpu_s"] = time.process_time() - self.client
        for k in ("worker", "broker", "client"):
            out[f"{k}_cpu_us_per_line"] = out[f"{k}_cpu_s"] / lines * 1e6 if lines else 0.0
        return out


def connector(worker: ConnectWorker, name: str, config: dict[str, str]) -> float:
    """POST a connector; the time just before the request (the clock's start)."""
    t0 = time.perf_counter()
    code, body = worker.rest("POST", "/connectors", {"name": name, "config": config})
    if code != 201:
        raise BenchFailure(f"creating connector {name}: HTTP {code} {body}")
    return t0


def delete(worker: ConnectWorker, name: str) -> None:
    code, body = worker.rest("DELETE", f"/connectors/{name}")
    if code not in (200, 204):
        raise BenchFailure(f"deleting connector {name}: HTTP {code} {body}")


# ---- 1. file source -> topic ------------------------------------------------------------------

async def _aio_produce(bootstrap: str, topic: str, path: Path) -> float:
    from clients.aio import AsyncProducer
    p = AsyncProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                       "linger.ms": 5, "client.id": "bench-ceiling"})
    await p.start()
    await p.partitions_for(topic)           # metadata before the clock
    send = p.send
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            await send(topic, line[:-1])
    await p.flush(300)
    elapsed = time.perf_counter() - t0
    await p.close()
    return elapsed


def ceiling_aio_producer(bootstrap: str, topic: str, path: Path, n: int, ends: Ends, cpu: Cpu) -> dict[str, Any]:
    elapsed = asyncio.run(_aio_produce(bootstrap, topic, path))
    got = ends(topic)
    if got != n:
        raise BenchFailure(f"AsyncProducer ceiling: {got:,} lines in {topic} after flush, {n:,} sent")
    return {"lines": n, "seconds": elapsed, "lines_per_s": n / elapsed, **cpu.since(n)}


def ceiling_confluent_producer(bootstrap: str, topic: str, path: Path, n: int, cpu: Cpu) -> dict[str, Any]:
    from confluent_kafka import Producer
    counter = DeliveryCounter()
    p = Producer(producer_config(bootstrap, "all", "none", **counter.config(),
                                 **{"enable.idempotence": True}))
    p.list_topics(topic, timeout=10)
    queued = 0
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        while True:
            chunk = [{"value": line[:-1]} for line in f.readlines(200_000)]
            if not chunk:
                break
            while chunk:
                k = p.produce_batch(topic, chunk, partition=0, on_delivery=counter)
                queued += k
                if k == len(chunk):
                    break
                chunk = [{"value": m["value"]} for m in chunk if "_error" in m]
                p.poll(0.005)
            p.poll(0)
    left = p.flush(300)
    elapsed = time.perf_counter() - t0
    acked = counter.settle(queued, left, "confluent-kafka ceiling")
    return {"lines": acked, "seconds": elapsed, "lines_per_s": acked / elapsed, **cpu.since(acked)}


def worker_source(worker: ConnectWorker, variant: str, topic: str, path: Path, n: int,
                  ends: Ends, cpu: Cpu, timeout: float) -> dict[str, Any]:
    name = f"file-source-{variant}"
    t0 = connector(worker, name, {"connector.class": "FileStreamSource", "tasks.max": "1",
                                  "file": str(path), "topic": topic, **VARIANTS[variant]})
    marks = follow(lambda: ends(topic), n, t0, timeout, f"worker source ({variant}) into {topic}")
    res = {**rates(n, marks), **cpu.since(n)}
    delete(worker, name)
    return res


def source_part(ctx: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    broker, worker, ends, path, n = ctx["broker"], ctx["worker"], ctx["ends"], ctx["path"], a.lines
    cpu = lambda: Cpu(worker.proc.pid, broker.pids()[0])    # noqa: E731
    out: dict[str, Any] = {}
    broker.create_topic("ceiling-aio", 1)
    out["aio_producer"] = ceiling_aio_producer(broker.bootstrap, "ceiling-aio", path, n, ends, cpu())
    log(f"  AsyncProducer ceiling: {out['aio_producer']['lines_per_s']:,.0f} lines/s")
    broker.create_topic("ceiling-ck", 1)
    out["confluent_producer"] = ceiling_confluent_producer(broker.bootstrap, "ceiling-ck", path, n, cpu())
    log(f"  confluent-kafka ceiling: {out['confluent_producer']['lines_per_s']:,.0f} lines/s")
    for v in a.variants.split(","):
        topic = f"lines-{v}"
        broker.create_topic(topic, 1)
        res = worker_source(worker, v, topic, path, n, ends, cpu(), ctx["timeout"])
        res["ratio_to_aio_producer"] = res["lines_per_s"] / out["aio_producer"]["lines_per_s"]
        res["ratio_to_confluent"] = res["lines_per_s"] / out["confluent_producer"]["lines_per_s"]
        out[f"worker_{v}"] = res
        log(f"  worker source ({v}): {res['lines_per_s']:,.0f} lines/s "
            f"(10-90 %: {res['steady_lines_per_s'] or 0:,.0f}; worker CPU "
            f"{res['worker_cpu_us_per_line']:.1f} us/line)")
    return out


# ---- 2. topic -> file sink --------------------------------------------------------------------

async def _aio_consume(bootstrap: str, topic: str, n: int, timeout: float) -> float:
    from clients import TopicPartition
    from clients.aio import AsyncConsumer
    c = AsyncConsumer(config={"bootstrap.servers": bootstrap, "group.id": "bench-ceiling",
                              "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    await c.start()
    tp = TopicPartition(topic, 0)
    await c.assign([tp])
    await c.seek_to_beginning(tp)
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + timeout
    while got < n and time.perf_counter() < deadline:
        got += len(await c.poll(1.0))
    elapsed = time.perf_counter() - t0
    await c.close(autocommit=False)
    if got != n:
        raise BenchFailure(f"AsyncConsumer ceiling: {got:,} of {n:,} records of {topic}")
    return elapsed


def worker_sink(worker: ConnectWorker, variant: str, topic: str, sink: Path, source: Path, n: int,
                ends: Ends, cpu: Cpu, timeout: float) -> dict[str, Any]:
    name = f"file-sink-{variant}"
    t0 = connector(worker, name, {"connector.class": "FileStreamSink", "tasks.max": "1",
                                  "file": str(sink), "topics": topic, **VARIANTS[variant]})
    size = lambda: sink.stat().st_size // LINE_BYTES if sink.exists() else 0     # noqa: E731
    marks = follow(size, n, t0, timeout, f"worker sink ({variant}) into {sink.name}")
    res = {**rates(n, marks), **cpu.since(n)}
    group = f"connect-{name}"
    done = follow(lambda: ends.committed(group, topic), n, t0, 60, f"{group}'s committed offset")
    res["committed_s"] = done["done"]
    delete(worker, name)
    if sink.stat().st_size != n * LINE_BYTES or not filecmp.cmp(sink, source, shallow=False):
        raise BenchFailure(f"worker sink ({variant}): {sink} is not the source file")
    sink.unlink()
    return res


def sink_part(ctx: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    broker, worker, ends, path, n = ctx["broker"], ctx["worker"], ctx["ends"], ctx["path"], a.lines
    cpu = lambda: Cpu(worker.proc.pid, broker.pids()[0])    # noqa: E731
    variants = a.variants.split(",")
    topic = f"lines-{variants[0]}"
    if "source" not in a.parts.split(","):      # --parts sink alone: the worker fills the topics
        for v in variants:
            broker.create_topic(f"lines-{v}", 1)
            worker_source(worker, v, f"lines-{v}", path, n, ends, cpu(), ctx["timeout"])
    out: dict[str, Any] = {}
    c = cpu()
    elapsed = asyncio.run(_aio_consume(broker.bootstrap, topic, n, ctx["timeout"]))
    out["aio_consumer"] = {"lines": n, "seconds": elapsed, "lines_per_s": n / elapsed, **c.since(n)}
    log(f"  AsyncConsumer ceiling: {out['aio_consumer']['lines_per_s']:,.0f} lines/s")
    c = cpu()
    ck = consume_run(broker.bootstrap, topic, 1, n, LINE_BYTES, broker.pids(), ctx["timeout"])
    out["confluent_consumer"] = {"lines": n, "seconds": ck["seconds"], "lines_per_s": ck["records_per_s"],
                                 "timed_lines": ck["timed_records"], "first_batch": ck["first_batch"],
                                 **c.since(n)}
    log(f"  confluent-kafka consumer: {ck['records_per_s'] or 0:,.0f} lines/s (after its first "
        f"batch of {ck['first_batch']:,})")
    for v in variants:
        res = worker_sink(worker, v, f"lines-{v}", ctx["wd"] / f"sink-{v}.txt", path, n, ends,
                          cpu(), ctx["timeout"])
        res["ratio_to_aio_consumer"] = res["lines_per_s"] / out["aio_consumer"]["lines_per_s"]
        out[f"worker_{v}"] = res
        log(f"  worker sink ({v}): {res['lines_per_s']:,.0f} lines/s (10-90 %: "
            f"{res['steady_lines_per_s'] or 0:,.0f}; committed at {res['committed_s']:.2f} s; "
            f"worker CPU {res['worker_cpu_us_per_line']:.1f} us/line)")
    return out


# ---- 3. syslog over UDP -----------------------------------------------------------------------

READER = r"""
import json, os, socket, sys, time
from clients.connect.connectors.syslog_source import socket_drops
port, rcvbuf, expected = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)     # as the syslog task sets it
s.bind(("127.0.0.1", port))
s.settimeout(0.25)
print("ready", flush=True)
n, first, last, start = 0, None, None, time.monotonic()
recvfrom = s.recvfrom
while n < expected:
    try:
        recvfrom(65535)
    except socket.timeout:
        now = time.monotonic()
        if (last is not None and now - last > 1.5) or (last is None and now - start > 120):
            break
        continue
    n += 1
    last = time.monotonic()
    if first is None:
        first = last
time.sleep(1.0)
print(json.dumps({"received": n, "rcvbuf": s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                  "socket_drops": socket_drops(os.fstat(s.fileno()).st_ino),
                  "seconds": (last - first) if n > 1 else 0.0}), flush=True)
"""


def send_syslog(port: int, rate: int, seconds: float, during: Callable[[], None] | None = None
                ) -> dict[str, Any]:
    """Run the syslog sender process; `during()` is called every POLL_S while it runs."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    count = int(rate * seconds)
    p = subprocess.Popen([sys.executable, "-m", "tests.support.syslog_sender", "--host", "127.0.0.1",
                          "--port", str(port), "--count", str(count), "--rate", str(rate)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    while p.poll() is None:
        if during is not None:
            during()
        time.sleep(POLL_S)
    outs = p.stdout.read() if p.stdout else ""
    if p.returncode != 0:
        raise BenchFailure(f"syslog sender exited with {p.returncode}")
    sent = json.loads(outs.strip().splitlines()[-1])
    sent["rate_sent"] = sent["sent"] / sent["seconds"] if sent["seconds"] else None
    return sent


def reader_step(rate: int, seconds: float) -> dict[str, Any]:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    count = int(rate * seconds)
    r = subprocess.Popen([sys.executable, "-c", READER, str(port), str(8 << 20), str(count)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    assert r.stdout is not None
    if r.stdout.readline().strip() != "ready":
        raise BenchFailure("the UDP reader did not start")
    sent = send_syslog(port, rate, seconds)
    out = json.loads(r.stdout.readline())
    r.wait(30)
    lost = sent["sent"] - out["received"]
    return {**sent, **out, "lost": lost, "no_drops": lost == 0 and out["socket_drops"] == 0}


def scrape(worker: ConnectWorker, name: str) -> dict[str, float]:
    with urllib.request.urlopen(worker.url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    got = {}
    for m in SYSLOG_METRICS:
        hit = re.search(r"^kafka_connect_%s\{[^}]*connector=\"%s\"[^}]*\} (\S+)$" % (m, re.escape(name)),
                        text, re.M)
        got[m] = float(hit.group(1)) if hit else 0.0
    return got


def worker_step(worker: ConnectWorker, name: str, port: int, topic: str, rate: int, seconds: float,
                ends: Ends, cpu: Cpu) -> dict[str, Any]:
    before, end0 = scrape(worker, name), ends(topic)
    t0 = time.perf_counter()
    seen: list[tuple[float, int]] = []

    def watch() -> None:
        seen.append((time.perf_counter(), ends(topic)))
    watch()
    sent = send_syslog(port, rate, seconds, watch)
    changed = time.perf_counter()
    while time.perf_counter() - changed < 1.5:      # until the topic has not grown for 1.5 s
        time.sleep(POLL_S)
        watch()
        if seen[-1][1] != seen[-2][1]:
            changed = seen[-1][0]
    wall = time.perf_counter() - t0
    after = scrape(worker, name)
    d = {m.replace("syslog_", "").replace("_total", ""): int(after[m] - before[m]) for m in SYSLOG_METRICS}
    in_topic = seen[-1][1] - end0
    moved = [t for t, v in seen if v > end0]
    last = next(t for t, v in seen if v == seen[-1][1])
    topic_rate = in_topic / (last - moved[0]) if moved and last > moved[0] else None
    unaccounted = sent["sent"] - d["datagrams_received"] - d["datagrams_dropped"] - d["socket_drops"]
    used = cpu.since(d["datagrams_received"])
    return {**sent, **d, "in_topic": in_topic, "topic_dgrams_per_s": topic_rate,
            "unaccounted": unaccounted, "worker_cpu_s": used["worker_cpu_s"],
            "worker_cpu_us_per_dgram": used["worker_cpu_us_per_line"],
            "worker_cpu_share": used["worker_cpu_s"] / wall, "step_wall_s": wall,
            "no_drops": (d["datagrams_received"] == sent["sent"] and d["datagrams_dropped"] == 0
                         and d["socket_drops"] == 0 and in_topic == sent["sent"])}


def syslog_part(ctx: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    broker, worker, ends = ctx["broker"], ctx["worker"], ctx["ends"]
    name, topic, port = "syslog", "syslog", free_port()
    broker.create_topic(topic, 1)
    connector(worker, name, {"connector.class": "SyslogSource", "tasks.max": "1", "topic": topic,
                             "syslog.host": "127.0.0.1", "syslog.port": str(port),
                             "key.converter": STRING, "value.converter": JSON,
                             "value.converter.schemas.enable": "false"})
    deadline = time.monotonic() + 30
    while f'connector="{name}"' not in urllib.request.urlopen(worker.url + "/metrics").read().decode():
        if time.monotonic() > deadline:
            raise BenchFailure("the syslog task did not start")
        time.sleep(0.1)
    time.sleep(0.5)
    steps: list[dict[str, Any]] = []
    for rate in [int(x) for x in a.syslog_rates.split(",")]:
        reader = reader_step(rate, a.syslog_seconds)
        w = worker_step(worker, name, port, topic, rate, a.syslog_seconds, ends,
                        Cpu(worker.proc.pid, broker.pids()[0]))
        log(f"  syslog {rate:,}/s: sent {w['rate_sent'] or 0:,.0f}/s; worker received "
            f"{w['datagrams_received']:,.0f} of {w['sent']:,}, queue drops "
            f"{w['datagrams_dropped']:,.0f}, socket drops {w['socket_drops']:,.0f}, in topic "
            f"{w['in_topic']:,} ({w['topic_dgrams_per_s'] or 0:,.0f}/s), worker CPU "
            f"{w['worker_cpu_us_per_dgram']:.0f} us/datagram ({w['worker_cpu_share']:.0%} of a core "
            f"over the step); reader received "
            f"{reader['received']:,} (socket drops {reader['socket_drops']:,})")
        steps.append({"rate": rate, "worker": w, "reader": reader})
    delete(worker, name)
    best = lambda who: max((s["rate"] for s in steps if s[who]["no_drops"]), default=None)  # noqa: E731
    return {"steps": steps, "worker_max_rate_no_drops": best("worker"),
            "reader_max_rate_no_drops": best("reader")}


# ---- runs and tables --------------------------------------------------------------------------

def one_run(r: int, a: argparse.Namespace, wd: Path, path: Path) -> dict[str, Any]:
    rd = wd / f"run{r}"
    broker = StromBroker(rd)
    worker = ConnectWorker(rd / "worker", "standalone", {
        "bootstrap.servers": broker.bootstrap, "key.converter": STRING, "value.converter": STRING,
        "offset.flush.interval.ms": str(a.flush_interval_ms)}).start()
    ends = Ends(broker.bootstrap)
    ctx = {"broker": broker, "worker": worker, "ends": ends, "path": path, "wd": rd,
           "timeout": 120 + a.lines / 2000}
    res: dict[str, Any] = {"loadavg": loadavg()}
    try:
        for part, fn in (("source", source_part), ("sink", sink_part), ("syslog", syslog_part)):
            if part in a.parts.split(","):
                log(f"run {r}: {part}")
                res[part] = fn(ctx, a)
    except BaseException:
        log(f"worker log tail:\n{worker.output()[-3000:]}")
        raise
    finally:
        ends.close()
        worker.stop()
        broker.close()
        shutil.rmtree(rd, ignore_errors=True)
    return res


def cell(runs: list[dict[str, Any]], part: str, row: str, key: str) -> dict[str, Any]:
    return median_of_runs([r[part][row].get(key) for r in runs if part in r and row in r[part]])


def file_table(runs: list[dict[str, Any]], part: str, rows: list[tuple[str, str]], ratio_key: str,
               ratio_name: str, extra_ratio: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    out, table = [], []
    for row, label in rows:
        if not any(part in r and row in r[part] for r in runs):
            continue
        lps = cell(runs, part, row, "lines_per_s")
        x = {"row": row, "label": label, "lines_per_s": lps,
             "steady_lines_per_s": cell(runs, part, row, "steady_lines_per_s"),
             "ratio": cell(runs, part, row, ratio_key),
             "extra_ratio": cell(runs, part, row, extra_ratio[0]) if extra_ratio else None,
             "cpu_us_per_line": cell(runs, part, row, "worker_cpu_us_per_line"
                                     if row.startswith("worker_") else "client_cpu_us_per_line"),
             "broker_cpu_us_per_line": cell(runs, part, row, "broker_cpu_us_per_line")}
        out.append(x)
        m = lambda c: c["median"] if c else None      # noqa: E731
        worker_row = row.startswith("worker_")
        table.append([label, m(lps), f"{lps['spread']:.0%}" if lps["spread"] is not None else None,
                      m(x["steady_lines_per_s"]), m(x["ratio"])]
                     + ([m(x["extra_ratio"])] if extra_ratio else [])
                     + [m(x["cpu_us_per_line"]), m(x["broker_cpu_us_per_line"]),
                        (f">= {TARGET_LINES_S:,}" if worker_row else None)])
    headers = ["", "lines/s", "spread", "10-90 % lines/s", ratio_name] \
        + ([extra_ratio[1]] if extra_ratio else []) + ["CPU us/line", "broker CPU us/line", "target"]
    print_table(headers, table)
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    info = machine()
    log(f"machine: {info}")
    out = Results("connect", a, info)
    runs: list[dict[str, Any]] = []
    with workdir(prefix="strom-bench-connect-") as wd:
        path = wd / "lines.txt"
        write_lines(path, a.lines)
        for r in range(a.runs):
            res = one_run(r, a, wd, path)
            out.run(f"run{r}", {"repeat": r, "lines": a.lines, "line_bytes": LINE_BYTES, **res})
            runs.append(res)

    summary: dict[str, Any] = {}
    note = (f"{a.lines:,} lines of {LINE_BYTES} B, one partition, one broker, one standalone worker "
            f"(offset.flush.interval.ms={a.flush_interval_ms}); {runs_note(a.runs)}; cpus={info['cpus']}; "
            f"CPU us/line: the worker process's (worker rows) or the client's, all its threads "
            f"(ceilings); spread=(max-min)/median")
    names = {"string": "StringConverter", "json": "JsonConverter, schemas"}
    variants = a.variants.split(",")
    if "source" in a.parts:
        print(f"\n1. file source -> topic: {note}; ratios are medians of per-run ratios")
        summary["source"] = file_table(
            runs, "source", [("aio_producer", "ceiling: strom AsyncProducer, plain loop"),
                             ("confluent_producer", "ceiling: confluent-kafka produce_batch")]
            + [(f"worker_{v}", f"worker FileStreamSource, {names[v]}") for v in variants],
            "ratio_to_aio_producer", "x AsyncProducer", ("ratio_to_confluent", "x confluent-kafka"))
    if "sink" in a.parts:
        print(f"\n2. topic -> file sink: {note}; lines/s to the whole file (its last bytes come "
              f"with the flush on the offset commit)")
        summary["sink"] = file_table(
            runs, "sink", [("aio_consumer", "ceiling: strom AsyncConsumer, assigned"),
                           ("confluent_consumer", "confluent-kafka consumer (after 1st batch)")]
            + [(f"worker_{v}", f"worker FileStreamSink, {names[v]}") for v in variants],
            "ratio_to_aio_consumer", "x AsyncConsumer")
    if "syslog" in a.parts:
        print(f"\n3. syslog over UDP, {a.syslog_seconds:g} s a step, sender in its own process; "
              f"{runs_note(a.runs)}; medians of the runs")
        rows, steps = [], []
        for i, rate in enumerate(int(x) for x in a.syslog_rates.split(",")):
            st = [r["syslog"]["steps"][i] for r in runs if "syslog" in r]
            med = lambda who, k: median_of_runs([s[who][k] for s in st])["median"]   # noqa: E731
            x = {"rate": rate, "sent_per_s": med("worker", "rate_sent"),
                 "worker_received": med("worker", "datagrams_received"),
                 "worker_queue_drops": med("worker", "datagrams_dropped"),
                 "worker_socket_drops": med("worker", "socket_drops"),
                 "in_topic": med("worker", "in_topic"),
                 "topic_dgrams_per_s": med("worker", "topic_dgrams_per_s"),
                 "worker_cpu_us_per_dgram": med("worker", "worker_cpu_us_per_dgram"),
                 "worker_no_drop_runs": sum(1 for s in st if s["worker"]["no_drops"]),
                 "reader_received": med("reader", "received"),
                 "reader_lost": med("reader", "lost"),
                 "reader_no_drop_runs": sum(1 for s in st if s["reader"]["no_drops"]), "runs": len(st)}
            steps.append(x)
            rows.append([rate, x["sent_per_s"], x["worker_received"], x["worker_queue_drops"],
                         x["worker_socket_drops"], x["in_topic"], x["topic_dgrams_per_s"],
                         x["worker_cpu_us_per_dgram"], f"{x['worker_no_drop_runs']}/{len(st)}", x["reader_received"],
                         x["reader_lost"], f"{x['reader_no_drop_runs']}/{len(st)}"])
        print_table(["rate/s", "sent/s", "worker received", "queue drops", "socket drops",
                     "in topic", "topic dgrams/s", "worker CPU us/dgram", "no drops", "reader received", "reader lost",
                     "reader no drops"], rows)
        best_w = median_of_runs([r["syslog"]["worker_max_rate_no_drops"] for r in runs if "syslog" in r])
        best_r = median_of_runs([r["syslog"]["reader_max_rate_no_drops"] for r in runs if "syslog" in r])
        print(f"highest rate without drops (median of runs): worker {best_w['median'] or 0:,.0f}/s "
              f"(runs {best_w['runs']}), plain reader {best_r['median'] or 0:,.0f}/s (runs {best_r['runs']})")
        summary["syslog"] = {"steps": steps, "worker_max_rate_no_drops": best_w,
                             "reader_max_rate_no_drops": best_r}
    out.summary(summary)
    write_json(a.json, {"benchmark": "connect", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir), **summary})
    return 0


if __name__ == "__main__":
    run_main(main)
