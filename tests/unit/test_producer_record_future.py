"""The sync Producer's RecordFuture: a concurrent.futures.Future sharing its producer's lock.
Waiting for one must not end early when another future of the producer completes, and the
standard library's helpers (wait, as_completed, callbacks, cancel) work on it."""
from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest

from clients.producer import RecordFuture


def test_it_sets_every_attribute_a_future_has() -> None:
    # RecordFuture skips Future.__init__ (its Condition is the costly part): if a Python
    # version adds an attribute there, this fails instead of a method breaking later.
    assert set(vars(RecordFuture(threading.Condition()))) == set(vars(concurrent.futures.Future()))


def test_waiting_outlasts_the_completion_of_other_futures() -> None:
    lock = threading.Condition()
    mine, others = RecordFuture(lock), [RecordFuture(lock) for _ in range(20)]

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
    lock = threading.Condition()
    f = RecordFuture(lock)
    started = time.monotonic()
    with pytest.raises(concurrent.futures.TimeoutError):
        f.result(timeout=0.2)
    assert 0.15 <= time.monotonic() - started < 2
    threading.Timer(0.05, f.set_exception, [ValueError("boom")]).start()
    assert isinstance(f.exception(timeout=5), ValueError)
    with pytest.raises(ValueError):
        f.result()


def test_standard_helpers_work() -> None:
    lock = threading.Condition()
    futs = [RecordFuture(lock) for _ in range(3)]
    seen: list[object] = []
    futs[0].add_done_callback(lambda f: seen.append(f.result()))
    assert futs[2].cancel() and futs[2].cancelled()
    threading.Timer(0.05, futs[0].set_result, [0]).start()
    threading.Timer(0.1, futs[1].set_result, [1]).start()
    done, not_done = concurrent.futures.wait(futs[:2], timeout=5)
    assert done == set(futs[:2]) and not not_done and seen == [0]
    assert {f.result() for f in concurrent.futures.as_completed(futs[:2], timeout=5)} == {0, 1}
