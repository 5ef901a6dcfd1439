"""A classic consumer group's state: members, generation, protocol, and its state machine.

States and transitions follow Kafka's GroupMetadata:

    Empty --join--> PreparingRebalance --all joined--> CompletingRebalance --leader sync--> Stable
    Stable/CompletingRebalance --join/leave/expiry--> PreparingRebalance
    PreparingRebalance --no members left--> Empty;  any --delete/unload--> Dead

No I/O and no asyncio here except the futures parked members wait on; the coordinator owns
the clock and the persistence.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

VALID_PREVIOUS = {
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    EMPTY: {PREPARING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]          # (name, metadata), in preference order
    assignment: bytes = b""
    last_heartbeat: float = 0.0                  # coordinator clock, seconds
    join_future: asyncio.Future | None = None    # parked JoinGroup awaiting the rebalance
    sync_future: asyncio.Future | None = None    # parked SyncGroup awaiting the leader
    is_new: bool = False                         # joined in this rebalance (KIP-394 expiry)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def answer_join(self, response: dict) -> None:
        """Complete the parked JoinGroup, if one is waiting."""
        if self.join_future is not None and not self.join_future.done():
            self.join_future.set_result(response)

    def answer_sync(self, response: dict) -> None:
        """Complete the parked SyncGroup, if one is waiting."""
        if self.sync_future is not None and not self.sync_future.done():
            self.sync_future.set_result(response)


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)   # instance id -> member id
    pending_members: set[str] = field(default_factory=set)           # KIP-394: ids handed out, not joined yet
    state_timestamp: float = 0.0
    # Rebalance bookkeeping (coordinator clock, seconds).
    join_deadline: float | None = None
    initial_delay_remaining: float = 0.0
    # Committed offsets live in the offset store; the group only counts them for Empty/Dead.

    def transition(self, new_state: str, now: float) -> None:
        if self.state not in VALID_PREVIOUS[new_state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {new_state}")
        self.state = new_state
        self.state_timestamp = now

    def is_(self, state: str) -> bool:
        return self.state == state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, m: Member) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id
        if self.leader_id is None:
            self.leader_id = m.member_id

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        m = self.members.pop(old_id)
        m.member_id = new_id
        self.members[new_id] = m
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return m

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's rule: an Empty group takes any non-empty type and protocols; otherwise the
        type must match and one of `names` must be supported by every current member."""
        if self.state == EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self.candidate_protocols()
        votes = Counter(next(p for p in m.protocol_names() if p in candidates) for m in self.members.values())
        best = max(votes.values())
        # Ties break on the first member's preference order, deterministically.
        first = next(iter(self.members.values()))
        return next(p for p in first.protocol_names() if votes.get(p) == best)

    def all_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer-protocol members subscribe to, or None if unknown."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= parse_subscription_topics(m.metadata_for(self.protocol))
            except Exception:
                return None
        return topics

    def summary_members(self, with_data: bool) -> list[dict[str, Any]]:
        out = []
        for m in self.members.values():
            out.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "client_host": m.client_host,
                        "member_metadata": m.metadata_for(self.protocol) if with_data and self.protocol else b"",
                        "member_assignment": m.assignment if with_data else b""})
        return out


def parse_subscription_topics(data: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topic list comes first)."""
    from clients.protocol.types import Reader
    r = Reader(data)
    r.int16()  # version
    n = r.int32()
    return {r.string() or "" for _ in range(max(n, 0))}
