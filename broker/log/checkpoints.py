"""Small text checkpoint files, written atomically, in Kafka's formats.

    <version>            always 0
    <count>
    <entry line>         `count` of them

Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint`, one per log dir) have entry lines `topic partition offset`;
the leader epoch checkpoint (`leader-epoch-checkpoint`, one per partition dir) has
`epoch startOffset`.

A write goes to `<file>.tmp`, is fsynced, renamed over the file and the directory is
fsynced, so after a crash the file is either the old or the new version, never a mix.
Blocking I/O: the log manager's offset checkpoints run on its checkpoint thread; the
leader-epoch checkpoint and producer snapshots are written on the event-loop thread on rare
events (epoch change, roll) without fsync, and fsynced on the checkpoint thread.
"""
from __future__ import annotations

import os
from typing import Iterable

from .errors import CheckpointError

VERSION = 0
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"    # high watermarks
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"      # each compacted log's first dirty offset
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """fsync a file written earlier without it; one deleted meanwhile is fine."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, fsync: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves the old or the new content."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
        written = True
    finally:
        os.close(fd)
        if not written:
            # `path` is untouched; the half-written copy goes, not to hold on to a full disk.
            try:
                os.unlink(tmp)
            except OSError:
                pass
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_lines(path: str, lines: Iterable[str], fsync: bool = True) -> None:
    entries = list(lines)
    text = f"{VERSION}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)
    atomic_write(path, text.encode("utf-8"), fsync)


def read_lines(path: str, fields_per_line: int) -> list[list[str]] | None:
    """The entry lines split into fields; None if the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unrecognised version line")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    body = lines[2:]
    if count != len(body):
        raise CheckpointError(f"{path}: count {count} but {len(body)} entries")
    out = []
    for line in body:
        parts = line.split()
        if len(parts) != fields_per_line:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        out.append(parts)
    return out


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_lines(path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    rows = read_lines(path, 3)
    if rows is None:
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in rows}
    except ValueError:
        raise CheckpointError(f"{path}: non-numeric partition or offset") from None


def write_epochs(path: str, entries: Iterable[tuple[int, int]], fsync: bool = True) -> None:
    write_lines(path, (f"{e} {o}" for e, o in entries), fsync)


def read_epochs(path: str) -> list[tuple[int, int]]:
    rows = read_lines(path, 2)
    if rows is None:
        return []
    try:
        return [(int(e), int(o)) for e, o in rows]
    except ValueError:
        raise CheckpointError(f"{path}: non-numeric epoch entry") from None
