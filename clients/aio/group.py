"""Membership of one consumer in one consumer group: Kafka's classic group protocol.

`GroupMember` speaks to the group coordinator (found with FindCoordinator through
`KafkaClient.coordinator`, forgotten and found again on NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a lost connection):

  - `join(topics, owned)`: JoinGroup (newest version both sides speak; MEMBER_ID_REQUIRED
    answered by rejoining with the given id, UNKNOWN_MEMBER_ID by rejoining without one),
    then SyncGroup; the leader (member_id == leader) decodes every member's
    `Subscription`, runs the assignor the group chose on the cluster's partition counts
    and sends everyone's `Assignment`. Retries until it has an assignment.
  - a heartbeat task every heartbeat.interval.ms while a member; REBALANCE_IN_PROGRESS
    sets `need_rejoin`, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID also mark the member's
    partitions `lost`. When poll() has not been called for max.poll.interval.ms the
    member leaves the group (its partitions are lost, as in Kafka's Java client).
  - `leave()`: LeaveGroup; `commit(offsets)` (OffsetCommit) and `committed(tps)`
    (OffsetFetch) with retries of coordinator errors.

The member never calls user code: the consumer reads `need_rejoin` / `lost` in poll() and
runs the rebalance listener itself. Single event loop, not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping, Sequence

from clients.config import ClientConfig
from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.schema import Struct
from clients.types import OffsetAndMetadata, TopicPartition

from .assignors import (COOPERATIVE, PROTOCOL_TYPE, Assignment, Assignor, Subscription,
                        decode_assignment, decode_subscription, encode_assignment,
                        encode_subscription, rebalance_protocol)
from .client import KafkaClient
from .errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["GroupMember"]

log = logging.getLogger("strom.client.group")

# Answers meaning "ask the coordinator again, maybe elsewhere".
_COORDINATOR_ERRORS = {Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE,
                       Code.COORDINATOR_LOAD_IN_PROGRESS, Code.REQUEST_TIMED_OUT,
                       Code.NETWORK_EXCEPTION}
_CONNECTION_ERRORS = (KafkaConnectionError, KafkaTimeoutError)


class GroupMember:
    """One consumer's membership of `group.id`; see the module docstring."""

    def __init__(self, client: KafkaClient, config: ClientConfig, assignors: Sequence[Assignor]):
        if not assignors:
            raise ValueError("partition.assignment.strategy names no assignor")
        self.client = client
        self.group_id: str = config["group.id"]
        self.instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval: float = config.ms("heartbeat.interval.ms")
        self.max_poll_interval: float = config.ms("max.poll.interval.ms")
        self.assignors = list(assignors)
        self.protocol = rebalance_protocol(self.assignors)   # EAGER or COOPERATIVE
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.need_rejoin = True
        self.lost = False             # membership lost: owned partitions are lost, not revoked
        self.rejoin_reason = "initial join"
        self.last_poll = asyncio.get_running_loop().time()
        self.changed = asyncio.Event()     # set whenever need_rejoin becomes True
        self._joining = False
        self._assigned_counts: dict[str, int] = {}   # leader: what the assignment was built on
        self._members: list[Struct] = []              # leader: JoinGroup's member list
        self._skip_assignment = False
        self._hb_task: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    @property
    def cooperative(self) -> bool:
        return self.protocol == COOPERATIVE

    def request_rejoin(self, reason: str) -> None:
        if not self.need_rejoin:
            log.info("group %s: rejoining (%s)", self.group_id, reason)
        self.need_rejoin = True
        self.rejoin_reason = reason
        self.changed.set()

    def _reset(self, reason: str, forget_member: bool) -> None:
        """Out of the group (fenced, unknown, timed out): partitions are lost."""
        self.generation = -1
        if forget_member:
            self.member_id = ""
        self.lost = True
        self.request_rejoin(reason)

    def metadata_changed(self) -> bool:
        """Leader only: did a topic the assignment was built on change its partition count?"""
        if not self.is_leader or self.need_rejoin:
            return False
        cluster = self.client.cluster
        # A topic missing from one answer (an error, a leader election) is not a change.
        return any(0 < len(cluster.partitions_for(t)) != n
                   for t, n in self._assigned_counts.items())

    # ------------------------------------------------------------------ requests

    async def _coordinator(self) -> int:
        return await self.client.coordinator(self.group_id, 0)

    def _coordinator_lost(self) -> None:
        self.client.forget_coordinator(self.group_id, 0)

    async def _backoff(self) -> None:
        await asyncio.sleep(self.client.retry_backoff)

    # ------------------------------------------------------------------ join + sync

    async def join(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> Assignment:
        """Join (or rejoin) the group with `topics` and the partitions this member still
        owns (cooperative), and return this member's assignment of the new generation."""
        self._joining = True
        # A rejoin requested while this join is under way (a new subscription) is kept.
        self.need_rejoin = False
        self.changed.clear()
        try:
            while not self._closed:
                try:
                    if not await self._join_group(topics, owned):
                        continue
                    assignment = await self._sync_group()
                except (KafkaError, *_CONNECTION_ERRORS) as e:
                    if not getattr(e, "retriable", False):
                        raise
                    log.info("group %s: coordinator unreachable: %s", self.group_id, e)
                    self._coordinator_lost()
                    await self._backoff()
                    continue
                if assignment is None:
                    continue
                self.lost = False
                self._start_heartbeat()
                return assignment
            raise KafkaConnectionError("consumer closed while joining its group")
        except BaseException:
            self.need_rejoin = True             # failed or cancelled: join again next time
            raise
        finally:
            self._joining = False

    def _protocols(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> list[dict]:
        out = []
        for a in self.assignors:
            sub = Subscription(sorted(set(topics)), a.subscription_user_data(self.generation),
                               sorted(owned), self.generation)
            out.append({"name": a.name, "metadata": encode_subscription(sub)})
        return out

    async def _join_group(self, topics: Sequence[str], owned: Sequence[TopicPartition]) -> bool:
        node = await self._coordinator()
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": self.instance_id, "protocol_type": PROTOCOL_TYPE,
                "protocols": self._protocols(topics, owned), "reason": self.rejoin_reason}
        # The coordinator parks JoinGroup until the rebalance completes (up to the
        # rebalance timeout), so the request may take that long.
        resp = await self.client.request(node, "JoinGroup", body,
                                         timeout=self.rebalance_timeout_ms / 1000.0 + 5.0)
        code = resp.error_code
        if code == 0:
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.protocol_name = resp.protocol_name
            self.leader_id = resp.leader
            self._members = list(resp.members)
            self._skip_assignment = bool(resp.get("skip_assignment"))
            log.info("group %s: joined generation %d as %s (leader %s, protocol %s)",
                     self.group_id, self.generation, self.member_id, self.leader_id,
                     self.protocol_name)
            return True
        if code == Code.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id            # KIP-394: join again with this id
            return False
        if code == Code.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
            return False
        if code in _COORDINATOR_ERRORS:
            self._coordinator_lost()
            await self._backoff()
            return False
        if code in (Code.REBALANCE_IN_PROGRESS, Code.ILLEGAL_GENERATION):
            await self._backoff()
            return False
        raise for_code(code)(f"JoinGroup of group {self.group_id!r}")

    async def _sync_group(self) -> Assignment | None:
        assignments: list[dict] = []
        if self.is_leader and not self._skip_assignment:
            assignments = await self._leader_assign(self._members)
        node = await self._coordinator()
        body = {"group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.instance_id,
                "protocol_type": PROTOCOL_TYPE, "protocol_name": self.protocol_name,
                "assignments": assignments}
        resp = await self.client.request(node, "SyncGroup", body,
                                         timeout=self.rebalance_timeout_ms / 1000.0 + 5.0)
        code = resp.error_code
        if code == 0:
            a = decode_assignment(resp.assignment)
            log.info("group %s: generation %d assigns %s", self.group_id, self.generation,
                     ", ".join(map(str, sorted(a.partitions))) or "nothing")
            return a
        if code == Code.REBALANCE_IN_PROGRESS:
            return None
        if code in (Code.UNKNOWN_MEMBER_ID, Code.ILLEGAL_GENERATION):
            self.generation = -1
            if code == Code.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return None
        if code in _COORDINATOR_ERRORS:
            self._coordinator_lost()
            await self._backoff()
            return None
        raise for_code(code)(f"SyncGroup of group {self.group_id!r}")

    async def _leader_assign(self, members: list[Struct]) -> list[dict[str, Any]]:
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is None:
            raise for_code(Code.INCONSISTENT_GROUP_PROTOCOL)(
                f"group {self.group_id!r} chose {self.protocol_name!r}, not configured here")
        subs: dict[str, Subscription] = {}
        for m in members:
            try:
                subs[m.member_id] = decode_subscription(bytes(m.metadata))
            except Exception as e:          # a member we cannot read gets nothing
                log.warning("group %s: member %s sent unreadable metadata: %s",
                            self.group_id, m.member_id, e)
                subs[m.member_id] = Subscription([])
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
        return [{"member_id": m, "assignment": encode_assignment(Assignment(tps))}
                for m, tps in result.items()]

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"strom-heartbeat-{self.group_id}")

    async def _heartbeat_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            await asyncio.sleep(self.heartbeat_interval)
            if self._joining or self.generation < 0 or not self.member_id:
                continue
            if loop.time() - self.last_poll > self.max_poll_interval:
                log.warning("group %s: poll() not called for %.1fs (max.poll.interval.ms): "
                            "leaving the group", self.group_id, loop.time() - self.last_poll)
                await self.leave("consumer poll timeout expired")
                self.lost = True
                self.request_rejoin("poll timeout expired")
                continue
            try:
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("group %s: heartbeat failed: %s", self.group_id, e)

    async def _heartbeat(self) -> None:
        generation, member_id = self.generation, self.member_id
        try:
            node = await self._coordinator()
            resp = await self.client.request(
                node, "Heartbeat", {"group_id": self.group_id, "generation_id": generation,
                                    "member_id": member_id, "group_instance_id": self.instance_id})
        except _CONNECTION_ERRORS:
            self._coordinator_lost()
            return
        code = resp.error_code
        if code == 0 or self._joining or generation != self.generation:
            return                          # a (re)join overtook this heartbeat
        if code == Code.REBALANCE_IN_PROGRESS:
            self.request_rejoin("the group is rebalancing")
        elif code == Code.ILLEGAL_GENERATION:
            self._reset("heartbeat: ILLEGAL_GENERATION", forget_member=False)
        elif code in (Code.UNKNOWN_MEMBER_ID, Code.FENCED_INSTANCE_ID):
            self._reset(f"heartbeat: {for_code(code).name}", forget_member=True)
        elif code in _COORDINATOR_ERRORS:
            self._coordinator_lost()
        else:
            log.warning("group %s: heartbeat answered %s", self.group_id, for_code(code).name)

    # ------------------------------------------------------------------ leaving

    async def leave(self, reason: str = "the consumer is leaving") -> None:
        """LeaveGroup (not for static members, whose partitions wait for them, KIP-345)."""
        member_id = self.member_id
        self.member_id = ""
        self.generation = -1
        if not member_id or self.instance_id is not None:
            return
        try:
            node = await self._coordinator()
            conn = await self.client.connection(node)
            version = conn.version_for("LeaveGroup")
            body: dict[str, Any] = {"group_id": self.group_id, "member_id": member_id}
            if version >= 3:
                body["members"] = [{"member_id": member_id, "group_instance_id": None,
                                    "reason": reason}]
            resp = await conn.request("LeaveGroup", body, version=version)
            if resp.error_code:
                log.info("group %s: LeaveGroup answered %s", self.group_id,
                         for_code(resp.error_code).name)
        except (KafkaError, *_CONNECTION_ERRORS) as e:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, e)

    async def close(self, leave: bool = True) -> None:
        self._closed = True
        if self._hb_task is not None:
            self._hb_task.cancel()
            try:
                await self._hb_task
            except (asyncio.CancelledError, Exception):
                pass
            self._hb_task = None
        if leave:
            await self.leave()

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
