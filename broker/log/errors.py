"""The errors the log raises: the protocol's (re-exported, so the log's modules name them
from one place), the storage error of a full disk (LogDirFullError: KAFKA_STORAGE_ERROR on the
wire, but the dir stays online) and the two that never reach the wire."""
from __future__ import annotations

import errno

from clients.protocol.errors import (  # noqa: F401  (re-exported)
    CorruptMessageError, DuplicateSequenceNumberError, InvalidProducerEpochError, InvalidRecordError,
    InvalidTimestampError, InvalidTxnStateError, KafkaError, KafkaStorageErrorError, LogDirNotFoundError,
    MessageTooLargeError,
    OffsetOutOfRangeError, OutOfOrderSequenceNumberError, RecordListTooLargeError,
    TransactionCoordinatorFencedError, UnsupportedForMessageFormatError)

# Kafka's KafkaStorageException (the table's name of code 56 already ends in ERROR).
KafkaStorageError = KafkaStorageErrorError

# A file system out of space (or the user's quota): the one I/O error a log can undo.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


class LogDirFullError(KafkaStorageError):  # type: ignore[valid-type,misc]
    """A write found the log dir's file system full and was undone: the log holds exactly
    what it held before (whole batches, indexes that match), so, unlike any other I/O error,
    the dir stays online; the request is answered KAFKA_STORAGE_ERROR (retriable) and the
    same write succeeds once there is space again. Raised only where a write is known to be
    undone; an out-of-space error anywhere else (an fsync above all: the kernel may have
    dropped the dirty pages) still takes the dir offline."""


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end (Kafka's
    UnexpectedAppendOffsetException): the fetcher truncates and retries. Not a wire error."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class CheckpointError(ValueError):
    """A checkpoint file that cannot be parsed (bad version, count or line)."""
