"""A segment's aborted-transaction index: `<base offset>.txnindex`, in Kafka's file format.

Each entry is one aborted transaction whose ABORT marker lies in the segment, 34 bytes
big-endian:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64
    | last_stable_offset int64

`last_offset` is the offset of the ABORT marker, `last_stable_offset` the partition's LSO
right after the transaction completed. Entries are appended in order of `last_offset`. A
read_committed fetch asks each segment from the fetch offset on for the aborted
transactions it overlaps (`collect`, Kafka's collectAbortedTxns) and stops at the first
segment that answers "complete": once an entry's LSO reaches the fetch's upper bound, no
later transaction can start below it.

Most segments never hold an aborted transaction, so the file is created by the first
`append`, never before (no empty files). The entries live in memory, loaded at
construction; each append writes its 34 bytes at once on an O_APPEND descriptor, without
fsync (`flush` does that: like the other indexes, the file is only trusted below the
recovery point, and recovery rebuilds it above). A torn entry at the end (a crash in the
middle of a write) is truncated away on load. For the same reason a full disk does not fail
an append: the entry is kept in memory and the file is marked behind; `flush` (which comes
before the recovery point moves past it) writes the file whole again, or raises.

Not thread-safe: used from the event-loop thread. The constructor, `append`, `truncate_to`,
`reset`, `rename`, `delete` and `flush` do blocking file I/O; `collect` and `entries` are
in memory.
"""
from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left
from dataclasses import dataclass

from .checkpoints import fsync_file
from .errors import is_disk_full

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
VERSION = 0
ENTRY_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")       # version, producer_id, first, last, last stable offset


@dataclass(frozen=True)
class AbortedTxn:
    """One aborted transaction: its producer, its first offset, its ABORT marker's offset
    and the LSO once it completed."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def _pack(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                       txn.last_stable_offset)


class TransactionIndex:
    """The aborted transactions of the segment starting at `start_offset`, in memory and
    in the file at `path` (which exists only once something was appended)."""

    def __init__(self, path: str, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] = []
        self._fd: int | None = None
        # A write failed for lack of space: the file lags the entries (and may end in a torn
        # one); nothing is appended to it until `flush` rewrites it whole.
        self._file_behind = False
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = []
        for i, (version, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(data[:whole])):
            if version != VERSION:
                raise ValueError(f"{self.path}: entry {i} has unknown version {version}")
            entries.append(AbortedTxn(pid, first, last, lso))
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        if whole != len(data):
            log.warning("%s: truncating a partial entry of %d bytes at the end",
                        self.path, len(data) - whole)
            try:
                os.ftruncate(fd, whole)
            except BaseException:
                os.close(fd)
                raise
        self._entries = entries
        self._fd = fd

    def _open(self, create: bool) -> int | None:
        """The write descriptor, opened if the file exists (or is to be created)."""
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0)
            try:
                self._fd = os.open(self.path, flags, 0o644)
            except FileNotFoundError:
                if create:
                    raise
        return self._fd

    @property
    def entries(self) -> list[AbortedTxn]:
        """A copy of the entries, in file order."""
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        """Write `txn` at the end (creating the file); its last offset must not be below the
        previous entry's."""
        if self._entries and txn.last_offset < self._entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction with last offset {txn.last_offset} "
                f"appended after one with last offset {self._entries[-1].last_offset}")
        self._entries.append(txn)
        if self._file_behind:
            return
        data = memoryview(_pack(txn))
        try:
            fd = self._open(create=True)
            assert fd is not None
            while data:
                data = data[os.write(fd, data):]
        except OSError as e:
            if not is_disk_full(e):
                self._entries.pop()
                raise
            log.warning("%s: disk full, the entry stays in memory until a flush: %s", self.path, e)
            self._file_behind = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), in order,
        and whether the search is complete: True as soon as an entry's LSO reaches the upper
        bound (no later segment can hold a transaction starting below it), where it stops."""
        out = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset is >= `offset`, in memory and in the file."""
        i = bisect_left(self._entries, offset, key=lambda t: t.last_offset)
        if i == len(self._entries):
            return
        del self._entries[i:]
        if self._file_behind:
            return                      # rewritten whole by the next flush
        fd = self._open(create=False)
        if fd is not None:
            os.ftruncate(fd, i * ENTRY_SIZE)

    def reset(self) -> None:
        """Drop every entry and the file (recovery rebuilds the index from the log)."""
        self.close()
        self._entries = []
        self._file_behind = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def flush(self) -> None:
        """fsync the file, if there is one, after writing it whole if a full disk left it
        behind (an OSError, ENOSPC again, if it still cannot be)."""
        if self._file_behind:
            self._rewrite()
        if self._fd is not None:
            os.fsync(self._fd)
        else:
            fsync_file(self.path)

    def _rewrite(self) -> None:
        # Emptied first (the descriptor appends: pwrite would append too); a failure midway
        # leaves the file behind still, as untrusted as before.
        data = memoryview(b"".join(_pack(txn) for txn in self._entries))
        fd = self._open(create=True)
        assert fd is not None
        os.ftruncate(fd, 0)
        while data:
            data = data[os.write(fd, data):]
        self._file_behind = False

    def close(self) -> None:
        """Close the descriptor (idempotent); a later write reopens the file."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def rename(self, new_path: str) -> None:
        """Move the file, if there is one, to `new_path` (the segment's `.deleted`, `.cleaned`
        and `.swap` names); an open descriptor stays valid."""
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path

    def delete(self) -> None:
        """Remove the file, if there is one, and forget the entries."""
        self.reset()
