"""kafka-producer-perf-test: produce N records of a fixed size as fast as allowed and print
Kafka's ProducerPerformance lines, with strom's client (AsyncProducer on one event loop).

    kafka-producer-perf-test --topic t --num-records 1000000 --record-size 100 \\
        --throughput -1 --producer-props bootstrap.servers=H:P acks=1 [k=v ...] \\
        [--producer.config FILE] [--bootstrap-server H:P] [--payload-file F] \\
        [--payload-delimiter '\\n'] [--payload-monotonic] [--reporting-interval MS]

Every --reporting-interval ms (5000, as Kafka):
    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.
and at the end:
    N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
    P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th.
MB is 2^20 bytes and latency runs from send() to the delivery callback, as in Kafka's tool.
--throughput -1 means no throttling; otherwise records/sec are paced to that rate. Exit 1 if
any record failed (the first errors are printed on stderr).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from typing import TYPE_CHECKING, Any

from .common import (CliError, ToolParser, client_config, command_timeout, parse_assignment,
                     run_tool, wait_reachable)

if TYPE_CHECKING:
    from clients.types import RecordMetadata

ERROR_PREFIX = "Error: "
MAX_REPORTED_FAILURES = 5


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-producer-perf-test",
                   description="A tool to test the performance of the producer.")
    p.add_argument("--topic", required=True, help="REQUIRED: produce messages to this topic.")
    p.add_argument("--num-records", type=int, required=True, help="REQUIRED: number of messages to produce.")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--record-size", type=int, help="message size in bytes (or --payload-file)")
    size.add_argument("--payload-file", help="file of payloads separated by --payload-delimiter; "
                                             "records pick one at random")
    size.add_argument("--payload-monotonic", action="store_true",
                      help="payload is the record number as text (1, 2, 3, ...)")
    p.add_argument("--payload-delimiter", default="\\n", help="payload delimiter (default \\n)")
    p.add_argument("--throughput", type=float, required=True,
                   help="REQUIRED: throttle to about this many records/sec; -1 for no throttling.")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="PROP=VALUE",
                   help="producer config properties (bootstrap.servers=..., acks=..., ...)")
    p.add_argument("--producer.config", dest="config_file", metavar="FILE",
                   help="producer config properties file")
    p.add_argument("--bootstrap-server", help="the server(s) to connect to (or bootstrap.servers "
                                              "in --producer-props / --producer.config)")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                   help="interval between progress lines in ms (default 5000)")
    p.add_argument("--print-metrics", action="store_true", help="print producer statistics at the end")
    p.add_argument("--command-timeout", type=float, default=None, help=argparse.SUPPRESS)
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: overall and windowed counts and latencies."""

    def __init__(self, num_records: int, interval_ms: int, out: Any):
        self.out = out
        self.start = time.monotonic()
        self.window_start = self.start
        self.interval = interval_ms / 1000.0
        self.count = self.bytes = 0
        self.total_latency = 0.0
        self.max_latency = 0.0
        self.latencies: list[float] = []
        self.w_count = self.w_bytes = 0
        self.w_total = self.w_max = 0.0

    def record(self, latency_ms: float, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        if latency_ms > self.max_latency:
            self.max_latency = latency_ms
        self.latencies.append(latency_ms)
        self.w_count += 1
        self.w_bytes += size
        self.w_total += latency_ms
        if latency_ms > self.w_max:
            self.w_max = latency_ms
        if now - self.window_start >= self.interval:
            self.print_window(now)

    def print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rps = self.w_count / elapsed
        print(f"{self.w_count} records sent, {rps:.1f} records/sec ({self.w_bytes / elapsed / 2**20:.2f} "
              f"MB/sec), {self.w_total / max(self.w_count, 1):.1f} ms avg latency, "
              f"{self.w_max:.1f} ms max latency.", file=self.out, flush=True)
        self.window_start = now
        self.w_count = self.w_bytes = 0
        self.w_total = self.w_max = 0.0

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.latencies)

        def pct(q: float) -> int:
            return int(lat[min(len(lat) - 1, int(len(lat) * q))]) if lat else 0

        print(f"{self.count} records sent, {self.count / elapsed:f} records/sec "
              f"({self.bytes / elapsed / 2**20:.2f} MB/sec), "
              f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
              f"{self.max_latency:.2f} ms max latency, {pct(0.5)} ms 50th, {pct(0.95)} ms 95th, "
              f"{pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.", file=self.out, flush=True)


def _payloads(args: argparse.Namespace) -> list[bytes] | None:
    if args.payload_file:
        delim = args.payload_delimiter.encode().decode("unicode_escape").encode()
        try:
            with open(args.payload_file, "rb") as f:
                items = [x for x in f.read().split(delim) if x]
        except OSError as e:
            raise CliError(f"cannot read payload file {args.payload_file}: {e.strerror or e}") from None
        if not items:
            raise CliError(f"payload file {args.payload_file} holds no payloads")
        print(f"Number of messages read: {len(items)}", flush=True)
        return items
    if args.payload_monotonic:
        return None
    if args.record_size is None:
        raise CliError("either --record-size, --payload-file or --payload-monotonic must be given")
    if args.record_size <= 0:
        raise CliError("--record-size must be positive")
    # Kafka fills the payload with random uppercase letters, once.
    rnd = random.Random()
    return [bytes(rnd.randint(65, 90) for _ in range(args.record_size))]


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
    props = dict(parse_assignment(p, "producer property") for p in args.producer_props)
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    file_props: dict[str, Any] = {}
    if args.config_file:
        from .common import read_config_file
        file_props = read_config_file(args.config_file)
    bootstrap = props.get("bootstrap.servers") or file_props.get("bootstrap.servers")
    if not bootstrap:
        raise CliError("bootstrap.servers must be given (--producer-props bootstrap.servers=H:P, "
                       "--producer.config or --bootstrap-server)")
    args.bootstrap_server = bootstrap
    # Kafka's defaults for the tool are the producer's; ours too, except a deeper buffer.
    return client_config(args, "producer", props)


async def produce(args: argparse.Namespace, cfg: dict[str, Any], payloads: list[bytes] | None,
                  out: Any) -> int:
    from clients.aio.producer import AsyncProducer

    stats = Stats(args.num_records, args.reporting_interval, out)
    failures: list[BaseException] = []
    throttle = args.throughput
    producer = AsyncProducer(cfg)
    await producer.start()
    await producer.partitions_for(args.topic)
    loop = asyncio.get_running_loop()
    clock = time.monotonic
    rnd = random.Random()
    stats.start = stats.window_start = clock()
    send = producer.send
    topic = args.topic
    try:
        for i in range(args.num_records):
            if payloads is None:
                value = str(i + 1).encode()
            elif len(payloads) == 1:
                value = payloads[0]
            else:
                value = payloads[rnd.randrange(len(payloads))]
            sent_at = clock()
            size = len(value)

            def done(err: BaseException | None, md: RecordMetadata | None, sent_at: float = sent_at,
                     size: int = size) -> None:
                now = clock()
                if err is not None:
                    failures.append(err)
                else:
                    stats.record((now - sent_at) * 1000.0, size, now)

            await send(topic, value, on_delivery=done)
            if throttle > 0:
                ahead = (i + 1) / throttle - (clock() - stats.start)
                if ahead > 0:
                    await asyncio.sleep(ahead)
            elif i & 0x3FF == 0x3FF:
                await asyncio.sleep(0)      # let the sender and callbacks run
        await producer.flush()
    finally:
        await producer.close()
    del loop
    stats.print_total()
    for e in failures[:MAX_REPORTED_FAILURES]:
        print(f"{ERROR_PREFIX}a record failed: {e}", file=sys.stderr)
    if failures:
        print(f"{ERROR_PREFIX}{len(failures)} of {args.num_records} records failed", file=sys.stderr)
        return 1
    if args.print_metrics:
        print(f"retried-batches: {producer.retried_batches}", file=out)
    return 0


def run(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    if args.num_records < 0:
        raise CliError("--num-records must not be negative")
    payloads = _payloads(args)
    cfg = producer_config(args)
    wait_reachable(args.bootstrap_server, command_timeout(args))
    return asyncio.run(produce(args, cfg, payloads, out))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
