"""Kafka's perf tools with strom's Python client, as a new user runs them (issue 25):
`bin/kafka-producer-perf-test.sh` unthrottled, then `bin/kafka-consumer-perf-test.sh`
reading the records back, against one standalone strom broker, from this checkout and,
in the same rounds, from a baseline checkout (--baseline DIR: a git worktree of an older
commit; its own bin/ scripts and clients run, the broker is this checkout's).

    .venv/bin/python bench/perf_tools.py --baseline /tmp/base --label issue25
    .venv/bin/python bench/perf_tools.py --quick                   # 1 round of 100,000 records

Each round runs the baseline's tools, then this checkout's (rotated each round), each on a
topic of its own. A figure is what the tool printed: the producer's final line (records/sec,
average and max latency, 99th percentile) and the consumer's nMsg.sec. A producer run whose
line says fewer records sent than asked, or a consumer run that read fewer, fails the run.
Medians of --repeats rounds; "x baseline" is the median of the per-round ratios.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (REPO, Results, StromBroker, add_results_args,  # noqa: E402
                           failures_status, log, machine, median_of_runs, print_table, run_main,
                           runs_note, workdir)

_PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def parse_producer(out: str) -> dict[str, Any]:
    """The producer tool's final summary line (Kafka's ProducerPerformance format)."""
    found = _PRODUCED.findall(out)
    if not found:
        raise ValueError(f"no summary line in the producer tool's output: {out[-500:]!r}")
    sent, rps, mbs, avg, mx, p50, p95, p99 = found[-1]
    return {"records": int(sent), "records_per_s": float(rps), "mb_per_s": float(mbs),
            "avg_latency_ms": float(avg), "max_latency_ms": float(mx), "p50_ms": int(p50),
            "p95_ms": int(p95), "p99_ms": int(p99)}


def parse_consumer(out: str) -> dict[str, Any]:
    """The consumer tool's line under its header: MB, MB.sec, nMsg, nMsg.sec."""
    lines = [ln for ln in out.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("start.time") and i + 1 < len(lines):
            cols = [c.strip() for c in lines[i + 1].split(",")]
            return {"mb": float(cols[2]), "mb_per_s": float(cols[3]), "records": int(cols[4]),
                    "records_per_s": float(cols[5])}
    raise ValueError(f"no result line in the consumer tool's output: {out[-500:]!r}")


def run_tool(checkout: Path, script: str, args: list[str], timeout: float) -> str:
    p = subprocess.run([str(checkout / "bin" / script), *args], cwd=checkout, timeout=timeout,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{script} from {checkout} exited with {p.returncode}: {p.stdout[-800:]}")
    return p.stdout


def one_run(checkout: Path, bootstrap: str, topic: str, records: int, size: int) -> dict[str, Any]:
    produced = parse_producer(run_tool(checkout, "kafka-producer-perf-test.sh", [
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}"],
        timeout=600))
    consumed = parse_consumer(run_tool(checkout, "kafka-consumer-perf-test.sh", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
        "--timeout", "30000"], timeout=600))
    problems = []
    if produced["records"] != records:
        problems.append(f"producer sent {produced['records']} of {records}")
    if consumed["records"] != records:
        problems.append(f"consumer read {consumed['records']} of {records}")
    return {"producer": produced, "consumer": consumed, "problems": problems}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", metavar="DIR", help="a checkout whose tools run beside this one's")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 round of 100,000 records (a smoke test)")
    add_results_args(ap)
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.repeats, a.records = 1, 100_000
    checkouts = {"this": REPO}
    if a.baseline:
        checkouts = {"baseline": Path(a.baseline).resolve(), "this": REPO}
    info = machine()
    out = Results("perf_tools", a, info)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    failed: list[str] = []
    with workdir() as wd:
        broker = StromBroker(wd)
        try:
            for r in range(a.repeats):
                order = list(checkouts)
                order = order[r % len(order):] + order[:r % len(order)]
                for name in order:
                    topic = f"perf-{name}-{r}"
                    broker.create_topic(topic, 1)
                    started = time.monotonic()
                    res = one_run(checkouts[name], broker.bootstrap, topic, a.records,
                                  a.record_size)
                    res["seconds"] = round(time.monotonic() - started, 1)
                    log(f"round {r} {name}: producer {res['producer']}, consumer {res['consumer']}")
                    failed += [f"round {r} {name}: {p}" for p in res["problems"]]
                    out.run(f"round{r}-{name}", {"checkout": str(checkouts[name]), "round": r, **res})
                    runs[name].append(res)
        finally:
            broker.close()

    def ratio(key: str, side: str) -> dict[str, Any]:
        per_round = [t[side][key] / b[side][key] for t, b in zip(runs["this"], runs["baseline"])
                     if b[side][key]]
        return median_of_runs(per_round)

    print()
    print(f"Kafka's perf tools with strom's client, {a.records:,} records of {a.record_size} B, "
          f"one strom broker, unthrottled ({runs_note(a.repeats)}; baseline "
          f"{checkouts.get('baseline', '-')})")
    rows = []
    summary: dict[str, Any] = {}
    for name in checkouts:
        fig = {f"{side}_{key}": median_of_runs([x[side][key] for x in runs[name]])
               for side, key in (("producer", "records_per_s"), ("producer", "avg_latency_ms"),
                                 ("producer", "p99_ms"), ("consumer", "records_per_s"))}
        summary[name] = fig
        rows.append([name, fig["producer_records_per_s"]["median"],
                     fig["producer_avg_latency_ms"]["median"], fig["producer_p99_ms"]["median"],
                     fig["consumer_records_per_s"]["median"]])
    if "baseline" in checkouts:
        summary["x_baseline"] = {"producer": ratio("records_per_s", "producer"),
                                 "consumer": ratio("records_per_s", "consumer")}
        rows.append(["this x baseline", summary["x_baseline"]["producer"]["median"], None, None,
                     summary["x_baseline"]["consumer"]["median"]])
    print_table(["checkout", "producer rec/s", "avg latency ms", "p99 ms", "consumer rec/s"], rows)
    out.summary({"results": summary, "failed": failed})
    return failures_status(failed)


if __name__ == "__main__":
    run_main(main)
