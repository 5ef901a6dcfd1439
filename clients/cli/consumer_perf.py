"""kafka-consumer-perf-test: consume N records and print Kafka's ConsumerPerformance line,
with strom's client (AsyncConsumer on one event loop, group subscription as Kafka's tool).

    kafka-consumer-perf-test --bootstrap-server H:P --topic t --messages 1000000 \\
        [--group perf-consumer-N] [--from-latest] [--fetch-size BYTES] [--timeout MS] \\
        [--consumer.config FILE] [--show-detailed-stats --reporting-interval MS] \\
        [--date-format FMT] [--hide-header]

Output (MB is 2^20 bytes of keys and values, as Kafka counts):
    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2024-05-01 10:00:00:000, 2024-05-01 10:00:03:512, 95.3674, 27.1550, 1000000, 284738.0, 1204, 2308, 41.3204, 433275.5
fetch.* excludes the time spent joining the group (rebalance.time.ms). If no record arrives
for --timeout ms (10000) the tool stops early with Kafka's warning, exit 0 as Kafka's.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from datetime import datetime
from typing import Any

from .common import (CliError, ToolParser, add_connection_args, client_config, command_timeout,
                     run_tool, wait_reachable)

ERROR_PREFIX = "Error: "
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-consumer-perf-test",
                   description="A tool to test the performance of the consumer.")
    add_connection_args(p, "--consumer.config", "Consumer config properties file.")
    p.add_argument("--topic", required=True, help="REQUIRED: the topic to consume from.")
    p.add_argument("--messages", type=int, required=True,
                   help="REQUIRED: the number of messages to consume.")
    p.add_argument("--group", default=f"perf-consumer-{random.randint(0, 99999)}",
                   help="the consumer group id (default perf-consumer-<random>)")
    p.add_argument("--fetch-size", type=int, default=1048576,
                   help="bytes to fetch per partition per request (default 1048576)")
    p.add_argument("--from-latest", action="store_true",
                   help="start from the latest offset when the group has none (default earliest)")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="stop when no record arrived for this long (default 10000)")
    p.add_argument("--show-detailed-stats", action="store_true",
                   help="print a line every --reporting-interval")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    p.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f",
                   help="strftime format of the times (default like Kafka's yyyy-MM-dd HH:mm:ss:SSS)")
    p.add_argument("--hide-header", action="store_true", help="do not print the header line")
    p.add_argument("--print-metrics", action="store_true", help="(accepted; no extra metrics)")
    p.add_argument("--threads", type=int, default=1, help="(accepted for compatibility; 1 thread)")
    p.add_argument("--num-fetch-threads", type=int, default=1, help=argparse.SUPPRESS)
    return p


def _time(ts: float, fmt: str) -> str:
    text = datetime.fromtimestamp(ts).strftime(fmt)
    if fmt.endswith("%f"):
        text = text[:-3]        # milliseconds, as Kafka's SSS
    return text


def _line(start: str, end: str, nbytes: int, n: int, elapsed_s: float, rebalance_ms: float,
          fetch_s: float) -> str:
    mb = nbytes / 2**20
    el = max(elapsed_s, 1e-9)
    fe = max(fetch_s, 1e-9)
    return (f"{start}, {end}, {mb:.4f}, {mb / el:.4f}, {n}, {n / el:.4f}, {rebalance_ms:.0f}, "
            f"{fetch_s * 1000:.0f}, {mb / fe:.4f}, {n / fe:.4f}")


async def consume(args: argparse.Namespace, cfg: dict[str, Any], out: Any) -> int:
    from clients.aio.consumer import AsyncConsumer

    consumer = AsyncConsumer(config=cfg)
    start_wall = time.time()
    start = time.monotonic()
    await consumer.subscribe([args.topic])
    n = nbytes = 0
    rebalance_end: float | None = None
    last_record = time.monotonic()
    timeout = args.timeout / 1000.0
    interval = args.reporting_interval / 1000.0
    last_report = start
    last_n = last_bytes = 0
    try:
        while n < args.messages:
            records = await consumer.poll(timeout=min(1.0, timeout), max_records=100_000)
            now = time.monotonic()
            if not records:
                if now - last_record > timeout:
                    print(f"WARNING: Exiting before consuming the expected number of messages: "
                          f"timeout ({args.timeout} ms) exceeded. You can use the --timeout option "
                          f"to increase the timeout.", file=out, flush=True)
                    break
                continue
            if rebalance_end is None:
                rebalance_end = now
            last_record = now
            for r in records:
                nbytes += (r.serialized_key_size if r.serialized_key_size > 0 else 0) + \
                          (r.serialized_value_size if r.serialized_value_size > 0 else 0)
            n += len(records)
            if args.show_detailed_stats and now - last_report >= interval:
                # Kafka's detailed line: time, threadId, then the window's figures.
                window = _line("", "", nbytes - last_bytes, n - last_n, now - last_report, 0,
                               now - last_report).split(", ", 2)[2]
                print(f"{_time(time.time(), args.date_format)}, 0, {window}", file=out, flush=True)
                last_report, last_n, last_bytes = now, n, nbytes
    finally:
        await consumer.close(autocommit=False)
    end = time.monotonic()
    end_wall = start_wall + (end - start)
    rebalance_ms = ((rebalance_end or end) - start) * 1000.0
    fetch_s = end - (rebalance_end or end)
    if not args.hide_header:
        print(HEADER, file=out)
    print(_line(_time(start_wall, args.date_format), _time(end_wall, args.date_format), nbytes, n,
                end - start, rebalance_ms, fetch_s), file=out, flush=True)
    return 0


def run(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    if args.messages < 0:
        raise CliError("--messages must not be negative")
    if args.show_detailed_stats and not args.hide_header:
        print(DETAILED_HEADER, file=out)
        args.hide_header = True
    cfg = client_config(args, "consumer", {"group.id": args.group},
                        defaults={"auto.offset.reset": "latest" if args.from_latest else "earliest",
                                  "max.partition.fetch.bytes": args.fetch_size,
                                  "enable.auto.commit": False,
                                  "fetch.max.bytes": max(52428800, args.fetch_size)})
    wait_reachable(args.bootstrap_server, command_timeout(args))
    return asyncio.run(consume(args, cfg, out))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
