"""Opening a partition dir after a restart: which segments exist, which need recovery.

Kafka's LogLoader, reduced to what a header-only log needs:
- leftovers are removed: `*.deleted` segment files (their delay died with the process),
  `*.cleaned` and `*.tmp` files, index files without a `.log`;
- an interrupted cleaner swap is finished or rolled back (LocalLog.replace_segments
  renames a cleaned segment `.cleaned` -> `.swap` with its `.log` last, retires the old
  segments, then `.swap` -> final name). A `<base>.log.swap` means the swap was
  committed: the swap segment is recovered, every old segment file with a base offset in
  [base, its next offset) is deleted and the swap files take their final names. `.swap`
  index files without a `.log.swap` belong to a swap that never committed and go, with
  the `.cleaned` files; the old segments are still complete then;
- every `<20-digit base>.log` is opened; segments wholly below the recovery point are
  trusted (indexes loaded and sanity-checked, rebuilt by a recovery scan if they fail);
  the segment holding the recovery point and every later one is recovered batch by batch
  (framing, magic, CRC, offset order), or none if the broker shut down cleanly;
- the first recovered segment that had to be truncated ends the log: later segments were
  written after the lost bytes and are deleted, so offsets stay dense;
- the producer state is the newest snapshot at or below the log end plus a replay of the
  batch headers after it.

Blocking I/O (reads whole unflushed segments); runs once per partition at open.
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_right

from clients.protocol.batch_header import BatchHeader

from . import checkpoints
from .config import LogConfig
from .leader_epoch import LeaderEpochCache
from .producer_state import CompletedTxn, ProducerStateManager
from .segment import (CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                      TIME_INDEX_SUFFIX, LogSegment)
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

_SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

log = logging.getLogger(__name__)


def _base_of(name: str) -> int | None:
    stem = name.partition(".")[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def clean_dir(dir: str, config: LogConfig | None = None) -> list[int]:
    """Remove leftovers, finish committed swaps; the sorted base offsets of the segments."""
    names = os.listdir(dir)
    swaps = sorted(b for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)
                   and (b := _base_of(n)) is not None)
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, ".tmp")) or (
                name.endswith(SWAP_SUFFIX) and _base_of(name) not in swaps):
            _unlink(os.path.join(dir, name))
    for base in swaps:
        _complete_swap(dir, base, config or LogConfig())
    names = os.listdir(dir)
    bases = []
    for name in names:
        stem, _, suffix = name.partition(".")
        if "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    present = set(bases)
    for name in names:
        stem, _, suffix = name.partition(".")
        if ("." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and stem.isdigit()
                and int(stem) not in present):
            _unlink(os.path.join(dir, name))
    return sorted(bases)


def _complete_swap(dir: str, base: int, config: LogConfig) -> None:
    """Finish a swap that committed (its `.log.swap` exists) before the process died."""
    seg = LogSegment.open(dir, base, config.index_interval_bytes, config.segment_index_bytes,
                          suffix=SWAP_SUFFIX)
    try:
        seg.recover()                   # fsynced before the commit; this rebuilds its indexes
        end = max(seg.next_offset, base + 1)
        for name in os.listdir(dir):
            b = _base_of(name)
            if b is not None and base <= b < end and name.endswith(_SEGMENT_FILE_SUFFIXES):
                log.warning("%s: replaced by the swapped-in cleaned segment %d", name, base)
                _unlink(os.path.join(dir, name))
        seg.change_suffix("")
        checkpoints.fsync_dir(dir)
    finally:
        seg.close_handlers()


def load_segments(dir: str, config: LogConfig, recovery_point: int, clean: bool,
                  leader_epochs: LeaderEpochCache) -> list[LogSegment]:
    """Open (and where needed recover) the segments of `dir`, oldest first; may be empty.
    Epochs newer than the cache's latest found while recovering are assigned to it."""
    segs = [LogSegment.open(dir, b, config.index_interval_bytes, config.segment_index_bytes)
            for b in clean_dir(dir, config)]

    def on_batch(h: BatchHeader) -> None:
        # As Kafka's LogSegment.recover: only epochs newer than the cache's latest.
        if h.partition_leader_epoch > leader_epochs.latest_epoch:
            leader_epochs.assign(h.partition_leader_epoch, h.base_offset)

    for i, seg in enumerate(segs):
        unflushed = not clean and (i == len(segs) - 1 or segs[i + 1].base_offset > recovery_point)
        if not unflushed and seg.load_indexes():
            continue
        truncated = seg.recover(on_batch)
        if truncated:
            log.warning("%s: truncated %d invalid bytes at the end", seg.log_path, truncated)
            if unflushed and i < len(segs) - 1:
                for later in segs[i + 1:]:
                    log.warning("deleting %s, written after the corrupt segment", later.log_path)
                    later.delete_files()
                del segs[i + 1:]
                break
    return segs


def rebuild_producer_state(producers: ProducerStateManager, segments: list[LogSegment],
                           log_end_offset: int, reindex_from: int | None = None) -> None:
    """Newest snapshot at or below the log end, then replay the batch headers after it.
    Producers whose batches are all below the log start stay known (KIP-360).

    With `reindex_from` (after a crash: the base offset of the first segment recovered),
    the aborted-transaction index of every segment from there on is rebuilt by the same
    replay, which then starts at a snapshot at or below `reindex_from`."""
    snap = producers.load_latest_snapshot(log_end_offset)
    if reindex_from is not None and snap is not None and snap > reindex_from:
        # The replay must cover the segments to reindex: an older snapshot (newer ones stay).
        snap = producers.load_latest_snapshot(reindex_from, keep_above=log_end_offset)
    start = max(snap if snap is not None else 0, segments[0].base_offset)
    if reindex_from is not None:
        for seg in segments:
            if seg.base_offset >= reindex_from:
                seg.txn_index.reset()
    if start < log_end_offset:
        first = max(bisect_right([s.base_offset for s in segments], start) - 1, 0)
        for seg in segments[first:]:
            found = seg.translate_offset(start)
            if found is None:
                continue
            reindex = reindex_from is not None and seg.base_offset >= reindex_from
            for pos, h in seg.batches_from(found[0]):
                if not h.is_control:
                    producers.apply_batch(h)
                    continue
                done = producers.apply_batch(h, seg.control_marker(pos, h))
                if reindex and done is not None and done.aborted:
                    seg.txn_index.append(aborted_entry(producers, done))
    producers.map_end_offset = log_end_offset


def aborted_entry(producers: ProducerStateManager, done: CompletedTxn) -> AbortedTxn:
    """The aborted-transaction index entry of `done`, just applied to `producers`."""
    return AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                      producers.last_stable_offset_after(done))


def batch_epochs(segments: list[LogSegment]) -> list[tuple[int, int]]:
    """(partition leader epoch, base offset) of every batch, oldest first: the leader epoch
    cache's source when its checkpoint was lost. Reads every batch header of the log."""
    return [(h.partition_leader_epoch, h.base_offset)
            for seg in segments for _, h in seg.batches_from(0)]


def _unlink(path: str) -> None:
    try:
        if os.path.isfile(path):
            os.unlink(path)
    except FileNotFoundError:
        pass
