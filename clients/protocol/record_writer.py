"""Writing one v2 record batch record by record, as Kafka's MemoryRecordsBuilder does.

Sans-io. `BatchWriter.append` encodes each record into the batch's buffer the moment it is
appended, right after a placeholder for the 61-byte header (layout in records.py), so that
a producer keeps no per-record object and closing a batch costs one header and one CRC:
`finish` compresses the records section if asked, writes the header and returns the batch's
bytes. The records section does not depend on the producer id, epoch or sequence, so a
batch re-sequenced after an epoch bump is finished again from the same buffer.

Offsets inside the batch are 0, 1, 2, ... (the broker assigns the base offset); the base
timestamp is the first record's, and later records carry their difference to it.
"""
from __future__ import annotations

import struct

from . import compression as _compression
from .batch_header import (HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL, BatchHeader, pack_header,
                           write_crc)
from .records import MAGIC, _encode_headers, _encode_row

__all__ = ["BatchWriter", "encode_headers"]

_NO_HEADERS = b"\x00"

# A record's headers section, as `BatchWriter.append` takes it (record_rows.py).
encode_headers = _encode_headers


class BatchWriter:
    """The records of one batch, encoded as they are appended; see the module docstring."""

    __slots__ = ("buf", "count", "base_ts", "max_ts")

    def __init__(self) -> None:
        self.buf = bytearray(HEADER_SIZE)
        self.count = 0
        self.base_ts = 0
        self.max_ts = 0

    def append(self, timestamp: int, key: bytes | None, value: bytes | None,
               headers: bytes = _NO_HEADERS) -> None:
        """Encode one record (timestamp in ms; `headers` as `encode_headers` gives them)."""
        n = self.count
        if n:
            if timestamp > self.max_ts:
                self.max_ts = timestamp
            _encode_row(self.buf, n, timestamp - self.base_ts, key, value, headers)
        else:
            self.base_ts = self.max_ts = timestamp
            _encode_row(self.buf, 0, 0, key, value, headers)
        self.count = n + 1

    def finish(self, *, compression: int = 0, compression_level: int | None = None,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               transactional: bool = False, partition_leader_epoch: int = -1) -> bytes:
        """The whole batch (base offset 0, CreateTime): the records section compressed with
        `compression` (a codec id), then the header and CRC written."""
        count = self.count
        if compression != _compression.NONE and count:
            out = bytearray(HEADER_SIZE)
            out += _compression.compress(compression, memoryview(self.buf)[HEADER_SIZE:],
                                         compression_level)
        else:
            out = self.buf
        attributes = compression | (TRANSACTIONAL if transactional else 0)
        total = len(out)
        try:
            out[:HEADER_SIZE] = pack_header(BatchHeader(
                0, total - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0, attributes,
                count - 1 if count else 0, self.base_ts, self.max_ts, producer_id,
                producer_epoch, base_sequence, count))
        except struct.error as e:
            raise ValueError(f"batch field out of range: {e}") from None
        write_crc(out, 0, total)
        return bytes(out)
