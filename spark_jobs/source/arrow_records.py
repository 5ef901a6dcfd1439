"""Fetched record sets -> Arrow record batches with the Kafka source's schema, column-wise.

`ColumnBuilder` decodes the v2 record batches of a fetch response straight into column
buffers (keys, values, offsets, timestamps[, headers]) instead of one record object per
record: on a 100-byte value the per-record work is a handful of varint reads, two slices
and four appends. Everything else (topic, partition, timestamp type) is constant per batch
and built by Arrow in C. `to_record_batch()` hands the columns over as a
`pyarrow.RecordBatch` whose schema is exactly `arrow_schema(include_headers)`.

Framing, magic, CRC (optional, as `check.crcs`) and decompression reuse
`clients.protocol.records`; malformed records raise its CorruptMessageError. Not thread-safe
(one builder per reading task).
"""
from __future__ import annotations

from array import array
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clients.protocol import compression as _compression
from clients.protocol.batch_header import HEADER_SIZE, TIMESTAMP_TYPE_LOG_APPEND, compute_crc
from clients.protocol.records import CorruptMessageError, _read_uvarint, iter_batch_headers

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
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets = array("q")
        self.timestamps = array("q")       # ms
        self.ts_types = array("i")
        self.header_keys: list[str] = []
        self.header_values: list[bytes | None] = []
        self.header_counts = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    # ------------------------------------------------------------------ decoding

    def add_record_set(self, buf: Any, lo: int, hi: int) -> int:
        """Decode the data records of `buf` (a fetch response's record set) with
        lo <= offset < hi. Returns the offset after the last complete batch (the next fetch
        offset; `lo` when `buf` holds no complete batch). Control batches are skipped."""
        mv = memoryview(buf)
        next_offset = lo
        for pos, h in iter_batch_headers(mv):
            last = h.base_offset + h.last_offset_delta
            if last + 1 > next_offset:
                next_offset = last + 1
            if h.attributes & 0x20 or last < lo or h.base_offset >= hi:   # control / outside
                continue
            total = h.batch_length + 12
            if self.verify_crc:
                crc = compute_crc(mv, pos, total)
                if crc != h.crc:
                    raise CorruptMessageError(f"batch at offset {h.base_offset}: CRC {crc:#010x} "
                                              f"!= stored {h.crc:#010x}")
            section = mv[pos + HEADER_SIZE:pos + total]
            codec = h.attributes & 0x07
            if not section or h.records_count <= 0:
                continue
            data = (_compression.decompress(codec, section, _compression.DEFAULT_MAX_DECOMPRESSED)
                    if codec else bytes(section))
            try:
                self._decode(data, h, lo, hi)
            except (IndexError, UnicodeDecodeError) as e:
                raise CorruptMessageError(
                    f"batch at offset {h.base_offset}: records section is malformed ({e})") from None
        return next_offset

    def _decode(self, data: bytes, h: Any, lo: int, hi: int) -> None:
        base_offset = h.base_offset
        base_ts = h.base_timestamp
        log_append = bool(h.attributes & TIMESTAMP_TYPE_LOG_APPEND)
        count = h.records_count
        # A batch wholly inside [lo, hi) without offset gaps (not compacted): its offsets
        # are base_offset + 0, 1, 2, ... and need not be decoded one by one.
        inside = (base_offset >= lo and base_offset + h.last_offset_delta < hi
                  and count == h.last_offset_delta + 1)
        keys_append = self.keys.append
        values_append = self.values.append
        offsets = self.offsets
        timestamps = self.timestamps
        offsets_append = offsets.append
        timestamps_append = timestamps.append
        n_before = len(offsets)
        read_uv = _read_uvarint
        headers = self.include_headers
        end = len(data)
        pos = 0
        for _ in range(count):
            # Varints of one or two bytes (values below 8192: every length, delta and count
            # of ordinary records) are decoded inline; longer ones by read_uv.
            x = data[pos]
            if x < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                x = (x & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            rec_end = pos + ((x >> 1) ^ -(x & 1))
            if rec_end > end:
                raise CorruptMessageError(f"batch at offset {base_offset}: record overruns the batch")
            pos += 1                                 # attributes, unused
            x = data[pos]
            if x < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                x = (x & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            ts_delta = (x >> 1) ^ -(x & 1)
            x = data[pos]
            if x < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                x = (x & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            offset_delta = x
            x = data[pos]
            if x < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                x = (x & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            if x == 1:
                key = None
            else:
                stop = pos + (x >> 1)
                key = data[pos:stop]
                pos = stop
            x = data[pos]
            if x < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                x = (x & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            if x == 1:
                value = None
            else:
                value = data[pos:pos + (x >> 1)]
            if inside:
                keys_append(key)
                values_append(value)
                timestamps_append(base_ts + ts_delta)
            else:
                offset = base_offset + ((offset_delta >> 1) ^ -(offset_delta & 1))
                if not lo <= offset < hi:
                    pos = rec_end
                    continue
                keys_append(key)
                values_append(value)
                offsets_append(offset)
                timestamps_append(base_ts + ts_delta)
            if headers:
                self._headers(data, pos + (x >> 1) if x != 1 else pos, rec_end, base_offset)
            pos = rec_end
        if inside:
            offsets.extend(range(base_offset, base_offset + count))
        added = len(offsets) - n_before
        if added:
            if log_append:
                timestamps[n_before:] = array("q", [h.max_timestamp]) * added
            self.ts_types.extend(array("i", [1 if log_append else 0]) * added)

    def _headers(self, data: bytes, pos: int, rec_end: int, base_offset: int) -> None:
        x, pos = _read_uvarint(data, pos)
        n = (x >> 1) ^ -(x & 1)
        if n < 0 or n > rec_end - pos:
            raise CorruptMessageError(f"batch at offset {base_offset}: invalid header count {n}")
        self.header_counts.append(n)
        for _ in range(n):
            x, pos = _read_uvarint(data, pos)
            stop = pos + ((x >> 1) ^ -(x & 1))
            if stop < pos or stop > rec_end:
                raise CorruptMessageError(f"batch at offset {base_offset}: invalid header key")
            self.header_keys.append(str(data[pos:stop], "utf-8"))
            x, pos = _read_uvarint(data, stop)
            vlen = (x >> 1) ^ -(x & 1)
            if vlen < 0:
                self.header_values.append(None)
                continue
            self.header_values.append(data[pos:pos + vlen])
            pos += vlen

    # ------------------------------------------------------------------ Arrow

    def to_record_batch(self) -> pa.RecordBatch:
        """The records decoded so far as one RecordBatch; the builder starts empty again."""
        n = len(self.offsets)
        keys = pa.array(self.keys, pa.binary())
        values = pa.array(self.values, pa.binary())
        topic = pa.nulls(n, pa.string()).fill_null(self.topic)
        partition = pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(array("i", [self.partition]) * n)])
        offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)])
        ts_ms = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.timestamps)])
        timestamps = pc.multiply(ts_ms, 1000).cast(_TIMESTAMP)
        ts_types = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.ts_types)])
        columns = [keys, values, topic, partition, offsets, timestamps, ts_types]
        if self.include_headers:
            columns.append(self._headers_array(n))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._reset()
        return batch

    def _headers_array(self, n: int) -> pa.Array:
        list_offsets = array("i", [0]) * (n + 1)
        acc = 0
        for i, c in enumerate(self.header_counts):
            acc += c
            list_offsets[i + 1] = acc
        struct = pa.StructArray.from_arrays(
            [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
            fields=list(HEADERS_TYPE.value_type))
        return pa.ListArray.from_arrays(pa.Array.from_buffers(
            pa.int32(), n + 1, [None, pa.py_buffer(list_offsets)]), struct, type=HEADERS_TYPE)
