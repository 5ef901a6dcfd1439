"""Record-exact answers for ListOffsets by time and for the max-timestamp query.

The time index and batch headers narrow a lookup to one batch; Kafka's answer is a record
inside it, so this module decodes that single batch. It is used only by ListOffsets,
never on the produce or fetch path (invariant 6 is about those).
"""
from __future__ import annotations

import os

from clients.protocol.records import iter_batches

from .segment import FileRegion


def read_regions(regions: list[FileRegion]) -> bytes:
    return b"".join(os.pread(r.fileno, r.size, r.position) for r in regions)


def first_at_or_after(batch_bytes: bytes, target_ts: int, min_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record with timestamp >= target_ts and offset >= min_offset."""
    for batch in iter_batches(batch_bytes):
        for rec in batch.records:
            if rec.offset >= min_offset and rec.timestamp >= target_ts:
                return rec.offset, rec.timestamp
    return None


def first_with_timestamp(batch_bytes: bytes, ts: int, min_offset: int) -> int | None:
    """Offset of the first record carrying exactly `ts` (the batch's max timestamp)."""
    for batch in iter_batches(batch_bytes):
        for rec in batch.records:
            if rec.offset >= min_offset and rec.timestamp == ts:
                return rec.offset
    return None
