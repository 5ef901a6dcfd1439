"""read_committed: the data records of a fetched record set without those of aborted
transactions.

Kafka's rule (the consumer's, from the fetch response's aborted transactions list): a
producer id is aborted from its first offset until its ABORT marker; the batches of an
aborted producer's transaction in that span are dropped, control batches never returned.
Sans-io and pure: the consumer's fetcher and the Spark source share it.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from .records import (ABORT, ConsumedRecord, iter_batch_headers, iter_batches,
                      read_control_marker)

__all__ = ["aborted_filter", "aborted_batches"]


def aborted_batches(buf: bytes | bytearray | memoryview,
                    aborted: Iterable[Mapping[str, Any]]) -> set[int]:
    """Positions in `buf` of the data batches of aborted transactions (`aborted`: the
    response's {"producer_id", "first_offset"} entries). Only control batches' records
    are decoded (their marker), without a CRC check."""
    pending = sorted(((a["first_offset"], a["producer_id"]) for a in aborted), reverse=True)
    active: set[int] = set()
    out: set[int] = set()
    for pos, h in iter_batch_headers(buf):
        while pending and pending[-1][0] <= h.last_offset:
            active.add(pending.pop()[1])
        pid = h.producer_id
        if pid not in active:
            continue
        if h.is_control:
            if read_control_marker(buf, pos, h)[0] == ABORT:
                active.discard(pid)
        elif h.is_transactional:
            out.add(pos)
    return out


def aborted_filter(buf: bytes | bytearray | memoryview, from_offset: int,
                   aborted: Iterable[Mapping[str, Any]]) -> list[ConsumedRecord]:
    """The data records of `buf` from `from_offset` on, without those of aborted
    transactions (`aborted`: as aborted_batches')."""
    dropped = aborted_batches(buf, aborted)
    out: list[ConsumedRecord] = []
    for (pos, _), batch in zip(iter_batch_headers(buf), iter_batches(buf)):
        if batch.is_control or pos in dropped:
            continue
        out.extend(r for r in batch.records if r.offset >= from_offset)
    return out
