"""kafka-python 3 against a real broker process: create a 3-partition topic with
KafkaAdminClient, produce 100,000 keyed records with headers per codec with an idempotent
producer (kafka-python 3's default, left on), consume them all back with assign() +
seek_to_beginning (no consumer group) and verify them."""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support.roundtrip import (CODECS, Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)

pytestmark = pytest.mark.integration

N = 100_000


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="roundtrip-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                            timeout_ms=30_000)
        described = admin.describe_topics([topic])
        assert len(described) == 1 and described[0]["error_code"] == 0, described
        assert len(described[0]["partitions"]) == partitions, described
    finally:
        admin.close()


def produce_all(bootstrap: str, topic: str, codec: str, n: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if codec == "none" else codec,
                             linger_ms=20, batch_size=256 * 1024,
                             max_request_size=4 * 2**20)
    # kafka-python 3 silently turns idempotence off when the broker looks older than 0.11.
    assert producer.config["enable_idempotence"], "idempotence was disabled"
    futures = []
    try:
        for i in range(n):
            futures.append(producer.send(topic, key=key_of(i), value=value_of(i, codec),
                                         headers=headers_of(i, codec), timestamp_ms=timestamp_of(i)))
        producer.flush(timeout=60)
        for f in futures:
            f.get(timeout=0)    # raises the delivery error, if any
        # Idempotence really was in force: the broker handed out a producer id.
        tm = producer._transaction_manager
        assert tm is not None and tm.producer_id_and_epoch.producer_id >= 0, "not idempotent"
    finally:
        producer.close(timeout=10)


def consume_all(bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 120) -> list[Seen]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_bytes=8 * 2**20,
                             max_partition_fetch_bytes=4 * 2**20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    end = consumer.end_offsets(tps)
    assert sum(end.values()) == n, end
    seen: list[Seen] = []
    deadline = time.monotonic() + timeout
    try:
        while any(consumer.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, f"timed out after {len(seen)} records"
            for tp, records in consumer.poll(timeout_ms=1000, max_records=50_000).items():
                for m in records:
                    seen.append(Seen(m.partition, m.offset, m.key, m.value, list(m.headers or []),
                                     m.timestamp))
    finally:
        consumer.close(autocommit=False)
    return seen


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(broker, codec):
    topic = f"kafka-python-{codec}"
    create_topic(broker.bootstrap, topic, 3)
    produce_all(broker.bootstrap, topic, codec, N)
    verify(consume_all(broker.bootstrap, topic, 3, N), N, codec)
