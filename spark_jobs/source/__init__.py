"""strom's PySpark data source and sink: `.format("strom")`, as Spark's Kafka integration.

    from spark_jobs.session import strom_spark_session
    spark = strom_spark_session("my-job")          # registers StromDataSource
    df = (spark.readStream.format("strom")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events").load())

Modules: `options` (parsing, Spark's option names and messages), `planning` (partitions,
offsets, rate limits, ranges; driver side), `partition_reader` + `arrow_records` (executor
side: Fetch loop -> Arrow), `stream` (micro-batch reader), `writer` (sink), `datasource`
(the DataSource and the batch reader).
"""
from .datasource import StromBatchReader, StromDataSource
from .options import parse_sink_options, parse_source_options
from .partition_reader import DataLossError

__all__ = ["StromDataSource", "StromBatchReader", "DataLossError", "parse_source_options",
           "parse_sink_options"]
