"""What one request costs a strom broker: CPU time of the broker process per request, by
kind, one request at a time over loopback (the client is strom's own, in this process, so
its CPU is not counted).

    .venv/bin/python bench/request_cost.py
    .venv/bin/python bench/request_cost.py --requests 5000 --broker-repo /tmp/old --json cost.json

A broker under a replicating, long-polling load answers many small requests (at 10 MB/s
of acks=all with 3 brokers, ~900 a second each): this per-request cost, not the bytes,
sets its CPU and the latency of every hop.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (StromBroker, log, machine, print_table, use_broker_repo,  # noqa: E402
                           workdir, write_json)

PARTITIONS = 16


def _cpu_s(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _fetch(offsets: dict[int, int], partition_max_bytes: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": i, "current_leader_epoch": -1, "fetch_offset": offsets[i],
                 "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}
                for i in range(PARTITIONS)]}],
            "forgotten_topics_data": [], "rack_id": ""}


async def measure(bootstrap: str, pid: int, n: int) -> list[dict[str, Any]]:
    from clients.aio.connection import BrokerConnection
    host, port = bootstrap.split(":")
    conn = await BrokerConnection.connect(host, int(port), client_id="request-cost")
    listed = await conn.request("ListOffsets", {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": i, "current_leader_epoch": -1,
                                      "timestamp": -1} for i in range(PARTITIONS)]}]}, version=5)
    end = {p.partition_index: p.offset for t in listed.topics for p in t.partitions}
    kinds = [
        ("ApiVersions", "ApiVersions", {"client_software_name": "x", "client_software_version": "1"}, 3),
        ("Metadata, 1 topic", "Metadata", {"topics": [{"name": "t"}]}, 9),
        (f"Fetch, {PARTITIONS} partitions, nothing new", "Fetch", _fetch(end, 65536), 12),
        (f"Fetch, {PARTITIONS} partitions x 4 KiB", "Fetch", _fetch({i: 0 for i in end}, 4096), 12),
        (f"Fetch, {PARTITIONS} partitions x 64 KiB", "Fetch", _fetch({i: 0 for i in end}, 65536), 12),
    ]
    rows = []
    for label, api, body, version in kinds:
        for _ in range(100):
            await conn.request(api, body, version=version)
        u0, s0 = _cpu_s(pid)
        t0 = time.perf_counter()
        for _ in range(n):
            await conn.request(api, body, version=version)
        u1, s1 = _cpu_s(pid)
        wall = time.perf_counter() - t0
        rows.append({"request": label, "broker_cpu_us": (u1 + s1 - u0 - s0) / n * 1e6,
                     "user_us": (u1 - u0) / n * 1e6, "sys_us": (s1 - s0) / n * 1e6,
                     "round_trip_us": wall / n * 1e6})
    await conn.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000, help="per kind")
    ap.add_argument("--broker-repo", help="run strom from this checkout (before/after)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    info: dict[str, Any] = {}
    use_broker_repo(args.broker_repo, info)
    with workdir() as wd:
        broker = StromBroker(wd)
        try:
            broker.create_topic("t", PARTITIONS, 1)
            from confluent_kafka import Producer
            log(f"writing 32,000 records of 1 KiB to {PARTITIONS} partitions")
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1,
                          "batch.size": 16384, "log_level": 3})
            payload = b"x" * 1024
            for i in range(32_000):
                while True:
                    try:
                        p.produce("t", payload, partition=i % PARTITIONS)
                        break
                    except BufferError:
                        p.poll(0.01)
            p.flush()
            rows = asyncio.run(measure(broker.bootstrap, broker.pids()[0], args.requests))
        finally:
            broker.close()
    print_table(["request", "broker CPU us", "user us", "sys us", "round trip us"],
                [[r["request"], r["broker_cpu_us"], r["user_us"], r["sys_us"], r["round_trip_us"]]
                 for r in rows])
    write_json(args.json, {"benchmark": "request_cost", "args": vars(args), "machine": machine(),
                           **info, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
