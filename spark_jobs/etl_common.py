"""What the ETL jobs (`geo_locations`, `log_levels`) and their data generator share.

- Durations (`--window 1m`, `--watermark "30 seconds"`) and instants (ISO-8601 or epoch ms),
  parsed the same way by the jobs and the generator, so both agree on window boundaries.
- `job_parser`: the command line every job has (broker, checkpoint, output, trigger, ...).
- Spark plumbing: read a topic as a stream, parse an event-time column, start the parquet and
  topic sinks (one streaming query per sink, each with its own checkpoint sub-directory), wait
  for the queries as the trigger asks, and `run_job`, the `main` of every job.

Timestamps in records are ISO-8601 in UTC (`2024-01-01T00:00:05.123Z`, what the generator
writes); a string of digits is read as epoch milliseconds. Every job runs with the session time
zone UTC, so windows and the JSON the jobs write are in UTC.

Nothing here imports pyspark at module level: the generator and `--help` do not need Spark.
"""
from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Sequence

from clients.command_line import ToolParser, run_tool, wait_reachable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

FORMAT = "strom"                                   # the Python data source's name
JSON_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"   # XXX renders UTC as "Z"
JSON_OPTIONS = {"timestampFormat": JSON_TIMESTAMP_FORMAT}
DEFAULT_PARTITIONS = 3

_UNITS_MS = {
    "ms": 1, "msec": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def parse_duration_ms(text: str) -> int:
    """'30s', '30 seconds', '1m', '1 minute', '500ms', '2h' or a bare number of seconds -> ms."""
    m = _DURATION.match(str(text).lower())
    if not m or (m.group(2) and m.group(2) not in _UNITS_MS):
        raise ValueError(f"not a duration: {text!r} (examples: 30s, 1m, '1 minute', 500ms)")
    ms = float(m.group(1)) * _UNITS_MS[m.group(2) or "s"]
    if ms != int(ms):
        raise ValueError(f"{text!r} is not a whole number of milliseconds")
    return int(ms)


def duration_arg(text: str) -> int:
    """argparse type for a duration (> 0), in ms."""
    try:
        ms = parse_duration_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return ms


def spark_interval(ms: int) -> str:
    """A duration as Spark's window/withWatermark take it."""
    return f"{ms} milliseconds"


def iso_ms(epoch_ms: int) -> str:
    """Epoch ms -> '2024-01-01T00:00:05.123Z' (what the generator writes and the jobs emit)."""
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def parse_instant_ms(text: str) -> int:
    """ISO-8601 ('2024-01-01T00:00:00Z', no zone = UTC) or epoch milliseconds -> epoch ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return round(dt.timestamp() * 1000)


def instant_arg(text: str) -> int:
    try:
        return parse_instant_ms(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an instant: {text!r} (ISO-8601 like 2024-01-01T00:00:00Z, or epoch ms)") from None


def key_value_arg(text: str) -> tuple[str, str]:
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return k, v


# ---------------------------------------------------------------------------------- topics

def ensure_topics(bootstrap: str, names: Sequence[str], partitions: int = DEFAULT_PARTITIONS,
                  replication_factor: int = 1, timeout: float = 30.0) -> list[str]:
    """Create the topics of `names` that do not exist yet; returns those created."""
    from clients import AdminClient, NewTopic
    from clients.protocol.errors import TopicAlreadyExistsError

    with AdminClient(bootstrap_servers=bootstrap) as admin:
        existing = set(admin.list_topics())
        missing = [n for n in dict.fromkeys(names) if n not in existing]
        if missing:
            try:
                admin.create_topics([NewTopic(n, num_partitions=partitions,
                                              replication_factor=replication_factor)
                                     for n in missing], timeout=timeout)
            except TopicAlreadyExistsError:
                pass        # someone else made one of them meanwhile: the topic is there
    return missing


# ------------------------------------------------------------------------- command line

def job_parser(prog: str, description: str, topics: dict[str, tuple[str, str]],
               epilog: str | None = None) -> ToolParser:
    """The options every ETL job takes. `topics` maps an option name (`--input-topic`) to
    (default topic, help); the values land in args.<option_with_underscores>."""
    p = ToolParser(prog=f"spark-etl.sh {prog}", description=description, epilog=epilog,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", required=True,
                   help="REQUIRED: the strom (or Kafka) broker(s) to read from and write to.")
    p.add_argument("--checkpoint", metavar="DIR", required=True,
                   help="REQUIRED: checkpoint directory; each streaming query of the job keeps "
                        "its offsets and state in a sub-directory. Restarting with the same "
                        "directory continues where the job stopped.")
    p.add_argument("--output", metavar="DIR", required=True,
                   help="REQUIRED: directory of the parquet output (Spark's exactly-once file "
                        "sink; read it with spark.read.parquet(DIR)).")
    for flag, (default, help_) in topics.items():
        p.add_argument(flag, default=default, metavar="TOPIC", help=f"{help_} (default {default}).")
    p.add_argument("--window", type=duration_arg, default=60_000, metavar="DURATION",
                   help="Tumbling window length, e.g. 1m, 30s, '5 minutes' (default 1m).")
    p.add_argument("--watermark", type=duration_arg, default=30_000, metavar="DURATION",
                   help="How late an event may arrive (event time behind the newest event seen) "
                        "and still count (default 30s). A window is written once the watermark "
                        "passes its end: only events newer than window end + watermark close it.")
    p.add_argument("--trigger", choices=("availableNow", "processingTime"),
                   default="processingTime",
                   help="availableNow: process what the topics hold now, then stop. "
                        "processingTime (default): run until Ctrl-C / SIGTERM, one micro-batch "
                        "every --processing-time.")
    p.add_argument("--processing-time", type=duration_arg, default=5_000, metavar="DURATION",
                   help="Micro-batch interval of --trigger processingTime (default 5s).")
    p.add_argument("--starting-offsets", default="earliest", metavar="earliest|latest|JSON",
                   help="Where a new query starts reading (default earliest); a checkpoint, "
                        "once written, wins.")
    p.add_argument("--max-offsets-per-trigger", type=int, metavar="N",
                   help="At most N records per micro-batch, split across partitions (default: "
                        "no limit). Keep batches large enough that partitions do not drift "
                        "apart in event time by more than the watermark.")
    p.add_argument("--source-option", action="append", type=key_value_arg, default=[],
                   metavar="KEY=VALUE", help="Extra option of the strom source (repeatable), "
                                             "e.g. kafka.request.timeout.ms=60000.")
    p.add_argument("--delivery", choices=("exactly-once", "at-least-once"),
                   default="exactly-once",
                   help="Output topics: exactly-once (default) writes each micro-batch in "
                        "Kafka transactions the driver commits, so read_committed consumers see "
                        "each record once even across a driver crash and restart; "
                        "at-least-once (Spark's Kafka sink) may repeat a batch after a crash.")
    p.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS, metavar="N",
                   help=f"Partitions of output topics the job creates when missing "
                        f"(default {DEFAULT_PARTITIONS}).")
    p.add_argument("--replication-factor", type=int, default=1, metavar="N",
                   help="Replication factor of output topics the job creates (default 1).")
    p.add_argument("--master", default="local[2]",
                   help="Spark master (default local[2]).")
    p.add_argument("--shuffle-partitions", type=int, default=2, metavar="N",
                   help="spark.sql.shuffle.partitions: state partitions of the aggregations "
                        "(default 2; fixed once a checkpoint exists).")
    p.add_argument("--show", type=int, default=20, metavar="N",
                   help="With --trigger availableNow, print the first N rows of the parquet "
                        "output at the end (default 20; 0 = none).")
    return p


# ------------------------------------------------------------------------- spark helpers

def read_topic(spark: "SparkSession", args: argparse.Namespace, topic: str) -> "DataFrame":
    """The topic as a stream of Kafka-schema rows (key, value, topic, partition, offset, ...)."""
    reader = (spark.readStream.format(FORMAT)
              .option("kafka.bootstrap.servers", args.bootstrap_server)
              .option("subscribe", topic)
              .option("startingOffsets", args.starting_offsets)
              .option("failOnDataLoss", "true"))
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    for k, v in args.source_option:
        reader = reader.option(k, v)
    return reader.load()


def event_time(col: "Column") -> "Column":
    """A record's event time: ISO-8601 text (with a zone, or UTC) or epoch ms digits; null
    when it is neither (the jobs drop such records)."""
    from pyspark.sql import functions as F

    text = F.trim(col.cast("string"))
    return (F.when(text.rlike(r"^[0-9]+$"), F.timestamp_millis(text.try_cast("long")))
            .otherwise(F.try_to_timestamp(text)))


def to_json_value(*cols: "Column | str") -> "Column":
    """The columns as a JSON object (timestamps ISO-8601 UTC with ms), as binary."""
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*cols), JSON_OPTIONS).cast("binary")


def _trigger(args: argparse.Namespace) -> dict[str, Any]:
    if args.trigger == "availableNow":
        return {"availableNow": True}
    return {"processingTime": spark_interval(args.processing_time)}


def start_parquet(df: "DataFrame", args: argparse.Namespace, name: str, path: str,
                  checkpoint: str) -> "StreamingQuery":
    """Append-mode parquet file sink: a window is written once, when the watermark closes it."""
    return (df.writeStream.queryName(name).format("parquet").outputMode("append")
            .option("path", path).option("checkpointLocation", checkpoint)
            .trigger(**_trigger(args)).start())


def start_topic(df: "DataFrame", args: argparse.Namespace, name: str, topic: str,
                checkpoint: str) -> "StreamingQuery":
    """Append-mode strom sink; `df` has `key` and `value` columns (binary). Exactly once
    unless `--delivery at-least-once`."""
    return (df.select("key", "value").writeStream.queryName(name).format(FORMAT)
            .outputMode("append")
            .option("kafka.bootstrap.servers", args.bootstrap_server)
            .option("topic", topic).option("checkpointLocation", checkpoint)
            .option("exactlyOnce", str(args.delivery == "exactly-once").lower())
            .trigger(**_trigger(args)).start())


def await_queries(spark: "SparkSession", queries: Sequence["StreamingQuery"],
                  trigger: str) -> None:
    """availableNow: wait until every query has processed what was there at its start.
    processingTime: run until one query fails (raised here), or Ctrl-C / SIGTERM stops them all.

    Signals only set a flag that a short wait loop checks: an exception raised inside py4j's
    blocking call would break the connection to the JVM that stopping the queries needs."""
    if trigger == "availableNow":
        for q in queries:
            q.awaitTermination()       # raises StreamingQueryException if the query failed
        return
    stop = threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.is_set():
            if spark.streams.awaitAnyTermination(1):
                for q in queries:
                    failure = q.exception()
                    if failure is not None:
                        raise failure
                break
        else:
            print("stopping the queries ...", file=sys.stderr)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for q in queries:
            if q.isActive:
                q.stop()


def query_summary(q: "StreamingQuery") -> str:
    progress = q.recentProgress        # the last 100 (spark.sql.streaming.numRecentProgressUpdates)
    rows = sum(p.get("numInputRows", 0) for p in progress)
    return f"{q.name}: {len(progress)} micro-batches, {rows} input rows"


def run_job(argv: Sequence[str] | None, parser: ToolParser,
            start: Callable[["SparkSession", argparse.Namespace], list["StreamingQuery"]],
            show: Callable[["SparkSession", argparse.Namespace], None] | None = None) -> int:
    """`main` of a job: parse, build the SparkSession, start the queries, wait, summarize."""
    args = parser.parse_args(argv)
    # No broker: one line and exit 1 within 10 s, rather than a Spark stack trace later.
    rc = run_tool(lambda: wait_reachable(args.bootstrap_server, 10.0))
    if rc:
        return rc
    from spark_jobs.session import strom_spark_session

    spark = strom_spark_session(parser.prog.split()[-1], master=args.master, **{
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.ui.showConsoleProgress": "false",
    })
    try:
        queries = start(spark, args)
        await_queries(spark, queries, args.trigger)
        for q in queries:
            print(query_summary(q))
        if args.trigger == "availableNow" and show is not None and args.show > 0:
            show(spark, args)
    finally:
        spark.stop()
    return 0
