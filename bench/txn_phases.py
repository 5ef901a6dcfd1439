"""Where a small transaction's time goes: confluent-kafka (librdkafka) transactions of 100
records of 1 KiB over 16 partitions against a 3-broker strom cluster (replication factor 3,
acks=all), with librdkafka's protocol debug log, so every request's round trip is known.

    .venv/bin/python bench/txn_phases.py                 # 3 runs of 40 transactions, ~1 min
    .venv/bin/python bench/txn_phases.py --transactions 100 --runs 5

Per transaction: begin_transaction, 100 produce() calls (one per partition in turn),
flush() (every record acknowledged), then commit_transaction() (only EndTxn is left). The
table gives the median and max of each phase and of each request type's round trip as
librdkafka measured it, and how many of each were sent per transaction, with the errors the
broker answered (CONCURRENT_TRANSACTIONS: the previous transaction's markers were still
being written when the next AddPartitionsToTxn came); "share" is a phase's median over the
whole transaction's median. Each run uses a fresh topic and producer; the table shows the
median over the runs of each run's figure. Results go to
bench/results/txn-phases-<date>-<time>/ (one file per run, summary.json).
"""
from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (Results, StromCluster, add_results_args, log,  # noqa: E402
                           machine, print_table, run_main, workdir)

PARTITIONS = 16
RECORDS = 100
_RECEIVED = re.compile(r"Received (\w+)Response \(v\d+, .*?rtt ([\d.]+)ms")
# librdkafka's eos debug line for a failed AddPartitionsToTxn / EndTxn names the error by
# its description ("... another concurrent operation ..." is CONCURRENT_TRANSACTIONS).
_ERROR = re.compile(r"(AddPartitionsToTxn|EndTxn) (?:response|returned).*?(concurrent operation|"
                    r"not the correct coordinator|coordinator is loading|timed out)",
                    re.IGNORECASE)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transactions", type=int, default=40)
    p.add_argument("--runs", type=int, default=3)
    add_results_args(p)
    return p.parse_args(argv)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def measure(bootstrap: str, transactions: int, run: int) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"phases-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    time.sleep(2)                               # leaders settle before the clock
    handler = _Lines()
    rk_log = logging.getLogger("bench.rdkafka")
    rk_log.addHandler(handler)
    rk_log.setLevel(logging.DEBUG)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"phases-{run}",
                  "linger.ms": 5, "debug": "protocol,eos", "partitioner": "consistent"},
                 logger=rk_log)
    p.init_transactions(60)
    p.begin_transaction()                       # warm-up: connections to every leader
    for i in range(PARTITIONS):
        p.produce(topic, b"w", key=str(i).encode())
    p.commit_transaction(60)
    handler.lines.clear()
    value = b"x" * 1024
    phases: dict[str, list[float]] = {"produce + flush": [], "commit (EndTxn)": [],
                                      "whole transaction": []}
    for _ in range(transactions):
        t0 = time.perf_counter()
        p.begin_transaction()
        for i in range(RECORDS):
            p.produce(topic, value, key=str(i % PARTITIONS).encode())
        p.flush(30)
        t1 = time.perf_counter()
        p.commit_transaction(30)
        t2 = time.perf_counter()
        phases["produce + flush"].append(t1 - t0)
        phases["commit (EndTxn)"].append(t2 - t1)
        phases["whole transaction"].append(t2 - t0)
    rtts: dict[str, list[float]] = {}
    errors: Counter[tuple[str, str]] = Counter()
    for line in handler.lines:
        m = _RECEIVED.search(line)
        if m:
            rtts.setdefault(m.group(1), []).append(float(m.group(2)))
        e = _ERROR.search(line)
        if e:
            errors[(e.group(1), e.group(2))] += 1
    return {"transactions": transactions,
            "phases_ms": {k: {"median": statistics.median(v) * 1000, "max": max(v) * 1000}
                          for k, v in phases.items()},
            "rtt_ms": {k: {"n_per_txn": len(v) / transactions, "median": statistics.median(v),
                           "max": max(v)} for k, v in sorted(rtts.items())},
            "errors_per_txn": {f"{a} {b}": n / transactions for (a, b), n in errors.items()}}


def _median_of(runs: list[dict[str, Any]], section: str, key: str, field: str) -> float:
    return statistics.median(r[section][key][field] for r in runs if key in r[section])


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    info = machine()
    out = Results("txn-phases", a, info)
    log(f"machine: {info}")
    runs: list[dict[str, Any]] = []
    with workdir() as wd:
        sut = StromCluster(wd, 3)
        try:
            for run in range(a.runs):
                res = measure(sut.bootstrap, a.transactions, run)
                out.run(f"run-{run}", res)
                runs.append(res)
                whole = res["phases_ms"]["whole transaction"]["median"]
                log(f"run {run}: whole transaction median {whole:.1f} ms")
        finally:
            sut.close()
    whole = _median_of(runs, "phases_ms", "whole transaction", "median")
    rows: list[list[Any]] = []
    for k in runs[0]["phases_ms"]:
        med = _median_of(runs, "phases_ms", k, "median")
        rows.append([k, "-", f"{med:.1f}", f"{_median_of(runs, 'phases_ms', k, 'max'):.1f}",
                     f"{med / whole:.2f}"])
    for k in ("AddPartitionsToTxn", "Produce", "EndTxn"):
        if all(k in r["rtt_ms"] for r in runs):
            rows.append([f"{k} round trip", f"{_median_of(runs, 'rtt_ms', k, 'n_per_txn'):.2f}",
                         f"{_median_of(runs, 'rtt_ms', k, 'median'):.1f}",
                         f"{_median_of(runs, 'rtt_ms', k, 'max'):.1f}", "-"])
    errors = sorted({e for r in runs for e in r["errors_per_txn"]})
    error_rates = {e: statistics.median(r["errors_per_txn"].get(e, 0.0) for r in runs)
                   for e in errors}
    print(f"\n{RECORDS} records of 1 KiB per transaction over {PARTITIONS} partitions, "
          f"3 brokers, rf=3, acks=all; median of {a.runs} runs of {a.transactions} "
          f"transactions")
    print_table(["what", "per transaction", "median ms", "max ms", "share"], rows)
    for e, n in error_rates.items():
        print(f"errors: {e}: {n:.2f} per transaction")
    out.summary({"whole_transaction_ms": whole, "rows": rows, "errors_per_txn": error_rates})
    return 0


if __name__ == "__main__":
    run_main(main)
