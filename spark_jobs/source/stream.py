"""`spark.readStream.format("strom")`: the micro-batch stream reader.

Offsets are Spark's Kafka offsets, {"topic": {"partition": next offset}}. Each trigger
Spark asks `latestOffset(start, limit)`; the answer is written to the query's offset log
before the batch runs, and a restarted query replays an unfinished batch from that log
(`partitions(start, end)` of the logged offsets), so a batch always covers the same
records: with Spark's file sinks every record lands exactly once, even when the driver
is killed mid-batch.

Admission control (read limits): `getDefaultReadLimit` reports maxOffsetsPerTrigger
(ReadMaxRows) or minOffsetsPerTrigger (ReadMinRows); `latestOffset` honours the limit Spark
passes (ReadAllAvailable: everything), splitting maxOffsetsPerTrigger across partitions in
proportion to their lag, and holding a batch back while fewer than minOffsetsPerTrigger
records wait, for at most maxTriggerDelay.

Trigger.AvailableNow is supported explicitly: `prepareForTriggerAvailableNow` records the
latest offsets at that moment; later batches never go past them and are still cut by
maxOffsetsPerTrigger.

New partitions and, with subscribePattern, new topics are read from their earliest
offset, as Spark's Kafka source does. This object lives in Spark's long-lived Python
planner process on the driver (its state survives between triggers, not across restarts);
`read` runs on executors with only the input partition.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)

from clients.types import TopicPartition

from .options import SourceOptions
from .partition_reader import DataLossError, data_loss_message
from .planning import (OffsetOracle, from_json_offsets, plan_ranges, rate_limit, resolve_spec,
                       to_json_offsets)
from .ranges import RangePartition

__all__ = ["StromStreamReader"]

log = logging.getLogger("strom.spark.stream")
Offsets = dict[TopicPartition, int]


class StromStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.oracle = OffsetOracle(opts)
        self._available_now: Offsets | None = None
        self._last_trigger_ms = 0.0

    # ------------------------------------------------------------------ offsets

    def initialOffset(self) -> dict:
        tps = self.oracle.partitions()
        start = resolve_spec(self.opts.starting, tps, self.oracle, "starting",
                             self.opts.by_timestamp_strategy)
        log.info("%s: initial offsets %s", self.opts.describe_subscription(), start)
        return to_json_offsets(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.oracle.partitions()
        self._available_now = self.oracle.latest(tps)
        log.info("Trigger.AvailableNow: reading up to %s", self._available_now)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_offsets(start)
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self.oracle.latest(self.oracle.partitions())
        gone = [tp for tp in begin if tp not in latest]
        if gone:
            self._lost(f"{', '.join(map(str, gone))} are gone")
            if self._available_now is None:
                log.warning("partitions %s are gone; no longer reading them", gone)
        new = [tp for tp in latest if tp not in begin]
        from_new = self.oracle.earliest(new) if new else {}
        frm = {**from_new, **{tp: o for tp, o in begin.items() if tp in latest}}

        end = dict(latest)
        if not isinstance(limit, ReadAllAvailable):
            if self._delay_batch(frm, latest):
                return start
            max_rows = (limit.max_rows if isinstance(limit, ReadMaxRows)
                        else self.opts.max_offsets_per_trigger)
            if max_rows is not None:
                end = rate_limit(max_rows, frm, latest)
        # Partitions already being read stay in the offsets even without new records, so
        # the offsets stay comparable from batch to batch.
        return to_json_offsets(end)

    def _delay_batch(self, frm: Offsets, latest: Offsets) -> bool:
        """minOffsetsPerTrigger: hold the batch back while too few records wait, at most
        maxTriggerDelay since the last batch ran (never with Trigger.AvailableNow)."""
        minimum = self.opts.min_offsets_per_trigger
        if minimum is None or self._available_now is not None:
            return False
        now = time.monotonic() * 1000
        if self._last_trigger_ms == 0:
            self._last_trigger_ms = now
        waiting = sum(max(0, o - frm.get(tp, o)) for tp, o in latest.items())
        if waiting < minimum and now - self._last_trigger_ms < self.opts.max_trigger_delay_ms:
            return True
        self._last_trigger_ms = now
        return False

    def _lost(self, detail: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(data_loss_message(detail))
        log.warning("%s (failOnDataLoss=false: going on)", detail)

    # ------------------------------------------------------------------ batches

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_json_offsets(start)
        until = from_json_offsets(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            # Deterministic on replay as long as retention has not moved the log start.
            begin.update(self.oracle.earliest(new))
        for tp, e in until.items():
            if e < begin[tp]:
                self._lost(f"Partition {tp}'s offset was changed from {begin[tp]} to {e}")
        ranges = plan_ranges(begin, until, self.opts.min_partitions,
                             self.opts.max_records_per_partition)
        return [RangePartition(self.opts, r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return partition.read()

    def commit(self, end: dict) -> None:
        pass    # offsets live in Spark's checkpoint; nothing is committed to the cluster

