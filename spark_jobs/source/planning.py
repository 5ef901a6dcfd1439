"""Driver side: which topic-partitions a query reads, their offsets, and the ranges to read.

`OffsetOracle` asks the cluster (strom's AsyncAdminClient on a private event loop, one
short-lived connection set per call: the driver asks a few times per trigger at most) for
the partitions of the subscription and for earliest / latest / by-timestamp offsets, under
the query's isolation level (latest = the last stable offset with read_committed).

The pure functions below it do the planning, as Spark's Kafka source does:
  - `resolve_spec`: an `OffsetSpec` (earliest, latest, JSON offsets, timestamps) -> offsets;
  - `rate_limit`: maxOffsetsPerTrigger split across partitions in proportion to their lag,
    never starving a partition with some lag;
  - `plan_ranges`: [start, end) per partition, split into pieces for parallelism
    (minPartitions, maxRecordsPerPartition).

Offsets travel as JSON in Spark's Kafka format: {"topic": {"0": 42, "1": 17}}.
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Mapping, TypeVar

from clients.aio import AsyncAdminClient
from clients.config import KEYS
from clients.types import OffsetAndTimestamp, TopicPartition

from .options import EARLIEST, LATEST, OffsetSpec, SourceOptions

if TYPE_CHECKING:
    from clients.admin import TopicDescription

__all__ = ["OffsetOracle", "OffsetRange", "resolve_spec", "rate_limit", "plan_ranges",
           "to_json_offsets", "from_json_offsets"]

T = TypeVar("T")
Offsets = dict[TopicPartition, int]


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json_offsets(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {TopicPartition(t, int(p)): int(o) for t, ps in value.items() for p, o in ps.items()}


class OffsetOracle:
    """Blocking look-ups of partitions and offsets for one query's options."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        common = KEYS["common"]
        self.admin_config = {"bootstrap.servers": opts.bootstrap,
                             "client.id": "strom-spark-driver",
                             **{k: v for k, v in opts.client_config.items() if k in common}}

    def _run(self, work: Callable[[AsyncAdminClient], Awaitable[T]]) -> T:
        async def main() -> T:
            async with AsyncAdminClient(self.admin_config) as admin:
                return await work(admin)
        return asyncio.run(main())

    def partitions(self) -> list[TopicPartition]:
        """The topic-partitions the subscription covers right now (sorted)."""
        opts = self.opts
        if opts.assign is not None:
            return sorted(TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps)

        async def work(admin: AsyncAdminClient) -> dict[str, TopicDescription]:
            return await admin.describe_topics(None)
        topics = self._run(work)
        if opts.pattern is not None:
            pattern = re.compile(opts.pattern)
            names = [n for n in topics if pattern.fullmatch(n) and not topics[n].internal]
        else:
            names = [n for n in opts.subscribe if n in topics]
        return sorted(TopicPartition(n, p.partition) for n in names
                      for p in topics[n].partitions)

    def offsets(self, specs: Mapping[TopicPartition, int]) -> Offsets:
        """{tp: offset} for {tp: EARLIEST | LATEST | timestamp ms}; -1 where no record has
        that timestamp or a later one."""
        if not specs:
            return {}
        wire: dict[TopicPartition, str | int] = {
            tp: ("earliest" if s == EARLIEST else "latest" if s == LATEST else int(s))
            for tp, s in specs.items()}

        async def work(admin: AsyncAdminClient) -> dict[TopicPartition, OffsetAndTimestamp]:
            return await admin.list_offsets(wire, self.opts.isolation_level)
        found = self._run(work)
        return {tp: found[tp].offset for tp in specs}

    def earliest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return self.offsets({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> Offsets:
        return self.offsets({tp: LATEST for tp in tps})

    def earliest_and_latest(self, tps: list[TopicPartition]) -> tuple[Offsets, Offsets]:
        """Both ends of each partition, with one connection set."""
        if not tps:
            return {}, {}

        async def work(admin: AsyncAdminClient) -> tuple[dict[TopicPartition, OffsetAndTimestamp],
                                                          dict[TopicPartition, OffsetAndTimestamp]]:
            lo = await admin.list_offsets({tp: "earliest" for tp in tps}, self.opts.isolation_level)
            hi = await admin.list_offsets({tp: "latest" for tp in tps}, self.opts.isolation_level)
            return lo, hi
        lo, hi = self._run(work)
        return {tp: lo[tp].offset for tp in tps}, {tp: hi[tp].offset for tp in tps}


def resolve_spec(spec: OffsetSpec, tps: list[TopicPartition], oracle: OffsetOracle,
                 which: str, strategy: str = "error") -> Offsets:
    """Concrete offsets for `spec` over `tps`; `which` is "starting" or "ending" (for
    messages and the timestamp fallbacks)."""
    if spec.kind == "earliest":
        return oracle.earliest(tps)
    if spec.kind == "latest":
        return oracle.latest(tps)
    if spec.kind == "timestamp":
        stamp = spec.timestamp
        assert stamp is not None, "an OffsetSpec of kind timestamp carries its timestamp"
        return _by_timestamp({tp: stamp for tp in tps}, oracle, which, strategy)
    given = {TopicPartition(t, p): o for t, ps in spec.offsets.items() for p, o in ps.items()}
    if set(given) != set(tps):
        name = f"{which}Offsets" if spec.kind == "offsets" else f"{which}OffsetsByTimestamp"
        raise ValueError(
            f"Assigned partitions and specified partitions of {name} differ: specified "
            f"{sorted(map(str, given))}, assigned {sorted(map(str, tps))}. If {name} "
            f"contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest.")
    if spec.kind == "timestamps":
        return _by_timestamp(given, oracle, which, strategy)
    specials = {tp: o for tp, o in given.items() if o in (EARLIEST, LATEST)}
    out = dict(given)
    out.update(oracle.offsets(specials))
    return out


def _by_timestamp(stamps: Mapping[TopicPartition, int], oracle: OffsetOracle, which: str,
                  strategy: str) -> Offsets:
    found = oracle.offsets(stamps)
    missing = [tp for tp, o in found.items() if o < 0]
    if missing:
        if which == "starting" and strategy == "error":
            tp = missing[0]
            raise ValueError(f"No offset matched from request of topic-partition {tp} and "
                             f"timestamp {stamps[tp]}.")
        found.update(oracle.latest(missing))
    return found


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int]) -> Offsets:
    """End offsets admitting at most about `limit` records, split across partitions in
    proportion to their lag (Spark's KafkaMicroBatchStream.rateLimit)."""
    sizes = {tp: end - start[tp] for tp, end in latest.items()
             if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        take = int(-(-prorate // 1)) if prorate < 1 else int(prorate // 1)
        out[tp] = min(end, start[tp] + take)
    return out


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                min_partitions: int | None, max_records: int | None) -> list[OffsetRange]:
    """Non-empty [start, end) ranges, split so that each holds at most `max_records`
    records and there are at least `min_partitions` of them when the data allows (big
    ranges are split first, in proportion to their size, as Spark's KafkaOffsetRangeCalculator)."""
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp])
              for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    total = sum(r.size for r in ranges)
    if not ranges:
        return []
    pieces_for: dict[OffsetRange, int] = {r: 1 for r in ranges}
    if min_partitions and min_partitions > len(ranges):
        for r in ranges:
            pieces_for[r] = max(1, round(r.size / total * min_partitions))
    if max_records:
        for r in ranges:
            pieces_for[r] = max(pieces_for[r], -(-r.size // max_records))
    out: list[OffsetRange] = []
    for r in ranges:
        n = min(pieces_for[r], r.size)
        step, extra = divmod(r.size, n)
        s = r.start
        for i in range(n):
            e = s + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, s, e))
            s = e
    return out
