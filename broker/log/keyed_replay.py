"""Reading an internal topic's partition back from the start (`__consumer_offsets`,
`__transaction_state`): the keyed records of its data batches, in chunks, so that the
coordinator loading it can yield to the event loop between chunks. `replay_keyed_records`
skips control batches; `replay_with_markers` says which records are transactional and
where each producer's transaction ended (transactional offset commits wait for it)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

from clients.protocol.records import COMMIT, RecordBatch, iter_batches, parse_control_record

from .partition_log import PartitionLog

CHUNK_BYTES = 1 << 20

KeyedRecord = tuple[bytes, bytes | None]


def replay_keyed_records(plog: PartitionLog, chunk_bytes: int = CHUNK_BYTES
                         ) -> Iterator[list[KeyedRecord]]:
    """The log's (key, value) records from its start to its end, in chunks of at most
    `chunk_bytes` of batches (the first batch whole); records without a key are skipped."""
    for offset, batches in _chunks(plog, chunk_bytes):
        yield [(rec.key, rec.value) for batch in batches if not batch.is_control
               for rec in batch.records if rec.offset >= offset and rec.key is not None]


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A keyed record of a transactional batch of `producer_id`."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    commit: bool


def replay_with_markers(plog: PartitionLog, chunk_bytes: int = CHUNK_BYTES
                        ) -> Iterator[list[KeyedRecord | TxnRecord | TxnMarker]]:
    """As replay_keyed_records, with the records of transactional batches as TxnRecord and
    each COMMIT / ABORT marker as a TxnMarker, in log order."""
    for offset, batches in _chunks(plog, chunk_bytes):
        out: list[KeyedRecord | TxnRecord | TxnMarker] = []
        for batch in batches:
            pid = batch.header.producer_id
            if batch.is_control:
                if batch.records and batch.last_offset >= offset:
                    control, _ = parse_control_record(batch.records[0])
                    out.append(TxnMarker(pid, control == COMMIT))
                continue
            for rec in batch.records:
                if rec.offset >= offset and rec.key is not None:
                    out.append(TxnRecord(pid, rec.key, rec.value) if batch.is_transactional
                               else (rec.key, rec.value))
        yield out


def _chunks(plog: PartitionLog, chunk_bytes: int) -> Iterator[tuple[int, list[RecordBatch]]]:
    """(first offset wanted, the decoded batches of one read) up to the log end."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        info = plog.read(offset, chunk_bytes, None, True)
        if not info.size:
            break
        data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
        batches = list(iter_batches(data))
        yield offset, batches
        last = batches[-1].last_offset + 1 if batches else offset
        if last <= offset:
            break
        offset = last
