"""Several log dirs on real files: placement, a dir failing under the broker, moving a log
between dirs while it is appended to (LogManager, dir_mover.LogDirMover)."""
from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from broker.log import LogConfig, LogManager, PartitionLog
from broker.log import checkpoints
from broker.log.dir_mover import LogDirMover
from broker.log.errors import KafkaStorageError, LogDirNotFoundError
from broker.log.log_manager import FUTURE_DIR_SUFFIX, parse_future_dir_name
from clients.protocol.records import Record, build_batch, records_from_fetch


def batch(i: int, epoch: int = 0, producer_id: int = -1, seq: int = -1) -> bytes:
    return build_batch([Record(b"k%d" % i, b"v%d" % i, [], 1000 + i)], partition_leader_epoch=epoch,
                       producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=seq)


def values(plog) -> list[bytes]:
    info = plog.read(plog.log_start_offset, 1 << 30)
    data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    return [r.value for r in records_from_fetch(data)]


def dirs(tmp_path, n: int = 2) -> list[str]:
    return [str(tmp_path / f"d{i}") for i in range(n)]


def manager(paths: list[str], **cfg) -> LogManager:
    return LogManager(paths, LogConfig(**cfg))


# ============================================================================ placement
def test_new_partitions_go_to_the_dir_with_the_fewest_and_are_found_there_after_restart(tmp_path):
    paths = dirs(tmp_path, 3)
    lm = manager(paths)
    for p in range(7):
        lm.create_log("t", p).append_as_leader(batch(p), 0)
    placed = {p: lm.log_dir_of("t", p) for p in range(7)}
    counts = sorted(list(placed.values()).count(d) for d in paths)
    assert counts == [2, 2, 3]
    lm.close()
    for d in paths:
        assert os.path.exists(os.path.join(d, checkpoints.RECOVERY_POINT_FILE))
        own = checkpoints.read_offsets(os.path.join(d, checkpoints.RECOVERY_POINT_FILE))
        assert sorted(own) == sorted(("t", p) for p, pd in placed.items() if pd == d)
    again = manager(paths)
    assert {p: again.log_dir_of("t", p) for p in range(7)} == placed
    assert values(again.get_log("t", 3)) == [b"v3"]
    again.close()


def test_a_preferred_dir_takes_the_next_log_of_its_partition(tmp_path):
    paths = dirs(tmp_path)
    lm = manager(paths)
    lm.create_log("a", 0)                       # d0 now holds one: d1 would be next
    assert lm.set_preferred_dir("b", 0, paths[0]) == paths[0]
    lm.create_log("b", 0)
    assert lm.log_dir_of("b", 0) == paths[0]
    with pytest.raises(LogDirNotFoundError):
        lm.set_preferred_dir("b", 1, str(tmp_path / "elsewhere"))
    lm.close()


def test_meta_properties_in_every_dir(tmp_path):
    paths = dirs(tmp_path)
    lm = manager(paths)
    lm.write_meta_properties(7, "abc")
    for d in paths:
        with open(os.path.join(d, "meta.properties")) as f:
            assert f.read() == "version=0\nbroker.id=7\ncluster.id=abc\n"
    lm.close()


# ============================================================================ failure
def test_an_io_error_takes_its_dir_offline_and_the_other_dir_goes_on(tmp_path):
    paths = dirs(tmp_path)
    lm = manager(paths)
    failed: list[tuple[str, list]] = []
    lm.on_dir_failure = lambda d, tps: failed.append((d, tps))
    a, b = lm.create_log("t", 0), lm.create_log("t", 1)
    assert lm.log_dir_of("t", 0) != lm.log_dir_of("t", 1)
    a.append_as_leader(batch(0), 0)
    broken = lm.log_dir_of("t", 0)
    # The disk loses the partition's directory: the next segment cannot be created there.
    shutil.rmtree(a.dir)
    with pytest.raises(KafkaStorageError):
        a.roll()
    assert failed == [(broken, [("t", 0)])]
    assert lm.offline_dirs.keys() == {broken}
    assert lm.get_log("t", 0) is None
    b.append_as_leader(batch(1), 0)                 # the other dir is untouched
    assert values(b) == [b"v1"]
    # New logs avoid the offline dir; it is reported with its error.
    assert lm.log_dir_of("t", 2) is None and lm.create_log("t", 2) and lm.log_dir_of("t", 2) != broken
    info = {d.path: d for d in lm.describe_dirs()}
    assert info[broken].error is not None and info[broken].replicas == []
    assert info[lm.log_dir_of("t", 1)].error is None
    lm.close()
    assert not os.path.exists(os.path.join(broken, ".kafka_cleanshutdown"))
    assert os.path.exists(os.path.join(lm.log_dir_of("t", 1), ".kafka_cleanshutdown"))


def test_a_dir_that_cannot_be_loaded_is_offline_from_the_start(tmp_path):
    paths = dirs(tmp_path)
    with open(paths[1], "w") as f:                  # a file where a dir should be
        f.write("not a dir")
    lm = manager(paths)
    assert list(lm.offline_dirs) == [paths[1]]
    assert lm.online_dirs == [paths[0]]
    lm.close()
    with pytest.raises(KafkaStorageError):
        manager([paths[1]])


# ============================================================================ moves
def test_a_log_moves_to_another_dir_while_appended_to_and_nothing_is_lost(tmp_path):
    paths = dirs(tmp_path)
    lm = manager(paths, segment_bytes=600)          # many segments to copy
    log0 = lm.create_log("t", 0)
    source = lm.log_dir_of("t", 0)
    target = next(d for d in paths if d != source)
    for i in range(200):
        log0.append_as_leader(batch(i, producer_id=9, seq=i), 3)
    log0.high_watermark = log0.log_end_offset
    replaced: list = []
    lm.on_log_replaced = lambda tp, new: replaced.append((tp, new))

    async def run() -> None:
        mover = LogDirMover(lm, chunk_bytes=2000)
        mover.start()
        future = lm.create_future_log("t", 0, target)
        assert future is not None and future.dir.endswith(FUTURE_DIR_SUFFIX)
        assert parse_future_dir_name(os.path.basename(future.dir)) == ("t", 0)
        described = {d.path: d for d in lm.describe_dirs()}[target].replicas
        assert [(r.topic, r.partition, r.is_future) for r in described] == [("t", 0, True)]
        assert described[0].offset_lag == 200
        i = 200
        while not replaced and i < 5000:            # appends race the copy until the swap
            current = lm.get_log("t", 0)
            current.append_as_leader(batch(i, producer_id=9, seq=i), 3)
            current.high_watermark = current.log_end_offset
            i += 1
            await asyncio.sleep(0)
        await mover.stop()
        assert mover.moves_completed == 1
    asyncio.run(run())
    moved = lm.get_log("t", 0)
    assert replaced == [(("t", 0), moved)]
    assert lm.log_dir_of("t", 0) == target and moved.dir == os.path.join(target, "t-0")
    n = moved.log_end_offset
    assert values(moved) == [b"v%d" % i for i in range(n)]
    assert moved.high_watermark == n
    assert moved.leader_epochs.entries == [(3, 0)]
    # The producer state came along: the next sequence continues, a retry is a duplicate.
    assert moved.append_as_leader(batch(n - 1, producer_id=9, seq=n - 1), 3).duplicate
    moved.append_as_leader(batch(n, producer_id=9, seq=n), 3)
    lm.close()
    assert not os.path.exists(os.path.join(source, "t-0"))
    again = manager(paths)
    assert again.log_dir_of("t", 0) == target and values(again.get_log("t", 0))[-1] == b"v%d" % n
    again.close()


def test_a_truncation_of_the_source_truncates_the_copy(tmp_path):
    paths = dirs(tmp_path)
    lm = manager(paths)
    log0 = lm.create_log("t", 0)
    target = next(d for d in paths if d != lm.log_dir_of("t", 0))
    for i in range(10):
        log0.append_as_leader(batch(i), 1)
    mover = LogDirMover(lm)
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    mover._copy_chunk(log0, future)
    assert future.log_end_offset == 10
    log0.truncate_to(6)                             # a follower dropping a diverged tail
    assert future.log_end_offset == 6
    for i in range(6, 9):
        log0.append_as_leader(batch(100 + i), 2)
    progressed, copied = mover._step(("t", 0), future)     # copies the new tail, swaps
    assert progressed and copied > 0 and mover.moves_completed == 1
    moved = lm.get_log("t", 0)
    assert lm.log_dir_of("t", 0) == target
    assert values(moved) == [b"v%d" % i for i in range(6)] + [b"v%d" % (100 + i) for i in range(6, 9)]
    lm.close()


def test_a_move_to_the_dir_it_is_in_does_nothing_and_another_target_restarts_it(tmp_path):
    paths = dirs(tmp_path, 3)
    lm = manager(paths)
    lm.create_log("t", 0).append_as_leader(batch(0), 0)
    here = lm.log_dir_of("t", 0)
    assert lm.create_future_log("t", 0, here) is None
    others = [d for d in paths if d != here]
    first = lm.create_future_log("t", 0, others[0])
    assert first is not None
    second = lm.create_future_log("t", 0, others[1])
    assert second is not None and lm.future_log("t", 0) is second
    assert not os.path.exists(first.dir) or first.dir.endswith("-delete")
    with pytest.raises(KafkaStorageError):
        lm.create_future_log("nope", 0, others[0])
    lm.close()


def moving(tmp_path) -> tuple[list[str], LogManager, PartitionLog, str, PartitionLog]:
    """Two dirs; t-0 with 5 records starts moving to the other dir: (dirs, manager, its
    current log, the target dir, the future log)."""
    paths = dirs(tmp_path)
    lm = manager(paths)
    log0 = lm.create_log("t", 0)
    for i in range(5):
        log0.append_as_leader(batch(i), 0)
    log0.high_watermark = 5
    target = next(d for d in paths if d != lm.log_dir_of("t", 0))
    future = lm.create_future_log("t", 0, target)
    assert future is not None
    return paths, lm, log0, target, future


def test_a_crash_between_the_renames_of_a_swap_completes_the_move_at_start(tmp_path):
    paths, lm, log0, target, future = moving(tmp_path)
    LogDirMover(lm)._copy_chunk(log0, future)
    lm.close()
    # The crash: the current log was renamed for deletion, the future one not yet renamed.
    os.replace(log0.dir, log0.dir + ".0123456789abcdef0123456789abcdef-delete")
    again = manager(paths)
    assert again.log_dir_of("t", 0) == target and again.future_log("t", 0) is None
    assert values(again.get_log("t", 0)) == [b"v%d" % i for i in range(5)]
    assert os.listdir(target) and "t-0" in os.listdir(target)
    again.close()


def test_a_move_interrupted_by_a_restart_resumes(tmp_path):
    paths, lm, _, target, _ = moving(tmp_path)
    lm.close()
    again = manager(paths)
    future = again.future_log("t", 0)
    assert future is not None and future.dir.startswith(target)

    async def run() -> None:
        mover = LogDirMover(again)
        mover.start()
        for _ in range(200):
            if again.future_log("t", 0) is None:
                break
            await asyncio.sleep(0.01)
        await mover.stop()
    asyncio.run(run())
    assert again.log_dir_of("t", 0) == target
    assert values(again.get_log("t", 0)) == [b"v%d" % i for i in range(5)]
    again.close()
