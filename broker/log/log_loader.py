"""Opening a partition dir after a restart: which segments exist, which need recovery.

Kafka's LogLoader, reduced to what a header-only log needs:
- leftovers are removed: `*.deleted` segment files (their delay died with the process),
  `*.cleaned` and `*.tmp` files, index files without a `.log`;
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

from .config import LogConfig
from .leader_epoch import LeaderEpochCache
from .producer_state import ProducerStateManager
from .segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

log = logging.getLogger(__name__)


def clean_dir(dir: str) -> list[int]:
    """Remove leftovers; the sorted base offsets of the segments present."""
    names = os.listdir(dir)
    bases = []
    for name in names:
        stem, _, suffix = name.partition(".")
        if name.endswith((DELETED_SUFFIX, ".cleaned", ".tmp")):
            _unlink(os.path.join(dir, name))
        elif "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    present = set(bases)
    for name in names:
        stem, _, suffix = name.partition(".")
        if ("." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and stem.isdigit()
                and int(stem) not in present):
            _unlink(os.path.join(dir, name))
    return sorted(bases)


def load_segments(dir: str, config: LogConfig, recovery_point: int, clean: bool,
                  leader_epochs: LeaderEpochCache) -> list[LogSegment]:
    """Open (and where needed recover) the segments of `dir`, oldest first; may be empty.
    Epochs newer than the cache's latest found while recovering are assigned to it."""
    segs = [LogSegment.open(dir, b, config.index_interval_bytes, config.segment_index_bytes)
            for b in clean_dir(dir)]

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
                           log_end_offset: int, log_start_offset: int) -> None:
    """Newest snapshot at or below the log end, then replay the batch headers after it."""
    snap = producers.load_latest_snapshot(log_end_offset)
    start = max(snap if snap is not None else 0, segments[0].base_offset)
    if start < log_end_offset:
        first = max(bisect_right([s.base_offset for s in segments], start) - 1, 0)
        for seg in segments[first:]:
            found = seg.translate_offset(start)
            if found is None:
                continue
            for _, h in seg.batches_from(found[0]):
                producers.apply_batch(h)
    producers.map_end_offset = log_end_offset
    producers.evict_before(log_start_offset)


def _unlink(path: str) -> None:
    try:
        if os.path.isfile(path):
            os.unlink(path)
    except FileNotFoundError:
        pass
