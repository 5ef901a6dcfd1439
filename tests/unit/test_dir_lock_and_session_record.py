"""Kafka's .lock per log dir (broker/log/dir_lock.py) and the record of a broker's ZooKeeper
session in its first log dir (zkcoord/zk_registration.py): what makes ending a previous run's
session safe."""
from __future__ import annotations

import os
import stat

import pytest

from broker.log.dir_lock import LogDirLockedError, LogDirUnusableError, lock_log_dirs
from zkcoord.zk_registration import SESSION_FILE, SessionRecord, expiry_wait


def test_a_locked_dir_refuses_a_second_lock_until_released(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    held = lock_log_dirs([a, b])            # made when missing
    assert held.holds(a) and held.holds(b) and os.path.isfile(os.path.join(a, ".lock"))
    with pytest.raises(LogDirLockedError, match=r"^Failed to acquire lock on file \.lock in .*/b\. A Kafka "
                                                r"instance in another process or thread is using this directory\.$"):
        lock_log_dirs([str(tmp_path / "c"), b])   # flock conflicts between open files, even in one process
    assert lock_log_dirs([str(tmp_path / "c")]).dirs, "a failed attempt must release what it took"
    held.release()
    lock_log_dirs([a, b]).release()


def test_a_dir_that_cannot_be_one_is_unusable(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(LogDirUnusableError, match="it exists and is not a directory"):
        lock_log_dirs([str(f)])
    with pytest.raises(LogDirUnusableError, match="a part of its path is not a directory"):
        lock_log_dirs([str(f / "logs")])


def test_session_record_keeps_the_previous_run_and_saves_this_one(tmp_path):
    assert SessionRecord(tmp_path).previous is None
    SessionRecord(tmp_path).save((0x1000483EF4C0001, b"\x01\x02secret"))
    path = tmp_path / SESSION_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600       # the password ends the session
    record = SessionRecord(tmp_path)
    assert (record.previous.session_id, record.previous.password) == (0x1000483EF4C0001, b"\x01\x02secret")
    record.save((0x2, b"new"))
    assert record.previous.session_id == 0x1000483EF4C0001  # read before this run saved its own
    path.write_text("{not json")
    assert SessionRecord(tmp_path).previous is None


def test_expiry_wait_leaves_a_margin():
    assert expiry_wait(18.0) == pytest.approx(21.6)
    assert expiry_wait(2.0) == 4.0
