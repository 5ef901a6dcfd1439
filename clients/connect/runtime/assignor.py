"""The Connect group leader's assignors: Kafka's IncrementalCooperativeAssignor (KIP-415, as
in Kafka 3.x) and EagerAssignor.

Sans-io: the leader hands in every member's metadata (url, config offset, what it runs),
its config snapshot (offset, {connector: task count} for the connectors whose configs
exist) and the time; it gets back each member's `ConnectAssignment`. The incremental
assignor remembers, between rebalances it leads, what it assigned, so it can tell:

  - deleted: assigned before, no longer configured -> revoked from whoever runs it;
  - duplicated: run by two workers -> revoked from all of them (and assigned again);
  - lost: assigned before, run by nobody now (a worker left) -> held back for up to
    `scheduled.rebalance.max.delay.ms` in case the worker returns (every assignment
    carries the remaining delay; the members rejoin when it ends), then given to the
    workers that joined meanwhile with nothing (round robin), else to everyone as new;
  - created: configured, never assigned -> the least loaded workers, round robin,
    connectors and tasks balanced separately;
  - imbalance: when no delay is pending, each worker above its share (of connectors and
    of tasks separately) gives up the excess: revoked in this rebalance, assigned in the
    next (the worker rejoins after stopping them). Two revoking rebalances in a row make
    the next one wait (40 ms, 1.6 s, ... capped at the max delay), as Kafka.

A member's assignment lists only what changes: new units to start, revoked units to stop.
When the leader's snapshot is older than a member's config offset the assignment fails
for everyone with CONFIG_MISMATCH (they read the config topic and rejoin). Not
thread-safe; one instance per leader, kept across rebalances.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence, TypeVar

from .connect_protocol import (CONFIG_MISMATCH, NO_ERROR, PROTOCOL_VERSIONS, SESSIONED,
                               ConnectAssignment, TaskId, WorkerMetadata)

__all__ = ["IncrementalCooperativeAssignor", "eager_assign", "configured_units"]

log = logging.getLogger("strom.connect.assignor")

T = TypeVar("T", str, TaskId)


@dataclass
class _Units:
    """A set of connectors and tasks."""

    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def minus(self, *others: "_Units") -> "_Units":
        out = _Units(set(self.connectors), set(self.tasks))
        for o in others:
            out.connectors -= o.connectors
            out.tasks -= o.tasks
        return out

    def add(self, other: "_Units") -> None:
        self.connectors |= other.connectors
        self.tasks |= other.tasks

    def __and__(self, other: "_Units") -> "_Units":
        return _Units(self.connectors & other.connectors, self.tasks & other.tasks)


@dataclass
class _Load:
    """What one worker will run after this rebalance (Kafka's WorkerLoad)."""

    worker: str
    connectors: list[str] = field(default_factory=list)
    tasks: list[TaskId] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.connectors and not self.tasks

    def remove(self, units: _Units) -> None:
        self.connectors = [c for c in self.connectors if c not in units.connectors]
        self.tasks = [t for t in self.tasks if t not in units.tasks]


def configured_units(task_counts: Mapping[str, int]) -> tuple[set[str], set[TaskId]]:
    """Every connector and task of a config snapshot."""
    return set(task_counts), {(c, i) for c, n in task_counts.items() for i in range(n)}


def _held(m: WorkerMetadata) -> _Units:
    a = m.allocation
    return _Units(set(a.connectors), set(a.tasks)) if a is not None else _Units()


def _mismatch(leader_id: str, members: Mapping[str, WorkerMetadata], config_offset: int,
              version: int) -> dict[str, ConnectAssignment] | None:
    """Everyone's CONFIG_MISMATCH when the leader's snapshot is older than a member's."""
    max_offset = max(m.config_offset for m in members.values())
    if config_offset >= max_offset:
        return None
    log.info("leader's config offset %d is behind a member's %d: CONFIG_MISMATCH",
             config_offset, max_offset)
    url = members[leader_id].url if leader_id in members else ""
    return {m: ConnectAssignment(CONFIG_MISMATCH, leader_id, url, max_offset, version=version)
            for m in members}


def eager_assign(leader_id: str, members: Mapping[str, WorkerMetadata], config_offset: int,
                 task_counts: Mapping[str, int]) -> dict[str, ConnectAssignment]:
    """Kafka's EagerAssignor (protocol "default"): every connector, then every task, dealt
    round robin to the members sorted by id; each assignment is the member's whole set."""
    failed = _mismatch(leader_id, members, config_offset, 0)
    if failed is not None:
        return failed
    url = members[leader_id].url if leader_id in members else ""
    out = {m: ConnectAssignment(NO_ERROR, leader_id, url, config_offset, version=0)
           for m in members}
    turn = itertools.cycle(sorted(members))
    for c in sorted(task_counts):
        out[next(turn)].connectors.append(c)
    for c in sorted(task_counts):
        for i in range(task_counts[c]):
            out[next(turn)].tasks.append((c, i))
    return out


def _deal(loads: list[_Load], units: Sequence[T], size: Callable[[_Load], int],
          give: Callable[[_Load, T], None]) -> None:
    """Kafka's assignConnectors/assignTasks: fill the least loaded workers first, one unit
    each in turn, so that the loads stay level."""
    if not units or not loads:
        return
    loads.sort(key=lambda w: (size(w), w.worker))
    first = loads[0]
    i = 0
    while i < len(units):
        level = size(first)
        up_to = next((k for k, w in enumerate(loads) if size(w) > level), len(loads))
        for w in loads[:up_to]:
            give(w, units[i])
            i += 1
            if i == len(units):
                break


def _balancing_revocations(total: int, loads: Sequence[_Load],
                           held: Callable[[_Load], list[T]]) -> dict[str, list[T]]:
    """What each worker gives up so that none holds more than its share of `total`: every
    worker ends with floor(total/n) and (total % n) of them with one more. The most
    loaded workers keep the extra ones, so nobody gives up more than needed; each gives
    up the first units of its `held` list."""
    n = len(loads)
    minimum, extras = divmod(total, n)
    sizes = [len(held(w)) for w in loads]
    at_min = sum(1 for s in sizes if s == minimum)
    at_extra = sum(1 for s in sizes if s == minimum + 1)
    if at_extra == extras and at_min + at_extra == n:
        return {}
    out: dict[str, list[T]] = {}
    given_extras = 0
    for w in sorted(loads, key=lambda w: (-len(held(w)), w.worker)):
        current = len(held(w))
        if current <= minimum:
            continue
        if given_extras < extras:
            given_extras += 1
            if current == minimum + 1:
                continue
            cap = minimum + 1
        else:
            cap = minimum
        out[w.worker] = held(w)[:current - cap]
    return out


class IncrementalCooperativeAssignor:
    """See the module docstring. `max_delay_ms` is scheduled.rebalance.max.delay.ms."""

    def __init__(self, max_delay_ms: int = 300000):
        self.max_delay_ms = max_delay_ms
        self.previous = _Units()             # what the last assignment left assigned
        self.previous_revocation = _Units()
        self.previous_generation = -1
        self.previous_members: set[str] = set()
        self.revoked_in_previous = False
        self.successive_revoking = 0
        self.candidate_workers: list[str] = []   # joined with nothing while a delay ran
        self.scheduled_rebalance = 0            # ms when lost units are given away; 0: none
        self.delay = 0
        # Leader state: what each member runs once this round's revocations are done.
        self.cluster_assignment: dict[str, tuple[list[str], list[TaskId]]] = {}

    def _backoff(self, attempts: int) -> int:
        """Kafka's ExponentialBackoff(1, 40, max_delay, jitter 0) (0 when the max is 0)."""
        if self.max_delay_ms == 0:
            return 0
        return int(min(40 ** min(attempts, 10), self.max_delay_ms))

    def assign(self, leader_id: str, members: Mapping[str, WorkerMetadata], config_offset: int,
               task_counts: Mapping[str, int], now_ms: int, generation: int,
               last_completed_generation: int,
               version: int = PROTOCOL_VERSIONS[SESSIONED]) -> dict[str, ConnectAssignment]:
        """Each member's assignment for `generation`. `config_offset`/`task_counts` are the
        leader's snapshot; `last_completed_generation` the last generation the leader
        itself completed (if it is not the one this assignor last assigned, its memory is
        stale and forgotten)."""
        if not members:
            return {}
        failed = _mismatch(leader_id, members, config_offset, version)
        if failed is not None:
            return failed
        start, revoked = self._assign(members, task_counts, now_ms, generation,
                                      last_completed_generation)
        url = members[leader_id].url if leader_id in members else ""
        out = {}
        for m in members:
            s, r = start.get(m, _Units()), revoked.get(m, _Units())
            out[m] = ConnectAssignment(NO_ERROR, leader_id, url, config_offset,
                                       sorted(s.connectors), sorted(s.tasks),
                                       sorted(r.connectors), sorted(r.tasks), self.delay, version)
        return out

    def _assign(self, members: Mapping[str, WorkerMetadata], task_counts: Mapping[str, int],
                now: int, generation: int, last_completed_generation: int
                ) -> tuple[dict[str, _Units], dict[str, _Units]]:
        if self.previous_generation != last_completed_generation:
            # The last assignment this leader computed may not have been delivered.
            self.previous = _Units()
        configured = _Units(*configured_units(task_counts))
        held = {m: _held(meta) for m, meta in members.items()}
        active = _Units()
        for h in held.values():
            active.add(h)
        if self.previous_revocation:
            # A revocation that did not happen (the units still run): start from what runs.
            if self.previous_revocation & active:
                self.previous = active.minus()
            self.previous_revocation = _Units()

        deleted = self.previous.minus(configured)
        lost = self.previous.minus(active, deleted)
        created = configured.minus(self.previous, active)
        counts: dict[object, int] = {}
        for h in held.values():
            for u in itertools.chain(h.connectors, h.tasks):
                counts[u] = counts.get(u, 0) + 1
        duplicated = _Units({c for c in active.connectors if counts[c] > 1},
                            {t for t in active.tasks if counts[t] > 1})

        current = {m: h.minus(deleted) for m, h in held.items()}
        to_revoke: dict[str, _Units] = {m: (h & deleted) for m, h in held.items()}
        for m, h in held.items():
            to_revoke[m].add(h & duplicated)
        loads = {m: _Load(m, sorted(h.connectors), sorted(h.tasks)) for m, h in held.items()}
        for m, load in loads.items():
            load.remove(to_revoke[m])

        to_reassign = self._handle_lost(lost, loads, now)

        if self.delay == 0:
            balancing = self._balancing(configured, loads, current)
            if balancing and self.revoked_in_previous:
                self.successive_revoking += 1
                self.delay = self._backoff(self.successive_revoking)
                if self.delay:
                    self.scheduled_rebalance = now + self.delay
                    log.debug("two revoking rebalances in a row: the next in %d ms", self.delay)
                else:
                    to_reassign.add(self._revoke(balancing, to_revoke, loads, current))
            elif balancing:
                to_reassign.add(self._revoke(balancing, to_revoke, loads, current))
                self.revoked_in_previous = True
            elif self.revoked_in_previous:
                self.revoked_in_previous = False      # balanced again
                self.successive_revoking = 0
        else:
            self.revoked_in_previous = False

        assign = created.minus()
        assign.add(to_reassign)
        order = list(loads.values())
        _deal(order, sorted(assign.connectors), lambda w: len(w.connectors),
              lambda w, c: w.connectors.append(c))
        _deal(order, sorted(assign.tasks), lambda w: len(w.tasks), lambda w, t: w.tasks.append(t))

        start = {m: _Units(set(w.connectors), set(w.tasks)).minus(current[m])
                 for m, w in loads.items()}
        self.previous = _Units()
        for w in loads.values():
            self.previous.add(_Units(set(w.connectors), set(w.tasks)))
        for r in to_revoke.values():
            self.previous = self.previous.minus(r)
            self.previous_revocation.add(r)
        self.previous.add(lost)
        self.previous_generation = generation
        self.previous_members = set(members)
        self.cluster_assignment = {
            m: (sorted(set(w.connectors) - to_revoke[m].connectors),
                sorted(set(w.tasks) - to_revoke[m].tasks)) for m, w in loads.items()}
        return start, to_revoke

    @staticmethod
    def _revoke(balancing: dict[str, _Units], to_revoke: dict[str, _Units],
                loads: dict[str, _Load], current: dict[str, _Units]) -> _Units:
        """Takes the balancing revocations off the loads; what a worker runs is revoked,
        what it was only about to get (lost units given to it) is returned, to be dealt
        to the least loaded workers in this very rebalance."""
        undealt = _Units()
        for m, units in balancing.items():
            to_revoke[m].add(units & current[m])
            undealt.add(units.minus(current[m]))
            loads[m].remove(units)
        return undealt

    @staticmethod
    def _balancing(configured: _Units, loads: dict[str, _Load],
                   current: dict[str, _Units]) -> dict[str, _Units]:
        workers = list(loads.values())
        if all(w.empty() for w in workers) or not configured:
            return {}

        # Units a worker does not run yet (given to it this round) are taken back first.
        def connectors(w: _Load) -> list[str]:
            return sorted(w.connectors, key=lambda c: (c in current[w.worker].connectors, c))

        def tasks(w: _Load) -> list[TaskId]:
            return sorted(w.tasks, key=lambda t: (t in current[w.worker].tasks, t))

        out: dict[str, _Units] = {}
        for m, cs in _balancing_revocations(len(configured.connectors), workers,
                                            connectors).items():
            out.setdefault(m, _Units()).connectors.update(cs)
        for m, ts in _balancing_revocations(len(configured.tasks), workers, tasks).items():
            out.setdefault(m, _Units()).tasks.update(ts)
        return out

    def _handle_lost(self, lost: _Units, loads: dict[str, _Load], now: int) -> _Units:
        """The lost units to assign as new now; may give them to candidate workers in
        `loads` directly, or hold them back (setting `delay`)."""
        if not lost and not self.revoked_in_previous:
            self._reset_delay()
            return _Units()
        if self.scheduled_rebalance <= 0 and set(loads) >= self.previous_members:
            # Nobody left: the units were missed (a member did not get its assignment).
            return lost
        if self.max_delay_ms == 0:
            return lost
        if self.scheduled_rebalance > 0 and now >= self.scheduled_rebalance:
            candidates = [loads[w] for w in self.candidate_workers if w in loads]
            self._reset_delay()
            self.revoked_in_previous = False
            if not candidates:
                return lost
            log.info("delay expired: lost %s go to %s", lost,
                     [w.worker for w in candidates])
            for w, c in zip(itertools.cycle(candidates), sorted(lost.connectors)):
                w.connectors.append(c)
            for w, t in zip(itertools.cycle(candidates), sorted(lost.tasks)):
                w.tasks.append(t)
            return _Units()
        for name in sorted(loads):
            if loads[name].empty() and name not in self.candidate_workers:
                self.candidate_workers.append(name)
        if now < self.scheduled_rebalance:
            self.delay = int(min(self.scheduled_rebalance - now, self.max_delay_ms))
        else:
            self.delay = self.max_delay_ms
        self.scheduled_rebalance = now + self.delay
        log.info("lost %s: waiting %d ms for their workers to return", lost, self.delay)
        return _Units()

    def _reset_delay(self) -> None:
        self.candidate_workers.clear()
        self.scheduled_rebalance = 0
        self.delay = 0

