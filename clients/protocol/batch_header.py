"""The fixed 61-byte header of a RecordBatch (magic v2), read and patched in place.

The broker treats a batch as opaque bytes: it reads this header to validate and index the
batch and patches baseOffset and partitionLeaderEpoch, never touching the records section.

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32
The CRC (CRC-32C) covers everything from `attributes` to the end of the batch.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12          # baseOffset + batchLength: what precedes the length-counted part
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21     # first byte covered by the CRC
PARTITION_LEADER_EPOCH_OFFSET = 12

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

# attributes bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int            # bytes after the length field
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def total_size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    return buf[pos + MAGIC_OFFSET] if len(buf) > pos + MAGIC_OFFSET else -1


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the header at `pos`; the caller checks there are HEADER_SIZE bytes."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, total_size: int) -> int:
    mv = memoryview(buf)
    return crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + total_size])


def crc_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.total_size) == header.crc


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Not covered by the CRC, so patching it keeps the batch valid."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Not covered by the CRC either (KIP-101)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def write_crc(buf: bytearray | memoryview, pos: int, total_size: int) -> None:
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, total_size))


def pack_header(h: BatchHeader) -> bytes:
    return _HEADER.pack(*h)
