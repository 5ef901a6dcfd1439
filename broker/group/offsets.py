"""The `__consumer_offsets` store: committed offsets in memory, every change appended to the
group's partition of the internal topic first, and everything read back from that log when
this broker takes a partition over.

Transactional offset commits (TxnOffsetCommit, KIP-98) are appended as transactional
batches of the producer and stay pending until its transaction's marker reaches the same
partition: COMMIT makes them the group's committed offsets, ABORT drops them. A partition
loaded after a failover replays the same rule from its log.

The partition of group G is abs(javaHash(G)) % offsets.topic.num.partitions, exactly as
Kafka computes it, so a group keeps its partition across brokers and implementations.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Sequence

from clients.protocol.errors import raise_for_code
from clients.protocol.records import Record, build_batch

from ..key_hash import partition_for_key
from ..log import ORIGIN_COORDINATOR
from ..log.keyed_replay import TxnMarker, TxnRecord, replay_with_markers
from ..replication.coordinator_writes import COORDINATOR_WRITE_ERRORS
from ..replication.replica_manager import ReplicaManager
from . import records as R

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

LOAD_CHUNK_BYTES = 1 << 20


def partition_for(group_id: str, num_partitions: int) -> int:
    return partition_for_key(group_id, num_partitions)


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int       # wall clock, ms


class OffsetStore:
    """Committed offsets of every group this broker coordinates; appends go to the log first."""

    def __init__(self, replicas: ReplicaManager, num_partitions: int, commit_timeout_s: float = 5.0):
        self.replicas = replicas
        self.num_partitions = num_partitions
        self.commit_timeout_s = commit_timeout_s        # offsets.commit.timeout.ms
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Transactional commits waiting for their marker: producer id -> group -> offsets.
        self.pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    # ------------------------------------------------------------------ writes
    async def append(self, group_id: str, entries: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append records to the group's partition and wait until the ISR has them (acks=all,
        as Kafka's offsets.commit.required.acks=-1); raises the KafkaError a client gets."""
        partition = self.partition_for(group_id)
        batch = build_batch([Record(k, v) for k, v in entries])
        await self._replicated(partition, self.replicas.append(OFFSETS_TOPIC, partition, batch, -1),
                               self.commit_timeout_s)

    async def _replicated(self, partition: int, info: Any, timeout_s: float) -> None:
        code = await self.replicas.wait_replicated(OFFSETS_TOPIC, partition, info.last_offset + 1, timeout_s)
        raise_for_code(COORDINATOR_WRITE_ERRORS.get(code, code))

    async def commit(self, group_id: str, commits: dict[tuple[str, int], CommittedOffset]) -> None:
        await self.append(group_id, [
            (R.offset_key(group_id, t, p), R.offset_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp))
            for (t, p), c in commits.items()])
        self.offsets.setdefault(group_id, {}).update(commits)

    async def delete(self, group_id: str, tps: list[tuple[str, int]]) -> None:
        present = [tp for tp in tps if tp in self.offsets.get(group_id, {})]
        if not present:
            return
        await self.append(group_id, [(R.offset_key(group_id, t, p), None) for t, p in present])
        group = self.offsets.get(group_id, {})
        for tp in present:
            group.pop(tp, None)
        if not group:
            self.offsets.pop(group_id, None)

    async def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int,
                         commits: dict[tuple[str, int], CommittedOffset], timeout_s: float) -> None:
        """Append `commits` as a transactional batch of the producer (acks=all) and hold
        them until its marker; raises the append's KafkaError."""
        partition = self.partition_for(group_id)
        batch = build_batch([Record(R.offset_key(group_id, t, p),
                                    R.offset_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp))
                             for (t, p), c in commits.items()],
                            producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
        await self._replicated(partition, self.replicas.append(OFFSETS_TOPIC, partition, batch, -1,
                                                               ORIGIN_COORDINATOR), timeout_s)
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {}).update(commits)

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended on this offsets partition (its marker is there)."""
        groups = self.pending.get(producer_id)
        if not groups:
            return
        for group_id in [g for g in groups if self.partition_for(g) == partition]:
            offsets = groups.pop(group_id)
            if commit:
                self.offsets.setdefault(group_id, {}).update(offsets)
        if not groups:
            del self.pending[producer_id]

    def has_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        """A transactional commit of this partition's offset waits for its marker
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT, KIP-447)."""
        return any(tp in groups.get(group_id, {}) for groups in self.pending.values())

    def get(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return self.offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    # ------------------------------------------------------------------ loading
    async def load_partition(self, partition: int) -> dict[str, Any]:
        """Replay one partition of the offsets topic; returns the latest group metadata per
        group found there (None for a deleted group). Offsets land in `self.offsets`."""
        p = self.replicas.get(OFFSETS_TOPIC, partition)
        groups: dict[str, Any] = {}
        open_txns: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for chunk in replay_with_markers(p.log, LOAD_CHUNK_BYTES):
            await asyncio.sleep(0)   # one chunk at a time: other connections keep being served
            for item in chunk:
                if isinstance(item, TxnRecord):
                    open_txns.setdefault(item.producer_id, []).append((item.key, item.value))
                elif isinstance(item, TxnMarker):
                    for key, value in open_txns.pop(item.producer_id, []) if item.commit else ():
                        self._apply(key, value, groups)
                    open_txns.pop(item.producer_id, None)
                else:
                    self._apply(*item, groups)
        for pid, records in open_txns.items():          # still open: pending again
            for key, value in records:
                k = R.decode_key(key)
                if isinstance(k, R.OffsetKey) and value is not None:
                    v = R.decode_offset_value(value)
                    self.pending.setdefault(pid, {}).setdefault(k.group, {})[(k.topic, k.partition)] = \
                        CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
        for g in [g for g, o in self.offsets.items() if not o]:
            del self.offsets[g]
        return groups

    def _apply(self, key: bytes, value: bytes | None, groups: dict[str, Any]) -> None:
        k = R.decode_key(key)
        if isinstance(k, R.OffsetKey):
            if value is None:
                self.offsets.get(k.group, {}).pop((k.topic, k.partition), None)
            else:
                v = R.decode_offset_value(value)
                self.offsets.setdefault(k.group, {})[(k.topic, k.partition)] = CommittedOffset(
                    v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)
        elif isinstance(k, R.GroupKey):
            if value is None:
                groups[k.group] = None       # deleted group: the caller drops it
            else:
                groups[k.group] = R.decode_group_value(value)

    def unload_partition(self, partition: int) -> None:
        for g in [g for g in self.offsets if self.partition_for(g) == partition]:
            del self.offsets[g]
        for pid, groups in list(self.pending.items()):
            for g in [g for g in groups if self.partition_for(g) == partition]:
                del groups[g]
            if not groups:
                del self.pending[pid]
