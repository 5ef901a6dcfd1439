"""The transaction coordinator (broker/txn/coordinator.py) against fakes of its collaborators:
EndTxn of transaction version 2 (KIP-890 part 2: every end bumps the epoch) and of versions
0-4, retries and late requests, epoch exhaustion, AddPartitions waiting for the last
transaction to settle, expiry of idle ids, and InitProducerId fencing an open transaction.

No sockets, no log: the state manager applies each transition at once, the marker sender
records what it was asked (and can be held on an Event), producer ids count from 1000.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
from typing import Any, Awaitable, Callable

import pytest

from broker.txn import coordinator as coordinator_module
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.metadata import MAX_EPOCH, TransactionMetadata, TxnState, TxnTransit
from broker.txn.settings import TxnSettings
from clients.protocol.errors import Code

TID, TP, TIMEOUT_MS, EXPIRATION_MS, COORDINATOR_EPOCH = "tx", ("t", 0), 60_000, 10_000, 7
S = TxnState


def async_test(fn):
    """Run an async test body on a fresh event loop (no pytest-asyncio here)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout=10))
    return run


class FakeState:
    """Stands where TransactionStateManager is. `write` applies the transit at once (a DEAD
    one also drops the id, as the real one does) unless `hook(transit)` answers an error
    code; the hook may also await, to make a write slow."""

    def __init__(self) -> None:
        self.transactions: dict[str, TransactionMetadata] = {}
        self.on_loaded: Callable[..., None] = lambda p, e, t: None
        self.hook: Callable[[TxnTransit], Awaitable[int]] | None = None
        self.writes: list[tuple[str, TxnTransit]] = []

    def check(self, tid: str) -> int:
        return 0

    def coordinator_epoch(self, tid: str) -> int:
        return COORDINATOR_EPOCH

    def get(self, tid: str) -> TransactionMetadata | None:
        return self.transactions.get(tid)

    def put_if_absent(self, meta: TransactionMetadata) -> TransactionMetadata:
        return self.transactions.setdefault(meta.transactional_id, meta)

    async def ensure_topic(self) -> bool:
        return True

    async def write(self, meta: TransactionMetadata, transit: TxnTransit) -> int:
        self.writes.append((meta.transactional_id, transit))
        code = await self.hook(transit) if self.hook else 0
        if code:
            meta.abort_pending()
            return code
        meta.complete_transition(transit)
        if transit.state == S.DEAD:
            del self.transactions[meta.transactional_id]
        return 0


class FakeMarkers:
    """Stands where TxnMarkerSender is: records each send; while `gate` is set to an unset
    Event, a send waits for it (the markers are "being written")."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None

    async def send(self, producer_id, producer_epoch, commit, coordinator_epoch, partitions,
                   still_coordinator) -> bool:
        self.calls.append(dict(pid=producer_id, epoch=producer_epoch, commit=commit,
                               partitions=set(partitions)))
        if self.gate is not None:
            await self.gate.wait()
        return True

    async def close(self) -> None:
        pass


class FakeIds:
    def __init__(self) -> None:
        self.ids = itertools.count(1000)

    async def next_id(self) -> int:
        return next(self.ids)


class Harness:
    def __init__(self) -> None:
        self.now = 1_000
        self.state, self.markers, self.ids = FakeState(), FakeMarkers(), FakeIds()
        settings = TxnSettings(num_partitions=1, replication_factor=1, min_isr=1,
                               segment_bytes=1 << 20, max_timeout_ms=900_000,
                               id_expiration_ms=EXPIRATION_MS, abort_interval_ms=10_000,
                               write_timeout_ms=1_000)
        self.c = TransactionCoordinator(settings, self.state, self.ids, self.markers,  # type: ignore[arg-type]
                                        wall_ms=lambda: self.now)

    def meta(self, tid: str = TID) -> TransactionMetadata:
        meta = self.state.get(tid)
        assert meta is not None
        return meta

    def hold_markers(self) -> asyncio.Event:
        self.markers.gate = asyncio.Event()
        return self.markers.gate

    async def init(self, tid: str = TID) -> tuple[int, int]:
        code, pid, epoch = await self.c.init_producer_id(tid, TIMEOUT_MS, None)
        assert code == 0
        return pid, epoch

    async def begin(self, tid: str = TID, tv: int = 2) -> tuple[int, int]:
        """A fresh id with an Ongoing transaction on TP."""
        pid, epoch = await self.init(tid)
        assert await self.c.add_partitions(tid, pid, epoch, [TP], tv) == 0
        return pid, epoch

    async def settled(self, tid: str = TID, tries: int = 200) -> TransactionMetadata:
        """Let the background completion run until the id is CompleteCommit/CompleteAbort."""
        for _ in range(tries):
            meta = self.meta(tid)
            if meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and not meta.has_pending():
                return meta
            await asyncio.sleep(0)
        raise AssertionError(f"never completed: {self.meta(tid)}")


# ====================================================================== EndTxn v5

@pytest.mark.parametrize("commit", [True, False])
@async_test
async def test_v2_end_bumps_the_epoch(commit):
    # Guards KIP-890 part 2's bump: the answer, the markers and the stored state all carry
    # epoch+1, so late writes of the ended transaction (epoch) are fenced by the markers.
    h = Harness()
    pid, epoch = await h.begin()

    async def refuse(transit: TxnTransit) -> int:
        return Code.NOT_COORDINATOR
    h.state.hook = refuse               # a failed PrepareCommit write: no bump, no markers
    assert await h.c.end_txn_v2(TID, pid, epoch, commit) == (Code.NOT_COORDINATOR, -1, -1)
    assert (h.meta().state, h.meta().producer_epoch, h.markers.calls) == (S.ONGOING, epoch, [])
    h.state.hook = None
    assert await h.c.end_txn_v2(TID, pid, epoch, commit) == (0, pid, epoch + 1)
    meta = await h.settled()
    assert h.markers.calls == [dict(pid=pid, epoch=epoch + 1, commit=commit, partitions={TP})]
    assert meta.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert (meta.producer_id, meta.producer_epoch) == (pid, epoch + 1)


@async_test
async def test_v2_retry_with_the_old_epoch():
    # Guards the retry of an EndTxn whose answer was lost: retriable while the markers are
    # being written, then the same answer for the same outcome, never the other outcome.
    h = Harness()
    pid, epoch = await h.begin()
    gate = h.hold_markers()
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (0, pid, epoch + 1)
    await asyncio.sleep(0)
    assert h.meta().state == S.PREPARE_COMMIT
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (Code.CONCURRENT_TRANSACTIONS, -1, -1)
    gate.set()
    await h.settled()
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (0, pid, epoch + 1)
    assert await h.c.end_txn_v2(TID, pid, epoch, False) == (Code.INVALID_TXN_STATE, -1, -1)
    assert len(h.markers.calls) == 1 and h.meta().producer_epoch == epoch + 1


@async_test
async def test_v2_late_end_of_the_previous_transaction_is_fenced():
    # Guards the point of the bump: a delayed EndTxn of the ended transaction (old epoch)
    # must not end the next one, which runs at the bumped epoch.
    h = Harness()
    pid, epoch = await h.begin()
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (0, pid, epoch + 1)
    await h.settled()
    assert await h.c.add_partitions(TID, pid, epoch + 1, [TP], 2) == 0
    for commit in (True, False):
        assert await h.c.end_txn_v2(TID, pid, epoch, commit) == (Code.PRODUCER_FENCED, -1, -1)
    meta = h.meta()
    assert (meta.state, meta.partitions, meta.producer_epoch) == (S.ONGOING, {TP}, epoch + 1)
    assert len(h.markers.calls) == 1
    # Two ends later, the first epoch is no retry of anything.
    assert await h.c.end_txn_v2(TID, pid, epoch + 1, True) == (0, pid, epoch + 2)
    await h.settled()
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (Code.PRODUCER_FENCED, -1, -1)


@pytest.mark.parametrize("after_commit", [False, True])
@async_test
async def test_v2_end_with_nothing_added(after_commit):
    # Guards KIP-890's abort of an empty transaction (PrepareAbort with a bump, from Empty
    # or CompleteCommit) and the refusal of a commit with nothing to commit.
    h = Harness()
    pid, epoch = await h.init()
    if after_commit:
        assert await h.c.add_partitions(TID, pid, epoch, [TP], 2) == 0
        _, _, epoch = await h.c.end_txn_v2(TID, pid, epoch, True)
        await h.settled()
        h.markers.calls.clear()
    assert await h.c.end_txn_v2(TID, pid, epoch, True) == (Code.INVALID_TXN_STATE, -1, -1)
    assert h.meta().producer_epoch == epoch
    assert await h.c.end_txn_v2(TID, pid, epoch, False) == (0, pid, epoch + 1)
    meta = await h.settled()
    assert (meta.state, meta.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    # The coordinator calls the sender with an empty set (the real one returns at once).
    assert h.markers.calls == [dict(pid=pid, epoch=epoch + 1, commit=False, partitions=set())]


def _at_epoch_32765(h: Harness) -> None:
    """An Ongoing transaction of producer 5 at the last epoch a bump may still reach."""
    h.state.put_if_absent(TransactionMetadata(TID, 5, MAX_EPOCH - 2, TIMEOUT_MS, S.ONGOING, h.now,
                                              partitions=[TP], txn_start_ms=h.now))


@async_test
async def test_v2_epoch_exhaustion_moves_to_a_new_producer_id():
    # Guards the overflow: a bump into the exhausted range must hand the client a new
    # producer id at epoch 0 (the markers still carry the old id, at the bumped epoch).
    h = Harness()
    _at_epoch_32765(h)
    assert await h.c.end_txn_v2(TID, 5, MAX_EPOCH - 2, True) == (0, 1000, 0)
    meta = await h.settled()
    assert h.markers.calls == [dict(pid=5, epoch=MAX_EPOCH - 1, commit=True, partitions={TP})]
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (S.COMPLETE_COMMIT, 1000, 0)
    assert await h.c.add_partitions(TID, 1000, 0, [TP], 2) == 0


@async_test
async def test_v2_retry_of_an_end_that_rotated_the_producer_id():
    # Guards the retry of the overflowing end: old id, old epoch -> the same answer.
    h = Harness()
    _at_epoch_32765(h)
    assert await h.c.end_txn_v2(TID, 5, MAX_EPOCH - 2, True) == (0, 1000, 0)
    await h.settled()
    assert await h.c.end_txn_v2(TID, 5, MAX_EPOCH - 2, True) == (0, 1000, 0)


# ====================================================================== EndTxn v0-4

@pytest.mark.parametrize("commit", [True, False])
@async_test
async def test_v0_end_keeps_the_epoch(commit):
    # Guards the older clients: they keep their epoch after EndTxn, so no bump may happen.
    h = Harness()
    pid, epoch = await h.begin(tv=0)
    assert await h.c.end_txn(TID, pid, epoch, commit) == 0
    meta = await h.settled()
    assert h.markers.calls == [dict(pid=pid, epoch=epoch, commit=commit, partitions={TP})]
    assert (meta.producer_id, meta.producer_epoch) == (pid, epoch)
    assert await h.c.end_txn(TID, pid, epoch, commit) == 0          # a retry
    assert await h.c.add_partitions(TID, pid, epoch, [TP]) == 0


# ====================================================================== AddPartitions

@pytest.mark.parametrize("tv", [0, 2])
@async_test
async def test_add_partitions_waits_for_the_last_transaction_to_settle(tv):
    # Guards SETTLE_WAIT_S: an add right after EndTxn waits for the markers instead of
    # answering CONCURRENT_TRANSACTIONS at once (which costs the client its backoff).
    h = Harness()
    pid, epoch = await h.begin(tv=tv)
    gate = h.hold_markers()
    if tv == 2:
        _, _, epoch = await h.c.end_txn_v2(TID, pid, epoch, True)
    else:
        assert await h.c.end_txn(TID, pid, epoch, True) == 0
    add = asyncio.ensure_future(h.c.add_partitions(TID, pid, epoch, [("u", 1)], tv))
    await asyncio.sleep(0.02)
    assert not add.done() and h.meta().state == S.PREPARE_COMMIT
    gate.set()
    assert await add == 0
    meta = h.meta()
    assert (meta.state, meta.partitions, meta.producer_epoch) == (S.ONGOING, {("u", 1)}, epoch)


@async_test
async def test_add_partitions_gives_up_after_the_settle_wait(monkeypatch):
    # Guards the bound on that wait: a completion slower than SETTLE_WAIT_S is answered
    # CONCURRENT_TRANSACTIONS, and the add changes nothing.
    monkeypatch.setattr(coordinator_module, "SETTLE_WAIT_S", 0.02)
    h = Harness()
    pid, epoch = await h.begin()
    gate = h.hold_markers()
    _, _, epoch = await h.c.end_txn_v2(TID, pid, epoch, True)
    add = h.c.add_partitions(TID, pid, epoch, [("u", 1)], 2)
    assert await asyncio.wait_for(add, 1) == Code.CONCURRENT_TRANSACTIONS
    assert (h.meta().state, h.meta().partitions) == (S.PREPARE_COMMIT, {TP})
    gate.set()
    assert (await h.settled()).state == S.COMPLETE_COMMIT


# ====================================================================== expiry

@async_test
async def test_remove_expired_forgets_only_idle_ids():
    # Guards transactional.id.expiration.ms: an id idle (Empty, CompleteCommit) for longer
    # is tombstoned and dropped; an Ongoing one stays however old; a recent one stays.
    h = Harness()
    h.now = 0
    await h.init("empty")
    await h.begin("ongoing", tv=0)
    pid, epoch = await h.begin("committed", tv=0)
    assert await h.c.end_txn("committed", pid, epoch, True) == 0
    await h.settled("committed")
    h.now = 5_000
    await h.init("recent")
    h.now = EXPIRATION_MS + 4_999
    assert await h.c.remove_expired() == 2
    assert sorted(h.state.transactions) == ["ongoing", "recent"]
    dead = sorted(tid for tid, t in h.state.writes if t.state == S.DEAD)
    assert dead == ["committed", "empty"]
    assert h.meta("ongoing").state == S.ONGOING
    code, new_pid, new_epoch = await h.c.init_producer_id("empty", TIMEOUT_MS, None)
    assert (code, new_epoch) == (0, 0) and new_pid > pid             # starts afresh


# ====================================================================== InitProducerId

@async_test
async def test_init_producer_id_fences_and_aborts_an_open_transaction():
    # Guards the fencing of an earlier instance: its open transaction is aborted at a bumped
    # epoch (so its late writes are fenced), the new instance retries until that is done.
    h = Harness()
    pid, epoch = await h.begin(tv=0)
    gate = h.hold_markers()
    assert await h.c.init_producer_id(TID, TIMEOUT_MS, None) == (Code.CONCURRENT_TRANSACTIONS, -1, -1)
    await asyncio.sleep(0)
    assert h.meta().state == S.PREPARE_ABORT
    assert h.markers.calls == [dict(pid=pid, epoch=epoch + 1, commit=False, partitions={TP})]
    assert await h.c.init_producer_id(TID, TIMEOUT_MS, None) == (Code.CONCURRENT_TRANSACTIONS, -1, -1)
    gate.set()
    assert (await h.settled()).state == S.COMPLETE_ABORT
    code, new_pid, new_epoch = await h.c.init_producer_id(TID, TIMEOUT_MS, None)
    assert (code, new_pid, new_epoch) == (0, pid, epoch + 2)   # above the fenced epoch+1
    assert await h.c.end_txn(TID, pid, epoch, True) == Code.PRODUCER_FENCED
    assert len(h.markers.calls) == 1
