"""The group coordinator's Kafka semantics, in process and fast.

Each test builds a real Broker (LogManager, ReplicaManager, LocalMetadataStore, a
`__consumer_offsets` topic on disk under tmp_path) without starting its listeners, and swaps
in a GroupCoordinator on a fake clock. Time moves only when a test advances the clock and
calls `tick()`. No sockets, no processes, no mocks of the log.

The reference is Kafka's classic GroupCoordinator (core/.../coordinator/group/
GroupCoordinator.scala, GroupMetadata.scala, GroupMetadataManager.scala, 3.x). A test marked
`xfail(strict=True, reason="BUG: ...")` records a divergence from Kafka that is still open: it
passes once the broker is fixed, and then the strict xfail fails, so remove the mark.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import struct
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from broker.config import BrokerConfig
from broker.group import records as R
from broker.group.coordinator import GroupCoordinator
from broker.group.metadata_manager import LOADED, LOADING
from broker.group.offsets import OFFSETS_TOPIC, CommittedOffset, partition_for
from broker.key_hash import java_string_hash
from broker.group.state import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE
from broker.main import Broker
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch, iter_batches

TOPIC, OTHER = "t", "u"          # created with 3 and 1 partitions
SESSION_MS, REBALANCE_MS = 10_000, 30_000
NUM_OFFSETS_PARTITIONS = 3


# ====================================================================== harness

def async_test(fn):
    """Run an async test body on a fresh event loop (no pytest-asyncio here)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), timeout=30))
    return run


class FakeClock:
    """The coordinator's monotonic clock (seconds) and wall clock (ms), moved by hand."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.wall = 1_700_000_000_000

    def now(self) -> float:
        return self.t

    def wall_ms(self) -> int:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self.wall += int(seconds * 1000)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, [string topic], nullable bytes user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


RANGE = [("range", subscription(TOPIC))]


def assignments_for(ids: list[str]) -> dict[str, bytes]:
    return {m: b"assignment-" + m.encode() for m in ids}


async def settle(rounds: int = 10) -> None:
    """Let every ready task run (parked joins/syncs, fire-and-forget persists)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


BASE_PROPS = {
    "broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": str(NUM_OFFSETS_PARTITIONS),
    "group.initial.rebalance.delay.ms": "0",
}


class Env:
    """One broker over `log_dir`, its coordinator on a fake clock, and request helpers
    shaped like the handlers' calls (broker/server/handlers/groups.py, offset_commit.py)."""

    def __init__(self, log_dir: Path, **props: str):
        self.clock = FakeClock()
        self.props = {**BASE_PROPS, "log.dirs": str(log_dir), **props}
        self.broker: Broker | None = None

    @property
    def gc(self) -> GroupCoordinator:
        assert self.broker is not None
        return self.broker.group_coordinator

    async def open(self) -> None:
        b = Broker(BrokerConfig.from_dict(self.props), clock=self.clock.now, wall_ms=self.clock.wall_ms)
        await b.store.start()
        self.broker = b

    async def create(self) -> None:
        """First start: __consumer_offsets (created on first use, as Kafka does) and two topics."""
        await self.open()
        assert await self.gc.ensure_offsets_topic()
        await self.broker.topic_admin.create(TOPIC, 3, 1)
        await self.broker.topic_admin.create(OTHER, 1, 1)
        await self.wait_loaded()

    async def reopen(self) -> None:
        """A new Broker over the same log dir that becomes leader of every partition and
        loads the offsets topic, as Broker.start does."""
        await settle()
        self.close()
        await self.open()
        for meta in list(self.broker.store.topics().values()):
            self.broker.standalone.lead(meta)
        await self.wait_loaded()

    async def wait_loaded(self) -> None:
        for _ in range(1000):
            parts = self.gc.partitions
            if len(parts) == NUM_OFFSETS_PARTITIONS and all(s == LOADED for s in parts.values()):
                return
            await asyncio.sleep(0)
        raise AssertionError(f"offsets partitions never loaded: {self.gc.partitions}")

    def close(self) -> None:
        if self.broker is not None:
            self.broker.log_manager.close()
            self.broker = None

    # ------------------------------------------------------------ requests
    def join(self, group: str, member_id: str = "", *, instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
             session: int = SESSION_MS, rebalance: int = REBALANCE_MS, version: int = 5,
             client_id: str = "client") -> asyncio.Future:
        return asyncio.ensure_future(self.gc.join(
            group, member_id, instance, protocol_type, RANGE if protocols is None else protocols,
            session, rebalance, client_id, "/127.0.0.1", version))

    async def new_member_id(self, group: str, **kw: Any) -> str:
        r = await self.join(group, **kw)
        assert r["error_code"] == Code.MEMBER_ID_REQUIRED, r
        return r["member_id"]

    def sync(self, group: str, generation: int, member_id: str,
             assignments: dict[str, bytes] | None = None, instance: str | None = None) -> asyncio.Future:
        return asyncio.ensure_future(self.gc.sync(group, generation, member_id, instance, None, None,
                                                  assignments or {}))

    def heartbeat(self, group: str, generation: int, member_id: str, instance: str | None = None) -> int:
        return self.gc.heartbeat(group, generation, member_id, instance)

    async def commit(self, group: str, offsets: dict[tuple[str, int], tuple[int, int, str | None]],
                     generation: int = -1, member_id: str = "", instance: str | None = None) -> dict:
        return await self.gc.commit_offsets(group, generation, member_id, instance, offsets)

    def state(self, group: str) -> str:
        g = self.gc.groups.get(group)
        return DEAD if g is None else g.state

    # ------------------------------------------------------------ whole rebalances
    async def stable_group(self, group: str, n: int = 2, **kw: Any) -> tuple[list[str], str, int]:
        """n dynamic members joined in one generation, the leader's assignment synced."""
        ids = [await self.new_member_id(group, **kw) for _ in range(n)]
        joins = await asyncio.gather(*(self.join(group, m, **kw) for m in ids))
        assert all(j["error_code"] == 0 for j in joins), joins
        generation, leader = joins[0]["generation_id"], joins[0]["leader"]
        syncs = await asyncio.gather(*(
            self.sync(group, generation, m, assignments_for(ids) if m == leader else None) for m in ids))
        assert all(s["error_code"] == 0 for s in syncs), syncs
        assert self.state(group) == STABLE
        return ids, leader, generation

    async def static_group(self, group: str, instances: list[str], **kw: Any) -> tuple[dict[str, str], int]:
        """Static members (one per instance id) in one generation, synced; instance -> member id."""
        first = await self.join(group, instance=instances[0], **kw)   # alone: generation 1 at once
        others = [self.join(group, instance=i, **kw) for i in instances[1:]]
        await settle()                                                  # they force a rebalance
        rejoin = self.join(group, first["member_id"], instance=instances[0], **kw)
        joins = await asyncio.gather(rejoin, *others)
        assert all(j["error_code"] == 0 for j in joins), joins
        ids = {i: j["member_id"] for i, j in zip(instances, joins)}
        generation, leader = joins[0]["generation_id"], joins[0]["leader"]
        syncs = await asyncio.gather(*(
            self.sync(group, generation, m, assignments_for(list(ids.values())) if m == leader else None,
                      instance=i) for i, m in ids.items()))
        assert all(s["error_code"] == 0 for s in syncs), syncs
        assert self.state(group) == STABLE
        return ids, generation


@contextlib.asynccontextmanager
async def running(tmp_path: Path, **props: str) -> AsyncIterator[Env]:
    env = Env(tmp_path, **props)
    await env.create()
    try:
        yield env
    finally:
        await settle()          # fire-and-forget persists land before the log closes
        env.close()


def replay(env: Env, group: str) -> list[tuple[Any, bytes | None]]:
    """Every (decoded key, raw value) of the group's offsets partition, in log order."""
    plog = env.broker.replicas.get(OFFSETS_TOPIC, env.gc.partition_for(group)).log
    info = plog.read(plog.log_start_offset, 1 << 30)
    data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    out = []
    for batch in iter_batches(data):
        for rec in batch.records:
            k = R.decode_key(rec.key)
            if getattr(k, "group", None) == group:
                out.append((k, rec.value))
    return out


# ====================================================================== ownership

@async_test
async def test_offsets_topic_is_created_on_first_use_compacted_with_configured_partitions(tmp_path):
    env = Env(tmp_path)
    await env.open()
    try:
        assert env.gc.check("g") == Code.COORDINATOR_NOT_AVAILABLE     # no __consumer_offsets yet
        assert await env.gc.ensure_offsets_topic()
        meta = env.broker.store.topic(OFFSETS_TOPIC)
        assert sorted(meta.partitions) == [0, 1, 2]
        assert meta.configs["cleanup.policy"] == "compact"
        assert all(env.broker.replicas.maybe_get(OFFSETS_TOPIC, p) is not None for p in range(3))
        await env.wait_loaded()
        assert env.gc.check("g") == 0
        assert await env.gc.ensure_offsets_topic()                        # idempotent
    finally:
        env.close()


def test_partition_for_is_kafkas_string_hash_modulo_partitions() -> None:
    # Java's String.hashCode, worked by hand:
    #   "hello": ((((104*31+101)*31+108)*31+108)*31+111 = 99162322
    #   "Aa" = 65*31+97 = 2112 = 66*31+66 = "BB" (the classic collision)
    #   U+1F600 is the UTF-16 pair D83D DE00: 55357*31+56832 = 1772899
    #   "polygenelubricants" hashes to Integer.MIN_VALUE, and Kafka's Utils.abs(MIN_VALUE) is 0
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("\U0001F600") == 1772899
    assert java_string_hash("polygenelubricants") == -2**31
    assert partition_for("hello", 50) == 99162322 % 50 == 22
    assert partition_for("hello", 3) == 1
    assert partition_for("Aa", 50) == partition_for("BB", 50) == 12
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0


def test_partition_for_negative_hash_uses_kafkas_abs() -> None:
    # "zzzzzz": 122 * (31^6 - 1) / 30 = 3609181632, as int32 = -685785664
    assert java_string_hash("zzzzzz") == -685785664
    assert partition_for("zzzzzz", 50) == 685785664 % 50 == 14
    assert java_string_hash("my-group") == -1906497762
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12


# ====================================================================== JoinGroup

@async_test
async def test_join_v4_hands_out_a_member_id_then_completes_generation_1(tmp_path):
    async with running(tmp_path) as env:
        first = await env.join("g", client_id="cli", version=4)
        assert first["error_code"] == Code.MEMBER_ID_REQUIRED
        member_id = first["member_id"]
        assert member_id.startswith("cli-") and first["generation_id"] == -1
        assert env.state("g") == EMPTY                       # a pending id does not rebalance
        r = await env.join("g", member_id, version=4)
        assert r["error_code"] == 0
        assert (r["generation_id"], r["leader"], r["member_id"]) == (1, member_id, member_id)
        assert (r["protocol_type"], r["protocol_name"]) == ("consumer", "range")
        assert r["members"] == [{"member_id": member_id, "group_instance_id": None, "metadata": RANGE[0][1]}]
        assert env.state("g") == COMPLETING_REBALANCE


@async_test
async def test_join_v3_needs_no_member_id_round_trip(tmp_path):
    async with running(tmp_path) as env:
        r = await env.join("g", version=3, client_id="old")
        assert r["error_code"] == 0 and r["member_id"].startswith("old-") and r["generation_id"] == 1


@async_test
async def test_protocol_is_the_common_one_most_preferred_by_votes(tmp_path):
    async with running(tmp_path) as env:
        meta = {name: subscription(TOPIC) + name.encode() for name in ("range", "roundrobin", "sticky")}
        prefs = [["roundrobin", "range", "sticky"], ["range", "roundrobin"], ["roundrobin", "range"]]
        ids = [await env.new_member_id("g", protocols=[(p, meta[p]) for p in ps]) for ps in prefs]
        joins = await asyncio.gather(*(env.join("g", m, protocols=[(p, meta[p]) for p in ps])
                                       for m, ps in zip(ids, prefs)))
        # candidates {range, roundrobin}; votes roundrobin 2, range 1
        assert {j["protocol_name"] for j in joins} == {"roundrobin"}
        assert {j["generation_id"] for j in joins} == {1}
        leader = joins[0]["leader"]
        assert leader in ids
        for m, j in zip(ids, joins):
            if m == leader:
                assert sorted(x["member_id"] for x in j["members"]) == sorted(ids)
                assert {x["metadata"] for x in j["members"]} == {meta["roundrobin"]}
            else:
                assert j["members"] == []


@async_test
async def test_inconsistent_group_protocol(tmp_path):
    async with running(tmp_path) as env:
        await env.stable_group("g", n=1)
        rr = [("roundrobin", subscription(TOPIC))]
        assert (await env.join("g", protocols=rr))["error_code"] == Code.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join("g", protocol_type="connect"))["error_code"] == Code.INCONSISTENT_GROUP_PROTOCOL
        # An empty group takes anything but an empty protocol type or list.
        assert (await env.join("h", protocol_type=""))["error_code"] == Code.INCONSISTENT_GROUP_PROTOCOL
        assert (await env.join("h", protocols=[]))["error_code"] == Code.INCONSISTENT_GROUP_PROTOCOL
        assert env.state("g") == STABLE


@async_test
async def test_invalid_session_timeout_outside_min_max(tmp_path):
    async with running(tmp_path, **{"group.min.session.timeout.ms": "6000",
                                    "group.max.session.timeout.ms": "300000"}) as env:
        for session in (5999, 300001):
            r = await env.join("g", session=session)
            assert r["error_code"] == Code.INVALID_SESSION_TIMEOUT
        assert "g" not in env.gc.groups
        for session in (6000, 300000):
            assert (await env.join("g", session=session))["error_code"] == Code.MEMBER_ID_REQUIRED


@async_test
async def test_unknown_member_id(tmp_path):
    async with running(tmp_path) as env:
        assert (await env.join("nobody", "ghost"))["error_code"] == Code.UNKNOWN_MEMBER_ID
        assert "nobody" not in env.gc.groups
        await env.stable_group("g")
        assert (await env.join("g", "ghost"))["error_code"] == Code.UNKNOWN_MEMBER_ID
        assert (await env.join("", ""))["error_code"] == Code.INVALID_GROUP_ID


# ====================================================================== rebalance, SyncGroup, Heartbeat

@async_test
async def test_two_members_rebalance_then_sync_hands_out_the_leaders_assignment(tmp_path):
    async with running(tmp_path) as env:
        a, b = [await env.new_member_id("g") for _ in range(2)]
        ja = env.join("g", a)
        await settle()
        assert not ja.done()                                   # b holds an id, not joined yet
        assert env.state("g") == PREPARING_REBALANCE
        jb = env.join("g", b)
        ra, rb = await asyncio.gather(ja, jb)
        assert ra["generation_id"] == rb["generation_id"] == 1
        assert ra["leader"] == rb["leader"] == a
        assert env.state("g") == COMPLETING_REBALANCE

        follower = env.sync("g", 1, b)
        await settle()
        assert not follower.done()                             # waits for the leader's assignment
        assert env.heartbeat("g", 1, b) == 0                   # Kafka 3.x: NONE while CompletingRebalance
        leader = await env.sync("g", 1, a, {a: b"for-a", b: b"for-b"})
        assert leader == {"error_code": 0, "protocol_type": "consumer", "protocol_name": "range",
                          "assignment": b"for-a"}
        assert (await follower)["assignment"] == b"for-b"
        assert env.state("g") == STABLE
        # A SyncGroup in Stable just returns the member's assignment.
        assert (await env.sync("g", 1, b))["assignment"] == b"for-b"
        assert env.heartbeat("g", 1, a) == env.heartbeat("g", 1, b) == 0


@async_test
async def test_missing_assignments_are_empty(tmp_path):
    async with running(tmp_path) as env:
        a, b = [await env.new_member_id("g") for _ in range(2)]
        await asyncio.gather(env.join("g", a), env.join("g", b))
        fb = env.sync("g", 1, b)
        assert (await env.sync("g", 1, a, {a: b"x"}))["assignment"] == b"x"
        assert (await fb)["assignment"] == b""


@async_test
async def test_illegal_generation_for_stale_generations(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        assert gen == 1
        assert env.heartbeat("g", 0, a) == Code.ILLEGAL_GENERATION
        assert env.heartbeat("g", 2, a) == Code.ILLEGAL_GENERATION
        assert (await env.sync("g", 0, b))["error_code"] == Code.ILLEGAL_GENERATION
        res = await env.commit("g", {(TOPIC, 0): (5, -1, ""), (TOPIC, 1): (6, -1, "")}, generation=0, member_id=a)
        assert res == {(TOPIC, 0): Code.ILLEGAL_GENERATION, (TOPIC, 1): Code.ILLEGAL_GENERATION}
        assert env.heartbeat("g", 1, a) == 0


@async_test
async def test_a_third_member_joining_makes_heartbeats_answer_rebalance_in_progress(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        c = await env.new_member_id("g")
        assert env.state("g") == STABLE and env.heartbeat("g", gen, a) == 0
        jc = env.join("g", c)
        await settle()
        assert env.state("g") == PREPARING_REBALANCE
        assert env.heartbeat("g", gen, a) == env.heartbeat("g", gen, b) == Code.REBALANCE_IN_PROGRESS
        # Commits still go through while PreparingRebalance (Kafka allows them).
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}, gen, a) == {(TOPIC, 0): 0}
        ra, rb, rc = await asyncio.gather(env.join("g", a), env.join("g", b), jc)
        assert {r["generation_id"] for r in (ra, rb, rc)} == {2}
        assert set(env.gc.groups["g"].members) == {a, b, c}
        leader_view = next(r for r in (ra, rb, rc) if r["member_id"] == r["leader"])
        assert sorted(m["member_id"] for m in leader_view["members"]) == sorted([a, b, c])
        # The old generation is fenced now.
        assert env.heartbeat("g", gen, a) == Code.ILLEGAL_GENERATION


@async_test
async def test_leader_rejoining_a_stable_group_forces_a_rebalance_but_a_follower_does_not(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        follower = b if leader == a else a
        r = await env.join("g", follower)                      # same protocols: current generation
        assert (r["error_code"], r["generation_id"], r["members"]) == (0, gen, [])
        assert env.state("g") == STABLE
        jl = env.join("g", leader)
        await settle()
        assert env.state("g") == PREPARING_REBALANCE and not jl.done()


@async_test
async def test_commit_during_completing_rebalance_is_rebalance_in_progress(tmp_path):
    async with running(tmp_path) as env:
        a = await env.new_member_id("g")
        await env.join("g", a)
        assert env.state("g") == COMPLETING_REBALANCE
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}, 1, a) == {(TOPIC, 0): Code.REBALANCE_IN_PROGRESS}


# ====================================================================== timers

@async_test
async def test_session_expiry_removes_a_silent_member_and_rebalances(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")           # session 10 s
        for _ in range(3):                                            # t = 9 s: both still there
            env.clock.advance(3)
            assert env.heartbeat("g", gen, a) == 0
            env.gc.tick()
        assert env.state("g") == STABLE and env.gc.groups["g"].has(b)
        env.clock.advance(3)                                          # t = 12 s: b silent for > 10 s
        env.gc.tick()
        assert not env.gc.groups["g"].has(b)
        assert env.state("g") == PREPARING_REBALANCE
        assert env.heartbeat("g", gen, b) == Code.UNKNOWN_MEMBER_ID
        assert env.heartbeat("g", gen, a) == Code.REBALANCE_IN_PROGRESS
        r = await env.join("g", a)
        assert (r["generation_id"], r["leader"]) == (gen + 1, a)
        assert [m["member_id"] for m in r["members"]] == [a]


@async_test
async def test_a_member_awaiting_join_is_not_expired(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        follower = b if leader == a else a
        jl = env.join("g", leader)                                    # leader parks, rebalance starts
        await settle()
        for _ in range(5):                                            # 15 s > session, < rebalance timeout
            env.clock.advance(3)
            assert env.heartbeat("g", gen, follower) == Code.REBALANCE_IN_PROGRESS
            env.gc.tick()
        await settle()
        assert env.gc.groups["g"].has(leader) and not jl.done()
        rf = await env.join("g", follower)
        rl = await jl
        assert rf["generation_id"] == rl["generation_id"] == gen + 1
        assert set(env.gc.groups["g"].members) == {a, b}


@async_test
async def test_rebalance_timeout_drops_members_that_did_not_rejoin(tmp_path):
    async with running(tmp_path) as env:
        kw = {"session": 30_000, "rebalance": 10_000}
        (a, b), leader, gen = await env.stable_group("g", **kw)
        c = await env.new_member_id("g", **kw)
        jc = env.join("g", c, **kw)
        ja = env.join("g", a, **kw)
        await settle()
        env.clock.advance(9.9)
        assert env.heartbeat("g", gen, b) == Code.REBALANCE_IN_PROGRESS   # alive, but never rejoins
        env.gc.tick()
        await settle()
        assert not ja.done() and env.state("g") == PREPARING_REBALANCE
        env.clock.advance(0.2)
        env.gc.tick()
        ra, rc = await asyncio.gather(ja, jc)
        assert ra["error_code"] == rc["error_code"] == 0
        assert ra["generation_id"] == rc["generation_id"] == gen + 1
        assert set(env.gc.groups["g"].members) == {a, c}
        assert env.heartbeat("g", gen + 1, b) == Code.UNKNOWN_MEMBER_ID
        assert env.state("g") == COMPLETING_REBALANCE


@async_test
async def test_pending_member_id_expires_after_session_timeout(tmp_path):
    async with running(tmp_path) as env:
        a = await env.new_member_id("g")
        b = await env.new_member_id("g")
        ja = env.join("g", a)
        await settle()
        assert not ja.done()                                  # waits for b's JoinGroup
        env.clock.advance(SESSION_MS / 1000 + 0.1)
        env.gc.tick()
        r = await ja
        assert (r["generation_id"], [m["member_id"] for m in r["members"]]) == (1, [a])
        assert (await env.join("g", b))["error_code"] == Code.UNKNOWN_MEMBER_ID


# ====================================================================== LeaveGroup

@async_test
async def test_leave_group_single_member(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        assert env.gc.leave("g", [("ghost", None)]) == (0, [Code.UNKNOWN_MEMBER_ID])
        assert env.state("g") == STABLE
        assert env.gc.leave("g", [(b, None)]) == (0, [0])
        assert env.state("g") == PREPARING_REBALANCE and not env.gc.groups["g"].has(b)
        assert env.heartbeat("g", gen, b) == Code.UNKNOWN_MEMBER_ID
        assert env.gc.leave("g", [(a, None)]) == (0, [0])          # the last one out
        g = env.gc.groups["g"]
        assert (g.state, g.members, g.generation, g.protocol) == (EMPTY, {}, gen + 1, None)


@async_test
async def test_leave_group_releases_a_parked_join(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        jl = env.join("g", leader)
        await settle()
        assert env.gc.leave("g", [(leader, None)]) == (0, [0])
        assert (await jl)["error_code"] == Code.UNKNOWN_MEMBER_ID


@async_test
async def test_leave_group_batch_by_instance_id(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2", "i3"])
        code, results = env.gc.leave("g", [("", "i1"), ("not-i2s-id", "i2"), ("", "nobody"), ("ghost", None)])
        assert code == 0
        assert results == [0, Code.FENCED_INSTANCE_ID, Code.UNKNOWN_MEMBER_ID, Code.UNKNOWN_MEMBER_ID]
        assert set(env.gc.groups["g"].members) == {ids["i2"], ids["i3"]}
        assert "i1" not in env.gc.groups["g"].static_members
        assert env.state("g") == PREPARING_REBALANCE
        assert env.gc.leave("g", [(ids["i2"], "i2"), ("", "i3")]) == (0, [0, 0])
        assert env.state("g") == EMPTY and env.gc.groups["g"].static_members == {}


# ====================================================================== static membership

@async_test
async def test_static_member_rejoins_without_a_rebalance(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        leader = env.gc.groups["g"].leader_id
        assert leader == ids["i1"]
        old = ids["i2"]
        old_assignment = env.gc.groups["g"].members[old].assignment
        assert old_assignment == b"assignment-" + old.encode()

        r = await env.join("g", "", instance="i2")            # restarted, same protocols
        new = r["member_id"]
        assert r["error_code"] == 0 and new != old and new.startswith("i2-")
        assert r["generation_id"] == gen and r["protocol_name"] == "range"
        assert r["members"] == []
        assert env.state("g") == STABLE
        assert env.heartbeat("g", gen, leader, "i1") == 0     # the others see nothing
        s = await env.sync("g", gen, new, instance="i2")
        assert (s["error_code"], s["assignment"]) == (0, old_assignment)
        assert env.heartbeat("g", gen, new, "i2") == 0
        assert env.gc.groups["g"].generation == gen

        # The old incarnation is fenced.
        assert env.heartbeat("g", gen, old, "i2") in (Code.FENCED_INSTANCE_ID, Code.UNKNOWN_MEMBER_ID)
        assert env.heartbeat("g", gen, old) == Code.UNKNOWN_MEMBER_ID
        assert (await env.sync("g", gen, old, instance="i2"))["error_code"] in (
            Code.FENCED_INSTANCE_ID, Code.UNKNOWN_MEMBER_ID)
        assert env.heartbeat("g", gen, leader, "i1") == 0
        # The new member id was persisted.
        value = R.decode_group_value([v for k, v in replay(env, "g") if isinstance(k, R.GroupKey)][-1])
        assert {m.member_id for m in value.members} == {leader, new}


@async_test
async def test_static_leader_rejoining_with_join_v9_skips_assignment(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        r = await env.join("g", "", instance="i1", version=9)
        assert (r["error_code"], r["generation_id"], r["skip_assignment"]) == (0, gen, True)
        assert r["leader"] == r["member_id"]
        assert sorted(m["group_instance_id"] for m in r["members"]) == ["i1", "i2"]
        assert env.state("g") == STABLE


@async_test
async def test_static_rejoin_fences_a_parked_old_incarnation(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        old_join = env.join("g", ids["i1"], instance="i1")       # leader rejoin: rebalance, parks
        await settle()
        assert env.state("g") == PREPARING_REBALANCE and not old_join.done()
        new_join = env.join("g", "", instance="i1")
        await settle()
        assert (await old_join)["error_code"] == Code.FENCED_INSTANCE_ID
        r2 = await env.join("g", ids["i2"], instance="i2")
        r1 = await new_join
        assert r1["generation_id"] == r2["generation_id"] == gen + 1
        assert set(env.gc.groups["g"].members) == {r1["member_id"], ids["i2"]}


@async_test
async def test_static_rejoin_fences_a_parked_sync_of_the_old_incarnation(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        j1 = env.join("g", ids["i1"], instance="i1")               # leader rejoin: new generation
        r2 = await env.join("g", ids["i2"], instance="i2")
        assert r2["generation_id"] == (await j1)["generation_id"] == gen + 1
        old_sync = env.sync("g", gen + 1, ids["i2"], instance="i2")
        await settle()
        assert not old_sync.done()
        new_join = env.join("g", "", instance="i2")               # i2 restarts mid-rebalance
        assert (await old_sync)["error_code"] == Code.FENCED_INSTANCE_ID
        assert env.state("g") == PREPARING_REBALANCE               # as Kafka in CompletingRebalance
        r1 = await env.join("g", ids["i1"], instance="i1")
        rn = await new_join
        assert r1["generation_id"] == rn["generation_id"] == gen + 2
        assert set(env.gc.groups["g"].members) == {ids["i1"], rn["member_id"]}


@async_test
async def test_old_static_member_id_gets_fenced_instance_id_everywhere(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        old = ids["i2"]
        await env.join("g", "", instance="i2")
        assert env.heartbeat("g", gen, old, "i2") == Code.FENCED_INSTANCE_ID
        assert (await env.sync("g", gen, old, instance="i2"))["error_code"] == Code.FENCED_INSTANCE_ID
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}, gen, old, "i2") == {
            (TOPIC, 0): Code.FENCED_INSTANCE_ID}
        assert (await env.join("g", old, instance="i2"))["error_code"] == Code.FENCED_INSTANCE_ID


@async_test
async def test_static_leader_rejoin_below_v9_is_told_the_old_leader_id(tmp_path):
    async with running(tmp_path) as env:
        ids, gen = await env.static_group("g", ["i1", "i2"])
        r = await env.join("g", "", instance="i1", version=5)
        assert r["error_code"] == 0 and r["generation_id"] == gen
        assert r["leader"] == ids["i1"] != r["member_id"]


@async_test
async def test_static_members_survive_a_rebalance_nobody_rejoined(tmp_path):
    async with running(tmp_path) as env:
        kw = {"session": 60_000, "rebalance": 10_000}
        ids, gen = await env.static_group("g", ["i1", "i2"], **kw)
        assert env.gc.leave("g", [("", "i2")]) == (0, [0])      # admin removes i2: rebalance
        env.clock.advance(5)
        assert env.heartbeat("g", gen, ids["i1"], "i1") == Code.REBALANCE_IN_PROGRESS
        env.gc.tick()
        env.clock.advance(6)                                    # past the rebalance timeout
        env.gc.tick()
        assert env.gc.groups["g"].has(ids["i1"])
        assert env.state("g") == PREPARING_REBALANCE


# ====================================================================== initial rebalance delay

@async_test
async def test_initial_rebalance_delay_waits_and_gathers_members(tmp_path):
    async with running(tmp_path, **{"group.initial.rebalance.delay.ms": "3000"}) as env:
        a = await env.new_member_id("g")
        ja = env.join("g", a)
        await settle()
        assert env.state("g") == PREPARING_REBALANCE
        env.clock.advance(1.5)
        env.gc.tick()
        b = await env.new_member_id("g")
        jb = env.join("g", b)
        await settle()
        env.clock.advance(1.4)                                   # 2.9 s: still inside the delay
        env.gc.tick()
        await settle()
        assert not ja.done() and not jb.done()
        for _ in range(7):                                       # Kafka finishes by 2 delays (6 s)
            env.clock.advance(0.5)
            env.gc.tick()
        ra, rb = await asyncio.gather(ja, jb)
        assert ra["generation_id"] == rb["generation_id"] == 1
        assert sorted(m["member_id"] for m in (ra["members"] or rb["members"])) == sorted([a, b])


@async_test
async def test_initial_rebalance_delay_applies_to_a_lone_member_too(tmp_path):
    async with running(tmp_path, **{"group.initial.rebalance.delay.ms": "3000"}) as env:
        a = await env.new_member_id("g")
        ja = env.join("g", a)
        await settle()
        env.clock.advance(2.9)
        env.gc.tick()
        await settle()
        assert not ja.done()
        env.clock.advance(0.2)
        env.gc.tick()
        assert (await ja)["generation_id"] == 1


# ====================================================================== offsets

@async_test
async def test_commit_and_fetch_offsets(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        now = env.clock.wall
        res = await env.commit("g", {(TOPIC, 0): (10, 3, "meta"), (TOPIC, 1): (20, -1, None)}, gen, a)
        assert res == {(TOPIC, 0): 0, (TOPIC, 1): 0}
        code, found = env.gc.fetch_offsets("g", [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)])
        assert code == 0
        assert found == {(TOPIC, 0): CommittedOffset(10, 3, "meta", now),
                         (TOPIC, 1): CommittedOffset(20, -1, "", now), (TOPIC, 2): None}
        assert env.gc.fetch_offsets("g", None) == (0, {(TOPIC, 0): CommittedOffset(10, 3, "meta", now),
                                                      (TOPIC, 1): CommittedOffset(20, -1, "", now)})
        # A later commit replaces the earlier one.
        await env.commit("g", {(TOPIC, 0): (11, 4, "m2")}, gen, b)
        assert env.gc.fetch_offsets("g", [(TOPIC, 0)])[1][(TOPIC, 0)].offset == 11
        assert env.gc.fetch_offsets("nobody", None) == (0, {})


@async_test
async def test_simple_commit_on_a_group_without_members(tmp_path):
    async with running(tmp_path) as env:
        assert await env.commit("simple", {(OTHER, 0): (7, -1, "x")}) == {(OTHER, 0): 0}
        g = env.gc.groups["simple"]
        assert (g.state, g.protocol_type, g.generation) == (EMPTY, None, 0)
        assert env.gc.fetch_offsets("simple", [(OTHER, 0)])[1][(OTHER, 0)].offset == 7
        # A group that went Empty takes simple commits too.
        (a,), _, gen = await env.stable_group("g", n=1)
        env.gc.leave("g", [(a, None)])
        assert env.state("g") == EMPTY
        assert await env.commit("g", {(TOPIC, 0): (3, -1, "")}) == {(TOPIC, 0): 0}


@async_test
async def test_commit_from_a_non_member_is_unknown_member_id(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}, gen, "ghost") == {(TOPIC, 0): Code.UNKNOWN_MEMBER_ID}
        # Kafka's validateOffsetCommit: "When the group is non-empty, only members can commit
        # offsets", so a memberless commit (generation -1) gets UNKNOWN_MEMBER_ID too.
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}) == {(TOPIC, 0): Code.UNKNOWN_MEMBER_ID}
        assert env.gc.fetch_offsets("g", None) == (0, {})


@async_test
async def test_commit_per_partition_errors(tmp_path):
    async with running(tmp_path, **{"offset.metadata.max.bytes": "16"}) as env:
        res = await env.commit("s", {
            (TOPIC, 0): (1, -1, "x" * 16),          # at the limit
            (TOPIC, 1): (1, -1, "x" * 17),          # over it
            ("missing", 0): (1, -1, ""),
            (TOPIC, 3): (1, -1, ""),                # t has partitions 0-2
        })
        assert res == {(TOPIC, 0): 0, (TOPIC, 1): Code.OFFSET_METADATA_TOO_LARGE,
                       ("missing", 0): Code.UNKNOWN_TOPIC_OR_PARTITION,
                       (TOPIC, 3): Code.UNKNOWN_TOPIC_OR_PARTITION}
        assert set(env.gc.fetch_offsets("s", None)[1]) == {(TOPIC, 0)}


@async_test
async def test_offset_delete_refuses_subscribed_topics(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")            # subscribed to "t"
        await env.commit("g", {(TOPIC, 0): (1, -1, ""), (OTHER, 0): (2, -1, "")}, gen, a)
        code, res = await env.gc.delete_offsets("g", [(TOPIC, 0), (OTHER, 0)])
        assert (code, res) == (0, {(TOPIC, 0): Code.GROUP_SUBSCRIBED_TO_TOPIC, (OTHER, 0): 0})
        assert set(env.gc.fetch_offsets("g", None)[1]) == {(TOPIC, 0)}
        assert any(k == R.OffsetKey("g", OTHER, 0) and v is None for k, v in replay(env, "g"))
        assert (await env.gc.delete_offsets("nobody", [(TOPIC, 0)]))[0] == Code.GROUP_ID_NOT_FOUND
        # An Empty group gives up any offset.
        await env.commit("s", {(TOPIC, 0): (1, -1, "")})
        assert await env.gc.delete_offsets("s", [(TOPIC, 0)]) == (0, {(TOPIC, 0): 0})
        assert env.gc.fetch_offsets("s", None) == (0, {})


# ====================================================================== persistence

@async_test
async def test_offsets_and_groups_survive_a_restart(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g", client_id="app")
        await env.commit("g", {(TOPIC, 0): (100, 7, "m0"), (TOPIC, 1): (200, -1, "")}, gen, a)
        await env.commit("s", {(OTHER, 0): (5, -1, "simple")})
        (e,), _, egen = await env.stable_group("e", n=1)
        await env.commit("e", {(TOPIC, 2): (9, -1, "")}, egen, e)
        env.gc.leave("e", [(e, None)])
        await settle()
        assert env.state("e") == EMPTY
        before = {g: dict(env.gc.fetch_offsets(g, None)[1]) for g in ("g", "s", "e")}
        old = env.gc.groups["g"]
        snapshot = {m.member_id: (m.assignment, m.client_id, m.client_host, m.session_timeout_ms,
                                  m.rebalance_timeout_ms, m.protocols) for m in old.members.values()}

        await env.reopen()
        assert env.gc is not None and env.gc.groups is not old
        assert {g: dict(env.gc.fetch_offsets(g, None)[1]) for g in ("g", "s", "e")} == before
        g = env.gc.groups["g"]
        assert (g.state, g.generation, g.leader_id, g.protocol_type, g.protocol) == (
            STABLE, gen, leader, "consumer", "range")
        assert {m.member_id: (m.assignment, m.client_id, m.client_host, m.session_timeout_ms,
                              m.rebalance_timeout_ms, m.protocols) for m in g.members.values()} == snapshot
        # Restored members are live: heartbeats and SyncGroup work in the old generation.
        assert env.heartbeat("g", gen, a) == 0
        assert (await env.sync("g", gen, b))["assignment"] == b"assignment-" + b.encode()
        eg = env.gc.groups["e"]
        assert (eg.state, eg.generation, eg.members, eg.protocol_type) == (EMPTY, egen + 1, {}, "consumer")
        sg = env.gc.groups["s"]
        assert (sg.state, sg.protocol_type) == (EMPTY, None)


@async_test
async def test_load_reads_older_record_versions(tmp_path):
    """Records as an older Kafka wrote them: offset key v0 + value v1 (with an expire
    timestamp), group metadata value v2 (no group.instance.id)."""
    def s16(text: str) -> bytes:
        return struct.pack(">h", len(text)) + text.encode()

    def b32(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    async with running(tmp_path) as env:
        key = struct.pack(">h", 0) + s16("old") + s16(TOPIC) + struct.pack(">i", 1)
        value = struct.pack(">hq", 1, 55) + s16("k") + struct.pack(">qq", 1_600_000_000_000, 1_600_086_400_000)
        gkey = struct.pack(">h", 2) + s16("old")
        member = (s16("m1") + s16("cli") + s16("/10.0.0.1") + struct.pack(">ii", 45_000, 10_000)
                  + b32(RANGE[0][1]) + b32(b"\x02"))
        gvalue = (struct.pack(">h", 2) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m1")
                  + struct.pack(">qi", 1_600_000_000_000, 1) + member)
        env.broker.replicas.append(OFFSETS_TOPIC, env.gc.partition_for("old"),
                                   build_batch([Record(key, value), Record(gkey, gvalue)]))
        await env.reopen()
        assert env.gc.fetch_offsets("old", None) == (0, {(TOPIC, 1): CommittedOffset(55, -1, "k", 1_600_000_000_000)})
        g = env.gc.groups["old"]
        assert (g.state, g.generation, g.protocol_type, g.protocol, g.leader_id) == (
            STABLE, 4, "consumer", "range", "m1")
        m = g.members["m1"]
        assert (m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
                m.protocols, m.assignment) == (None, "cli", "/10.0.0.1", 45_000, 10_000, RANGE, b"\x02")
        assert env.heartbeat("old", 4, "m1") == 0


@async_test
async def test_coordinator_load_in_progress_then_loaded(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        env.close()
        await env.open()
        for meta in list(env.broker.store.topics().values()):
            env.broker.standalone.lead(meta)                  # loads are scheduled, none ran yet
        # Called directly, not as tasks: nothing below yields to the loads.
        assert env.gc.partitions[env.gc.partition_for("g")] == LOADING
        r = await env.gc.join("g", "", None, "consumer", RANGE, SESSION_MS, REBALANCE_MS, "c", "/h", 5)
        assert r["error_code"] == Code.COORDINATOR_LOAD_IN_PROGRESS
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}) == {(TOPIC, 0): Code.COORDINATOR_LOAD_IN_PROGRESS}
        assert env.gc.fetch_offsets("g", None)[0] == Code.COORDINATOR_LOAD_IN_PROGRESS
        assert env.gc.describe("g")["error_code"] == Code.COORDINATOR_LOAD_IN_PROGRESS
        await env.wait_loaded()
        assert env.heartbeat("g", gen, a) == 0


@async_test
async def test_heartbeat_and_sync_while_loading_answer_like_kafka(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        env.close()
        await env.open()
        for meta in list(env.broker.store.topics().values()):
            env.broker.standalone.lead(meta)
        assert env.gc.partitions[env.gc.partition_for("g")] == LOADING
        assert env.heartbeat("g", gen, a) == 0
        r = await env.gc.sync("g", gen, a, None, None, None, {})      # directly: no yield to the load
        assert r["error_code"] == Code.REBALANCE_IN_PROGRESS


@async_test
async def test_not_coordinator_for_a_partition_this_broker_does_not_own(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        del env.gc.partitions[env.gc.partition_for("g")]
        nc = Code.NOT_COORDINATOR
        assert (await env.join("g"))["error_code"] == nc
        assert (await env.sync("g", gen, a))["error_code"] == nc
        assert env.heartbeat("g", gen, a) == nc
        assert env.gc.leave("g", [(a, None)]) == (nc, [nc])
        assert await env.commit("g", {(TOPIC, 0): (1, -1, "")}, gen, a) == {(TOPIC, 0): nc}
        assert env.gc.fetch_offsets("g", None) == (nc, {})
        assert env.gc.describe("g")["error_code"] == nc
        assert await env.gc.delete_group("g") == nc
        assert (await env.gc.delete_offsets("g", [(TOPIC, 0)]))[0] == nc
        assert "g" not in [x["group_id"] for x in env.gc.list_groups(set())]


# ====================================================================== retention

@async_test
async def test_offsets_of_an_empty_group_expire_then_the_group_is_dead(tmp_path):
    async with running(tmp_path, **{"offsets.retention.minutes": "1",
                                    "offsets.retention.check.interval.ms": "1000"}) as env:
        (e,), _, egen = await env.stable_group("e", n=1)
        await env.commit("e", {(TOPIC, 0): (1, -1, ""), (TOPIC, 1): (2, -1, "")}, egen, e)
        env.gc.leave("e", [(e, None)])                          # Empty from now on
        await settle()
        await env.commit("s", {(OTHER, 0): (3, -1, "")})         # simple: expires by commit time
        (m,), _, gen = await env.stable_group("g", n=1)
        await env.commit("g", {(TOPIC, 0): (4, -1, "")}, gen, m)

        env.clock.wall += 59_000
        assert await env.gc.expire_offsets() == 0
        assert env.state("e") == EMPTY and env.state("s") == EMPTY

        env.clock.wall += 2_000                                 # past 60 s
        env.clock.t += 1.5                                      # > the 1 s check interval
        assert env.heartbeat("g", gen, m) == 0
        env.gc.tick()                                           # runs expire_offsets
        await settle()
        assert env.state("e") == DEAD and env.state("s") == DEAD
        assert env.gc.describe("e")["group_state"] == DEAD
        assert env.gc.fetch_offsets("e", None) == (0, {}) and env.gc.fetch_offsets("s", None) == (0, {})
        # Tombstones: the offsets and the group metadata of "e".
        tail = replay(env, "e")[-3:]
        assert sorted((type(k).__name__, getattr(k, "partition", None)) for k, v in tail if v is None) == [
            ("GroupKey", None), ("OffsetKey", 0), ("OffsetKey", 1)]
        # The Stable group keeps its offsets however old they are.
        env.clock.wall += 30 * 86_400_000
        assert await env.gc.expire_offsets() == 0
        assert env.gc.fetch_offsets("g", [(TOPIC, 0)])[1][(TOPIC, 0)].offset == 4
        assert env.state("g") == STABLE

        await env.reopen()                                      # and the dead stay dead
        assert "e" not in env.gc.groups and "s" not in env.gc.groups
        assert env.gc.fetch_offsets("g", None)[1][(TOPIC, 0)].offset == 4


@async_test
async def test_stable_group_offsets_of_unsubscribed_topics_expire(tmp_path):
    async with running(tmp_path, **{"offsets.retention.minutes": "1"}) as env:
        (m,), _, gen = await env.stable_group("g", n=1)            # subscribed to "t" only
        await env.commit("g", {(TOPIC, 0): (1, -1, ""), (OTHER, 0): (2, -1, "")}, gen, m)
        env.clock.wall += 61_000
        await env.gc.expire_offsets()
        assert set(env.gc.fetch_offsets("g", None)[1]) == {(TOPIC, 0)}


# ====================================================================== admin APIs

@async_test
async def test_describe_groups(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g", client_id="app")
        d = env.gc.describe("g")
        assert (d["error_code"], d["group_state"], d["protocol_type"], d["protocol_data"]) == (
            0, STABLE, "consumer", "range")
        by_id = {m["member_id"]: m for m in d["members"]}
        assert set(by_id) == {a, b}
        for mid, m in by_id.items():
            assert (m["client_id"], m["client_host"], m["group_instance_id"]) == ("app", "/127.0.0.1", None)
            assert m["member_metadata"] == RANGE[0][1]
            assert m["member_assignment"] == b"assignment-" + mid.encode()
        assert env.gc.describe("nobody") == {"error_code": 0, "group_id": "nobody", "group_state": DEAD,
                                             "protocol_type": "", "protocol_data": "", "members": []}
        # Not Stable: no protocol, no metadata or assignment.
        env.join("g", leader)
        await settle()
        d = env.gc.describe("g")
        assert (d["group_state"], d["protocol_data"]) == (PREPARING_REBALANCE, "")
        assert {(m["member_metadata"], m["member_assignment"]) for m in d["members"]} == {(b"", b"")}


@async_test
async def test_list_groups_with_states_filter(tmp_path):
    async with running(tmp_path) as env:
        await env.stable_group("stable")
        await env.commit("simple", {(TOPIC, 0): (1, -1, "")})
        await env.new_member_id("pending")                    # an id handed out: Empty group
        everything = {(g["group_id"], g["group_state"], g["protocol_type"]) for g in env.gc.list_groups(set())}
        assert everything == {("stable", STABLE, "consumer"), ("simple", EMPTY, ""), ("pending", EMPTY, "")}
        assert [g["group_id"] for g in env.gc.list_groups({"Stable"})] == ["stable"]
        assert sorted(g["group_id"] for g in env.gc.list_groups({"empty"})) == ["pending", "simple"]
        assert env.gc.list_groups({"Dead"}) == []


@async_test
async def test_delete_groups(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("live")
        assert await env.gc.delete_group("live") == Code.NON_EMPTY_GROUP
        assert await env.gc.delete_group("nobody") == Code.GROUP_ID_NOT_FOUND
        (m,), _, egen = await env.stable_group("gone", n=1)
        await env.commit("gone", {(TOPIC, 0): (1, -1, ""), (OTHER, 0): (2, -1, "")}, egen, m)
        env.gc.leave("gone", [(m, None)])
        await settle()
        assert await env.gc.delete_group("gone") == 0
        assert env.state("gone") == DEAD and env.gc.fetch_offsets("gone", None) == (0, {})
        tombstones = {k for k, v in replay(env, "gone") if v is None}
        assert tombstones == {R.GroupKey("gone"), R.OffsetKey("gone", TOPIC, 0), R.OffsetKey("gone", OTHER, 0)}
        assert await env.gc.delete_group("gone") == Code.GROUP_ID_NOT_FOUND
        await env.reopen()                                       # stays deleted
        assert "gone" not in env.gc.groups and env.gc.fetch_offsets("gone", None) == (0, {})
        assert env.state("live") == STABLE


# ====================================================================== further divergences from Kafka

@async_test
async def test_pending_member_leaving_does_not_rebalance_a_stable_group(tmp_path):
    async with running(tmp_path) as env:
        (a, b), leader, gen = await env.stable_group("g")
        c = await env.new_member_id("g")
        assert env.gc.leave("g", [(c, None)]) == (0, [0])
        assert env.state("g") == STABLE
        assert env.heartbeat("g", gen, a) == 0


@async_test
async def test_followers_session_restarts_when_the_assignment_arrives(tmp_path):
    async with running(tmp_path) as env:
        a, b = [await env.new_member_id("g") for _ in range(2)]
        await asyncio.gather(env.join("g", a), env.join("g", b))
        follower = env.sync("g", 1, b)                            # parked while the leader assigns
        await settle()
        for _ in range(6):                                        # 12 s > the 10 s session
            env.clock.advance(2)
            assert env.heartbeat("g", 1, a) == 0
            env.gc.tick()
        await env.sync("g", 1, a, assignments_for([a, b]))
        assert (await follower)["error_code"] == 0
        env.gc.tick()
        assert env.gc.groups["g"].has(b) and env.state("g") == STABLE


@async_test
async def test_member_commit_to_an_unknown_group_is_illegal_generation(tmp_path):
    async with running(tmp_path) as env:
        res = await env.commit("nobody", {(TOPIC, 0): (1, -1, "")}, generation=3, member_id="m")
        assert res == {(TOPIC, 0): Code.ILLEGAL_GENERATION}


@async_test
async def test_leave_unknown_group_reports_per_member(tmp_path):
    async with running(tmp_path) as env:
        assert env.gc.leave("nobody", [("m", None), ("", "i")]) == (
            0, [Code.UNKNOWN_MEMBER_ID, Code.UNKNOWN_MEMBER_ID])


@async_test
async def test_lone_member_cannot_switch_protocol_type(tmp_path):
    async with running(tmp_path) as env:
        (a,), _, gen = await env.stable_group("g", n=1)
        r = await env.join("g", a, protocol_type="connect", protocols=[("v0", b"x")])
        assert r["error_code"] == Code.INCONSISTENT_GROUP_PROTOCOL


@async_test
async def test_offset_metadata_limit_counts_characters(tmp_path):
    async with running(tmp_path, **{"offset.metadata.max.bytes": "16"}) as env:
        assert await env.commit("s", {(TOPIC, 0): (1, -1, "\u00e9" * 16)}) == {(TOPIC, 0): 0}


@async_test
async def test_deleting_the_last_offset_of_an_empty_group_makes_it_dead(tmp_path):
    async with running(tmp_path) as env:
        (m,), _, gen = await env.stable_group("g", n=1)
        await env.commit("g", {(OTHER, 0): (1, -1, "")}, gen, m)
        env.gc.leave("g", [(m, None)])
        await settle()
        assert await env.gc.delete_offsets("g", [(OTHER, 0)]) == (0, {(OTHER, 0): 0})
        assert env.gc.describe("g")["group_state"] == DEAD
