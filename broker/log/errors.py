"""The errors the log raises: the protocol's (re-exported, so the log's modules name them
from one place) and the two that never reach the wire."""
from __future__ import annotations

from clients.protocol.errors import (  # noqa: F401  (re-exported)
    CorruptMessageError, DuplicateSequenceNumberError, InvalidProducerEpochError, InvalidRecordError,
    InvalidTimestampError, InvalidTxnStateError, KafkaError, KafkaStorageErrorError, LogDirNotFoundError,
    MessageTooLargeError,
    OffsetOutOfRangeError, OutOfOrderSequenceNumberError, RecordListTooLargeError,
    TransactionCoordinatorFencedError, UnsupportedForMessageFormatError)

# Kafka's KafkaStorageException (the table's name of code 56 already ends in ERROR).
KafkaStorageError = KafkaStorageErrorError


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end (Kafka's
    UnexpectedAppendOffsetException): the fetcher truncates and retries. Not a wire error."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class CheckpointError(ValueError):
    """A checkpoint file that cannot be parsed (bad version, count or line)."""
