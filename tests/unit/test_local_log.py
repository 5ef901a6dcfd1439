"""LocalLog, the segment list under PartitionLog, on its own: what it owns (log end,
recovery point, pending flush), what it refuses, and that PartitionLog shares its list."""
from __future__ import annotations

import os

import pytest

from broker.log import LocalLog, LogConfig, PartitionLog, checkpoints
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.segment import SegmentDeleter
from clients.protocol.records import Record, build_batch, iter_batches

CFG = LogConfig(segment_bytes=1_000, index_interval_bytes=64, file_delete_delay_ms=0)


def open_local(tmp_path, start: int = 0, config: LogConfig = CFG) -> LocalLog:
    d = str(tmp_path / "t-0")
    os.makedirs(d, exist_ok=True)
    return LocalLog.open(d, "t-0", config, SegmentDeleter(), recovery_point=0,
                         start_offset=start, clean=False,
                         leader_epochs=LeaderEpochCache(os.path.join(d, checkpoints.LEADER_EPOCH_FILE)))


def put(local: LocalLog, n: int = 1, value: bytes = b"v" * 100) -> None:
    """Append one batch of `n` records at the log end, as PartitionLog would (no roll)."""
    base = local.log_end_offset
    data = build_batch([Record(b"k", value, [], 1_000 + i) for i in range(n)], base_offset=base)
    local.append(data, [(0, base + n - 1, 1_000 + n - 1, len(data))], base + n - 1)


def fetched_offsets(local: LocalLog, offset: int, limit: int, max_bytes: int = 10**6) -> list[int]:
    info = local.read(offset, max_bytes, limit, True)
    data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    return [b.base_offset for b in iter_batches(data)]


def test_empty_dir_gets_one_empty_segment_at_the_start_offset(tmp_path):
    local = open_local(tmp_path, start=42)
    assert [s.base_offset for s in local.segments] == [42]
    assert local.log_end_offset == 42 and local.recovery_point == 0
    assert os.listdir(local.dir).count(f"{42:020d}.log") == 1


def test_append_roll_and_read_up_to_a_limit(tmp_path):
    local = open_local(tmp_path)
    for _ in range(3):
        put(local, 2)
    local.roll(0)
    put(local, 2)
    assert [s.base_offset for s in local.segments] == [0, 6]
    assert local.pending_flush_offset == 6          # the roll left segment 0 unflushed
    assert fetched_offsets(local, 0, local.log_end_offset) == [0, 2, 4, 6]
    assert fetched_offsets(local, 3, 6) == [2, 4]   # whole batches, none reaching the limit
    info = local.read(8, 100, 8, True)             # at the limit: no bytes, where it would be
    assert info.regions == [] and info.offset_metadata.segment_base_offset == 6


def test_roll_keeps_an_empty_active_segment_at_the_same_base(tmp_path):
    local = open_local(tmp_path)
    active = local.active_segment
    assert local.roll(0) is active and local.pending_flush_offset is None


def test_flush_moves_the_recovery_point_and_clears_the_pending_flush(tmp_path):
    local = open_local(tmp_path)
    put(local, 3)
    local.roll(0)
    put(local, 1)
    local.flush(3)
    assert local.recovery_point == 3 and local.pending_flush_offset is None
    local.flush()
    assert local.recovery_point == local.log_end_offset == 4


def test_truncate_returns_the_new_log_end_and_drops_later_segments(tmp_path):
    local = open_local(tmp_path)
    put(local, 2)
    local.roll(0)
    put(local, 3)                                   # offsets 2..4 in one batch
    assert local.truncate_to(3) == 2                # the batch holding 3 goes whole
    assert [s.base_offset for s in local.segments] == [0, 2] and local.active_segment.size == 0
    local.truncate_fully_and_start_at(10)
    assert [s.base_offset for s in local.segments] == [10] and local.log_end_offset == 10


def test_remove_oldest_and_replace_refuse_the_active_segment(tmp_path):
    local = open_local(tmp_path)
    put(local)
    with pytest.raises(ValueError):
        local.remove_oldest(1)
    with pytest.raises(ValueError):
        local.replace_segments(local.active_segment, [local.active_segment])
    local.roll(0)
    put(local)
    local.remove_oldest(1)
    assert [s.base_offset for s in local.segments] == [1]
    assert local.deleter.run_all() == 1


def test_partition_log_delegates_to_its_local_log(tmp_path):
    log = PartitionLog(str(tmp_path / "p-0"), CFG)
    for _ in range(20):
        log.append_as_leader(build_batch([Record(b"k", b"v" * 100, [], 1_000)]), 0)
    local = log.local_log
    assert log.segments is local.segments and len(local.segments) > 1
    assert log.log_end_offset == local.log_end_offset == 20
    assert log.recovery_point == local.recovery_point == 0
    log.flush()
    assert local.recovery_point == 20 and log.pending_flush_offset is None
    assert log.size_in_bytes == sum(s.size for s in local.segments)
