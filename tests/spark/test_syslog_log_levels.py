"""The log_levels ETL job on syslog that came in over UDP: the pipeline of
tests/integration/connect/test_syslog_connect.py (a standalone Connect worker running the
SyslogSource connector, 100,000 datagrams of RFC 5424 and RFC 3164 with some malformed sent
by another process at 20,000/s) fills topic `syslog`; then log_levels runs on that topic
(--trigger availableNow, on the shared local SparkSession) and

- its per-(window, service, level) counts, in the parquet output and on the counts topic,
  are exactly the topic's well-formed records counted per minute, and summed per level they
  are what the sender sent (`make_mix(...).by_level`); the malformed records (no level) are
  dropped by the job;
- its errors topic holds every ERROR record once, with its timestamp, service and message.

In append mode a window is written when the watermark passes its end; a last record far
in the future (as `bin/spark-etl.sh generate` ends its data) closes every window of the
syslog data and is not counted itself (its own window never closes).
"""
from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_jobs import etl_common, log_levels  # noqa: E402
from tests.integration.connect.test_syslog_connect import (  # noqa: E402
    check_counters, run_syslog_pipeline)
from tests.spark.conftest import produce  # noqa: E402
from tests.spark.test_etl_jobs import (job_args, parquet_rows, run_availablenow,  # noqa: E402
                                       topic_records)

TOPIC = "syslog"
CLOSING = {"timestamp": "2099-01-01T00:00:00.000Z", "level": "INFO", "service": "closing",
           "message": "closes every window of the syslog data"}
WINDOW_MS = 60_000


def _epoch_ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def expected_counts(values: list[dict]) -> list[dict]:
    """The job's count rows for these syslog values (1-minute windows, malformed ones
    left out), sorted by window, service, level."""
    per: Counter[tuple[int, str, str]] = Counter()
    for v in values:
        if "level" in v:
            start = _epoch_ms(v["timestamp"]) // WINDOW_MS * WINDOW_MS
            per[(start, v["service"], v["level"])] += 1
    return [{"window_start": etl_common.iso_ms(start),
             "window_end": etl_common.iso_ms(start + WINDOW_MS),
             "service": service, "level": level, "count": n}
            for (start, service, level), n in sorted(per.items())]


SPARK_COUNT = 20_000


def test_log_levels_job_on_syslog_from_connect(spark, spark_broker, tmp_path):
    started = time.monotonic()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # 20,000 datagrams: the 100,000 of the must-show item go through the same pipeline in
    # tests/integration/connect/test_syslog_connect.py; here the job's cost (three streaming
    # queries over the topic) is what a larger count would add to the suite.
    run = run_syslog_pipeline(spark_broker.bootstrap, tmp_path / "worker", TOPIC,
                              count=SPARK_COUNT, expect=False)
    check_counters(run)
    values = [v for _, v in run.records]
    levels = Counter(v["level"] for v in values if "level" in v)
    malformed = sum(1 for v in values if v.get("malformed") is True)
    assert malformed == run.metrics["syslog_datagrams_malformed_total"] > 0
    if run.lost == 0:
        assert levels == run.mix.by_level
    # Past every window's end + watermark: closes them all, its own window stays open.
    produce(spark_broker.bootstrap, TOPIC, [{"key": b"closing",
                                             "value": json.dumps(CLOSING).encode()}])
    pipeline_s = time.monotonic() - started

    args = job_args(log_levels.build_parser(), spark_broker, tmp_path,
                    "--input-topic", TOPIC, "--counts-topic", "syslog-level-counts",
                    "--errors-topic", "syslog-errors")
    run_availablenow(spark, log_levels, args)

    order = ["window_start", "service", "level"]
    want = expected_counts(values)
    got = parquet_rows(spark, tmp_path / "out", order)
    assert got == want
    per_level: Counter[str] = Counter()
    for row in got:
        per_level[row["level"]] += row["count"]
    assert per_level == levels and sum(per_level.values()) == run.metrics[
        "syslog_datagrams_parsed_total"]
    counts = topic_records(spark_broker, "syslog-level-counts")
    assert sorted((v for _, v in counts), key=lambda r: tuple(r[k] for k in order)) == want

    errors = topic_records(spark_broker, "syslog-errors")
    assert (Counter((v["timestamp"], v["service"], v["message"]) for _, v in errors)
            == Counter((v["timestamp"], v["service"], v["message"]) for v in values
                       if v.get("level") == "ERROR"))
    assert len(errors) == levels["ERROR"]
    print(f"test_syslog_log_levels: pipeline {pipeline_s:.1f} s, job "
          f"{time.monotonic() - started - pipeline_s:.1f} s; {len(want)} count rows, "
          f"{len(errors)} errors, levels {dict(levels)}")
