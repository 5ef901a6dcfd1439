"""A topic's compression.type against a real broker process: what the segment files hold
after confluent-kafka produced uncompressed or in another codec, set at creation, changed
with IncrementalAlterConfigs, and inherited from the broker's own compression.type; every
consumer still reads the records as they were sent."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from clients.protocol.records import iter_batches

pytestmark = pytest.mark.integration

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def produce(bootstrap: str, topic: str, start: int, n: int, codec: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "log_level": 0})
    for i in range(start, start + n):
        p.produce(topic, key=b"k%d" % i, value=b"value %d " % i + b"." * 100, partition=0,
                  headers=[("i", b"%d" % i)])
    assert p.flush(30) == 0


def stored_codecs(broker, topic: str) -> list[int]:
    """The codec of every batch in the partition's segment files, read from disk."""
    data = b"".join(f.read_bytes() for f in sorted((broker.log_dir / f"{topic}-0").glob("*.log")))
    return [b.header.compression for b in iter_batches(data)]


def consume_confluent(bootstrap: str, topic: str, n: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cmp", "log_level": 0})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple] = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value(), m.headers()))
    c.close()
    return out


def expected(n: int) -> list[tuple]:
    return [(i, b"k%d" % i, b"value %d " % i + b"." * 100, [("i", b"%d" % i)]) for i in range(n)]


def alter(admin: AdminClient, topic: str, codec: str) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", codec, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def test_topic_codec_set_at_creation_and_changed_later(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("cmp", 1, 1, config={"compression.type": "lz4"})])["cmp"].result(30)

    produce(broker.bootstrap, "cmp", 0, 300, "none")
    produce(broker.bootstrap, "cmp", 300, 300, "gzip")
    codecs = stored_codecs(broker, "cmp")
    assert codecs and set(codecs) == {CODEC_IDS["lz4"]}, codecs

    alter(admin, "cmp", "uncompressed")
    produce(broker.bootstrap, "cmp", 600, 300, "zstd")
    after = stored_codecs(broker, "cmp")[len(codecs):]
    assert after and set(after) == {CODEC_IDS["none"]}, after

    alter(admin, "cmp", "producer")
    produce(broker.bootstrap, "cmp", 900, 300, "snappy")
    last = stored_codecs(broker, "cmp")[len(codecs) + len(after):]
    assert last and set(last) == {CODEC_IDS["snappy"]}, last

    assert consume_confluent(broker.bootstrap, "cmp", 1200) == expected(1200)
    k = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    k.assign([KTopicPartition("cmp", 0)])
    k.seek_to_beginning()
    got = []
    for m in k:
        got.append((m.offset, m.key, m.value, [(h[0], h[1]) for h in m.headers]))
        if len(got) == 1200:
            break
    k.close()
    assert got == expected(1200)


def test_broker_compression_type_is_the_topics_default(broker_factory):
    broker = broker_factory({"compression.type": "gzip"})
    produce(broker.bootstrap, "auto-gz", 0, 200, "none")     # auto-created topic
    codecs = stored_codecs(broker, "auto-gz")
    assert codecs and set(codecs) == {CODEC_IDS["gzip"]}, codecs
    assert consume_confluent(broker.bootstrap, "auto-gz", 200) == expected(200)


def test_zstd_topic_refuses_fetches_older_than_v10(broker):
    """Kafka's rule: Fetch below v10 predates zstd, so a zstd topic answers it with
    UNSUPPORTED_COMPRESSION_TYPE (76); v10 and later get the records."""
    from tests.support.wire import WireClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for f in admin.create_topics([NewTopic("zs", 1, 1, config={"compression.type": "zstd"}),
                                  NewTopic("plain", 1, 1)]).values():
        f.result(30)
    produce(broker.bootstrap, "zs", 0, 10, "none")
    produce(broker.bootstrap, "plain", 0, 10, "none")
    assert set(stored_codecs(broker, "zs")) == {CODEC_IDS["zstd"]}
    host, port = broker.bootstrap.split(":")

    def fetch(version: int, topic: str):
        with WireClient(host, int(port)) as c:
            r = c.request("Fetch", version, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1_000_000,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": 1_000_000}]}],
                "forgotten_topics_data": [], "rack_id": ""})
        p = r.responses[0].partitions[0]
        return p.error_code, len(p.records or b"")
    assert fetch(9, "zs") == (76, 0)
    code, size = fetch(10, "zs")
    assert code == 0 and size > 0
    code, size = fetch(4, "plain")                 # other topics: old versions still served
    assert code == 0 and size > 0
