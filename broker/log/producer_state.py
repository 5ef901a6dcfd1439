"""Idempotent / transactional producer state of one partition, from batch headers only.

For every producer id the partition keeps its epoch, the metadata (sequence range, offset
range, timestamp) of its last 5 batches, and the first offset of its open transaction.
A leader append is checked against it before offsets are final (`prepare`), and applied
after the bytes are written (`commit`), so a rejected request changes nothing.

Rules (Kafka 3.x ProducerAppendInfo / ProducerStateEntry, origin = client):
- a batch whose epoch is older than the producer's -> InvalidProducerEpochError;
- a batch with the producer's current epoch and exactly the sequence range of one of its
  last 5 batches is a duplicate: nothing is appended and the caller answers with the
  ORIGINAL offsets (a record set of several batches containing a duplicate raises
  DuplicateSequenceNumberError instead; Kafka never sees that case, its produce path
  accepts one batch per partition);
- a new (higher) epoch must start at sequence 0, else OutOfOrderSequenceNumberError;
- with the same epoch the first sequence must be last sequence + 1 (wrapping after
  2^31-1), else OutOfOrderSequenceNumberError;
- a producer id the partition has no state for (never seen, or expired after
  producer.id.expiration.ms) is accepted at ANY sequence. This is what Kafka does since
  KIP-360 (2.5): it no longer answers UNKNOWN_PRODUCER_ID, the state is created; nor does
  it forget a producer when the log start moves past all of its batches.
Replicated batches (and batches replayed while rebuilding) are applied without checks.
Control batches (transaction markers) end the producer's open transaction; the caller reads
the marker (commit or abort, coordinator epoch) from its record and passes it in. A marker
from an older coordinator epoch than the producer's last is refused
(TRANSACTION_COORDINATOR_FENCED). Each ended transaction comes back as a CompletedTxn (the
log indexes the aborted ones) and stays "unreplicated" until the high watermark passes its
marker: until then it holds the last stable offset back, as an open one does (Kafka's
unreplicatedTxns), so read_committed consumers never read data whose marker could still be
lost with a leader.

Survives restarts through `<offset>.snapshot` files in the partition dir (this project's
JSON format, Kafka's file names): one is taken at every segment roll and on close; on
open, the newest snapshot at or below the log end is loaded and the batch headers after
it are replayed (PartitionLog does the replay).

Event-loop thread only. `take_snapshot` / `load_latest_snapshot` / `delete_snapshots_*` do
blocking file I/O; everything else is in memory. With `fsync_later`, a snapshot is written
on the caller's thread and fsynced by that callback (Kafka flushes producer snapshots on
its scheduler, not on the request path): a crash before the fsync can leave it unreadable,
and opening then discards it and replays the log from an older one.
"""
from __future__ import annotations

import json
import logging
import os
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from clients.protocol.batch_header import BatchHeader
from clients.protocol.records import ABORT, COMMIT

from .checkpoints import atomic_write
from .checkpoints import fsync_file as _fsync
from .errors import (CorruptMessageError, DuplicateSequenceNumberError, InvalidProducerEpochError,
                     InvalidTxnStateError, OutOfOrderSequenceNumberError,
                     TransactionCoordinatorFencedError)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"

SNAPSHOT_SUFFIX = ".snapshot"


def snapshot_file_name(offset: int) -> str:
    """The name of the producer state snapshot taken at `offset`."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"
_SNAPSHOT_VERSION = 1

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = -1,
                 current_txn_first_offset: int | None = None,
                 batches: Iterable[BatchMetadata] = ()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(batches, NUM_BATCHES_TO_RETAIN)

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset, self.batches)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        self.maybe_update_epoch(epoch)
        self.batches.append(batch)          # the deque drops the oldest beyond 5
        self.last_timestamp = batch.timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: from its first data offset to the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


# (control type, coordinator epoch) of each control batch of an append, by its first offset.
Markers = dict[int, tuple[int, int]]


@dataclass(slots=True)
class ProducerAppend:
    """The checked, not yet applied effect of one append on the producer state."""

    updates: dict[int, ProducerStateEntry] = field(default_factory=dict)
    duplicate: BatchMetadata | None = None
    completed: list[CompletedTxn] = field(default_factory=list)


def _end_txn(entry: ProducerStateEntry, h: BatchHeader, offset: int, timestamp: int,
             marker: tuple[int, int], check: bool) -> CompletedTxn | None:
    """Apply the marker batch `h` at `offset` to `entry`; the transaction it ended (None
    for control records that are not COMMIT/ABORT)."""
    control_type, coordinator_epoch = marker
    entry.maybe_update_epoch(h.producer_epoch)
    entry.last_timestamp = timestamp
    if control_type not in (ABORT, COMMIT):
        return None
    if check and coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"producer {entry.producer_id}: marker from coordinator epoch {coordinator_epoch}, "
            f"older than {entry.coordinator_epoch}")
    first = entry.current_txn_first_offset
    entry.current_txn_first_offset = None
    entry.coordinator_epoch = coordinator_epoch
    return CompletedTxn(entry.producer_id, offset if first is None else first, offset,
                        control_type == ABORT)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self, dir: str | None, fsync_later: Callable[[str], None] | None = None):
        self.dir = dir
        self.fsync_later = fsync_later
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0          # the log offset the state is up to date with
        self._ongoing: dict[int, int] = {}   # producer id -> first offset of its open txn
        # Ended transactions whose marker is not below the high watermark yet:
        # first offset -> marker offset.
        self._unreplicated: dict[int, int] = {}

    # ----------------------------------------------------------------- leader appends
    def prepare(self, batches: Sequence[tuple[BatchHeader, int, int]],
                origin: str = ORIGIN_CLIENT, markers: Markers | None = None) -> ProducerAppend:
        """Check `batches` ((header, first offset it will get, max timestamp it will have))
        against the state. Raises on a violation; returns the updates, or the original
        batch if the (single) batch is a duplicate. `markers`: what each control batch
        says, by the first offset it will get."""
        result = ProducerAppend()
        updates = result.updates
        for h, first_offset, timestamp in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            current = self.producers.get(pid)
            if origin == ORIGIN_CLIENT and current is not None and not h.is_control:
                dup = current.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
                if dup is not None:
                    if len(batches) == 1:
                        result.duplicate = dup
                        result.updates = {}
                        return result
                    raise DuplicateSequenceNumberError(
                        f"producer {pid}: batch with sequences {h.base_sequence}.."
                        f"{h.last_sequence} is a duplicate inside a multi-batch append")
            entry = updates.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updates[pid] = entry
            if h.producer_epoch < entry.producer_epoch and origin != ORIGIN_REPLICATION:
                raise InvalidProducerEpochError(
                    f"producer {pid} at offset {first_offset}: epoch {h.producer_epoch} is "
                    f"older than the last seen epoch {entry.producer_epoch}")
            if h.is_control:
                marker = (markers or {}).get(first_offset)
                if marker is None:
                    raise CorruptMessageError(f"producer {pid}: control batch at offset "
                                              f"{first_offset} without its marker")
                done = _end_txn(entry, h, first_offset, timestamp, marker, check=True)
                if done is not None:
                    result.completed.append(done)
                continue
            if origin == ORIGIN_CLIENT:
                self._check_sequence(current, entry, h, first_offset)
            entry.add_batch(h.producer_epoch, BatchMetadata(
                h.base_sequence, h.last_sequence, first_offset,
                first_offset + h.last_offset_delta, timestamp))
            if entry.current_txn_first_offset is not None and not h.is_transactional:
                raise InvalidTxnStateError(
                    f"producer {pid}: non-transactional batch at offset {first_offset} "
                    f"while a transaction is open")
            if entry.current_txn_first_offset is None and h.is_transactional:
                entry.current_txn_first_offset = first_offset
        return result

    @staticmethod
    def _check_sequence(current: ProducerStateEntry | None, staged: ProducerStateEntry,
                        h: BatchHeader, first_offset: int) -> None:
        epoch = h.producer_epoch
        first_seq = h.base_sequence
        if epoch != staged.producer_epoch:
            if first_seq != 0 and staged.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"producer {h.producer_id} at offset {first_offset}: new epoch {epoch} "
                    f"must start at sequence 0, not {first_seq} (current epoch "
                    f"{staged.producer_epoch})")
            return
        current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
        if current_epoch == NO_PRODUCER_EPOCH:
            return                           # no state: any sequence (KIP-360)
        last_seq = staged.last_seq
        if not _in_sequence(last_seq, first_seq):
            # What the broker remembers, so that a desynchronised producer can be diagnosed
            # from the broker log alone.
            known = ", ".join(f"{b.first_seq}..{b.last_seq} at {b.first_offset}" for b in staged.batches)
            raise OutOfOrderSequenceNumberError(
                f"producer {h.producer_id} epoch {epoch} at offset {first_offset}: sequence "
                f"{first_seq}..{h.last_sequence} does not follow {last_seq} (its last batches "
                f"here: {known or 'none'})")

    def commit(self, append: ProducerAppend, end_offset: int) -> None:
        for pid, entry in append.updates.items():
            self.producers[pid] = entry
            self._track_txn(entry)
        for done in append.completed:
            self._unreplicated[done.first_offset] = done.last_offset
        self.map_end_offset = end_offset

    # ----------------------------------------------------------------- replay / replication
    def apply_batch(self, h: BatchHeader,
                    marker: tuple[int, int] | None = None) -> CompletedTxn | None:
        """Apply a batch already in the log (replicated, recovered or replayed): no checks.
        A control batch needs its `marker`; the transaction it ended is returned."""
        self.map_end_offset = h.last_offset + 1
        pid = h.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        done = None
        if h.is_control:
            if marker is None:
                raise CorruptMessageError(f"producer {pid}: control batch at offset "
                                          f"{h.base_offset} without its marker")
            done = _end_txn(entry, h, h.base_offset, h.max_timestamp, marker, check=False)
            if done is not None:
                self._unreplicated[done.first_offset] = done.last_offset
        else:
            entry.add_batch(h.producer_epoch, BatchMetadata(
                h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp))
            if h.is_transactional and entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = h.base_offset
        self._track_txn(entry)
        return done

    def _track_txn(self, entry: ProducerStateEntry) -> None:
        if entry.current_txn_first_offset is None:
            self._ongoing.pop(entry.producer_id, None)
        else:
            self._ongoing[entry.producer_id] = entry.current_txn_first_offset

    # ----------------------------------------------------------------- queries / upkeep
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open or whose marker is not
        replicated yet (what bounds the LSO)."""
        if not self._ongoing and not self._unreplicated:
            return None
        return min(min(self._ongoing.values(), default=2**63), min(self._unreplicated, default=2**63))

    def last_stable_offset_after(self, done: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn), kept in the aborted-transaction index: the
        first offset of the oldest other open transaction, else just after the marker."""
        others = [first for pid, first in self._ongoing.items() if pid != done.producer_id]
        return min(others) if others else done.last_offset + 1

    def on_high_watermark(self, high_watermark: int) -> None:
        """Ended transactions whose marker is now below the high watermark are stable."""
        if self._unreplicated:
            for first, last in list(self._unreplicated.items()):
                if last < high_watermark:
                    del self._unreplicated[first]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle for `producer.id.expiration.ms` without an open transaction."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self.map_end_offset = 0

    # ----------------------------------------------------------------- snapshots
    def _snapshot_path(self, offset: int) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, snapshot_file_name(offset))

    def snapshot_offsets(self) -> list[int]:
        if self.dir is None:
            return []
        out = []
        for name in os.listdir(self.dir):
            stem = name[:-len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def take_snapshot(self) -> None:
        """Write the state as of `map_end_offset` to `<map_end_offset>.snapshot`."""
        if self.dir is None:
            return
        doc = {
            "version": _SNAPSHOT_VERSION,
            "offset": self.map_end_offset,
            "producers": [
                [e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp,
                 e.current_txn_first_offset,
                 [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                  for b in e.batches]]
                for e in self.producers.values()],
        }
        path = self._snapshot_path(self.map_end_offset)
        atomic_write(path, json.dumps(doc, separators=(",", ":")).encode(),
                     fsync=self.fsync_later is None)
        if self.fsync_later is not None:
            self.fsync_later(path)

    def load_latest_snapshot(self, max_offset: int, keep_above: int | None = None) -> int | None:
        """Load the newest readable snapshot at or below `max_offset` (deleting any above
        it, but those up to `keep_above`, and any unreadable one); its offset, or None
        (state left empty)."""
        self.clear()
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > max_offset:
                if keep_above is None or offset > keep_above:
                    _unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    doc = json.loads(f.read())
                if doc["version"] != _SNAPSHOT_VERSION or doc["offset"] != offset:
                    raise ValueError("version or offset mismatch")
                for pid, epoch, coord, ts, txn, batches in doc["producers"]:
                    entry = ProducerStateEntry(pid, epoch, coord, ts, txn,
                                               (BatchMetadata(*b) for b in batches))
                    self.producers[pid] = entry
                    self._track_txn(entry)
            except (OSError, ValueError, TypeError, KeyError) as e:
                log.warning("discarding unreadable producer snapshot %s: %s", path, e)
                self.clear()
                _unlink(path)
                continue
            self.map_end_offset = offset
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o > offset:
                _unlink(self._snapshot_path(o))

    def delete_snapshots_between(self, low: int, high: int) -> None:
        """Delete the snapshots strictly between `low` and `high`."""
        self._delete_snapshots(lambda o: low < o < high)

    def delete_snapshots_before(self, offset: int) -> None:
        self._delete_snapshots(lambda o: o < offset)

    def _delete_snapshots(self, doomed: Callable[[int], bool]) -> None:
        offsets = self.snapshot_offsets()
        gone = [o for o in offsets if doomed(o)]
        if not gone:
            return
        if self.fsync_later is not None:
            # The snapshots that stay may still wait for their fsync: make them durable
            # before the older ones a crash would otherwise fall back to go away.
            for o in offsets:
                if not doomed(o):
                    _fsync(self._snapshot_path(o))
        for o in gone:
            _unlink(self._snapshot_path(o))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
