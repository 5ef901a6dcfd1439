"""Connect workers' group membership against a real broker process: WorkerGroupMembers in
one event loop, each with its own KafkaClient, each driven as a DistributedHerder drives
it (stop what is revoked, then run what the member's assignment holds, rejoin when asked),
on a fixed config of 2 connectors x 3 tasks.

A ledger of what runs where fails the test if any connector or task ever runs on two
workers at once. Three workers share everything, each unit once; a fourth joins and gets
its share in two rebalances (revoke, then assign); a worker that dies without leaving
has its units held back for scheduled.rebalance.max.delay.ms, then given to the others.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from clients.aio.client import KafkaClient
from clients.config import resolve
from clients.connect.runtime.connect_protocol import ConnectAssignment
from clients.connect.runtime.member import WorkerGroupMember

pytestmark = pytest.mark.integration

CONFIG = (10, {"c1": 3, "c2": 3})
EVERYTHING = {"c1", "c2"} | {(c, i) for c in ("c1", "c2") for i in range(3)}
SESSION_MS = 1500
MAX_DELAY_MS = 2000


class Ledger:
    """Which worker runs each unit; a unit started while another worker runs it is an error."""

    def __init__(self) -> None:
        self.owner: dict[object, str] = {}
        self.violations: list[str] = []

    def start(self, worker: str, unit: object) -> None:
        other = self.owner.get(unit)
        if other is not None and other != worker:
            self.violations.append(f"{unit} started on {worker} while running on {other}")
        self.owner[unit] = worker

    def stop(self, worker: str, unit: object) -> None:
        if self.owner.get(unit) == worker:
            del self.owner[unit]

    def stop_all(self, worker: str) -> None:
        for unit in [u for u, w in self.owner.items() if w == worker]:
            del self.owner[unit]


class Worker:
    """A member driven like a herder: `history` is every assignment with its generation."""

    def __init__(self, name: str, member: WorkerGroupMember, ledger: Ledger):
        self.name, self.member, self.ledger = name, member, ledger
        self.running: set[object] = set()
        self.history: list[tuple[int, ConnectAssignment, float]] = []
        self.task: asyncio.Task[None] | None = None

    async def drive(self) -> None:
        m = self.member
        while True:
            a = await m.ensure_active()
            if m.generation >= 0 and (not self.history or self.history[-1][0] != m.generation):
                self.history.append((m.generation, a, time.monotonic()))
            for unit in [*a.revoked_connectors, *a.revoked_tasks]:
                self.running.discard(unit)
                self.ledger.stop(self.name, unit)
            held = {*m.assignment.connectors, *m.assignment.tasks}
            # The revocations named everything the worker no longer holds.
            assert self.running <= held, (self.running, held)
            for unit in held - self.running:
                self.running.add(unit)
                self.ledger.start(self.name, unit)
            if not m.need_rejoin:
                await m.changed.wait()


async def start_worker(port: int, name: str, ledger: Ledger) -> Worker:
    client = KafkaClient(resolve("consumer", bootstrap_servers=f"127.0.0.1:{port}"))
    await client.start()

    async def caught_up(offset: int) -> bool:
        return offset <= CONFIG[0]

    member = WorkerGroupMember(
        client, "connect-cluster", f"http://{name}:8083", session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=5000, heartbeat_interval_ms=200,
        scheduled_rebalance_max_delay_ms=MAX_DELAY_MS,
        config_snapshot=lambda: (CONFIG[0], dict(CONFIG[1])), catch_up=caught_up)
    w = Worker(name, member, ledger)
    w.task = asyncio.get_running_loop().create_task(w.drive())
    return w


async def kill(w: Worker) -> None:
    """Death: no LeaveGroup, no more heartbeats, connections gone."""
    assert w.task is not None
    w.task.cancel()
    await asyncio.gather(w.task, return_exceptions=True)
    await w.member.close(leave=False)
    await w.member.client.close()
    w.ledger.stop_all(w.name)


async def until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def settled(workers: list[Worker]) -> bool:
    """Every unit runs exactly once, on the worker whose assignment holds it, and every
    worker has handled the assignment of the generation it is in (JoinGroup sets the
    generation before SyncGroup brings the assignment)."""
    held: list[object] = []
    for w in workers:
        units = {*w.member.assignment.connectors, *w.member.assignment.tasks}
        if w.member.need_rejoin or not w.history or w.history[-1][0] != w.member.generation \
                or units != w.running:
            return False
        held.extend(units)
    generations = {w.member.generation for w in workers}
    return len(held) == len(set(held)) and set(held) == EVERYTHING and len(generations) == 1


def loads(workers: list[Worker]) -> list[tuple[int, int]]:
    return sorted((len(w.member.assignment.connectors), len(w.member.assignment.tasks))
                  for w in workers)


def test_workers_share_units_rebalance_cooperatively_and_survive_a_death(broker_factory):
    broker = broker_factory({"group.min.session.timeout.ms": "1000"})

    async def main() -> None:
        ledger = Ledger()
        workers = [await start_worker(broker.port, n, ledger) for n in ("w1", "w2", "w3")]
        try:
            await until(lambda: settled(workers), 20, "three workers sharing everything")
            assert loads(workers) == [(0, 2), (1, 2), (1, 2)]
            leader = next(w for w in workers if w.member.is_leader)
            assert {w.member.leader_url for w in workers} == {leader.member.url}

            # A fourth worker: one rebalance revokes, the next assigns.
            joined_at = max(w.member.generation for w in workers)
            w4 = await start_worker(broker.port, "w4", ledger)
            workers.append(w4)
            await until(lambda: settled(workers) and w4.running, 20, "the fourth worker's share")
            assert sorted(c for c, _ in loads(workers)) == [0, 0, 1, 1]
            assert sorted(t for _, t in loads(workers)) == [1, 1, 2, 2]
            first = min(g for g, _, _ in w4.history)
            revoking = [a for w in workers for g, a, _ in w.history if g == first]
            assert not any(a.connectors or a.tasks for a in revoking)
            assert sum(len(a.revoked_tasks) for a in revoking) == 1
            given = [a for g, a, _ in w4.history if g > first and a.tasks]
            assert given and given[0].tasks and first > joined_at

            # A worker holding units dies (not the leader, whose memory finds them lost).
            victim = next(w for w in workers if not w.member.is_leader and w.running)
            lost = set(victim.running)
            await kill(victim)
            died = time.monotonic()
            workers.remove(victim)
            await until(lambda: settled(workers) and any(
                a.delay_ms for w in workers for _, a, _ in w.history), 25,
                "the dead worker's units on the survivors")
            delayed = [t for w in workers for _, a, t in w.history if a.delay_ms and t > died]
            given_at = [t for w in workers for _, a, t in w.history
                        if t > died and lost & {*a.connectors, *a.tasks}]
            # Held back for the whole delay after the group noticed the death.
            assert min(given_at) - min(delayed) >= MAX_DELAY_MS / 1000 - 0.2
            assert min(given_at) - died >= (SESSION_MS + MAX_DELAY_MS) / 1000 - 0.5
            assert sorted(loads(workers)) == [(0, 2), (1, 2), (1, 2)]
            assert ledger.violations == []
        finally:
            for w in workers:
                if w.task is not None:
                    w.task.cancel()
                    await asyncio.gather(w.task, return_exceptions=True)
                await w.member.close()
                await w.member.client.close()

    asyncio.run(main())
