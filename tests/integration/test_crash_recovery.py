"""kill -9 of the broker in the middle of a produce stream (invariant 1).

Every record acknowledged with acks=1 must be there after restart, each partition's log
must end on a whole CRC-valid batch, and producing continues at the next offset.
Short form: 2 rounds; `--long` (or STROM_LONG_TESTS=1): 10 rounds with random kill times.
"""
from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients.protocol.batch_header import HEADER_SIZE, crc_valid, read_header

pytestmark = pytest.mark.integration

PARTITIONS = 3


class AckRecorder:
    """Produces continuously; remembers (partition, offset) -> value of every acked record."""

    def __init__(self, bootstrap: str, topic: str, start: int):
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 2,
                           "enable.idempotence": False, "retries": 0,
                           "message.timeout.ms": 5000, "socket.timeout.ms": 3000,
                           "log_level": 0})   # the broker is killed under it: silence reconnect noise
        self.topic = topic
        self.acked: dict[tuple[int, int], bytes] = {}
        self.i = start
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked[(msg.partition(), msg.offset())] = msg.value()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.p.produce(self.topic, key=b"k%d" % (self.i % 101), value=b"v%d" % self.i,
                               on_delivery=self._on_delivery)
                self.i += 1
            except BufferError:
                pass
            self.p.poll(0 if self.i % 50 else 0.001)
        self.p.flush(10)


def log_ends_on_whole_batch(partition_dir: Path) -> None:
    for seg in sorted(partition_dir.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos < len(data):
            assert pos + HEADER_SIZE <= len(data), f"{seg}: torn header at {pos}"
            h = read_header(data, pos)
            assert pos + h.total_size <= len(data), f"{seg}: torn batch at {pos}"
            assert crc_valid(data, pos, h), f"{seg}: bad CRC at {pos}"
            pos += h.total_size


def read_everything(bootstrap: str, topic: str) -> dict[tuple[int, int], bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], bytes] = {}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < PARTITIONS and time.monotonic() < deadline:
        for m in c.consume(5000, 1.0):
            if m.error():
                if m.error().code() == -191:
                    eof.add(m.partition())
                    continue
                raise AssertionError(m.error())
            eof.discard(m.partition())
            out[(m.partition(), m.offset())] = m.value()
    c.close()
    return out


def test_kill9_mid_produce_loses_no_acked_record(broker_factory, long_run):
    rounds = 10 if long_run else 2
    rng = random.Random(7)
    b = broker_factory()
    topic = "crashy"
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"segment.bytes": "200000"})])[topic].result(20)
    all_acked: dict[tuple[int, int], bytes] = {}
    next_value = 0
    for r in range(rounds):
        rec = AckRecorder(b.bootstrap, topic, next_value)
        rec.thread.start()
        time.sleep(rng.uniform(0.5, 2.5))
        b.kill9()
        rec.stop.set()
        rec.thread.join(30)
        assert len(rec.acked) > 0, "nothing was acknowledged before the kill"
        print(f"round {r}: killed after {len(rec.acked)} acked of {rec.i - next_value} sent")
        next_value = rec.i
        all_acked.update(rec.acked)

        b.start()
        for p in range(PARTITIONS):
            log_ends_on_whole_batch(b.log_dir / f"{topic}-{p}")
        seen = read_everything(b.bootstrap, topic)
        missing = [k for k in all_acked if seen.get(k) != all_acked[k]]
        assert not missing, f"round {r}: {len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"
        for p in range(PARTITIONS):
            offsets = sorted(o for (pp, o) in seen if pp == p)
            assert offsets == list(range(len(offsets))), f"partition {p}: offsets not dense"

        # Producing continues at the next offset of each partition.
        ends = {p: sum(1 for (pp, _) in seen if pp == p) for p in range(PARTITIONS)}
        prod = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "log_level": 0})
        got = {}
        for p in range(PARTITIONS):
            prod.produce(topic, value=b"after-%d" % r, partition=p,
                         on_delivery=lambda err, msg: got.__setitem__(msg.partition(), (err, msg.offset())))
        prod.flush(20)
        for p in range(PARTITIONS):
            err, offset = got[p]
            assert err is None and offset == ends[p], (p, err, offset, ends[p])
            all_acked[(p, offset)] = b"after-%d" % r
