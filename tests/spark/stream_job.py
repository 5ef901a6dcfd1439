"""A streaming query run as its own process by test_source_streaming.py, so that the test
can SIGKILL the driver mid-batch and start it again from its checkpoint.

    python tests/spark/stream_job.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT MAX_OFFSETS_PER_TRIGGER

Reads TOPIC from earliest with Trigger.AvailableNow and maxOffsetsPerTrigger into parquet
at OUTPUT (partition, offset, value as string), then exits 0.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def start_query(spark, bootstrap: str, topic: str, checkpoint: str, output: str,
                per_trigger: str):
    """The query (also started by the test itself, to finish from the checkpoint)."""
    df = (spark.readStream.format("strom").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", per_trigger).load()
          .selectExpr("partition", "offset", "CAST(value AS STRING) AS value"))
    return (df.writeStream.format("parquet").option("path", output)
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def main(bootstrap: str, topic: str, checkpoint: str, output: str, per_trigger: str) -> int:
    from tests.spark.driver_kill import run_job

    return run_job("strom-kill-test", start_query, bootstrap, topic, checkpoint, output, per_trigger)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
