"""Log dirs as the admin client describes and alters them (Kafka's `LogDirDescription`,
`ReplicaInfo`, `TopicPartitionReplica`), and the decoding of a DescribeLogDirs answer
(sans-io)."""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from clients.protocol.errors import KafkaError, for_code
from clients.types import TopicPartition

__all__ = ["ReplicaInfo", "LogDirDescription", "TopicPartitionReplica", "log_dirs_from_response",
           "alter_log_dirs_request"]


class ReplicaInfo(NamedTuple):
    """One replica in a log dir: its size in bytes, and for a future replica (one moving
    into the dir) how many offsets it is behind the current one."""

    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(NamedTuple):
    """One log dir of a broker: `error` (KafkaStorageErrorError for an offline dir) or
    None, its replicas, and the file system's total and usable bytes (None when the broker
    did not say: DescribeLogDirs before v4)."""

    error: KafkaError | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


class TopicPartitionReplica(NamedTuple):
    """The replica of a partition on one broker."""

    topic: str
    partition: int
    broker_id: int


def log_dirs_from_response(resp: Any) -> dict[str, LogDirDescription]:
    """Each log dir of a DescribeLogDirs answer, by path."""
    out: dict[str, LogDirDescription] = {}
    for r in resp.results:
        replicas = {TopicPartition(t.name, p.partition_index):
                    ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
                    for t in r.topics for p in t.partitions}
        total, usable = r.get("total_bytes", -1), r.get("usable_bytes", -1)
        out[r.log_dir] = LogDirDescription(
            for_code(r.error_code)(f"log dir {r.log_dir}") if r.error_code else None, replicas,
            total if total >= 0 else None, usable if usable >= 0 else None)
    return out


def alter_log_dirs_request(moves: Iterable[tuple[TopicPartition, str]]) -> dict:
    """The body of AlterReplicaLogDirs for one broker: each partition to its new dir."""
    by_dir: dict[str, dict[str, list[int]]] = {}
    for tp, path in moves:
        by_dir.setdefault(path, {}).setdefault(tp.topic, []).append(tp.partition)
    return {"dirs": [{"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                     for path, topics in by_dir.items()]}
