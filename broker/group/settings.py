"""The broker configs of the group coordinator and its offsets topic."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig


@dataclass(frozen=True)
class GroupSettings:
    """The broker configs of the group coordinator and its offsets topic."""
    num_partitions: int             # offsets.topic.num.partitions
    replication_factor: int         # offsets.topic.replication.factor
    segment_bytes: int              # offsets.topic.segment.bytes
    min_session_ms: int             # group.min.session.timeout.ms
    max_session_ms: int             # group.max.session.timeout.ms
    initial_delay_ms: int           # group.initial.rebalance.delay.ms
    max_group_size: int             # group.max.size
    retention_ms: int               # offsets.retention.minutes, in ms
    retention_check_ms: int         # offsets.retention.check.interval.ms
    metadata_max_bytes: int         # offset.metadata.max.bytes
    commit_timeout_ms: int = 5000   # offsets.commit.timeout.ms (acks=all writes of commits)

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> GroupSettings:
        return cls(cfg.get("offsets.topic.num.partitions"), cfg.get("offsets.topic.replication.factor"),
                   cfg.get("offsets.topic.segment.bytes"), cfg.get("group.min.session.timeout.ms"),
                   cfg.get("group.max.session.timeout.ms"), cfg.get("group.initial.rebalance.delay.ms"),
                   cfg.get("group.max.size"), cfg.get("offsets.retention.minutes") * 60_000,
                   cfg.get("offsets.retention.check.interval.ms"), cfg.get("offset.metadata.max.bytes"),
                   cfg.get("offsets.commit.timeout.ms"))
