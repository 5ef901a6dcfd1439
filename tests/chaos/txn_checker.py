"""The exactly-once checker of consume-transform-produce runs (test_txn_exactly_once.py).

Input: what a read_committed consumer of the output holds, per partition in offset order
(values `<input partition>:<input offset>:<attempt>`), the number of input records per
partition, and the attempts log of the application (attempt -> "committed" / "aborted";
attempts missing from it were cut short by a kill, outcome unknown). It reports:

- aborted reads: visible records of an attempt the application saw aborted;
- lost writes: attempts the application saw committed whose records are not all visible;
- torn transactions: attempts with some records visible and some not (across partitions);
- duplicates: an input record transformed more than once in the visible output;
- missing: input records with no visible transform at all;
- out of order: a partition whose visible transforms are not in input order.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Report:
    visible: int = 0
    aborted_reads: list[str] = field(default_factory=list)
    lost_writes: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    out_of_order: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.aborted_reads or self.lost_writes or self.torn or self.duplicates
                    or self.missing or self.out_of_order)

    def summary(self) -> str:
        return (f"{self.visible} visible; aborted reads {len(self.aborted_reads)}, lost writes "
                f"{len(self.lost_writes)}, torn {len(self.torn)}, duplicates {len(self.duplicates)}, "
                f"missing {len(self.missing)}, out of order {len(self.out_of_order)}")


def check(visible: dict[int, list[str]], input_per_partition: int, attempts: dict[str, str],
          written: dict[str, int] | None = None) -> Report:
    """`written`: records each attempt wrote, when known (for torn/lost); without it an
    attempt counts as torn when it is visible on fewer partitions than it shows elsewhere."""
    r = Report()
    by_attempt: dict[str, int] = Counter()
    seen_inputs: Counter[str] = Counter()
    for partition, values in visible.items():
        last = -1
        for v in values:
            p, offset, attempt = v.split(":")
            r.visible += 1
            by_attempt[attempt] += 1
            seen_inputs[f"{p}:{offset}"] += 1
            if int(offset) <= last and partition not in r.out_of_order:
                r.out_of_order.append(partition)
            last = max(last, int(offset))
            if attempts.get(attempt) == "aborted":
                r.aborted_reads.append(v)
    r.duplicates = [k for k, n in seen_inputs.items() if n > 1]
    partitions = sorted(visible)
    r.missing = [f"{p}:{o}" for p in partitions for o in range(input_per_partition)
                 if f"{p}:{o}" not in seen_inputs]
    if written is not None:
        for attempt, n in written.items():
            shown = by_attempt.get(attempt, 0)
            if attempts.get(attempt) == "committed" and shown < n:
                r.lost_writes.append(attempt)
            elif 0 < shown < n:
                r.torn.append(attempt)
    else:
        r.lost_writes = [a for a, s in attempts.items() if s == "committed" and a not in by_attempt]
    return r


def written_by_attempt(all_records: dict[int, list[str]]) -> dict[str, int]:
    """How many records each attempt wrote, from a read_uncommitted read of the output
    (aborted and committed records alike)."""
    out: dict[str, int] = defaultdict(int)
    for values in all_records.values():
        for v in values:
            out[v.rsplit(":", 1)[1]] += 1
    return dict(out)
