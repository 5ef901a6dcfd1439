"""Produce and consume throughput with confluent-kafka (librdkafka) against
(a) one standalone strom broker (acks=1, as LinkedIn's no-replication test),
(b) a 3-broker strom cluster on a real ZooKeeper, replication factor 3, acks=all,
(c) librdkafka's in-memory mock cluster (the ceiling for a broker with no storage and no
    Python; acks=1 for its 1 broker, acks=all for its 3),
(d) the raw loopback TCP, sendfile and page-cache append ceilings of this machine,
all in the same run, with strom / ceiling ratios.

    .venv/bin/python bench/produce_consume.py                  # full matrix, 3 repeats, ~15 min
    .venv/bin/python bench/produce_consume.py --quick          # 1 repeat, fewer workloads (smoke)
    .venv/bin/python bench/produce_consume.py --systems strom-1,mock-1 --sizes 1024 --label after
    .venv/bin/python bench/produce_consume.py --page-cache full   # as on a host that has run a while

Each cell is the median of --repeats runs (3 by default; spread = (max-min)/median); every
run is written to bench/results/produce_consume-<date>-<time>[-<label>]/ as it finishes, the
medians to summary.json there. A produce run lasts --seconds then flushes and counts only
acknowledged records (a delivery error fails the whole invocation, exit status 1); the
consume run reads that run's records back from the page cache, timed from its first batch.
The producer and consumer run in this process on the same 2 cores as the brokers.

--profile-brokers records the brokers with `perf record` during each produce run and prints,
per cell, the medians of where their CPU went (bench/broker_profile.py: the log's writes
into the page cache, the copy into its pages, page faults, socket receive, the
interpreter); each run's file carries its shares and the perf report's text sits beside it
(`*.perf.txt`). The mock cluster's brokers are threads of this process: its profile holds
the producer too.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_profile import BrokerProfile, perf_available  # noqa: E402
from bench._common import (MockCluster, PageCacheFill, Results, StromBroker,  # noqa: E402
                           StromCluster, add_results_args, consume_run, loadavg, log,
                           loopback_ceiling, machine, median_of_runs, page_cache_append_ceiling,
                           print_table, produce_run, raw_fetch_run, run_main, runs_note,
                           sendfile_ceiling, use_broker_repo, workdir, write_json)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default="strom-1,strom-3,mock-1,mock-3",
                    help="comma list of strom-1, strom-3, mock-1, mock-3")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", default="1,16")
    ap.add_argument("--compression", default="none,lz4")
    ap.add_argument("--cluster-workloads", default="1024:1:none,1024:16:none,100:16:none",
                    help="size:partitions:compression list run on the 3-broker systems")
    ap.add_argument("--seconds", type=float, default=4.0, help="produce duration per run")
    ap.add_argument("--max-records", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per cell; the table shows their median (3 at least for a figure "
                         "that claims a target)")
    ap.add_argument("--spread", choices=["chunk", "record"], default="chunk",
                    help="chunk (default, as every run in docs/PERFORMANCE.md's notebook): each "
                         "2,000-record produce_batch call to one partition, the next call to the "
                         "next; record: every record to the next partition (bench/partitions.py)")
    ap.add_argument("--every-report", action="store_true",
                    help="count each record's delivery report in Python (costs the producer "
                         "~0.4 us a record) instead of counting failures only")
    ap.add_argument("--quick", action="store_true",
                    help="1 repeat, 2 s runs, 1 and 16 partitions without lz4 (a smoke test)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the loopback/sendfile runs")
    ap.add_argument("--broker-repo", metavar="DIR",
                    help="run the strom brokers from this checkout (e.g. a git worktree of the "
                         "commit before an optimisation) for before/after comparisons")
    ap.add_argument("--page-cache", choices=["as-is", "full"], default="as-is",
                    help="full: before every produce run, fill free memory with clean page cache "
                         "(PageCacheFill), the state of a host that has been running for a while; "
                         "needs free disk of about the RAM size plus 16 GiB")
    ap.add_argument("--profile-brokers", action="store_true",
                    help="perf record the brokers during each produce run (needs perf): where "
                         "their CPU went, per run (bench/broker_profile.py; the mock's profile "
                         "is this process's, the producer included)")
    ap.add_argument("--json", help="also write the summary (every run and the medians) to this file")
    add_results_args(ap)
    a = ap.parse_args(argv)
    if a.profile_brokers and not perf_available():
        ap.error("--profile-brokers needs perf (Debian: linux-perf)")
    if a.quick:
        a.repeats = 1
        a.seconds = 2.0
        a.compression = "none"
        a.cluster_workloads = "1024:16:none"
    return a


def workloads(a: argparse.Namespace, system: str) -> list[tuple[int, int, str]]:
    if system.endswith("-3"):
        out = []
        for w in a.cluster_workloads.split(","):
            s, p, c = w.split(":")
            out.append((int(s), int(p), c))
        return out
    return [(int(s), int(p), c) for s in a.sizes.split(",") for p in a.partitions.split(",")
            for c in a.compression.split(",")]


def start(system: str, wd: Path):
    if system == "strom-1":
        return StromBroker(wd)
    if system == "strom-3":
        return StromCluster(wd, 3)
    if system == "mock-1":
        return MockCluster(1)
    if system == "mock-3":
        return MockCluster(3)
    raise SystemExit(f"unknown system {system}")


MOCK_CONSUME_PARTITIONS = 64


def mock_consume(sut, topic: str, size: int, comp: str,
                 a: argparse.Namespace) -> tuple[dict, dict | None]:
    """The mock keeps only ~5 MB / 100,000 records per partition: its consume ceiling reads
    everything it retained of a 64-partition topic filled for the purpose."""
    ctopic = topic + "-consume"
    sut.create_topic(ctopic, MOCK_CONSUME_PARTITIONS, 1)
    per_part = min(100_000, 5_000_000 // size)
    produce_run(sut.bootstrap, ctopic, MOCK_CONSUME_PARTITIONS, size, comp, "1", 60.0,
                per_part * MOCK_CONSUME_PARTITIONS, [], every_report=a.every_report)
    r = consume_run(sut.bootstrap, ctopic, MOCK_CONSUME_PARTITIONS, None, size, sut.pids())
    r["partitions"] = MOCK_CONSUME_PARTITIONS
    raw = None
    if sut.name == "mock-1":
        raw = raw_fetch_run(sut.bootstrap, ctopic, MOCK_CONSUME_PARTITIONS, None, size, sut.pids())
        raw["partitions"] = MOCK_CONSUME_PARTITIONS
    return r, raw


def run_system(system: str, a: argparse.Namespace, wd: Path, out: Results,
               fill: PageCacheFill | None = None) -> list[dict]:
    rf = 3 if system.endswith("-3") else 1
    acks = "all" if rf == 3 else "1"
    log(f"starting {system}")
    sut = start(system, wd)
    results = []
    try:
        for size, parts, comp in workloads(a, system):
            prod, cons, fetches = [], [], []
            for r in range(a.repeats):
                topic = f"bench-{size}-{parts}-{comp}-{r}"
                sut.create_topic(topic, parts, rf)
                filled = fill.top_up() if fill else None
                load = loadavg()
                run_name = f"{system}-{size}B-p{parts}-{comp}-run{r}"
                prof = (BrokerProfile(sut.pids(), (out.dir or wd) / f"{run_name}.perf.data")
                        if a.profile_brokers else None)
                with prof or contextlib.nullcontext():
                    pr = produce_run(sut.bootstrap, topic, parts, size, comp, acks, a.seconds,
                                     a.max_records, sut.pids(), spread=a.spread,
                                     every_report=a.every_report)
                if prof:
                    pr["broker_profile"] = prof.summary()
                if system.startswith("mock"):
                    cr, fr = mock_consume(sut, topic, size, comp, a)
                else:
                    # The topic holds the warm-up's record per partition too.
                    cr = consume_run(sut.bootstrap, topic, parts, pr["records"] + parts, size,
                                     sut.pids())
                    fr = None
                    if rf == 1:
                        fr = raw_fetch_run(sut.bootstrap, topic, parts, pr["records"] + parts,
                                           size, sut.pids())
                pr["loadavg"] = cr["loadavg"] = load
                if filled:
                    pr["page_cache_fill"] = filled
                cons_rate = f"{cr['records_per_s']:,.0f}" if cr["records_per_s"] else "-"
                fetch_rate = f"{fr['records_per_s']:,.0f}" if fr else "-"
                log(f"{system} {size}B p={parts} {comp} run {r}: produce {pr['records_per_s']:,.0f} rec/s "
                    f"{pr['mb_per_s']:.1f} MB/s ({pr['records']:,} acknowledged); consume "
                    f"{cons_rate} rec/s; raw fetch {fetch_rate} rec/s (load {load:.2f})")
                out.run(run_name,
                        {"system": system, "record_size": size, "partitions": parts,
                         "compression": comp, "acks": acks, "replication_factor": rf,
                         "repeat": r, "produce": pr, "consume": cr, "fetch": fr})
                prod.append(pr)
                cons.append(cr)
                if fr:
                    fetches.append(fr)
            results.append({"system": system, "record_size": size, "partitions": parts,
                            "compression": comp, "acks": acks, "replication_factor": rf,
                            "produce": median_of_runs([p["records_per_s"] for p in prod]),
                            "consume": median_of_runs([c["records_per_s"] for c in cons]),
                            "fetch": median_of_runs([f["records_per_s"] for f in fetches]),
                            "produce_runs": prod, "consume_runs": cons, "fetch_runs": fetches})
    finally:
        sut.close()
    return results


def _cpu_ms_per_mb(r: dict) -> float | None:
    """Broker CPU (all brokers of the system) per MB produced, median over the runs: compare
    it with the page-cache append ceiling's CPU per MB, the part no broker can avoid."""
    vals = [x["server_cpu_s"] * 1000 / (x["records"] * r["record_size"] / 1e6)
            for x in r.get("produce_runs", []) if x.get("records")]
    return statistics.median(vals) if vals else None


def _profile_median(r: dict, key: str) -> float | None:
    vals = [p["broker_profile"][key] for p in r["produce_runs"] if "broker_profile" in p]
    return statistics.median(vals) if vals else None


def _pct(x: float | None) -> str | None:
    return f"{x:.0%}" if x is not None else None


def _ratio(a: float | None, b: float | None) -> str | None:
    return f"{a / b:.0%}" if a and b else None


def _mb(rate: float | None, size: int) -> float | None:
    return rate * size / 1e6 if rate is not None else None


def main(argv: list[str] | None = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    info = machine()
    log(f"machine: {info}")
    use_broker_repo(a.broker_repo, info)
    out = Results("produce_consume", a, info)
    results: list[dict] = []
    ceilings: dict[str, dict] = {}
    with workdir() as wd:
        fill = PageCacheFill(wd / "ballast") if a.page_cache == "full" else None
        if fill:
            log(f"page cache: filling free memory with clean ballast: {fill.top_up()}")
        if not a.no_ceilings:
            n = max(2, a.repeats)
            ceilings["loopback_mb_s"] = median_of_runs([loopback_ceiling() for _ in range(n)])
            ceilings["sendfile_mb_s"] = median_of_runs([sendfile_ceiling(wd) for _ in range(n)])
            appends = []
            for _ in range(n):
                if fill:
                    fill.top_up()
                appends.append(page_cache_append_ceiling(wd))
            ceilings["append_mb_s"] = median_of_runs([x["mb_per_s"] for x in appends])
            ceilings["append_cpu_ms_per_mb"] = median_of_runs([x["cpu_ms_per_mb"] for x in appends])
            out.run("ceilings", {"ceilings": ceilings})
            log(f"ceilings: loopback {ceilings['loopback_mb_s']['median']:.0f} MB/s, "
                f"sendfile {ceilings['sendfile_mb_s']['median']:.0f} MB/s, page-cache append "
                f"{ceilings['append_mb_s']['median']:.0f} MB/s")
        for system in a.systems.split(","):
            results.extend(run_system(system.strip(), a, wd, out, fill))
        if fill:
            fill.close()

    # The table: strom rows with the matching mock row as the ceiling; every figure a median.
    by_key = {(r["system"], r["record_size"], r["partitions"], r["compression"]): r for r in results}
    rows = []
    for r in results:
        if not r["system"].startswith("strom"):
            continue
        mock = by_key.get(("mock-" + r["system"].split("-")[1], r["record_size"], r["partitions"],
                           r["compression"]))
        size = r["record_size"]
        p, c, f = r["produce"]["median"], r["consume"]["median"], r["fetch"]["median"]
        row = [r["system"], r["acks"], size, r["partitions"], r["compression"],
               p, _mb(p, size), _pct(r["produce"]["spread"]), _cpu_ms_per_mb(r),
               c, _mb(c, size), f, _mb(f, size), _pct(r["fetch"]["spread"])]
        if mock:
            mp, mc, mf = mock["produce"]["median"], mock["consume"]["median"], mock["fetch"]["median"]
            row += [mp, _ratio(p, mp), mc, _ratio(c, mc), mf, _ratio(f, mf)]
        else:
            row += [None] * 6
        rows.append(row)
    print()
    print(f"{runs_note(a.repeats)}, {a.seconds} s each; cpus={info['cpus']} ({info['cpu']}), "
          f"librdkafka {info['librdkafka']}; spread=(max-min)/median; produce: acknowledged "
          f"records only ({'every delivery report counted' if a.every_report else 'delivery reports of failures only'}; "
          f"none failed), spread by {a.spread}; consume: timed from its first batch; page cache "
          + ("full (free memory filled with clean ballast before each produce run)"
             if a.page_cache == "full" else "as found (new pages come from free memory)"))
    if ceilings:
        print(f"ceilings (medians): loopback TCP {ceilings['loopback_mb_s']['median']:,.0f} MB/s "
              f"(spread {ceilings['loopback_mb_s']['spread']:.0%}), sendfile->socket "
              f"{ceilings['sendfile_mb_s']['median']:,.0f} MB/s (spread {ceilings['sendfile_mb_s']['spread']:.0%}), "
              f"page-cache append {ceilings['append_mb_s']['median']:,.0f} MB/s "
              f"(runs {', '.join(f'{v:,.0f}' for v in ceilings['append_mb_s']['runs'])}; CPU "
              f"{', '.join(f'{v:.2f}' for v in ceilings['append_cpu_ms_per_mb']['runs'])} ms per MB)")
    print_table(["system", "acks", "size", "parts", "codec", "prod rec/s", "prod MB/s", "spr", "cpu ms/MB",
                 "cons rec/s", "cons MB/s", "fetch rec/s", "fetch MB/s", "spr", "mock prod",
                 "s/m", "mock cons", "s/m", "mock fetch", "s/m"], rows)
    mocks = [[r["system"], r["record_size"], r["partitions"], r["compression"],
              r["produce"]["median"], _mb(r["produce"]["median"], r["record_size"]),
              r["consume"]["median"], _mb(r["consume"]["median"], r["record_size"]),
              r["fetch"]["median"], _mb(r["fetch"]["median"], r["record_size"])]
             for r in results if r["system"].startswith("mock")]
    if mocks:
        print()
        print_table(["ceiling", "size", "parts", "codec", "prod rec/s", "prod MB/s",
                     "cons rec/s", "cons MB/s", "fetch rec/s", "fetch MB/s"], mocks)
    profiled = [r for r in results if any("broker_profile" in p for p in r["produce_runs"])]
    if profiled:
        print()
        print("where the brokers' CPU went during the produce runs (perf, % of their samples, "
              "median of the runs; log write: under generic_perform_write, page copy: the copy "
              "into page-cache pages, part of it; faults: page-fault handling; the mock's "
              "process holds the producer too)")
        print_table(["system", "size", "parts", "codec", "prod MB/s", "CPU s", "log write %",
                     "page copy %", "faults %", "sock recv %", "sock send %", "python %",
                     "kernel %"],
                    [[r["system"], r["record_size"], r["partitions"], r["compression"],
                      _mb(r["produce"]["median"], r["record_size"])]
                     + [_profile_median(r, k) for k in ("cpu_s", "log_write_pct", "page_copy_pct",
                                                        "page_fault_pct",
                                                        "socket_receive_pct", "socket_send_pct",
                                                        "python_pct", "kernel_pct")]
                     for r in profiled])
    summary = {"ceilings": ceilings, "results": results}
    out.summary(summary)
    write_json(a.json, {"benchmark": "produce_consume", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir),
                        **summary})
    return 0


if __name__ == "__main__":
    run_main(main)
