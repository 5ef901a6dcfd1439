"""`StromDataSource`: the Python data source registered as `.format("strom")`.

It reads and writes strom (or Kafka) topics as Spark's Kafka integration does, without a
jar: `spark.dataSource.register(StromDataSource)` (done by `spark_jobs.session`) and then
`spark.read`, `spark.readStream`, `df.write`, `df.writeStream` with `.format("strom")` and
the Kafka source's options (see `options.py`). The batch reader plans ranges on the driver
and reads them on executors; the stream reader is in `stream.py`, the sink in `writer.py`.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .arrow_records import spark_schema_ddl
from .options import SourceOptions, parse_sink_options, parse_source_options
from .planning import OffsetOracle, plan_ranges, resolve_spec
from .ranges import RangePartition
from .stream import StromStreamReader
from .exactly_once import ExactlyOnceStreamWriter
from .writer import StromStreamWriter, StromWriter, validate_sink_schema

__all__ = ["StromDataSource", "StromBatchReader"]


class StromDataSource(DataSource):
    """`.format("strom")`; options as Spark's Kafka source and sink."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return spark_schema_ddl(include)

    def reader(self, schema: StructType) -> "StromBatchReader":
        return StromBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> StromStreamReader:
        return StromStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> StromWriter:
        opts = parse_sink_options(self.options)
        validate_sink_schema(schema, opts)
        if opts.exactly_once:
            raise ValueError("Option 'exactlyOnce' applies to streaming writes (writeStream); "
                             "a batch write is at least once")
        return StromWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool
                     ) -> StromStreamWriter | ExactlyOnceStreamWriter:
        opts = parse_sink_options(self.options)
        validate_sink_schema(schema, opts)
        return ExactlyOnceStreamWriter(opts) if opts.exactly_once else StromStreamWriter(opts)


class StromBatchReader(DataSourceReader):
    """`spark.read.format("strom")`: startingOffsets (default earliest) to endingOffsets
    (default latest), resolved when the query is planned."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        oracle = OffsetOracle(opts)
        tps = oracle.partitions()
        start = resolve_spec(opts.starting, tps, oracle, "starting", opts.by_timestamp_strategy)
        end = resolve_spec(opts.ending, tps, oracle, "ending")
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for "
                    f"topic {tp.topic} partition {tp.partition}. You either provided an "
                    f"invalid fromOffset, or the Kafka topic has been damaged")
        ranges = plan_ranges(start, end, opts.min_partitions, opts.max_records_per_partition)
        if not ranges:
            return [RangePartition(opts, None)]
        return [RangePartition(opts, r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return partition.read()
