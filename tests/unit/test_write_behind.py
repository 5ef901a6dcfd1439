"""The log's write-behind (broker/log/write_behind.py): which ranges it hands to the kernel,
and that the kernel then holds no dirty tail longer than the interval (cachestat)."""
from __future__ import annotations

import mmap
import os
import threading

import pytest

from broker.log.config import LogConfig
from broker.log.local_log import LocalLog
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.segment import SegmentDeleter
from broker.log.write_behind import WriteBehind, sync_file_range_write
from clients.protocol.batch_header import BatchHeader
from clients.protocol.records import Record, build_batch, iter_batch_headers
from tests.support.page_cache import NoCachestat, dirty_pages, writeback_visible

MiB = 1 << 20


class Recorder:
    """A start_writeback that records its ranges (and the file each fd names), optionally
    held until released."""

    def __init__(self, hold: bool = False):
        self.ranges: list[tuple[str, int, int]] = []
        self.gate = threading.Event()
        if not hold:
            self.gate.set()

    def __call__(self, fd: int, offset: int, nbytes: int) -> None:
        self.gate.wait(10)
        self.ranges.append((os.readlink(f"/proc/self/fd/{fd}"), offset, nbytes))


def _batch(base: int, value_size: int, count: int = 16) -> tuple[bytes, BatchHeader]:
    data = bytes(build_batch([Record(None, b"v" * value_size) for _ in range(count)],
                             base_offset=base))
    return data, next(iter(iter_batch_headers(data)))[1]


def _open_log(tmp_path, wb: WriteBehind | None, segment_bytes: int = 1 << 30) -> LocalLog:
    cfg = LogConfig(segment_bytes=segment_bytes)
    return LocalLog.open(str(tmp_path / "t-0"), "t-0", cfg, SegmentDeleter(), recovery_point=0,
                         start_offset=0, clean=False, leader_epochs=LeaderEpochCache(None),
                         write_behind=wb)


def _append(log: LocalLog, value_size: int, count: int = 16) -> int:
    data, h = _batch(log.log_end_offset, value_size, count)
    log.append(data, [(0, h.last_offset, h.max_timestamp, len(data))], h.last_offset)
    return len(data)


def test_each_interval_of_appended_bytes_is_handed_over_once_in_order(tmp_path):
    (tmp_path / "t-0").mkdir()
    rec = Recorder()
    wb = WriteBehind(MiB, rec)
    log = _open_log(tmp_path, wb)
    sizes = [_append(log, 16 << 10) for _ in range(100)]     # 256 KiB a batch
    assert wb.wait_idle()
    seg_path = os.path.realpath(log.active_segment.file.name)
    assert {p for p, _, _ in rec.ranges} == {seg_path}
    # Contiguous from 0, each at least the interval, together everything handed so far.
    offsets = [o for _, o, _ in rec.ranges]
    assert offsets[0] == 0
    assert all(o + n == nxt for (_, o, n), nxt in zip(rec.ranges, offsets[1:]))
    assert all(n >= MiB for _, _, n in rec.ranges)
    handed = sum(n for _, _, n in rec.ranges)
    assert handed == log.active_segment.writeback_from
    assert sum(sizes) - handed < MiB + 4096
    # Whole pages: the page appended to next is never under writeback.
    assert all((o + n) % mmap.PAGESIZE == 0 for _, o, n in rec.ranges)
    wb.close()


def test_off_hands_nothing_and_starts_no_thread(tmp_path):
    (tmp_path / "t-0").mkdir()
    rec = Recorder()
    for wb in (WriteBehind(0, rec), WriteBehind(MiB, None)):
        log = _open_log(tmp_path, wb)
        for _ in range(20):
            _append(log, 16 << 10)
        assert not wb.enabled and log.write_behind is None
        assert wb._thread is None and rec.ranges == []
        log.close()


def test_truncation_moves_the_next_range_back(tmp_path):
    (tmp_path / "t-0").mkdir()
    rec = Recorder()
    wb = WriteBehind(MiB, rec)
    log = _open_log(tmp_path, wb)
    for _ in range(20):
        _append(log, 16 << 10)
    seg = log.active_segment
    assert seg.writeback_from > 0
    seg.truncate_to(0)
    assert seg.writeback_from == 0
    for _ in range(20):
        _append(log, 16 << 10)
    assert wb.wait_idle()
    # After the truncation the file is handed over again from its new end (0).
    restarts = [o for _, o, _ in rec.ranges if o == 0]
    assert len(restarts) == 2
    wb.close()


def test_a_full_queue_skips_a_turn_and_the_next_append_takes_the_range(tmp_path):
    (tmp_path / "t-0").mkdir()
    rec = Recorder(hold=True)             # the "device" does not take anything yet
    wb = WriteBehind(64 << 10, rec)
    log = _open_log(tmp_path, wb)
    fds_before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        _append(log, 4 << 10)           # 64 KiB a batch: a hand-off each
    assert wb.skipped > 0
    # The queue holds at most its limit of duplicated descriptors (+1 in the thread's hands).
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 66
    rec.gate.set()
    assert wb.wait_idle()
    _append(log, 4 << 10)
    assert wb.wait_idle()
    # Nothing was lost: the ranges still cover the file from 0, contiguously.
    spans = sorted((o, n) for _, o, n in rec.ranges)
    assert spans[0][0] == 0
    assert all(o + n == nxt for (o, n), (nxt, _) in zip(spans, spans[1:]))
    assert spans[-1][0] + spans[-1][1] == log.active_segment.writeback_from
    wb.close()


def test_no_descriptor_to_spare_never_fails_the_append_and_the_range_waits():
    from types import SimpleNamespace
    rec = Recorder()
    wb = WriteBehind(MiB, rec)
    seg = SimpleNamespace(fd=-1, size=2 * MiB, writeback_from=0)     # os.dup: EBADF
    wb.appended(seg)                                                 # does not raise
    assert wb.skipped == 1 and seg.writeback_from == 0 and wb.handed == 0
    wb.close()


def test_no_thread_to_be_had_turns_it_off_without_failing_the_append(monkeypatch):
    import threading as th
    from types import SimpleNamespace

    def refuse(self):
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(th.Thread, "start", refuse)
    wb = WriteBehind(MiB, Recorder())
    seg = SimpleNamespace(fd=0, size=2 * MiB, writeback_from=0)
    wb.appended(seg)                                                 # does not raise
    assert not wb.enabled and wb.handed == 0 and seg.writeback_from == 0


# ---------------------------------------------------------------- the kernel's side

def test_the_kernel_holds_no_dirty_tail_longer_than_the_interval(tmp_path):
    if sync_file_range_write() is None:
        pytest.skip("no sync_file_range on this system")
    try:
        if not writeback_visible(str(tmp_path)):
            pytest.skip("this filesystem keeps its pages dirty (tmpfs?): no writeback to see")
    except NoCachestat:
        pytest.skip("no cachestat(2) on this kernel")
    (tmp_path / "t-0").mkdir()
    wb = WriteBehind.for_this_os(MiB)
    log = _open_log(tmp_path, wb)
    written = sum(_append(log, 8 << 10) for _ in range(64))     # 128 KiB a batch
    assert wb.wait_idle()
    seg = log.active_segment
    # Without the write-behind all ~2,050 pages stay dirty for vm.dirty_expire_centisecs
    # (30 s by default); with it, only the tail not yet handed over: under one interval.
    assert written >= 8 * MiB
    assert dirty_pages(seg.fd) <= MiB // 4096 + 2
    wb.close()
