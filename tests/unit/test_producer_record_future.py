"""The sync Producer's RecordFuture: a concurrent.futures.Future sharing its producer's lock,
made without running Python code and completed a batch at a time. Waiting for one must not
end early when another future of the producer completes, and the standard library's helpers
(wait, as_completed, callbacks, cancel) work on it, also when its batch completes it."""
from __future__ import annotations

import concurrent.futures
import gc
import threading
import time
from typing import Any

import pytest

from clients.producer import Completions, RecordFuture, _CallerBatch
from clients.types import RecordMetadata, TopicPartition


def test_it_has_every_attribute_a_future_has() -> None:
    # RecordFuture skips Future.__init__ (its Condition is the costly part): if a Python
    # version adds an attribute there, this fails instead of a method breaking later.
    fut = RecordFuture.sharing(threading.Condition())()
    for name, value in vars(concurrent.futures.Future()).items():
        if name != "_condition":
            assert getattr(fut, name) == value, name


def test_each_future_has_lists_of_its_own() -> None:
    cls = RecordFuture.sharing(threading.Condition())
    a, b = cls(), cls()
    a.add_done_callback(lambda f: None)
    assert a._done_callbacks and not b._done_callbacks
    a._waiters.append("w")
    assert not b._waiters and not vars(cls()), "a new future carries nothing of its own"


@pytest.mark.parametrize("condition", [threading.Condition, Completions])
def test_waiting_outlasts_the_completion_of_other_futures(condition) -> None:
    cls = RecordFuture.sharing(condition())
    mine, others = cls(), [cls() for _ in range(20)]

    def complete() -> None:
        for f in others:            # each wakes every waiter of the shared lock
            time.sleep(0.01)
            f.set_result(f)
        time.sleep(0.05)
        mine.set_result("mine")

    t = threading.Thread(target=complete)
    t.start()
    assert mine.result(timeout=5) == "mine"
    t.join()


def test_timeout_and_exception() -> None:
    f = RecordFuture.sharing(threading.Condition())()
    started = time.monotonic()
    with pytest.raises(concurrent.futures.TimeoutError):
        f.result(timeout=0.2)
    assert 0.15 <= time.monotonic() - started < 2
    threading.Timer(0.05, f.set_exception, [ValueError("boom")]).start()
    assert isinstance(f.exception(timeout=5), ValueError)
    with pytest.raises(ValueError):
        f.result()


def test_standard_helpers_work() -> None:
    cls = RecordFuture.sharing(threading.Condition())
    futs = [cls() for _ in range(3)]
    seen: list[object] = []
    futs[0].add_done_callback(lambda f: seen.append(f.result()))
    assert futs[2].cancel() and futs[2].cancelled()
    threading.Timer(0.05, futs[0].set_result, [0]).start()
    threading.Timer(0.1, futs[1].set_result, [1]).start()
    done, not_done = concurrent.futures.wait(futs[:2], timeout=5)
    assert done == set(futs[:2]) and not not_done and seen == [0]
    assert {f.result() for f in concurrent.futures.as_completed(futs[:2], timeout=5)} == {0, 1}


def _batch_of(futs: list[RecordFuture], callbacks: list[Any]) -> _CallerBatch:
    batch = _CallerBatch(TopicPartition("t", 3), 0.0, 60.0, futs[0]._condition)
    for i, (fut, cb) in enumerate(zip(futs, callbacks)):
        batch.add_record(fut, 1000 + i, None, b"v%d" % i, b"\x00", 30, cb)
    return batch


@pytest.mark.parametrize("condition", [threading.Condition, Completions])
def test_a_batch_completes_its_futures_together_with_waiters_and_callbacks(condition) -> None:
    cls = RecordFuture.sharing(condition())
    futs = [cls() for _ in range(5)]
    order: list[Any] = []
    delivered = [None, None, lambda err, md: order.append(("delivery", md.offset)), None, None]
    batch = _batch_of(futs, delivered)      # as send() returns them: in their batch
    assert futs[1].cancel()
    futs[2].add_done_callback(lambda f: order.append(("done", f.result().offset)))
    waited: list[Any] = []
    waiter = threading.Thread(target=lambda: waited.append(
        concurrent.futures.wait([futs[3], futs[4]], timeout=5)))
    waiter.start()
    time.sleep(0.05)                    # the wait has installed its waiters
    assert not any(f.done() for f in futs if f is not futs[1])
    batch.complete(base_offset=40, log_append_time=-1)
    waiter.join(5)
    done, not_done = waited[0]
    assert done == {futs[3], futs[4]} and not not_done
    assert [f.result(0) for f in (futs[0], futs[2], futs[3], futs[4])] == [
        RecordMetadata("t", 3, 40 + i, 1000 + i, -1, 2) for i in (0, 2, 3, 4)]
    assert futs[1].cancelled()
    assert order == [("done", 42), ("delivery", 42)]


def test_a_failed_batch_fails_its_futures() -> None:
    cls = RecordFuture.sharing(threading.Condition())
    futs = [cls() for _ in range(3)]
    errors: list[Any] = []
    batch = _batch_of(futs, [lambda err, md: errors.append(err), None, None])
    waited: list[Any] = []
    waiter = threading.Thread(target=lambda: waited.append(
        concurrent.futures.wait(futs, timeout=5, return_when="FIRST_EXCEPTION")))
    waiter.start()
    time.sleep(0.05)
    batch.fail(ValueError("lost"))
    waiter.join(5)
    assert waited and waited[0].done == set(futs)
    assert all(isinstance(f.exception(0), ValueError) for f in futs) and len(errors) == 1
    with pytest.raises(ValueError):
        futs[2].result(0)


def test_a_future_made_and_completed_in_a_batch_keeps_nothing_of_its_own() -> None:
    # the point of the outcome: completing a batch touches none of its records' futures
    cls = RecordFuture.sharing(threading.Condition())
    futs = [cls() for _ in range(3)]
    _batch_of(futs, [None] * 3).complete(base_offset=7, log_append_time=5555)
    assert [set(vars(f)) for f in futs] == [{"_outcome", "_delta"}] * 3
    assert [f.result(0).offset for f in futs] == [7, 8, 9]
    assert {f.result(0).timestamp for f in futs} == {5555}


def test_a_record_appended_leaves_the_cyclic_collector_one_object_its_future() -> None:
    # A send() loop's futures outlive the loop (the caller keeps them), and the collector
    # runs (young and full) by the count of tracked objects made: a tuple of numbers per
    # record, tracked until the next young collection, doubled the collections a 100 B
    # send() loop ran. The record's numbers go to its batch's outcome, the future keeps
    # its offset delta (an int). Made and appended one at a time, as send() does.
    cls = RecordFuture.sharing(threading.Condition())
    batch = _CallerBatch(TopicPartition("t", 3), 0.0, 60.0, cls._condition)
    futs = [cls()]
    batch.add_record(futs[0], 1000, None, b"v", b"\x00", 30, None)
    gc.disable()
    try:
        before = gc.get_count()[0]
        for i in range(1, 200):
            fut = cls()
            batch.add_record(fut, 1000 + i, None, b"v%d" % i, b"\x00", 30, None)
            futs.append(fut)
        made = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert made == 199
    assert all(f._outcome is batch.outcome and f._delta == i for i, f in enumerate(futs))
    batch.complete(base_offset=50, log_append_time=-1)
    assert futs[199].result(0) == RecordMetadata("t", 3, 249, 1199, -1, 4)


@pytest.mark.parametrize("fails", [False, True])
def test_records_the_io_thread_appends_to_a_callers_batch_are_resolved_too(fails: bool) -> None:
    # Once in the core's buffer, a caller's batch with room takes records handed off one by
    # one (ProducerBatch.add on the I/O thread): futures without an outcome of their own.
    cls = RecordFuture.sharing(threading.Condition())
    mine, foreign = cls(), cls()
    batch = _batch_of([mine], [None])
    heard: list[Any] = []
    batch.add(2000, None, b"late", b"\x00", 30,
              (foreign, 2000, -1, 4, lambda e, md: heard.append(md)))
    if fails:
        batch.fail(ValueError("lost"))
        assert isinstance(foreign.exception(0), ValueError) and heard == [None]
    else:
        batch.complete(base_offset=10, log_append_time=-1)
        assert foreign.result(0) == RecordMetadata("t", 3, 11, 2000, -1, 4) == heard[0]
        assert mine.result(0).offset == 10


def test_completions_notify_only_when_a_thread_waits(monkeypatch) -> None:
    # A batch completing notifies its producer's condition; with nobody waiting (a send()
    # loop that reads its futures afterwards) that costs nothing, and a waiter is still woken.
    notified: list[int] = []
    real = threading.Condition.notify
    monkeypatch.setattr(threading.Condition, "notify",
                        lambda self, n=1: (notified.append(n), real(self, n))[1])
    cls = RecordFuture.sharing(Completions())
    futs = [cls(), cls()]
    _batch_of(futs[:1], [None]).complete(base_offset=1, log_append_time=-1)
    assert futs[0].result(0).offset == 1 and notified == [] and cls._condition.waiting == 0
    batch = _batch_of(futs[1:], [None])
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(futs[1].result(5)))
    waiter.start()
    deadline = time.monotonic() + 5
    while cls._condition.waiting != 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert cls._condition.waiting == 1
    batch.complete(base_offset=7, log_append_time=-1)
    waiter.join(5)
    assert got and got[0].offset == 7 and notified and cls._condition.waiting == 0
