"""The sync Producer appends records in the caller's thread (clients/producer.py,
`_append_here`): a batch goes to the I/O thread whole, when full, after linger.ms, or at
flush/close. What must hold, against a real broker:

- one thread's records to a partition keep their send order, also when some of them take
  the other way (one at a time through the I/O thread: a topic whose metadata is not known
  yet, buffer.memory full) and later ones could have overtaken them;
- a batch that never fills goes out after linger.ms, without a flush;
- records in open batches are delivered by flush() and by close();
- several threads sending at once: every record once, each thread's in its order;
- a record the serializer refuses fails its future and on_delivery (on the I/O thread, as
  every delivery report), and the records around it are delivered; a serializer's
  bytearray or memoryview is sent as its bytes;
- a full buffer.memory blocks send() in the caller's thread for max.block.ms, and a caller
  waiting for memory is woken when an eighth of it is free, not for every batch;
- past 10,000 records queued one by one, send() waits for the I/O thread and is woken as
  soon as it takes them.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import wait as wait_futures

import pytest

from clients.producer import Producer
from tests.integration.test_client_producer import create_topic
from tests.integration.test_confluent_roundtrip import consume_all as ck_consume_all
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("caller-appends")).start()
    yield b
    b.stop()


def offsets(futs) -> list[int]:
    return [f.result(30).offset for f in futs]


def test_records_behind_one_that_waits_for_metadata_keep_their_order(broker):
    create_topic(broker.bootstrap, "order-known", 1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1000) as p:
        p.partitions_for("order-known")
        first = [p.send("order-known", b"a%d" % i, partition=0) for i in range(300)]
        # A topic the producer has no metadata for: this record waits on the I/O thread;
        # the records after it must not overtake it into order-known's batches.
        unknown = p.send("order-new", b"x")
        assert p._one_by_one >= 1, "the record did not take the way through the I/O thread"
        second = [p.send("order-known", b"b%d" % i, partition=0) for i in range(300)]
        p.flush(30)
        got = offsets(first) + offsets(second)
        assert got == list(range(600)), got[:5]
        assert unknown.result(30).offset == 0


def test_records_past_a_full_buffer_keep_their_order_and_all_arrive(broker):
    create_topic(broker.bootstrap, "order-memory", 2)
    n = 30_000
    # 200 KiB of buffer for ~4 MB of records: appends here and waits for memory alternate.
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=200 * 1024,
                  batch_size=16384, linger_ms=5) as p:
        p.partitions_for("order-memory")
        futs = [p.send("order-memory", b"%06d" % i + b"." * 100, partition=i % 2)
                for i in range(n)]
        p.flush(60)
        by_partition: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
        for i, f in enumerate(futs):
            md = f.result(30)
            by_partition[md.partition].append((md.offset, i))
    for part, pairs in by_partition.items():
        assert [o for o, _ in pairs] == list(range(n // 2)), f"partition {part}: offsets out of order"
        assert [i for _, i in pairs] == list(range(part, n, 2))
    assert sorted(int(r.value[:6]) for r in ck_consume_all(broker.bootstrap, "order-memory", 2, n)) \
        == list(range(n))


def test_a_caller_waiting_for_memory_is_woken_when_an_eighth_is_free_not_per_batch(broker):
    # Each wake-up of a caller waiting for buffer.memory is a hand-over of the GIL both
    # ways, and it let the caller append one batch before it waited again: the I/O thread
    # wakes it once an eighth of the buffer is free (or nothing is left in flight).
    create_topic(broker.bootstrap, "memory-wakeups", 1)
    n = 5_000
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=1 << 20,
                  batch_size=16384, linger_ms=5) as p:
        p.partitions_for("memory-wakeups")
        notifies = 0
        real = p._memory_freed.notify_all

        def counted() -> None:
            nonlocal notifies
            notifies += 1
            real()
        p._memory_freed.notify_all = counted     # type: ignore[method-assign]
        futs = [p.send("memory-wakeups", b"%06d" % i + b"." * 1018, partition=0)
                for i in range(n)]
        p.flush(60)
        assert [f.result(30).offset for f in futs] == list(range(n))
    batches = n * 1045 // 16384             # ~15 records of 1 KiB a batch
    assert 0 < notifies <= batches // 4, f"{notifies} wake-ups for ~{batches} batches"


def test_a_batch_that_never_fills_goes_out_after_linger(broker):
    create_topic(broker.bootstrap, "linger", 1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=100) as p:
        p.partitions_for("linger")
        started = time.monotonic()
        fut = p.send("linger", b"alone", partition=0)
        md = fut.result(10)            # no flush: only the linger timer sends it
        assert md.offset == 0
        assert time.monotonic() - started >= 0.09


def test_open_batches_are_delivered_by_flush_and_by_close(broker):
    create_topic(broker.bootstrap, "open-batches", 3)
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=600_000)   # never by linger
    p.partitions_for("open-batches")
    flushed = [p.send("open-batches", b"f%d" % i, partition=i % 3) for i in range(30)]
    p.flush(30)
    assert all(f.done() and f.exception(0) is None for f in flushed)
    closed = [p.send("open-batches", b"c%d" % i, partition=i % 3) for i in range(30)]
    p.close(30)
    assert all(f.done() and f.exception(0) is None for f in closed)
    assert len(ck_consume_all(broker.bootstrap, "open-batches", 3, 60)) == 60


def test_threads_sending_at_once_each_keep_their_order(broker):
    create_topic(broker.bootstrap, "threads", 1)
    per_thread, threads = 5_000, 4
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=2) as p:
        p.partitions_for("threads")
        futs: dict[int, list] = {t: [] for t in range(threads)}

        def run(t: int) -> None:
            for i in range(per_thread):
                futs[t].append(p.send("threads", b"%d:%d" % (t, i), partition=0))

        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        p.flush(60)
        for t in range(threads):
            got = offsets(futs[t])
            assert got == sorted(got) and len(set(got)) == per_thread, f"thread {t}"
    seen = ck_consume_all(broker.bootstrap, "threads", 1, per_thread * threads)
    for t in range(threads):
        mine = [int(r.value.split(b":")[1]) for r in seen if r.value.startswith(b"%d:" % t)]
        assert mine == list(range(per_thread)), f"thread {t}"


def test_a_record_the_serializer_refuses_fails_alone_on_the_io_thread(broker):
    create_topic(broker.bootstrap, "refused", 1)

    def serialize(topic: str, value: object) -> bytes:
        if value == "bad":
            raise ValueError("no bad values here")
        return str(value).encode()

    reports: list[tuple[str, str | None]] = []

    def on_delivery(err, md) -> None:
        reports.append((threading.current_thread().name, None if err is None else str(err)))

    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=serialize) as p:
        p.partitions_for("refused")
        futs = [p.send("refused", v, partition=0, on_delivery=on_delivery)
                for v in ("one", "bad", "two")]
        p.flush(30)
        wait_futures(futs, 30)
        assert isinstance(futs[1].exception(0), ValueError)
        assert [f.result(0).offset for f in (futs[0], futs[2])] == [0, 1]
    assert sorted(e or "" for _, e in reports) == ["", "", "no bad values here"]
    assert {name for name, _ in reports} == {"strom-producer"}


def test_a_serializers_bytearray_or_memoryview_is_sent_as_its_bytes(broker):
    """The record encoder takes bytes (compiled, it checks): what else a serializer returns
    is made bytes at send(), or refused there if it is no buffer at all."""
    create_topic(broker.bootstrap, "buffers", 1)
    made = {"ba": bytearray(b"from a bytearray"), "mv": memoryview(b"from a memoryview"),
            "int": 7}
    with Producer(bootstrap_servers=broker.bootstrap, value_serializer=lambda t, v: made[v],
                  key_serializer=lambda t, k: bytearray(k.encode())) as p:
        futs = [p.send("buffers", v, key=v, partition=0) for v in ("ba", "mv", "int")]
        p.flush(30)
        wait_futures(futs, 30)
        assert [f.result(0).offset for f in futs[:2]] == [0, 1]
        error = futs[2].exception(0)
        assert isinstance(error, TypeError) and "value serializer returned int" in str(error)
    seen = ck_consume_all(broker.bootstrap, "buffers", 1, 2)
    assert [(r.key, r.value) for r in seen] == [(b"ba", b"from a bytearray"),
                                               (b"mv", b"from a memoryview")]


def test_a_full_buffer_blocks_send_in_the_callers_thread_then_fails_the_record(broker):
    """The broker paused: nothing completes, buffer.memory (32 KiB: 32 records of ~1 KiB)
    fills, and each send() after that blocks in the caller's thread for max.block.ms, then
    fails its record with KafkaTimeoutError through the future and on_delivery. Once the broker runs again, the
    records that found memory are all delivered."""
    import os
    import signal

    from clients.aio.errors import KafkaTimeoutError

    create_topic(broker.bootstrap, "full-buffer", 1)
    failed: list[BaseException | None] = []
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=32 * 1024,
                  max_block_ms=300, linger_ms=1, request_timeout_ms=20_000,
                  delivery_timeout_ms=60_000) as p:
        p.partitions_for("full-buffer")
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            fits = [p.send("full-buffer", b"x" * 1000, partition=0) for _ in range(32)]
            started = time.monotonic()
            refused = [p.send("full-buffer", b"y" * 1000, partition=0,
                              on_delivery=lambda err, md: failed.append(err))
                       for _ in range(3)]
            blocked = time.monotonic() - started
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert blocked >= 3 * 0.3 * 0.9, f"send() returned after {blocked:.2f}s: it did not wait"
        wait_futures(refused, 10)
        assert all(isinstance(f.exception(0), KafkaTimeoutError) for f in refused)
        p.flush(30)
        assert [f.result(0).offset for f in fits] == list(range(32))
    assert len(failed) == 3 and all(isinstance(e, KafkaTimeoutError) for e in failed)


def test_a_send_from_a_delivery_callback_never_blocks_the_io_thread_on_a_full_buffer(broker):
    """on_delivery runs on the I/O thread; a send() from it that finds buffer.memory full must
    not wait there (the I/O thread is what frees the memory): it goes the I/O thread's own
    way, and everything is delivered well within max.block.ms (60 s here)."""
    create_topic(broker.bootstrap, "from-callback", 1)
    later: list = []
    with Producer(bootstrap_servers=broker.bootstrap, buffer_memory=4 * 1024,
                  max_block_ms=60_000, linger_ms=1) as p:
        p.partitions_for("from-callback")

        def send_more(err, md) -> None:
            if err is None and not later:
                later.extend(p.send("from-callback", b"z" * 1000, partition=0)
                             for _ in range(20))

        first = [p.send("from-callback", b"a" * 1000, partition=0, on_delivery=send_more)
                 for _ in range(3)]
        started = time.monotonic()
        wait_futures(first, 30)
        p.flush(30)
        wait_futures(later, 30)
        assert time.monotonic() - started < 15, "the I/O thread waited for memory"
        assert len(later) == 20 and all(f.exception(0) is None for f in later)


def test_sends_past_the_hand_off_limit_wait_for_the_io_thread_and_then_go_on(broker):
    # A topic without metadata yet: every record goes to the I/O thread one by one, and
    # past 10,000 queued, send() waits in the caller's thread until the I/O thread takes
    # them (_wait_for_room, woken by the drain as it takes the queue). A wake-up lost there
    # leaves send() blocked for max.block.ms, then KafkaTimeoutError.
    n = 25_000
    with Producer(bootstrap_servers=broker.bootstrap, max_block_ms=20_000) as p:
        started = time.monotonic()
        futs = [p.send("handoff-new", b"%d" % i, partition=0) for i in range(n)]
        took = time.monotonic() - started
        p.flush(60)
        assert offsets(futs) == list(range(n))
    assert took < 15, f"{n} sends took {took:.1f}s"
