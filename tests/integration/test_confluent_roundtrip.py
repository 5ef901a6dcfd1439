"""confluent-kafka (librdkafka 2.x) against a real broker process: create a 3-partition
topic, produce 100,000 keyed records with headers per codec, consume them all back."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.roundtrip import (CODECS, Seen, headers_of, key_of, timestamp_of, value_of,
                                     verify)

pytestmark = pytest.mark.integration

N = 100_000


def consume_all(bootstrap: str, topic: str, partitions: int, n: int, timeout: float = 120) -> list[Seen]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "roundtrip-unused",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.max.bytes": 4 * 2**20})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Seen] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(10000, 1.0):
                if m.error():
                    if m.error().code() == -191:   # _PARTITION_EOF
                        eof.add(m.partition())
                        continue
                    raise AssertionError(m.error())
                seen.append(Seen(m.partition(), m.offset(), m.key(), m.value(),
                                 list(m.headers() or []), m.timestamp()[1]))
    finally:
        c.close()
    return seen


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrip(broker, codec):
    topic = f"confluent-{codec}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    futures[topic].result(30)
    md = admin.list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 3

    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 20, "batch.size": 256 * 1024, "enable.idempotence": True})

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(N):
        while True:
            try:
                p.produce(topic, key=key_of(i), value=value_of(i, codec), headers=headers_of(i, codec),
                          timestamp=timestamp_of(i), on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    assert errors == []

    verify(consume_all(broker.bootstrap, topic, 3, N), N, codec)
