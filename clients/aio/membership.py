"""Membership of one member in one group: Kafka's classic group protocol, generic over what
the members exchange (the embedded protocol: "consumer" for consumers, "connect" for Kafka
Connect workers, ...).

`GroupMembership` speaks to the group coordinator (found with FindCoordinator through
`KafkaClient.coordinator`, forgotten and found again on NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or a lost connection):

  - `_join()`: JoinGroup (newest version both sides speak; MEMBER_ID_REQUIRED answered by
    rejoining with the given id, UNKNOWN_MEMBER_ID by rejoining without one) offering
    `_join_protocols()`, then SyncGroup; the leader (member_id == leader) sends what
    `_assign(protocol, members)` computed from every member's metadata. Retries until it
    has this member's assignment bytes, which it returns for the subclass to decode.
  - a heartbeat task every heartbeat interval while a member; REBALANCE_IN_PROGRESS sets
    `need_rejoin` (and `changed`); ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
    FENCED_INSTANCE_ID also set `lost` (the member was out of the group: the group may
    have given its assignment to others). `_before_heartbeat()` may veto a heartbeat.
  - `leave()`: LeaveGroup (not for static members); `close(leave)`.

Subclasses supply `protocol_type` and the hooks `_join_protocols`, `_assign` (leader only)
and optionally `_before_heartbeat`. The membership never calls user code: its owner reads
`need_rejoin` / `lost` / `changed` and drives the rejoin. Single event loop, not
thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.schema import Struct

from .client import KafkaClient
from .errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["GroupMembership", "COORDINATOR_ERRORS", "CONNECTION_ERRORS"]

log = logging.getLogger("strom.client.group")

# Answers meaning "ask the coordinator again, maybe elsewhere".
COORDINATOR_ERRORS = {Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE,
                      Code.COORDINATOR_LOAD_IN_PROGRESS, Code.REQUEST_TIMED_OUT,
                      Code.NETWORK_EXCEPTION}
CONNECTION_ERRORS = (KafkaConnectionError, KafkaTimeoutError)


class GroupMembership:
    """One member of `group_id`; see the module docstring.

    `heartbeat_interval_ms` paces the heartbeats; `rebalance_timeout_ms` is how long the
    coordinator waits for members to rejoin (and so how long a JoinGroup may take)."""

    protocol_type = ""
    # Who owns this membership, for messages ("consumer closed while joining its group").
    owner = "member"

    def __init__(self, client: KafkaClient, group_id: str, *, session_timeout_ms: int,
                 rebalance_timeout_ms: int, heartbeat_interval_ms: float,
                 instance_id: str | None = None):
        self.client = client
        self.group_id = group_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval: float = heartbeat_interval_ms / 1000.0
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.need_rejoin = True
        self.lost = False             # membership lost: the assignment is lost, not revoked
        self.rejoin_reason = "initial join"
        self.changed = asyncio.Event()     # set whenever need_rejoin becomes True
        self._joining = False
        self._members: list[Struct] = []              # leader: JoinGroup's member list
        self._skip_assignment = False
        self._hb_task: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ hooks

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        """(name, metadata) of each protocol this member supports, most preferred first."""
        raise NotImplementedError

    async def _assign(self, protocol_name: str,
                      members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        """Leader only: {member_id: assignment} from every member's (id, metadata) for the
        protocol the group chose. A member left out gets an empty assignment."""
        raise NotImplementedError

    async def _before_heartbeat(self) -> bool:
        """Called before each heartbeat while a member; False skips this heartbeat."""
        return True

    # ------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    def request_rejoin(self, reason: str) -> None:
        if not self.need_rejoin:
            log.info("group %s: rejoining (%s)", self.group_id, reason)
        self.need_rejoin = True
        self.rejoin_reason = reason
        self.changed.set()

    def _reset(self, reason: str, forget_member: bool) -> None:
        """Out of the group (fenced, unknown, timed out): the assignment is lost."""
        self.generation = -1
        if forget_member:
            self.member_id = ""
        self.lost = True
        self.request_rejoin(reason)

    # ------------------------------------------------------------------ requests

    async def _coordinator(self) -> int:
        return await self.client.coordinator(self.group_id, 0)

    def _coordinator_lost(self) -> None:
        self.client.forget_coordinator(self.group_id, 0)

    async def _backoff(self) -> None:
        await asyncio.sleep(self.client.retry_backoff)

    # ------------------------------------------------------------------ join + sync

    async def _join(self) -> bytes:
        """Join (or rejoin) the group and return this member's assignment of the new
        generation (bytes, possibly empty). Retries until it has one; raises what is not
        retriable, and KafkaConnectionError once closed."""
        self._joining = True
        # A rejoin requested while this join is under way (a new subscription) is kept.
        self.need_rejoin = False
        self.changed.clear()
        try:
            while not self._closed:
                try:
                    if not await self._join_group():
                        continue
                    assignment = await self._sync_group()
                except (KafkaError, *CONNECTION_ERRORS) as e:
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
            raise KafkaConnectionError(f"{self.owner} closed while joining its group")
        except BaseException:
            self.need_rejoin = True             # failed or cancelled: join again next time
            raise
        finally:
            self._joining = False

    async def _join_group(self) -> bool:
        node = await self._coordinator()
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": self.instance_id, "protocol_type": self.protocol_type,
                "protocols": [{"name": n, "metadata": m} for n, m in self._join_protocols()],
                "reason": self.rejoin_reason}
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
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost()
            await self._backoff()
            return False
        if code in (Code.REBALANCE_IN_PROGRESS, Code.ILLEGAL_GENERATION):
            await self._backoff()
            return False
        raise for_code(code)(f"JoinGroup of group {self.group_id!r}")

    async def _sync_group(self) -> bytes | None:
        assignments: list[dict[str, Any]] = []
        if self.is_leader and not self._skip_assignment:
            assert self.protocol_name is not None
            members = [(m.member_id, bytes(m.metadata)) for m in self._members]
            result = await self._assign(self.protocol_name, members)
            assignments = [{"member_id": m, "assignment": a} for m, a in result.items()]
        node = await self._coordinator()
        body = {"group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.instance_id,
                "protocol_type": self.protocol_type, "protocol_name": self.protocol_name,
                "assignments": assignments}
        resp = await self.client.request(node, "SyncGroup", body,
                                         timeout=self.rebalance_timeout_ms / 1000.0 + 5.0)
        code = resp.error_code
        if code == 0:
            return bytes(resp.assignment or b"")
        if code == Code.REBALANCE_IN_PROGRESS:
            return None
        if code in (Code.UNKNOWN_MEMBER_ID, Code.ILLEGAL_GENERATION):
            self.generation = -1
            if code == Code.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return None
        if code in COORDINATOR_ERRORS:
            self._coordinator_lost()
            await self._backoff()
            return None
        raise for_code(code)(f"SyncGroup of group {self.group_id!r}")

    # ------------------------------------------------------------------ heartbeats

    def _start_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"strom-heartbeat-{self.group_id}")

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat_interval)
            if self._joining or self.generation < 0 or not self.member_id:
                continue
            try:
                if not await self._before_heartbeat():
                    continue
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
        except CONNECTION_ERRORS:
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
        elif code in COORDINATOR_ERRORS:
            self._coordinator_lost()
        else:
            log.warning("group %s: heartbeat answered %s", self.group_id, for_code(code).name)

    async def _stop_heartbeat(self) -> None:
        task, self._hb_task = self._hb_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    # ------------------------------------------------------------------ leaving

    async def leave(self, reason: str | None = None) -> None:
        """LeaveGroup (not for static members, whose assignment waits for them, KIP-345)."""
        reason = reason or f"the {self.owner} is leaving"
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
        except (KafkaError, *CONNECTION_ERRORS) as e:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, e)

    async def close(self, leave: bool = True) -> None:
        """Stop heartbeating and (with `leave`) leave the group. A join in progress ends
        with KafkaConnectionError."""
        self._closed = True
        await self._stop_heartbeat()
        if leave:
            await self.leave()
