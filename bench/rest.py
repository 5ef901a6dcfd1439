"""The REST proxy under load (issue 22): 50 concurrent HTTP producers through v3's produce
route, streaming mode (one chunked request per producer, records written into it for the
whole run) and one POST per record, beside strom's AsyncProducer straight to the broker
(the proxy's own producer with nothing around it: the ceiling) in the same run.

    .venv/bin/python bench/rest.py                  # 3 runs of 60 s per mode, ~7 min
    .venv/bin/python bench/rest.py --quick          # 1 run of 5 s per mode (a smoke test)
    .venv/bin/python bench/rest.py --seconds 30 --modes stream --label after

Every run starts a fresh standalone broker (`python -m broker`) and a fresh proxy
(`python -m clients.rest.main`, its defaults: strom's producer defaults, acks=all) as
processes of their own; the HTTP producers run in this process (aiohttp,
tests/support/rest_load.py). Each mode writes its own new topic (--partitions, default 3).
Records are the JSON `{"value": {"type": "STRING", "data": "<producer>-<seq>"}}` (values of
5-8 bytes, no key). A record counts only when its delivery report says error_code 200; after
each mode the topic is read back with confluent-kafka and must hold exactly the records
answered 200 (else the run FAILS).
- records/s: records answered 200 over the time from the first send to the last report.
- p50/p99 latency: per record, from writing it into the stream (stream mode: at most
  --window records a producer sent and not yet answered) or sending its POST (request mode)
  to reading its report.
- proxy CPU us/rec: the proxy process's CPU (user+system) over the mode per record.
- ceiling: strom's AsyncProducer in this process sending the same kind of values from a
  plain loop of `await send()` for --ceiling-seconds to a topic of the same partitions,
  acks=all; "x ceiling" is the mode's records/s over it (same run).
Medians over --runs (3) with spread (max-min)/median; per-run files and summary.json in
bench/results/rest-<date>-<time>[-<label>]/.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (BenchFailure, Results, add_results_args, cpu_seconds_of, loadavg, log,  # noqa: E402
                           machine, median_of_runs, percentile, plain_broker_processes, print_table,
                           run_main, runs_note, workdir)
from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.rest_load import run_load  # noqa: E402
from tests.support.rest_proxy import RestProxyProcess  # noqa: E402


def _cluster_id(url: str) -> str:
    with urllib.request.urlopen(url + "/v3/clusters", timeout=30) as r:
        return json.loads(r.read())["data"][0]["cluster_id"]


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from clients.admin import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _check_topic(bootstrap: str, topic: str, partitions: int, delivered: list[str]) -> None:
    """The topic must hold exactly the records answered 200, each once."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-rest-check", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        seen: Counter[str] = Counter()
        pos = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + 300
        while any(pos[p] < ends[p] for p in pos):
            if time.monotonic() > deadline:
                raise BenchFailure(f"{topic}: could not read the topic back to its end")
            for m in c.consume(20000, timeout=1.0):
                if m.error() is None:
                    seen[m.value().decode()] += 1
                    pos[m.partition()] = m.offset() + 1
    finally:
        c.close()
    doubled = sum(1 for n in seen.values() if n > 1)
    if doubled or set(seen) != set(delivered) or sum(seen.values()) != len(delivered):
        raise BenchFailure(f"{topic}: {sum(seen.values())} records in the topic ({doubled} doubled), "
                           f"{len(delivered)} answered 200")


async def _ceiling(bootstrap: str, topic: str, seconds: float) -> dict[str, Any]:
    from clients.aio.producer import AsyncProducer
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        await (await producer.send(topic, b"warm-up"))
        futures = []
        t0 = time.monotonic()
        stop_at = t0 + seconds
        seq = 0
        while time.monotonic() < stop_at:
            for _ in range(1000):
                futures.append(await producer.send(topic, b"c-%d" % seq))
                seq += 1
        await producer.flush()
        elapsed = time.monotonic() - t0
    acked = sum(1 for f in futures if f.exception() is None)
    if acked != len(futures):
        raise BenchFailure(f"ceiling: {len(futures) - acked} records not acknowledged")
    return {"records": acked, "seconds": elapsed, "rate": acked / elapsed}


def one_run(a: argparse.Namespace, run: int, results: Results) -> dict[str, Any]:
    with workdir(prefix="strom-bench-rest-") as wd:
        plain_broker_processes()
        broker = BrokerProcess(wd / "broker", overrides={"num.partitions": str(a.partitions)}).start()
        proxy = RestProxyProcess(wd / "proxy", broker.bootstrap)
        try:
            proxy.start()
            assert proxy.proc is not None
            cluster = _cluster_id(proxy.url)
            out: dict[str, Any] = {"loadavg_before": loadavg()}
            topic = f"ceiling-{run}"
            _create_topic(broker.bootstrap, topic, a.partitions)
            out["ceiling"] = asyncio.run(_ceiling(broker.bootstrap, topic, a.ceiling_seconds))
            log(f"run {run}: ceiling {out['ceiling']['rate']:,.0f} records/s")
            for mode in a.modes.split(","):
                topic = f"rest-{mode}-{run}"
                _create_topic(broker.bootstrap, topic, a.partitions)
                cpu0 = cpu_seconds_of(proxy.proc.pid)
                res = asyncio.run(run_load(proxy.url, cluster, topic, producers=a.producers,
                                           seconds=a.seconds, mode=mode, window=a.window))
                cpu = cpu_seconds_of(proxy.proc.pid) - cpu0
                if res.failed:
                    raise BenchFailure(f"{mode}: {len(res.failed)} records not answered 200, "
                                       f"e.g. {res.failed[:3]}")
                _check_topic(broker.bootstrap, topic, a.partitions, res.delivered)
                lat = sorted(res.latencies)
                out[mode] = {"records": len(res.delivered), "seconds": res.seconds, "rate": res.rate,
                             "p50_ms": percentile(lat, 50) * 1000, "p99_ms": percentile(lat, 99) * 1000,
                             "proxy_cpu_us_per_record": cpu / len(res.delivered) * 1e6,
                             "x_ceiling": res.rate / out["ceiling"]["rate"]}
                log(f"run {run}: {mode} {res.rate:,.0f} records/s, p99 {out[mode]['p99_ms']:.1f} ms")
            out["loadavg_after"] = loadavg()
            results.run(f"run-{run}", out)
            return out
        finally:
            proxy.stop()
            broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60.0, help="per mode and run")
    ap.add_argument("--ceiling-seconds", type=float, default=10.0)
    ap.add_argument("--producers", type=int, default=50)
    ap.add_argument("--window", type=int, default=64, help="stream mode: records in flight a producer")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--modes", default="stream,request")
    ap.add_argument("--quick", action="store_true", help="1 run of 5 s per mode")
    add_results_args(ap)
    a = ap.parse_args()
    if a.quick:
        a.runs, a.seconds, a.ceiling_seconds = 1, 5.0, 3.0
    info = machine()
    results = Results("rest", a, info)
    runs = [one_run(a, i, results) for i in range(1, a.runs + 1)]
    modes = a.modes.split(",")
    rows, summary = [], {}
    for mode in modes:
        cells = {k: median_of_runs([r[mode][k] for r in runs])
                 for k in ("rate", "p50_ms", "p99_ms", "proxy_cpu_us_per_record", "x_ceiling")}
        summary[mode] = cells
        rows.append([f"{a.producers} HTTP producers, {mode}", cells["rate"]["median"],
                     f"{cells['rate']['spread']:.0%}", cells["p50_ms"]["median"], cells["p99_ms"]["median"],
                     cells["proxy_cpu_us_per_record"]["median"], cells["x_ceiling"]["median"]])
    ceiling = median_of_runs([r["ceiling"]["rate"] for r in runs])
    summary["ceiling"] = ceiling
    rows.append(["ceiling: AsyncProducer, direct", ceiling["median"], f"{ceiling['spread']:.0%}",
                 None, None, None, 1.0])
    print(f"\nREST proxy, v3 produce ({runs_note(len(runs))}; {a.seconds:.0f} s a mode, "
          f"{a.partitions} partitions)")
    print_table(["path", "records/s", "spread", "p50 ms", "p99 ms", "proxy CPU us/rec", "x ceiling"], rows)
    results.summary({"modes": summary})
    return 0


if __name__ == "__main__":
    run_main(main)
