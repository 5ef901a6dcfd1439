"""ConsumerProtocol encoding and the range / roundrobin / cooperative-sticky assignors on
known inputs: exact expected assignments, balance, stickiness, the cooperative rule (a
partition that changes owner is withheld until its owner revoked it), and never one
partition for two members (also over random inputs)."""
from __future__ import annotations

import random
import struct

import pytest

from clients.aio.assignors import (COOPERATIVE, EAGER, Assignment, CooperativeStickyAssignor,
                                   RangeAssignor, RoundRobinAssignor, Subscription,
                                   assignor_for, decode_assignment, decode_subscription,
                                   encode_assignment, encode_subscription, rebalance_protocol)
from clients.types import TopicPartition as TP


def s16(v: int) -> bytes:
    return struct.pack(">h", v)


def s32(v: int) -> bytes:
    return struct.pack(">i", v)


def kstr(s: str) -> bytes:
    return s16(len(s)) + s.encode()


# ====================================================================== encoding

def test_subscription_v0_golden_bytes() -> None:
    data = encode_subscription(Subscription(["b", "a"], b"\x01\x02", version=0))
    # version | topics: count, "a", "b" (sorted) | user_data: int32 length + bytes
    assert data == s16(0) + s32(2) + kstr("a") + kstr("b") + s32(2) + b"\x01\x02"


def test_subscription_v3_golden_bytes() -> None:
    sub = Subscription(["t"], None, [TP("t", 2), TP("t", 0), TP("u", 1)], 7, "rack-1")
    data = encode_subscription(sub)
    assert data == (s16(3) + s32(1) + kstr("t") + s32(-1)                    # null user data
                    + s32(2) + kstr("t") + s32(2) + s32(0) + s32(2)          # owned, sorted
                    + kstr("u") + s32(1) + s32(1)
                    + s32(7) + kstr("rack-1"))                               # generation, rack
    back = decode_subscription(data)
    assert back == Subscription(["t"], None, [TP("t", 0), TP("t", 2), TP("u", 1)], 7, "rack-1", 3)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_every_version(version: int) -> None:
    sub = Subscription(["x", "y"], b"ud", [TP("x", 1)], 4, "r", version)
    back = decode_subscription(encode_subscription(sub))
    assert back.version == version and back.topics == ["x", "y"] and back.user_data == b"ud"
    assert back.owned_partitions == ([TP("x", 1)] if version >= 1 else [])
    assert back.generation_id == (4 if version >= 2 else -1)
    assert back.rack_id == ("r" if version >= 3 else None)


def test_newer_versions_are_read_with_the_newest_known_layout() -> None:
    # A v5 subscription from a future client: v3 fields, then fields we do not know.
    data = encode_subscription(Subscription(["t"], None, [TP("t", 0)], 2, None))
    future = s16(5) + data[2:] + b"\x00\x00\x00\x09extra"
    sub = decode_subscription(future)
    assert (sub.version, sub.topics, sub.owned_partitions, sub.generation_id) == (5, ["t"], [TP("t", 0)], 2)
    a = decode_assignment(s16(9) + encode_assignment(Assignment([TP("t", 1)]))[2:] + b"more")
    assert a.partitions == [TP("t", 1)]


def test_assignment_golden_bytes_and_round_trip() -> None:
    data = encode_assignment(Assignment([TP("b", 0), TP("a", 3), TP("a", 1)], None, version=1))
    assert data == (s16(1) + s32(2) + kstr("a") + s32(2) + s32(1) + s32(3)
                    + kstr("b") + s32(1) + s32(0) + s32(-1))
    back = decode_assignment(data)
    assert back.partitions == [TP("a", 1), TP("a", 3), TP("b", 0)] and back.user_data is None
    assert decode_assignment(b"").partitions == []       # a member the leader gave nothing
    assert decode_assignment(encode_assignment(Assignment([], b"x"))).user_data == b"x"


def test_negative_version_is_rejected() -> None:
    with pytest.raises(ValueError):
        decode_subscription(s16(-1) + s32(0) + s32(-1))


# ====================================================================== range, roundrobin

def subs(**members: list[str]) -> dict[str, Subscription]:
    return {m: Subscription(topics) for m, topics in members.items()}


def test_range_gives_consecutive_ranges_first_members_get_the_extra() -> None:
    out = RangeAssignor().assign({"t": 5, "u": 2}, subs(m1=["t", "u"], m2=["t", "u"]))
    assert out == {"m1": [TP("t", 0), TP("t", 1), TP("t", 2), TP("u", 0)],
                   "m2": [TP("t", 3), TP("t", 4), TP("u", 1)]}


def test_range_per_topic_only_among_its_subscribers() -> None:
    out = RangeAssignor().assign({"t": 4, "u": 3}, subs(a=["t"], b=["t", "u"], c=["u"]))
    assert out == {"a": [TP("t", 0), TP("t", 1)],
                   "b": [TP("t", 2), TP("t", 3), TP("u", 0), TP("u", 1)],
                   "c": [TP("u", 2)]}
    # More members than partitions: the last ones get nothing; unknown topics are skipped.
    out = RangeAssignor().assign({"t": 1}, subs(a=["t", "gone"], b=["t"]))
    assert out == {"a": [TP("t", 0)], "b": []}


def test_roundrobin_deals_sorted_partitions_in_turn() -> None:
    out = RoundRobinAssignor().assign({"t": 3, "u": 2}, subs(m2=["t", "u"], m1=["t", "u"], m3=["t", "u"]))
    assert out == {"m1": [TP("t", 0), TP("u", 0)], "m2": [TP("t", 1), TP("u", 1)], "m3": [TP("t", 2)]}


def test_roundrobin_skips_members_not_subscribed() -> None:
    out = RoundRobinAssignor().assign({"t": 2, "u": 3}, subs(a=["t", "u"], b=["u"]))
    assert out == {"a": [TP("t", 0), TP("t", 1), TP("u", 1)], "b": [TP("u", 0), TP("u", 2)]}


# ====================================================================== cooperative-sticky

def coop(owned: dict[str, list[TP]], topics: dict[str, list[str]], generation: int = 1
         ) -> dict[str, Subscription]:
    return {m: Subscription(topics[m], None, owned.get(m, []), generation) for m in topics}


def counts(a: dict[str, list[TP]]) -> list[int]:
    return sorted(len(v) for v in a.values())


def test_cooperative_sticky_fresh_group_is_balanced() -> None:
    out = CooperativeStickyAssignor().assign({"t": 7}, coop({}, {m: ["t"] for m in "abc"}))
    assert counts(out) == [2, 2, 3]
    assert sorted(tp for v in out.values() for tp in v) == [TP("t", p) for p in range(7)]


def test_cooperative_sticky_new_member_first_round_withholds_then_hands_over() -> None:
    a = CooperativeStickyAssignor()
    owned = {"a": [TP("t", p) for p in range(0, 3)], "b": [TP("t", p) for p in range(3, 6)]}
    topics = {"a": ["t"], "b": ["t"], "c": ["t"]}
    first = a.assign({"t": 6}, coop(owned, topics))
    # Stickiness: a and b keep 2 of their own each; nothing moves directly to c, since
    # partitions changing owner are withheld until their owner revokes them.
    assert set(first["a"]) <= set(owned["a"]) and len(first["a"]) == 2
    assert set(first["b"]) <= set(owned["b"]) and len(first["b"]) == 2
    assert first["c"] == []
    revoked = (set(owned["a"]) - set(first["a"])) | (set(owned["b"]) - set(first["b"]))
    assert len(revoked) == 2
    # Second round: a and b have revoked; the two freed partitions go to c, nothing else moves.
    second = a.assign({"t": 6}, coop(first, topics, generation=2))
    assert second["a"] == first["a"] and second["b"] == first["b"]
    assert set(second["c"]) == revoked


def test_cooperative_sticky_member_leaving_keeps_everyone_elses_partitions() -> None:
    a = CooperativeStickyAssignor()
    owned = {"a": [TP("t", 0), TP("t", 1)], "b": [TP("t", 2), TP("t", 3)], "c": [TP("t", 4), TP("t", 5)]}
    out = a.assign({"t": 6}, coop({m: owned[m] for m in "ab"}, {"a": ["t"], "b": ["t"]}))
    assert set(owned["a"]) <= set(out["a"]) and set(owned["b"]) <= set(out["b"])
    assert counts(out) == [3, 3]     # c's partitions were free: assigned at once


def test_cooperative_sticky_conflicting_claims_go_to_the_newer_generation() -> None:
    subs_ = {"a": Subscription(["t"], None, [TP("t", 0), TP("t", 1)], 5),
             "b": Subscription(["t"], None, [TP("t", 1)], 3)}      # b's claim is stale
    out = CooperativeStickyAssignor().assign({"t": 2}, subs_)
    assert TP("t", 1) not in out["b"]
    assert TP("t", 0) in out["a"]
    # The generation also travels in user_data (Java's encoding) when Subscription < v2.
    ud = CooperativeStickyAssignor().subscription_user_data(9)
    assert ud == s32(9)
    old = {"a": Subscription(["t"], ud, [TP("t", 0)], -1, version=1),
           "b": Subscription(["t"], s32(2), [TP("t", 0)], -1, version=1)}
    assert CooperativeStickyAssignor().assign({"t": 1}, old) == {"a": [TP("t", 0)], "b": []}


def test_cooperative_sticky_drops_partitions_of_unsubscribed_topics() -> None:
    subs_ = {"a": Subscription(["u"], None, [TP("t", 0)], 1), "b": Subscription(["t"], None, [], 1)}
    out = CooperativeStickyAssignor().assign({"t": 1, "u": 1}, subs_)
    # t-0 changes owner (a no longer wants it): withheld until a has revoked it.
    assert out == {"a": [TP("u", 0)], "b": []}


@pytest.mark.parametrize("name", ["range", "roundrobin", "cooperative-sticky"])
def test_random_inputs_never_assign_a_partition_twice(name: str) -> None:
    rnd = random.Random(42)
    assignor = assignor_for(name)
    for _ in range(200):
        topics = {f"t{i}": rnd.randint(1, 8) for i in range(rnd.randint(1, 4))}
        members = [f"m{i}" for i in range(rnd.randint(1, 6))]
        all_tps = [TP(t, p) for t, n in topics.items() for p in range(n)]
        owned_pool = list(all_tps)
        rnd.shuffle(owned_pool)
        subs_ = {}
        for m in members:
            wanted = rnd.sample(sorted(topics), rnd.randint(1, len(topics)))
            owned = [owned_pool.pop() for _ in range(rnd.randint(0, 2)) if owned_pool]
            subs_[m] = Subscription(wanted, None, owned, rnd.randint(1, 3))
        out = assignor.assign(topics, subs_)
        flat = [tp for v in out.values() for tp in v]
        assert len(flat) == len(set(flat)), (name, topics, subs_, out)
        for m, tps in out.items():
            assert all(tp.topic in subs_[m].topics for tp in tps)
        if name != "cooperative-sticky":       # eager ones assign every subscribed partition
            wanted_tps = {tp for tp in all_tps if any(tp.topic in s.topics for s in subs_.values())}
            assert set(flat) == wanted_tps
        else:
            # Same subscriptions, no prior owners: everything assigned, counts within one.
            fresh = assignor.assign(topics, {m: Subscription(sorted(topics)) for m in members})
            assert len({tp for v in fresh.values() for tp in v}) == len(all_tps)
            assert max(counts(fresh)) - min(counts(fresh)) <= 1


def test_rebalance_protocol_and_names() -> None:
    assert rebalance_protocol([assignor_for("cooperative-sticky")]) == COOPERATIVE
    assert rebalance_protocol([assignor_for("range"), assignor_for("cooperative-sticky")]) == EAGER
    assert [assignor_for(n).name for n in ("range", "roundrobin", "cooperative-sticky")] == [
        "range", "roundrobin", "cooperative-sticky"]
    with pytest.raises(ValueError):
        assignor_for("sticky-ish")
