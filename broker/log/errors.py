"""The protocol errors the log raises, as names a type checker can see.

`clients.protocol.errors` builds its exception classes from a table at import time, so a
static import of e.g. `CorruptMessageError` is invisible to mypy; these aliases are the
same classes (`except errors.CorruptMessageError` and `except CorruptMessageError` agree).
"""
from __future__ import annotations

from clients.protocol.errors import BY_NAME, KafkaError

CorruptMessageError = BY_NAME["CORRUPT_MESSAGE"]
InvalidRecordError = BY_NAME["INVALID_RECORD"]
InvalidTimestampError = BY_NAME["INVALID_TIMESTAMP"]
UnsupportedForMessageFormatError = BY_NAME["UNSUPPORTED_FOR_MESSAGE_FORMAT"]
MessageTooLargeError = BY_NAME["MESSAGE_TOO_LARGE"]
RecordListTooLargeError = BY_NAME["RECORD_LIST_TOO_LARGE"]
OffsetOutOfRangeError = BY_NAME["OFFSET_OUT_OF_RANGE"]
OutOfOrderSequenceNumberError = BY_NAME["OUT_OF_ORDER_SEQUENCE_NUMBER"]
DuplicateSequenceNumberError = BY_NAME["DUPLICATE_SEQUENCE_NUMBER"]
InvalidProducerEpochError = BY_NAME["INVALID_PRODUCER_EPOCH"]
InvalidTxnStateError = BY_NAME["INVALID_TXN_STATE"]
KafkaStorageError = BY_NAME["KAFKA_STORAGE_ERROR"]


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end (Kafka's
    UnexpectedAppendOffsetException): the fetcher truncates and retries. Not a wire error."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class CheckpointError(ValueError):
    """A checkpoint file that cannot be parsed (bad version, count or line)."""
