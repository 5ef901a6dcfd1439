"""Fetched record sets -> Arrow record batches with the Kafka source's schema, column-wise.

`ColumnBuilder` decodes the v2 record batches of a fetch response straight into column
buffers (keys, values, offsets, timestamps[, headers]) with the clients' record decoder
(`clients.protocol.records.decode_batch_columns`: the broker's and the consumer's, with
the same checks), instead of one record object per record. Everything else (topic,
partition, timestamp type) is constant per batch and built by Arrow in C.
`to_record_batch()` hands the columns over as a `pyarrow.RecordBatch` whose schema is
exactly `arrow_schema(include_headers)`.

CRC checks are optional (`check.crcs`); malformed records raise CorruptMessageError. Not
thread-safe (one builder per reading task).
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import accumulate, chain
from typing import Any, Iterable, MutableSequence

import pyarrow as pa
import pyarrow.compute as pc

from clients.protocol.batch_header import TIMESTAMP_TYPE_LOG_APPEND
from clients.protocol.records import (CREATE_TIME, LOG_APPEND_TIME, ConsumedRecord, RecordColumns,
                                      decode_batch_columns, iter_batch_headers)

__all__ = ["ColumnBuilder", "arrow_schema", "spark_schema_ddl", "HEADERS_TYPE"]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()),
                                   pa.field("value", pa.binary())]))
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def spark_schema_ddl(include_headers: bool) -> str:
    """The Kafka source's row schema, as Spark DDL."""
    ddl = ("key binary, value binary, topic string, partition int, offset long, "
           "timestamp timestamp, timestampType int")
    return ddl + (", headers array<struct<key: string, value: binary>>" if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for `spark_schema_ddl` (nullable everywhere, timestamps
    in UTC microseconds)."""
    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
              pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
              pa.field("offset", pa.int64()), pa.field("timestamp", _TIMESTAMP),
              pa.field("timestampType", pa.int32())]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


class ColumnBuilder:
    """Columns of the records of one topic-partition, appended fetch by fetch."""

    def __init__(self, topic: str, partition: int, include_headers: bool = False,
                 verify_crc: bool = True):
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.verify_crc = verify_crc
        self.schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.columns = RecordColumns(array("q"), array("q"), [], [],
                                     [] if self.include_headers else None)
        self.ts_types = array("i")

    def __len__(self) -> int:
        return len(self.columns.offsets)

    # ------------------------------------------------------------------ decoding

    def add_record_set(self, buf: bytes | bytearray | memoryview, lo: int, hi: int) -> int:
        """Decode the data records of `buf` (a fetch response's record set) with
        lo <= offset < hi. Returns the offset after the last complete batch (the next fetch
        offset; `lo` when `buf` holds no complete batch). Control batches are skipped."""
        mv = memoryview(buf)
        cols = self.columns
        offsets = cols.offsets
        next_offset = lo
        for pos, h in iter_batch_headers(mv):
            last = h.base_offset + h.last_offset_delta
            if last + 1 > next_offset:
                next_offset = last + 1
            if h.is_control or last < lo or h.base_offset >= hi:
                continue
            n_before = len(offsets)
            decode_batch_columns(mv, pos, h, cols, verify_crc=self.verify_crc)
            if h.base_offset < lo or last >= hi:
                self._keep_range(n_before, lo, hi)
            added = len(offsets) - n_before
            if added:
                ts_type = LOG_APPEND_TIME if h.attributes & TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
                self.ts_types.extend(array("i", [ts_type]) * added)
        return next_offset

    def _keep_range(self, start: int, lo: int, hi: int) -> None:
        """Drop the records from index `start` on whose offsets are outside [lo, hi): the
        offsets of one batch increase, so those kept are one slice."""
        cols = self.columns
        first = bisect_left(cols.offsets, lo, start)
        stop = bisect_left(cols.offsets, hi, first)
        columns: list[MutableSequence[Any]] = [cols.offsets, cols.timestamps, cols.keys,
                                                cols.values]
        if cols.headers is not None:
            columns.append(cols.headers)
        for column in columns:
            del column[stop:]
            del column[start:first]

    def add_records(self, records: Iterable[ConsumedRecord]) -> None:
        """Append records decoded elsewhere (read_committed's filtered records)."""
        cols = self.columns
        for r in records:
            cols.offsets.append(r.offset)
            cols.timestamps.append(r.timestamp)
            cols.keys.append(r.key)
            cols.values.append(r.value)
            if cols.headers is not None:
                cols.headers.append(r.headers)
            self.ts_types.append(r.timestamp_type)

    # ------------------------------------------------------------------ Arrow

    def to_record_batch(self) -> pa.RecordBatch:
        """The records decoded so far as one RecordBatch; the builder starts empty again."""
        cols = self.columns
        n = len(cols.offsets)
        keys = pa.array(cols.keys, pa.binary())
        values = pa.array(cols.values, pa.binary())
        topic = pa.nulls(n, pa.string()).fill_null(self.topic)
        partition = pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(array("i", [self.partition]) * n)])
        offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)])
        ts_ms = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.timestamps)])
        timestamps = pc.multiply(ts_ms, 1000).cast(_TIMESTAMP)
        ts_types = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.ts_types)])
        columns = [keys, values, topic, partition, offsets, timestamps, ts_types]
        if cols.headers is not None:
            columns.append(_headers_array(cols.headers))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch


def _headers_array(headers: list[list[tuple[str, bytes | None]]]) -> pa.Array:
    """Each record's [(key, value), ...] as Arrow's list<struct<key, value>>, flattened by
    C-level iteration (converting the tuples one by one costs half as much again)."""
    flat = list(chain.from_iterable(headers))
    keys = pa.array([k for k, _ in flat], pa.string())
    values = pa.array([v for _, v in flat], pa.binary())
    list_offsets = array("i", accumulate(map(len, headers), initial=0))
    struct = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    return pa.ListArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(headers) + 1, [None, pa.py_buffer(list_offsets)]),
        struct, type=HEADERS_TYPE)
