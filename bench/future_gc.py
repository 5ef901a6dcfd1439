"""What the cyclic collector costs per future a caller keeps (issue 25: the sync Producer at
100 B and 1 partition).

A send() loop that keeps every future, as the clients benchmark does (each future checked
afterwards), makes the kept futures most of the process's tracked objects. CPython runs a
full collection whenever objects promoted to the oldest generation since the last one
exceed a quarter of those in it, so over a loop each kept future is traversed about five
times by full collections, and a traversal costs what the object's layout costs.

Two measurements, each `--repeats` times (the table shows medians):

1. full collection, ns per kept object: `--objects` objects of each kind in a list, the
   fastest of 5 `gc.collect()` calls less the fastest of 5 without them, divided by the
   count;
   - the sync Producer's future as send() leaves it (clients.producer.RecordFuture of a
     producer's class appended by _CallerBatch.add_record: its batch's outcome and its
     offset delta, the record's numbers in the outcome);
   - the same future as send() left it until 2026-11-28: an (offset delta, timestamp, key
     size, value size) tuple of its own;
   - asyncio.Future (what AsyncProducer.send returns; a C type);
   - an object of a class with a __dict__ and two attributes, and one with two __slots__
     and no __dict__ (which no subclass of concurrent.futures.Future can be: the base class
     has a __dict__);
2. a loop keeping `--objects` of the sync Producer's futures with the collector on, each
   appended to its batch as send() does (a record of 100 B): the full collections it ran
   and the time they took, per kept future; the same with the futures of before.

    python bench/future_gc.py [--objects 200000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import Results, add_results_args, machine, print_table  # noqa: E402
from clients.producer import RecordFuture, _CallerBatch, _Outcome  # noqa: E402
from clients.types import TopicPartition  # noqa: E402

PER_BATCH = 150         # records of 100 B in a 16 KiB batch


class _WithDict:
    pass


class _Slotted:
    __slots__ = ("a", "b")


_VALUE = b"v" * 100


def _record_futures(n: int) -> list[Any]:
    """n futures as the sync Producer's send() leaves them: appended to their batch."""
    cls = RecordFuture.sharing(threading.Condition())
    tp = TopicPartition("t", 0)
    out: list[Any] = []
    batch = _CallerBatch(tp, 0.0, 60.0, cls._condition)
    now_ms = time.time_ns() // 1_000_000
    for i in range(n):
        if i % PER_BATCH == 0:
            batch = _CallerBatch(tp, 0.0, 60.0, cls._condition)
        fut = cls()
        batch.add_record(fut, now_ms + i, None, _VALUE, b"\x00", 121, None)
        out.append(fut)
    return out


def _record_futures_before(n: int) -> list[Any]:
    """n futures as send() left them until 2026-11-28: with a tuple of numbers each."""
    cls = RecordFuture.sharing(threading.Condition())
    tp = TopicPartition("t", 0)
    out: list[Any] = []
    outcome = _Outcome(tp, cls._condition)
    now_ms = time.time_ns() // 1_000_000
    for i in range(n):
        if i % PER_BATCH == 0:
            outcome = _Outcome(tp, cls._condition)
        fut = cls()
        fut._outcome = outcome
        fut._rec = (i % PER_BATCH, now_ms + i, -1, 100)
        out.append(fut)
    return out


def _asyncio_futures(n: int) -> list[Any]:
    loop = asyncio.new_event_loop()
    try:
        return [loop.create_future() for _ in range(n)]
    finally:
        loop.close()


def _plain(cls: type) -> Callable[[int], list[Any]]:
    """n objects of `cls`, each with two attributes set."""
    def make(n: int) -> list[Any]:
        out = []
        for i in range(n):
            o = cls()
            o.a, o.b = None, i % PER_BATCH
            out.append(o)
        return out
    return make


KINDS: list[tuple[str, Callable[[int], list[Any]]]] = [
    ("sync Producer future (RecordFuture, numbers in its outcome)", _record_futures),
    ("sync Producer future before (a tuple of numbers each)", _record_futures_before),
    ("asyncio.Future (AsyncProducer.send)", _asyncio_futures),
    ("object with a __dict__, 2 attributes", _plain(_WithDict)),
    ("object with 2 __slots__, no __dict__", _plain(_Slotted)),
]


def full_collection_ns(make: Callable[[int], list[Any]], n: int) -> float:
    """A full collection's time with the objects kept, less its time without them (the
    process's own objects), per object."""
    gc.collect()
    gc.disable()
    try:
        without = min(_timed_collect() for _ in range(5))
        kept = make(n)
        gc.collect()
        best = min(_timed_collect() for _ in range(5))
        del kept
    finally:
        gc.enable()
    return (best - without) / n * 1e9


def _timed_collect() -> float:
    t = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t


def send_loop_collections(n: int, make: Callable[[int], list[Any]]) -> tuple[int, float]:
    """(full collections, their seconds) while `make` makes and keeps n futures."""
    started: list[float] = []
    full: list[float] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif info["generation"] == 2:
            full.append(time.perf_counter() - started[-1])
    gc.collect()
    gc.callbacks.append(callback)
    try:
        kept = make(n)
    finally:
        gc.callbacks.remove(callback)
    del kept
    return len(full), sum(full)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objects", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    add_results_args(ap)
    a = ap.parse_args(argv)
    out = Results("future_gc", a, machine())
    per_kind: dict[str, list[float]] = {name: [] for name, _ in KINDS}
    layouts = {"now": _record_futures, "before": _record_futures_before}
    loops: dict[str, list[tuple[int, float]]] = {k: [] for k in layouts}
    for r in range(a.repeats):
        run = {name: full_collection_ns(make, a.objects) for name, make in KINDS}
        for name, ns in run.items():
            per_kind[name].append(ns)
        send_loop = {}
        for layout, make in layouts.items():
            count, seconds = send_loop_collections(a.objects, make)
            loops[layout].append((count, seconds))
            send_loop[layout] = {"full_collections": count, "seconds": seconds}
        out.run(f"run{r}", {"full_collection_ns_per_object": run, "send_loop": send_loop})
    medians = {name: statistics.median(v) for name, v in per_kind.items()}
    print(f"\nfull collection with {a.objects:,} kept objects, ns per object (median of "
          f"{a.repeats}, each the fastest of 5 collections)")
    print_table(["kept object", "ns per object", "runs"],
                [[name, f"{medians[name]:.0f}", " / ".join(f"{x:.0f}" for x in per_kind[name])]
                 for name, _ in KINDS])
    summary: dict[str, Any] = {"full_collection_ns_per_object": medians}
    for layout, runs in loops.items():
        counts = [c for c, _ in runs]
        per_future_ns = [s / a.objects * 1e9 for _, s in runs]
        print(f"\na loop keeping {a.objects:,} sync Producer futures ({layout}): full "
              f"collections {' / '.join(map(str, counts))}, their time per kept future "
              f"{' / '.join(f'{x:.0f}' for x in per_future_ns)} ns (median "
              f"{statistics.median(per_future_ns):.0f})")
        summary[f"send_loop_{layout}"] = {
            "full_collections": counts,
            "full_collection_ns_per_future": statistics.median(per_future_ns)}
    out.summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
