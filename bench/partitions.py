"""Partition scaling on one standalone strom broker: produce throughput (confluent-kafka,
acks=1, records spread round-robin) and broker RSS with 1, 100 and 1000 partitions.

    .venv/bin/python bench/partitions.py                    # 1 KiB records, 5 s, 2 repeats
    .venv/bin/python bench/partitions.py --quick --json partitions.json

A fresh broker per partition count, so RSS is that count's own. "cost" is the throughput
lost relative to the single partition (target: < 20% at 1000).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (StromBroker, best_and_spread, loadavg, log, machine,  # noqa: E402
                           print_table, produce_run, rss_of, use_broker_repo, workdir, write_json)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="1,100,1000")
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--broker-repo", metavar="DIR", help="run strom from this checkout (before/after)")
    ap.add_argument("--json")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.repeats, a.seconds = 1, 3.0
    info = machine()
    use_broker_repo(a.broker_repo, info)
    results = []
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
                    res = produce_run(sut.bootstrap, "parts", n, a.record_size, "none", "1",
                                      a.seconds, 50_000_000, [pid])
                    res["loadavg"] = load
                    log(f"{n} partitions run {r}: {res['records_per_s']:,.0f} rec/s "
                        f"{res['mb_per_s']:.1f} MB/s (load {load:.2f})")
                    runs.append(res)
                rss_after = rss_of(pid)
            finally:
                sut.close()
            results.append({"partitions": n, "create_topic_s": create_s, "rss_idle": rss_idle,
                            "rss_with_topic": rss_topic, "rss_after_produce": rss_after,
                            "produce": best_and_spread([x["records_per_s"] for x in runs]),
                            "runs": runs})
    base = results[0]["produce"]["best"]
    rows = [[r["partitions"], r["produce"]["best"], r["produce"]["best"] * a.record_size / 1e6,
             f"{r['produce']['spread']:.0%}", f"{1 - r['produce']['best'] / base:.0%}",
             r["create_topic_s"], r["rss_idle"] / 2**20, r["rss_with_topic"] / 2**20,
             r["rss_after_produce"] / 2**20] for r in results]
    print()
    print(f"one broker, {a.record_size} B records, acks=1, best of {a.repeats} runs of {a.seconds}s")
    print_table(["partitions", "rec/s", "MB/s", "spread", "cost vs 1", "create s", "RSS idle MiB",
                 "RSS w/ topic MiB", "RSS after MiB"], rows)
    write_json(a.json, {"benchmark": "partitions", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
