"""Kafka's GroupMetadataManager: the groups and committed offsets of the `__consumer_offsets`
partitions this broker leads. It creates the offsets topic on first use, loads a partition
when this broker starts to lead it, forgets it when another broker does, stores group
metadata and tombstones, and expires offsets (KIP-211, KIP-496). The membership protocol
(join, sync, heartbeat, leave) is the GroupCoordinator's, which owns one manager.

Runs on the broker's event loop: no locks; every state change happens between awaits.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from clients.protocol.errors import Code
from zkcoord.store import MetadataStore

from ..replication.replica_manager import ReplicaManager
from ..topic_admin import TopicAdmin
from . import records as R
from .offsets import OFFSETS_TOPIC, OffsetStore
from .settings import GroupSettings
from .state import DEAD, EMPTY, STABLE, Group, Member

# Logs under the coordinator's name, as before the two were split: operators filter on it.
log = logging.getLogger("broker.group.coordinator")

LOADING, LOADED = "loading", "loaded"


class GroupMetadataManager:
    def __init__(self, settings: GroupSettings, store: MetadataStore, topic_admin: TopicAdmin,
                 replicas: ReplicaManager, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)):
        self.metadata_store = store
        self.topic_admin = topic_admin
        self.clock = clock
        self.wall_ms = wall_ms
        self.num_partitions = settings.num_partitions
        self.replication_factor = settings.replication_factor
        self.segment_bytes = settings.segment_bytes
        self.retention_ms = settings.retention_ms
        self.store = OffsetStore(replicas, self.num_partitions, settings.commit_timeout_ms / 1000.0)
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, str] = {}          # offsets partition -> LOADING / LOADED

    # ================================================================== ownership and loading
    def partition_for(self, group_id: str) -> int:
        return self.store.partition_for(group_id)

    async def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` on first use, as Kafka does; False if it cannot be."""
        return await self.topic_admin.ensure_internal_topic(
            OFFSETS_TOPIC, self.num_partitions, self.replication_factor,
            {"cleanup.policy": "compact", "compression.type": "producer",
             "segment.bytes": str(self.segment_bytes)}, "offsets.topic.replication.factor")

    def on_become_leader(self, partition: int) -> None:
        if self.partitions.get(partition) is None:
            self.partitions[partition] = LOADING
            asyncio.ensure_future(self._load(partition))

    def unload_partition(self, partition: int) -> list[Group]:
        """Another broker leads this offsets partition now: forget its groups and offsets;
        returns the groups forgotten (their parked members must be told)."""
        if self.partitions.pop(partition, None) is None:
            return []
        gone = [self.groups.pop(g) for g in [g for g in self.groups if self.partition_for(g) == partition]]
        self.store.unload_partition(partition)
        return gone

    async def _load(self, partition: int) -> None:
        try:
            metadata = await self.store.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
            self.partitions.pop(partition, None)
            return
        now = self.clock()
        for group_id, value in metadata.items():
            if value is None:
                continue
            self.groups[group_id] = self._restore_group(group_id, value, now)
        for group_id in self.store.offsets:
            if self.partition_for(group_id) == partition and group_id not in self.groups:
                g = Group(group_id)
                g.state_timestamp = self.wall_ms()
                self.groups[group_id] = g
        self.partitions[partition] = LOADED
        log.info("loaded %s-%d", OFFSETS_TOPIC, partition)

    def _restore_group(self, group_id: str, v: Any, now: float) -> Group:
        g = Group(group_id, generation=v.generation, protocol_type=v.protocol_type or None,
                  protocol=v.protocol, leader_id=v.leader)
        g.state_timestamp = v.current_state_timestamp if v.current_state_timestamp >= 0 else self.wall_ms()
        for m in v.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout, m.session_timeout, v.protocol_type,
                            [(v.protocol, m.subscription)] if v.protocol else [], m.assignment,
                            last_heartbeat=now)
            g.members[m.member_id] = member
            if member.group_instance_id is not None:
                g.static_members[member.group_instance_id] = member.member_id
        g.state = STABLE if g.members else EMPTY
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members), None)
        return g

    def check(self, group_id: str | None) -> int:
        """0 if this broker coordinates the group now, else Kafka's error code."""
        if not group_id:
            return Code.INVALID_GROUP_ID
        status = self.partitions.get(self.partition_for(group_id))
        if status == LOADING:
            return Code.COORDINATOR_LOAD_IN_PROGRESS
        if status is None:
            if self.metadata_store.topic(OFFSETS_TOPIC) is None:
                return Code.COORDINATOR_NOT_AVAILABLE
            return Code.NOT_COORDINATOR
        return 0

    # ================================================================== expiry
    async def expire_offsets(self) -> int:
        """KIP-211: offsets of a group expire once it has been empty for the retention time;
        offsets of a group without a protocol (simple commits) expire by commit time."""
        now = self.wall_ms()
        count = 0
        for group_id, group in list(self.groups.items()):
            if self.check(group_id):
                continue
            offsets = self.store.get(group_id)
            subscribed = group.subscribed_topics() if group.is_(STABLE) else None
            if group.is_(EMPTY) and group.protocol_type is None:
                expired = [tp for tp, c in offsets.items() if c.commit_timestamp + self.retention_ms <= now]
            elif group.is_(EMPTY):
                expired = list(offsets) if group.state_timestamp + self.retention_ms <= now else []
            elif subscribed is not None:
                # KIP-496: a stable consumer group drops offsets of topics it no longer reads.
                expired = [tp for tp, c in offsets.items()
                           if tp[0] not in subscribed and c.commit_timestamp + self.retention_ms <= now]
            else:
                expired = []
            if expired:
                await self.store.delete(group_id, expired)
                count += len(expired)
            await self.drop_if_empty(group)
        return count

    async def drop_if_empty(self, group: Group) -> None:
        """An Empty group without offsets is Dead, and its metadata is tombstoned."""
        if group.is_(EMPTY) and not self.store.has_offsets(group.group_id):
            group.transition(DEAD, self.wall_ms())
            self.groups.pop(group.group_id, None)
            await self.store.append(group.group_id, [(R.group_key(group.group_id), None)])

    # ================================================================== persistence
    async def persist_group(self, group: Group) -> None:
        await self.store.append(group.group_id, [(R.group_key(group.group_id), self._group_value(group))])

    def persist_in_background(self, group: Group) -> None:
        """Store the group as it is NOW (the value is built before the task runs)."""
        entry = [(R.group_key(group.group_id), self._group_value(group))]

        async def store() -> None:
            try:
                await self.store.append(group.group_id, entry)
            except Exception:
                log.exception("group %s: storing group metadata failed", group.group_id)
        asyncio.ensure_future(store())

    def _group_value(self, group: Group) -> bytes:
        value = {
            "protocol_type": group.protocol_type or "", "generation": group.generation,
            "protocol": group.protocol, "leader": group.leader_id if group.members else None,
            "current_state_timestamp": int(group.state_timestamp),
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "rebalance_timeout": m.rebalance_timeout_ms, "session_timeout": m.session_timeout_ms,
                         "subscription": m.metadata_for(group.protocol) if group.protocol else b"",
                         "assignment": m.assignment} for m in group.members.values()],
        }
        return R.group_value(value)

    # ================================================================== admin
    def describe(self, group_id: str) -> dict:
        err = self.check(group_id)
        if err:
            return {"error_code": err, "group_id": group_id, "group_state": "", "protocol_type": "",
                    "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": 0, "group_id": group_id, "group_state": DEAD, "protocol_type": "",
                    "protocol_data": "", "members": []}
        stable = group.is_(STABLE)
        return {"error_code": 0, "group_id": group_id, "group_state": group.state,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol or "") if stable else "",
                "members": group.summary_members(with_data=stable)}

    def list_groups(self, states: set[str]) -> list[dict]:
        wanted = {s.lower() for s in states}
        return [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state}
                for g in self.groups.values()
                if not self.check(g.group_id) and (not wanted or g.state.lower() in wanted)]

    async def delete_group(self, group_id: str) -> int:
        err = self.check(group_id)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return Code.GROUP_ID_NOT_FOUND
        if not group.is_(EMPTY):
            return Code.NON_EMPTY_GROUP
        tps = list(self.store.get(group_id))
        entries = [(R.offset_key(group_id, t, p), None) for t, p in tps] + [(R.group_key(group_id), None)]
        await self.store.append(group_id, entries)
        self.store.offsets.pop(group_id, None)
        group.transition(DEAD, self.wall_ms())
        del self.groups[group_id]
        return 0
