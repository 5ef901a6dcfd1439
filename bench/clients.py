"""Client speed (issue 25): strom's own Python client against the pure-Python clients
(aiokafka, kafka-python) and confluent-kafka (librdkafka, C: the ceiling column), the same
broker, the same run, the same records.

    .venv/bin/python bench/clients.py                # 3 rounds, 100 B and 1 KiB, 1 and 16 partitions
    .venv/bin/python bench/clients.py --quick        # 1 round, 20,000 / 10,000 records: a smoke test
    .venv/bin/python bench/clients.py --sizes 100 --partitions 1 --clients strom,aiokafka --label after

Targets (issue 25): strom's AsyncProducer >= 3x the faster of aiokafka and kafka-python, the
sync Producer >= 2x, both strom consumers >= 2x; the sync Producer's send() loop alone
>= 300,000 records/s of 100 B.

One standalone strom broker (`python -m broker`, one network thread, as bench/produce_consume.py's
strom-1) serves the whole invocation. Every topic is created before the first run: one per
round, workload (record size, partitions) and producer row, so every produce run writes a
fresh topic; a round's topics are deleted once its consume runs are done. Every client run
is a process of its own (this script with `--worker`), so no client's memory, threads or
garbage-collector state reach the next one; the broker is another process, as always.

A round runs, for each workload, every producer row, then every consumer row; the order of
the rows is rotated by one each round so that no client always runs first (or right after
the same one). Ratios are per round (each run over the same round's aiokafka / kafka-python /
confluent-kafka run of the same workload), and the table shows the medians of those ratios.

**Producers.** Records of --sizes bytes (64 random payloads in turn), no key, record i to
partition i mod --partitions given explicitly to every client (their default partitioners
place records without a key in different ways). The same settings for all:
acks=1, not idempotent (kafka-python 3 and strom default to idempotence, which needs
acks=all), linger.ms=5, batch size 16384 B (librdkafka's default is 1,000,000: set to
16384), no compression, buffer memory 32 MiB (strom's default; librdkafka:
queue.buffering.max.kbytes=32768 with the record-count cap out of the way; aiokafka and
kafka-python 3.0.12 have no such setting). Other settings are each client's defaults (at
most 5 requests in flight per connection in strom and kafka-python, librdkafka's 1,000,000,
aiokafka one request per broker at a time). Before the clock: the client connects, fetches
the topic's metadata and has one record to the `bench-warmup` topic acknowledged. The clock runs from
the first send to the moment every record is acknowledged (flush() returned and every
delivery confirmed); "send loop rec/s" is the records over the time until the loop of
sends returned, before flush().
  - strom AsyncProducer.send: `fut = await producer.send(topic, value, partition=p)` per
    record, then `await flush()`; each future checked afterwards;
  - strom AsyncProducer.send_batch: `await producer.send_batch(topic, [(None, value, None,
    None, p), ...])` of --batch-records records a call (one future per call);
  - strom Producer (sync): `producer.send(topic, value, partition=p)` from a plain loop,
    then `flush()`; each concurrent future checked afterwards;
  - aiokafka AIOKafkaProducer: `await send(...)` per record, then `flush()`; its futures checked;
  - kafka-python KafkaProducer: `send(...)` loop, then `flush()`; its futures checked;
  - confluent-kafka Producer: `produce(...)` loop (on BufferError: `poll(0.001)` and again),
    then `flush()`; delivery reports of failures only (`_common.DeliveryCounter`): once
    flush() returned 0, acknowledged = produced - failed.
A record that failed, or was not acknowledged when flush() returned, fails the run; so does
a topic whose end offsets, read afterwards, do not add up to --records.

**Consumers.** All consumers of a round and workload read the same topic, the one
confluent-kafka's producer wrote in that round (the first producer row that succeeded when
confluent-kafka is not among --clients), so they all get the same batches. Each `assign()`s
every partition and seeks to the beginning (no group membership; confluent-kafka gets a fresh
group.id it never uses), fetches the topic's metadata before the clock, and reads until it
has --records records, touching each record's value (len()). At most --poll-records records
(500, Kafka's max.poll.records default) a call, and never more than are still to come, so the
last call does not wait out its timeout; fetch settings are the clients' defaults (the same
in all four: fetch.max.wait.ms 500, 1 MiB a partition, 50 MiB a fetch) except
confluent-kafka's fetch.queue.backoff.ms, 10 ms instead of 1 s (see bench/security.py).
  - strom Consumer (sync) `poll(1.0, n)`, strom AsyncConsumer `await poll(1.0, n)`,
    aiokafka `await getmany(timeout_ms=1000, max_records=n)`, kafka-python
    `poll(timeout_ms=1000, max_records=n)`, confluent-kafka `consume(num_messages=n, timeout=1.0)`.
rec/s = --records over the time from the first poll call to the return of the call that
brought the last record (the first ListOffsets and fetch are inside it); "after 1st batch"
is `_common.RateClock`'s rate (the clock starts when the first batch is in). Fewer records,
or a byte count other than records x size, fails the run.

"client CPU us/rec" is the client process's CPU (user+system, all its threads: strom's and
the sync clients' I/O threads, librdkafka's) over the measured time per record; "broker CPU
us/rec" the broker process's. Every run of a round and workload goes to
bench/results/clients-<date>-<time>[-<label>]/ as soon as it is done, the medians to
summary.json there. A failed run does not stop the others; the tables show it as FAILED, and
the script ends with `FAILED: <why>` and exit status 1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (MB, REPO, BenchFailure, DeliveryCounter,  # noqa: E402
                           RateClock, Results, StromBroker, add_results_args, cpu_seconds_of,
                           end_offsets, loadavg, log, machine, make_values, median_of_runs,
                           print_table, run_main, runs_note, workdir, write_json)

WARMUP_TOPIC = "bench-warmup"
BUFFER_MEMORY = 32 << 20

# Rows of the tables: (row, family, label). A family name in --clients selects its rows.
PRODUCERS = [
    ("strom-async", "strom", "strom AsyncProducer.send"),
    ("strom-async-batch", "strom", "strom AsyncProducer.send_batch"),
    ("strom-sync", "strom", "strom Producer.send (sync)"),
    ("aiokafka", "aiokafka", "aiokafka AIOKafkaProducer"),
    ("kafka-python", "kafka-python", "kafka-python KafkaProducer"),
    ("confluent", "confluent", "confluent-kafka Producer (C, ceiling)"),
]
CONSUMERS = [
    ("strom-sync", "strom", "strom Consumer.poll (sync)"),
    ("strom-async", "strom", "strom AsyncConsumer.poll"),
    ("aiokafka", "aiokafka", "aiokafka AIOKafkaConsumer.getmany"),
    ("kafka-python", "kafka-python", "kafka-python KafkaConsumer.poll"),
    ("confluent", "confluent", "confluent-kafka Consumer.consume (C, ceiling)"),
]
PURE_PYTHON = ("aiokafka", "kafka-python")
CEILING = "confluent"
# Issue 25's targets: ratio to the faster pure-Python client, per row.
PRODUCE_TARGETS = {"strom-async": 3.0, "strom-async-batch": 3.0, "strom-sync": 2.0}
CONSUME_TARGETS = {"strom-sync": 2.0, "strom-async": 2.0}
SEND_LOOP_TARGET = 300_000          # strom Producer.send() loop, records/s of 100 B
SEND_LOOP_TARGET_SIZE = 100
DEFAULT_RECORDS = {100: 200_000, 1024: 100_000}
QUICK_RECORDS = {100: 20_000, 1024: 10_000}


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    ap.add_argument("--partitions", default="1,16", help="partition counts")
    ap.add_argument("--records", type=int, default=None,
                    help="records per run, every size (default 200,000 of 100 B, 100,000 of "
                         "1 KiB and larger; --quick: 20,000 and 10,000)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="rounds; the tables show medians (3 at least for a figure that claims a target)")
    ap.add_argument("--quick", action="store_true", help="1 round of fewer records (a smoke test)")
    rows = sorted({r for r, _, _ in PRODUCERS + CONSUMERS} | {f for _, f, _ in PRODUCERS})
    ap.add_argument("--clients", default="strom,aiokafka,kafka-python,confluent",
                    help="comma list of families (strom, aiokafka, kafka-python, confluent) "
                         f"and/or rows ({', '.join(rows)})")
    ap.add_argument("--batch-records", type=int, default=1000,
                    help="records per AsyncProducer.send_batch call")
    ap.add_argument("--poll-records", type=int, default=500,
                    help="most records one poll/getmany/consume call returns, every consumer")
    ap.add_argument("--json", help="also write the summary to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    add_results_args(ap)
    a = ap.parse_args(argv)
    if a.quick:
        a.repeats = 1
    a.size_list = [int(x) for x in a.sizes.split(",")]
    a.partition_list = [int(x) for x in a.partitions.split(",")]
    a.records_by_size = {s: a.records if a.records else records_for(s, a.quick) for s in a.size_list}
    wanted = {x.strip() for x in a.clients.split(",") if x.strip()}
    known = {r for r, _, _ in PRODUCERS + CONSUMERS} | {f for _, f, _ in PRODUCERS}
    if wanted - known:
        ap.error(f"--clients: unknown {', '.join(sorted(wanted - known))}")
    a.producers = [r for r, f, _ in PRODUCERS if r in wanted or f in wanted]
    a.consumers = [r for r, f, _ in CONSUMERS if r in wanted or f in wanted]
    return a


def records_for(size: int, quick: bool) -> int:
    table = QUICK_RECORDS if quick else DEFAULT_RECORDS
    return table.get(size, table[1024] if size > 100 else table[100])


# ---- measuring, inside a worker process ----------------------------------------------------------

class Clock:
    """Wall time, this process's CPU (every thread) and the broker's CPU over one run."""

    def __init__(self, broker_pid: int):
        self.broker_pid = broker_pid
        self.t0 = self.t_loop = self.t1 = 0.0
        self.cpu0 = self.cpu1 = self.b0 = self.b1 = 0.0

    def start(self) -> None:
        self.b0 = cpu_seconds_of(self.broker_pid)
        self.cpu0 = time.process_time()
        self.t0 = time.perf_counter()

    def loop_done(self) -> None:
        self.t_loop = time.perf_counter()

    def stop(self) -> None:
        self.t1 = time.perf_counter()
        self.cpu1 = time.process_time()
        self.b1 = cpu_seconds_of(self.broker_pid)

    def figures(self, records: int, size: int) -> dict[str, Any]:
        secs = self.t1 - self.t0
        out = {"records": records, "seconds": secs, "records_per_s": records / secs,
               "mb_per_s": records * size / secs / MB,
               "client_cpu_s": self.cpu1 - self.cpu0, "broker_cpu_s": self.b1 - self.b0,
               "client_cpu_us_per_record": (self.cpu1 - self.cpu0) / records * 1e6,
               "broker_cpu_us_per_record": (self.b1 - self.b0) / records * 1e6}
        if self.t_loop:
            out["loop_seconds"] = self.t_loop - self.t0
            out["loop_records_per_s"] = records / (self.t_loop - self.t0)
        return out


def settle_futures(counter: DeliveryCounter, outcomes: list[tuple[bool, BaseException | None]],
                   queued: int, what: str) -> int:
    """Count each record's (done, error) into `counter`; BenchFailure unless every one of
    `queued` was acknowledged."""
    pending = 0
    for done, err in outcomes:
        if not done:
            pending += 1
        else:
            counter(None if err is None else f"{type(err).__name__}: {err}")
    return counter.settle(queued, pending, what)


def _aio_outcome(f: "asyncio.Future[Any]") -> tuple[bool, BaseException | None]:
    if not f.done():
        return False, None
    if f.cancelled():
        return True, asyncio.CancelledError("cancelled")
    return True, f.exception()


async def produce_strom_async(s: dict[str, Any], clock: Clock, batch: bool) -> int:
    from clients.aio import AsyncProducer
    topic, n, parts, values = s["topic"], s["records"], s["partitions"], make_values(s["size"], "none")
    p = AsyncProducer({"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients",
                       "acks": "1", "enable.idempotence": False, "linger.ms": 5,
                       "batch.size": 16384, "compression.type": "none",
                       "buffer.memory": BUFFER_MEMORY})
    await p.start()
    await p.partitions_for(topic)
    await (await p.send(WARMUP_TOPIC, b"w"))
    counter = DeliveryCounter(every=True)
    what = f"strom AsyncProducer.{'send_batch' if batch else 'send'} to {topic}"
    clock.start()
    if batch:
        chunk = s["batch_records"]
        calls: list[tuple[asyncio.Future[int], int]] = []
        send_batch = p.send_batch
        for start in range(0, n, chunk):
            recs = [(None, values[i & 63], None, None, i % parts)
                    for i in range(start, min(n, start + chunk))]
            calls.append((await send_batch(topic, recs), len(recs)))
        clock.loop_done()
        await p.flush(s["flush_timeout"])
        clock.stop()
        pending = 0
        for f, k in calls:
            done, err = _aio_outcome(f)
            if not done:
                pending += k
            elif err is not None:
                counter.failed += k
                key = f"{type(err).__name__}: {err}"
                counter.errors[key] = counter.errors.get(key, 0) + k
            elif f.result() != k:
                raise BenchFailure(f"{what}: a call of {k} records resolved to {f.result()}")
            else:
                counter.acked += k
        acked = counter.settle(n, pending, what)
    else:
        futs: list[asyncio.Future[Any]] = []
        append, send = futs.append, p.send
        for i in range(n):
            append(await send(topic, values[i & 63], partition=i % parts))
        clock.loop_done()
        await p.flush(s["flush_timeout"])
        clock.stop()
        acked = settle_futures(counter, [_aio_outcome(f) for f in futs], n, what)
    await p.close()
    return acked


def produce_strom_sync(s: dict[str, Any], clock: Clock) -> int:
    from clients.producer import Producer
    topic, n, parts, values = s["topic"], s["records"], s["partitions"], make_values(s["size"], "none")
    p = Producer({"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients", "acks": "1",
                  "enable.idempotence": False, "linger.ms": 5, "batch.size": 16384,
                  "compression.type": "none", "buffer.memory": BUFFER_MEMORY})
    p.partitions_for(topic)
    p.send(WARMUP_TOPIC, b"w").result(30)
    futs: list[Any] = []
    append, send = futs.append, p.send
    clock.start()
    for i in range(n):
        append(send(topic, values[i & 63], partition=i % parts))
    clock.loop_done()
    try:
        p.flush(s["flush_timeout"])
    except Exception as e:          # a timeout: the records left show as unacknowledged
        log(f"strom Producer.flush: {type(e).__name__}: {e}")
    clock.stop()
    outcomes = [(f.done(), f.exception(0) if f.done() else None) for f in futs]
    acked = settle_futures(DeliveryCounter(every=True), outcomes, n, f"strom Producer to {topic}")
    p.close()
    return acked


async def produce_aiokafka(s: dict[str, Any], clock: Clock) -> int:
    from aiokafka import AIOKafkaProducer
    topic, n, parts, values = s["topic"], s["records"], s["partitions"], make_values(s["size"], "none")
    p = AIOKafkaProducer(bootstrap_servers=s["bootstrap"], client_id="bench-clients", acks=1,
                         enable_idempotence=False, linger_ms=5, max_batch_size=16384,
                         compression_type=None)
    await p.start()
    await p.partitions_for(topic)
    await (await p.send(WARMUP_TOPIC, b"w"))
    futs: list[asyncio.Future[Any]] = []
    append, send = futs.append, p.send
    clock.start()
    for i in range(n):
        append(await send(topic, values[i & 63], partition=i % parts))
    clock.loop_done()
    try:
        await asyncio.wait_for(p.flush(), s["flush_timeout"])
    except TimeoutError:
        log("aiokafka flush timed out")
    clock.stop()
    acked = settle_futures(DeliveryCounter(every=True), [_aio_outcome(f) for f in futs], n,
                           f"aiokafka to {topic}")
    await p.stop()
    return acked


def produce_kafka_python(s: dict[str, Any], clock: Clock) -> int:
    from kafka import KafkaProducer
    topic, n, parts, values = s["topic"], s["records"], s["partitions"], make_values(s["size"], "none")
    p = KafkaProducer(bootstrap_servers=s["bootstrap"], client_id="bench-clients", acks=1,
                      enable_idempotence=False, linger_ms=5, batch_size=16384,
                      compression_type=None)
    p.partitions_for(topic)
    p.send(WARMUP_TOPIC, b"w").get(30)
    futs: list[Any] = []
    append, send = futs.append, p.send
    clock.start()
    for i in range(n):
        append(send(topic, values[i & 63], partition=i % parts))
    clock.loop_done()
    try:
        p.flush(s["flush_timeout"])
    except Exception as e:
        log(f"kafka-python flush: {type(e).__name__}: {e}")
    clock.stop()
    acked = settle_futures(DeliveryCounter(every=True), [(f.is_done, f.exception) for f in futs],
                           n, f"kafka-python to {topic}")
    p.close()
    return acked


def produce_confluent(s: dict[str, Any], clock: Clock) -> int:
    from confluent_kafka import Producer
    topic, n, parts, values = s["topic"], s["records"], s["partitions"], make_values(s["size"], "none")
    counter = DeliveryCounter()
    p = Producer({"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients", "acks": "1",
                  "enable.idempotence": False, "linger.ms": 5, "batch.size": 16384,
                  "compression.type": "none", "queue.buffering.max.kbytes": BUFFER_MEMORY >> 10,
                  "queue.buffering.max.messages": 10_000_000, "log_level": 3, **counter.config()})
    p.list_topics(topic, timeout=10)
    warm = DeliveryCounter()            # failures only, as configured
    p.produce(WARMUP_TOPIC, b"w", on_delivery=warm)
    warm.settle(1, p.flush(30), "warm-up")
    produce, poll = p.produce, p.poll
    clock.start()
    for i in range(n):
        while True:
            try:
                produce(topic, values[i & 63], partition=i % parts, on_delivery=counter)
                break
            except BufferError:
                poll(0.001)     # the queue is full: wait for room (a retry at once would spin)
    clock.loop_done()
    left = p.flush(s["flush_timeout"])
    clock.stop()
    return counter.settle(n, left, f"confluent-kafka to {topic}")


class Received:
    """What a consumer run got: records, bytes of their values, and the RateClock."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.rate = RateClock()

    def add(self, n: int, nbytes: int) -> None:
        self.records += n
        self.bytes += nbytes
        self.rate.add(n, time.perf_counter())


def consume_strom_sync(s: dict[str, Any], clock: Clock, got: Received) -> None:
    from clients.consumer import Consumer
    from clients.types import TopicPartition
    topic, n, k = s["topic"], s["records"], s["poll_records"]
    c = Consumer(config={"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.partitions_for(topic)
    tps = [TopicPartition(topic, p) for p in range(s["partitions"])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    poll, deadline = c.poll, time.monotonic() + s["timeout"]
    clock.start()
    while got.records < n and time.monotonic() < deadline:
        recs: list[Any] = poll(1.0, min(k, n - got.records))
        if recs:
            nbytes = 0
            for r in recs:
                nbytes += len(r.value)
            got.add(len(recs), nbytes)
    clock.stop()
    c.close(autocommit=False)


async def consume_strom_async(s: dict[str, Any], clock: Clock, got: Received) -> None:
    from clients.aio import AsyncConsumer
    from clients.types import TopicPartition
    topic, n, k = s["topic"], s["records"], s["poll_records"]
    c = AsyncConsumer(config={"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients",
                              "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    await c.start()
    await c.partitions_for(topic)
    tps = [TopicPartition(topic, p) for p in range(s["partitions"])]
    await c.assign(tps)
    await c.seek_to_beginning(*tps)
    poll, deadline = c.poll, time.monotonic() + s["timeout"]
    clock.start()
    while got.records < n and time.monotonic() < deadline:
        recs: list[Any] = await poll(1.0, min(k, n - got.records))
        if recs:
            nbytes = 0
            for r in recs:
                nbytes += len(r.value)
            got.add(len(recs), nbytes)
    clock.stop()
    await c.close(autocommit=False)


async def consume_aiokafka(s: dict[str, Any], clock: Clock, got: Received) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    topic, n, k = s["topic"], s["records"], s["poll_records"]
    c = AIOKafkaConsumer(bootstrap_servers=s["bootstrap"], client_id="bench-clients",
                         group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    await c.topics()                    # the cluster's metadata before the clock
    tps = [TopicPartition(topic, p) for p in range(s["partitions"])]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    getmany, deadline = c.getmany, time.monotonic() + s["timeout"]
    clock.start()
    while got.records < n and time.monotonic() < deadline:
        batches: dict[Any, list[Any]] = await getmany(timeout_ms=1000,
                                                      max_records=min(k, n - got.records))
        if batches:
            nrec = nbytes = 0
            for recs in batches.values():
                nrec += len(recs)
                for r in recs:
                    nbytes += len(r.value)
            got.add(nrec, nbytes)
    clock.stop()
    await c.stop()


def consume_kafka_python(s: dict[str, Any], clock: Clock, got: Received) -> None:
    from kafka import KafkaConsumer, TopicPartition
    topic, n, k = s["topic"], s["records"], s["poll_records"]
    c = KafkaConsumer(bootstrap_servers=s["bootstrap"], client_id="bench-clients", group_id=None,
                      enable_auto_commit=False, auto_offset_reset="earliest")
    c.partitions_for_topic(topic)
    tps = [TopicPartition(topic, p) for p in range(s["partitions"])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    poll, deadline = c.poll, time.monotonic() + s["timeout"]
    clock.start()
    while got.records < n and time.monotonic() < deadline:
        batches = poll(timeout_ms=1000, max_records=min(k, n - got.records))
        if batches:
            nrec = nbytes = 0
            for recs in batches.values():
                nrec += len(recs)
                for r in recs:
                    nbytes += len(r.value)
            got.add(nrec, nbytes)
    clock.stop()
    c.close(autocommit=False)


def consume_confluent(s: dict[str, Any], clock: Clock, got: Received) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    topic, n, k = s["topic"], s["records"], s["poll_records"]
    c = Consumer({"bootstrap.servers": s["bootstrap"], "client.id": "bench-clients",
                  "group.id": f"bench-clients-{time.time_ns()}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.queue.backoff.ms": 10, "log_level": 3})
    c.list_topics(topic, timeout=10)
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(s["partitions"])])
    consume, deadline = c.consume, time.monotonic() + s["timeout"]
    errors: list[str] = []
    clock.start()
    while got.records < n and time.monotonic() < deadline:
        msgs = consume(num_messages=min(k, n - got.records), timeout=1.0)
        if msgs:
            nrec = nbytes = 0
            for m in msgs:
                v = m.value()
                if v is None:
                    errors.append(str(m.error()))
                    continue
                nrec += 1
                nbytes += len(v)
            got.add(nrec, nbytes)
    clock.stop()
    c.close()
    if errors:
        raise BenchFailure(f"confluent-kafka consumer: {len(errors)} errors, e.g. {errors[0]}")


def worker(s: dict[str, Any]) -> dict[str, Any]:
    """One client run (in its own process): the figures of its measured part."""
    clock = Clock(s["broker_pid"])
    row, n, size = s["row"], s["records"], s["size"]
    if s["kind"] == "produce":
        produce: dict[str, Callable[[], int]] = {
            "strom-async": lambda: asyncio.run(produce_strom_async(s, clock, batch=False)),
            "strom-async-batch": lambda: asyncio.run(produce_strom_async(s, clock, batch=True)),
            "strom-sync": lambda: produce_strom_sync(s, clock),
            "aiokafka": lambda: asyncio.run(produce_aiokafka(s, clock)),
            "kafka-python": lambda: produce_kafka_python(s, clock),
            "confluent": lambda: produce_confluent(s, clock),
        }
        acked = produce[row]()
        return clock.figures(acked, size)
    got = Received()
    consume: dict[str, Callable[[], None]] = {
        "strom-sync": lambda: consume_strom_sync(s, clock, got),
        "strom-async": lambda: asyncio.run(consume_strom_async(s, clock, got)),
        "aiokafka": lambda: asyncio.run(consume_aiokafka(s, clock, got)),
        "kafka-python": lambda: consume_kafka_python(s, clock, got),
        "confluent": lambda: consume_confluent(s, clock, got),
    }
    consume[row]()
    if got.records != n:
        raise BenchFailure(f"{row} consumer: {got.records:,} of {n:,} records of {s['topic']} "
                           f"in {s['timeout']:.0f} s")
    if got.bytes != n * size:
        raise BenchFailure(f"{row} consumer: {got.bytes:,} bytes of values, {n * size:,} expected")
    out = clock.figures(n, size)
    out.update({"after_first_batch_records_per_s": got.rate.rate, "first_batch": got.rate.first,
                "first_batch_s": (got.rate.t0 or clock.t0) - clock.t0})
    return out


def worker_main(spec: str) -> int:
    try:
        out = worker(json.loads(spec))
    except Exception as e:
        print(json.dumps({"failed": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    print(json.dumps(out), flush=True)
    return 0


# ---- the runs, in this process -------------------------------------------------------------------

def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one client run in a process of its own; its figures, or {"failed": why}."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    limit = 300 + spec["records"] / 1000
    try:
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"failed": f"the worker did not finish within {limit:.0f} s"}
    lines = p.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"failed": f"the worker exited with {p.returncode} and no result"}
    if p.returncode != 0 and "failed" not in out:
        out["failed"] = f"the worker exited with {p.returncode}"
    return out


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create every topic in one request and wait until each partition has a leader."""
    from confluent_kafka.admin import NewTopic
    a = admin(bootstrap)
    fs = a.create_topics([NewTopic(t, num_partitions=p, replication_factor=1) for t, p in topics.items()],
                         operation_timeout=60)
    for f in fs.values():
        f.result(120)
    deadline = time.monotonic() + 60
    while True:
        md = a.list_topics(timeout=10).topics
        if all(t in md and md[t].error is None and len(md[t].partitions) == p
               and all(x.leader >= 0 for x in md[t].partitions.values()) for t, p in topics.items()):
            return
        if time.monotonic() > deadline:
            raise BenchFailure("created topics have no leaders after 60 s")
        time.sleep(0.2)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    if not topics:
        return
    ad = admin(bootstrap)          # held: the futures fail once the client is collected
    for t, f in ad.delete_topics(topics, operation_timeout=60).items():
        try:
            f.result(120)
        except Exception as e:          # only disk space is at stake
            log(f"deleting {t}: {e}")


def topic_name(r: int, size: int, parts: int, row: str) -> str:
    return f"clients-r{r}-{size}B-{parts}p-{row}"


def rotated(rows: list[str], r: int) -> list[str]:
    """Round r's order: the rows rotated by r, so no client always runs first."""
    if not rows:
        return []
    k = r % len(rows)
    return rows[k:] + rows[:k]


def add_ratios(runs: dict[str, dict[str, Any]]) -> None:
    """Each successful run's ratio to the faster pure-Python client and to confluent-kafka
    of the same round."""
    def rate(row: str) -> float | None:
        x = runs.get(row)
        return x.get("records_per_s") if x and "failed" not in x else None
    pure = [v for v in (rate(r) for r in PURE_PYTHON) if v]
    best_pure, ceiling = (max(pure) if pure else None), rate(CEILING)
    for x in runs.values():
        if "failed" in x:
            continue
        x["ratio_to_pure_python"] = x["records_per_s"] / best_pure if best_pure else None
        x["ratio_to_confluent"] = x["records_per_s"] / ceiling if ceiling else None


def one_round(r: int, size: int, parts: int, a: argparse.Namespace, broker: StromBroker,
              failures: list[str]) -> dict[str, Any]:
    n = a.records_by_size[size]
    pid = broker.pids()[0]
    base = {"kind": "", "bootstrap": broker.bootstrap, "partitions": parts, "size": size,
            "records": n, "broker_pid": pid, "batch_records": a.batch_records,
            "poll_records": a.poll_records, "flush_timeout": 120.0, "timeout": 60 + n / 2000}
    where = f"round {r}, {size} B, {parts} partition{'s' if parts > 1 else ''}"
    res: dict[str, Any] = {"round": r, "record_size": size, "partitions": parts, "records": n,
                           "loadavg": loadavg(), "produce_order": rotated(a.producers, r),
                           "consume_order": rotated(a.consumers, r), "produce": {}, "consume": {}}
    for row in res["produce_order"]:
        topic = topic_name(r, size, parts, row)
        out = run_worker({**base, "kind": "produce", "row": row, "topic": topic})
        if "failed" not in out:
            ends = end_offsets(broker.bootstrap, topic, parts)
            out["end_offsets"] = ends
            if sum(ends) != n:
                out["failed"] = f"{topic} holds {sum(ends):,} records after the run, {n:,} were acknowledged"
        res["produce"][row] = out
        if "failed" in out:
            failures.append(f"{where}: produce {row}: {out['failed']}")
            log(f"  FAILED produce {row}: {out['failed']}")
        else:
            log(f"  produce {row}: {out['records_per_s']:,.0f} rec/s (send loop "
                f"{out['loop_records_per_s']:,.0f} rec/s)")
    ok = [row for row in [CEILING, *res["produce_order"]]
          if row in res["produce"] and "failed" not in res["produce"][row]]
    if ok:
        res["consumed_topic_from"] = ok[0]
        topic = topic_name(r, size, parts, ok[0])
        for row in res["consume_order"]:
            out = run_worker({**base, "kind": "consume", "row": row, "topic": topic})
            res["consume"][row] = out
            if "failed" in out:
                failures.append(f"{where}: consume {row}: {out['failed']}")
                log(f"  FAILED consume {row}: {out['failed']}")
            else:
                log(f"  consume {row}: {out['records_per_s']:,.0f} rec/s")
    elif a.consumers:
        failures.append(f"{where}: no producer succeeded, nothing to consume")
    add_ratios(res["produce"])
    add_ratios(res["consume"])
    return res


# ---- tables --------------------------------------------------------------------------------------

def cell(runs: list[dict[str, Any]], phase: str, row: str, key: str) -> dict[str, Any]:
    return median_of_runs([x[phase][row].get(key) for x in runs
                           if row in x[phase] and "failed" not in x[phase][row]])


def status(ratio: dict[str, Any], target: float | None) -> str | None:
    if target is None or ratio["median"] is None:
        return None
    if not ratio["enough"]:
        return "- (< 3 runs)"
    return "met" if ratio["median"] >= target else "missed"


def failed_runs(runs: list[dict[str, Any]], phase: str, row: str) -> int:
    return sum(1 for x in runs if row in x[phase] and "failed" in x[phase][row])


def phase_rows(runs: list[dict[str, Any]], phase: str, names: list[str], keys: tuple[str, ...],
               labels: dict[str, str], targets: dict[str, float],
               out: dict[str, Any]) -> list[list[Any]]:
    """The table rows of one phase (produce or consume), and its figures into `out[phase]`:
    for each client row its medians of `keys` in that order, then target, status, failures."""
    rows = []
    for row in names:
        c = {k: cell(runs, phase, row, k) for k in keys}
        target = targets.get(row)
        fails = failed_runs(runs, phase, row)
        out[phase][row] = {**c, "failed_runs": fails, "target_ratio": target}
        first = c[keys[0]]
        rate = first["median"] if first["n"] else ("FAILED" if fails else None)
        spread = f"{first['spread']:.0%}" if first["spread"] is not None else None
        rows.append([labels[row], rate, spread, *(c[k]["median"] for k in keys[1:]),
                     f">= {target:g}x" if target else None,
                     status(c["ratio_to_pure_python"], target), fails or None])
    return rows


def workload_tables(runs: list[dict[str, Any]], a: argparse.Namespace, size: int,
                    parts: int) -> dict[str, Any]:
    labels = {r: label for r, _, label in PRODUCERS}
    clabels = {r: label for r, _, label in CONSUMERS}
    out: dict[str, Any] = {"record_size": size, "partitions": parts,
                           "records": a.records_by_size[size], "produce": {}, "consume": {}}
    rows = phase_rows(runs, "produce", a.producers, (
        "records_per_s", "mb_per_s", "ratio_to_pure_python", "ratio_to_confluent",
        "loop_records_per_s", "client_cpu_us_per_record", "broker_cpu_us_per_record"),
        labels, PRODUCE_TARGETS, out)
    print(f"\n{size} B records, {parts} partition{'s' if parts > 1 else ''}, "
          f"{a.records_by_size[size]:,} records a run: PRODUCE, {runs_note(a.repeats)}; record i "
          f"to partition i mod {parts} (explicit), acks=1, not idempotent, linger.ms=5, "
          f"batch 16384 B, no compression; rec/s from the first send to the last "
          f"acknowledgement; x = median of per-round ratios")
    print_table(["producer", "rec/s", "spread", "MB/s", "x pure-Python", "x confluent",
                 "send loop rec/s", "client CPU us/rec", "broker CPU us/rec", "target", "status",
                 "failed runs"], rows)
    if "strom-sync" in a.producers:
        loop = out["produce"]["strom-sync"]["loop_records_per_s"]
        if size == SEND_LOOP_TARGET_SIZE and loop["median"] is not None:
            verdict = ("met" if loop["median"] >= SEND_LOOP_TARGET else "missed") if loop["enough"] \
                else "no verdict: fewer than 3 runs"
            print(f"strom Producer.send() loop alone: {loop['median']:,.0f} rec/s (runs "
                  f"{', '.join(f'{v:,.0f}' for v in loop['runs'])}); target >= "
                  f"{SEND_LOOP_TARGET:,} rec/s of {SEND_LOOP_TARGET_SIZE} B: {verdict}")
            out["send_loop_target"] = {"records_per_s": SEND_LOOP_TARGET, "status": verdict}
    rows = phase_rows(runs, "consume", a.consumers, (
        "records_per_s", "mb_per_s", "after_first_batch_records_per_s", "ratio_to_pure_python",
        "ratio_to_confluent", "client_cpu_us_per_record", "broker_cpu_us_per_record"),
        clabels, CONSUME_TARGETS, out)
    if rows:
        sources = sorted({x.get("consumed_topic_from", "-") for x in runs})
        print(f"\n{size} B records, {parts} partition{'s' if parts > 1 else ''}: CONSUME, "
              f"{runs_note(a.repeats)}; every consumer reads the topic written by "
              f"{', '.join(sources)}'s producer in its round, assign()ed from the beginning, at "
              f"most {a.poll_records} records a call; rec/s from the first poll to the last record")
        print_table(["consumer", "rec/s", "spread", "MB/s", "after 1st batch rec/s",
                     "x pure-Python", "x confluent", "client CPU us/rec", "broker CPU us/rec",
                     "target", "status", "failed runs"], rows)
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.worker:
        return worker_main(a.worker)
    info = machine()
    import aiokafka
    import kafka
    info["clients"] = {"aiokafka": aiokafka.__version__, "kafka-python": kafka.__version__,
                       "confluent-kafka": info["librdkafka"]}
    log(f"machine: {info}")
    out = Results("clients", a, info)
    workloads = [(s, p) for s in a.size_list for p in a.partition_list]
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {w: [] for w in workloads}
    failures: list[str] = []
    with workdir(prefix="strom-bench-clients-") as wd:
        broker = StromBroker(wd)
        try:
            topics = {WARMUP_TOPIC: 1}
            for r in range(a.repeats):
                for size, parts in workloads:
                    topics.update({topic_name(r, size, parts, row): parts for row in a.producers})
            t0 = time.perf_counter()
            create_topics(broker.bootstrap, topics)
            log(f"{len(topics)} topics created in {time.perf_counter() - t0:.1f} s")
            for r in range(a.repeats):
                for size, parts in workloads:
                    log(f"round {r}: {size} B, {parts} partitions, {a.records_by_size[size]:,} records")
                    res = one_round(r, size, parts, a, broker, failures)
                    runs[(size, parts)].append(res)
                    out.run(f"round{r}-{size}B-{parts}p", res)
                    delete_topics(broker.bootstrap, [topic_name(r, size, parts, row) for row in a.producers])
        finally:
            broker.close()

    print(f"\nclients: strom (this checkout), aiokafka {info['clients']['aiokafka']}, kafka-python "
          f"{info['clients']['kafka-python']}, confluent-kafka (librdkafka {info['librdkafka']}); "
          f"one strom broker; each client run in a process of its own; rounds rotated; "
          f"cpus={info['cpus']}; spread=(max-min)/median; x pure-Python = over the faster of "
          f"aiokafka and kafka-python in the same round")
    summary = {"workloads": [workload_tables(runs[w], a, *w) for w in workloads], "failures": failures}
    out.summary(summary)
    write_json(a.json, {"benchmark": "clients", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir), **summary})
    if failures:
        raise BenchFailure(f"{len(failures)} run(s) failed: " + "; ".join(failures))
    return 0


if __name__ == "__main__":
    run_main(main)
