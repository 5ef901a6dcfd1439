"""read_committed: the data records of a fetched record set without those of aborted
transactions.

Kafka's rule (the consumer's, from the fetch response's aborted transactions list): a
producer id is aborted from its first offset until its ABORT marker; the batches of an
aborted producer's transaction in that span are dropped, control batches never returned.
Sans-io and pure: the consumer's fetcher and the Spark source share it.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from .records import ABORT, ConsumedRecord, iter_batches, parse_control_record

__all__ = ["aborted_filter"]


def aborted_filter(buf: bytes | bytearray | memoryview, from_offset: int,
                   aborted: Iterable[Mapping[str, Any]]) -> list[ConsumedRecord]:
    """The data records of `buf` from `from_offset` on, without those of aborted
    transactions (`aborted`: the response's {"producer_id", "first_offset"} entries)."""
    pending = sorted(((a["first_offset"], a["producer_id"]) for a in aborted), reverse=True)
    active: set[int] = set()
    out: list[ConsumedRecord] = []
    for batch in iter_batches(buf):
        while pending and pending[-1][0] <= batch.last_offset:
            active.add(pending.pop()[1])
        pid = batch.header.producer_id
        if batch.is_control:
            if pid in active and batch.records and parse_control_record(batch.records[0])[0] == ABORT:
                active.discard(pid)
            continue
        if batch.is_transactional and pid in active:
            continue
        out.extend(r for r in batch.records if r.offset >= from_offset)
    return out
