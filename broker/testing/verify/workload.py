"""strom-verify's drivers of the checker, on strom's own client library (nothing a plain
`pip install strom` lacks): `RateProducer` writes numbered values at a set rate and reports
every acknowledgement and failure; `read_back` reads every partition from its start to its
end offset and reports every record read."""
from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from typing import Any, Mapping

from broker.testing.verify.checker import Checker, make_value
from broker.testing.verify.cluster_view import TRANSIENT
from clients.consumer import Consumer
from clients.producer import Producer
from clients.types import RecordMetadata, TopicPartition

# The producer's settings unless the caller's win: a record the cluster cannot take within
# delivery.timeout.ms is a failed send (not a loss), so the run ends in seconds, not minutes.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "delivery.timeout.ms": 30_000,
    "request.timeout.ms": 10_000,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 5_000,
}


class DeliveryTally:
    """A producer's running counts (sent, acked, failed, errors by name), each acknowledgement
    and failure also passed to the checker. Thread-safe: delivery callbacks run on a client's
    I/O thread. strom-verify's producer and the fault tests' confluent-kafka one build on it."""

    def __init__(self, checker: Checker):
        self.checker = checker
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def note_acked(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        with self._lock:
            self.acked += 1
        self.checker.record_acked(partition, offset, key, value)

    def note_failed(self, key: bytes | None, value: bytes, error: object, name: str) -> None:
        with self._lock:
            self.failed += 1
            self.errors[name] += 1
        self.checker.record_failed(key, value, error)

    def note_sent(self, count: int) -> None:
        with self._lock:
            self.sent = count

    def progress(self) -> tuple[int, int, int]:
        """(sent, acknowledged, failed) so far."""
        with self._lock:
            return self.sent, self.acked, self.failed


class RateProducer(DeliveryTally):
    """Produces b"<name>-<seq>" values (seq 0, 1, 2, ...) to `topic` at `rate` records/s from
    a background thread, keyed b"<seq % keys>" so that they spread over the partitions, and
    feeds `checker` from the delivery callbacks (which run on the producer's I/O thread).

    `config` is the producer's (acks, enable.idempotence, security, ...), over
    PRODUCER_DEFAULTS. start() / stop(); stop() delivers what is buffered within its timeout
    and fails the rest, which the checker records as failed sends."""

    def __init__(self, bootstrap: str, topic: str, checker: Checker, name: str, rate: float,
                 config: Mapping[str, Any] | None = None, keys: int = 64):
        if rate <= 0:
            raise ValueError("rate must be positive")
        super().__init__(checker)
        self.topic = topic
        self.name = name
        self.rate = rate
        self.keys = keys
        self.config: dict[str, Any] = dict(PRODUCER_DEFAULTS)
        self.config.update(config or {})
        self.config["bootstrap.servers"] = bootstrap
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self.exception: BaseException | None = None

    def start(self) -> "RateProducer":
        self._producer = Producer(self.config)
        self._thread = threading.Thread(target=self._run, name=f"verify-producer-{self.name}",
                                        daemon=True)
        self._thread.start()
        return self

    def _delivered(self, key: bytes, value: bytes, err: Exception | None,
                   md: RecordMetadata | None) -> None:
        if err is None and md is not None and md.offset >= 0:
            self.note_acked(md.partition, md.offset, key, value)
        else:
            error = err if err is not None else RuntimeError("acknowledged without an offset")
            self.note_failed(key, value, error, type(error).__name__)

    def _run(self) -> None:
        assert self._producer is not None
        seq = 0
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now < next_at:
                    self._stop.wait(next_at - now)
                    continue
                # after a stall (a send blocked by a full buffer), no burst of more than a second
                next_at = max(next_at + 1.0 / self.rate, now - 1.0)
                value = make_value(self.name, seq)
                key = str(seq % self.keys).encode()
                self.checker.record_sent(key, value)
                try:
                    self._producer.send(self.topic, value, key,
                                        on_delivery=functools.partial(self._delivered, key, value))
                except TRANSIENT as e:       # no room within max.block.ms: that record failed
                    self._delivered(key, value, e, None)
                seq += 1
                self.note_sent(seq)
        except BaseException as e:  # noqa: BLE001 - surfaced by stop()
            self.exception = e

    def stop(self, flush_timeout: float = 30.0) -> None:
        """Stop sending; deliver what is buffered within `flush_timeout` s, fail the rest."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
            self._thread = None
        if self._producer is not None:
            self._producer.close(flush_timeout)
            self._producer = None
        if self.exception is not None:
            raise self.exception


def read_back(bootstrap: str, topic: str, checker: Checker, *, timeout: float = 60.0,
              config: Mapping[str, Any] | None = None) -> dict[int, int]:
    """Read every partition of `topic` from its first offset to its end offset (as the
    partition leaders report them when the read starts) with strom's consumer, assigned (no
    group), feeding `checker.record_read`. Returns the records read per partition;
    TimeoutError if some partition was not read to its end within `timeout` seconds."""
    conf: dict[str, Any] = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "metadata.max.age.ms": 5_000}
    conf.update(config or {})
    conf.pop("group.id", None)
    conf["bootstrap.servers"] = bootstrap
    deadline = time.monotonic() + timeout
    consumer = Consumer(config=conf)
    try:
        tps, end = _end_offsets(consumer, topic, deadline)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        read = {tp.partition: 0 for tp in tps}
        todo = {tp for tp in tps if end[tp] > 0}
        while todo:
            if time.monotonic() >= deadline:
                behind = {str(tp): f"{_position(consumer, tp)}/{end[tp]}" for tp in sorted(todo)}
                raise TimeoutError(f"read back of {topic}: partitions not read to their end "
                                   f"offsets within {timeout:g}s (position/end: {behind})")
            for r in consumer.poll(0.5, max_records=5000):
                value = r.value if isinstance(r.value, bytes) else b""
                key = r.key if isinstance(r.key, bytes) else None
                checker.record_read(r.partition, r.offset, key, value)
                read[r.partition] += 1
            for tp in list(todo):
                # the position, not the last offset read: control records are never returned
                if _position(consumer, tp) >= end[tp]:
                    todo.discard(tp)
        return read
    finally:
        consumer.close(autocommit=False)


def _end_offsets(consumer: Consumer, topic: str,
                 deadline: float) -> tuple[list[TopicPartition], dict[TopicPartition, int]]:
    """The topic's partitions and end offsets, asked again while a partition has no leader."""
    while True:
        try:
            parts = consumer.partitions_for(topic)
            if parts:
                tps = [TopicPartition(topic, p) for p in sorted(parts)]
                return tps, consumer.end_offsets(tps)
            last: object = "no partitions known"
        except TRANSIENT as e:
            last = e
        if time.monotonic() >= deadline:
            raise TimeoutError(f"read back of {topic}: no end offsets ({last})")
        time.sleep(0.2)


def _position(consumer: Consumer, tp: TopicPartition) -> int:
    try:
        return consumer.position(tp)
    except TRANSIENT:
        return -1
