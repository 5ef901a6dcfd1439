"""broker.txn.metadata: the transaction coordinator's per-transactional-id state machine."""
from __future__ import annotations

import copy

import pytest

from broker.txn.metadata import (
    MAX_EPOCH,
    VALID_PREVIOUS,
    TransactionMetadata,
    TxnState,
    TxnStateError,
    TxnTransit,
)
from clients.protocol.errors import Code

S = TxnState
PID = 1000
TP0, TP1, TP2 = ("t", 0), ("t", 1), ("u", 0)


def fresh() -> TransactionMetadata:
    """As the coordinator creates it on the first InitProducerId: epoch -1, Empty."""
    return TransactionMetadata("tx", PID, -1, 60_000, S.EMPTY, 0)


def apply(md: TransactionMetadata, t: TxnTransit) -> TransactionMetadata:
    assert md.pending_state == t.state
    md.complete_transition(t)
    assert md.pending_state is None and md.state == t.state
    return md


def initialised(epoch: int = 0, **kw) -> TransactionMetadata:
    return TransactionMetadata("tx", PID, epoch, 60_000, S.EMPTY, 0, **kw)


def snapshot(md: TransactionMetadata) -> dict:
    return copy.deepcopy(vars(md))


def in_state(state: TxnState, epoch: int = 5, tv: int = 0) -> TransactionMetadata:
    return TransactionMetadata("tx", PID, epoch, 60_000, state, 10, partitions={TP0},
                               txn_start_ms=5 if state != S.EMPTY else -1,
                               client_transaction_version=tv)


def test_state_names_and_ids_match_kafka():
    assert [s.kafka_name for s in S] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence"]
    assert [int(s) for s in S] == list(range(8))
    assert VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS[S.PREPARE_ABORT] == {
        S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert set(VALID_PREVIOUS) == set(S)


def test_full_lifecycle_commit_then_abort():
    md = fresh()
    t = md.prepare_increment_producer_epoch(30_000, None, now_ms=100)
    assert (t.producer_epoch, t.last_producer_epoch, t.state) == (0, -1, S.EMPTY)
    apply(md, t)
    assert (md.producer_epoch, md.txn_timeout_ms, md.txn_last_update_ms) == (0, 30_000, 100)

    apply(md, md.prepare_add_partitions({TP0}, now_ms=200))
    assert md.state == S.ONGOING and md.partitions == {TP0} and md.txn_start_ms == 200
    apply(md, md.prepare_add_partitions({TP1}, now_ms=250))
    assert md.partitions == {TP0, TP1} and md.txn_start_ms == 200 and md.txn_last_update_ms == 250

    t = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=300)
    assert t.partitions == {TP0, TP1} and t.producer_epoch == 0 and t.txn_start_ms == 200
    apply(md, t)
    apply(md, md.prepare_complete(now_ms=400))
    assert md.state == S.COMPLETE_COMMIT and md.partitions == set()
    assert (md.producer_id, md.producer_epoch, md.txn_last_update_ms) == (PID, 0, 400)

    apply(md, md.prepare_add_partitions({TP2}, now_ms=500))
    assert md.state == S.ONGOING and md.partitions == {TP2} and md.txn_start_ms == 500
    apply(md, md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=600))
    apply(md, md.prepare_complete(now_ms=700))
    assert md.state == S.COMPLETE_ABORT and md.partitions == set() and md.producer_epoch == 0


@pytest.mark.parametrize("state, prepare, code", [
    (S.PREPARE_COMMIT, lambda m: m.prepare_add_partitions({TP1}, 1), Code.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_ABORT, lambda m: m.prepare_add_partitions({TP1}, 1), Code.CONCURRENT_TRANSACTIONS),
    (S.DEAD, lambda m: m.prepare_add_partitions({TP1}, 1), Code.INVALID_TXN_STATE),
    (S.PREPARE_EPOCH_FENCE, lambda m: m.prepare_add_partitions({TP1}, 1), Code.INVALID_TXN_STATE),
    (S.EMPTY, lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1), Code.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1), Code.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1), Code.INVALID_TXN_STATE),
    (S.PREPARE_COMMIT, lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1), Code.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 1), Code.INVALID_TXN_STATE),
    (S.PREPARE_EPOCH_FENCE, lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 1), Code.INVALID_TXN_STATE),
    # Aborting with nothing added is for transaction version 2 clients only.
    (S.EMPTY, lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 1), Code.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, lambda m: m.prepare_abort_or_commit(S.PREPARE_ABORT, 1), Code.INVALID_TXN_STATE),
    (S.ONGOING, lambda m: m.prepare_complete(1), Code.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, lambda m: m.prepare_complete(1), Code.INVALID_TXN_STATE),
    (S.ONGOING, lambda m: m.prepare_increment_producer_epoch(1, None, 1), Code.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_ABORT, lambda m: m.prepare_increment_producer_epoch(1, None, 1), Code.CONCURRENT_TRANSACTIONS),
    (S.DEAD, lambda m: m.prepare_increment_producer_epoch(1, None, 1), Code.INVALID_TXN_STATE),
    (S.ONGOING, lambda m: m.prepare_producer_id_rotation(7, 1, 1, False), Code.CONCURRENT_TRANSACTIONS),
    (S.EMPTY, lambda m: m.prepare_fence_producer_epoch(), Code.INVALID_TXN_STATE),
    (S.PREPARE_COMMIT, lambda m: m.prepare_fence_producer_epoch(), Code.INVALID_TXN_STATE),
    (S.ONGOING, lambda m: m.prepare_dead(), Code.INVALID_TXN_STATE),
    (S.PREPARE_COMMIT, lambda m: m.prepare_no_transit(), Code.INVALID_TXN_STATE),
])
def test_refused_transitions_raise_the_kafka_code_and_change_nothing(state, prepare, code):
    md = in_state(state)
    before = snapshot(md)
    with pytest.raises(TxnStateError) as e:
        prepare(md)
    assert e.value.code == code
    assert snapshot(md) == before and md.pending_state is None


def test_second_prepare_while_pending_is_concurrent_and_abort_pending_restores():
    md = in_state(S.ONGOING)
    before = snapshot(md)
    t = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=50)
    assert md.has_pending() and md.pending_state == S.PREPARE_COMMIT
    assert md.state == S.ONGOING and md.txn_last_update_ms == 10   # not applied yet
    for again in (lambda: md.prepare_add_partitions({TP1}, 60),
                  lambda: md.prepare_abort_or_commit(S.PREPARE_ABORT, 60),
                  md.prepare_fence_producer_epoch, md.prepare_no_transit):
        with pytest.raises(TxnStateError) as e:
            again()
        assert e.value.code == Code.CONCURRENT_TRANSACTIONS
    md.abort_pending()
    assert not md.has_pending() and snapshot(md) == before
    with pytest.raises(TxnStateError) as e:
        md.complete_transition(t)           # dropped: no longer completable
    assert e.value.code == Code.INVALID_TXN_STATE
    apply(md, md.prepare_add_partitions({TP1}, now_ms=60))   # usable again
    assert md.partitions == {TP0, TP1}


def test_complete_transition_refuses_a_transit_that_is_not_the_pending_one():
    md = in_state(S.ONGOING)
    commit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=50)
    md.abort_pending()
    md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=50)
    before = snapshot(md)
    with pytest.raises(TxnStateError) as e:
        md.complete_transition(commit)
    assert e.value.code == Code.INVALID_TXN_STATE and snapshot(md) == before


def test_complete_transition_refuses_a_state_that_cannot_follow_the_current_one():
    md = in_state(S.ONGOING)
    done = in_state(S.PREPARE_COMMIT).prepare_complete(now_ms=50)   # a COMPLETE_COMMIT transit
    md.pending_state = S.COMPLETE_COMMIT                             # forged: Ongoing -> CompleteCommit
    before = snapshot(md)
    with pytest.raises(TxnStateError) as e:
        md.complete_transition(done)
    assert e.value.code == Code.INVALID_TXN_STATE and snapshot(md) == before


def test_no_transit_keeps_every_value():
    md = in_state(S.ONGOING)
    md.prev_producer_id = 42
    t = md.prepare_no_transit()
    assert md.pending_state == S.ONGOING
    apply(md, t)
    assert (md.partitions, md.prev_producer_id, md.producer_epoch, md.txn_start_ms) == ({TP0}, 42, 5, 5)


def test_increment_epoch_plain_init_forgets_the_last_epoch():
    md = initialised(3, last_producer_epoch=2)
    md.partitions = {TP0}
    apply(md, md.prepare_increment_producer_epoch(9_000, None, now_ms=77))
    assert (md.producer_epoch, md.last_producer_epoch) == (4, -1)
    assert (md.partitions, md.txn_start_ms, md.txn_timeout_ms, md.txn_last_update_ms) == (set(), -1, 9_000, 77)


def test_increment_epoch_with_expected_current_pair_remembers_the_old_epoch():
    md = initialised(3)
    apply(md, md.prepare_increment_producer_epoch(60_000, (PID, 3), now_ms=1))
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (PID, 4, 3)


def test_increment_epoch_retry_of_the_last_bump_keeps_the_epoch():
    md = initialised(3)
    apply(md, md.prepare_increment_producer_epoch(60_000, (PID, 3), now_ms=1))
    # The answer got lost; the client retries with the pair it still holds.
    apply(md, md.prepare_increment_producer_epoch(60_000, (PID, 3), now_ms=2))
    assert (md.producer_epoch, md.last_producer_epoch) == (4, 3)


@pytest.mark.parametrize("expected", [(PID, 1), (PID + 1, 3), (PID + 1, 2), (PID, 5)])
def test_increment_epoch_with_a_stale_pair_is_fenced(expected):
    md = initialised(3, last_producer_epoch=2)
    before = snapshot(md)
    with pytest.raises(TxnStateError) as e:
        md.prepare_increment_producer_epoch(60_000, expected, now_ms=1)
    assert e.value.code == Code.PRODUCER_FENCED and snapshot(md) == before


def test_increment_epoch_after_a_plain_init_fences_the_old_producers_retry():
    md = initialised(3)
    apply(md, md.prepare_increment_producer_epoch(60_000, (PID, 3), now_ms=1))   # producer A: 3 -> 4
    apply(md, md.prepare_increment_producer_epoch(60_000, None, now_ms=2))       # producer B: 4 -> 5
    with pytest.raises(TxnStateError) as e:
        md.prepare_increment_producer_epoch(60_000, (PID, 3), now_ms=3)          # A retries: fenced
    assert e.value.code == Code.PRODUCER_FENCED


def test_increment_epoch_refuses_an_exhausted_epoch_and_the_caller_rotates():
    md = initialised(MAX_EPOCH - 1)
    assert md.is_producer_epoch_exhausted() and not initialised(MAX_EPOCH - 2).is_producer_epoch_exhausted()
    with pytest.raises(ValueError):
        md.prepare_increment_producer_epoch(60_000, None, now_ms=1)
    assert md.pending_state is None
    apply(md, md.prepare_producer_id_rotation(PID + 1, 5_000, now_ms=9, record_last_epoch=True))
    assert (md.producer_id, md.prev_producer_id, md.producer_epoch, md.last_producer_epoch) == (
        PID + 1, PID, 0, MAX_EPOCH - 1)
    assert (md.state, md.partitions, md.txn_timeout_ms, md.txn_start_ms, md.txn_last_update_ms) == (
        S.EMPTY, set(), 5_000, -1, 9)
    # The old producer's retry (old id, exhausted epoch) is recognised: no bump.
    apply(md, md.prepare_increment_producer_epoch(5_000, (PID, MAX_EPOCH - 1), now_ms=10))
    assert (md.producer_id, md.producer_epoch) == (PID + 1, 0)


def test_rotation_without_recording_the_last_epoch():
    md = initialised(7)
    md.state = S.COMPLETE_ABORT
    apply(md, md.prepare_producer_id_rotation(PID + 5, 1_000, now_ms=3, record_last_epoch=False))
    assert (md.producer_id, md.prev_producer_id, md.producer_epoch, md.last_producer_epoch) == (PID + 5, PID, 0, -1)


def test_fence_bumps_the_epoch_keeps_partitions_and_leads_to_an_abort():
    md = in_state(S.ONGOING, epoch=5)
    t = md.prepare_fence_producer_epoch()
    assert (t.state, t.producer_epoch, t.last_producer_epoch, t.partitions) == (
        S.PREPARE_EPOCH_FENCE, 6, -1, {TP0})
    apply(md, t)
    apply(md, md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=20))
    assert md.producer_epoch == 6 and md.partitions == {TP0}
    apply(md, md.prepare_complete(now_ms=30))
    assert md.state == S.COMPLETE_ABORT and md.producer_epoch == 6


def test_fence_at_the_max_epoch_keeps_it():
    md = in_state(S.ONGOING, epoch=MAX_EPOCH)
    assert md.prepare_fence_producer_epoch().producer_epoch == MAX_EPOCH


def test_kip890_v2_commit_bumps_the_epoch():
    md = in_state(S.ONGOING, epoch=5, tv=2)
    t = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=20, client_transaction_version=2)
    assert (t.producer_epoch, t.last_producer_epoch, t.next_producer_id, t.client_transaction_version) == (6, 5, -1, 2)
    apply(md, t)
    apply(md, md.prepare_complete(now_ms=30))
    assert (md.state, md.producer_id, md.producer_epoch, md.last_producer_epoch) == (S.COMPLETE_COMMIT, PID, 6, 5)


def test_kip890_v0_commit_keeps_the_epoch():
    md = in_state(S.ONGOING, epoch=5)
    md.last_producer_epoch = 4
    t = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=20)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)


def test_kip890_v2_exhausting_commit_moves_to_the_next_producer_id_at_complete():
    md = in_state(S.ONGOING, epoch=MAX_EPOCH - 2, tv=2)
    with pytest.raises(ValueError):        # the bumped epoch is exhausted: a next id is needed
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=20, client_transaction_version=2)
    assert md.pending_state is None
    t = md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=20, next_producer_id=PID + 9,
                                   client_transaction_version=2)
    assert (t.producer_id, t.producer_epoch, t.next_producer_id) == (PID, MAX_EPOCH - 1, PID + 9)
    apply(md, t)
    apply(md, md.prepare_complete(now_ms=30))
    assert (md.producer_id, md.prev_producer_id, md.next_producer_id, md.producer_epoch) == (PID + 9, PID, -1, 0)
    assert md.last_producer_epoch == MAX_EPOCH - 2 and md.state == S.COMPLETE_COMMIT


def test_kip890_v2_abort_with_nothing_added_starts_now():
    md = in_state(S.COMPLETE_COMMIT, epoch=5, tv=2)
    md.partitions = set()
    t = md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=40, client_transaction_version=2)
    assert (t.state, t.txn_start_ms, t.producer_epoch) == (S.PREPARE_ABORT, 40, 6)
    apply(md, t)
    apply(md, md.prepare_complete(now_ms=41))
    assert md.state == S.COMPLETE_ABORT


def test_next_producer_id_needs_transaction_version_2():
    md = in_state(S.ONGOING)
    with pytest.raises(ValueError):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, now_ms=1, next_producer_id=PID + 1)
    assert md.pending_state is None


def test_dead_from_an_idle_id():
    md = in_state(S.COMPLETE_COMMIT)
    t = md.prepare_dead()
    assert t.state == S.DEAD and t.partitions == frozenset()
    apply(md, t)


def test_from_transit_round_trip():
    md = in_state(S.ONGOING, epoch=5, tv=2)
    md.prev_producer_id, md.last_producer_epoch = 77, 4
    t = md.prepare_abort_or_commit(S.PREPARE_ABORT, now_ms=20, client_transaction_version=2)
    loaded = TransactionMetadata.from_transit("tx", t)
    apply(md, t)
    assert vars(loaded) == vars(md)
    assert loaded.pending_state is None and loaded.state == S.PREPARE_ABORT
    assert loaded.partitions is not md.partitions


def test_from_transit_then_no_transit_gives_the_same_record():
    md = in_state(S.EMPTY, epoch=3, tv=2)
    t = md.prepare_add_partitions({TP0, TP2}, now_ms=99, client_transaction_version=2)
    assert TransactionMetadata.from_transit("tx", t).prepare_no_transit() == t
