"""generate: deterministic test data for the ETL jobs, with the answers the jobs must give.

    bin/spark-etl.sh generate location --records 1000 --bootstrap-server localhost:9092
    bin/spark-etl.sh generate logs --records 1000 --bootstrap-server localhost:9092 --seed 7

`location` writes `timestamp,userId,x,y` CSV records (topic `location`, keyed by userId) for
--users users walking randomly; `logs` writes JSON log records (topic `logs`, keyed by
service) of --services services at levels DEBUG/INFO/WARN/ERROR. Timestamps are ISO-8601 UTC
with milliseconds, spread over --windows windows of --window from --start (default
2024-01-01T00:00:00Z, so the same --seed gives the same keys and values, byte for byte; the
records' Kafka timestamps are the send time, so the broker's retention sees new data); some
records are sent up to a few seconds out of order (less than the watermark, so they still
count).

The last record lies past the last data window's end + --watermark: it moves the jobs'
watermark past every window of the data, so with append output (a window is written once the
watermark passes its end) each of them is written even under --trigger availableNow. That
record's own window stays open, as the newest window of any stream does, and is not in the
expected answers. Pass the jobs the same --window and --watermark as here (the defaults agree).

The expected output of the job is printed (and with --expected FILE written as JSON, rows as
the jobs write them to their topics). Topics are created when missing (--partitions,
--replication-factor). A job drops events older than its watermark: to run the generator
again against a job that already read its data, pass a later --start (or use new topics and a
new --checkpoint).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from clients.command_line import ToolParser
from spark_jobs import etl_common as common

if TYPE_CHECKING:
    from clients.types import RecordMetadata

DEFAULT_START = "2024-01-01T00:00:00Z"
SERVICES = ["auth", "billing", "checkout", "search", "inventory", "shipping", "email", "api"]
LEVELS = [("DEBUG", 20), ("INFO", 55), ("WARN", 15), ("ERROR", 10)]     # (level, weight %)
MESSAGES = {
    "DEBUG": ["cache lookup key={n}", "retrying connection attempt {n}", "parsed {n} headers"],
    "INFO": ["request served in {n} ms", "user {n} signed in", "job {n} scheduled"],
    "WARN": ["slow query took {n} ms", "disk {n}% full", "queue depth {n}"],
    "ERROR": ["payment {n} declined", "timeout after {n} ms calling upstream",
              "unhandled exception in worker {n}"],
}
MAX_DISORDER_MS = 5_000      # records sent late by up to this much (capped at watermark / 2)


@dataclass
class Dataset:
    """Records to produce, in order, and what the job must output for them."""
    topic: str
    records: list[tuple[bytes, bytes, int]] = field(default_factory=list)  # key, value, event ms
    expected: dict[str, Any] = field(default_factory=dict)
    closing_ts: int = 0


@dataclass
class TimeLayout:
    """Where the data's event times lie."""
    start_ms: int
    window_ms: int
    watermark_ms: int
    windows: int

    @property
    def end_ms(self) -> int:           # end of the last data window
        return self.start_ms + self.windows * self.window_ms

    @property
    def closing_ms(self) -> int:
        """The closing record's time: 1 s past the end of the window holding the last data
        (windows are epoch-aligned, so not necessarily end_ms) plus the watermark."""
        return self.window_of(self.end_ms - 1)[1] + self.watermark_ms + 1_000

    def window_of(self, ts: int) -> tuple[int, int]:
        # Spark's tumbling windows are aligned to the epoch, not to --start
        s = ts - ts % self.window_ms
        return s, s + self.window_ms

    def event_times(self, n: int, rnd: random.Random) -> list[int]:
        """n distinct-ish increasing times spread evenly over the data windows (ms)."""
        span = self.end_ms - self.start_ms
        return [self.start_ms + int((i + rnd.random()) * span / n) for i in range(n)]

    def send_order(self, times: list[int], rnd: random.Random) -> list[int]:
        """Indexes of `times` in the order to send them: ~10% arrive up to MAX_DISORDER_MS late."""
        late = min(MAX_DISORDER_MS, self.watermark_ms // 2)
        arrival = [t + (rnd.randrange(late) if late and rnd.random() < 0.1 else 0)
                   for t in times]
        return sorted(range(len(times)), key=lambda i: (arrival[i], i))


def location_dataset(n: int, seed: int, layout: TimeLayout, users: int = 5,
                     topic: str = "location") -> Dataset:
    """n `timestamp,userId,x,y` records plus the closing one; expected = geo_locations rows."""
    rnd = random.Random(seed)
    names = [f"user-{i}" for i in range(1, users + 1)]
    pos = {u: [round(rnd.uniform(0, 100), 4), round(rnd.uniform(0, 100), 4)] for u in names}
    times = layout.event_times(n, rnd)
    fixes = []
    for ts in times:
        user = rnd.choice(names)
        p = pos[user]
        p[0] = round(p[0] + rnd.uniform(-1, 1), 4)
        p[1] = round(p[1] + rnd.uniform(-1, 1), 4)
        fixes.append((ts, user, p[0], p[1]))
    ds = Dataset(topic)
    for i in layout.send_order(times, rnd):
        ts, user, x, y = fixes[i]
        ds.records.append((user.encode(), _csv(ts, user, x, y), ts))
    # the closing record: user-1 still where it was, much later
    ds.closing_ts = layout.closing_ms
    x, y = pos[names[0]]
    ds.records.append((names[0].encode(), _csv(ds.closing_ts, names[0], x, y), ds.closing_ts))

    groups: dict[tuple[int, str], list[tuple[int, float, float]]] = defaultdict(list)
    for ts, user, x, y in fixes:
        groups[(layout.window_of(ts)[0], user)].append((ts, x, y))
    rows = []
    for (ws, user), fs in sorted(groups.items()):
        last_ts, last_x, last_y = max(fs)       # as the job: the latest, ties by x then y
        rows.append({"window_start": common.iso_ms(ws),
                     "window_end": common.iso_ms(ws + layout.window_ms),
                     "user_id": user, "count": len(fs), "last_x": last_x, "last_y": last_y,
                     "last_timestamp": common.iso_ms(last_ts)})
    ds.expected = {"job": "geo_locations", "topic": topic, "aggregates": rows}
    return ds


def _csv(ts: int, user: str, x: float, y: float) -> bytes:
    return f"{common.iso_ms(ts)},{user},{x:.4f},{y:.4f}".encode()


def logs_dataset(n: int, seed: int, layout: TimeLayout, services: int = 4,
                 topic: str = "logs") -> Dataset:
    """n JSON log records plus the closing one; expected = log_levels counts and errors."""
    rnd = random.Random(seed)
    names = SERVICES[:services]
    levels = [lv for lv, _ in LEVELS]
    weights = [w for _, w in LEVELS]
    times = layout.event_times(n, rnd)
    logs = []
    for ts in times:
        level = rnd.choices(levels, weights)[0]
        message = rnd.choice(MESSAGES[level]).format(n=rnd.randrange(1, 10_000))
        logs.append({"timestamp": common.iso_ms(ts), "level": level,
                     "service": rnd.choice(names), "message": message})
    ds = Dataset(topic)
    for i in layout.send_order(times, rnd):
        ds.records.append((logs[i]["service"].encode(), _json(logs[i]), times[i]))
    ds.closing_ts = layout.closing_ms
    closing = {"timestamp": common.iso_ms(ds.closing_ts), "level": "INFO", "service": names[0],
               "message": "end of generated data: this record closes the last window"}
    ds.records.append((names[0].encode(), _json(closing), ds.closing_ts))

    counts: dict[tuple[int, str, str], int] = defaultdict(int)
    errors = []
    for ts, log in zip(times, logs):
        ws, we = layout.window_of(ts)
        counts[(ws, log["service"], log["level"])] += 1
        if log["level"] == "ERROR":
            errors.append(dict(log, window_start=common.iso_ms(ws),
                               window_end=common.iso_ms(we)))
    rows = [{"window_start": common.iso_ms(ws), "window_end": common.iso_ms(ws + layout.window_ms),
             "service": service, "level": level, "count": c}
            for (ws, service, level), c in sorted(counts.items())]
    errors.sort(key=lambda e: (e["timestamp"], e["service"], e["message"]))
    ds.expected = {"job": "log_levels", "topic": topic, "counts": rows, "errors": errors}
    return ds


def _json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def produce(bootstrap: str, ds: Dataset, partitions: int = common.DEFAULT_PARTITIONS,
            replication_factor: int = 1) -> None:
    """Create the topic if missing and send the records in order; raise on any failure."""
    from clients import Producer

    common.ensure_topics(bootstrap, [ds.topic], partitions, replication_factor)
    failures: list[Exception] = []
    lock = threading.Lock()

    def delivered(err: Exception | None, md: RecordMetadata | None) -> None:
        if err is not None:
            with lock:
                failures.append(err)

    with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262_144) as p:
        for key, value, _event_time in ds.records:
            # Kafka timestamp: now. Event times of 2024 would look expired to time retention.
            p.send(ds.topic, value, key=key, on_delivery=delivered)
        p.flush()
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(ds.records)} records were not delivered; "
                           f"first error: {failures[0]!r}")


# ------------------------------------------------------------------------- command line

def build_parser() -> ToolParser:
    p = ToolParser(prog="spark-etl.sh generate", description=__doc__.split("\n\n")[0],
                   epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("location", "logs"),
                   help="location: data for geo_locations; logs: data for log_levels.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", required=True,
                   help="REQUIRED: the broker(s) to write to.")
    p.add_argument("--records", type=int, default=1000, metavar="N",
                   help="Data records to write (default 1000), plus the closing record.")
    p.add_argument("--seed", type=int, default=42, help="Random seed (default 42).")
    p.add_argument("--topic", help="Topic (default location or logs).")
    p.add_argument("--start", type=common.instant_arg, default=DEFAULT_START,
                   metavar="INSTANT", help=f"Event time of the data's beginning, ISO-8601 or "
                                           f"epoch ms (default {DEFAULT_START}).")
    p.add_argument("--windows", type=int, default=3, metavar="W",
                   help="The data spans W windows (default 3).")
    p.add_argument("--window", type=common.duration_arg, default=60_000, metavar="DURATION",
                   help="Window length, as the job's --window (default 1m).")
    p.add_argument("--watermark", type=common.duration_arg, default=30_000, metavar="DURATION",
                   help="The job's --watermark (default 30s): the closing record lies past it.")
    p.add_argument("--users", type=int, default=5, metavar="N", help="location: users (default 5).")
    p.add_argument("--services", type=int, default=4, choices=range(1, len(SERVICES) + 1),
                   metavar="1..8", help="logs: services (default 4).")
    p.add_argument("--partitions", type=int, default=common.DEFAULT_PARTITIONS, metavar="N",
                   help=f"Partitions if the topic is created "
                        f"(default {common.DEFAULT_PARTITIONS}).")
    p.add_argument("--replication-factor", type=int, default=1, metavar="N",
                   help="Replication factor if the topic is created (default 1).")
    p.add_argument("--expected", metavar="FILE",
                   help="Also write the expected job output there, as JSON.")
    p.add_argument("--quiet", action="store_true", help="Print only the one-line summary.")
    return p


def build_dataset(args: argparse.Namespace) -> Dataset:
    for flag in ("records", "windows", "users", "partitions", "replication_factor"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least 1")
    layout = TimeLayout(args.start, args.window, args.watermark, args.windows)
    if args.kind == "location":
        return location_dataset(args.records, args.seed, layout, args.users,
                                args.topic or "location")
    return logs_dataset(args.records, args.seed, layout, args.services, args.topic or "logs")


def print_expected(ds: Dataset, out: TextIO = sys.stdout) -> None:
    e = ds.expected
    if e["job"] == "geo_locations":
        print(f"expected geo_locations output ({len(e['aggregates'])} rows):", file=out)
        print(f"  {'window_start':24}  {'user_id':8} {'count':>5}  {'last_x':>9} {'last_y':>9}",
              file=out)
        for r in e["aggregates"]:
            print(f"  {r['window_start']:24}  {r['user_id']:8} {r['count']:>5}  "
                  f"{r['last_x']:>9.4f} {r['last_y']:>9.4f}", file=out)
        return
    print(f"expected log_levels counts ({len(e['counts'])} rows) per window and service:",
          file=out)
    per: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for r in e["counts"]:
        per[(r["window_start"], r["service"])][r["level"]] = r["count"]
    for (ws, service), levels in per.items():
        cells = " ".join(f"{lv}={levels.get(lv, 0)}" for lv, _ in LEVELS)
        print(f"  {ws}  {service:10} {cells}", file=out)
    print(f"expected ERROR records on the errors topic: {len(e['errors'])}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    from clients.command_line import CliError, run_tool

    args = build_parser().parse_args(argv)

    def body() -> int:
        try:
            ds = build_dataset(args)
        except ValueError as e:
            raise CliError(str(e)) from None
        produce(args.bootstrap_server, ds, args.partitions, args.replication_factor)
        n = len(ds.records)
        print(f"wrote {n} records to topic {ds.topic}: {n - 1} from {common.iso_ms(args.start)} "
              f"over {args.windows} windows of {args.window / 1000:g}s, then 1 at "
              f"{common.iso_ms(ds.closing_ts)} that moves the watermark past them")
        if args.expected:
            with open(args.expected, "w") as f:
                json.dump(ds.expected, f, indent=1)
                f.write("\n")
        if not args.quiet:
            print_expected(ds)
        return 0

    return run_tool(body)


if __name__ == "__main__":
    sys.exit(main())
