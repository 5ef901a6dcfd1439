"""strom-verify's fault schedule and registry, with fault kinds of the test's own that only
note what they were asked to do: kinds take turns, every fault that began ends (also when the
run is stopped mid-fault), no fault begins that could not end before the deadline, and a
broken-off run heals every broker."""
from __future__ import annotations

import random
import threading
import time

import pytest

from broker.testing.verify.faults import (FAULT_KINDS, Fault, FaultContext, FaultSchedule,
                                          fault_kinds, register)

EVENTS: list[str] = []


class Noted(Fault):
    name = "noted-a"
    summary = "notes its begin and end"

    def begin(self, ctx: FaultContext) -> str:
        EVENTS.append(f"begin {self.name}")
        return "began"

    def end(self, ctx: FaultContext) -> str:
        EVENTS.append(f"end {self.name}")
        return "ended"


class NotedB(Noted):
    name = "noted-b"


class Broken(Fault):
    name = "broken"
    summary = "cannot begin"

    def begin(self, ctx: FaultContext) -> str:
        raise RuntimeError("no leader")


class Brokers:
    """A LocalCluster of three brokers that notes what it is told; broker 2 is down."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.down = {2}

    def broker_ids(self) -> list[int]:
        return [0, 1, 2]

    def running(self, b: int) -> bool:
        return b not in self.down

    def kill9(self, b: int) -> None:
        self.calls.append(f"kill9 {b}")

    def pause(self, b: int) -> None:
        self.calls.append(f"pause {b}")

    def resume(self, b: int) -> None:
        self.calls.append(f"resume {b}")

    def start(self, b: int) -> None:
        self.calls.append(f"start {b}")
        self.down.discard(b)


@pytest.fixture
def kinds():
    EVENTS.clear()
    for kind in (Noted, NotedB, Broken):
        register(kind)
    yield
    for kind in (Noted, NotedB, Broken):
        FAULT_KINDS.pop(kind.name, None)


def schedule(names: list[str], interval: float = 0.01, hold: float = 0.01,
             cluster: Brokers | None = None) -> FaultSchedule:
    ctx = FaultContext(cluster=cluster or Brokers(), view=None,  # type: ignore[arg-type]
                       rng=random.Random(1), log=lambda line: None)
    return FaultSchedule(names, ctx, interval, hold)


def test_the_shipped_kinds_are_registered():
    assert {"kill9", "pause", "leader-ahead"} <= set(fault_kinds())
    for kind in fault_kinds().values():
        assert kind.summary


def test_kinds_take_turns_and_every_fault_ends(kinds):
    s = schedule(["noted-a", "noted-b"])
    s.run(time.monotonic() + 0.3, threading.Event())
    assert s.done["noted-a"] >= 2 and abs(s.done["noted-a"] - s.done["noted-b"]) <= 1
    expected = []
    for i in range(len(EVENTS) // 2):
        name = ["noted-a", "noted-b"][i % 2]
        expected += [f"begin {name}", f"end {name}"]
    assert EVENTS == expected
    assert s.lines[0].endswith("noted-a: began") and s.lines[1].endswith("noted-a: ended")


def test_no_fault_begins_that_could_not_end_before_the_deadline(kinds):
    s = schedule(["noted-a"], interval=0.01, hold=1.0)
    started = time.monotonic()
    s.run(started + 0.5, threading.Event())
    assert EVENTS == [] and not s.done
    assert time.monotonic() - started < 0.9


def test_rounds_do_the_list_that_many_times_whatever_the_deadline(kinds):
    s = schedule(["noted-a", "noted-b"], hold=0.05)
    s.run(time.monotonic(), threading.Event(), rounds=2)     # the deadline has passed already
    assert s.done == {"noted-a": 2, "noted-b": 2}
    assert EVENTS == ["begin noted-a", "end noted-a", "begin noted-b", "end noted-b"] * 2


def test_stopping_mid_fault_still_ends_it(kinds):
    stop = threading.Event()
    s = schedule(["noted-a"], interval=0.01, hold=30.0)
    threading.Timer(0.2, stop.set).start()
    started = time.monotonic()
    s.run(started + 60, stop)
    assert time.monotonic() - started < 5
    assert EVENTS == ["begin noted-a", "end noted-a"]


def test_a_broken_off_run_heals_every_broker(kinds):
    cluster = Brokers()
    s = schedule(["broken"], cluster=cluster)
    with pytest.raises(RuntimeError, match="no leader"):
        s.run(time.monotonic() + 5, threading.Event())
    s.heal_all()
    assert cluster.calls == ["resume 0", "resume 1", "resume 2", "start 2"]
    assert any("broker 2 started again" in line for line in s.lines)


def test_unknown_kinds_and_a_name_taken_twice_are_refused(kinds):
    with pytest.raises(ValueError, match="unknown fault kind.*nope"):
        schedule(["noted-a", "nope"])

    class Impostor(Noted):
        name = "noted-a"

    with pytest.raises(ValueError, match="registered twice"):
        register(Impostor)
    register(Noted)          # the same class again is fine (a module imported twice)
