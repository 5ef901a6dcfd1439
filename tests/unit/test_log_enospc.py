"""The log layer on a full disk: a real small tmpfs filled to its last page (ENOSPC from the
kernel, no mock), as root; skipped without root outside CI.

What a full disk must leave behind (errors.LogDirFullError, partition_log's docstring): an
append that failed is cut back to the last whole batch with nothing else changed (log end,
producer state, leader epochs), the dir stays online (no on_io_error), the same append
succeeds once there is space, and the files recovery trusts are never ahead of what was
written: what had to wait (indexes, the leader epoch checkpoint, transaction indexes,
periodic checkpoints) is written by the next flush, which does not move the recovery point
while it cannot.
"""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager, PartitionLog
from broker.log import checkpoints
from broker.log.errors import LogDirFullError
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from broker.log.txn_index import AbortedTxn, TransactionIndex
from broker.log.validation import scan_batches
from clients.protocol.records import Record, build_batch
from tests.support.tmpfs import Tmpfs

PAGE = 4096


@pytest.fixture
def disk(tmp_path):
    with Tmpfs(tmp_path / "disk", size=2 << 20) as fs:
        yield fs


def batch(n: int = 5, value: bytes = b"v" * 20, *, producer_id: int = -1, base_sequence: int = -1,
          epoch: int = -1) -> bytes:
    return build_batch([Record(b"k", value, [], None) for _ in range(n)], producer_id=producer_id,
                       producer_epoch=0 if producer_id >= 0 else -1, base_sequence=base_sequence,
                       partition_leader_epoch=epoch)


def open_log(path: Path, **cfg) -> tuple[PartitionLog, list]:
    log = PartitionLog(str(path), LogConfig(**cfg))
    failures: list = []
    log.on_io_error = lambda _log, e: failures.append(e)
    return log, failures


def whole_batches(path: Path) -> int:
    """The file's size if it holds whole valid batches only (scan_batches raises otherwise)."""
    data = path.read_bytes()
    batches = scan_batches(memoryview(data))
    end = batches[-1][0] + batches[-1][1].total_size if batches else 0
    assert end == len(data), f"{path}: {len(data) - end} bytes of a torn batch at the end"
    return len(data)


def reopened(log_dir: Path, tmp_path: Path) -> PartitionLog:
    """The log as a restart after a crash finds it: a copy opened with recovery from 0."""
    copy = tmp_path / "copy" / log_dir.name
    shutil.copytree(log_dir, copy)
    return PartitionLog(str(copy), LogConfig(), recovery_point=0)


def test_an_append_meeting_a_full_disk_is_cut_back_and_succeeds_once_there_is_space(disk, tmp_path):
    log, failures = open_log(disk.path / "t-0")
    for seq in range(0, 100, 5):
        log.append_as_leader(batch(producer_id=7, base_sequence=seq), 0)
    end, size = log.log_end_offset, log.active_segment.size
    seg_file = Path(log.active_segment.log_path)

    # Room for a page of the next 60 KB batch (the write starts, then ENOSPC): a torn batch
    # until the segment cuts it back.
    disk.fill(leave=PAGE)
    big = batch(60, b"x" * 1000, producer_id=7, base_sequence=100)
    with pytest.raises(LogDirFullError) as raised:
        log.append_as_leader(big, 0)
    assert raised.value.code == 56 and raised.value.retriable
    assert (log.log_end_offset, log.active_segment.size) == (end, size)
    assert whole_batches(seg_file) == size
    assert failures == [] and log.disk_full_since is not None
    # Reads go on; a restart finds the same log, nothing to cut.
    assert log.read(0, 1 << 20).size == size
    again = reopened(disk.path / "t-0", tmp_path)
    assert (again.log_end_offset, again.active_segment.size) == (end, size)

    disk.free()
    info = log.append_as_leader(big, 0)
    # The producer state did not take the failed batch: the retry is new, not a duplicate.
    assert not info.duplicate and (info.first_offset, info.last_offset) == (end, end + 59)
    assert log.append_as_leader(big, 0).duplicate
    assert log.disk_full_since is None and failures == []
    whole_batches(seg_file)


def test_a_follower_append_meeting_a_full_disk_takes_the_same_batches_later(disk):
    leader, _ = open_log(disk.path / "leader-0")
    for _ in range(30):
        leader.append_as_leader(batch(4, b"y" * 400), 3)
    fetched = b"".join(os.pread(r.fileno, r.size, r.position) for r in leader.read(0, 1 << 20).regions)
    follower, failures = open_log(disk.path / "follower-0")
    follower.append_as_follower(fetched[:len(fetched) // 3])
    end = follower.log_end_offset
    assert 0 < end < leader.log_end_offset
    rest = fetched[end and scan_offset(fetched, end):]

    disk.fill()
    with pytest.raises(LogDirFullError):
        follower.append_as_follower(rest)
    assert follower.log_end_offset == end and failures == []
    whole_batches(Path(follower.active_segment.log_path))

    disk.free()
    follower.append_as_follower(rest)
    assert follower.log_end_offset == leader.log_end_offset
    assert Path(follower.active_segment.log_path).read_bytes() == Path(leader.active_segment.log_path).read_bytes()
    assert follower.leader_epochs.entries == leader.leader_epochs.entries


def scan_offset(data: bytes, offset: int) -> int:
    """Byte position of the batch starting at `offset` in fetched `data`."""
    return next(pos for pos, h in scan_batches(memoryview(data)) if h.base_offset == offset)


def test_a_roll_on_a_full_disk_leaves_no_torn_state(disk, tmp_path):
    log, failures = open_log(disk.path / "t-0", segment_bytes=20_000, index_interval_bytes=500)
    while len(log.segments) < 2:
        log.append_as_leader(batch(5, b"z" * 300), 0)
    end = log.log_end_offset
    disk.fill()
    # The next append rolls: the new segment's empty files need no space, the producer
    # snapshot and the old segment's index writes do (both may wait); the data does not fit.
    with pytest.raises(LogDirFullError):
        while True:
            log.append_as_leader(batch(5, b"z" * 300), 0)
            end = log.log_end_offset
    assert log.log_end_offset == end and failures == []
    assert not list((disk.path / "t-0").glob("*.tmp"))
    for seg in log.segments:
        whole_batches(Path(seg.log_path))

    disk.free()
    log.append_as_leader(batch(5, b"z" * 300), 0)
    log.flush()                       # writes what the roll could not
    assert log.recovery_point == log.log_end_offset
    again = reopened(disk.path / "t-0", tmp_path)
    assert again.log_end_offset == log.log_end_offset
    assert [s.base_offset for s in again.segments] == [s.base_offset for s in log.segments]


def test_a_segment_that_cannot_be_created_is_removed_again(tmp_path):
    # No file can be created once the inodes run out: the roll fails, the log stays as it was.
    with Tmpfs(tmp_path / "disk", size=2 << 20, inodes=40) as fs:
        log, failures = open_log(fs.path / "t-0", segment_bytes=8_000)
        while len(log.segments) < 2:
            log.append_as_leader(batch(5, b"w" * 300), 0)
        names = sorted(p.name for p in (fs.path / "t-0").iterdir())
        fillers = []
        try:
            while True:
                p = fs.path / f"inode-{len(fillers)}"
                p.touch()
                fillers.append(p)
        except OSError:
            pass
        segments, end = [s.base_offset for s in log.segments], log.log_end_offset
        with pytest.raises(LogDirFullError):
            while True:
                log.append_as_leader(batch(5, b"w" * 300), 0)
                segments, end = [s.base_offset for s in log.segments], log.log_end_offset
                names = sorted(p.name for p in (fs.path / "t-0").iterdir())
        assert [s.base_offset for s in log.segments] == segments and log.log_end_offset == end
        assert sorted(p.name for p in (fs.path / "t-0").iterdir()) == names
        assert failures == []
        for p in fillers:
            p.unlink()
        log.append_as_leader(batch(5, b"w" * 300), 0)
        assert len(log.segments) == len(segments) + 1


def test_a_new_leader_epoch_waits_for_space_and_the_flush_waits_for_it(disk, tmp_path):
    log, failures = open_log(disk.path / "t-0")
    for _ in range(10):
        log.append_as_leader(batch(), 1)
    log.flush()
    end = log.log_end_offset
    epoch_file = disk.path / "t-0" / checkpoints.LEADER_EPOCH_FILE
    disk.fill()
    # What Partition.make_leader does: the cache answers at once, the file waits.
    assert log.leader_epochs.assign(2, end)
    assert log.leader_epochs.pending and log.latest_epoch == 2
    assert checkpoints.read_epochs(str(epoch_file)) == [(1, 0)]
    with pytest.raises(LogDirFullError):      # the data fits no more either
        log.append_as_leader(batch(60, b"x" * 1000), 2)
    log.recovery_point = 5                    # as if 5..end were not fsynced yet
    with pytest.raises(LogDirFullError):
        log.flush()
    assert log.recovery_point == 5 and failures == []
    assert not list((disk.path / "t-0").glob("*.tmp"))

    disk.free()
    log.append_as_leader(batch(), 2)
    log.flush()
    assert checkpoints.read_epochs(str(epoch_file)) == [(1, 0), (2, end)]
    assert not log.leader_epochs.pending and log.recovery_point == log.log_end_offset


def test_an_aborted_transaction_index_entry_waits_for_space(disk):
    # A segment's first aborted transaction creates its index file, whose first page the
    # full disk refuses: the entries stay in memory, a flush cannot write them yet.
    path = disk.path / "00000000000000000000.txnindex"
    index = TransactionIndex(str(path), 0)
    disk.fill()
    index.append(AbortedTxn(1, 0, 10, 11))
    index.append(AbortedTxn(2, 12, 20, 21))
    index.append(AbortedTxn(3, 22, 30, 31))
    assert [t.producer_id for t in index.entries] == [1, 2, 3]
    assert [t.producer_id for t in index.collect(0, 100)[0]] == [1, 2, 3]
    with pytest.raises(OSError) as raised:
        index.flush()
    assert raised.value.errno == 28
    index.truncate_to(30)                       # drops producer 3's, in memory
    disk.free()
    index.flush()
    index.append(AbortedTxn(4, 32, 40, 41))     # written at once again
    index.close()
    assert [t.producer_id for t in TransactionIndex(str(path), 0).entries] == [1, 2, 4]


def test_periodic_checkpoints_wait_for_space_and_the_dir_stays_online(disk):
    m = LogManager([str(disk.path / "logs")], LogConfig())
    try:
        plog = m.create_log("t", 0)
        for _ in range(5):
            plog.append_as_leader(batch(), 0)
        plog.high_watermark = 10
        asyncio.run(m.checkpoint_recovery_points_async())
        hw_file = disk.path / "logs" / checkpoints.REPLICATION_OFFSET_FILE
        assert checkpoints.read_offsets(str(hw_file)) == {("t", 0): 10}
        disk.fill()
        plog.high_watermark = 20
        asyncio.run(m.checkpoint_recovery_points_async())
        assert m.offline_dirs == {} and m.get_log("t", 0) is plog
        assert checkpoints.read_offsets(str(hw_file)) == {("t", 0): 10}
        assert not list((disk.path / "logs").glob("*.tmp"))
        disk.free()
        asyncio.run(m.checkpoint_recovery_points_async())
        assert checkpoints.read_offsets(str(hw_file)) == {("t", 0): 20}

        # Closing while full: what could not be flushed must be recovered at the next
        # start, so the dir gets no clean-shutdown marker.
        plog.leader_epochs.assign(1, plog.log_end_offset)
        disk.fill()
    finally:
        m.close()
    assert not (disk.path / "logs" / CLEAN_SHUTDOWN_FILE).exists()


def test_the_next_in_flight_batch_gets_the_storage_error_not_a_sequence_gap(disk):
    # An idempotent producer has R1 and R2 in flight; R1 meets the full disk. R2 must fail
    # the same retriable way: OUT_OF_ORDER_SEQUENCE_NUMBER (R1's sequences are missing) would
    # make librdkafka bump its epoch, and again for every retry while the disk stays full.
    log, failures = open_log(disk.path / "t-0")
    log.append_as_leader(batch(5, producer_id=9, base_sequence=0), 0)
    disk.fill(leave=PAGE)
    r1 = batch(60, b"x" * 1000, producer_id=9, base_sequence=5)
    r2 = batch(5, producer_id=9, base_sequence=65)
    with pytest.raises(LogDirFullError):
        log.append_as_leader(r1, 0)
    for _ in range(3):                  # retries of R2 while the disk stays full
        with pytest.raises(LogDirFullError):
            log.append_as_leader(r2, 0)
    disk.free()
    assert (log.append_as_leader(r1, 0).first_offset, log.append_as_leader(r2, 0).first_offset) == (5, 65)
    assert failures == []
