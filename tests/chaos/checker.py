"""A client-agnostic delivery checker for fault-injection tests, and confluent-kafka helpers
that feed it.

A test reports what happened, event by event, from any client:

    checker = Checker()
    checker.record_sent(key, value)                       # a produce was attempted
    checker.record_acked(partition, offset, key, value)   # the broker acknowledged it there
    checker.record_failed(key, value, error)              # the client gave up on it
    checker.record_read(partition, offset, key, value)    # a consumer read it there

and `checker.report()` compares them. Values identify records: every value must be unique in
a run. Values of the form b"<producer>-<seq>" (`make_value`) also give the producer order, which
the out-of-order check uses; other values are checked for everything but order.

The report's counts (`CheckReport`):

    acknowledged         distinct values acknowledged
    read_back            distinct (partition, offset) positions read
    lost                 acknowledged values that were not read at the position they were
                         acknowledged at (with that value), or not read anywhere at all
    duplicated           values read at two or more different positions
    out_of_order         records whose sequence number, in a partition's offset order, is
                         below one the same producer already had at a lower offset
    conflicting_offsets  positions read with two different values (across reads, consumers
                         or passes), or acknowledged for two different values
    unacked_but_present  values read that were never acknowledged (failed, timed out or in
                         flight when the producer stopped): informational, not a fault

`lost`, `duplicated`, `out_of_order` and `conflicting_offsets` are faults: `report().ok` is
true when all four are 0, and `assert_ok()` raises with examples of each fault otherwise.

`ChaosProducer` (a background thread producing numbered values with acks=all) and `read_back`
(an assign()-based consumer reading every partition from the beginning to its end offset)
drive the checker with confluent-kafka, which is imported only when they are used.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

Position = tuple[int, int]          # (partition, offset)
Parse = Callable[[bytes], "tuple[str, int] | None"]

MAX_EXAMPLES = 10
FAULTS = ("lost", "duplicated", "out_of_order", "conflicting_offsets")


def make_value(producer: str, seq: int) -> bytes:
    """The value `ChaosProducer` sends: b"<producer>-<seq>"."""
    return f"{producer}-{seq}".encode()


def parse_value(value: bytes | None) -> tuple[str, int] | None:
    """(producer, seq) of a b"<producer>-<seq>" value (the producer may contain '-'), else None."""
    if not value:
        return None
    name, sep, seq = value.rpartition(b"-")
    if not sep or not name or not seq.isdigit():
        return None
    return name.decode(errors="replace"), int(seq)


def _show(value: bytes | None) -> str:
    if value is None:
        return "None"
    text = value[:60].decode(errors="replace")
    return text + ("..." if len(value) > 60 else "")


def _pos(pos: Position) -> str:
    return f"{pos[0]}/{pos[1]}"


@dataclass
class CheckReport:
    sent: int
    acknowledged: int
    failed: int
    read_back: int
    lost: int
    duplicated: int
    out_of_order: int
    conflicting_offsets: int
    unacked_but_present: int
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in FAULTS)

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (
            "sent", "acknowledged", "failed", "read_back", "lost", "duplicated", "out_of_order",
            "conflicting_offsets", "unacked_but_present")}

    def __str__(self) -> str:
        cells = [f"{name.replace('_', ' ')} {n}" for name, n in self.counts().items()]
        return " | ".join(cells + ["OK" if self.ok else "FAULTS"])

    def details(self) -> str:
        """The one-line table, then up to MAX_EXAMPLES examples of each non-empty category."""
        lines = [str(self)]
        for name, examples in self.examples.items():
            if examples:
                lines.append(f"{name} ({getattr(self, name, len(examples))}), e.g.:")
                lines.extend(f"  {e}" for e in examples)
        return "\n".join(lines)

    def assert_ok(self, min_acked: int = 1) -> None:
        """Raise AssertionError on any fault, or when fewer than `min_acked` values were
        acknowledged (a run that acknowledged nothing proves nothing)."""
        if not self.ok:
            raise AssertionError("delivery check failed:\n" + self.details())
        if self.acknowledged < min_acked:
            raise AssertionError(f"only {self.acknowledged} records acknowledged "
                                 f"(expected at least {min_acked}):\n" + self.details())


class Checker:
    """Collects produce/ack/read events (thread-safe) and reports delivery faults."""

    def __init__(self, parse: Parse = parse_value):
        self._parse = parse
        self._lock = threading.Lock()
        self._sent: set[bytes] = set()
        self._failed: dict[bytes, str] = {}
        self._acked: dict[bytes, set[Position]] = defaultdict(set)      # value -> ack positions
        self._acked_at: dict[Position, set[bytes]] = defaultdict(set)   # position -> acked values
        self._reads: dict[Position, Counter[bytes]] = defaultdict(Counter)  # position -> values read
        self._read_at: dict[bytes, set[Position]] = defaultdict(set)    # value -> positions read

    # ---- events -------------------------------------------------------------------------

    def record_sent(self, key: bytes | None, value: bytes) -> None:
        with self._lock:
            self._sent.add(value)

    def record_acked(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        pos = (partition, offset)
        with self._lock:
            self._sent.add(value)
            self._acked[value].add(pos)
            self._acked_at[pos].add(value)

    def record_failed(self, key: bytes | None, value: bytes, error: object) -> None:
        with self._lock:
            self._sent.add(value)
            self._failed[value] = str(error)

    def record_read(self, partition: int, offset: int, key: bytes | None, value: bytes) -> None:
        pos = (partition, offset)
        with self._lock:
            self._reads[pos][value] += 1
            self._read_at[value].add(pos)

    # ---- convenience --------------------------------------------------------------------

    @property
    def acked_count(self) -> int:
        with self._lock:
            return len(self._acked)

    def acked_values(self) -> set[bytes]:
        with self._lock:
            return set(self._acked)

    # ---- the report ---------------------------------------------------------------------

    def report(self) -> CheckReport:
        with self._lock:
            return self._report()

    def assert_ok(self, min_acked: int = 1) -> CheckReport:
        r = self.report()
        r.assert_ok(min_acked)
        return r

    def _report(self) -> CheckReport:
        ex: dict[str, list[str]] = {name: [] for name in (*FAULTS, "unacked_but_present")}

        def note(kind: str, text: str) -> None:
            if len(ex[kind]) < MAX_EXAMPLES:
                ex[kind].append(text)

        lost = 0
        for value in sorted(self._acked):
            acked_at = sorted(self._acked[value])
            read_at = self._read_at.get(value)
            if not read_at:
                lost += 1
                note("lost", f"{_show(value)} acked at {', '.join(map(_pos, acked_at))}, never read")
                continue
            missing = [p for p in acked_at if value not in self._reads.get(p, ())]
            if missing:
                lost += 1
                there = "; ".join(
                    f"at {_pos(p)}: {', '.join(_show(v) for v in sorted(self._reads[p])) or 'nothing'}"
                    if p in self._reads else f"at {_pos(p)}: nothing read" for p in missing)
                note("lost", f"{_show(value)} acked at {', '.join(map(_pos, missing))} but read "
                             f"at {', '.join(map(_pos, sorted(read_at)))} ({there})")

        duplicated = 0
        for value in sorted(self._read_at):
            positions = self._read_at[value]
            if len(positions) > 1:
                duplicated += 1
                note("duplicated", f"{_show(value)} read at {', '.join(map(_pos, sorted(positions)))}")

        conflicting = 0
        for pos in sorted(set(self._reads) | set(self._acked_at)):
            read_values = set(self._reads.get(pos, ()))
            acked_values = self._acked_at.get(pos, set())
            if len(read_values) > 1 or len(acked_values) > 1:
                conflicting += 1
                note("conflicting_offsets",
                     f"{_pos(pos)} read as {sorted(map(_show, read_values))}, "
                     f"acked as {sorted(map(_show, acked_values))}")

        out_of_order = 0
        by_partition: dict[int, list[int]] = defaultdict(list)
        for partition, offset in self._reads:
            by_partition[partition].append(offset)
        for partition in sorted(by_partition):
            highest: dict[str, tuple[int, int]] = {}    # producer -> (highest seq, its offset)
            for offset in sorted(by_partition[partition]):
                parsed = [p for p in map(self._parse, self._reads[(partition, offset)]) if p]
                for producer, seq in sorted(parsed, key=lambda ps: ps[1]):
                    top = highest.get(producer)
                    if top is not None and seq < top[0]:
                        out_of_order += 1
                        note("out_of_order", f"partition {partition}: {producer} seq {seq} at offset "
                                             f"{offset} after seq {top[0]} at offset {top[1]}")
                    else:
                        highest[producer] = (seq, offset)

        unacked = 0
        for value in sorted(self._read_at):
            if value not in self._acked:
                unacked += 1
                why = (f"failed: {self._failed[value]}" if value in self._failed else
                       "sent, no ack or failure seen" if value in self._sent else "never sent")
                note("unacked_but_present",
                     f"{_show(value)} at {', '.join(map(_pos, sorted(self._read_at[value])))} ({why})")

        return CheckReport(
            sent=len(self._sent), acknowledged=len(self._acked),
            failed=sum(1 for v in self._failed if v not in self._acked),
            read_back=len(self._reads), lost=lost, duplicated=duplicated,
            out_of_order=out_of_order, conflicting_offsets=conflicting,
            unacked_but_present=unacked, examples=ex)


# ---- confluent-kafka drivers ----------------------------------------------------------------


class ChaosProducer:
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
        self.bootstrap = bootstrap
        self.topic = topic
        self.checker = checker
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
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()
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
            with self._lock:
                self.failed += 1
                self.errors[err.name()] += 1
            self.checker.record_failed(msg.key(), msg.value(), err)
        else:
            with self._lock:
                self.acked += 1
            self.checker.record_acked(msg.partition(), msg.offset(), msg.key(), msg.value())

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
                    with self._lock:
                        self.failed += 1
                        self.errors[e.args[0].name() if e.args else repr(e)] += 1
                    self.checker.record_failed(key, value, e)
                seq += 1
                with self._lock:
                    self.sent = seq
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
