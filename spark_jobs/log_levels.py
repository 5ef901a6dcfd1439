"""log_levels: log records counted per level and service per window, and ERRORs picked out.

Input (topic `logs`): one application log record per value, JSON
`{"timestamp": "2024-01-01T00:00:05.123Z", "level": "ERROR", "service": "billing",
"message": "..."}` (timestamp ISO-8601 UTC, or epoch milliseconds as a number or string; level
is upper-cased). Records without a parsable timestamp, level or service are dropped.

Two results:
- counts: one row per (window, service, level): window_start, window_end, service, level,
  count; to parquet in --output and to topic `log-level-counts` (JSON, keyed by service).
  Append mode: a window is written once, when the watermark (newest event time seen minus
  --watermark) passes its end; `bin/spark-etl.sh generate logs` ends its data with a record
  past that point, so every window of its data is written under --trigger availableNow.
- errors: every ERROR record, as it arrives (no watermark: nothing is held back), to topic
  `errors` keyed by service, the JSON value the record's fields plus the window it falls in:
  timestamp, level, service, message, window_start, window_end.

Each result to each place is a streaming query of its own (three in all, each with a
checkpoint sub-directory): the parquet output is exactly once, the topics at least once.

    bin/spark-etl.sh log_levels --bootstrap-server localhost:9092 \\
        --checkpoint /tmp/logs/ck --output /tmp/logs/out --trigger availableNow
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Sequence

from spark_jobs import etl_common as common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

PROG = "log_levels"
COUNT_COLUMNS = ["window_start", "window_end", "service", "level", "count"]
ERROR_COLUMNS = ["timestamp", "level", "service", "message", "window_start", "window_end"]
LOG_SCHEMA = "timestamp string, level string, service string, message string"


def build_parser() -> common.ToolParser:
    return common.job_parser(
        PROG, __doc__.split("\n\n")[0],
        {"--input-topic": ("logs", "Topic of JSON log records"),
         "--counts-topic": ("log-level-counts", "Topic the per-window counts go to as JSON, "
                                                "keyed by service"),
         "--errors-topic": ("errors", "Topic the ERROR records go to, with their window")},
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))


def parse_logs(records: "DataFrame") -> "DataFrame":
    """Kafka-schema rows -> (ts timestamp, level, service, message); bad rows dropped."""
    from pyspark.sql import functions as F

    # A JSON number read as a string keeps its text, so epoch ms works as number or string.
    j = F.from_json(F.col("value").cast("string"), LOG_SCHEMA).alias("j")
    parsed = records.select(j).select(
        common.event_time(F.col("j.timestamp")).alias("ts"),
        F.upper(F.trim(F.col("j.level"))).alias("level"),
        F.col("j.service").alias("service"),
        F.col("j.message").alias("message"))
    return parsed.where("ts IS NOT NULL AND level IS NOT NULL AND level != '' "
                        "AND service IS NOT NULL")


def count_levels(logs: "DataFrame", window_ms: int, watermark_ms: int) -> "DataFrame":
    """Parsed logs -> one row per (window, service, level) with COUNT_COLUMNS."""
    from pyspark.sql import functions as F

    counts = (logs.withWatermark("ts", common.spark_interval(watermark_ms))
              .groupBy(F.window("ts", common.spark_interval(window_ms)).alias("w"),
                       "service", "level")
              .agg(F.count(F.lit(1)).alias("count")))
    return counts.select(F.col("w.start").alias("window_start"),
                         F.col("w.end").alias("window_end"), "service", "level", "count")


def errors(logs: "DataFrame", window_ms: int) -> "DataFrame":
    """Parsed logs -> the ERROR records with ERROR_COLUMNS (stateless)."""
    from pyspark.sql import functions as F

    w = F.window("ts", common.spark_interval(window_ms))
    return (logs.where(F.col("level") == "ERROR")
            .select(F.col("ts").alias("timestamp"), "level", "service", "message",
                    w.start.alias("window_start"), w.end.alias("window_end")))


def keyed_by_service(df: "DataFrame", columns: list[str]) -> "DataFrame":
    from pyspark.sql import functions as F

    return df.select(F.col("service").cast("binary").alias("key"),
                     common.to_json_value(*columns).alias("value"))


def start(spark: "SparkSession", args: argparse.Namespace) -> list["StreamingQuery"]:
    """Start the job's three streaming queries and return them."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    common.ensure_topics(args.bootstrap_server, [args.counts_topic, args.errors_topic],
                         args.partitions, args.replication_factor)

    def logs() -> "DataFrame":
        return parse_logs(common.read_topic(spark, args, args.input_topic))

    def counts() -> "DataFrame":
        return count_levels(logs(), args.window, args.watermark)

    ck = args.checkpoint
    return [
        common.start_parquet(counts(), args, f"{PROG}-counts-parquet", args.output,
                             os.path.join(ck, "counts-parquet")),
        common.start_topic(keyed_by_service(counts(), COUNT_COLUMNS), args,
                           f"{PROG}-counts-topic", args.counts_topic,
                           os.path.join(ck, "counts-topic")),
        common.start_topic(keyed_by_service(errors(logs(), args.window), ERROR_COLUMNS), args,
                           f"{PROG}-errors-topic", args.errors_topic,
                           os.path.join(ck, "errors-topic")),
    ]


def show(spark: "SparkSession", args: argparse.Namespace) -> None:
    out = spark.read.parquet(args.output)
    print(f"{out.count()} (window, service, level) rows in {args.output}; also on topic "
          f"{args.counts_topic}; ERROR records with their window on topic {args.errors_topic}")
    out.orderBy("window_start", "service", "level").show(args.show, truncate=False)


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(argv, build_parser(), start, show)


if __name__ == "__main__":
    sys.exit(main())
