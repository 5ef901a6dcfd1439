"""LogConfig: the topic-level settings a partition log obeys, under Kafka's names.

Self-contained on purpose (the broker's config table lives in broker/config.py): a
dataclass with Kafka's defaults and `from_topic_configs` for the dotted topic config names
(`segment.bytes`, `retention.ms`, ...). Unknown keys are ignored here (validation of user
input is the config table's job); a value that does not parse raises ValueError naming the
key. Immutable in practice: `PartitionLog.update_config` swaps the whole object.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

LONG_MAX = 2**63 - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0                      # accepted, not applied
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000                   # -1: no time limit
    retention_bytes: int = -1                       # -1: no size limit
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 3.x default, as the broker's config table (Kafka 4.0 lowered it to 1 hour).
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"                  # "delete", "compact" or "compact,delete"
    compression_type: str = "producer"              # else the codec batches are stored in (recompress.py)
    preallocate: bool = False                       # ignored
    delete_retention_ms: int = 86400000             # for the cleaner
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1                    # read by replication, kept here for one place
    unclean_leader_election_enable: bool = False
    # cleanup.policy parsed once: every append asks whether the topic is compacted.
    _policies: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_policies",
                           tuple(p.strip() for p in self.cleanup_policy.split(",") if p.strip()))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def cleanup_policies(self) -> tuple[str, ...]:
        return self._policies

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policies

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policies

    @property
    def max_segment_ms(self) -> int:
        """How long a segment may stay active (Kafka's LogConfig.maxSegmentMs): on a
        compacted topic at most max.compaction.lag.ms, since the cleaner never touches the
        active segment and that lag must still be honoured."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, Any],
                           base: "LogConfig | None" = None) -> "LogConfig":
        """`base` (default: Kafka's defaults) overridden by Kafka's dotted topic config names."""
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls) if f.init}
        for key, raw in configs.items():
            attr = key.replace(".", "_")
            if attr not in types or raw is None:
                continue
            changes[attr] = _parse(key, attr, raw, types[attr])
        cfg = replace(base or cls(), **changes)
        if cfg.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"message.timestamp.type: invalid value {cfg.message_timestamp_type!r}")
        if cfg.segment_bytes < 14:
            raise ValueError(f"segment.bytes: {cfg.segment_bytes} is below the minimum 14")
        if cfg.index_interval_bytes < 0 or cfg.segment_index_bytes < 8:
            raise ValueError("index.interval.bytes / segment.index.bytes out of range")
        return cfg


def _parse(key: str, attr: str, raw: Any, typ: Any) -> Any:
    text = str(raw).strip()
    try:
        if attr == "cleanup_policy":
            items = raw if isinstance(raw, (list, tuple)) else text.strip("[]").split(",")
            parts = [str(p).strip().lower() for p in items if str(p).strip()]
            if not parts or any(p not in ("delete", "compact") for p in parts):
                raise ValueError(text)
            return ",".join(parts)
        if typ in ("bool", bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if typ in ("float", float):
            return float(text)
        if typ in ("int", int):
            return int(text)
        return text
    except ValueError:
        raise ValueError(f"{key}: invalid value {text!r}") from None
