"""The delivery checker of strom-verify and of strom's fault tests: one implementation,
client-agnostic, fed event by event.

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

Drivers feed it: strom's own client in `broker.testing.verify.workload` (strom-verify), and
confluent-kafka in the tests (tests/chaos/checker.py's ChaosProducer and read_back).
"""
from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable

Position = tuple[int, int]          # (partition, offset)
Parse = Callable[[bytes], "tuple[str, int] | None"]

MAX_EXAMPLES = 10
FAULTS = ("lost", "duplicated", "out_of_order", "conflicting_offsets")


def make_value(producer: str, seq: int) -> bytes:
    """The value the verify producers send: b"<producer>-<seq>"."""
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
        # Acknowledged without an offset: librdkafka acknowledges a batch whose answer it never
        # got once a later batch of the same idempotent producer is acknowledged (the sequences
        # prove it was written), knowing no offset for it. It must be read back somewhere.
        self._acked_unplaced: set[bytes] = set()

    # ---- events -------------------------------------------------------------------------

    def record_sent(self, key: bytes | None, value: bytes) -> None:
        with self._lock:
            self._sent.add(value)

    def record_acked(self, partition: int, offset: int | None, key: bytes | None, value: bytes) -> None:
        with self._lock:
            self._sent.add(value)
            if offset is None or offset < 0:
                self._acked_unplaced.add(value)
                return
            pos = (partition, offset)
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
            return len(self._acked.keys() | self._acked_unplaced)

    def acked_values(self) -> set[bytes]:
        with self._lock:
            return set(self._acked) | self._acked_unplaced

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
        for value in sorted(self._acked_unplaced - self._acked.keys()):
            if not self._read_at.get(value):
                lost += 1
                note("lost", f"{_show(value)} acked (no offset known), never read")
        acked = self._acked.keys() | self._acked_unplaced

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
            if value not in acked:
                unacked += 1
                why = (f"failed: {self._failed[value]}" if value in self._failed else
                       "sent, no ack or failure seen" if value in self._sent else "never sent")
                note("unacked_but_present",
                     f"{_show(value)} at {', '.join(map(_pos, sorted(self._read_at[value])))} ({why})")

        return CheckReport(
            sent=len(self._sent), acknowledged=len(acked),
            failed=sum(1 for v in self._failed if v not in acked),
            read_back=len(self._reads), lost=lost, duplicated=duplicated,
            out_of_order=out_of_order, conflicting_offsets=conflicting,
            unacked_but_present=unacked, examples=ex)
