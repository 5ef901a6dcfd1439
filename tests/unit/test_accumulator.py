"""The producer's record accumulator, sans-io (a fake clock, no broker): batching by size
and linger, grouping by leader, buffer.memory accounting and back-pressure, and the
ordering rules that keep idempotent retries from duplicating or reordering records."""
from __future__ import annotations

import asyncio
import time

import pytest

from clients.aio.accumulator import BATCH_OVERHEAD, RecordAccumulator, record_size
from clients.aio.errors import KafkaTimeoutError
from clients.aio.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from clients.aio.producer import AsyncProducer
from clients.protocol.records import records_from_fetch
from clients.types import RecordMetadata, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
LEADERS = {T0: 1, T1: 1, T2: 2}


def leader_of(tp):
    return LEADERS.get(tp, -1)


class Fut:
    """A future-like waiter that records its outcome."""

    def __init__(self):
        self.result = self.error = None
        self._done = False

    def done(self):
        return self._done

    def set_result(self, r):
        self.result, self._done = r, True

    def set_exception(self, e):
        self.error, self._done = e, True


def add(acc, tp, i, now=0.0, value_len=50, ts=None):
    value = b"%05d" % i + b"x" * (value_len - 5)
    size = record_size(None, value, [])
    assert acc.reserve(size)
    fut = Fut()
    stamp = ts if ts is not None else 1000 + i
    batch = acc.append(tp, stamp, None, value, b"\x00", size, (fut, stamp, -1, len(value), None),
                       now)
    return batch, batch.count == 1, fut


def test_batches_fill_up_to_batch_size_then_a_new_one_opens():
    acc = RecordAccumulator(batch_size=500, linger=1.0)
    per = record_size(None, b"x" * 50, [])
    created = [add(acc, T0, i)[1] for i in range(20)]
    per_batch = (500 - BATCH_OVERHEAD) // per
    assert created == [i % per_batch == 0 for i in range(20)]
    sizes = [b.size for b in acc.batches[T0]]
    assert all(s <= 500 for s in sizes)
    # A record bigger than batch.size still gets (a batch of its own).
    b, new, _ = add(acc, T0, 99, value_len=2000)
    assert new and b.record_count == 1


def test_linger_decides_when_a_partial_batch_is_ready():
    acc = RecordAccumulator(batch_size=10_000, linger=0.050)
    add(acc, T0, 0, now=10.0)
    nodes, delay, unknown = acc.ready(leader_of, now=10.0)
    assert nodes == set() and delay == pytest.approx(0.050) and not unknown
    nodes, delay, _ = acc.ready(leader_of, now=10.049)
    assert nodes == set() and delay == pytest.approx(0.001)
    assert acc.ready(leader_of, now=10.050)[0] == {1}
    # flush() (or close, or a send waiting for memory) makes it ready at once.
    acc.flushes = 1
    assert acc.ready(leader_of, now=10.0)[0] == {1}


def test_a_full_batch_is_ready_before_linger():
    acc = RecordAccumulator(batch_size=300, linger=60.0)
    for i in range(6):
        add(acc, T0, i)
    assert len(acc.batches[T0]) > 1
    assert acc.ready(leader_of, now=0.0)[0] == {1}


def test_unknown_leader_is_reported_not_sent():
    acc = RecordAccumulator(linger=0.0)
    add(acc, TopicPartition("other", 0), 0)
    nodes, _, unknown = acc.ready(leader_of, now=1.0)
    assert nodes == set() and unknown == {"other"}
    assert acc.drain(leader_of, {1, 2}, 10**6, now=1.0) == {}


def test_drain_groups_by_leader_one_batch_per_partition_and_respects_request_size():
    acc = RecordAccumulator(batch_size=300, linger=0.0)
    for i in range(12):
        for tp in (T0, T1, T2):
            add(acc, tp, i)
    drained = acc.drain(leader_of, {1, 2}, 10**6, now=1.0)
    assert sorted(b.tp for b in drained[1]) == [T0, T1]
    assert [b.tp for b in drained[2]] == [T2]
    # Each batch was built once, into a valid v2 batch holding its records in order.
    for b in drained[1] + drained[2]:
        recs = list(records_from_fetch(b.built))
        assert len(recs) == b.count and [r.offset for r in recs] == list(range(b.count))
        assert [int(r.value[:5]) for r in recs] == sorted(int(r.value[:5]) for r in recs)
    # A small max.request.size: only the first batch for node 1 fits in one request.
    acc2 = RecordAccumulator(batch_size=300, linger=0.0)
    for i in range(5):
        add(acc2, T0, i)
        add(acc2, T1, i)
    one = acc2.drain(leader_of, {1}, 100, now=1.0)
    assert len(one[1]) == 1


def test_buffer_memory_is_reserved_and_given_back():
    size = record_size(None, b"x" * 50, [])
    acc = RecordAccumulator(buffer_memory=size * 3, linger=0.0)
    for i in range(3):
        add(acc, T0, i)
    assert not acc.reserve(size)                 # full: the caller must wait
    (batch,) = acc.drain(leader_of, {1}, 10**6, now=0.0)[1]
    assert not acc.reserve(size)                 # still held while in flight
    acc.deallocate(batch)
    batch.complete(0, -1)
    assert acc.used == 0 and acc.reserve(size)


def test_complete_gives_offsets_and_timestamps_per_record():
    acc = RecordAccumulator(linger=0.0)
    futs = [add(acc, T0, i, ts=5000 + i)[2] for i in range(3)]
    (batch,) = acc.drain(leader_of, {1}, 10**6, now=0.0)[1]
    batch.complete(41, -1)
    assert [f.result for f in futs] == [RecordMetadata("t", 0, 41 + i, 5000 + i, -1, 50)
                                       for i in range(3)]
    acc2 = RecordAccumulator(linger=0.0)
    fut = add(acc2, T0, 0, ts=5000)[2]
    (b2,) = acc2.drain(leader_of, {1}, 10**6, now=0.0)[1]
    b2.complete(7, 99999)                        # LogAppendTime wins over the create time
    assert (fut.result.offset, fut.result.timestamp) == (7, 99999)


def idempotent_acc(**kw):
    acc = RecordAccumulator(batch_size=200, linger=0.0, idempotent=True, **kw)
    acc.reset_producer(1000, 0)
    return acc


def test_sequences_follow_drain_order_and_five_batches_may_be_in_flight():
    acc = idempotent_acc()
    for i in range(30):
        add(acc, T0, i)
    sent = []
    for _ in range(10):
        got = acc.drain(leader_of, {1}, 10**6, now=0.0)
        sent += got.get(1, [])
    assert len(sent) == 5                        # max_in_flight per partition
    seqs = [b.base_sequence for b in sent]
    assert seqs == sorted(seqs) and seqs[0] == 0
    assert all(b2.base_sequence == b1.base_sequence + b1.record_count
               for b1, b2 in zip(sent, sent[1:]))
    for b in sent:
        h = list(records_from_fetch(b.built))[0]
        assert (h.producer_id, h.producer_epoch, h.sequence) == (1000, 0, b.base_sequence)


def test_retries_go_first_in_sequence_order_one_at_a_time_and_reuse_their_bytes():
    acc = idempotent_acc()
    for i in range(12):
        add(acc, T0, i)
    a, b, c = (acc.drain(leader_of, {1}, 10**6, now=0.0)[1][0] for _ in range(3))
    a_bytes = a.built
    # The connection broke: all three come back, in any order; b/c would have got
    # OUT_OF_ORDER_SEQUENCE_NUMBER behind a, which is not the next sequence for them.
    acc.reenqueue(c, now=1.0, backoff=0.1)
    acc.reenqueue(a, now=1.0, backoff=0.1)
    acc.reenqueue(b, now=1.0, backoff=0.1)
    assert list(acc.batches[T0])[:3] == [a, b, c]
    assert not acc.is_next_sequence(b) and acc.is_next_sequence(a)
    assert acc.drain(leader_of, {1}, 10**6, now=1.05) == {}       # backoff not over
    assert acc.ready(leader_of, now=1.05)[1] == pytest.approx(0.05)
    (again,) = acc.drain(leader_of, {1}, 10**6, now=1.2)[1]
    assert again is a and again.built is a_bytes                   # the same bytes again
    # While `a` is in flight nothing else of the partition goes out, not even fresh batches.
    assert acc.drain(leader_of, {1}, 10**6, now=2.0) == {}
    acc.acknowledged(a)
    acc.deallocate(a)
    a.complete(0, -1)
    assert acc.is_next_sequence(b)
    assert acc.drain(leader_of, {1}, 10**6, now=2.0)[1] == [b]      # then b alone
    assert acc.drain(leader_of, {1}, 10**6, now=2.0) == {}
    acc.acknowledged(b)
    acc.deallocate(b)
    assert acc.drain(leader_of, {1}, 10**6, now=2.0)[1] == [c]


def test_epoch_bump_resequences_unacknowledged_batches_from_zero():
    acc = idempotent_acc()
    for i in range(8):
        add(acc, T0, i)
    first = acc.drain(leader_of, {1}, 10**6, now=0.0)[1][0]
    acc.reenqueue(first, now=0.0, backoff=0.0)
    old_seq = first.base_sequence
    acc.reset_producer(1000, 1)
    (again,) = acc.drain(leader_of, {1}, 10**6, now=1.0)[1]
    assert again is first and again.base_sequence == 0 == old_seq
    h = list(records_from_fetch(again.built))[0]
    assert (h.producer_epoch, h.sequence) == (1, 0)


def test_expired_batches_are_handed_back():
    acc = RecordAccumulator(linger=10.0, delivery_timeout=1.0)
    add(acc, T0, 0, now=0.0)
    assert acc.expired(0.5) == []
    (b,) = acc.expired(1.0)
    assert b.tp == T0 and not acc.has_queued


# ---------------------------------------------------------------------------------------------
# back-pressure through AsyncProducer.send (no broker: metadata is faked, no sender runs)

def fake_producer(**config) -> AsyncProducer:
    p = AsyncProducer(bootstrap_servers="127.0.0.1:1", **config)
    parts = {i: PartitionInfo("t", i, 0, 0, (0,), (0,)) for i in range(2)}
    p._client.metadata.cluster = ClusterMetadata({0: BrokerInfo(0, "127.0.0.1", 1)},
                                                 {"t": TopicInfo("t", parts)})
    p._started = True
    return p


def test_send_blocks_for_buffer_memory_then_times_out():
    async def main():
        p = fake_producer(buffer_memory=1000, max_block_ms=200, linger_ms=10_000)
        n = 0
        with pytest.raises(KafkaTimeoutError, match="buffer"):
            while True:
                await p.send("t", b"x" * 100, partition=0)
                n += 1
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            await p.send("t", b"x" * 100, partition=0)
        waited = time.monotonic() - t0
        await p.close(0)
        return n, waited

    n, waited = asyncio.run(main())
    assert n == 1000 // record_size(None, b"x" * 100, [])
    assert 0.15 < waited < 2.0


def test_blocked_send_proceeds_when_memory_is_freed():
    async def main():
        p = fake_producer(buffer_memory=1000, max_block_ms=5000, linger_ms=10_000)
        fits = 1000 // record_size(None, b"x" * 100, [])
        futs = [await p.send("t", b"x" * 100, partition=0) for _ in range(fits)]
        blocked = asyncio.ensure_future(p.send("t", b"y" * 100, partition=1))
        await asyncio.sleep(0.05)
        assert not blocked.done()
        assert p._acc.waiting_for_memory == 1       # makes every batch ready to go
        (batch,) = p._acc.batches[TopicPartition("t", 0)]
        p._acc.batches[TopicPartition("t", 0)].clear()
        p._finish(batch, base_offset=0)             # as if the broker acknowledged it
        late = await asyncio.wait_for(blocked, 1.0)
        assert [f.result().offset for f in futs] == list(range(fits))
        assert TopicPartition("t", 1) in p._acc.batches and not late.done()
        assert p._acc.waiting_for_memory == 0
        await p.close(0)

    asyncio.run(main())


def test_completing_a_batch_skips_futures_their_owners_cancelled():
    # complete() sets each result without asking done() first (a lock per record for the
    # sync Producer's futures): a cancelled future must neither stop nor break the rest.
    import threading

    from clients.producer import RecordFuture

    async def main():
        loop = asyncio.get_running_loop()
        acc = RecordAccumulator(linger=0.0)
        sync_future = RecordFuture.sharing(threading.Condition())
        futs = [loop.create_future(), sync_future(), loop.create_future(), sync_future()]
        futs[0].cancel()
        futs[1].cancel()
        for i, f in enumerate(futs):
            size = record_size(None, b"v")
            assert acc.reserve(size)
            batch = acc.append(T0, 1000 + i, None, b"v", b"\x00", size,
                               (f, 1000 + i, -1, 1, None), 0.0)
        batch.complete(40, -1)
        assert futs[0].cancelled() and futs[1].cancelled()
        assert futs[2].result().offset == 42 and futs[3].result(0).offset == 43

    asyncio.run(main())


def test_an_on_delivery_that_raises_is_logged_and_the_rest_are_still_told(caplog):
    acc = RecordAccumulator(linger=0.0)
    heard: list = []

    def broken(err, md):
        raise RuntimeError("user bug")

    futs = [Fut(), Fut(), Fut()]
    callbacks = [lambda err, md: heard.append(md.offset), broken,
                 lambda err, md: heard.append(md.offset)]
    for i, (f, cb) in enumerate(zip(futs, callbacks)):
        size = record_size(None, b"v")
        assert acc.reserve(size)
        batch = acc.append(T0, 1000 + i, None, b"v", b"\x00", size, (f, 1000 + i, -1, 1, cb), 0.0)
    with caplog.at_level("ERROR", logger="strom.client.producer"):
        batch.complete(10, -1)
    assert heard == [10, 12] and [f.result.offset for f in futs] == [10, 11, 12]
    (logged,) = [r for r in caplog.records if r.name == "strom.client.producer"]
    assert logged.getMessage() == "on_delivery callback failed" and "user bug" in caplog.text


def _values_by_batch(p: AsyncProducer, tp: TopicPartition) -> list[list[bytes]]:
    return [[r.value for r in records_from_fetch(b.build(0, None))] for b in p._acc.batches[tp]]


def test_send_batch_keeps_each_partitions_order_when_records_alternate_partitions():
    # send_batch adds a record for an explicit partition straight to that partition's open
    # batch while it has room (records alternating over partitions included); whatever
    # else appended to the partition meanwhile (here a keyed record the partitioner placed
    # there, opening a new batch that is not full) comes before it, as in the call.
    a, c, keyed_value = b"a" * 50, b"c", b"K" * 40
    s_a, s_c = record_size(None, a, b"\x00"), record_size(None, c, b"\x00")
    batch_size = BATCH_OVERHEAD + s_a + s_c + 5     # room for c after a, not for the keyed

    async def main():
        p = fake_producer(batch_size=batch_size, linger_ms=10_000)
        cluster = p._client.metadata.cluster
        key0 = next(k for k in (b"k%d" % i for i in range(100))
                    if p._partitioner("t", k, k, b"", b"", cluster) == 0)
        s_k = record_size(key0, keyed_value, b"\x00")
        # the keyed record opens a new batch, which then has room for c
        assert s_a + s_k > batch_size - BATCH_OVERHEAD >= s_k + s_c
        records = [(None, a, None, None, 0), (None, b"b", None, None, 1),
                   (key0, keyed_value, None, None, None),
                   (None, c, None, None, 0), (None, b"d", None, None, 1)]
        records += [(None, b"%d" % i, None, None, i % 2) for i in range(40)]
        fut = await p.send_batch("t", records)
        assert not fut.done()
        zero, one = _values_by_batch(p, T0), _values_by_batch(p, T1)
        assert zero[0] == [a] and zero[1][:2] == [keyed_value, c]
        assert [v for b in zero for v in b] == [a, keyed_value, c] + [
            b"%d" % i for i in range(0, 40, 2)]
        assert [v for b in one for v in b] == [b"b", b"d"] + [b"%d" % i for i in range(1, 40, 2)]
        assert all(b.size <= batch_size for tp in (T0, T1) for b in p._acc.batches[tp])
        await p.close(0)

    asyncio.run(main())


def test_send_batch_keyless_records_follow_a_keyed_one_into_the_sticky_partitions_new_batch():
    # A keyless record goes straight into the batch the sticky rule placed the one before
    # it in; a keyed record placed in the same partition meanwhile, opening a new batch
    # there, makes that the batch the next keyless record goes to.
    first, a, c, keyed_value = b"0", b"a" * 50, b"c", b"K" * 40
    sizes = [record_size(None, v, b"\x00") for v in (first, a, c)]
    batch_size = BATCH_OVERHEAD + sum(sizes) + 5

    async def main():
        p = fake_producer(batch_size=batch_size, linger_ms=10_000)
        cluster = p._client.metadata.cluster
        await p.send_batch("t", [(None, first, None, None, None)])
        (tp,) = [tp for tp, dq in p._acc.batches.items() if dq]     # the sticky partition
        key = next(k for k in (b"k%d" % i for i in range(100))
                   if p._partitioner("t", k, k, b"", b"", cluster) == tp.partition)
        s_k = record_size(key, keyed_value, b"\x00")
        assert sum(sizes[:2]) + s_k > batch_size - BATCH_OVERHEAD >= s_k + sizes[2]
        records = [(None, a, None, None, None), (key, keyed_value, None, None, None),
                   (None, c, None, None, None)]
        fut = await p.send_batch("t", records)
        assert not fut.done()
        assert _values_by_batch(p, tp) == [[first, a], [keyed_value, c]]
        await p.close(0)

    asyncio.run(main())


def test_send_batch_reserves_each_records_size_as_record_size_gives_it():
    # send_batch works out the size of a record without headers inline: the memory it
    # reserves must be record_size's, keys, empty and null values included.
    records = [(None, b"v" * 10, None, None, 0), (b"key", b"v" * 100, None, None, 1),
               (b"k", None, None, None, 0), (None, b"", None, None, 1),
               (b"k2", b"x", [("h", b"1")], None, 0)]

    async def main():
        p = fake_producer(linger_ms=10_000)
        await p.send_batch("t", records)
        used = p._acc.used
        await p.close(0)
        return used

    from clients.aio.producer import _encoded_headers
    expected = sum(record_size(k, v, _encoded_headers(h)) for k, v, h, _, _ in records)
    assert asyncio.run(main()) == expected
