"""Membership of one consumer in one consumer group: Kafka's classic group protocol with
the consumer protocol (protocol type "consumer").

`GroupMember` is a `GroupMembership` (clients.aio.membership: JoinGroup, SyncGroup,
heartbeats, LeaveGroup, coordinator discovery) whose embedded protocol is the consumer's:

  - `join(topics, owned)`: joins offering one `Subscription` per configured assignor; the
    leader decodes every member's `Subscription`, runs the assignor the group chose on the
    cluster's partition counts and sends everyone's `Assignment`. Retries until it has an
    assignment.
  - heartbeats as the membership's; when poll() has not been called for
    max.poll.interval.ms the member leaves the group (its partitions are lost, as in
    Kafka's Java client).
  - `commit(offsets)` (OffsetCommit) and `committed(tps)` (OffsetFetch) with retries of
    coordinator errors.

The member never calls user code: the consumer reads `need_rejoin` / `lost` in poll() and
runs the rebalance listener itself. Single event loop, not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Mapping, Sequence

from clients.config import ClientConfig
from clients.protocol.errors import Code, for_code
from clients.types import OffsetAndMetadata, TopicPartition

from .assignors import (COOPERATIVE, PROTOCOL_TYPE, Assignment, Assignor, Subscription,
                        decode_assignment, decode_subscription, encode_assignment,
                        encode_subscription, rebalance_protocol)
from .client import KafkaClient
from .errors import KafkaConnectionError
from .membership import CONNECTION_ERRORS as _CONNECTION_ERRORS
from .membership import COORDINATOR_ERRORS as _COORDINATOR_ERRORS
from .membership import GroupMembership

__all__ = ["GroupMember"]

log = logging.getLogger("strom.client.group")


class GroupMember(GroupMembership):
    """One consumer's membership of `group.id`; see the module docstring."""

    protocol_type = PROTOCOL_TYPE
    owner = "consumer"

    def __init__(self, client: KafkaClient, config: ClientConfig, assignors: Sequence[Assignor]):
        if not assignors:
            raise ValueError("partition.assignment.strategy names no assignor")
        super().__init__(client, config["group.id"],
                         session_timeout_ms=config["session.timeout.ms"],
                         rebalance_timeout_ms=config["max.poll.interval.ms"],
                         heartbeat_interval_ms=config["heartbeat.interval.ms"],
                         instance_id=config["group.instance.id"])
        self.max_poll_interval: float = config.ms("max.poll.interval.ms")
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)   # EAGER or COOPERATIVE
        self.last_poll = asyncio.get_running_loop().time()
        self._assigned_counts: dict[str, int] = {}   # leader: what the assignment was built on
        self._topics: Sequence[str] = ()
        self._owned: Sequence[TopicPartition] = ()

    # ------------------------------------------------------------------ state

    @property
    def cooperative(self) -> bool:
        return self.protocol == COOPERATIVE

    def metadata_changed(self) -> bool:
        """Leader only: did a topic the assignment was built on change its partition count?"""
        if not self.is_leader or self.need_rejoin:
            return False
        cluster = self.client.cluster
        # A topic missing from one answer (an error, a leader election) is not a change.
        return any(0 < len(cluster.partitions_for(t)) != n
                   for t, n in self._assigned_counts.items())

    # ------------------------------------------------------------------ join + sync

    async def join(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> Assignment:
        """Join (or rejoin) the group with `topics` and the partitions this member still
        owns (cooperative), and return this member's assignment of the new generation."""
        self._topics, self._owned = topics, owned
        a = decode_assignment(await self._join())
        log.info("group %s: generation %d assigns %s", self.group_id, self.generation,
                 ", ".join(map(str, sorted(a.partitions))) or "nothing")
        return a

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        out = []
        for a in self.assignors:
            sub = Subscription(sorted(set(self._topics)), a.subscription_user_data(self.generation),
                               sorted(self._owned), self.generation)
            out.append((a.name, encode_subscription(sub)))
        return out

    async def _assign(self, protocol_name: str,
                      members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        assignor = next((a for a in self.assignors if a.name == protocol_name), None)
        if assignor is None:
            raise for_code(Code.INCONSISTENT_GROUP_PROTOCOL)(
                f"group {self.group_id!r} chose {protocol_name!r}, not configured here")
        subs: dict[str, Subscription] = {}
        for member_id, metadata in members:
            try:
                subs[member_id] = decode_subscription(metadata)
            except Exception as e:          # a member we cannot read gets nothing
                log.warning("group %s: member %s sent unreadable metadata: %s",
                            self.group_id, member_id, e)
                subs[member_id] = Subscription([])
        topics = sorted({t for s in subs.values() for t in s.topics})
        self.client.metadata.add_topics(topics)
        if topics:
            try:
                await self.client.metadata.refresh(topics)
            except KafkaConnectionError as e:
                log.warning("group %s: metadata for the assignment failed: %s", self.group_id, e)
        cluster = self.client.cluster
        counts = {t: len(cluster.partitions_for(t)) for t in topics}
        self._assigned_counts = counts
        result = assignor.assign(counts, subs)
        return {m: encode_assignment(Assignment(tps)) for m, tps in result.items()}

    # ------------------------------------------------------------------ heartbeats

    async def _before_heartbeat(self) -> bool:
        loop = asyncio.get_running_loop()
        if loop.time() - self.last_poll > self.max_poll_interval:
            log.warning("group %s: poll() not called for %.1fs (max.poll.interval.ms): "
                        "leaving the group", self.group_id, loop.time() - self.last_poll)
            await self.leave("consumer poll timeout expired")
            self.lost = True
            self.request_rejoin("poll timeout expired")
            return False
        return True

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     timeout: float, as_member: bool = True) -> None:
        """OffsetCommit, retrying coordinator and connection errors until `timeout`.
        `as_member`: send generation and member id (subscribe mode); otherwise the group
        only stores offsets (assign mode). Raises the first partition error (e.g.
        RebalanceInProgressError, IllegalGenerationError after being fenced); an error
        changes the membership only if it is still the one the commit was sent for."""
        if not offsets:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        by_topic: dict[str, list[dict]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        # The membership the offsets belong to. A retry must not land in a later generation:
        # the partitions may have moved to another member, whose newer commits this one
        # would overwrite with older offsets.
        generation, member_id = self.generation, self.member_id
        while True:
            if as_member and self._joining:
                # Between JoinGroup and SyncGroup the coordinator refuses it, and before
                # that it races the join: the rebalance commits before it revokes (as in
                # Java). Checked before every attempt: a retry may find a join started.
                raise for_code(Code.REBALANCE_IN_PROGRESS)(
                    f"OffsetCommit of group {self.group_id!r} not sent: the member is rejoining")
            if as_member and (self.generation, self.member_id) != (generation, member_id):
                raise for_code(Code.REBALANCE_IN_PROGRESS)(
                    f"OffsetCommit of group {self.group_id!r} abandoned: the group rebalanced "
                    f"(generation {generation} -> {self.generation}) while it was retried")
            body = {"group_id": self.group_id,
                    "generation_id_or_member_epoch": generation if as_member else -1,
                    "member_id": member_id if as_member else "",
                    "group_instance_id": self.instance_id if as_member else None,
                    "retention_time_ms": -1,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
            try:
                node = await self._coordinator()
                resp = await self.client.request(node, "OffsetCommit", body,
                                                 timeout=max(0.05, deadline - loop.time()))
                codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            except _CONNECTION_ERRORS:
                self._coordinator_lost()
                codes = {Code.COORDINATOR_NOT_AVAILABLE}
            if not codes:
                return
            code = min(codes)
            if code in _COORDINATOR_ERRORS or for_code(code).retriable:
                if code in _COORDINATOR_ERRORS:
                    self._coordinator_lost()
                if loop.time() + self.client.retry_backoff < deadline:
                    await self._backoff()
                    continue
            elif as_member and (self._joining or (self.generation, self.member_id)
                                != (generation, member_id)):
                pass    # the answer is about a membership a (re)join has replaced
            elif as_member and code == Code.REBALANCE_IN_PROGRESS:
                self.request_rejoin("a commit found the group rebalancing")
            elif as_member and code in (Code.ILLEGAL_GENERATION, Code.UNKNOWN_MEMBER_ID,
                                        Code.FENCED_INSTANCE_ID):
                self._reset(f"commit: {for_code(code).name}",
                            forget_member=code != Code.ILLEGAL_GENERATION)
            raise for_code(code)(f"OffsetCommit of group {self.group_id!r} failed")

    async def committed(self, tps: Sequence[TopicPartition],
                        timeout: float) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch (require_stable): the group's committed offsets, None where none."""
        tps = sorted(set(tps))
        if not tps:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        wanted = [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        while True:
            code = 0
            try:
                node = await self._coordinator()
                conn = await self.client.connection(node)
                version = conn.version_for("OffsetFetch")
                if version >= 8:
                    body = {"groups": [{"group_id": self.group_id, "topics": wanted}],
                            "require_stable": True}
                else:
                    body = {"group_id": self.group_id, "topics": wanted, "require_stable": True}
                resp = await conn.request("OffsetFetch", body, version=version,
                                          timeout=max(0.05, deadline - loop.time()))
                if version >= 8:
                    g = resp.groups[0]
                    code, found = g.error_code, g.topics
                else:
                    code, found = resp.get("error_code", 0), resp.topics
                if not code:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in tps}
                    for t in found:
                        for p in t.partitions:
                            if p.error_code:
                                code = p.error_code
                            elif p.committed_offset >= 0:
                                out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                                    p.committed_offset, p.metadata or "", p.committed_leader_epoch)
                    if not code:
                        return out
            except _CONNECTION_ERRORS:
                code = Code.COORDINATOR_NOT_AVAILABLE
            if code in _COORDINATOR_ERRORS:
                self._coordinator_lost()
            if not (code in _COORDINATOR_ERRORS or for_code(code).retriable) or \
                    loop.time() + self.client.retry_backoff >= deadline:
                raise for_code(code)(f"OffsetFetch of group {self.group_id!r} failed")
            await self._backoff()
