"""What one request costs a strom broker, in machine instructions counted by valgrind's
callgrind: unlike CPU seconds (bench/request_cost.py), the count does not move with the
machine's load, so a before/after difference of a few percent is real.

    .venv/bin/python bench/request_instructions.py --peer /tmp/old
    .venv/bin/python bench/request_instructions.py --peer /tmp/old --runs 3 --json out.json

The broker runs under callgrind with instrumentation off; for each kind, after a warm-up,
instrumentation is switched on, counters zeroed, `--requests` requests answered one at a time,
and the counters dumped. `--peer` names another checkout (a git worktree of an older commit)
measured alternately in the same run; the table gives this checkout's count over the peer's.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import log, machine, median_of_runs, print_table, workdir, write_json  # noqa: E402
from tests.support.broker_process import free_port  # noqa: E402

PARTITIONS = 16


def _fetch(partition_max_bytes: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": i, "current_leader_epoch": -1, "fetch_offset": 0,
                 "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}
                for i in range(PARTITIONS)]}],
            "forgotten_topics_data": [], "rack_id": ""}


def _batch(record_size: int, count: int) -> bytes:
    """One v2 batch of `count` records of `record_size` bytes, as a producer sends it."""
    from clients.protocol.record_writer import BatchWriter
    writer = BatchWriter()
    for i in range(count):
        writer.append(1_700_000_000_000 + i, None, bytes([65 + i % 26]) * record_size)
    return writer.finish()


def _produce(partition: int, records: bytes) -> dict:
    return {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": partition,
                                                             "records": records}]}]}


def _fetch_one(partition: int, max_bytes: int) -> dict:
    body = _fetch(max_bytes)
    body["topics"][0]["partitions"] = [p for p in body["topics"][0]["partitions"]
                                       if p["partition"] == partition]
    return body


# Produce goes before the fetch with data: partition 0 then holds 15 records of 1 KiB.
KINDS: list[tuple[str, str, dict, int]] = [
    ("ApiVersions", "ApiVersions", {"client_software_name": "x", "client_software_version": "1"}, 3),
    ("Metadata, 1 topic", "Metadata", {"topics": [{"name": "t"}]}, 9),
    (f"Fetch, {PARTITIONS} empty partitions", "Fetch", _fetch(65536), 12),
    ("Produce, acks=1, 15 records of 1 KiB", "Produce", _produce(0, _batch(1024, 15)), 9),
    ("Fetch, 1 partition, 16 KiB", "Fetch", _fetch_one(0, 16384), 12),
]


def _callgrind(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


def _dumped_total(folder: Path, before: set[str]) -> int:
    for name in sorted(set(os.listdir(folder)) - before):
        for line in (folder / name).read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"callgrind wrote no totals into {folder}")


async def _measure(port: int, pid: int, folder: Path, n: int) -> dict[str, float]:
    from clients.aio.connection import BrokerConnection
    deadline = time.monotonic() + 300      # python under valgrind starts in tens of seconds
    while True:
        try:
            conn = await BrokerConnection.connect("127.0.0.1", port, client_id="instructions")
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    await conn.request("Metadata", {"topics": [{"name": "t"}], "allow_auto_topic_creation": True},
                       version=9)
    await asyncio.sleep(2)
    counts = {}
    for label, api, body, version in KINDS:
        for _ in range(30):
            await conn.request(api, body, version=version)
        _callgrind(pid, "--instr=on")
        _callgrind(pid, "-z")
        for _ in range(n):
            await conn.request(api, body, version=version)
        before = set(os.listdir(folder))
        _callgrind(pid, "-d")
        _callgrind(pid, "--instr=off")
        counts[label] = _dumped_total(folder, before) / n
    await conn.close()
    return counts


def run_once(repo: Path, wd: Path, n: int) -> dict[str, float]:
    folder = wd / f"cg-{time.monotonic_ns()}"
    (folder / "logs").mkdir(parents=True)
    port = free_port()
    config = folder / "server.properties"
    config.write_text(f"log.dirs={folder / 'logs'}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                      f"num.partitions={PARTITIONS}\n")
    with open(folder / "broker.out", "w") as out:
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={folder / 'callgrind.out'}", sys.executable, "-m", "broker.main",
             str(config)],
            cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, stdout=out, stderr=subprocess.STDOUT)
        try:
            return asyncio.run(_measure(port, proc.pid, folder, n))
        finally:
            proc.terminate()
            proc.wait(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200, help="per kind and run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peer", help="another checkout, measured alternately (before/after)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    systems = {"this": ROOT} | ({"peer": Path(args.peer).resolve()} if args.peer else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    with workdir() as wd:
        for r in range(args.runs):
            for name, repo in systems.items():
                log(f"run {r + 1}/{args.runs}: {name} ({repo})")
                runs[name].append(run_once(repo, wd, args.requests))
    rows: list[list[Any]] = []
    medians: dict[str, dict[str, Any]] = {}
    for label, *_ in KINDS:
        this = median_of_runs([run[label] for run in runs["this"]])
        medians[label] = {"this": this}
        row: list[Any] = [label, this["median"]]
        if "peer" in runs:
            peer = median_of_runs([run[label] for run in runs["peer"]])
            medians[label]["peer"] = peer
            row += [peer["median"], this["median"] / peer["median"]]
        rows.append(row)
    headers = ["request", "instructions (this)"] + (["instructions (peer)", "this / peer"]
                                                    if "peer" in runs else [])
    print_table(headers, rows)
    write_json(args.json, {"benchmark": "request_instructions", "args": vars(args),
                           "machine": machine(), "runs": runs, "medians": medians})
    return 0


if __name__ == "__main__":
    sys.exit(main())
