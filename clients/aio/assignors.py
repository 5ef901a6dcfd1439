"""Kafka's consumer protocol (protocol type "consumer") and its partition assignors.

Sans-io: pure functions and small classes, safe from any thread.

ConsumerProtocol. A member's JoinGroup metadata is a `Subscription` and the leader's
SyncGroup payload per member an `Assignment`, both encoded as `int16 version` followed by
the fields of Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment specs
(non-flexible, declared below as data). A reader understands every version: a newer one
than it knows is read with the newest layout it knows (Kafka's forward-compatibility rule,
newer versions only append fields), so strom members and librdkafka or Java members can
share one group.

  Subscription v0: topics, user_data   v1: + owned_partitions   v2: + generation_id
               v3: + rack_id
  Assignment   v0-v3: assigned_partitions, user_data (the layout never changed)

Assignors (names exactly as Kafka's, selected by partition.assignment.strategy):
  "range"               EAGER; per topic, consecutive ranges to members sorted by id.
  "roundrobin"          EAGER; all partitions, round robin over members sorted by id.
  "cooperative-sticky"  COOPERATIVE (KIP-429); balanced, keeps owned partitions where it
                        can, and withholds a partition that changes owner for one
                        rebalance so the old owner revokes it first.

An assignor maps `{member_id: Subscription}` and `{topic: partition count}` to
`{member_id: [TopicPartition]}`, never giving one partition to two members.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from clients.protocol.schema import F, NULL, StructCodec
from clients.protocol.types import Reader, Writer
from clients.types import TopicPartition

__all__ = ["PROTOCOL_TYPE", "EAGER", "COOPERATIVE", "Subscription", "Assignment",
           "encode_subscription", "decode_subscription", "encode_assignment",
           "decode_assignment", "Assignor", "RangeAssignor", "RoundRobinAssignor",
           "CooperativeStickyAssignor", "ASSIGNORS", "assignor_for", "rebalance_protocol"]

PROTOCOL_TYPE = "consumer"
EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3

_TOPIC_PARTITIONS = [F("topic", "string"), F("partitions", "[]int32")]

_SUBSCRIPTION_FIELDS = [
    F("topics", "[]string"),
    F("user_data", "bytes", nullable="0+", default=NULL),
    F("owned_partitions", _TOPIC_PARTITIONS, versions="1+"),
    F("generation_id", "int32", versions="2+", default=-1),
    F("rack_id", "string", versions="3+", nullable="3+", default=NULL),
]
_ASSIGNMENT_FIELDS = [
    F("assigned_partitions", _TOPIC_PARTITIONS),
    F("user_data", "bytes", nullable="0+", default=NULL),
]
_SUB_CODECS = [StructCodec(_SUBSCRIPTION_FIELDS, v, False) for v in range(SUBSCRIPTION_VERSION + 1)]
_ASSIGN_CODECS = [StructCodec(_ASSIGNMENT_FIELDS, v, False) for v in range(ASSIGNMENT_VERSION + 1)]
_INT32 = struct.Struct(">i")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


@dataclass
class Assignment:
    partitions: list[TopicPartition] = field(default_factory=list)
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION


def _group_tps(tps: Sequence[TopicPartition]) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _flat_tps(entries: Sequence[Mapping]) -> list[TopicPartition]:
    return [TopicPartition(e["topic"], p) for e in entries for p in e["partitions"]]


def _read_version(data: bytes) -> tuple[Reader, int]:
    r = Reader(data)
    v = r.int16()
    if v < 0:
        raise ValueError(f"consumer protocol version {v} is negative")
    return r, v


def encode_subscription(sub: Subscription) -> bytes:
    v = min(sub.version, SUBSCRIPTION_VERSION)
    w = Writer()
    w.int16(v)
    _SUB_CODECS[v].write(w, {"topics": sorted(sub.topics), "user_data": sub.user_data,
                             "owned_partitions": _group_tps(sub.owned_partitions),
                             "generation_id": sub.generation_id, "rack_id": sub.rack_id})
    return w.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    r, v = _read_version(data)
    s = _SUB_CODECS[min(v, SUBSCRIPTION_VERSION)].read(r)
    return Subscription(list(s.topics), s.user_data, _flat_tps(s.owned_partitions),
                        s.generation_id, s.rack_id, v)


def encode_assignment(a: Assignment) -> bytes:
    v = min(a.version, ASSIGNMENT_VERSION)
    w = Writer()
    w.int16(v)
    _ASSIGN_CODECS[v].write(w, {"assigned_partitions": _group_tps(a.partitions),
                                "user_data": a.user_data})
    return w.getvalue()


def decode_assignment(data: bytes | None) -> Assignment:
    """An empty payload (a member the leader gave nothing) is an empty assignment."""
    if not data:
        return Assignment([])
    r, v = _read_version(data)
    a = _ASSIGN_CODECS[min(v, ASSIGNMENT_VERSION)].read(r)
    return Assignment(_flat_tps(a.assigned_partitions), a.user_data, v)


# ====================================================================== assignors

class Assignor:
    """Base of the assignors: `name`, the rebalance protocols it supports, and `assign`."""

    name = ""
    protocols: tuple[str, ...] = (EAGER,)

    def subscription_user_data(self, generation: int) -> bytes | None:
        return None

    def assign(self, partitions: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """{member_id: partitions}. `partitions` maps each topic to its partition count; a
        topic missing from it (unknown to metadata) is not assigned."""
        raise NotImplementedError


class RangeAssignor(Assignor):
    """Kafka's RangeAssignor: for each topic, the members subscribed to it (sorted by member
    id) get consecutive ranges; the first `count % members` get one partition more."""

    name = "range"

    def assign(self, partitions, subscriptions):
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        by_topic: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for t in set(sub.topics):
                by_topic.setdefault(t, []).append(member)
        for topic in sorted(by_topic):
            count = partitions.get(topic, 0)
            members = sorted(by_topic[topic])
            per, extra = divmod(count, len(members))
            start = 0
            for i, m in enumerate(members):
                n = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + n))
                start += n
        return out


class RoundRobinAssignor(Assignor):
    """Kafka's RoundRobinAssignor: every partition of every subscribed topic, sorted, dealt
    to the members (sorted by id) in turn, skipping members not subscribed to its topic."""

    name = "roundrobin"

    def assign(self, partitions, subscriptions):
        out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted(subscriptions)
        if not members:
            return out
        subscribed = {m: set(subscriptions[m].topics) for m in members}
        topics = sorted(set().union(*subscribed.values()))
        i = 0
        for topic in topics:
            for p in range(partitions.get(topic, 0)):
                # The next member in the circle that wants this topic.
                while topic not in subscribed[members[i % len(members)]]:
                    i += 1
                out[members[i % len(members)]].append(TopicPartition(topic, p))
                i += 1
        return out


class CooperativeStickyAssignor(Assignor):
    """Balanced and sticky, for the cooperative protocol (KIP-429).

    1. Each member keeps the partitions it owns that it still subscribes to; a partition
       claimed by two members goes to the one with the newer generation (then the lower
       member id).
    2. Where all subscriptions are equal, no member keeps more than ceil(P / M).
    3. Free partitions go, in order, to the least loaded member that subscribes to them.
    4. While some member has two more partitions than another member that could take one
       of them, one moves (the fewest moves that balance the counts).
    5. Cooperative rule: a partition whose owner changes is left unassigned this round;
       its old owner revokes it and rejoins, and the next rebalance hands it over.
    """

    name = "cooperative-sticky"
    protocols = (COOPERATIVE, EAGER)

    def subscription_user_data(self, generation: int) -> bytes | None:
        # Java's CooperativeStickyAssignor sends its generation here too (for members of
        # versions before Subscription v2 carried generation_id).
        return _INT32.pack(generation)

    @staticmethod
    def _generation(sub: Subscription) -> int:
        if sub.generation_id >= 0:
            return sub.generation_id
        if sub.user_data is not None and len(sub.user_data) == 4:
            return _INT32.unpack(sub.user_data)[0]
        return -1

    def assign(self, partitions, subscriptions):
        members = sorted(subscriptions)
        wants = {m: {t for t in subscriptions[m].topics if partitions.get(t, 0) > 0}
                 for m in members}
        all_tps = sorted({TopicPartition(t, p) for m in members for t in wants[m]
                          for p in range(partitions[t])})
        # 1. Owned partitions that are still valid, conflicts to the newest generation.
        claims: dict[TopicPartition, tuple[int, str]] = {}
        for m in members:
            gen = self._generation(subscriptions[m])
            for tp in subscriptions[m].owned_partitions:
                if tp.topic not in wants[m] or tp.partition >= partitions[tp.topic]:
                    continue
                best = claims.get(tp)
                if best is None or (-gen, m) < (-best[0], best[1]):
                    claims[tp] = (gen, m)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for tp, (_, m) in sorted(claims.items()):
            owned[m].append(tp)
        assigned = {m: list(tps) for m, tps in owned.items()}
        # 2. Equal subscriptions: trim anyone above the ceiling quota.
        if members and all(wants[m] == wants[members[0]] for m in members):
            ceiling = -(-len(all_tps) // len(members))
            for m in members:
                del assigned[m][ceiling:]
        # 3. Free partitions to the least loaded eligible member.
        taken = {tp for tps in assigned.values() for tp in tps}
        for tp in all_tps:
            if tp in taken:
                continue
            eligible = [m for m in members if tp.topic in wants[m]]
            target = min(eligible, key=lambda m: (len(assigned[m]), m))
            assigned[target].append(tp)
        # 4. Move single partitions from over- to under-loaded members until balanced.
        moved = True
        while moved:
            moved = False
            for src in sorted(members, key=lambda m: (-len(assigned[m]), m)):
                for dst in sorted(members, key=lambda m: (len(assigned[m]), m)):
                    if len(assigned[src]) - len(assigned[dst]) < 2:
                        break
                    # Prefer moving a partition src did not own before this round.
                    candidates = [tp for tp in assigned[src] if tp.topic in wants[dst]]
                    if not candidates:
                        continue
                    candidates.sort(key=lambda tp: (tp in owned[src], tp))
                    tp = candidates[0]
                    assigned[src].remove(tp)
                    assigned[dst].append(tp)
                    moved = True
                    break
                if moved:
                    break
        # 5. Withhold partitions that change owner until their owner has revoked them.
        previous = {tp: m for m in members for tp in subscriptions[m].owned_partitions}
        previous.update((tp, m) for tp, (_, m) in claims.items())
        out: dict[str, list[TopicPartition]] = {}
        for m in members:
            out[m] = sorted(tp for tp in assigned[m] if previous.get(tp, m) == m)
        return out


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}


def assignor_for(name: str) -> Assignor:
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown partition.assignment.strategy {name!r} "
                         f"(one of {', '.join(ASSIGNORS)})") from None


def rebalance_protocol(assignors: Sequence[Assignor]) -> str:
    """Kafka's rule: COOPERATIVE only if every configured assignor supports it (so a group
    upgrading from range to cooperative-sticky keeps revoking eagerly until all agree)."""
    common = set.intersection(*(set(a.protocols) for a in assignors)) if assignors else {EAGER}
    return COOPERATIVE if COOPERATIVE in common else EAGER
