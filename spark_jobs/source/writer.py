"""`df.write` / `df.writeStream` `.format("strom")`: the sink, as Spark's Kafka sink.

Columns: `value` (string or binary, required), `key` (string or binary), `topic` (string;
the `topic` option, when set, wins over it), `partition` (int: that partition; null: the
producer's partitioner), `headers` (array<struct<key: string, value: binary>>). Each Spark
task sends its rows with one strom `Producer` (kafka.* options passed through: acks,
linger.ms, compression.type, ...) and fails if any record could not be delivered.
Guarantee: at least once, like Spark's Kafka sink (a retried task sends its rows again);
with `exactlyOnce=true`, streaming writes are exactly once (exactly_once.py).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructType)

from clients import Producer
from clients.types import RecordMetadata

from .options import SinkOptions

__all__ = ["StromWriter", "StromStreamWriter", "validate_sink_schema", "SentMessage"]


@dataclass
class SentMessage(WriterCommitMessage):
    records: int


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery, with its messages."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if opts.topic is None:
        if "topic" not in fields:
            raise ValueError("topic option required when no 'topic' attribute is present. "
                             "Use the topic option for setting a topic.")
        if not isinstance(fields["topic"], StringType):
            raise ValueError(f"Topic type must be a string, not {fields['topic'].simpleString()}")
    if "key" in fields and not isinstance(fields["key"], (StringType, BinaryType)):
        raise ValueError(f"key attribute type must be a string or binary, not "
                         f"{fields['key'].simpleString()}")
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    if not isinstance(fields["value"], (StringType, BinaryType)):
        raise ValueError(f"value attribute type must be a string or binary, not "
                         f"{fields['value'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise ValueError(f"headers attribute type must be array<struct<key:string,"
                             f"value:binary>>, not {h.simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an int, not "
                         f"{fields['partition'].simpleString()}")


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    names = [n.lower() for n in batch.schema.names]
    if name not in names:
        return None
    return batch.column(names.index(name)).to_pylist()


class DeliveryErrors:
    """`on_delivery` for many records: keeps the errors (called on the producer's thread)."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    def __call__(self, err: BaseException | None, _md: RecordMetadata | None) -> None:
        if err is not None:
            with self._lock:
                self.errors.append(err)

    def raise_first(self) -> None:
        if self.errors:
            raise RuntimeError(f"strom sink: {len(self.errors)} record(s) not delivered; first "
                               f"error: {self.errors[0]!r}") from self.errors[0]


def producer_config(opts: SinkOptions, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": opts.bootstrap, "client.id": "strom-spark-sink",
            **opts.client_config, **extra}


def send_rows(producer: Producer, opts: SinkOptions, batches: Iterator[pa.RecordBatch],
              delivered: DeliveryErrors) -> int:
    """Hand every row of `batches` to `producer`; returns how many (stops early once a
    delivery failed). Delivery is the caller's to wait for."""
    sent = 0
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value") or [None] * n
        keys = _column(batch, "key") or [None] * n
        parts = _column(batch, "partition") or [None] * n
        headers = _column(batch, "headers") or [None] * n
        topics = [opts.topic] * n if opts.topic is not None else _column(batch, "topic")
        assert topics is not None
        send = producer.send
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise ValueError("null topic present in the data. Use the topic option "
                                 "for setting a topic.")
            hs = headers[i]
            send(topic, values[i], key=keys[i], partition=parts[i],
                 headers=[(h["key"], h["value"]) for h in hs] if hs else None,
                 on_delivery=delivered)
        sent += n
        if delivered.errors:
            break
    return sent


def send_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of `batches`; returns how many. Raises the first delivery error."""
    delivered = DeliveryErrors()
    producer = Producer(producer_config(opts))
    try:
        sent = send_rows(producer, opts, batches, delivered)
        producer.flush()
    finally:
        producer.close()
    delivered.raise_first()
    return sent


class StromWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessage:
        return SentMessage(send_batches(self.opts, iterator))


class StromStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessage:
        return SentMessage(send_batches(self.opts, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        pass    # records are visible once acknowledged; nothing to finish

    def abort(self, messages: list, batchId: int) -> None:
        pass    # what was sent stays sent (at least once, as Spark's Kafka sink)
