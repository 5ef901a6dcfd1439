"""geo_locations: per-user counts and last position in tumbling event-time windows.

Input (topic `location`): one record per position fix, the value CSV text
`timestamp,userId,x,y`, e.g. `2024-01-01T00:00:05.123Z,user-3,12.5,40.25` (timestamp ISO-8601
UTC, or epoch milliseconds; x and y decimal numbers). Records that do not parse are dropped.

Output, one row per (window, user), written twice by two streaming queries:
- parquet in --output: window_start, window_end, user_id, count, last_x, last_y, last_timestamp
- topic `location-aggregates`: key user_id, value the same row as JSON (timestamps ISO-8601 UTC)

`last_*` is the fix with the latest timestamp in the window (ties: the larger x, then y).
Output mode is append: a window is written exactly once, when the watermark (newest event
time seen minus --watermark) passes its end. So the newest window stays open until an event
later than its end + watermark arrives; `bin/spark-etl.sh generate location` ends its data
with such a record, which is why every window of its data is written under --trigger
availableNow (Spark runs one more, empty, micro-batch when the watermark moved).

    bin/spark-etl.sh geo_locations --bootstrap-server localhost:9092 \\
        --checkpoint /tmp/geo/ck --output /tmp/geo/out --trigger availableNow
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

PROG = "geo_locations"
OUTPUT_COLUMNS = ["window_start", "window_end", "user_id", "count", "last_x", "last_y",
                  "last_timestamp"]


def build_parser() -> common.ToolParser:
    return common.job_parser(
        PROG, __doc__.split("\n\n")[0],
        {"--input-topic": ("location", "Topic of `timestamp,userId,x,y` records"),
         "--output-topic": ("location-aggregates", "Topic the aggregates go to as JSON, "
                                                   "keyed by userId")},
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))


def parse_locations(records: "DataFrame") -> "DataFrame":
    """Kafka-schema rows -> (ts timestamp, user_id string, x double, y double); bad rows dropped."""
    from pyspark.sql import functions as F

    fields = F.split(F.col("value").cast("string"), ",", 4)
    field = [F.get(fields, i) for i in range(4)]       # null, not an error, when missing
    parsed = records.select(
        common.event_time(field[0]).alias("ts"),
        F.trim(field[1]).alias("user_id"),
        F.trim(field[2]).try_cast("double").alias("x"),
        F.trim(field[3]).try_cast("double").alias("y"))
    return parsed.where("ts IS NOT NULL AND user_id IS NOT NULL AND user_id != '' "
                        "AND x IS NOT NULL AND y IS NOT NULL")


def aggregate(locations: "DataFrame", window_ms: int, watermark_ms: int) -> "DataFrame":
    """Parsed locations -> one row per (window, user) with OUTPUT_COLUMNS."""
    from pyspark.sql import functions as F

    grouped = (locations.withWatermark("ts", common.spark_interval(watermark_ms))
               .groupBy(F.window("ts", common.spark_interval(window_ms)).alias("w"), "user_id")
               # max of (ts, x, y) structs: the latest fix, ties broken deterministically
               .agg(F.count(F.lit(1)).alias("count"),
                    F.max(F.struct("ts", "x", "y")).alias("last")))
    return grouped.select(F.col("w.start").alias("window_start"),
                          F.col("w.end").alias("window_end"), "user_id", "count",
                          F.col("last.x").alias("last_x"), F.col("last.y").alias("last_y"),
                          F.col("last.ts").alias("last_timestamp"))


def to_records(aggregates: "DataFrame") -> "DataFrame":
    """Aggregates -> (key, value) rows for the output topic."""
    from pyspark.sql import functions as F

    return aggregates.select(F.col("user_id").cast("binary").alias("key"),
                             common.to_json_value(*OUTPUT_COLUMNS).alias("value"))


def start(spark: "SparkSession", args: argparse.Namespace) -> list["StreamingQuery"]:
    """Start the job's two streaming queries (parquet, topic) and return them."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    common.ensure_topics(args.bootstrap_server, [args.output_topic], args.partitions,
                         args.replication_factor)

    def aggregates() -> "DataFrame":
        records = common.read_topic(spark, args, args.input_topic)
        return aggregate(parse_locations(records), args.window, args.watermark)

    return [
        common.start_parquet(aggregates(), args, f"{PROG}-parquet", args.output,
                             os.path.join(args.checkpoint, "parquet")),
        common.start_topic(to_records(aggregates()), args, f"{PROG}-topic", args.output_topic,
                           os.path.join(args.checkpoint, "topic")),
    ]


def show(spark: "SparkSession", args: argparse.Namespace) -> None:
    out = spark.read.parquet(args.output)
    print(f"{out.count()} (window, user) rows in {args.output}; also on topic {args.output_topic}")
    out.orderBy("window_start", "user_id").show(args.show, truncate=False)


def main(argv: Sequence[str] | None = None) -> int:
    return common.run_job(argv, build_parser(), start, show)


if __name__ == "__main__":
    sys.exit(main())
