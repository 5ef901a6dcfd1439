"""RecordBatch v2 (magic 2) codec: build batches from records, parse batches into records.

Sans-io. The fixed 61-byte header layout lives in batch_header.py; this module adds the
records section (KIP-98):

    Record => length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
              keyLength varint | key | valueLength varint | value |
              headersCount varint | [headerKeyLength varint | headerKey utf-8 |
                                     headerValueLength varint | headerValue]
A length of -1 means null. With a compression codec, the whole records section (everything
after the 61-byte header) is compressed as one stream.

Control batches (transaction markers) have the CONTROL and TRANSACTIONAL attribute bits and
one record whose key is `version int16 | type int16` (ControlRecordType: ABORT=0,
COMMIT=1) and whose value is `version int16 | coordinatorEpoch int32` (EndTransactionMarker).

Parsing is strict: any inconsistency inside a batch (count, lengths, offset deltas, utf-8)
raises CorruptMessageError, never IndexError or struct.error. A trailing partial batch, which
a fetch response may end with, is not an error: iteration just stops there. One record
decoder, `_decode_rows` (record_rows.py, compiled where it can be), holds every check of
the records section; it builds one tuple per record. `RecordCursor` (the consumer) has it
build ConsumerRecords directly, a poll's worth at a time; `iter_batches`/`records_from_fetch`
(the broker, the cleaner) turn its rows into ConsumedRecords and `decode_batch_columns` (the
Spark source's Arrow batches) into RecordColumns.

Everything here is pure functions over immutable inputs, safe to call from any thread,
but a RecordCursor, which belongs to one thread.
"""
from __future__ import annotations

import struct
import sys
import time
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AbstractSet as Set, Iterator, MutableSequence, Sequence

from . import compression as _compression
from . import native
from .batch_header import (CONTROL, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET,
                           TIMESTAMP_TYPE_LOG_APPEND, TRANSACTIONAL, BatchHeader,
                           compute_crc, pack_header, read_header, write_crc)
from .errors import BY_NAME

if TYPE_CHECKING:
    from . import record_rows as _rows
else:
    # Compiled by mypyc where strom was installed with a C compiler (native.py decides).
    _rows = native.load(f"{__package__}.record_rows")
_decode_rows = _rows.decode_rows
_encode_row = _rows.encode_row          # the producer's per-record step
_encode_headers = _rows.encode_headers

CorruptMessageError = BY_NAME["CORRUPT_MESSAGE"]
UnsupportedForMessageFormatError = BY_NAME["UNSUPPORTED_FOR_MESSAGE_FORMAT"]

MAGIC = 2

# ControlRecordType
ABORT = 0
COMMIT = 1

CREATE_TIME = _rows.CREATE_TIME
LOG_APPEND_TIME = _rows.LOG_APPEND_TIME

# Smallest length field any message format can have (legacy v0 record overhead, as Java's
# log input stream checks) and the smallest of a v2 batch (its header minus LOG_OVERHEAD).
_MIN_ANY_LENGTH = 14
_MIN_V2_LENGTH = HEADER_SIZE - LOG_OVERHEAD

_INT32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


@dataclass(slots=True)
class Record:
    """A record to produce. `timestamp` (ms) None means the batch's timestamp (now)."""

    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


@dataclass(slots=True)
class ConsumedRecord:
    """A record read from a batch, with the batch-level facts a consumer needs."""

    offset: int
    timestamp: int
    timestamp_type: int            # 0 create time, 1 log append time
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = -1         # the batch's partitionLeaderEpoch
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1             # baseSequence + offsetDelta, -1 when not idempotent


@dataclass(slots=True)
class RecordColumns:
    """Decoded records field by field, entry i of every column from the same record: the
    shape a columnar reader (Arrow) wants. `decode_batch_columns` appends to them. With
    `headers` None the headers are checked but not kept."""

    # Lists or array("q")s (an Arrow buffer without a copy).
    offsets: MutableSequence[int] = field(default_factory=list)
    timestamps: MutableSequence[int] = field(default_factory=list)   # ms, as ConsumedRecord's
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]]] | None = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


@dataclass(slots=True)
class RecordBatch:
    """One parsed batch. For a control batch, `records` holds its control records."""

    header: BatchHeader
    records: list[ConsumedRecord]

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.last_offset + 1

    @property
    def size(self) -> int:
        """Bytes the batch takes on the wire / in the log."""
        return self.header.total_size

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.header.attributes & TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def records_count(self) -> int:
        return self.header.records_count


# ---------------------------------------------------------------------------------------------
# building

def build_batch(records: Sequence[Record], *, base_offset: int = 0, compression: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                is_transactional: bool = False, partition_leader_epoch: int = -1,
                timestamp_type: int = CREATE_TIME, now_ms: int | None = None,
                compression_level: int | None = None) -> bytes:
    """Encode `records` as one v2 batch with offsets base_offset, base_offset + 1, ...

    The batch's base timestamp is the first record's; records without a timestamp get
    `now_ms` (default: the current time). With timestamp_type LOG_APPEND_TIME the batch's
    max timestamp is `now_ms`, which readers then report for every record. An empty
    `records` gives a batch with recordsCount 0 and an empty records section (the shape
    log compaction leaves behind).
    """
    attributes = 0
    if is_transactional:
        attributes |= TRANSACTIONAL
    return _build(records, base_offset, compression, producer_id, producer_epoch,
                  base_sequence, attributes, partition_leader_epoch, timestamp_type, now_ms,
                  compression_level)


def build_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int = 0, base_offset: int = 0,
                        timestamp_ms: int | None = None,
                        partition_leader_epoch: int = -1) -> bytes:
    """A transaction marker batch: COMMIT (1) or ABORT (0), as the broker writes them."""
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return _build([Record(key, value, [], timestamp_ms)], base_offset, _compression.NONE,
                  producer_id, producer_epoch, -1, TRANSACTIONAL | CONTROL,
                  partition_leader_epoch, CREATE_TIME, timestamp_ms, None)


def append_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> None:
    """Append one length-prefixed record (DefaultRecord) to `out`. Shared by the batch
    builder and the log cleaner, which re-encodes kept records with their offset gaps."""
    _encode_row(out, offset_delta, timestamp_delta, key, value, _encode_headers(headers))


def _build(records: Sequence[Record], base_offset: int, codec: int, producer_id: int,
           producer_epoch: int, base_sequence: int, attributes: int,
           partition_leader_epoch: int, timestamp_type: int, now_ms: int | None,
           level: int | None) -> bytes:
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"invalid timestamp type {timestamp_type}")
    if not 0 <= codec < len(_compression.CODEC_NAMES):
        raise _compression.UnsupportedCompressionTypeError(f"unknown compression type id {codec}")
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    attributes |= codec
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_LOG_APPEND

    count = len(records)
    first_ts = records[0].timestamp if count else None
    base_ts = now_ms if first_ts is None else first_ts
    max_ts = base_ts

    # Records are encoded right after a placeholder header so that an uncompressed batch
    # is built in one buffer without a copy.
    out = bytearray(HEADER_SIZE)
    for i, r in enumerate(records):
        ts = r.timestamp
        if ts is None:
            ts = now_ms
        if ts > max_ts:
            max_ts = ts
        append_record(out, i, ts - base_ts, r.key, r.value, r.headers)

    if timestamp_type == LOG_APPEND_TIME:
        max_ts = now_ms
    if codec != _compression.NONE and count:
        section = _compression.compress(codec, memoryview(out)[HEADER_SIZE:], level)
        out = bytearray(HEADER_SIZE)
        out += section
    total = len(out)
    try:
        out[:HEADER_SIZE] = pack_header(BatchHeader(
            base_offset, total - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0, attributes,
            count - 1 if count else 0, base_ts, max_ts, producer_id, producer_epoch,
            base_sequence, count))
    except struct.error as e:
        raise ValueError(f"batch field out of range: {e}") from None
    write_crc(out, 0, total)
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# parsing

def _scan(mv: memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch; validates framing and magic only."""
    n = len(mv)
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        length = _INT32.unpack_from(mv, pos + 8)[0]
        if length < _MIN_ANY_LENGTH:
            raise CorruptMessageError(f"batch at {pos} has invalid length {length}")
        if n - pos < length + LOG_OVERHEAD:
            return                                   # trailing partial batch
        magic = mv[pos + MAGIC_OFFSET]
        if magic != MAGIC:
            if magic in (0, 1):
                raise UnsupportedForMessageFormatError(
                    f"message format v{magic} at {pos} is not supported (only v2)")
            raise CorruptMessageError(f"batch at {pos} has invalid magic {magic}")
        if length < _MIN_V2_LENGTH:
            raise CorruptMessageError(f"batch at {pos} has length {length} < {_MIN_V2_LENGTH}")
        yield pos, read_header(mv, pos)
        pos += length + LOG_OVERHEAD


def iter_batch_headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in `buf`, records not decoded, CRC not
    checked; stops at a trailing partial batch. Magic 0/1 raises
    UnsupportedForMessageFormatError, a nonsensical length or magic CorruptMessageError."""
    return _scan(memoryview(buf))


def iter_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True,
                 max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED
                 ) -> Iterator[RecordBatch]:
    """Parse consecutive batches in `buf`, decompressing and decoding their records.

    A trailing partial batch is ignored. Magic 0/1 raises UnsupportedForMessageFormatError;
    a CRC mismatch (when verify_crc) or any inconsistency CorruptMessageError.
    """
    mv = memoryview(buf)
    for pos, header in _scan(mv):
        yield RecordBatch(header, _decode(mv, pos, header, verify_crc, max_decompressed))


def records_from_fetch(buf: bytes | bytearray | memoryview, *, from_offset: int = 0,
                       verify_crc: bool = True) -> Iterator[ConsumedRecord]:
    """The data records of a fetch response's record set with offset >= from_offset.

    Control batches and batches wholly below from_offset are skipped without decoding (a
    fetch that starts inside a batch returns the whole batch).
    """
    mv = memoryview(buf)
    for pos, header in _scan(mv):
        if header.is_control or header.base_offset + header.last_offset_delta < from_offset:
            continue
        records = _decode(mv, pos, header, verify_crc, _compression.DEFAULT_MAX_DECOMPRESSED)
        if records and records[0].offset < from_offset:
            yield from (r for r in records if r.offset >= from_offset)
        else:
            yield from records


# The shape of a consumer's record (clients.types.ConsumerRecord, whose fields are these):
# RecordCursor builds each one with tuple.__new__(row_type, (...)) in this order, the
# cheapest construction of a NamedTuple (no __new__ frame, no intermediate record object).
# A record without headers gets one shared empty tuple: no list per record.
ROW_FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
              "headers", "leader_epoch", "serialized_key_size", "serialized_value_size")


def fetch_batches(buf: bytes | bytearray | memoryview, from_offset: int = 0
                  ) -> tuple[list[tuple[int, BatchHeader]], int]:
    """(position, header) of the complete batches of a fetch response's record set that
    hold offsets >= from_offset, control batches included, and the offset after the last
    complete batch (where the next fetch continues; never below from_offset). Records are
    not decoded, CRCs not checked."""
    batches = []
    next_offset = from_offset
    for pos, h in _scan(memoryview(buf)):
        end_offset = h.base_offset + h.last_offset_delta + 1
        if end_offset > from_offset:
            batches.append((pos, h))
            if end_offset > next_offset:
                next_offset = end_offset
    return batches, next_offset


class RecordCursor:
    """The data records of a fetch response's record set from `from_offset` on, decoded as
    they are taken: take(n) decodes the next n at most.

    A consumer takes a poll()'s worth at a time, so the records it builds live from one
    poll() to the next instead of from the fetch to the last poll() of its records: the
    garbage collector meets them rarely (a record is a tracked object) and memory holds
    the fetched bytes rather than their records. Rows are ROW_FIELDS tuples of `row_type`
    (serialized sizes: the wire lengths, -1 for null). `batches` are fetch_batches'; control
    batches among them and those at a position in `skip` (an aborted transaction's) are
    passed over, after their CRC is checked when verify_crc. take() raises
    CorruptMessageError at the first bad batch or record (rows taken before stay valid);
    the cursor is then unusable. Single-threaded, as its caller."""

    __slots__ = ("_mv", "_batches", "_next", "_row_type", "_topic", "_partition", "_from",
                 "_verify_crc", "_skip", "_data", "_h", "_pos", "_index", "_prev_delta", "_done")

    def __init__(self, buf: bytes | bytearray | memoryview,
                 batches: Sequence[tuple[int, BatchHeader]], row_type: type[tuple],
                 topic: str, partition: int, *, from_offset: int = 0, verify_crc: bool = True,
                 skip: Set[int] = frozenset()):
        self._mv = memoryview(buf)
        self._batches = batches
        self._next = 0                    # index in _batches of the next batch to open
        self._row_type = row_type
        self._topic = topic
        self._partition = partition
        self._from = from_offset
        self._verify_crc = verify_crc
        self._skip = skip
        self._data = b""                  # records section of the open batch
        self._h: BatchHeader | None = None
        self._pos = 0                     # in _data: the next record
        self._index = 0                   # the next record's index in the batch
        self._prev_delta = -1
        self._done = False

    @property
    def done(self) -> bool:
        """take() has met the end (a cursor whose last take() returned exactly what was
        left finds out on the next one)."""
        return self._done

    def take(self, n: int) -> list:
        """Up to n more records (fewer only at the end)."""
        out: list = []
        while len(out) < n:
            h = self._h
            if h is None or self._index >= h.records_count:
                if not self._open():
                    break
                continue
            h = self._h
            assert h is not None
            start = len(out)
            stop = min(h.records_count, self._index + n - start)
            self._pos, self._prev_delta = _decode_rows(
                self._data, h, self._pos, self._index, stop, self._prev_delta, out,
                self._row_type, self._topic, self._partition)
            self._index = stop
            if h.base_offset < self._from:
                # A fetch starting inside a batch gets all of it: drop what precedes it.
                skip = start
                while skip < len(out) and out[skip][2] < self._from:
                    skip += 1
                del out[start:skip]
        return out

    def _open(self) -> bool:
        """Open the next batch with records to decode; False at the end."""
        batches = self._batches
        while self._next < len(batches):
            pos, h = batches[self._next]
            self._next += 1
            if h.attributes & CONTROL or pos in self._skip:
                if self._verify_crc:
                    _check_crc(self._mv, pos, h)
                continue
            self._data = _records_section(self._mv, pos, h, self._verify_crc,
                                          _compression.DEFAULT_MAX_DECOMPRESSED)
            self._h = h
            self._pos = 0
            self._index = 0
            self._prev_delta = -1
            return True
        self._h = None
        self._done = True
        return False


def fetch_rows(buf: bytes | bytearray | memoryview, row_type: type[tuple], topic: str,
               partition: int, *, from_offset: int = 0, verify_crc: bool = True
               ) -> tuple[list, int]:
    """RecordCursor's rows all at once, and fetch_batches' next offset."""
    batches, next_offset = fetch_batches(buf, from_offset)
    cursor = RecordCursor(buf, batches, row_type, topic, partition, from_offset=from_offset,
                          verify_crc=verify_crc)
    return cursor.take(sys.maxsize), next_offset


def parse_control_record(rec: ConsumedRecord) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control record; epoch -1 for types other
    than ABORT/COMMIT, whose values are not end-transaction markers."""
    key = rec.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptMessageError("control record key shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptMessageError(f"invalid control record key version {version}")
    if ctype not in (ABORT, COMMIT):
        return ctype, -1
    value = rec.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptMessageError("end transaction marker value shorter than 6 bytes")
    vversion, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if vversion < 0:
        raise CorruptMessageError(f"invalid end transaction marker version {vversion}")
    return ctype, coordinator_epoch


def read_control_marker(buf: bytes | bytearray | memoryview, pos: int,
                        header: BatchHeader) -> tuple[int, int]:
    """(control type, coordinator epoch) of the control batch at `pos` (its one record)."""
    records = _decode(memoryview(buf), pos, header, False, _compression.DEFAULT_MAX_DECOMPRESSED)
    if not records:
        raise CorruptMessageError(f"control batch at offset {header.base_offset} has no record")
    return parse_control_record(records[0])


def decode_batch_columns(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader,
                         columns: RecordColumns, *, verify_crc: bool = True,
                         max_decompressed: int = _compression.DEFAULT_MAX_DECOMPRESSED) -> None:
    """Append the records of the batch at `pos` of `buf` (its header as iter_batch_headers
    gives it) to `columns`, one entry per record in each column.

    The checks are iter_batches' (CRC when verify_crc, the decompressed size, every count,
    length and offset delta, utf-8 header keys): CorruptMessageError, and the columns are
    left as they were. A control batch decodes like any other."""
    rows = _batch_rows(memoryview(buf), pos, header, verify_crc, max_decompressed)
    if not rows:
        return
    _, _, offsets, timestamps, _, keys, values, headers, _, _, _ = zip(*rows)
    _extend(columns.offsets, offsets)
    _extend(columns.timestamps, timestamps)
    columns.keys.extend(keys)
    columns.values.extend(values)
    if columns.headers is not None:                     # a list each, as ConsumedRecord's
        columns.headers.extend([hs or [] for hs in headers])


def _extend(column: MutableSequence[int], values: tuple[int, ...]) -> None:
    # An array takes an array's ints about twice as fast as a tuple's.
    column.extend(array(column.typecode, values) if isinstance(column, array) else values)


def _decode(mv: memoryview, pos: int, h: BatchHeader, verify_crc: bool,
            limit: int) -> list[ConsumedRecord]:
    """The records of the batch at `pos` as ConsumedRecords: the decoder's rows with the
    batch's producer facts."""
    rows = _batch_rows(mv, pos, h, verify_crc, limit)
    pid = h.producer_id
    pepoch = h.producer_epoch
    # A record without headers has the shared () in its row, and a list of its own here.
    if h.base_sequence < 0:
        return [ConsumedRecord(o, t, tt, k, v, hs or [], e, pid, pepoch, -1)
                for _, _, o, t, tt, k, v, hs, e, _, _ in rows]
    first_seq = h.base_sequence - h.base_offset          # + offset: the record's sequence
    return [ConsumedRecord(o, t, tt, k, v, hs or [], e, pid, pepoch,
                           (first_seq + o) & 0x7FFFFFFF)
            for _, _, o, t, tt, k, v, hs, e, _, _ in rows]


def _batch_rows(mv: memoryview, pos: int, h: BatchHeader, verify_crc: bool,
                limit: int) -> list[tuple]:
    """All records of the batch at `pos` as plain ROW_FIELDS tuples (no topic: "", -1)."""
    data = _records_section(mv, pos, h, verify_crc, limit)
    rows: list[tuple] = []
    _decode_rows(data, h, 0, 0, h.records_count, -1, rows, tuple, "", -1)
    return rows


def _check_crc(mv: memoryview, pos: int, h: BatchHeader) -> None:
    crc = compute_crc(mv, pos, h.total_size)
    if crc != h.crc:
        raise CorruptMessageError(
            f"batch at offset {h.base_offset}: CRC {crc:#010x} != stored {h.crc:#010x}")


def _records_section(mv: memoryview, pos: int, h: BatchHeader, verify_crc: bool,
                     limit: int) -> bytes:
    """The batch's records section, CRC-checked and decompressed, its size checked against
    the header's counts (a record takes at least one byte, an empty batch none)."""
    if verify_crc:
        _check_crc(mv, pos, h)
    count = h.records_count
    if count < 0 or h.last_offset_delta < 0:
        raise CorruptMessageError(
            f"batch at offset {h.base_offset}: records count {count}, "
            f"last offset delta {h.last_offset_delta}")
    section = mv[pos + HEADER_SIZE:pos + h.total_size]
    if not section:
        data = b""
    elif h.attributes & 0x07:
        data = _compression.decompress(h.attributes & 0x07, section, limit)
    else:
        data = bytes(section)
    size = len(data)
    if count > size:
        raise CorruptMessageError(
            f"batch at offset {h.base_offset} claims {count} records in {size} bytes")
    if not count and size:
        raise CorruptMessageError(
            f"batch at offset {h.base_offset}: {size} bytes left after 0 records")
    return data
