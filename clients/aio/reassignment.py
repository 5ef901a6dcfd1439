"""Partition reassignment as the admin client sees it (Kafka's `PartitionReassignment`), the
bodies of AlterPartitionReassignments / ListPartitionReassignments and the decoding of their
answers, and Kafka's replica placement (`AdminUtils.assignReplicasToBrokers`), which a
reassignment tool proposes with. Sans-io: nothing here touches a socket.
"""
from __future__ import annotations

import random
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from clients.types import TopicPartition

__all__ = ["PartitionReassignment", "BrokerRack", "alter_reassignments_request",
           "list_reassignments_request", "reassignments_from_response",
           "assign_replicas_to_brokers", "rack_alternated_brokers"]


class PartitionReassignment(NamedTuple):
    """A reassignment in progress: `replicas` is the whole replica set now (targets and
    the replicas still being removed), `adding_replicas` those catching up, and
    `removing_replicas` those to drop once every target is in the ISR."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class BrokerRack(NamedTuple):
    """A broker a placement may use, with its `broker.rack` (None: not set)."""

    broker_id: int
    rack: str | None = None


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


def alter_reassignments_request(reassignments: Mapping[TopicPartition, Sequence[int] | None],
                                timeout_ms: int) -> dict:
    """AlterPartitionReassignments' body: each partition's target replicas, None to cancel."""
    topics: dict[str, list[dict]] = {}
    for tp, replicas in reassignments.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition,
             "replicas": None if replicas is None else [int(r) for r in replicas]})
    return {"timeout_ms": timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def list_reassignments_request(partitions: Iterable[TopicPartition] | None, timeout_ms: int) -> dict:
    """ListPartitionReassignments' body: the partitions asked about, None for every one."""
    return {"timeout_ms": timeout_ms,
            "topics": None if partitions is None else
            [{"name": t, "partition_indexes": ps} for t, ps in _by_topic(partitions).items()]}


def reassignments_from_response(resp: Any) -> dict[TopicPartition, PartitionReassignment]:
    """The reassignments in progress that a ListPartitionReassignments answer names."""
    return {TopicPartition(t.name, p.partition_index):
            PartitionReassignment(list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics or () for p in t.partitions}


# ---------------------------------------------------------------------------- placement

def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so that consecutive ones sit on different racks: the first broker
    of each rack (racks sorted by name, brokers by id), then the second of each, ... so
    that a round-robin over the list spreads replicas over the racks."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns), default=0))
            for column in columns if i < len(column)]


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    # The j-th follower sits 1..n-1 places after the leader: never on it, and the
    # followers of one partition at distinct places while j < n - 1.
    return (first + 1 + (shift + j) % (n - 1)) % n if n > 1 else first


def assign_replicas_to_brokers(brokers: Sequence[BrokerRack], partitions: int, replication_factor: int,
                               fixed_start: int = -1, rng: random.Random | None = None
                               ) -> dict[int, list[int]]:
    """Kafka's replica placement for partitions 0..partitions-1: leaders round-robin over
    the brokers from a random start (`fixed_start` >= 0: that start, for a reproducible
    plan), followers at a shift that grows each time the leaders wrap around, so every
    broker gets the same share and its partitions' followers spread over the others.

    When every broker has a rack, the round-robin runs over the rack-alternated list and
    each partition's followers go first to racks it has no replica on, then to brokers it
    has none on: with at least as many replicas as racks every rack gets one, otherwise
    no rack gets two. Raises ValueError with Kafka's messages for a bad count or factor,
    or racks given for some brokers only."""
    if partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ValueError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise ValueError(f"Replication factor: {replication_factor} larger than available "
                         f"brokers: {len(brokers)}.")
    racked = {b.broker_id: b.rack for b in brokers if b.rack is not None}
    if racked and len(racked) != len(brokers):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    rng = rng or random.Random()
    ordered = rack_alternated_brokers(racked) if racked else [b.broker_id for b in brokers]
    n = len(ordered)
    n_racks = len(set(racked.values())) if racked else 1
    start = fixed_start if fixed_start >= 0 else rng.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    plan: dict[int, list[int]] = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = ordered[first]
        replicas = [leader]
        if not racked:
            replicas += [ordered[_follower_index(first, shift, j, n)]
                         for j in range(replication_factor - 1)]
        else:
            used_racks = {racked[leader]}
            k = 0
            while len(replicas) < replication_factor:
                broker = ordered[_follower_index(first, shift * n_racks, k, n)]
                k += 1
                rack_free = racked[broker] not in used_racks or len(used_racks) == n_racks
                broker_free = broker not in replicas or len(replicas) == n
                if rack_free and broker_free:
                    replicas.append(broker)
                    used_racks.add(racked[broker])
        plan[p] = replicas
    return plan
