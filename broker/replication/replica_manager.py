"""Partition states on this broker: the log, leadership, the high watermark.

`Partition` is the one object that owns a partition's leader epoch, replica set and high
watermark (STYLE habit 7). In standalone mode this broker leads every partition and is its
only in-sync replica, so the high watermark is the log end offset after each append; the
replication issue widens this to followers and ISR without changing callers.

Single event-loop thread: every method here is synchronous and does blocking file I/O of
the log (page-cache writes, header preads).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from clients.protocol.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError

from ..server.purgatory import FetchPurgatory

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Any                                  # broker.log.PartitionLog
    broker_id: int
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def last_offset_for(self, isolation_level: int) -> int:
        """The offset a consumer may read up to (exclusive)."""
        if isolation_level == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    def append_as_leader(self, records: Any) -> Any:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch)
        if self.isr == [self.broker_id]:
            # Sole in-sync replica: everything appended is replicated everywhere it must be.
            self.log.high_watermark = self.log.log_end_offset
        return info


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: Any, purgatory: FetchPurgatory):
        self.broker_id = broker_id
        self.logs = log_manager
        self.purgatory = purgatory
        self.partitions: dict[tuple[str, int], Partition] = {}

    def get(self, topic: str, partition: int) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} is not on broker {self.broker_id}")
        return p

    def maybe_get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def become_leader(self, topic: str, topic_id: uuid.UUID, index: int, replicas: list[int],
                      leader_epoch: int, log_config: Any) -> Partition:
        log = self.logs.get_log(topic, index) or self.logs.create_log(topic, index, log_config)
        p = self.partitions.get((topic, index))
        if p is None:
            p = Partition(topic, index, topic_id, log, self.broker_id, self.broker_id)
            self.partitions[(topic, index)] = p
        p.leader_id = self.broker_id
        p.leader_epoch = leader_epoch
        p.replicas = list(replicas)
        p.isr = [self.broker_id]
        log.high_watermark = log.log_end_offset
        return p

    def append(self, topic: str, partition: int, records: Any) -> Any:
        p = self.get(topic, partition)
        info = p.append_as_leader(records)
        self.purgatory.notify((topic, partition))
        return info

    def delete_partition(self, topic: str, partition: int) -> None:
        p = self.partitions.pop((topic, partition), None)
        if p is not None:
            self.logs.delete_log(topic, partition)
            self.purgatory.notify((topic, partition))

    def update_log_config(self, topic: str, log_config: Any) -> None:
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(log_config)
