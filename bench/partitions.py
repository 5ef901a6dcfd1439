"""Partition scaling on one standalone strom broker: produce throughput (confluent-kafka,
acks=1) and broker RSS with 1, 100 and 1000 partitions.

    .venv/bin/python bench/partitions.py                    # 1 KiB records, 5 s, 3 repeats
    .venv/bin/python bench/partitions.py --quick            # 1 repeat of 3 s (a smoke test)
    .venv/bin/python bench/partitions.py --label after --json partitions.json

Every record goes to the next partition (round-robin per record, in each produce_batch
call: `produce_run(spread="record")`), so all the partitions are active at once; each record
carries a key of 1-4 bytes that picks its partition (not counted in MB/s). A fresh broker
per partition count, so RSS is that count's own. Figures are medians of --repeats runs, each
run in its own results file (bench/results/partitions-<date>-<time>[-<label>]/). "cost" is
the throughput lost relative to the single partition (target: < 20% at 1000).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (Results, StromBroker, add_results_args, end_offsets,  # noqa: E402
                           loadavg, log, machine, median_of_runs, print_table, produce_run,
                           rss_of, run_main, runs_note, spread_check, use_broker_repo, workdir,
                           write_json)


def cost_vs_first(medians: list[float | None]) -> list[float | None]:
    """The throughput each count loses against the first (1 partition): 1 - rate / rate0;
    negative when it is faster."""
    base = medians[0] if medians else None
    return [1 - m / base if base and m is not None else None for m in medians]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="1,100,1000")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spread", choices=["record", "chunk"], default="record",
                    help="record (default): round-robin per record; chunk: 2,000-record calls "
                         "to one partition after another, as before 2026-11-25")
    ap.add_argument("--quick", action="store_true", help="1 repeat of 3 s (a smoke test)")
    ap.add_argument("--broker-repo", metavar="DIR", help="run strom from this checkout (before/after)")
    ap.add_argument("--json", help="also write the summary to this file")
    add_results_args(ap)
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.repeats, a.seconds = 1, 3.0
    info = machine()
    use_broker_repo(a.broker_repo, info)
    out = Results("partitions", a, info)
    results: list[dict[str, Any]] = []
    with workdir() as wd:
        for n in (int(x) for x in a.counts.split(",")):
            sub = wd / f"p{n}"
            sub.mkdir()
            sut = StromBroker(sub)
            try:
                pid = sut.pids()[0]
                rss_idle = rss_of(pid)
                t = time.perf_counter()
                sut.create_topic("parts", n, 1)
                create_s = time.perf_counter() - t
                time.sleep(0.5)
                rss_topic = rss_of(pid)
                runs = []
                for r in range(a.repeats):
                    load = loadavg()
                    before = end_offsets(sut.bootstrap, "parts", n)
                    res = produce_run(sut.bootstrap, "parts", n, a.record_size, "none", "1",
                                      a.seconds, 50_000_000, [pid], spread=a.spread)
                    res["loadavg"] = load
                    # Outside the clock: did every partition get its share?
                    res["per_partition"] = spread_check(before, end_offsets(sut.bootstrap, "parts", n))
                    pp = res["per_partition"]
                    log(f"{n} partitions run {r}: {res['records_per_s']:,.0f} rec/s "
                        f"{res['mb_per_s']:.1f} MB/s, {res['records']:,} acknowledged, "
                        f"{pp['partitions_written']} partitions written "
                        f"({pp['min_records']:,}-{pp['max_records']:,} records each) (load {load:.2f})")
                    out.run(f"p{n}-run{r}", {"partitions": n, "repeat": r, "produce": res,
                                             "rss_bytes": rss_of(pid)})
                    runs.append(res)
                rss_after = rss_of(pid)
            finally:
                sut.close()
            results.append({"partitions": n, "create_topic_s": create_s, "rss_idle": rss_idle,
                            "rss_with_topic": rss_topic, "rss_after_produce": rss_after,
                            "produce": median_of_runs([x["records_per_s"] for x in runs]),
                            "runs": runs})
    costs = cost_vs_first([x["produce"]["median"] for x in results])
    rows = [[x["partitions"], x["produce"]["median"], x["produce"]["median"] * a.record_size / 1e6,
             f"{x['produce']['spread']:.0%}", f"{cost:.0%}" if cost is not None else None,
             x["create_topic_s"], x["rss_idle"] / 2**20, x["rss_with_topic"] / 2**20,
             x["rss_after_produce"] / 2**20] for x, cost in zip(results, costs)]
    print()
    print(f"one broker, {a.record_size} B records, acks=1, records spread by {a.spread}, "
          f"{runs_note(a.repeats)} of {a.seconds} s (acknowledged records)")
    print_table(["partitions", "rec/s", "MB/s", "spread", "cost vs 1", "create s", "RSS idle MiB",
                 "RSS w/ topic MiB", "RSS after MiB"], rows)
    for x, cost in zip(results, costs):
        x["cost_vs_1"] = cost
    out.summary({"results": results})
    write_json(a.json, {"benchmark": "partitions", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir),
                        "results": results})
    return 0


if __name__ == "__main__":
    run_main(main)
