"""The leader-epoch checkpoint is fsynced off the event loop, in order with the recovery
point, and rebuilt from the log when a crash left it unreadable.

A broker that became leader of about 140 partitions at a controller failover spent about
8 ms a partition in fsync of this file on the event loop, so its first answers came after
more than a second (tests/integration/test_controller_startup.py, --long)."""
from __future__ import annotations

import os
import threading

from broker.log import LogConfig, LogManager, PartitionLog, checkpoints
from clients.protocol.records import Record, build_batch

EPOCH_FILE = checkpoints.LEADER_EPOCH_FILE


def _record_fsyncs(monkeypatch) -> list[tuple[str, str]]:
    """(file name, thread name) of every fsync, files and directories alike."""
    real = os.fsync
    seen: list[tuple[str, str]] = []

    def fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        seen.append((name, threading.current_thread().name))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def _drain(m: LogManager) -> None:
    m._checkpoints_thread().submit(lambda: None).result()


def test_a_new_leader_epoch_is_written_on_the_loop_and_fsynced_on_the_checkpoint_thread(
        tmp_path, monkeypatch):
    m = LogManager([str(tmp_path / "logs")], LogConfig())
    log = m.create_log("t", 0)
    fsyncs = _record_fsyncs(monkeypatch)

    assert log.leader_epochs.assign(4, log.log_end_offset)

    on_caller = [f for f in fsyncs if f[1] == threading.current_thread().name]
    assert on_caller == [], f"fsync on the caller's thread: {on_caller}"
    # Written already (a clean stop or a kill -9 keeps it), durable once the thread ran.
    assert checkpoints.read_epochs(os.path.join(log.dir, EPOCH_FILE)) == [(4, 0)]
    _drain(m)
    assert (EPOCH_FILE, "strom-checkpoints_0") in fsyncs
    m.close()


def test_the_epoch_fsync_lands_before_a_recovery_point_taken_later(tmp_path, monkeypatch):
    # Data below a durable recovery point is never recovered again, so its epochs must be
    # durable before that recovery point is.
    m = LogManager([str(tmp_path / "logs")], LogConfig())
    log = m.create_log("t", 0)
    fsyncs = _record_fsyncs(monkeypatch)
    log.append_as_leader(build_batch([Record(None, b"v")]), 7)
    log.flush()
    m.checkpoint_recovery_points()

    names = [name.removesuffix(".tmp") for name, _ in fsyncs]     # atomic writes fsync the .tmp
    assert EPOCH_FILE in names and checkpoints.RECOVERY_POINT_FILE in names
    assert names.index(EPOCH_FILE) < names.index(checkpoints.RECOVERY_POINT_FILE)
    m.close()


def test_an_unreadable_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    d = str(tmp_path / "t-0")
    cfg = LogConfig(segment_bytes=300)
    log = PartitionLog(d, cfg)
    for epoch in (0, 0, 3, 3, 7, 7, 7):
        log.append_as_leader(build_batch([Record(None, b"x" * 50)]), epoch)
    log.close()
    assert len(log.local_log.segments) > 2       # the rebuild reads every segment
    with open(os.path.join(d, EPOCH_FILE), "wb") as f:
        f.write(b"")                             # what a power cut before the fsync may leave

    reopened = PartitionLog(d, cfg, recovery_point=log.log_end_offset, clean_shutdown=True)

    assert reopened.leader_epochs.entries == [(0, 0), (3, 2), (7, 4)]
    assert reopened.end_offset_for_epoch(3) == (3, 4)
    assert checkpoints.read_epochs(os.path.join(d, EPOCH_FILE)) == [(0, 0), (3, 2), (7, 4)]
    reopened.close()
