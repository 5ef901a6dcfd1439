"""The faults strom-verify can inject into a local cluster while it produces, and the schedule
that injects them (Jepsen's nemesis): every `interval` seconds the next kind of the list
begins, holds for `hold` seconds and ends (heals), in turn, until the run is over, or for a
set number of rounds of the list however long they take.

A fault kind is a `Fault` subclass registered under its name with `@register`:

    @register
    class Kill9(Fault):
        name = "kill9"
        summary = "SIGKILL a partition leader's broker; start it again when the fault ends"

        def begin(self, ctx: FaultContext) -> str: ...     # do it; say what was done
        def end(self, ctx: FaultContext) -> str: ...       # undo it; say what was done

`--faults kill9,pause` names registered kinds; another module adds kinds by importing
`register` and being imported before the schedule is built (`EXTRA_FAULT_MODULES`: the network
partitions of `partition_faults`, which set `needs_network`: they act on the network of a
cluster strom-verify started itself, `ctx.network`). `end` must leave the cluster able to
serve: a schedule always ends every fault it began, also when the run is interrupted.
"""
from __future__ import annotations

import importlib
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar

from broker.testing.verify.cluster_view import ClusterView
from broker.testing.verify.local_cluster import LocalCluster

if TYPE_CHECKING:
    from broker.testing.verify.netns_cluster import NetnsCluster

# Modules that register more fault kinds when they are importable (shipped by other parts of
# broker.testing); a missing one is skipped.
EXTRA_FAULT_MODULES: list[str] = ["broker.testing.verify.partition_faults"]

# How long a healed cluster gets to show a broker live again or a new partition leader.
HEAL_TIMEOUT = 60.0


@dataclass
class FaultContext:
    """What a fault acts on and reports to."""

    cluster: LocalCluster
    view: ClusterView
    rng: random.Random
    log: Callable[[str], None]
    heal_timeout: float = HEAL_TIMEOUT
    network: NetnsCluster | None = None     # a --netns-cluster's hosts, for partitions

    def partition_leaders(self) -> dict[int, int]:
        """partition -> leader broker id, for the partitions that have one now."""
        return {p.partition: p.leader for p in self.view.until(
            "the topic's partitions", self.view.partitions, self.heal_timeout) if p.leader >= 0}

    def running_brokers(self) -> list[int]:
        return [b for b in self.cluster.broker_ids() if self.cluster.running(b)]

    def victim(self) -> int:
        """A random partition's leader, the broker whose fault matters most; else a random
        running broker (no leader known)."""
        leaders = self.partition_leaders()
        running = set(self.running_brokers())
        choices = sorted({b for b in leaders.values() if b in running}) or sorted(running)
        if not choices:
            raise RuntimeError("no running broker to act on")
        return self.rng.choice(choices)

    def wait_live(self, broker_id: int) -> None:
        """Until the cluster reports the broker live (registered again after a start)."""
        self.view.until(f"broker {broker_id} live again",
                        lambda: broker_id in self.view.live_brokers(), self.heal_timeout)


class Fault:
    """One injection of a fault kind: `begin` then, `hold` seconds later, `end`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    needs_network: ClassVar[bool] = False      # only on a cluster with ctx.network

    def begin(self, ctx: FaultContext) -> str:
        raise NotImplementedError

    def end(self, ctx: FaultContext) -> str:
        raise NotImplementedError


FAULT_KINDS: dict[str, type[Fault]] = {}


def register(kind: type[Fault]) -> type[Fault]:
    """Class decorator: make `kind` available to --faults under `kind.name`."""
    if kind.name in FAULT_KINDS and FAULT_KINDS[kind.name] is not kind:
        raise ValueError(f"fault kind {kind.name!r} registered twice")
    FAULT_KINDS[kind.name] = kind
    return kind


def fault_kinds() -> dict[str, type[Fault]]:
    """Every registered kind, the extra modules' included."""
    for module in EXTRA_FAULT_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    return dict(FAULT_KINDS)


@register
class Kill9(Fault):
    name = "kill9"
    summary = ("kill -9 a partition leader's broker (its ZooKeeper session has to expire); "
               "start it again when the fault ends")

    def __init__(self) -> None:
        self.broker = -1

    def begin(self, ctx: FaultContext) -> str:
        self.broker = ctx.victim()
        ctx.cluster.kill9(self.broker)
        return f"broker {self.broker} killed (SIGKILL)"

    def end(self, ctx: FaultContext) -> str:
        ctx.cluster.start(self.broker)
        ctx.wait_live(self.broker)
        return f"broker {self.broker} started again and live"


@register
class Pause(Fault):
    name = "pause"
    summary = ("SIGSTOP a partition leader's broker (frozen: sockets open, nothing answered); "
               "SIGCONT when the fault ends")

    def __init__(self) -> None:
        self.broker = -1

    def begin(self, ctx: FaultContext) -> str:
        self.broker = ctx.victim()
        ctx.cluster.pause(self.broker)
        return f"broker {self.broker} paused (SIGSTOP)"

    def end(self, ctx: FaultContext) -> str:
        ctx.cluster.resume(self.broker)
        return f"broker {self.broker} resumed (SIGCONT)"


@register
class LeaderAhead(Fault):
    name = "leader-ahead"
    summary = ("pause every follower of a partition's leader (SIGSTOP) so that it runs ahead "
               "of them; when the fault ends kill -9 the leader, resume the followers, wait "
               "until one of them leads and start the old leader again. Safe settings "
               "(acks=all, min.insync.replicas >= 2) acknowledge nothing the followers lack; "
               "acks=1 loses what the leader acknowledged alone")

    def __init__(self) -> None:
        self.leader = -1
        self.followers: list[int] = []

    def begin(self, ctx: FaultContext) -> str:
        parts = [p for p in ctx.view.until("the topic's partitions", ctx.view.partitions,
                                           ctx.heal_timeout) if p.leader >= 0]
        if not parts:
            raise RuntimeError("no partition has a leader")
        part = ctx.rng.choice(parts)
        self.leader = part.leader
        running = set(ctx.running_brokers())
        self.followers = sorted(b for b in part.replicas if b != self.leader and b in running)
        for b in self.followers:
            ctx.cluster.pause(b)
        return (f"leader {self.leader} of partition {part.partition} runs ahead: its "
                f"followers {self.followers} paused (SIGSTOP)")

    def end(self, ctx: FaultContext) -> str:
        ctx.cluster.kill9(self.leader)
        for b in self.followers:
            ctx.cluster.resume(b)

        def others_lead() -> bool:
            parts = ctx.view.partitions()
            return bool(parts) and all(p.leader >= 0 and p.leader != self.leader for p in parts)

        # The old leader starts again only after others lead: started at once, it could be
        # elected again and keep what it alone had.
        try:
            ctx.view.until(f"leaders other than broker {self.leader}", others_lead,
                           ctx.heal_timeout)
            how = "other brokers lead"
        except TimeoutError:       # no clean leader left (unclean election off): it must return
            how = f"no other leader within {ctx.heal_timeout:g}s"
        ctx.cluster.start(self.leader)
        ctx.wait_live(self.leader)
        return (f"leader {self.leader} killed (SIGKILL), followers {self.followers} resumed; "
                f"{how}; broker {self.leader} started again and live")


@dataclass
class FaultSchedule:
    """Injects `kinds` in turn (round robin, in the order given) into `ctx`'s cluster: wait
    `interval`, begin, hold `hold`, end; until `stop` is set, and either `rounds` rounds of
    the list are done or, without `rounds`, no fault could end before `deadline` (monotonic).
    `done` counts the faults that began and ended; `log` gets one line per step."""

    kinds: list[str]
    ctx: FaultContext
    interval: float
    hold: float
    done: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        known = fault_kinds()
        unknown = [k for k in self.kinds if k not in known]
        if unknown:
            raise ValueError(f"unknown fault kind(s) {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(known))})")
        self._known = known
        self._started = time.monotonic()

    def _say(self, text: str) -> None:
        line = f"t={time.monotonic() - self._started:6.1f}s {text}"
        self.lines.append(line)
        self.ctx.log(line)

    def run(self, deadline: float, stop: threading.Event, rounds: int | None = None) -> None:
        self._started = time.monotonic()
        turn = 0
        while self.kinds and (rounds is None or turn < rounds * len(self.kinds)):
            wait = self.interval if rounds else min(self.interval, deadline - time.monotonic())
            if stop.wait(max(0.0, wait)):
                return
            if rounds is None and time.monotonic() + self.hold > deadline:
                return          # no time left to hold another fault before the run ends
            kind = self.kinds[turn % len(self.kinds)]
            turn += 1
            fault = self._known[kind]()
            self._say(f"{kind}: {fault.begin(self.ctx)}")
            try:
                stop.wait(self.hold)
            finally:
                self._say(f"{kind}: {fault.end(self.ctx)}")
            self.done[kind] += 1

    def heal_all(self) -> None:
        """The safety net after a run that broke off (a fault's begin or end failed, Ctrl-C):
        heal the network, resume every broker and start those that do not run. Failures are
        logged, not raised."""
        if self.ctx.network is not None:
            try:
                self.ctx.network.network.heal()
            except Exception as e:  # noqa: BLE001 - heal the brokers still
                self._say(f"heal: the network: {e}")
        for b in self.ctx.cluster.broker_ids():
            try:
                self.ctx.cluster.resume(b)
                if not self.ctx.cluster.running(b):
                    self.ctx.cluster.start(b)
                    self._say(f"heal: broker {b} started again")
            except Exception as e:  # noqa: BLE001 - heal the others
                self._say(f"heal: broker {b}: {e}")
