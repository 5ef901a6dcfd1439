"""strom-metrics: a one-screen cluster summary from every broker's /metrics.json.

    bin/strom-metrics.sh --bootstrap-server HOST:PORT [--command-config FILE]
                         [--watch [SECONDS]] [--count N]

Finds the brokers with a Metadata request, asks each one for its `metrics.port` with
DescribeConfigs (broker resource: a broker describes its own static config), reads
http://<broker host>:<metrics.port>/metrics.json twice `--interval` seconds apart (rates
come from the difference), and prints brokers, controller, partitions, under-replicated,
under-min-ISR and offline partitions, messages/s and MB/s in and out, per-broker figures
(leaders, partitions, under-replicated, the replica fetcher's MaxLag, rates, connections,
event-loop lag, memory, ZooKeeper session state, the least free space of its log dirs) and
the groups with the most lag. `--watch` repeats every SECONDS (default 5) until Ctrl-C or
`--count` screens; rates then come from consecutive screens.

The brokers expected are the live ones (the Metadata response's brokers: those registered in
ZooKeeper that the controller has not found dead) and every broker a partition's replica list
names (Metadata lists replicas on dead brokers too): a dead broker that still hosts replicas
is expected, so it is counted and named as not reporting, with why and how many replicas it
hosts.

Exit status (without --watch): 0 when every expected broker reports, 2 when one or more do
not (named on the `brokers` line), 1 when no broker could be reached or none serves metrics.
Only the stdlib, the JSON endpoints and strom's client core are used.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from clients.aio.client import KafkaClient
from clients.aio.metadata import ClusterMetadata
from clients.cli.common import SECURITY_HELP, ToolParser, read_config_file, wait_reachable
from clients.config import resolve

BROKER_RESOURCE = 4
MB = 1_000_000


NOT_LIVE = "not live: the controller counts it dead"


@dataclass
class BrokerView:
    broker_id: int
    host: str
    port: int
    metrics_port: int | None = None
    doc: dict[str, Any] | None = None
    error: str | None = None    # why it has no figures, in a few words
    detail: str = ""            # and the failure behind that, for the broker table
    replicas: int = 0           # partition replicas the cluster's metadata places on it


@dataclass
class Snapshot:
    time_s: float
    brokers: list[BrokerView] = field(default_factory=list)
    controller_id: int = -1


# ---------------------------------------------------------------------------- reading values

def value(doc: dict[str, Any] | None, family: str, labels: dict[str, str] | None = None,
          default: float = 0.0) -> float:
    """The family's main sample (name, or name_total for counters) with exactly `labels`."""
    if doc is None:
        return default
    f = doc.get("metrics", {}).get(family)
    if f is None:
        return default
    want = family + "_total" if f["type"] == "counter" else family
    for s in f["samples"]:
        if s["name"] == want and s["labels"] == (labels or {}):
            v = s["value"]
            return float(v) if not isinstance(v, str) else default
    return default


def samples(doc: dict[str, Any] | None, family: str) -> list[tuple[dict[str, str], float]]:
    if doc is None:
        return []
    f = doc.get("metrics", {}).get(family)
    if f is None:
        return []
    return [(s["labels"], float(s["value"])) for s in f["samples"] if not isinstance(s["value"], str)]


# ---------------------------------------------------------------------------- discovery

def expected_brokers(cluster: ClusterMetadata) -> list[BrokerView]:
    """Every broker the cluster expects, by id: the live ones and any other that a
    partition's replica list names (dead: no address, an error saying so)."""
    hosted = Counter(r for t in cluster.topics.values() for p in t.partitions.values() for r in p.replicas)
    views = []
    for broker_id in sorted(set(cluster.brokers) | set(hosted)):
        b = cluster.brokers.get(broker_id)
        v = BrokerView(broker_id, b.host, b.port) if b is not None else \
            BrokerView(broker_id, "?", 0, error=NOT_LIVE)
        v.replicas = hosted.get(broker_id, 0)
        views.append(v)
    return views


async def discover(bootstrap: str, timeout: float,
                   extra: dict[str, str] | None = None) -> tuple[list[BrokerView], int]:
    """The expected brokers (expected_brokers) and each live one's metrics.port
    (DescribeConfigs to itself); `extra`: client configs (the --command-config file:
    security settings)."""
    client = KafkaClient(resolve("admin", {**(extra or {}), "bootstrap.servers": bootstrap,
                                           "client.id": "strom-metrics",
                                           "request.timeout.ms": int(timeout * 1000)}))
    client.metadata.all_topics = True      # every partition's replicas name the expected brokers
    try:
        await client.start()
        cluster = client.cluster
        views = expected_brokers(cluster)

        async def port_of(v: BrokerView) -> None:
            try:
                r = await client.request(v.broker_id, "DescribeConfigs", {
                    "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(v.broker_id),
                                   "configuration_keys": ["metrics.port"]}],
                    "include_synonyms": False, "include_documentation": False})
                res = r.results[0]
                if res.error_code:
                    v.error = f"DescribeConfigs error {res.error_code}"
                    return
                found = {c.name: c.value for c in res.configs}
                port = int(found.get("metrics.port") or -1)
                if port <= 0:
                    v.error = "metrics.port is not set"
                else:
                    v.metrics_port = port
            except Exception as e:    # one broker's failure must not hide the others
                v.error, v.detail = f"no answer on {v.host}:{v.port}", f"DescribeConfigs: {e}"

        await asyncio.gather(*(port_of(v) for v in views if v.broker_id in cluster.brokers))
        return views, cluster.controller_id
    finally:
        await client.close()


def fetch_json(host: str, port: int, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics.json", timeout=timeout) as r:
        return json.loads(r.read())


async def sample(views: list[BrokerView], controller_id: int, timeout: float) -> Snapshot:
    snap = Snapshot(time.monotonic(), controller_id=controller_id)

    async def one(v: BrokerView) -> BrokerView:
        out = BrokerView(v.broker_id, v.host, v.port, v.metrics_port, None, v.error, v.detail, v.replicas)
        if v.metrics_port is not None:
            try:
                out.doc = await asyncio.to_thread(fetch_json, v.host, v.metrics_port, timeout)
                out.error, out.detail = None, ""
            except Exception as e:
                out.error = f"no answer from http://{v.host}:{v.metrics_port}/metrics.json"
                out.detail = str(e)
        return out

    snap.brokers = list(await asyncio.gather(*(one(v) for v in views)))
    return snap


# ---------------------------------------------------------------------------- the summary

def rate(prev: Snapshot | None, cur: Snapshot, broker_id: int, family: str) -> float | None:
    if prev is None:
        return None
    a = next((b.doc for b in prev.brokers if b.broker_id == broker_id), None)
    b = next((b.doc for b in cur.brokers if b.broker_id == broker_id), None)
    if a is None or b is None:
        return None
    dt = (b["timestamp_ms"] - a["timestamp_ms"]) / 1000.0
    if dt <= 0:
        return None
    return max(0.0, value(b, family) - value(a, family)) / dt


def _fmt(x: float | None, spec: str) -> str:
    """`x` in `spec`; unknown (None) is "-", in the same width."""
    return format("-", spec.split(".")[0]) if x is None else format(x, spec)


def brokers_line(cur: Snapshot) -> str:
    """`brokers 2/3 reporting; not reporting: 2 (not live: the controller counts it dead; hosts 14 replicas)`."""
    up = sum(1 for b in cur.brokers if b.doc is not None)
    line = f"brokers {up}/{len(cur.brokers)} reporting"
    missing = [b for b in cur.brokers if b.doc is None]
    if missing:
        line += "; not reporting: " + ", ".join(
            f"{b.broker_id} ({b.error or 'no metrics'}; hosts {b.replicas} replicas)" for b in missing)
    return line


def zk_state(doc: dict[str, Any]) -> str:
    """The broker's ZooKeeper session state ("-" standalone)."""
    on = [labels.get("state", "?") for labels, v in samples(doc, "kafka_server_sessionexpirelistener_sessionstate")
          if v == 1]
    return on[0] if on else "-"


def render(cur: Snapshot, prev: Snapshot | None, bootstrap: str, top: int) -> str:
    up = [b for b in cur.brokers if b.doc is not None]
    docs = [b.doc for b in cur.brokers if b.doc is not None]
    active = [b.broker_id for b in up if value(b.doc, "kafka_controller_kafkacontroller_activecontrollercount") == 1]
    ctl_doc = next((b.doc for b in up if b.broker_id in active), None)
    tot = lambda fam: sum(value(d, fam) for d in docs)  # noqa: E731

    def cluster_rate(fam: str) -> float | None:
        rates = [rate(prev, cur, b.broker_id, fam) for b in up]
        known = [r for r in rates if r is not None]
        return sum(known) if known else None

    lines = []
    when = time.strftime("%H:%M:%S")
    span = f", rates over {cur.time_s - prev.time_s:.1f} s" if prev is not None else ""
    lines.append(f"strom cluster at {bootstrap}  ({when}{span})")
    lines.append(brokers_line(cur))
    ctl = ",".join(map(str, active)) if active else "none"
    warn = "" if len(active) == 1 else f"  !! {len(active)} active controllers"
    partitions = (value(ctl_doc, "kafka_controller_kafkacontroller_globalpartitioncount")
                  if ctl_doc else tot("kafka_server_replicamanager_leadercount"))
    topics = value(ctl_doc, "kafka_controller_kafkacontroller_globaltopiccount") if ctl_doc else 0
    lines.append(f"controller {ctl}{warn}   topics {topics:.0f}   partitions {partitions:.0f}   "
                 f"leaders {tot('kafka_server_replicamanager_leadercount'):.0f}")
    lines.append(f"under-replicated {tot('kafka_server_replicamanager_underreplicatedpartitions'):.0f}   "
                 f"under-min-isr {tot('kafka_server_replicamanager_underminisrpartitioncount'):.0f}   "
                 f"offline {tot('kafka_controller_kafkacontroller_offlinepartitionscount'):.0f}   "
                 f"isr shrinks {tot('kafka_server_replicamanager_isrshrinks'):.0f} "
                 f"expands {tot('kafka_server_replicamanager_isrexpands'):.0f}")
    msgs = cluster_rate("kafka_server_brokertopicmetrics_messagesin")
    bin_ = cluster_rate("kafka_server_brokertopicmetrics_bytesin")
    bout = cluster_rate("kafka_server_brokertopicmetrics_bytesout")
    lines.append(f"in {_fmt(msgs, '.1f')} msgs/s  {_fmt(bin_ and bin_ / MB, '.3f')} MB/s   "
                 f"out {_fmt(bout and bout / MB, '.3f')} MB/s   "
                 f"(totals: {tot('kafka_server_brokertopicmetrics_messagesin'):.0f} msgs, "
                 f"{tot('kafka_server_brokertopicmetrics_bytesin') / MB:.2f} MB in)")
    lines.append("")
    lines.append(f"{'broker':>6} {'address':<21} {'leaders':>7} {'parts':>5} {'urp':>4} {'maxlag':>7} "
                 f"{'msgs/s':>9} {'MB/s in':>8} {'MB/s out':>8} {'conns':>5} {'loop lag ms':>11} "
                 f"{'rss MB':>7} {'zk':>10} {'disk free GB':>12}")
    for b in cur.brokers:
        addr = f"{b.host}:{b.port}" if b.port else "-"
        if b.doc is None:
            lines.append(f"{b.broker_id:>6} {addr:<21} {b.error or 'no metrics'}; hosts {b.replicas} replicas"
                         + (f" ({b.detail})" if b.detail else ""))
            continue
        d = b.doc
        conns = sum(v for _, v in samples(d, "kafka_server_socket_server_metrics_connection_count"))
        r_in = rate(prev, cur, b.broker_id, "kafka_server_brokertopicmetrics_bytesin")
        r_out = rate(prev, cur, b.broker_id, "kafka_server_brokertopicmetrics_bytesout")
        free = [v for _, v in samples(d, "strom_log_dir_usable_bytes")]
        lines.append(
            f"{b.broker_id:>6} {addr:<21} {value(d, 'kafka_server_replicamanager_leadercount'):>7.0f} "
            f"{value(d, 'kafka_server_replicamanager_partitioncount'):>5.0f} "
            f"{value(d, 'kafka_server_replicamanager_underreplicatedpartitions'):>4.0f} "
            f"{value(d, 'kafka_server_replicafetchermanager_maxlag', {'clientId': 'Replica'}):>7.0f} "
            f"{_fmt(rate(prev, cur, b.broker_id, 'kafka_server_brokertopicmetrics_messagesin'), '>9.1f')} "
            f"{_fmt(r_in and r_in / MB, '>8.3f')} {_fmt(r_out and r_out / MB, '>8.3f')} {conns:>5.0f} "
            f"{value(d, 'strom_event_loop_lag_max_seconds') * 1000:>11.1f} "
            f"{value(d, 'process_resident_memory_bytes') / MB:>7.1f} {zk_state(d):>10} "
            f"{_fmt(min(free) / 1e9 if free else None, '>12.1f')}")
    lags: dict[str, float] = {}
    for d in docs:
        for labels, v in samples(d, "kafka_consumergroup_lag_sum"):
            lags[labels.get("consumergroup", "?")] = lags.get(labels.get("consumergroup", "?"), 0) + v
    lines.append("")
    if lags:
        lines.append(f"top lagging groups{'':<14} {'lag':>12}")
        for g, v in sorted(lags.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            lines.append(f"  {g:<30} {v:>12.0f}")
    else:
        lines.append("no committed consumer offsets")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = ToolParser(prog="strom-metrics.sh",
                                 description="One-screen cluster summary from the brokers' /metrics.json.")
    ap.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    ap.add_argument("--command-config", metavar="FILE", dest="config_file",
                    help=f"Property file with client configs. {SECURITY_HELP}")
    ap.add_argument("--watch", nargs="?", type=float, const=5.0, default=None, metavar="SECONDS",
                    help="repeat every SECONDS (default 5) until Ctrl-C")
    ap.add_argument("--count", type=int, default=None, help="with --watch: stop after N screens")
    ap.add_argument("--interval", type=float, default=2.0,
                    help="without --watch: seconds between the two samples rates come from (2; 0: no rates)")
    ap.add_argument("--top", type=int, default=5, help="lagging groups to show (5)")
    ap.add_argument("--timeout", type=float, default=10.0, help="request timeout in seconds (10)")
    return ap.parse_args(argv)


def _extra(args: argparse.Namespace) -> dict[str, str]:
    return read_config_file(args.config_file) if args.config_file else {}


async def run(args: argparse.Namespace) -> int:
    try:
        # A refused connection fails at once in Kafka's words, not after the timeout.
        wait_reachable(args.bootstrap_server, args.timeout)
        views, controller_id = await discover(args.bootstrap_server, args.timeout, _extra(args))
    except Exception as e:
        print(f"strom-metrics: {e}", file=sys.stderr)
        return 1
    if not any(v.metrics_port for v in views):
        for v in views:
            print(f"broker {v.broker_id} ({v.host}:{v.port}): {v.error}"
                  + (f" ({v.detail})" if v.detail else ""), file=sys.stderr)
        print("strom-metrics: no broker serves metrics (set metrics.port)", file=sys.stderr)
        return 1
    if args.watch is None:
        prev = None
        if args.interval > 0:
            prev = await sample(views, controller_id, args.timeout)
            await asyncio.sleep(args.interval)
        cur = await sample(views, controller_id, args.timeout)
        print(render(cur, prev, args.bootstrap_server, args.top), flush=True)
        if not any(b.doc for b in cur.brokers):
            return 1
        return 2 if any(b.doc is None for b in cur.brokers) else 0
    prev = None
    shown = 0
    while args.count is None or shown < args.count:
        if shown:
            try:   # brokers come and go: find them again for every screen
                views, controller_id = await discover(args.bootstrap_server, args.timeout, _extra(args))
            except Exception as e:
                print(f"strom-metrics: {e}", file=sys.stderr)
        cur = await sample(views, controller_id, args.timeout)
        screen = render(cur, prev, args.bootstrap_server, args.top)
        if sys.stdout.isatty():
            print("\033[H\033[2J", end="")
        print(screen + ("\n" if not sys.stdout.isatty() else ""), flush=True)
        shown += 1
        prev = cur
        if args.count is not None and shown >= args.count:
            break
        await asyncio.sleep(args.watch)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
