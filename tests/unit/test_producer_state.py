"""Idempotent producer state: duplicates, sequence and epoch errors, transactions' LSO,
and the state surviving a clean close, a crash, a roll and a truncation."""
from __future__ import annotations

import os

import pytest

from broker.log import ORIGIN_COORDINATOR, LogConfig, PartitionLog
from broker.log.errors import (DuplicateSequenceNumberError, InvalidProducerEpochError,
                               InvalidRecordError, InvalidTxnStateError,
                               OutOfOrderSequenceNumberError)
from broker.log.producer_state import ProducerStateManager
from clients.protocol.records import COMMIT, Record, build_batch, build_control_batch

PID = 4242


def pbatch(seq: int, n: int = 1, epoch: int = 0, pid: int = PID, txn: bool = False,
           ts: int | None = None) -> bytes:
    return build_batch([Record(b"k", b"v%d" % (seq + i), [], ts) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=txn, now_ms=ts)


def open_log(path, **cfg) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(**cfg))


def seeded(tmp_path, batches: int = 8, per: int = 2, **cfg) -> tuple[PartitionLog, list]:
    log = open_log(tmp_path / "t-0", **cfg)
    infos = [log.append_as_leader(pbatch(i * per, per), 0) for i in range(batches)]
    return log, infos


def assert_last_five_are_duplicates(log: PartitionLog, infos: list, per: int = 2) -> None:
    leo, size = log.log_end_offset, log.size_in_bytes
    n = len(infos)
    for i in range(n - 5, n):
        dup = log.append_as_leader(pbatch(i * per, per), 0)
        assert dup.duplicate and (dup.first_offset, dup.last_offset) == \
            (infos[i].first_offset, infos[i].last_offset)
    assert (log.log_end_offset, log.size_in_bytes) == (leo, size)


def test_duplicate_of_each_of_last_five_returns_original_offsets(tmp_path):
    log, infos = seeded(tmp_path)
    assert [i.first_offset for i in infos] == list(range(0, 16, 2))
    assert_last_five_are_duplicates(log, infos)
    # the sixth most recent is no longer remembered: it is out of sequence, not a duplicate
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(pbatch(4, 2), 0)
    assert log.append_as_leader(pbatch(16, 2), 0).first_offset == 16


def test_duplicate_keeps_log_append_time(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(pbatch(0, 3), 0, now_ms=5_000)
    dup = log.append_as_leader(pbatch(0, 3), 0, now_ms=9_000)
    assert dup.duplicate and dup.log_append_time == first.log_append_time == 5_000


def test_out_of_order_sequences(tmp_path):
    log, _ = seeded(tmp_path, batches=2)                  # sequences 0..3
    leo = log.log_end_offset
    for seq in (5, 3, 2, 100):
        with pytest.raises(OutOfOrderSequenceNumberError):
            log.append_as_leader(pbatch(seq), 0)
    assert log.log_end_offset == leo
    assert log.append_as_leader(pbatch(4), 0).first_offset == leo


def test_out_of_order_error_names_the_batches_the_broker_remembers(tmp_path):
    log, _ = seeded(tmp_path, batches=2)                  # sequences 0..1, 2..3
    with pytest.raises(OutOfOrderSequenceNumberError) as e:
        log.append_as_leader(pbatch(7, 2), 0)
    assert f"producer {PID} epoch 0 at offset 4: sequence 7..8 does not follow 3" in str(e.value)
    assert "last batches here: 0..1 at 0, 2..3 at 2" in str(e.value)


def test_producer_epoch_rules(tmp_path):
    log, _ = seeded(tmp_path, batches=2)
    log.append_as_leader(pbatch(0, epoch=1), 0)            # bumped epoch restarts at 0
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(4, epoch=0), 0)        # fenced older epoch
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(pbatch(7, epoch=2), 0)        # new epoch must start at 0
    assert log.append_as_leader(pbatch(0, epoch=1), 0).duplicate
    log.append_as_leader(pbatch(1, epoch=1), 0)
    assert log.producers.last_entry(PID).producer_epoch == 1


def test_unknown_producer_accepted_at_any_sequence(tmp_path):
    """Kafka >= 2.5 (KIP-360): no state for the producer id -> the sequence is accepted."""
    log = open_log(tmp_path / "t-0")
    assert log.append_as_leader(pbatch(17, 3, pid=77), 0).first_offset == 0
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(pbatch(17, pid=77), 0)       # from now on it is tracked
    assert log.append_as_leader(pbatch(20, pid=77), 0).first_offset == 3


def test_sequence_wraps_after_int32_max(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(2**31 - 3, 3), 0)
    assert log.append_as_leader(pbatch(0, 2), 0).first_offset == 3


def test_producers_are_independent_and_non_idempotent_batches_ignored(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0, pid=1), 0)
    log.append_as_leader(build_batch([Record(b"k", b"v")]), 0)
    log.append_as_leader(pbatch(0, pid=2), 0)
    assert log.append_as_leader(pbatch(0, pid=1), 0).duplicate
    assert log.append_as_leader(pbatch(1, pid=2), 0).first_offset == 3
    assert set(log.producers.producers) == {1, 2}


def test_multi_batch_set_with_a_duplicate_is_rejected(tmp_path):
    log, _ = seeded(tmp_path, batches=2)
    with pytest.raises(DuplicateSequenceNumberError):
        log.append_as_leader(pbatch(2, 2) + pbatch(4, 1), 0)
    # several new batches of one producer in one set are checked in order
    assert log.append_as_leader(pbatch(4, 1) + pbatch(5, 2), 0).last_offset == 6
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(pbatch(7, 1) + pbatch(9, 1), 0)
    assert log.log_end_offset == 7


def _reopen(log: PartitionLog, clean: bool) -> PartitionLog:
    if clean:
        log.close()
    return PartitionLog(log.dir, log.config)


@pytest.mark.parametrize("clean", [True, False], ids=["close", "crash"])
def test_state_rebuilt_after_reopen(tmp_path, clean):
    log, infos = seeded(tmp_path)
    again = _reopen(log, clean)
    assert_last_five_are_duplicates(again, infos)
    with pytest.raises(OutOfOrderSequenceNumberError):
        again.append_as_leader(pbatch(17), 0)
    assert again.append_as_leader(pbatch(16), 0).first_offset == 16


@pytest.mark.parametrize("clean", [True, False], ids=["close", "crash"])
def test_fenced_epoch_after_reopen(tmp_path, clean):
    log, _ = seeded(tmp_path, batches=2)
    log.append_as_leader(pbatch(0, epoch=3), 0)
    again = _reopen(log, clean)
    with pytest.raises(InvalidProducerEpochError):
        again.append_as_leader(pbatch(4, epoch=2), 0)
    assert again.append_as_leader(pbatch(0, epoch=3), 0).duplicate
    assert again.append_as_leader(pbatch(1, epoch=3), 0).first_offset == 5


@pytest.mark.parametrize("clean", [True, False], ids=["close", "crash"])
def test_state_rebuilt_across_rolls_from_snapshot_and_replay(tmp_path, clean):
    log, infos = seeded(tmp_path, batches=30, segment_bytes=800)
    assert len(log.segments) > 3
    snaps = sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))
    assert snaps and all(int(n[:20]) in [s.base_offset for s in log.segments] for n in snaps)
    log.append_as_leader(pbatch(0, epoch=0, pid=9), 0)
    again = _reopen(log, clean)
    assert_last_five_are_duplicates(again, infos)
    assert again.append_as_leader(pbatch(1, pid=9), 0).first_offset == 61
    assert again.append_as_leader(pbatch(60, 1), 0).first_offset == 62


def test_corrupt_snapshot_falls_back_to_replay(tmp_path):
    log, infos = seeded(tmp_path, batches=30, segment_bytes=800)
    log.close()
    for n in os.listdir(log.dir):
        if n.endswith(".snapshot"):
            with open(os.path.join(log.dir, n), "wb") as f:
                f.write(b"{not json")
    again = PartitionLog(log.dir, log.config)
    assert_last_five_are_duplicates(again, infos)
    assert not [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]


def test_truncation_rebuilds_state(tmp_path):
    log, infos = seeded(tmp_path, batches=10, segment_bytes=800)
    log.truncate_to(infos[7].first_offset)                # batches 7..9 are gone
    assert log.producers.last_entry(PID).last_seq == 13
    again = log.append_as_leader(pbatch(14, 2), 0)        # not a duplicate any more
    assert not again.duplicate and again.first_offset == infos[7].first_offset
    assert log.append_as_leader(pbatch(12, 2), 0).duplicate


def test_producer_stays_known_when_log_start_passes_its_batches(tmp_path):
    """KIP-360: moving the log start past a producer's batches does not forget it (only
    producer.id.expiration.ms does), so a sequence gap is still refused."""
    log, infos = seeded(tmp_path, batches=3)
    log.append_as_leader(pbatch(0, pid=5), 0)
    log.high_watermark = log.log_end_offset
    log.delete_records_before(6)
    assert set(log.producers.producers) == {5, PID}
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(pbatch(99), 0)
    assert log.append_as_leader(pbatch(4, 2), 0).duplicate                # its last batch
    assert log.append_as_leader(pbatch(6), 0).first_offset == 7


def test_transactions_hold_back_the_last_stable_offset(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(build_batch([Record(b"k", b"v")]), 0)
    log.append_as_leader(pbatch(0, 2, txn=True), 0)
    log.append_as_leader(pbatch(2, 1, txn=True), 0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 1
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(pbatch(3), 0)
    marker = build_control_batch(COMMIT, producer_id=PID, producer_epoch=0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker, 0)                   # clients may not write markers
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(build_control_batch(COMMIT, producer_id=PID, producer_epoch=-1), 0,
                             origin=ORIGIN_COORDINATOR)
    assert log.append_as_leader(marker, 0, origin=ORIGIN_COORDINATOR).first_offset == 4
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 5
    log.append_as_leader(pbatch(3, txn=True), 0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 5
    again = PartitionLog(log.dir, log.config)              # open transaction survives a crash
    again.high_watermark = again.log_end_offset
    assert again.last_stable_offset == 5


def test_follower_appends_update_state_without_checks(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = build_batch([Record(b"k", b"v")], producer_id=PID, producer_epoch=3, base_sequence=40)
    log.append_as_follower(data)
    entry = log.producers.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (3, 40, 0)


def test_manager_expiration_and_snapshot_pruning(tmp_path):
    ps = ProducerStateManager(str(tmp_path))
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0, ts=1_000), 0)
    assert log.producers.remove_expired(now_ms=1_000 + 86_400_000 - 1, expiration_ms=86_400_000) == 0
    assert log.producers.remove_expired(now_ms=1_000 + 86_400_000, expiration_ms=86_400_000) == 1
    ps.map_end_offset = 10
    ps.take_snapshot()
    ps.map_end_offset = 20
    ps.take_snapshot()
    assert ps.snapshot_offsets() == [10, 20]
    assert ps.load_latest_snapshot(15) == 10 and ps.snapshot_offsets() == [10]
    ps.delete_snapshots_before(11)
    assert ps.snapshot_offsets() == []


def test_snapshots_do_not_pile_up_over_restarts(tmp_path):
    log = open_log(tmp_path / "t-0")
    for i in range(5):
        log.append_as_leader(pbatch(i), 0)
        log.close()
        log = PartitionLog(log.dir, log.config)
    assert log.producers.snapshot_offsets() == [5]
    assert log.append_as_leader(pbatch(4), 0).duplicate
