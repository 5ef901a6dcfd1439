"""The group coordinator: Kafka's classic group protocol and committed offsets.

One coordinator per broker serves the groups whose `__consumer_offsets` partition this
broker leads. JoinGroup and SyncGroup park on futures that the rebalance completes; a
`tick()` every few hundred milliseconds expires sessions, finishes rebalances whose time is
up and expires old offsets. Everything runs on the broker's event loop: no locks, and every
state change happens between awaits.

Follows Kafka's GroupCoordinator: member ids assigned with MEMBER_ID_REQUIRED (KIP-394),
static membership (KIP-345: a known `group.instance.id` rejoining a Stable group with the
same protocols gets its assignment back without a rebalance), the initial rebalance delay,
generation fencing, and offset expiry of empty groups (KIP-211).
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable

from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore

from ..replication.replica_manager import ReplicaManager
from ..topic_admin import TopicAdmin
from .metadata_manager import GroupMetadataManager
from .offsets import CommittedOffset
from .settings import GroupSettings
from .state import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Group,
                    Member)

log = logging.getLogger(__name__)


class GroupError(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class GroupCoordinator:
    """Collaborators: the metadata store (does the offsets topic, or a committed topic,
    exist), TopicAdmin (creates the offsets topic on first use) and the ReplicaManager (the
    offsets topic's partitions, which this coordinator appends to and replays)."""

    def __init__(self, settings: GroupSettings, store: MetadataStore, topic_admin: TopicAdmin,
                 replicas: ReplicaManager, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)):
        self.metadata = GroupMetadataManager(settings, store, topic_admin, replicas, clock, wall_ms)
        self.metadata_store = store
        self.clock = clock
        self.wall_ms = wall_ms
        self.num_partitions = settings.num_partitions
        self.min_session_ms = settings.min_session_ms
        self.max_session_ms = settings.max_session_ms
        self.initial_delay_ms = settings.initial_delay_ms
        self.max_group_size = settings.max_group_size
        self.retention_check_s = settings.retention_check_ms / 1000.0
        self.metadata_max_bytes = settings.metadata_max_bytes
        self.commit_timeout_s = settings.commit_timeout_ms / 1000.0
        # The manager's own objects, never rebound: the protocol below reads them directly.
        self.store = self.metadata.store
        self.groups = self.metadata.groups
        self.partitions = self.metadata.partitions
        self.pending_deadlines: dict[tuple[str, str], float] = {}
        self._last_expiry = clock()

    # ================================================================== ownership
    def partition_for(self, group_id: str) -> int:
        return self.metadata.partition_for(group_id)

    async def ensure_offsets_topic(self) -> bool:
        return await self.metadata.ensure_offsets_topic()

    def check(self, group_id: str | None) -> int:
        """0 if this broker coordinates the group now, else Kafka's error code."""
        return self.metadata.check(group_id)

    def on_become_leader(self, partition: int) -> None:
        self.metadata.on_become_leader(partition)

    def on_resign(self, partition: int) -> None:
        """Another broker leads this offsets partition now: its groups are forgotten, and
        members still parked here are told NOT_COORDINATOR to find the new coordinator."""
        for group in self.metadata.unload_partition(partition):
            for m in group.members.values():
                m.answer_join(_join_error(Code.NOT_COORDINATOR, m.member_id))
                m.answer_sync(_sync_result(Code.NOT_COORDINATOR))

    async def expire_offsets(self) -> int:
        return await self.metadata.expire_offsets()

    # ================================================================== admin
    def describe(self, group_id: str) -> dict:
        return self.metadata.describe(group_id)

    def list_groups(self, states: set[str]) -> list[dict]:
        return self.metadata.list_groups(states)

    async def delete_group(self, group_id: str) -> int:
        return await self.metadata.delete_group(group_id)

    # ================================================================== JoinGroup
    async def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                   client_id: str, client_host: str, version: int) -> dict:
        err = self.check(group_id) if group_id else Code.INVALID_GROUP_ID
        if err:
            return _join_error(err, member_id)
        if not (self.min_session_ms <= session_ms <= self.max_session_ms):
            return _join_error(Code.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_ms < 0:
            rebalance_ms = session_ms            # JoinGroup v0 has no rebalance timeout
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _join_error(Code.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, state_timestamp=self.wall_ms())
        if group.is_(DEAD):
            return _join_error(Code.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return _join_error(Code.INCONSISTENT_GROUP_PROTOCOL, member_id)
        args = (protocol_type, protocols, session_ms, rebalance_ms, client_id, client_host, version)
        if not member_id:
            return await self._join_new(group, instance_id, *args)
        return await self._join_known(group, member_id, instance_id, *args)

    async def _join_new(self, group: Group, instance_id: str | None, protocol_type, protocols,
                        session_ms, rebalance_ms, client_id, client_host, version) -> dict:
        new_id = f"{instance_id or client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            return await self._rejoin_static(group, instance_id, new_id, protocol_type, protocols,
                                             session_ms, rebalance_ms, client_id, client_host, version)
        if len(group.members) >= self.max_group_size:
            return _join_error(Code.GROUP_MAX_SIZE_REACHED, "")
        if instance_id is None and version >= 4:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members.add(new_id)
            self.pending_deadlines[(group.group_id, new_id)] = self.clock() + session_ms / 1000.0
            return _join_error(Code.MEMBER_ID_REQUIRED, new_id)
        member = Member(new_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols, last_heartbeat=self.clock(), is_new=True)
        return await self._add_and_wait(group, member)

    async def _add_and_wait(self, group: Group, member: Member) -> dict:
        member.join_future = asyncio.get_running_loop().create_future()
        group.add(member)
        if group.is_(PREPARING_REBALANCE):
            self._extend_initial_delay(group)
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        return await member.join_future

    async def _rejoin_static(self, group: Group, instance_id: str, new_id: str, protocol_type, protocols,
                             session_ms, rebalance_ms, client_id, client_host, version) -> dict:
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        # The old incarnation is fenced: anything it still waits for fails.
        old.answer_join(_join_error(Code.FENCED_INSTANCE_ID, old_id))
        old.answer_sync(_sync_result(Code.FENCED_INSTANCE_ID))
        previous_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        member.last_heartbeat = self.clock()
        member.protocols = protocols
        if group.is_(STABLE) and group.select_protocol() == group.protocol:
            # KIP-345: no rebalance; the member fetches its assignment with SyncGroup.
            await self.metadata.persist_group(group)
            leader = group.leader_id == new_id
            skip = leader and version >= 9
            # Below v9 the old leader id is returned, so a restarted leader does not run a
            # throw-away assignment that a Stable group would never hand out (Kafka's rule).
            return {"error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                    "protocol_name": group.protocol, "leader": new_id if skip else previous_leader,
                    "member_id": new_id, "skip_assignment": skip,
                    "members": self._member_list(group) if skip else []}
        member.join_future = asyncio.get_running_loop().create_future()
        if group.is_(PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined")
        return await member.join_future

    async def _join_known(self, group: Group, member_id: str, instance_id: str | None, protocol_type,
                          protocols, session_ms, rebalance_ms, client_id, client_host, version) -> dict:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.pending_deadlines.pop((group.group_id, member_id), None)
            member = Member(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                            protocol_type, protocols, last_heartbeat=self.clock(), is_new=True)
            return await self._add_and_wait(group, member)
        invalid = self._validate_member(group, member_id, instance_id)
        if invalid:
            return _join_error(invalid, member_id)
        member = group.members[member_id]
        member.last_heartbeat = self.clock()
        loop = asyncio.get_running_loop()
        if group.is_(PREPARING_REBALANCE):
            member.protocols = protocols
            member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
            if member.join_future is None or member.join_future.done():
                member.join_future = loop.create_future()
            fut = member.join_future
            self._maybe_complete_join(group)
            return await fut
        if group.is_(COMPLETING_REBALANCE) and member.matches(protocols):
            return self._join_response(group, member)
        if group.is_(STABLE) and member.matches(protocols) and group.leader_id != member_id:
            return self._join_response(group, member, include_members=False)
        # Stable with new protocols or a leader rejoining, or CompletingRebalance with new
        # protocols: a new rebalance.
        member.protocols = protocols
        member.join_future = loop.create_future()
        fut = member.join_future
        self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await fut

    def _validate_member(self, group: Group, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateCurrentMember: with an instance id, the static mapping decides
        (an old incarnation is FENCED_INSTANCE_ID, so it stops instead of rejoining);
        without one, the member id must be in the group."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return Code.UNKNOWN_MEMBER_ID
            return Code.FENCED_INSTANCE_ID if current != member_id else 0
        return 0 if group.has(member_id) else Code.UNKNOWN_MEMBER_ID

    def _member_list(self, group: Group) -> list[dict]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata_for(group.protocol)} for m in group.members.values()
                if group.protocol in m.protocol_names()]

    def _join_response(self, group: Group, member: Member, include_members: bool = True) -> dict:
        leader = group.leader_id == member.member_id
        return {"error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol, "leader": group.leader_id or "",
                "member_id": member.member_id, "skip_assignment": False,
                "members": self._member_list(group) if leader and include_members else []}

    # ================================================================== rebalance
    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        now = self.clock()
        if group.is_(COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                m.answer_sync(_sync_result(Code.REBALANCE_IN_PROGRESS))
        max_rebalance = max((m.rebalance_timeout_ms for m in group.members.values()), default=0) / 1000.0
        if group.is_(EMPTY) and self.initial_delay_ms > 0:
            group.initial_delay_remaining = now + self.initial_delay_ms / 1000.0
            group.join_deadline = now + max(max_rebalance, self.initial_delay_ms / 1000.0)
        else:
            group.initial_delay_remaining = 0.0
            group.join_deadline = now + max_rebalance
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation, reason)
        group.transition(PREPARING_REBALANCE, self.wall_ms())
        self._maybe_complete_join(group)

    def _extend_initial_delay(self, group: Group) -> None:
        # Kafka's InitialDelayedJoin: each newcomer during the delay buys another delay,
        # up to the rebalance timeout.
        if group.initial_delay_remaining and self.initial_delay_ms > 0:
            now = self.clock()
            assert group.join_deadline is not None
            group.initial_delay_remaining = min(now + self.initial_delay_ms / 1000.0, group.join_deadline)

    def _maybe_complete_join(self, group: Group) -> None:
        if not group.is_(PREPARING_REBALANCE):
            return
        now = self.clock()
        if group.initial_delay_remaining and now < group.initial_delay_remaining:
            return
        if group.all_joined() or (group.join_deadline is not None and now >= group.join_deadline):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        # Dynamic members that did not rejoin in time leave; static members stay (KIP-345).
        for m in [m for m in group.members.values() if not m.awaiting_join and not m.is_static]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, m.member_id)
            group.remove(m.member_id)
        group.pending_members.clear()
        joined = [m for m in group.members.values() if m.awaiting_join]
        if group.members and not joined:
            # Only static members are left and none rejoined: Kafka postpones completion by
            # another rebalance timeout, until they rejoin or their sessions expire.
            log.warning("group %s: no member rejoined; waiting another rebalance timeout", group.group_id)
            group.join_deadline = self.clock() + max(
                m.rebalance_timeout_ms for m in group.members.values()) / 1000.0
            return
        group.generation += 1
        group.join_deadline = None
        group.initial_delay_remaining = 0.0
        if not group.members:
            group.protocol = None
            group.transition(EMPTY, self.wall_ms())
            self.metadata.persist_in_background(group)
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            return
        # Static members that did not rejoin stay until their session expires (KIP-345).
        group.protocol = group.select_protocol()
        if group.leader_id not in group.members or not group.members[group.leader_id].awaiting_join:
            group.leader_id = joined[0].member_id     # Kafka's maybeElectNewJoinedLeader
        group.transition(COMPLETING_REBALANCE, self.wall_ms())
        now = self.clock()
        for m in joined:
            m.is_new = False
            m.last_heartbeat = now
            m.answer_join(self._join_response(group, m))
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation, len(group.members), group.protocol, group.leader_id)

    # ================================================================== SyncGroup
    async def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> dict:
        err = self.check(group_id)
        if err == Code.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator: send the member back to
            # JoinGroup (older clients do not expect LOAD_IN_PROGRESS here), as Kafka does.
            return _sync_result(Code.REBALANCE_IN_PROGRESS)
        if err:
            return _sync_result(err)
        group = self.groups.get(group_id)
        if group is None:
            return _sync_result(Code.UNKNOWN_MEMBER_ID)
        invalid = self._validate_member(group, member_id, instance_id)
        if invalid:
            return _sync_result(invalid)
        if generation != group.generation:
            return _sync_result(Code.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol):
            return _sync_result(Code.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        member.last_heartbeat = self.clock()
        if group.is_(PREPARING_REBALANCE):
            return _sync_result(Code.REBALANCE_IN_PROGRESS)
        if group.is_(STABLE):
            return self._sync_ok(group, member)
        if not group.is_(COMPLETING_REBALANCE):
            return _sync_result(Code.UNKNOWN_MEMBER_ID)
        fut = member.sync_future = asyncio.get_running_loop().create_future()
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            try:
                await self.metadata.persist_group(group)
            except KafkaError as e:
                if group.is_(COMPLETING_REBALANCE) and group.generation == generation:
                    for m in group.members.values():
                        m.assignment = b""
                    self._prepare_rebalance(group, f"storing the assignment failed: {e}")
                return _sync_result(Code.COORDINATOR_NOT_AVAILABLE)
            if group.is_(COMPLETING_REBALANCE) and group.generation == generation:
                group.transition(STABLE, self.wall_ms())
                now = self.clock()
                for m in group.members.values():
                    m.last_heartbeat = now     # everyone's session restarts with the assignment
                    m.answer_sync(self._sync_ok(group, m))
        return await fut

    def _sync_ok(self, group: Group, member: Member) -> dict:
        return {"error_code": 0, "protocol_type": group.protocol_type, "protocol_name": group.protocol,
                "assignment": member.assignment}

    # ================================================================== Heartbeat / Leave
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        err = self.check(group_id)
        if err == Code.COORDINATOR_LOAD_IN_PROGRESS:
            return 0    # Kafka answers blindly while loading: the member keeps its session
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return Code.UNKNOWN_MEMBER_ID if group is None else Code.COORDINATOR_NOT_AVAILABLE
        invalid = self._validate_member(group, member_id, instance_id)
        if invalid:
            return invalid
        if generation != group.generation:
            return Code.ILLEGAL_GENERATION
        group.members[member_id].last_heartbeat = self.clock()
        if group.is_(PREPARING_REBALANCE):
            return Code.REBALANCE_IN_PROGRESS
        if group.is_(EMPTY):
            return Code.UNKNOWN_MEMBER_ID
        return 0

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) for [(member_id, group_instance_id)]."""
        err = self.check(group_id)
        if err:
            return err, [err] * len(leaving)
        group = self.groups.get(group_id)
        if group is not None and group.is_(DEAD):
            return Code.COORDINATOR_NOT_AVAILABLE, [Code.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        if group is None:
            return 0, [Code.UNKNOWN_MEMBER_ID] * len(leaving)
        results = []
        removed = False
        removed_pending = False
        for member_id, instance_id in leaving:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    results.append(Code.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    results.append(Code.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.pending_deadlines.pop((group_id, member_id), None)
                results.append(0)
                removed_pending = True      # never joined: no rebalance for it
                continue
            if not group.has(member_id):
                results.append(Code.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member_id, "left the group")
            removed = True
            results.append(0)
        if removed:
            self._after_removal(group)
        elif removed_pending:
            self._maybe_complete_join(group)
        return 0, results

    def _remove_member(self, group: Group, member_id: str, why: str) -> None:
        m = group.remove(member_id)
        if m is None:
            return
        log.info("group %s: member %s %s", group.group_id, member_id, why)
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(_join_error(Code.UNKNOWN_MEMBER_ID, member_id) if fut is m.join_future
                               else _sync_result(Code.UNKNOWN_MEMBER_ID))

    def _after_removal(self, group: Group) -> None:
        if group.is_(STABLE) or group.is_(COMPLETING_REBALANCE):
            self._prepare_rebalance(group, "a member left")
        elif group.is_(PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # ================================================================== timers
    def tick(self) -> None:
        now = self.clock()
        for (group_id, member_id), deadline in list(self.pending_deadlines.items()):
            if now >= deadline:
                del self.pending_deadlines[(group_id, member_id)]
                g = self.groups.get(group_id)
                if g is not None and member_id in g.pending_members:
                    g.pending_members.discard(member_id)
                    self._maybe_complete_join(g)
        for group in list(self.groups.values()):
            expired = [m.member_id for m in group.members.values()
                       if not m.awaiting_join and not m.awaiting_sync
                       and now > m.last_heartbeat + m.session_timeout_ms / 1000.0]
            for member_id in expired:
                self._remove_member(group, member_id, "session expired")
            if expired:
                self._after_removal(group)
            elif group.is_(PREPARING_REBALANCE):
                self._maybe_complete_join(group)
        if now - self._last_expiry >= self.retention_check_s:
            self._last_expiry = now
            asyncio.ensure_future(self.expire_offsets())

    # ================================================================== offsets
    async def commit_offsets(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                             commits: dict[tuple[str, int], tuple[int, int, str | None]]) -> dict[tuple[str, int], int]:
        """Per-partition error codes for an OffsetCommit."""
        results, accepted = self._accept_commits(group_id, generation, member_id, instance_id, commits)
        if accepted:
            try:
                await self.store.commit(group_id, accepted)
            except KafkaError as e:
                for tp in accepted:
                    results[tp] = e.code
        return results

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation: int, member_id: str, instance_id: str | None,
                                 commits: dict[tuple[str, int], tuple[int, int, str | None]]
                                 ) -> dict[tuple[str, int], int]:
        """Per-partition error codes for a TxnOffsetCommit: checked as an OffsetCommit, then
        held until the producer's transaction ends (OffsetStore.txn_commit)."""
        results, accepted = self._accept_commits(group_id, generation, member_id, instance_id, commits)
        if accepted:
            try:
                await self.store.txn_commit(group_id, producer_id, producer_epoch, accepted,
                                            self.commit_timeout_s)
            except KafkaError as e:
                for tp in accepted:
                    results[tp] = e.code
        return results

    def has_pending_txn_commit(self, group_id: str, tp: tuple[str, int]) -> bool:
        """A transactional commit of this offset waits for its transaction's marker."""
        return self.store.has_pending(group_id, tp)

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction's marker reached an offsets partition led here."""
        self.store.complete_txn(offsets_partition, producer_id, commit)

    def _accept_commits(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        commits: dict[tuple[str, int], tuple[int, int, str | None]]
                        ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], CommittedOffset]]:
        """(per-partition error codes, the commits to write) after the group and member
        checks of an offset commit."""
        err = self.check(group_id)
        if err:
            return {tp: err for tp in commits}, {}
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # A member of a generation this coordinator never saw: an older one.
                return {tp: Code.ILLEGAL_GENERATION for tp in commits}, {}
            # Not using Kafka for group management: the group exists to hold offsets.
            group = self.groups[group_id] = Group(group_id, state_timestamp=self.wall_ms())
        if group.is_(DEAD):
            return {tp: Code.COORDINATOR_NOT_AVAILABLE for tp in commits}, {}
        if generation >= 0 or member_id or instance_id is not None:
            invalid = self._validate_member(group, member_id, instance_id) or (
                Code.ILLEGAL_GENERATION if generation != group.generation else 0)
            if invalid:
                return {tp: invalid for tp in commits}, {}
            if group.is_(COMPLETING_REBALANCE):
                return {tp: Code.REBALANCE_IN_PROGRESS for tp in commits}, {}
            group.members[member_id].last_heartbeat = self.clock()
        elif not group.is_(EMPTY):
            # When the group has members, only members can commit offsets.
            return {tp: Code.UNKNOWN_MEMBER_ID for tp in commits}, {}
        results: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        now = self.wall_ms()
        topics = self.metadata_store.topics()
        for (topic, partition), (offset, epoch, metadata) in commits.items():
            meta = topics.get(topic)
            if meta is None or partition not in meta.partitions:
                results[(topic, partition)] = Code.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and len(metadata.encode("utf-16-le")) // 2 > self.metadata_max_bytes:
                # Kafka measures String.length(): UTF-16 code units, not bytes.
                results[(topic, partition)] = Code.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[(topic, partition)] = CommittedOffset(offset, epoch, metadata or "", now)
                results[(topic, partition)] = 0
        return results, accepted

    def fetch_offsets(self, group_id: str, tps: list[tuple[str, int]] | None) -> tuple[int, dict]:
        err = self.check(group_id)
        if err:
            return err, {}
        offsets = self.store.get(group_id)
        if tps is None:
            return 0, dict(offsets)
        return 0, {tp: offsets.get(tp) for tp in tps}

    async def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> tuple[int, dict]:
        err = self.check(group_id)
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return Code.GROUP_ID_NOT_FOUND, {}
        subscribed = group.subscribed_topics() if not group.is_(EMPTY) else set()
        if subscribed is None:
            return Code.NON_EMPTY_GROUP, {}
        results = {tp: (Code.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else 0) for tp in tps}
        await self.store.delete(group_id, [tp for tp, e in results.items() if e == 0])
        await self.metadata.drop_if_empty(group)
        return 0, results

def _join_error(code: int, member_id: str) -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "skip_assignment": False, "members": []}


def _sync_result(code: int) -> dict:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}
