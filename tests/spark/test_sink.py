"""df.write / df.writeStream .format("strom"): Spark's Kafka sink columns and options,
checked by reading the topics back."""
from __future__ import annotations

import pytest

from tests.spark.conftest import create_topic, fill_topic_rows, produce, source


def read_back(spark, bootstrap: str, topic: str) -> list[tuple]:
    df = source(spark, bootstrap, subscribe=topic, includeHeaders="true")
    out = []
    for r in df.collect():
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                        for h in (r["headers"] or []))
        out.append((r["partition"], None if r["key"] is None else bytes(r["key"]),
                    bytes(r["value"]), headers))
    return sorted(out, key=lambda t: (t[0], t[2]))


def test_batch_write_key_value_partition_and_headers(spark, spark_broker):
    topic = "sink-batch"
    create_topic(spark_broker.bootstrap, topic, 3)
    rows = [(f"k{i}" if i % 5 else None, f"value-{i}", i % 3,
             [("i", str(i).encode()), ("empty", None)] if i % 2 else [])
            for i in range(60)]
    df = spark.createDataFrame(rows, "key string, value string, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    (df.write.format("strom").option("kafka.bootstrap.servers", spark_broker.bootstrap)
     .option("topic", topic).option("kafka.linger.ms", "2").mode("append").save())
    got = read_back(spark, spark_broker.bootstrap, topic)
    want = sorted(((p, None if k is None else k.encode(), v.encode(), tuple(h))
                   for k, v, p, h in rows), key=lambda t: (t[0], t[2]))
    assert got == want


def test_topic_column_routes_rows_and_the_topic_option_wins(spark, spark_broker):
    for t in ("sink-col-a", "sink-col-b", "sink-col-c"):
        create_topic(spark_broker.bootstrap, t, 1)
    df = spark.createDataFrame([("sink-col-a", b"1"), ("sink-col-b", b"2"), ("sink-col-a", b"3")],
                               "topic string, value binary")
    df.write.format("strom").option("kafka.bootstrap.servers", spark_broker.bootstrap).mode("append").save()
    assert [v for _, _, v, _ in read_back(spark, spark_broker.bootstrap, "sink-col-a")] == [b"1", b"3"]
    assert [v for _, _, v, _ in read_back(spark, spark_broker.bootstrap, "sink-col-b")] == [b"2"]

    (df.write.format("strom").option("kafka.bootstrap.servers", spark_broker.bootstrap)
     .option("topic", "sink-col-c").mode("append").save())
    assert [v for _, _, v, _ in read_back(spark, spark_broker.bootstrap, "sink-col-c")] == [
        b"1", b"2", b"3"]


def test_streaming_write_round_trip(spark, spark_broker, tmp_path):
    src, dst = "sink-stream-src", "sink-stream-dst"
    create_topic(spark_broker.bootstrap, src, 3)
    create_topic(spark_broker.bootstrap, dst, 3)
    produce(spark_broker.bootstrap, src, fill_topic_rows(300))
    q = (spark.readStream.format("strom").option("kafka.bootstrap.servers", spark_broker.bootstrap)
         .option("subscribe", src).option("startingOffsets", "earliest")
         .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "100").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition", "headers")
         .writeStream.format("strom").option("kafka.bootstrap.servers", spark_broker.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None
    # 100 per trigger over 3 partitions with equal lag: 33 each, then the 3 left over
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [99, 99, 99, 3]
    got = read_back(spark, spark_broker.bootstrap, dst)
    want = sorted(((r["partition"], r["key"], r["value"].upper(), tuple(r["headers"]))
                   for r in fill_topic_rows(300)), key=lambda t: (t[0], t[2]))
    assert got == want


@pytest.mark.parametrize("ddl, options, message", [
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value string", {}, "topic option required when no 'topic' attribute is present"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("value string, partition long", {"topic": "t"}, "partition attribute type must be an int"),
    ("value string", {"topic": "t", "kafka.key.serializer": "x"},
     "Kafka option 'key.serializer' is not supported"),
    ("value string", {"topic": "t", "kafka.transactional.id": "x"},
     "Kafka option 'transactional.id' is not supported: set exactlyOnce=true"),
    ("value string", {"topic": "t", "exactlyOnce": "yes"},
     "Invalid value 'yes' for option 'exactlyOnce', must be true or false"),
    ("value string", {"topic": "t", "exactlyOnce": "true"},
     "Option 'exactlyOnce' applies to streaming writes"),
])
def test_bad_sink_schemas_and_options_fail_with_sparks_messages(spark, spark_broker, ddl, options,
                                                                  message):
    df = spark.createDataFrame([], ddl)
    w = df.write.format("strom").mode("append").option("kafka.bootstrap.servers", spark_broker.bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.save()
