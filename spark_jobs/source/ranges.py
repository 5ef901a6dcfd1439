"""The unit of work shipped to an executor: one offset range of one topic-partition."""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from .options import SourceOptions
from .partition_reader import read_range
from .planning import OffsetRange

__all__ = ["RangePartition"]


class RangePartition(InputPartition):
    """Records [range.start, range.end) of range.topic / range.partition, plus the options
    the executor needs to connect (pickled by Spark). `range` None: an empty partition (a
    batch query over no data still needs one)."""

    def __init__(self, opts: SourceOptions, range_: OffsetRange | None):
        super().__init__(range_)
        self.opts = opts
        self.range = range_

    def read(self) -> Iterator[pa.RecordBatch]:
        r = self.range
        if r is None:
            return iter(())
        return read_range(self.opts, r.topic, r.partition, r.start, r.end)

    def __repr__(self) -> str:
        r = self.range
        return "RangePartition(empty)" if r is None else (
            f"RangePartition({r.topic}-{r.partition} [{r.start}, {r.end}))")
