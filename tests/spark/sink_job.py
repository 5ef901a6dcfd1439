"""A streaming query with the exactly-once sink, run as its own process by
test_sink_exactly_once.py so that the test can SIGKILL the driver mid-batch and start the
query again from its checkpoint.

    python tests/spark/sink_job.py BOOTSTRAP SOURCE OUTPUT CHECKPOINT MAX_OFFSETS_PER_TRIGGER

Reads SOURCE from earliest with Trigger.AvailableNow and maxOffsetsPerTrigger, upper-cases
each value and writes it, with its key, to OUTPUT with `exactlyOnce=true`; then exits 0.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def start_query(spark, bootstrap: str, source: str, output: str, checkpoint: str,
                per_trigger: str):
    """The query (also started by the test itself, to finish from the checkpoint)."""
    df = (spark.readStream.format("strom").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", per_trigger).load()
          .selectExpr("key", "upper(CAST(value AS STRING)) AS value"))
    return (df.writeStream.format("strom").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", output).option("exactlyOnce", "true")
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())


def main(bootstrap: str, source: str, output: str, checkpoint: str, per_trigger: str) -> int:
    from tests.spark.driver_kill import run_job

    return run_job("strom-sink-kill-test", start_query, bootstrap, source, output, checkpoint,
                   per_trigger)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
