"""Retention by size and by time deletes whole old segments (the active one too once it has
expired, as Kafka) and moves the earliest offset;
ListOffsets by timestamp returns the first offset at or after it. Real broker process."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def create(bootstrap: str, topic: str, configs: dict[str, str], partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(20)


def produce(bootstrap: str, topic: str, n: int, timestamp_of=lambda i: 0, size: int = 100) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 10})
    for i in range(n):
        p.produce(topic, value=b"%08d" % i + b"x" * (size - 8), partition=0,
                  timestamp=timestamp_of(i))
        if i % 10 == 9:
            p.poll(0)
    assert p.flush(30) == 0


def earliest_latest(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def segment_bases(log_dir: Path, topic: str) -> list[int]:
    return sorted(int(f.stem) for f in (log_dir / f"{topic}-0").glob("*.log"))


def first_record_offset(bootstrap: str, topic: str, start: int) -> tuple[int, bytes]:
    """Consume from `start`; an out-of-range start resets to the earliest offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, start)])
    try:
        for _ in range(50):
            m = c.poll(0.5)
            if m is not None and not m.error():
                return m.offset(), m.value()
        raise AssertionError("nothing consumed")
    finally:
        c.close()


def wait_until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached")


@pytest.fixture
def fast_retention_broker(broker_factory):
    return broker_factory({"log.retention.check.interval.ms": "300", "log.segment.delete.delay.ms": "100"})


def test_retention_by_size_deletes_whole_old_segments(fast_retention_broker):
    b = fast_retention_broker
    create(b.bootstrap, "by-size", {"segment.bytes": "8192", "retention.bytes": "30000"})
    produce(b.bootstrap, "by-size", 2000)          # ~250 KB: ~30 segments
    wait_until(lambda: earliest_latest(b.bootstrap, "by-size")[0] > 0)
    wait_until(lambda: sum(f.stat().st_size for f in (b.log_dir / "by-size-0").glob("*.log")) <= 30000 + 8192)
    earliest, latest = earliest_latest(b.bootstrap, "by-size")
    assert latest == 2000
    bases = segment_bases(b.log_dir, "by-size")
    # The earliest offset is the base of the oldest segment left: whole segments went.
    assert earliest == bases[0] > 0
    offset, value = first_record_offset(b.bootstrap, "by-size", 0)   # reset to earliest
    assert offset == earliest and value.startswith(b"%08d" % earliest)


def test_retention_by_time_deletes_every_expired_segment_the_active_one_too(fast_retention_broker):
    """An idle topic keeps no expired record: as Kafka, the broker rolls the expired active
    segment and deletes it; the log starts again, empty, at the old log end."""
    b = fast_retention_broker
    # Records an hour old against 10 minutes of retention: those expire at once, the ones
    # produced below stay for the rest of the test, however slow the machine.
    create(b.bootstrap, "by-time", {"segment.bytes": "8192", "retention.ms": "600000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(b.bootstrap, "by-time", 1000, timestamp_of=lambda i: hour_ago + i)
    wait_until(lambda: segment_bases(b.log_dir, "by-time") == [1000])
    assert earliest_latest(b.bootstrap, "by-time") == (1000, 1000)
    assert (b.log_dir / "by-time-0" / "00000000000000001000.log").stat().st_size == 0
    # Offsets go on where they were; the new records are what a consumer from 0 gets.
    produce(b.bootstrap, "by-time", 5)
    assert earliest_latest(b.bootstrap, "by-time") == (1000, 1005)
    offset, value = first_record_offset(b.bootstrap, "by-time", 0)     # reset to earliest
    assert (offset, value[:8]) == (1000, b"00000000")


def test_list_offsets_by_timestamp_returns_first_offset_at_or_after(broker):
    base = 1_600_000_000_000
    create(broker.bootstrap, "ts", {"segment.bytes": "16384"})
    produce(broker.bootstrap, "ts", 1000, timestamp_of=lambda i: base + 10 * i)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        cases = {base - 5: 0, base: 0, base + 1: 1, base + 55: 6, base + 60: 6,
                 base + 4321: 433, base + 9990: 999}
        for target, expected in cases.items():
            got = c.offsets_for_times([TopicPartition("ts", 0, target)], timeout=10)[0]
            assert got.error is None
            assert got.offset == expected, (target - base, got.offset, expected)
        # Past the newest timestamp: no such offset (librdkafka reports the end, -1).
        beyond = c.offsets_for_times([TopicPartition("ts", 0, base + 9991)], timeout=10)[0]
        assert beyond.offset == -1
    finally:
        c.close()
