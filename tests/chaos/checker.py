"""confluent-kafka drivers of the delivery checker for the fault tests: `ChaosProducer` (a
background thread producing numbered values with acks=all) and `read_back` (an assign()-based
consumer reading every partition from the beginning to its end offset), each feeding a
`Checker`.

The checker itself (`Checker`, `CheckReport`, `make_value`, `parse_value`) lives in
broker/testing/verify/checker.py, shipped with strom, where strom-verify drives it with
strom's own client; it is re-exported here so that the tests and strom-verify share one
implementation. confluent-kafka is imported only when a driver is used.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Iterable

from broker.testing.verify.checker import Checker, CheckReport, make_value, parse_value
from broker.testing.verify.workload import DeliveryTally

__all__ = ["Checker", "CheckReport", "make_value", "parse_value", "ChaosProducer", "read_back"]


# ---- confluent-kafka drivers ----------------------------------------------------------------


class ChaosProducer(DeliveryTally):
    """Produces b"<name>-<seq>" values (seq 0, 1, 2, ...) to `topic` from a background thread,
    with acks=all, feeding `checker` from the delivery callbacks.

    rate         records per second (None: as fast as the client accepts them)
    idempotence  enable.idempotence (off: retries may duplicate and reorder, which the
                 checker then shows)
    keys         records get key b"<seq % keys>" so that they spread over the partitions by
                 the key hash (0 or None: no key, the client's partitioner decides)
    max_records  stop producing after this many (None: until stop())
    config       extra librdkafka settings, winning over the defaults here

    start() / stop() or `with ChaosProducer(...) as p:`; stop() flushes for `flush_timeout`
    seconds and then purges what is left, which the checker records as failed.
    """

    def __init__(self, bootstrap: str, topic: str, checker: Checker, name: str = "p0", *,
                 rate: float | None = None, idempotence: bool = False, keys: int | None = 16,
                 max_records: int | None = None, config: dict[str, Any] | None = None):
        super().__init__(checker)
        self.bootstrap = bootstrap
        self.topic = topic
        self.name = name
        self.rate = rate
        self.keys = keys
        self.max_records = max_records
        self.config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": f"chaos-{name}",
            "acks": "all",
            "enable.idempotence": idempotence,
            "linger.ms": 5,
            "message.timeout.ms": 30000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 5000,
        }
        self.config.update(config or {})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self.exception: BaseException | None = None

    def __enter__(self) -> "ChaosProducer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "ChaosProducer":
        from confluent_kafka import Producer
        self._producer = Producer(self.config)
        self._thread = threading.Thread(target=self._run, name=f"chaos-producer-{self.name}",
                                        daemon=True)
        self._thread.start()
        return self

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.note_failed(msg.key(), msg.value(), err, err.name())
        else:
            self.note_acked(msg.partition(), msg.offset(), msg.key(), msg.value())

    def _run(self) -> None:
        from confluent_kafka import KafkaException
        p = self._producer
        seq = 0
        next_at = time.monotonic()
        try:
            while not self._stop.is_set() and (self.max_records is None or seq < self.max_records):
                if self.rate:
                    now = time.monotonic()
                    if now < next_at:
                        p.poll(min(next_at - now, 0.05))
                        continue
                    # after a stall, do not burst more than one second's worth
                    next_at = max(next_at + 1.0 / self.rate, now - 1.0)
                value = make_value(self.name, seq)
                key = str(seq % self.keys).encode() if self.keys else None
                self.checker.record_sent(key, value)
                try:
                    p.produce(self.topic, value, key, on_delivery=self._on_delivery)
                except BufferError:
                    p.poll(0.1)          # local queue full: let deliveries drain, retry the same seq
                    continue
                except KafkaException as e:
                    self.note_failed(key, value, e, e.args[0].name() if e.args else repr(e))
                seq += 1
                self.note_sent(seq)
                p.poll(0)
            while not self._stop.is_set():  # max_records reached: keep serving callbacks
                p.poll(0.1)
        except BaseException as e:  # surfaced by stop()
            self.exception = e

    def wait_acked(self, n: int, timeout: float = 30.0) -> int:
        """Wait until at least `n` records are acknowledged; returns the count."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acked >= n:
                return self.acked
            if self._thread is not None and not self._thread.is_alive() and self.exception:
                raise self.exception
            time.sleep(0.02)
        raise TimeoutError(f"{self.name}: {self.acked} of {n} records acknowledged after "
                           f"{timeout}s (failed {self.failed}: {dict(self.errors)})")

    def stop(self, flush_timeout: float = 30.0) -> dict[str, int]:
        """Stop producing, flush, purge the rest; returns {"sent", "acked", "failed"}."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
            self._thread = None
        if self._producer is not None:
            left = self._producer.flush(flush_timeout)
            if left:
                self._producer.purge()
                self._producer.flush(5)
            self._producer = None
        if self.exception is not None:
            raise self.exception
        return {"sent": self.sent, "acked": self.acked, "failed": self.failed}


def read_back(bootstrap: str, topic: str, partitions: int | Iterable[int], checker: Checker, *,
              timeout: float = 60.0, config: dict[str, Any] | None = None) -> dict[int, int]:
    """Read every partition of `topic` from its beginning up to its end offset (the high
    watermark when the read starts) with an assign()-based confluent-kafka consumer, feeding
    `checker.record_read`. `partitions` is a count or the partition numbers. Returns the
    number of records read per partition; raises TimeoutError if some partition could not be
    read to its end offset within `timeout` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"chaos-read-back-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "topic.metadata.refresh.interval.ms": 5000,
    }
    conf.update(config or {})
    deadline = time.monotonic() + timeout
    consumer = Consumer(conf)
    try:
        end: dict[int, int] = {}
        for p in parts:
            while True:
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                    break
                except KafkaException as e:   # no leader yet, unknown topic: retry until the deadline
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"read_back: no end offset for {topic}/{p}: {e}") from e
                    time.sleep(0.2)
            end[p] = high
        read = {p: 0 for p in parts}
        todo = {p for p in parts if end[p] > 0}
        if todo:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(todo)])
        position = {p: -1 for p in parts}
        errors: list[str] = []
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                part = msg.partition()
                off = msg.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if part in end and off is not None and off >= end[part]:
                            todo.discard(part)
                    elif len(errors) < 20:
                        errors.append(str(err))   # transient during faults: keep reading
                    continue
                if part is None or off is None:
                    continue
                checker.record_read(part, off, msg.key(), msg.value() or b"")
                read[part] = read.get(part, 0) + 1
                position[part] = max(position.get(part, -1), off)
                if part in end and off + 1 >= end[part]:
                    todo.discard(part)
        if todo:
            raise TimeoutError(
                f"read_back: {topic} partitions {sorted(todo)} not read to their end offsets "
                f"within {timeout}s (end {[end[p] for p in sorted(todo)]}, last offset read "
                f"{[position[p] for p in sorted(todo)]}; errors: {errors[:5]})")
        return read
    finally:
        consumer.close()
