"""spark.read.format("strom") against a real broker: exact contents and schema, offset and
timestamp slices, failOnDataLoss both ways, option errors worded as Spark's Kafka source."""
from __future__ import annotations

import json
import re

import pytest

from clients import AdminClient
from clients.types import TopicPartition
from tests.spark.conftest import create_topic, produce, source

T0 = 1_700_000_000_000          # record i has timestamp T0 + 1000 * i


def records(n: int, partitions: int = 3) -> list[dict]:
    out = []
    for i in range(n):
        out.append({
            "value": f"value-{i}".encode() * (1 + i % 4),
            "key": None if i % 10 == 0 else f"key-{i}".encode(),
            "partition": i % partitions,
            "headers": [] if i % 7 == 0 else [("n", str(i).encode()), ("null", None)],
            "timestamp_ms": T0 + 1000 * i,
        })
    return out


def rows_of(df) -> set[tuple]:
    from pyspark.sql import functions as F

    cols = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("key"), F.col("value"),
            F.unix_millis("timestamp").alias("ts"), F.col("timestampType")]
    if "headers" in df.columns:
        cols.append(F.col("headers"))
    out = set()
    for r in df.select(*cols).collect():
        h = tuple((x["key"], None if x["value"] is None else bytes(x["value"]))
                  for x in r["headers"]) if "headers" in df.columns else None
        out.add((r["topic"], r["partition"], r["offset"],
                 None if r["key"] is None else bytes(r["key"]), bytes(r["value"]),
                 r["ts"], r["timestampType"], h))
    return out


def expected_rows(topic: str, recs: list[dict], metas, headers: bool = True,
                  keep=lambda m: True) -> set[tuple]:
    out = set()
    for r, m in zip(recs, metas):
        if keep(m):
            h = tuple(r["headers"]) if headers else None
            out.add((topic, m.partition, m.offset, r["key"], r["value"], r["timestamp_ms"], 0, h))
    return out


@pytest.fixture(scope="module")
def topic300(spark_broker):
    """A 3-partition topic with 300 records (100 per partition) of known contents."""
    name = "batch-300"
    create_topic(spark_broker.bootstrap, name, 3)
    recs = records(300)
    metas = produce(spark_broker.bootstrap, name, recs)
    return name, recs, metas


def test_batch_read_returns_exactly_the_records_with_the_kafka_schema(spark, spark_broker, topic300):
    topic, recs, metas = topic300
    df = source(spark, spark_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>")
    got = rows_of(df)
    want = expected_rows(topic, recs, metas)
    assert len(got) == df.count() == 300
    assert got == want
    print(f"batch read: {len(got)} rows of 3 partitions, all fields equal")

    plain = source(spark, spark_broker.bootstrap, subscribe=topic)
    assert "headers" not in plain.columns
    assert rows_of(plain) == expected_rows(topic, recs, metas, headers=False)


def test_small_max_records_per_partition_splits_ranges_without_changing_rows(spark, spark_broker, topic300):
    topic, recs, metas = topic300
    df = source(spark, spark_broker.bootstrap, subscribe=topic, maxRecordsPerPartition="7")
    assert df.rdd.getNumPartitions() >= 300 // 7
    assert rows_of(df) == expected_rows(topic, recs, metas, headers=False)


def test_starting_and_ending_offsets_json_slices_are_exact(spark, spark_broker, topic300):
    topic, recs, metas = topic300
    start = {topic: {"0": 10, "1": -2, "2": 95}}
    end = {topic: {"0": 20, "1": 7, "2": -1}}
    df = source(spark, spark_broker.bootstrap, subscribe=topic,
                startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    bounds = {0: (10, 20), 1: (0, 7), 2: (95, 100)}
    want = expected_rows(topic, recs, metas, headers=False,
                         keep=lambda m: bounds[m.partition][0] <= m.offset < bounds[m.partition][1])
    got = rows_of(df)
    assert len(want) == 10 + 7 + 5
    assert got == want

    # assign + a slice of one partition
    df = source(spark, spark_broker.bootstrap, assign=json.dumps({topic: [1]}),
                startingOffsets=json.dumps({topic: {"1": 50}}),
                endingOffsets=json.dumps({topic: {"1": 53}}))
    assert sorted(r["offset"] for r in df.select("offset").collect()) == [50, 51, 52]


def test_starting_offsets_by_timestamp_are_exact(spark, spark_broker, topic300):
    topic, recs, metas = topic300
    ts_of = {(m.partition, m.offset): r["timestamp_ms"] for r, m in zip(recs, metas)}
    # per partition: partition 0 from record 150's time, 1 from before everything, 2 from 299
    by_ts = {topic: {"0": T0 + 150_000, "1": T0 - 1, "2": T0 + 299_000}}
    df = source(spark, spark_broker.bootstrap, subscribe=topic,
                startingOffsetsByTimestamp=json.dumps(by_ts))
    limits = {0: T0 + 150_000, 1: T0 - 1, 2: T0 + 299_000}
    want = expected_rows(topic, recs, metas, headers=False,
                         keep=lambda m: ts_of[(m.partition, m.offset)] >= limits[m.partition])
    assert rows_of(df) == want
    assert len(want) == 50 + 100 + 1

    # one timestamp for every partition
    df = source(spark, spark_broker.bootstrap, subscribe=topic, startingTimestamp=str(T0 + 240_500))
    want = expected_rows(topic, recs, metas, headers=False,
                         keep=lambda m: ts_of[(m.partition, m.offset)] >= T0 + 240_500)
    assert rows_of(df) == want and len(want) == 59


def test_fail_on_data_loss_both_ways(spark, spark_broker):
    topic = "batch-retention"
    create_topic(spark_broker.bootstrap, topic, 3)
    recs = records(90)
    metas = produce(spark_broker.bootstrap, topic, recs)
    with AdminClient(bootstrap_servers=spark_broker.bootstrap) as admin:
        low = admin.delete_records({TopicPartition(topic, 0): 12})   # as retention would
    assert low[TopicPartition(topic, 0)] == 12
    from_zero = json.dumps({topic: {"0": 0, "1": 0, "2": 0}})

    with pytest.raises(Exception) as err:
        source(spark, spark_broker.bootstrap, subscribe=topic, startingOffsets=from_zero).collect()
    message = str(err.value)
    assert f"Cannot fetch offset 0 of {topic}-0" in message
    assert "the earliest offset is 12" in message and "failOnDataLoss" in message
    print("failOnDataLoss=true:", re.search(r"Cannot fetch offset 0 [^\n]*", message).group(0)[:300])

    df = source(spark, spark_broker.bootstrap, subscribe=topic, startingOffsets=from_zero,
                failOnDataLoss="false")
    want = expected_rows(topic, recs, metas, headers=False,
                         keep=lambda m: m.partition != 0 or m.offset >= 12)
    assert rows_of(df) == want and len(want) == 90 - 12

    # "earliest" means the log start: no loss to report
    assert source(spark, spark_broker.bootstrap, subscribe=topic).count() == 78


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "x"}, "Option 'kafka.bootstrap.servers' must be specified"),
    ({"kafka.bootstrap.servers": "h:1"}, "One of the following options must be specified for "
                                         "Kafka source: subscribe, subscribePattern, assign"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "subscribePattern": "a.*"},
     "Only one of the following options can be specified"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries on Kafka"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"a":{"0":-1,"1":5}}'},
     "startingOffsets for a-0 can't be latest for batch queries on Kafka"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": '{"a":{"0":7,"1":-2}}'},
     "Ending offset for a-1 can't be earliest for batch queries on Kafka"),
    ({"kafka.bootstrap.servers": "h:1", "assign": "[0]"}, "Expected e.g."),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.auto.offset.reset": "latest"},
     "Kafka option 'auto.offset.reset' is not supported"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.isolation.level": "dirty"},
     "kafka.isolation.level: invalid value"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "maxRecordsPerPartition": "-3"},
     "Invalid value '-3' for option 'maxRecordsPerPartition'"),
])
def test_bad_options_fail_with_sparks_messages(spark, options, message):
    reader = spark.read.format("strom")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(".", r"\.")):
        reader.load().collect()


def test_subscribe_pattern_and_read_committed_pass_through(spark, spark_broker, topic300):
    topic, recs, metas = topic300
    df = source(spark, spark_broker.bootstrap, subscribePattern="batch-3.*",
                **{"kafka.isolation.level": "read_committed"})
    assert rows_of(df) == expected_rows(topic, recs, metas, headers=False)
