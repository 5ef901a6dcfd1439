"""The periodic checkpoint writes and fsyncs its files on a thread of its own: an fsync
waits for the file system's journal (0.4-0.75 s under heavy writes in the latency
benchmark), and on the event loop it held every request of the broker meanwhile. Writes
stay in the order their offsets were taken."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from broker.log import LogConfig, LogManager, checkpoints
from clients.protocol.records import Record, build_batch

SLOW_S = 0.2


def _manager(tmp_path) -> LogManager:
    m = LogManager([str(tmp_path / "logs")], LogConfig())
    log = m.create_log("t", 0)
    for i in range(5):
        log.append_as_leader(build_batch([Record(None, b"v%d" % i)]), 0)
    return m


def _slow_writes(monkeypatch) -> list[tuple[str, dict]]:
    real = checkpoints.write_offsets
    written: list[tuple[str, dict]] = []

    def slow(path, offsets):
        time.sleep(SLOW_S)              # a journal commit under load
        real(path, offsets)
        written.append((path.rsplit("/", 1)[-1], dict(offsets)))
    monkeypatch.setattr(checkpoints, "write_offsets", slow)
    return written


def _hw_file(tmp_path) -> list[str]:
    return (tmp_path / "logs" / "replication-offset-checkpoint").read_text().split("\n")[:3]


def test_the_periodic_checkpoint_does_not_hold_the_event_loop(tmp_path, monkeypatch):
    m = _manager(tmp_path)
    m.get_log("t", 0).high_watermark = 3
    written = _slow_writes(monkeypatch)

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        gaps: list[float] = []
        last = loop.time()

        async def ticker():
            nonlocal last
            while True:
                await asyncio.sleep(0.01)
                now = loop.time()
                gaps.append(now - last)
                last = now
        t = loop.create_task(ticker())
        start = loop.time()
        await m.checkpoint_recovery_points_async()
        took = loop.time() - start
        t.cancel()
        return took, max(gaps)

    took, longest_gap = asyncio.run(main())
    assert len(written) >= 3 and took >= 3 * SLOW_S
    assert longest_gap < SLOW_S / 2, f"the loop stood still for {longest_gap:.3f} s"
    assert _hw_file(tmp_path) == ["0", "1", "t 0 3"]
    m.close()


def test_a_later_blocking_checkpoint_lands_after_the_one_in_flight(tmp_path, monkeypatch):
    # A truncation (or deletion) checkpoints at once while the periodic write of older
    # offsets is still in flight: the newer offsets must be what stays on disk.
    m = _manager(tmp_path)
    log = m.get_log("t", 0)
    log.high_watermark = 3
    written = _slow_writes(monkeypatch)

    async def main() -> None:
        periodic = asyncio.get_running_loop().create_task(m.checkpoint_recovery_points_async())
        await asyncio.sleep(SLOW_S / 4)          # its offsets are taken, its writes under way
        log.high_watermark = 5
        m.checkpoint_recovery_points()           # blocking: after the write in flight
        await periodic

    asyncio.run(main())
    hw = [offsets for name, offsets in written if name == "replication-offset-checkpoint"]
    assert hw == [{("t", 0): 3}, {("t", 0): 5}]
    assert _hw_file(tmp_path) == ["0", "1", "t 0 5"]
    m.close()


def test_a_failed_write_takes_its_log_dir_offline(tmp_path, monkeypatch):
    # Kafka's checkpoint IOException: the dir goes offline (KIP-112) rather than the error
    # surfacing in the periodic task, which would only log it. (A full disk, ENOSPC, is not a
    # failed disk: test_log_enospc*.)
    m = _manager(tmp_path)
    failed: list = []
    m.on_dir_failure = lambda d, tps: failed.append((d, tps))

    def broken(path, offsets):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(checkpoints, "write_offsets", broken)

    async def main() -> None:
        await m.checkpoint_recovery_points_async()

    asyncio.run(main())
    assert failed == [(m.log_dirs[0], [("t", 0)])]
    assert "Input/output error" in m.offline_dirs[m.log_dirs[0]]
    monkeypatch.undo()
    m.close()


def test_no_checkpoint_is_written_after_close(tmp_path, monkeypatch):
    # The clean-shutdown marker says the files are final: a periodic task still running
    # at shutdown must not rewrite them afterwards.
    m = _manager(tmp_path)
    m.get_log("t", 0).high_watermark = 4
    m.close()
    written = _slow_writes(monkeypatch)
    m.get_log("t", 0).high_watermark = 5
    asyncio.run(m.checkpoint_recovery_points_async())
    m.checkpoint_recovery_points()
    assert written == []
    assert _hw_file(tmp_path) == ["0", "1", "t 0 4"]


@pytest.mark.alone
def test_producer_snapshots_are_fsynced_off_the_event_loop(tmp_path, monkeypatch):
    """A roll writes the producer snapshot at once (a truncation may need it) but leaves
    its fsync to the checkpoint thread, as Kafka's scheduler does: with many producers that
    fsync took seconds on the loop. close() waits for it."""
    from broker.log import log_manager
    real = log_manager._fsync_file
    synced: list[str] = []

    def slow(path):
        time.sleep(SLOW_S)
        real(path)
        synced.append(path.rsplit("/", 1)[-1])
    monkeypatch.setattr(log_manager, "_fsync_file", slow)
    from broker.log import producer_state
    real_write = producer_state.atomic_write

    def write(path, data, fsync=True):
        if fsync:
            time.sleep(SLOW_S)                         # the fsync, had it stayed here
        real_write(path, data, fsync)
    monkeypatch.setattr(producer_state, "atomic_write", write)
    m = LogManager([str(tmp_path / "logs")], LogConfig(segment_bytes=300))
    log = m.create_log("t", 0)

    def idem(seq: int) -> bytes:
        return build_batch([Record(None, b"x" * 100)], producer_id=9, producer_epoch=0,
                           base_sequence=seq)
    log.append_as_leader(idem(0), 0)
    log.append_as_leader(idem(1), 0)
    start = time.monotonic()
    log.append_as_leader(idem(2), 0)                   # rolls: a snapshot at offset 2
    took = time.monotonic() - start
    assert len(log.segments) >= 2
    assert took < SLOW_S / 2, f"the roll waited {took:.3f}s for an fsync"
    assert (tmp_path / "logs" / "t-0" / "00000000000000000002.snapshot").exists()
    m.close()
    assert "00000000000000000002.snapshot" in synced     # fsynced before close() returned


def test_a_crash_right_after_retention_keeps_the_producer_state(tmp_path, monkeypatch):
    """Retention that expires a whole idle log rolls (a new snapshot, its fsync queued) and
    deletes the older, durable snapshots in the same call. The new one must be durable
    before the old ones go: a crash then (the queued fsync never ran, the snapshot's data
    lost) must still leave the producer known, so its retry is a duplicate."""
    from broker.log import log_manager, producer_state
    queued: list[str] = []
    monkeypatch.setattr(log_manager, "_fsync_file", lambda p: queued.append(p) or True)
    synced: list[str] = []
    real_fsync = getattr(producer_state, "_fsync", None)
    monkeypatch.setattr(producer_state, "_fsync", lambda p: (synced.append(p), real_fsync(p)),
                        raising=False)
    d = str(tmp_path / "logs")
    m = LogManager([d], LogConfig(segment_bytes=300, retention_ms=1000))
    log = m.create_log("t", 0)

    def idem(seq: int) -> bytes:
        return build_batch([Record(None, b"x" * 100)], producer_id=9, producer_epoch=0,
                           base_sequence=seq)
    for seq in range(6):
        log.append_as_leader(idem(seq), 0)
    log.high_watermark = log.log_end_offset
    queued.clear()                                  # all earlier snapshots: durable
    assert m.run_retention(now_ms=log.segments[-1].largest_timestamp + 10_000) > 0
    assert log.log_start_offset == log.log_end_offset == 6
    # Crash before the checkpoint thread ran: what it did not fsync lost its data.
    for p in queued:
        if p not in synced and os.path.exists(p):
            open(p, "wb").close()
    again = LogManager([d], LogConfig(segment_bytes=300, retention_ms=1000)).get_log("t", 0)
    assert 9 in again.producers.producers
    assert again.append_as_leader(idem(5), 0).duplicate


def test_a_failed_background_fsync_is_not_a_clean_shutdown(tmp_path, monkeypatch):
    from broker.log import log_manager
    from broker.log.log_manager import CLEAN_SHUTDOWN_FILE
    monkeypatch.setattr(log_manager, "_fsync_file", lambda p: False)     # EIO from the disk
    m = LogManager([str(tmp_path / "logs")], LogConfig(segment_bytes=300))
    log = m.create_log("t", 0)
    for seq in range(4):                                                 # rolls: snapshots
        log.append_as_leader(build_batch([Record(None, b"x" * 100)], producer_id=9,
                                         producer_epoch=0, base_sequence=seq), 0)
    m.close()
    assert not (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()        # next start recovers


def test_one_logs_retention_failure_does_not_stop_the_others(tmp_path, monkeypatch):
    m = LogManager([str(tmp_path / "logs")], LogConfig(segment_bytes=300, retention_ms=1000))
    logs = [m.create_log("t", p) for p in range(2)]
    for log in logs:
        for _ in range(4):
            log.append_as_leader(build_batch([Record(None, b"x" * 100)], now_ms=1_000), 0)
        log.high_watermark = log.log_end_offset

    def broken(now_ms):
        raise RuntimeError("a bug in one log")
    monkeypatch.setattr(logs[0], "delete_retention_segments", broken)
    assert m.run_retention(now_ms=10**12) > 0           # the second log's retention ran
    assert logs[1].log_start_offset == logs[1].log_end_offset == 4
    m.close()
