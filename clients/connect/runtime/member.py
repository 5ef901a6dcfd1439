"""A distributed Connect worker's membership of its group (Kafka's WorkerGroupMember and
WorkerCoordinator): protocol type "connect", incremental cooperative rebalancing.

The worker joins offering, most preferred first, "sessioned" (v2), "compatible" (v1) and
"default" (v0, eager) -- as many as `connect.protocol` allows -- each with its REST url,
its config offset and (v1+) what it runs. The leader assigns with
`IncrementalCooperativeAssignor` (or Kafka's eager assignor when the group chose
"default") from its config snapshot, first reading the config topic up to the newest
offset a member reported (`catch_up`); if it cannot, everyone gets CONFIG_MISMATCH.

`ensure_active()` is the herder's one entry point: when a rejoin is needed it joins and
returns this member's assignment of the new generation (units to start, units to stop),
having applied the cooperative rule to `.assignment` (what the member runs:
previous - revoked + new). The member rejoins on its own only inside ensure_active():

  - a revocation asks for a rejoin (`need_rejoin`, `changed`): the herder stops the
    revoked units, then calls ensure_active() again, so they are never run twice;
  - an assignment with `delay_ms` > 0 asks for a rejoin when the delay ends (the leader
    is holding a departed worker's units back until then);
  - CONFIG_MISMATCH: reads the config topic to the assignment's offset and rejoins;
  - an assignment newer than the local config: reads up to it; if `catch_up` cannot,
    leaves the group, waits `unsync_backoff_ms` and rejoins (Kafka's worker.unsync.*).
  - eager generations: before rejoining, ensure_active() first returns an assignment
    revoking everything the member runs (Kafka's onJoinPrepare), and joins on the next
    call.

So on return the caller's config has reached `assignment.config_offset`. Herder rule,
after every ensure_active(): stop what runs and is not in `.assignment` (that includes
what the returned assignment revokes), then start what `.assignment` holds and does not
run yet. Reconciling against `.assignment` (as Kafka's herder does) also covers a call
cancelled mid-way or an assignment whose units could not be started. A membership lost
(session expired: `lost`) keeps `.assignment`: the rejoin reports it and the leader
revokes whatever another worker got meanwhile (duplicates are revoked from everyone).
Single event loop, not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Sequence

from clients.aio.client import KafkaClient
from clients.aio.errors import KafkaConnectionError
from clients.aio.membership import GroupMembership
from clients.protocol.errors import Code, for_code

from .assignor import IncrementalCooperativeAssignor, eager_assign
from .connect_protocol import (EAGER, PROTOCOL_TYPE, PROTOCOL_VERSIONS, ConnectAssignment,
                               TaskId, WorkerMetadata, decode_assignment, decode_metadata,
                               encode_assignment, encode_metadata, protocols_for)

__all__ = ["WorkerGroupMember"]

log = logging.getLogger("strom.connect.member")

ConfigSnapshot = Callable[[], tuple[int, dict[str, int]]]


class WorkerGroupMember(GroupMembership):
    """One Connect worker in `group_id`; see the module docstring.

    `config_snapshot()` is the worker's config state: (config topic offset,
    {connector: task count} for the connectors whose configs exist). `catch_up(offset)`
    reads the config topic up to `offset` and says whether it got there; it must give up
    within a bounded time (Kafka's worker.sync.timeout.ms) rather than hang a rebalance."""

    protocol_type = PROTOCOL_TYPE
    owner = "worker"

    def __init__(self, client: KafkaClient, group_id: str, url: str, *,
                 session_timeout_ms: int = 10000, rebalance_timeout_ms: int = 60000,
                 heartbeat_interval_ms: int = 3000,
                 scheduled_rebalance_max_delay_ms: int = 300000,
                 protocol: str = "sessioned",
                 config_snapshot: ConfigSnapshot,
                 catch_up: Callable[[int], Awaitable[bool]],
                 unsync_backoff_ms: int = 300000):
        super().__init__(client, group_id, session_timeout_ms=session_timeout_ms,
                         rebalance_timeout_ms=rebalance_timeout_ms,
                         heartbeat_interval_ms=heartbeat_interval_ms)
        self.url = url
        self.protocols = protocols_for(protocol)
        self.leader_url = ""
        self.last_completed_generation = -1
        # What this member runs (connectors, tasks), with the header of the latest assignment.
        self.assignment = ConnectAssignment()
        self._assigned = False            # an assignment was received (else allocation null)
        self._config_snapshot = config_snapshot
        self._catch_up = catch_up
        self._unsync_backoff = unsync_backoff_ms / 1000.0
        self._assignor = IncrementalCooperativeAssignor(scheduled_rebalance_max_delay_ms)
        self._urls: dict[str, str] = {}                  # leader: member id -> url
        self._delay_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ state

    @property
    def connectors(self) -> list[str]:
        return list(self.assignment.connectors)

    @property
    def tasks(self) -> list[TaskId]:
        return list(self.assignment.tasks)

    def owner_url(self, connector: str, task: int | None = None) -> str | None:
        """Leader only: the url of the worker running a connector (task None) or one of
        its tasks after the last rebalance; None if unknown or not the leader."""
        if not self.is_leader:
            return None
        for member, (connectors, tasks) in self._assignor.cluster_assignment.items():
            if (connector in connectors) if task is None else ((connector, task) in tasks):
                return self._urls.get(member)
        return None

    def _header(self, revoked_connectors: Sequence[str] = (),
                revoked_tasks: Sequence[TaskId] = ()) -> ConnectAssignment:
        """The latest assignment's header, starting nothing, revoking what is given."""
        a = self.assignment
        return ConnectAssignment(a.error, a.leader, a.leader_url, a.config_offset,
                                 revoked_connectors=list(revoked_connectors),
                                 revoked_tasks=list(revoked_tasks), version=a.version)

    # ------------------------------------------------------------------ rebalancing

    async def ensure_active(self) -> ConnectAssignment:
        """Join if needed; the assignment of the new generation (see the module
        docstring). Without a rejoin to do, an assignment with no changes."""
        while True:
            if self._closed:
                raise KafkaConnectionError("worker closed: not joining its group")
            if not self.need_rejoin and self.generation >= 0:
                return self._header()
            if self.protocol_name == EAGER and (self.assignment.connectors
                                                or self.assignment.tasks):
                # Eager: everything stops before the member rejoins.
                revoked = self._header(revoked_connectors=self.connectors,
                                       revoked_tasks=self.tasks)
                self.assignment = self._header()
                return revoked
            data = await self._join()
            try:
                a = decode_assignment(data)
            except Exception as e:      # an empty or unreadable payload: ask again
                log.warning("group %s: unreadable assignment (%s): rejoining", self.group_id, e)
                await self._backoff()
                self.request_rejoin("unreadable assignment")
                continue
            self.last_completed_generation = self.generation
            self.leader_url = a.leader_url
            self._apply(a)
            if a.failed:
                log.info("group %s: assignment failed (error %d): reading the config topic "
                         "to offset %d", self.group_id, a.error, a.config_offset)
                if not await self._read_config(a.config_offset):
                    await self._backoff()
                self.request_rejoin("the leader's config was behind (CONFIG_MISMATCH)")
                continue
            if a.config_offset > self._config_snapshot()[0] and \
                    not await self._read_config(a.config_offset):
                log.warning("group %s: cannot read the config topic to offset %d: leaving "
                            "the group for %.1fs", self.group_id, a.config_offset,
                            self._unsync_backoff)
                await self.leave("out of sync with the config topic")
                await asyncio.sleep(self._unsync_backoff)
                self.request_rejoin("rejoining after falling behind the config topic")
                continue
            return a

    def _apply(self, a: ConnectAssignment) -> None:
        """The cooperative rule (or, eager, the new set), the rejoin a revocation needs and
        the rejoin a delay schedules."""
        prev = self.assignment
        if self.protocol_name == EAGER:
            connectors, tasks = set(a.connectors), set(a.tasks)
        else:
            connectors = (set(prev.connectors) - set(a.revoked_connectors)) | set(a.connectors)
            tasks = (set(prev.tasks) - set(a.revoked_tasks)) | set(a.tasks)
        self.assignment = ConnectAssignment(a.error, a.leader, a.leader_url, a.config_offset,
                                            sorted(connectors), sorted(tasks), version=a.version)
        self._assigned = True
        log.info("group %s: generation %d: start %s %s, stop %s %s, delay %d ms; runs %s %s",
                 self.group_id, self.generation, a.connectors, a.tasks, a.revoked_connectors,
                 a.revoked_tasks, a.delay_ms, self.assignment.connectors, self.assignment.tasks)
        self._cancel_delay()
        if a.delay_ms > 0:
            self._delay_timer = asyncio.get_running_loop().call_later(
                a.delay_ms / 1000.0, self.request_rejoin, "the scheduled rebalance delay ended")
        if self.protocol_name != EAGER and (a.revoked_connectors or a.revoked_tasks):
            self.request_rejoin("units were revoked: the next rebalance reassigns them")

    def _cancel_delay(self) -> None:
        if self._delay_timer is not None:
            self._delay_timer.cancel()
            self._delay_timer = None

    async def _read_config(self, offset: int) -> bool:
        try:
            return bool(await self._catch_up(offset))
        except Exception as e:
            log.warning("group %s: reading the config topic to %d failed: %s",
                        self.group_id, offset, e)
            return False

    # ------------------------------------------------------------------ protocol hooks

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        offset = self._config_snapshot()[0]
        allocation = self.assignment if self._assigned else None
        return [(name, encode_metadata(WorkerMetadata(self.url, offset, allocation,
                                                      PROTOCOL_VERSIONS[name])))
                for name in self.protocols]

    async def _assign(self, protocol_name: str,
                      members: list[tuple[str, bytes]]) -> dict[str, bytes]:
        version = PROTOCOL_VERSIONS.get(protocol_name)
        if version is None:
            raise for_code(Code.INCONSISTENT_GROUP_PROTOCOL)(
                f"group {self.group_id!r} chose {protocol_name!r}, not a Connect protocol")
        metas: dict[str, WorkerMetadata] = {}
        for member_id, data in members:
            try:
                metas[member_id] = decode_metadata(data)
            except Exception as e:      # a member we cannot read runs nothing we know of
                log.warning("group %s: member %s sent unreadable metadata: %s",
                            self.group_id, member_id, e)
                metas[member_id] = WorkerMetadata("", -1)
        offset, counts = self._config_snapshot()
        newest = max(m.config_offset for m in metas.values())
        if offset < newest and await self._read_config(newest):
            offset, counts = self._config_snapshot()
        self._urls = {m: meta.url for m, meta in metas.items()}
        if version == 0:
            result = eager_assign(self.member_id, metas, offset, counts)
            self._assignor.cluster_assignment = {
                m: (list(a.connectors), list(a.tasks)) for m, a in result.items()}
        else:
            now_ms = int(asyncio.get_running_loop().time() * 1000)
            result = self._assignor.assign(self.member_id, metas, offset, counts, now_ms,
                                           self.generation, self.last_completed_generation,
                                           version)
        return {m: encode_assignment(a) for m, a in result.items()}

    # ------------------------------------------------------------------ leaving

    async def close(self, leave: bool = True) -> None:
        """Stop heartbeating, cancel a scheduled rejoin and (with `leave`) leave."""
        self._cancel_delay()
        await super().close(leave)
