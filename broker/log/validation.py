"""Checks of an incoming record set, from the 61-byte batch headers only.

`scan_batches` frames the set (lengths, magic 2, CRC-32C over each batch; the CRC runs in
C over the batch bytes, records are never decoded). `validate_leader_batches` adds the
checks Kafka's UnifiedLog.analyzeAndValidateRecords and LogValidator make of a produce
request that can be made on headers:

- batch larger than max.message.bytes         -> MessageTooLargeError (MESSAGE_TOO_LARGE)
- magic 0/1                                   -> UnsupportedForMessageFormatError
- any other magic, a bad length, a truncated
  batch, a CRC mismatch                       -> CorruptMessageError
- from a client: baseOffset != 0, recordsCount <= 0, lastOffsetDelta != recordsCount-1,
  a control batch, a producer id with a negative base sequence -> InvalidRecordError
- CreateTime topics: a timestamp outside [now - message.timestamp.before.max.ms,
  now + message.timestamp.after.max.ms] -> InvalidTimestampError. Kafka checks every
  record; from headers we check the batch's base timestamp (its first record) against the
  lower bound and its max timestamp against the upper bound.
- LogAppendTime topics: a batch already flagged LogAppendTime -> InvalidTimestampError.
A whole record set larger than segment.bytes is RecordListTooLargeError (checked by the
caller, which knows the config).

One check needs the records themselves: a compacted topic (cleanup.policy contains
"compact") refuses a record without a key (`validate_record_keys`, INVALID_RECORD, as
Kafka's LogValidator). It decodes (and decompresses) the batches, as Kafka does for
compacted topics, which never take its in-place fast path either; record sets for
delete-policy topics are never decoded (the produce path stays header-only). Pure functions: safe anywhere.
"""
from __future__ import annotations

import struct

from clients.protocol.batch_header import (HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET,
                                           TIMESTAMP_TYPE_LOG_APPEND, BatchHeader,
                                           compute_crc, read_header)

from clients.protocol.records import iter_batches

from .config import LogConfig
from .errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError,
                     MessageTooLargeError, UnexpectedAppendOffsetError,
                     UnsupportedForMessageFormatError)
from .producer_state import ORIGIN_CLIENT

MAGIC = 2
NO_TIMESTAMP = -1
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_LENGTH = struct.Struct(">i")

Batches = list[tuple[int, BatchHeader]]


def scan_batches(buf: memoryview, allow_partial_tail: bool = False) -> Batches:
    """(position, header) of each batch, framing, magic and CRC checked. A trailing partial
    batch is an error unless `allow_partial_tail` (a fetch response may end with one)."""
    n = len(buf)
    pos = 0
    out: Batches = []
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            if allow_partial_tail:
                break
            raise CorruptMessageError(f"{n - pos} trailing bytes are not a batch")
        length = _LENGTH.unpack_from(buf, pos + 8)[0]
        if n - pos > MAGIC_OFFSET:
            magic = buf[pos + MAGIC_OFFSET]
            if magic in (0, 1):
                raise UnsupportedForMessageFormatError(
                    f"message format v{magic} is not supported (record batches v2 only)")
            if magic != MAGIC:
                raise CorruptMessageError(f"batch at byte {pos} has invalid magic {magic}")
        if length < _MIN_LENGTH:
            raise CorruptMessageError(f"batch at byte {pos} has invalid length {length}")
        total = length + LOG_OVERHEAD
        if pos + total > n:
            if allow_partial_tail:
                break
            raise CorruptMessageError(
                f"batch at byte {pos} declares {total} bytes, only {n - pos} present")
        h = read_header(buf, pos)
        if compute_crc(buf, pos, total) != h.crc:
            raise CorruptMessageError(f"batch at byte {pos}: CRC mismatch (stored {h.crc:#010x})")
        out.append((pos, h))
        pos += total
    return out


def validate_leader_batches(batches: Batches, config: LogConfig, now_ms: int,
                            origin: str = ORIGIN_CLIENT) -> None:
    """Raise the error Kafka would for the first offending batch."""
    if not batches:
        raise InvalidRecordError("the record set contains no batch")
    max_size = config.max_message_bytes
    log_append = config.log_append_time
    lower = now_ms - config.message_timestamp_before_max_ms
    upper = now_ms + config.message_timestamp_after_max_ms
    from_client = origin == ORIGIN_CLIENT
    for _, h in batches:
        if h.total_size > max_size:
            raise MessageTooLargeError(
                f"the record batch is {h.total_size} bytes, larger than max.message.bytes "
                f"{max_size}")
        if h.last_offset_delta < 0:
            raise InvalidRecordError(f"invalid last offset delta {h.last_offset_delta}")
        if from_client:
            if h.base_offset != 0:
                raise InvalidRecordError(f"the batch base offset must be 0, not {h.base_offset}")
            if h.records_count <= 0:
                raise InvalidRecordError(f"invalid record count {h.records_count}")
            if h.last_offset_delta + 1 != h.records_count:
                raise InvalidRecordError(
                    f"last offset delta {h.last_offset_delta} does not match record count "
                    f"{h.records_count}")
            if h.is_control:
                raise InvalidRecordError("clients may not write control batches")
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecordError(
                    f"invalid sequence {h.base_sequence} for producer {h.producer_id}")
        if log_append:
            if h.attributes & TIMESTAMP_TYPE_LOG_APPEND:
                raise InvalidTimestampError("producers may not set the LogAppendTime flag")
        elif h.max_timestamp != NO_TIMESTAMP:
            first = h.base_timestamp
            if (first != NO_TIMESTAMP and first < lower) or h.max_timestamp > upper:
                raise InvalidTimestampError(
                    f"timestamps {h.base_timestamp}..{h.max_timestamp} are out of range "
                    f"[{lower}, {upper}]")


# InvalidRecordError is built by the error table, so mypy cannot see it as a class.
class RecordValidationError(InvalidRecordError):  # type: ignore[valid-type,misc]
    """INVALID_RECORD naming the records at fault (KIP-467, Kafka's
    RecordValidationException): `record_errors` holds (index of the record in the record
    set, why), so a client can tell the bad records from the good ones of the batch, which
    is refused whole."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = record_errors


# Kafka's LogValidator names at most this many record errors in the error message.
_NAMED_IN_MESSAGE = 3


def validate_record_keys(buf: memoryview, batches: Batches, partition: str) -> None:
    """A compacted topic accepts only records with a key (control batches aside); the
    batches were framed and CRC-checked by scan_batches. Every keyless record is named
    (RecordValidationError), as Kafka's LogValidator does."""
    errors: list[tuple[int, str]] = []
    index = 0       # of the record in the record set (Kafka: in its one batch)
    for pos, h in batches:
        if h.is_control:
            index += h.records_count
            continue
        for batch in iter_batches(buf[pos:pos + h.total_size], verify_crc=False):
            for rec in batch.records:
                if rec.key is None:
                    errors.append((index, "Compacted topic cannot accept message without key "
                                          f"in topic partition {partition}."))
                index += 1
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')"
                          for i, m in errors[:_NAMED_IN_MESSAGE])
        raise RecordValidationError(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]", errors)


def validate_follower_batches(batches: Batches, log_end_offset: int) -> None:
    """Offsets of replicated batches: increasing and not below the log end."""
    prev_last = log_end_offset - 1
    for i, (_, h) in enumerate(batches):
        if h.last_offset_delta < 0:
            raise CorruptMessageError(f"invalid last offset delta {h.last_offset_delta}")
        if h.base_offset <= prev_last:
            if i == 0:
                raise UnexpectedAppendOffsetError(
                    f"first offset {h.base_offset} is below the log end offset {log_end_offset}",
                    h.base_offset, batches[-1][1].last_offset)
            raise CorruptMessageError(
                f"batch offsets out of order: {h.base_offset} after {prev_last}")
        prev_last = h.last_offset
