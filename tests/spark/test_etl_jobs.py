"""The ETL jobs (geo_locations, log_levels) on generated data with known answers.

The generator runs as a user runs it (`bin/spark-etl.sh generate ... --expected FILE`) against
a real broker process; the jobs run in this process on the shared local SparkSession, with
--trigger availableNow, and their parquet output and output topics must equal the generator's
expected answers exactly (append mode: every window once, the closing record's window not at
all). The transformations are also checked on plain DataFrames, without a broker.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_jobs import etl_common, generate, geo_locations, log_levels  # noqa: E402
from tests.spark.driver_kill import kill_when  # noqa: E402
from tests.support.broker_process import REPO, BrokerProcess  # noqa: E402

SCRIPT = REPO / "bin" / "spark-etl.sh"
KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")


# ------------------------------------------------------------------------------- fixtures

@pytest.fixture
def etl_spark(spark):
    """The shared session of tests/spark/conftest.py, in UTC as the jobs' main() sets it up
    (the expected answers are ISO-8601 UTC text)."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


@pytest.fixture
def etl_broker(spark_broker):
    """The broker tests/spark/conftest.py shares; every test uses topics of its own."""
    return spark_broker


def run_script(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def generate_data(broker: BrokerProcess, tmp_path: Path, kind: str, topic: str,
                  *extra: str) -> dict:
    expected = tmp_path / f"{kind}-expected.json"
    r = run_script("generate", kind, "--bootstrap-server", broker.bootstrap, "--topic", topic,
                   "--expected", str(expected), "--quiet", *extra)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout
    return json.loads(expected.read_text())


def job_args(parser, broker: BrokerProcess, tmp_path: Path, *extra: str):
    return parser.parse_args(["--bootstrap-server", broker.bootstrap,
                              "--checkpoint", str(tmp_path / "ck"),
                              "--output", str(tmp_path / "out"),
                              "--trigger", "availableNow", "--partitions", "2", *extra])


def run_availablenow(spark, job, args) -> list:
    queries = job.start(spark, args)
    try:
        etl_common.await_queries(spark, queries, "availableNow")
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
    return queries


def parquet_rows(spark, path: Path, order: list[str]) -> list[dict]:
    """The parquet output as the JSON the jobs write to topics, parsed back."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    return [json.loads(r[0]) for r in
            df.orderBy(*order).select(F.to_json(F.struct(*df.columns),
                                                etl_common.JSON_OPTIONS)).collect()]


def topic_records(broker: BrokerProcess, topic: str, timeout: float = 20,
                  isolation: str = "read_committed") -> list[tuple]:
    """Every record of `topic` a consumer with `isolation` reads: (key, JSON value parsed)."""
    from clients import Consumer, TopicPartition

    out = []
    with Consumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                  isolation_level=isolation) as c:
        tps = [TopicPartition(topic, p) for p in c.partitions_for(topic)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, "timed out reading " + topic
            out += [(r.key.decode(), json.loads(r.value)) for r in c.poll(0.5)]
    return out


def partition_count(broker: BrokerProcess, topic: str) -> int:
    from clients import AdminClient

    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        return len(admin.describe_topics([topic])[topic].partitions)


def by(keys: list[str]):
    return lambda row: tuple(row[k] for k in keys)


# --------------------------------------------------------------------------------- --help

@pytest.mark.parametrize("job", ["geo_locations", "log_levels", "generate"])
def test_help_via_script(job):
    r = run_script(job, "--help", timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: spark-etl.sh {job}")
    assert "--bootstrap-server" in r.stdout
    if job != "generate":
        for flag in ("--trigger", "--checkpoint", "--output", "--window", "--watermark"):
            assert flag in r.stdout


def test_script_rejects_unknown_job():
    r = run_script("nope", timeout=10)
    assert r.returncode == 2 and "unknown job" in r.stderr


# ------------------------------------------------------------- transformations, no broker

def kafka_rows(spark, ds: generate.Dataset):
    """The generator's records as the strom source would give them."""
    from datetime import datetime, timezone

    rows = [(k, v, ds.topic, 0, i, datetime.fromtimestamp(ts / 1000, timezone.utc), 0)
            for i, (k, v, ts) in enumerate(ds.records)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def as_json(df, order: list[str]) -> list[dict]:
    from pyspark.sql import functions as F

    return [json.loads(r[0]) for r in df.orderBy(*order).select(
        F.to_json(F.struct(*df.columns), etl_common.JSON_OPTIONS)).collect()]


LAYOUT = generate.TimeLayout(etl_common.parse_instant_ms("2024-01-01T00:00:30Z"),
                             60_000, 30_000, 3)


def test_geo_transform_on_plain_dataframe(etl_spark):
    ds = generate.location_dataset(300, seed=3, layout=LAYOUT, users=3)
    bad = [(b"u", b"not,a,record", 0), (b"u", b"2024-01-01T00:00:31Z,u,1.0", 0)]
    ds.records += [(k, v, LAYOUT.start_ms) for k, v, _ in bad]
    agg = geo_locations.aggregate(geo_locations.parse_locations(kafka_rows(etl_spark, ds)),
                                  LAYOUT.window_ms, LAYOUT.watermark_ms)
    rows = as_json(agg, ["window_start", "user_id"])
    # A batch query emits every window, the closing record's too: the last row.
    closing = rows.pop()
    assert closing["count"] == 1 and closing["last_timestamp"] == etl_common.iso_ms(ds.closing_ts)
    assert rows == ds.expected["aggregates"]
    assert len(rows) == 4 * 3          # start 00:00:30 -> four epoch-aligned windows, 3 users


def test_logs_transform_on_plain_dataframe(etl_spark):
    ds = generate.logs_dataset(400, seed=5, layout=LAYOUT, services=3)
    epoch_ms = {"timestamp": LAYOUT.start_ms + 1, "level": "error", "service": "auth",
                "message": "epoch ms as a number"}
    ds.records += [(b"x", b"{not json", 0), (b"x", b'{"level": "INFO"}', 0),
                   (b"auth", json.dumps(epoch_ms).encode(), 0)]
    logs = log_levels.parse_logs(kafka_rows(etl_spark, ds))
    counts = as_json(log_levels.count_levels(logs, LAYOUT.window_ms, LAYOUT.watermark_ms),
                     ["window_start", "service", "level"])
    errors = as_json(log_levels.errors(logs, LAYOUT.window_ms),
                     ["timestamp", "service", "message"])
    extra = {"timestamp": etl_common.iso_ms(LAYOUT.start_ms + 1), "level": "ERROR",
             "service": "auth", "message": "epoch ms as a number",
             "window_start": "2024-01-01T00:00:00.000Z", "window_end": "2024-01-01T00:01:00.000Z"}
    assert errors == sorted(ds.expected["errors"] + [extra], key=by(["timestamp", "service",
                                                                      "message"]))
    closing = counts.pop()
    assert (closing["level"], closing["count"]) == ("INFO", 1)
    want = [dict(r) for r in ds.expected["counts"]]
    for r in want:
        if (r["window_start"], r["service"], r["level"]) == (extra["window_start"], "auth",
                                                             "ERROR"):
            r["count"] += 1
            break
    else:
        want.append({k: extra[k] for k in ("window_start", "window_end", "service", "level")}
                    | {"count": 1})
    assert counts == sorted(want, key=by(["window_start", "service", "level"]))


# ------------------------------------------------------------ the jobs, broker and Spark

def test_geo_locations_job_known_answers(etl_spark, etl_broker, tmp_path):
    expected = generate_data(etl_broker, tmp_path, "location", "geo-in", "--records", "2000",
                             "--seed", "11", "--users", "4")
    rows = expected["aggregates"]
    assert len(rows) == 3 * 4
    args = job_args(geo_locations.build_parser(), etl_broker, tmp_path,
                    "--input-topic", "geo-in", "--output-topic", "geo-out",
                    "--max-offsets-per-trigger", "1100")
    queries = run_availablenow(etl_spark, geo_locations, args)
    for q in queries:      # several data micro-batches, then the one that closes the windows
        assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) == 2, q.name
        assert q.recentProgress[-1]["numInputRows"] == 0, q.name

    assert parquet_rows(etl_spark, tmp_path / "out", ["window_start", "user_id"]) == rows
    records = topic_records(etl_broker, "geo-out")
    assert sorted((v for _, v in records), key=by(["window_start", "user_id"])) == rows
    assert all(k == v["user_id"] for k, v in records)
    assert partition_count(etl_broker, "geo-out") == 2      # created by the job


def test_log_levels_job_known_answers(etl_spark, etl_broker, tmp_path):
    expected = generate_data(etl_broker, tmp_path, "logs", "logs-in", "--records", "2000",
                             "--seed", "7")
    assert expected["errors"] and len(expected["counts"]) > 3 * 4 * 3
    args = job_args(log_levels.build_parser(), etl_broker, tmp_path,
                    "--input-topic", "logs-in", "--counts-topic", "counts-out",
                    "--errors-topic", "errors-out")
    run_availablenow(etl_spark, log_levels, args)

    order = ["window_start", "service", "level"]
    assert parquet_rows(etl_spark, tmp_path / "out", order) == expected["counts"]
    counts = topic_records(etl_broker, "counts-out")
    assert sorted((v for _, v in counts), key=by(order)) == expected["counts"]
    errors = topic_records(etl_broker, "errors-out")
    assert (sorted((v for _, v in errors), key=by(["timestamp", "service", "message"]))
            == expected["errors"])
    assert all(k == v["service"] for k, v in counts + errors)


def test_geo_locations_via_script(etl_broker, tmp_path):
    """What a new user runs: generator, then the job in a Spark of its own (--trigger
    availableNow); the job prints what it did and the windows it wrote."""
    expected = generate_data(etl_broker, tmp_path, "location", "geo-cli", "--records", "300",
                             "--users", "2", "--start", "2024-05-01T12:00:00Z")
    out = tmp_path / "out"
    r = run_script("geo_locations", "--bootstrap-server", etl_broker.bootstrap,
                   "--checkpoint", str(tmp_path / "ck"), "--output", str(out),
                   "--input-topic", "geo-cli", "--output-topic", "geo-cli-out",
                   "--trigger", "availableNow", timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "geo_locations-parquet: 2 micro-batches, 301 input rows" in r.stdout, r.stdout
    assert f"{len(expected['aggregates'])} (window, user) rows in {out}" in r.stdout
    assert "|2024-05-01 12:00:00|2024-05-01 12:01:00|user-1 |" in r.stdout   # the table
    assert len(topic_records(etl_broker, "geo-cli-out")) == len(expected["aggregates"])


def _prepared_not_committed(broker: BrokerProcess, topic: str) -> bool:
    """Has `topic` records of a transaction not committed yet (end offset past the LSO)?"""
    from clients import AdminClient, TopicPartition
    from clients.protocol.errors import KafkaError

    with AdminClient(bootstrap_servers=broker.bootstrap, default_api_timeout_ms=2000) as admin:
        try:
            tps = [TopicPartition(topic, p) for p in range(2)]
            end = admin.list_offsets({tp: "latest" for tp in tps})
            stable = admin.list_offsets({tp: "latest" for tp in tps}, "read_committed")
        except (KafkaError, Exception):
            return False                      # the job has not created the topic yet
    return any(end[tp].offset > stable[tp].offset for tp in tps)


def test_geo_locations_output_topic_holds_each_window_once_across_a_driver_kill(etl_spark,
                                                                                etl_broker,
                                                                                tmp_path):
    """The job's driver is killed (SIGKILL) while a micro-batch's output transactions are
    prepared but not committed, then run again from its checkpoint: the output topic, read
    read_committed, holds exactly the expected windows, each once.

    1000 records a trigger: three data micro-batches, the third writes the first window, a
    last one (no data) the other two; the kill catches one of those two (each holds its
    transactions prepared for a second or more), the restart runs it again and whatever
    came after. More, smaller batches only added Spark micro-batches (2-3 s each) to both
    runs.

    The killed driver is a process of its own (the script); the restarted one is a new run of
    the same queries from the same checkpoint in this process's warm session (as in
    test_geo_locations_job_known_answers), which spares a second Spark start-up and cold
    first micro-batch (20-40 s on CI) and leaves what the restart does unchanged: the query
    ids, the offset and commit logs, the state and the output transactions all come from
    the checkpoint and the broker."""
    expected = generate_data(etl_broker, tmp_path, "location", "geo-kill", "--records", "3000",
                             "--seed", "5", "--users", "4")
    rows = expected["aggregates"]
    cmd = [str(SCRIPT), "geo_locations", "--bootstrap-server", etl_broker.bootstrap,
           "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out"),
           "--input-topic", "geo-kill", "--output-topic", "geo-kill-out", "--partitions", "2",
           "--trigger", "availableNow", "--max-offsets-per-trigger", "1000", "--show", "0"]
    killed = kill_when(cmd, tmp_path / "run0.log",
                       lambda: _prepared_not_committed(etl_broker, "geo-kill-out"), poll_s=0.01)
    assert killed, (tmp_path / "run0.log").read_text()[-3000:]

    args = geo_locations.build_parser().parse_args(cmd[2:])
    run_availablenow(etl_spark, geo_locations, args)         # raises if a query failed
    records = topic_records(etl_broker, "geo-kill-out")
    assert sorted((v for _, v in records), key=by(["window_start", "user_id"])) == rows
    uncommitted = topic_records(etl_broker, "geo-kill-out", isolation="read_uncommitted")
    print(f"killed mid-commit; after the restart read_committed {len(records)} windows for "
          f"{len(rows)} expected, each once; read_uncommitted {len(uncommitted)}")


def test_generator_is_deterministic():
    layout = generate.TimeLayout(0, 60_000, 30_000, 2)
    a = generate.logs_dataset(200, seed=1, layout=layout)
    b = generate.logs_dataset(200, seed=1, layout=layout)
    c = generate.logs_dataset(200, seed=2, layout=layout)
    assert a.records == b.records and a.expected == b.expected
    assert a.records != c.records
    # sent slightly out of order, never by as much as the watermark
    times = [ts for _, _, ts in a.records]
    assert times != sorted(times)
    assert max(max(times[:i + 1]) - t for i, t in enumerate(times)) < layout.watermark_ms


if __name__ == "__main__":     # pragma: no cover
    sys.exit(pytest.main([__file__, "-v", *sys.argv[1:]]))
