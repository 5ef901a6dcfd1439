"""The transactional producer's state machine (clients.aio.transactions), without a broker:
the states and which calls each allows, abortable and fatal errors, the partitions of a
transaction and their AddPartitionsToTxn batching, the accumulator's gate and
transactional flag, and the shapes of the offsets and group metadata."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from clients.aio.accumulator import RecordAccumulator, record_size
from clients.aio.consumer import ConsumerGroupMetadata
from clients.aio.transactions import (ABORTABLE_ERROR, ABORTING, COMMITTING, FATAL_ERROR,
                                      IN_TRANSACTION, PREPARED, READY, ProducerFencedError,
                                      TransactionAbortableError, TransactionAbortedError,
                                      TransactionManager, TransactionStateError, TxnState,
                                      group_fields, offsets_by_topic)
from clients.protocol.errors import BY_NAME
from clients.types import OffsetAndMetadata, TopicPartition

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def ready_state() -> TxnState:
    st = TxnState("tx")
    st.begin_init()
    st.state = READY          # what a successful InitProducerId does
    return st


def test_calls_out_of_order_are_refused():
    st = TxnState("tx")
    with pytest.raises(TransactionStateError, match="init_transactions"):
        st.check_send()
    with pytest.raises(TransactionStateError):
        st.begin()
    st.begin_init()
    st.state = READY
    with pytest.raises(TransactionStateError, match="already"):
        st.begin_init()
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        st.check_send()
    with pytest.raises(TransactionStateError):
        st.begin_commit()
    with pytest.raises(TransactionStateError):
        st.begin_abort()
    st.begin()
    st.check_send()
    with pytest.raises(TransactionStateError):
        st.begin()
    st.begin_commit()
    assert st.state == COMMITTING
    with pytest.raises(TransactionStateError):      # no sends while committing
        st.check_send()
    st.begin_commit()                                # a retried commit goes on
    st.completed()
    assert st.state == READY


def test_partitions_are_added_in_batches_and_gate_the_drain():
    st = ready_state()
    st.begin()
    assert st.add_partition(T0) and st.add_partition(T1)
    assert not st.add_partition(T0)
    assert st.take_pending() == {T0, T1}
    assert st.add_partition(T2)                      # new while the first add is in flight
    assert not st.add_partition(T1)                  # in flight already
    assert not st.sendable(T0)
    st.partitions_added({T0, T1})
    assert st.sendable(T0) and st.sendable(T1) and not st.sendable(T2)
    assert st.started
    assert st.take_pending() == {T2}                 # the next request has only the new one
    st.add_failed()                                  # given up: waits again
    assert st.pending == {T2} and not st.adding
    st.begin_commit()
    st.completed()
    assert not st.added and not st.pending and not st.started


def test_a_failed_batch_makes_the_transaction_abortable():
    st = ready_state()
    st.begin()
    cause = BY_NAME["MESSAGE_TOO_LARGE"]("too big")
    st.failed(cause)
    assert st.state == ABORTABLE_ERROR and st.failing
    with pytest.raises(TransactionAbortableError) as e:
        st.check_send()
    assert e.value.__cause__ is cause
    with pytest.raises(TransactionAbortableError):
        st.begin_commit()
    assert isinstance(st.dropped_batch_error(), TransactionAbortableError)
    st.begin_abort()
    assert st.state == ABORTING
    assert isinstance(st.dropped_batch_error(), TransactionAbortedError)
    st.failed(BY_NAME["REQUEST_TIMED_OUT"]("late"))  # batches failing while aborting: no change
    assert st.state == ABORTING
    st.completed()
    assert st.state == READY and st.error is None and st.dropped_batch_error() is None
    st.begin()                                       # usable again


@pytest.mark.parametrize("name", ["PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"])
def test_fencing_is_fatal_for_every_later_call(name):
    st = ready_state()
    st.begin()
    st.failed(BY_NAME[name]("fenced"))
    assert st.state == FATAL_ERROR
    for call in (st.check_send, st.begin, st.begin_commit, st.begin_abort, st.begin_init):
        with pytest.raises(ProducerFencedError):
            call()
    assert isinstance(st.dropped_batch_error(), ProducerFencedError)
    st.failed(BY_NAME["MESSAGE_TOO_LARGE"]("later"))  # stays fatal
    assert st.state == FATAL_ERROR


def test_offsets_and_group_metadata_shapes():
    topics = offsets_by_topic({TopicPartition("a", 1): 5, ("a", 0): OffsetAndMetadata(7, "m", 3)})
    assert topics == {"a": [
        {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": 3,
         "committed_metadata": "m"},
        {"partition_index": 1, "committed_offset": 5, "committed_leader_epoch": -1,
         "committed_metadata": ""}]}
    ck_style = [SimpleNamespace(topic="b", partition=2, offset=9, metadata=None, leader_epoch=None)]
    assert offsets_by_topic(ck_style)["b"][0]["committed_offset"] == 9
    with pytest.raises(ValueError):
        offsets_by_topic({TopicPartition("a", 0): -1})
    assert group_fields(ConsumerGroupMetadata("g", 4, "m-1", "i")) == ("g", 4, "m-1", "i")
    assert group_fields("g") == ("g", -1, "", None)
    with pytest.raises(ValueError):
        group_fields(object())


def test_the_accumulator_gate_and_transactional_flag():
    acc = RecordAccumulator(linger=0.0, idempotent=True, transactional=True)
    acc.reset_producer(7, 1)
    allowed: set[TopicPartition] = set()
    acc.gate = allowed.__contains__
    for tp in (T0, T1):
        acc.append(tp, 0, None, b"v", b"\x00", record_size(None, b"v"), (None, 0, -1, 1, None), 0.0)  # type: ignore[arg-type]
    nodes, _, _ = acc.ready(lambda tp: 1, 1.0)
    assert nodes == set()                            # nothing added yet: nothing to send
    allowed.add(T1)
    nodes, _, _ = acc.ready(lambda tp: 1, 1.0)
    drained = acc.drain(lambda tp: 1, nodes, 1 << 20, 1.0)
    assert [b.tp for b in drained[1]] == [T1]
    data = drained[1][0].built
    assert data is not None and int.from_bytes(data[21:23], "big") & 0x10   # transactional bit


def test_add_partitions_requests_batch_what_became_new_meanwhile():
    async def run() -> list[list[tuple[str, list[int]]]]:
        acc = RecordAccumulator(idempotent=True, transactional=True)
        acc.reset_producer(7, 1)
        sent: list[list[tuple[str, list[int]]]] = []
        release = asyncio.Event()
        wakes = []

        async def noop(*_a) -> None:
            return None
        m = TransactionManager(None, acc, "tx", 60000, max_block=5, delivery_timeout=5,  # type: ignore[arg-type]
                               start=noop, wake=lambda: wakes.append(1), flush=noop,
                               drop_queued=lambda e: None)

        async def coordinated(key, key_type, api, body, deadline, *a, **kw):
            assert api == "AddPartitionsToTxn" and body["v3_and_below_producer_id"] == 7
            sent.append([(t["name"], t["partitions"]) for t in body["v3_and_below_topics"]])
            await release.wait()
        m._coordinated = coordinated  # type: ignore[method-assign]
        m.state.state = READY
        m.begin()
        m.add_partition(T0)
        await asyncio.sleep(0)                       # the first request goes out with T0
        m.add_partition(T1)
        m.add_partition(T2)
        assert not m.state.sendable(T0)
        release.set()
        await m._adds_done(asyncio.get_running_loop().time() + 5)
        assert m.state.sendable(T0) and m.state.sendable(T1) and m.state.sendable(T2)
        assert len(wakes) == 2
        return sent
    assert asyncio.run(run()) == [[("t", [0])], [("t", [1]), ("u", [0])]]


def test_an_abortable_add_partitions_error_stops_the_adds():
    async def run() -> TxnState:
        acc = RecordAccumulator(idempotent=True, transactional=True)

        async def noop(*_a) -> None:
            return None
        m = TransactionManager(None, acc, "tx", 60000, max_block=5, delivery_timeout=5,  # type: ignore[arg-type]
                               start=noop, wake=lambda: None, flush=noop,
                               drop_queued=lambda e: None)

        async def coordinated(*a, **kw):
            raise BY_NAME["TOPIC_AUTHORIZATION_FAILED"]("no")
        m._coordinated = coordinated  # type: ignore[method-assign]
        m.state.state = IN_TRANSACTION
        m.add_partition(T0)
        await m._adds_done(asyncio.get_running_loop().time() + 5)
        return m.state
    st = asyncio.run(run())
    assert st.state == ABORTABLE_ERROR and st.uncertain and st.pending == {T0}


def test_prepare_delivers_then_leaves_the_transaction_open_for_another_process():
    async def run() -> list[tuple[str, dict]]:
        acc = RecordAccumulator(idempotent=True, transactional=True)
        acc.reset_producer(9, 4)
        calls: list[tuple[str, dict]] = []
        flushed = []

        async def noop(*_a) -> None:
            return None

        async def flush(_timeout) -> None:
            flushed.append(1)
        m = TransactionManager(None, acc, "tx", 60000, max_block=5, delivery_timeout=5,  # type: ignore[arg-type]
                               start=noop, wake=lambda: None, flush=flush,
                               drop_queued=lambda e: None)

        async def coordinated(key, key_type, api, body, deadline, *a, **kw):
            calls.append((api, body))
        m._coordinated = coordinated  # type: ignore[method-assign]
        m.state.state = READY
        m.begin()
        m.add_partition(T0)
        prepared = await m.prepare(5)
        assert flushed == [1]
        assert (prepared.transactional_id, prepared.producer_id, prepared.producer_epoch) == (
            "tx", 9, 4) and not prepared.empty
        assert m.state.state == PREPARED
        with pytest.raises(TransactionStateError):
            m.state.check_send()                     # nothing more goes in
        await m.abort_open(5)                        # what close() does: not an abort
        assert m.state.state == PREPARED and [a for a, _ in calls] == ["AddPartitionsToTxn"]
        await m.commit(5)                            # the same process may still end it
        assert m.state.state == READY
        return calls
    calls = asyncio.run(run())
    assert [a for a, _ in calls] == ["AddPartitionsToTxn", "EndTxn"]
    assert calls[1][1]["committed"] is True


def test_a_prepared_transaction_with_nothing_in_it_is_empty():
    async def run():
        acc = RecordAccumulator(idempotent=True, transactional=True)
        acc.reset_producer(9, 4)

        async def noop(*_a) -> None:
            return None
        m = TransactionManager(None, acc, "tx", 60000, max_block=5, delivery_timeout=5,  # type: ignore[arg-type]
                               start=noop, wake=lambda: None, flush=noop,
                               drop_queued=lambda e: None)
        m.state.state = READY
        m.begin()
        return await m.prepare(5)
    prepared = asyncio.run(run())
    assert prepared.empty and prepared.producer_id == -1
