"""The partition side of transactions: markers end a producer's transaction, aborted ones
are indexed per segment (`.txnindex`) for read_committed fetches, and the last stable
offset waits for open transactions and for markers the high watermark has not passed.
Leader appends, follower appends, restarts and crash recovery all build the same index."""
from __future__ import annotations

import os

import pytest

from broker.log import ORIGIN_COORDINATOR, LogConfig, PartitionLog
from broker.log.errors import TransactionCoordinatorFencedError
from broker.log.txn_index import AbortedTxn
from clients.protocol.read_committed import aborted_filter
from clients.protocol.records import ABORT, COMMIT, Record, build_batch, build_control_batch

P, Q = 1000, 2000            # two transactional producers


class Txns:
    """Sequences per producer, so every batch is what a real transactional producer sends."""

    def __init__(self, log: PartitionLog, epoch: int = 0):
        self.log = log
        self.epoch = epoch
        self.seq: dict[int, int] = {}

    def data(self, pid: int, *values: bytes) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(values)
        info = self.log.append_as_leader(build_batch(
            [Record(None, v) for v in values], producer_id=pid, producer_epoch=self.epoch,
            base_sequence=seq, is_transactional=True), 0)
        return info.first_offset

    def plain(self, *values: bytes) -> int:
        return self.log.append_as_leader(build_batch([Record(None, v) for v in values]), 0).first_offset

    def end(self, pid: int, control: int, coordinator_epoch: int = 0) -> int:
        return self.log.append_as_leader(build_control_batch(
            control, producer_id=pid, producer_epoch=self.epoch,
            coordinator_epoch=coordinator_epoch), 0, origin=ORIGIN_COORDINATOR).first_offset


def _read(log: PartitionLog, start: int = 0) -> bytes:
    info = log.read(start, 10**9, log.last_stable_offset)
    return b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)


def _committed_values(log: PartitionLog, start: int = 0) -> list[bytes | None]:
    """What a read_committed consumer gets: records below the LSO without aborted ones."""
    aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
               for t in log.collect_aborted_txns(start, log.last_stable_offset)]
    return [r.value for r in aborted_filter(_read(log, start), start, aborted)]


def test_an_aborted_transaction_is_indexed_and_hidden_from_read_committed(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    t = Txns(log)
    t.plain(b"before")                       # 0
    t.data(P, b"a1", b"a2")                  # 1-2
    t.data(Q, b"q1")                         # 3
    t.data(P, b"a3")                         # 4
    assert log.last_stable_offset == 0       # nothing stable yet: the HW is 0
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 1       # P's open transaction starts at 1
    abort_at = t.end(P, ABORT)               # 5
    commit_at = t.end(Q, COMMIT)             # 6
    # The markers are not replicated yet: the LSO still waits at P's first offset.
    assert log.last_stable_offset == 1
    log.high_watermark = abort_at + 1
    assert log.last_stable_offset == 3       # P's marker is in; Q's is not yet
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.log_end_offset == commit_at + 1

    # When P's abort was written Q was still open from 3: that is the entry's LSO.
    assert log.local_log.segments[-1].txn_index.entries == [AbortedTxn(P, 1, abort_at, 3)]
    assert log.collect_aborted_txns(0, log.last_stable_offset) == [AbortedTxn(P, 1, abort_at, 3)]
    assert log.collect_aborted_txns(abort_at + 1, log.last_stable_offset) == []
    assert _committed_values(log) == [b"before", b"q1"]
    # read_uncommitted sees everything that is not a marker, offsets dense apart from them.
    all_values = [r.value for r in aborted_filter(_read(log), 0, [])]
    assert all_values == [b"before", b"a1", b"a2", b"q1", b"a3"]


def test_a_commit_is_not_indexed_and_a_marker_of_an_older_coordinator_is_refused(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    t = Txns(log)
    t.data(P, b"x")
    t.end(P, COMMIT, coordinator_epoch=5)
    t.data(P, b"y")
    with pytest.raises(TransactionCoordinatorFencedError):
        t.end(P, ABORT, coordinator_epoch=4)     # a deposed coordinator's late marker
    assert log.log_end_offset == 3                # nothing was appended
    t.end(P, ABORT, coordinator_epoch=5)
    log.high_watermark = log.log_end_offset
    assert [e.first_offset for e in log.collect_aborted_txns(0, log.log_end_offset)] == [2]
    assert _committed_values(log) == [b"x"]


def test_a_follower_builds_the_same_index_from_the_leaders_bytes(tmp_path):
    leader = PartitionLog(str(tmp_path / "leader" / "t-0"), LogConfig())
    t = Txns(leader)
    t.data(P, b"a")
    t.data(Q, b"b")
    t.end(P, ABORT)
    t.end(Q, COMMIT)
    leader.high_watermark = leader.log_end_offset
    follower = PartitionLog(str(tmp_path / "follower" / "t-0"), LogConfig())
    info = leader.read(0, 10**9)
    follower.append_as_follower(b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions))
    assert follower.local_log.segments[-1].txn_index.entries == \
        leader.local_log.segments[-1].txn_index.entries == [AbortedTxn(P, 0, 2, 1)]
    assert follower.last_stable_offset == 0          # its HW has not moved yet
    follower.high_watermark = follower.log_end_offset
    assert _committed_values(follower) == [b"b"]


SMALL_SEGMENTS = LogConfig(segment_bytes=400)


def _six_transactions_over_segments(d: str) -> tuple[PartitionLog, Txns]:
    """Three aborted and three committed transactions of P, over several segments."""
    log = PartitionLog(d, SMALL_SEGMENTS)
    t = Txns(log)
    for i in range(6):
        t.data(P, b"p" * 60)
        t.end(P, ABORT if i % 2 == 0 else COMMIT)
    return log, t


def test_the_index_spans_segments_and_survives_a_clean_restart(tmp_path):
    d = str(tmp_path / "t-0")
    cfg = SMALL_SEGMENTS
    log, t = _six_transactions_over_segments(d)
    t.data(Q, b"open")                                  # still open at the restart
    log.high_watermark = log.log_end_offset
    expected = log.collect_aborted_txns(0, log.log_end_offset)
    assert len(log.local_log.segments) > 2 and len(expected) == 3
    open_at = log.log_end_offset - 1
    log.close()

    again = PartitionLog(d, cfg, recovery_point=log.log_end_offset, clean_shutdown=True)
    again.high_watermark = again.log_end_offset
    assert again.collect_aborted_txns(0, again.log_end_offset) == expected
    assert again.last_stable_offset == open_at          # Q's transaction is still open
    assert _committed_values(again) == [b"p" * 60] * 3
    again.close()


def test_crash_recovery_rebuilds_the_index_of_unflushed_segments(tmp_path):
    d = str(tmp_path / "t-0")
    cfg = SMALL_SEGMENTS
    log, _ = _six_transactions_over_segments(d)
    log.high_watermark = log.log_end_offset
    expected = log.collect_aborted_txns(0, log.log_end_offset)
    for seg in log.local_log.segments:
        seg.close_handlers()
    # A crash before the index writes reached the disk: every .txnindex is lost.
    for name in os.listdir(d):
        if name.endswith(".txnindex"):
            os.unlink(os.path.join(d, name))

    recovered = PartitionLog(d, cfg, recovery_point=0, clean_shutdown=False)
    recovered.high_watermark = recovered.log_end_offset
    assert recovered.collect_aborted_txns(0, recovered.log_end_offset) == expected
    assert _committed_values(recovered) == [b"p" * 60] * 3
    recovered.close()


def test_truncation_below_a_marker_drops_its_entry_and_reopens_the_transaction(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    t = Txns(log)
    t.data(P, b"a")
    abort_at = t.end(P, ABORT)
    assert log.collect_aborted_txns(0, 10) != []
    log.truncate_to(abort_at)                 # a follower truncating to its leader
    assert log.collect_aborted_txns(0, 10) == []
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0         # P's transaction is open again


def test_compaction_removes_aborted_records_and_keeps_the_entries_of_markers_that_stay(tmp_path):
    from broker.log.cleaner import LogCleaner
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", min_cleanable_dirty_ratio=0.01)
    log = PartitionLog(str(tmp_path / "t-0"), cfg)
    seq = 0
    for i in range(8):
        log.append_as_leader(build_batch([Record(b"k", b"v%d" % i)]), 0)
        log.append_as_leader(build_batch([Record(b"t", b"x" * 40)], producer_id=P, producer_epoch=0,
                                         base_sequence=seq, is_transactional=True), 0)
        seq += 1
        log.append_as_leader(build_control_batch(ABORT, producer_id=P, producer_epoch=0), 0,
                             origin=ORIGIN_COORDINATOR)
    log.roll()
    log.high_watermark = log.log_end_offset
    before = log.collect_aborted_txns(0, log.log_end_offset)
    assert len(before) == 8
    assert LogCleaner().clean_filthiest([log], 0) is log
    # The first cleaning removes the aborted records (the producer's last batch stays as an
    # empty header); the markers met their batches in it, so they and their entries stay.
    assert log.collect_aborted_txns(0, log.log_end_offset) == before
    assert b"x" * 40 not in [r.value for r in aborted_filter(_read(log), 0, [])]
    assert _committed_values(log) == [b"v7"]
