"""Leader epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Entries (epoch, start offset), both strictly increasing, persisted in the partition dir's
`leader-epoch-checkpoint` (Kafka's format) on every change. The leader assigns its epoch at
the first append of a new epoch; a follower assigns the epochs stamped on the batches it
copies; truncation of the log truncates the cache with it. `end_offset_for` answers
OffsetForLeaderEpoch exactly as Kafka's LeaderEpochFileCache.endOffsetFor.

Event-loop thread only. Changes (`assign`, `truncate_*`, `clear`) write the checkpoint
(blocking I/O; rare: once per leader change or truncation). With `fsync_later` the write is
not fsynced on the caller's thread but handed to that callback: a new leader of hundreds of
partitions spent about 8 ms a partition in fsync on the event loop (Kafka moved the same
fsyncs off its request path, KAFKA-15046). The log manager's callback runs on its one
checkpoint thread, in order, so the fsync lands before any recovery-point checkpoint taken
later: data below a durable recovery point always has its epochs durable too. A checkpoint a
crash left unreadable sets `lost`, and the log rebuilds the cache from its batches.

A full disk does not fail a change: the cache is what the broker answers from, and an entry
is only needed on disk once the recovery point passes its start (recovery rebuilds the
epochs of the batches it replays). The write is left `pending` and the log's flush, before
it moves the recovery point, calls `write_pending` (which raises while the disk is full).
"""
from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from typing import Callable

from . import checkpoints
from .errors import CheckpointError, is_disk_full

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

log = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, path: str | None, fsync_later: Callable[[str], None] | None = None):
        self.path = path
        self.fsync_later = fsync_later
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # The checkpoint existed but could not be read: the owner must rebuild from the log.
        self.lost = False
        # The last change is not in the checkpoint: the disk was full.
        self.pending = False
        if path is not None:
            try:
                entries = checkpoints.read_epochs(path)
            except (CheckpointError, OSError) as e:
                log.warning("unreadable leader epoch checkpoint, rebuilding it from the log: %s", e)
                entries = []
                self.lost = True
            for epoch, start in entries:
                self._assign(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains `offset` (None below the first entry)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True (and persisted) if it changed
        anything. Entries with an epoch >= `epoch` or a start >= `start_offset` go."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        self._assign(epoch, start_offset)
        self._persist()
        return True

    def _assign(self, epoch: int, start_offset: int) -> None:
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <= the requested
        one and the start offset of the next epoch (the log end offset for the latest)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        i = bisect_left(self._starts, end_offset)
        if i < len(self._starts):
            del self._epochs[i:]
            del self._starts[i:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: entries before it go, the last of them is
        kept with its start moved up to `start_offset`."""
        i = bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._persist()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._persist()

    def rebuild(self, epochs_in_log_order: list[tuple[int, int]]) -> None:
        """Replace the entries with those of (epoch, base offset) of every batch, oldest
        first (a lost checkpoint)."""
        self._epochs.clear()
        self._starts.clear()
        for epoch, start in epochs_in_log_order:
            if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1]):
                self._assign(epoch, start)
        self._persist()
        self.lost = False

    def _persist(self) -> None:
        if self.path is None:
            return
        try:
            self._write()
        except OSError as e:
            if not is_disk_full(e):
                raise
            if not self.pending:
                log.warning("%s not written, the disk is full (kept in memory until a flush): %s",
                            self.path, e)
            self.pending = True

    def write_pending(self) -> None:
        """Write the checkpoint a full disk held back, if any (OSError if it still cannot)."""
        if self.pending and self.path is not None:
            self._write()

    def _write(self) -> None:
        assert self.path is not None
        checkpoints.write_epochs(self.path, self.entries, fsync=self.fsync_later is None)
        self.pending = False
        if self.fsync_later is not None:
            self.fsync_later(self.path)
