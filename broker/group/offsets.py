"""The `__consumer_offsets` store: committed offsets in memory, every change appended to the
group's partition of the internal topic first, and everything read back from that log when
this broker takes a partition over.

The partition of group G is abs(javaHash(G)) % offsets.topic.num.partitions, exactly as
Kafka computes it, so a group keeps its partition across brokers and implementations.
"""
from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from clients.protocol.records import Record, build_batch, iter_batches

from ..replication.replica_manager import ReplicaManager
from . import records as R

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 1 << 20


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % num_partitions


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int       # wall clock, ms


class OffsetStore:
    """Committed offsets of every group this broker coordinates; appends go to the log first."""

    def __init__(self, replicas: ReplicaManager, num_partitions: int):
        self.replicas = replicas
        self.num_partitions = num_partitions
        self.offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    # ------------------------------------------------------------------ writes
    async def append(self, group_id: str, entries: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append records to the group's partition; raises the append's KafkaError."""
        batch = build_batch([Record(k, v) for k, v in entries])
        self.replicas.append(OFFSETS_TOPIC, self.partition_for(group_id), batch)

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
        for chunk in self._replay(p.log):
            await asyncio.sleep(0)   # one chunk at a time: other connections keep being served
            for key, value in chunk:
                self._apply(key, value, groups)
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

    def _replay(self, plog: Any) -> Iterator[list[tuple[bytes, bytes | None]]]:
        """The log's keyed records, in chunks of at most LOAD_CHUNK_BYTES of batches."""
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            info = plog.read(offset, LOAD_CHUNK_BYTES, None, True)
            if not info.size:
                break
            data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
            last = offset
            chunk: list[tuple[bytes, bytes | None]] = []
            for batch in iter_batches(data):
                if not batch.is_control:
                    chunk.extend((rec.key, rec.value) for rec in batch.records
                                 if rec.offset >= offset and rec.key is not None)
                last = batch.last_offset + 1
            yield chunk
            if last <= offset:
                break
            offset = last

    def unload_partition(self, partition: int) -> None:
        for g in [g for g in self.offsets if self.partition_for(g) == partition]:
            del self.offsets[g]
