"""Replication throttles as Kafka configures them (KIP-73): the broker's rates
(`leader.replication.throttled.rate`, `follower.replication.throttled.rate`, usually set
dynamically) and, per topic, which replicas they apply to
(`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`: a list
of PARTITION:BROKER, or `*` for every replica of the topic). Pure values: safe anywhere."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .value_types import LONG_MAX

UNLIMITED = LONG_MAX     # Kafka's default rate: no throttle


@dataclass(frozen=True)
class ReplicationThrottles:
    """The broker's effective rates in bytes/s (UNLIMITED: none)."""

    leader_rate: int
    follower_rate: int
    alter_log_dirs_rate: int


@dataclass(frozen=True)
class ThrottledReplicas:
    """Which replicas of one topic a throttle covers: every one (`*`) or the listed
    (partition, broker) pairs."""

    every_replica: bool
    replicas: frozenset[tuple[int, int]]

    @classmethod
    def parse(cls, raw: str | None) -> ThrottledReplicas:
        """A topic's `*.replication.throttled.replicas` value as stored (validated by the
        topic key's own check): "", "*" or "0:101,1:102"."""
        items = [x.strip() for x in (raw or "").split(",") if x.strip()]
        if items == ["*"]:
            return cls(True, frozenset())
        pairs = set()
        for item in items:
            partition, _, broker = item.partition(":")
            pairs.add((int(partition), int(broker)))
        return cls(False, frozenset(pairs))

    def covers(self, partition: int, broker_id: int) -> bool:
        return self.every_replica or (partition, broker_id) in self.replicas


LEADER_REPLICAS_KEY = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS_KEY = "follower.replication.throttled.replicas"


def throttled_replicas(topic_configs: Mapping[str, str]
                       ) -> tuple[ThrottledReplicas, ThrottledReplicas]:
    """(leader side, follower side) of a topic, from its stored overrides."""
    return (ThrottledReplicas.parse(topic_configs.get(LEADER_REPLICAS_KEY)),
            ThrottledReplicas.parse(topic_configs.get(FOLLOWER_REPLICAS_KEY)))
