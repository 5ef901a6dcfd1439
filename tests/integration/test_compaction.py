"""Log compaction against a real broker process: after cleaning, a compacted topic holds
the latest value per key with offsets unchanged; tombstones vanish after
delete.retention.ms; keyless records are refused."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

TOPIC = "compacted"


def consume_all(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out = []
    try:
        while True:
            m = c.poll(5.0)
            assert m is not None
            if m.error():
                if m.error().code() == -191:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()


def wait_until(cond, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = cond()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError("condition not reached in time")


def test_compaction_keeps_latest_value_per_key_and_drops_tombstones(broker_factory):
    b = broker_factory({"log.cleaner.backoff.ms": "200"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "3000"})])[TOPIC].result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    written: dict[bytes, tuple[int, bytes | None]] = {}

    def record(err, msg):
        assert err is None, err
        written[msg.key()] = (msg.offset(), msg.value())

    for version in range(30):
        for k in range(10):
            p.produce(TOPIC, key=b"k%d" % k, value=b"v%d-%d" % (k, version), on_delivery=record)
        p.flush(10)
    for k in range(3):                                   # delete k0, k1, k2
        p.produce(TOPIC, key=b"k%d" % k, value=None, on_delivery=record)
    for i in range(40):                                  # filler: rolls the tombstones out of the active segment
        p.produce(TOPIC, key=b"filler", value=b"f%d" % i, on_delivery=record)
        p.flush(10)
    total = 30 * 10 + 3 + 40

    # Cleaned: far fewer records, the latest value of each key at its original offset.
    records = wait_until(lambda: (r := consume_all(b.bootstrap)) and len(r) < total / 4 and r)
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    for k in range(3, 10):
        key = b"k%d" % k
        assert latest[key] == written[key], key                     # value and offset unchanged
        assert [v for _, kk, v in records if kk == key] == [written[key][1]], "older versions survived"
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for k in range(3):                     # deleted keys: only their tombstone is left, for now
        key = b"k%d" % k
        assert [(o, v) for o, kk, v in records if kk == key] == [written[key]] and written[key][1] is None

    # Tombstones survive the first clean, then vanish once delete.retention.ms has passed and
    # the cleaner runs again (new dirty data makes it run).
    time.sleep(3.5)
    for i in range(40):
        p.produce(TOPIC, key=b"filler", value=b"g%d" % i)
        p.flush(10)

    def tombstones_gone():
        r = consume_all(b.bootstrap)
        return r if all(key not in {b"k0", b"k1", b"k2"} for _, key, _ in r) else None
    records = wait_until(tombstones_gone)
    for k in range(3, 10):
        assert (b"k%d" % k) in {key for _, key, _ in records}

    # A keyless record is refused on a compacted topic.
    errors = []
    p.produce(TOPIC, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == 87    # INVALID_RECORD
