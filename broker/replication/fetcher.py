"""Follower side of replication: one fetch loop per leader broker.

Before a partition's first fetch in a new leader epoch the follower asks the leader where
its own latest epoch ends (OffsetForLeaderEpoch) and truncates to that point, so a replica
that held records the new leader never had cannot diverge (KIP-101, KIP-279). Then it
fetches with its replica id from its log end, appends the leader's batches as they are
(offsets kept), and takes the leader's high watermark.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from clients.aio.connection import BrokerConnection
from clients.aio.errors import KafkaConnectionError
from clients.aio.fetch_session import INITIAL_EPOCH, NO_SESSION, next_epoch
from clients.aio.pool import ConnectionPool
from clients.aio.security import PLAINTEXT, ClientSecurity
from clients.protocol.errors import Code, KafkaError, for_code
from zkcoord.store import BrokerInfo

from ..log.errors import LogDirFullError
from ..stats import BrokerTopicStats
from .partition import Partition
from .throttle import ReplicationThrottle

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

FETCH_VERSION = 11
EPOCH_VERSION = 3
RETRY_BACKOFF_S = 0.2
# A follower whose disk is full tries its append again after this.
DISK_FULL_BACKOFF_S = 1.0
# While the follower throttle holds every partition of a leader back: look again after this.
THROTTLED_PAUSE_S = 0.1


@dataclass
class FetchState:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    delayed_until: float = 0.0
    # Whether the last answer left nothing to fetch below the leader's high watermark:
    # the follower throttle's "in sync" (Kafka's isReplicaInSync, by fetch lag; this
    # broker's own view of the ISR changes only with a LeaderAndIsr).
    caught_up: bool = False


class LeaderFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, manager: "ReplicaFetcherManager", leader_id: int):
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        # The incremental fetch session with this leader (KIP-227): its id (0: none yet),
        # the epoch the next request carries, and per partition in it the (fetch offset,
        # leader epoch) the leader last heard from us.
        self.session_id = NO_SESSION
        self.session_epoch = INITIAL_EPOCH
        self._in_session: dict[tuple[str, int], tuple[int, int]] = {}
        self._changed = asyncio.Event()
        self.task = asyncio.ensure_future(self._run())

    def add(self, p: Partition) -> None:
        self.partitions[(p.topic, p.index)] = FetchState(p, p.leader_epoch)
        self._changed.set()

    def remove(self, p: Partition) -> None:
        self.partitions.pop((p.topic, p.index), None)

    async def _run(self) -> None:
        m = self.manager
        loop = asyncio.get_running_loop()
        while True:
            try:
                if not self.partitions:
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                node = m.address_of(self.leader_id)
                if node is None:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                m.pool.set_address(self.leader_id, node.host, node.port)
                conn = await m.pool.get(self.leader_id)
                states = [s for s in self.partitions.values() if s.delayed_until <= loop.time()]
                if not states:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                to_truncate = [s for s in states if s.needs_truncation]
                if to_truncate:
                    await self._truncate(conn, to_truncate)
                    continue
                await self._fetch(conn, states)
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, OSError, asyncio.TimeoutError) as e:
                log.info("fetcher for leader %d: %s; retrying", self.leader_id, e)
                self._restart_session()
                await asyncio.sleep(RETRY_BACKOFF_S)
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                self._restart_session()
                await asyncio.sleep(1.0)

    async def _truncate(self, conn: BrokerConnection, states: list[FetchState]) -> None:
        body = {"replica_id": self.manager.broker_id, "topics": _group_by_topic(
            states, lambda s: {"partition": s.partition.index, "current_leader_epoch": s.leader_epoch,
                               "leader_epoch": s.partition.log.latest_epoch})}
        resp = await conn.request("OffsetForLeaderEpoch", body, version=EPOCH_VERSION)
        for t in resp.topics:
            for r in t.partitions:
                s = self.partitions.get((t.topic, r.partition))
                if s is None:
                    continue
                p = s.partition
                if r.error_code:
                    self._delay(s, r.error_code)
                    continue
                plog = p.log
                if plog.latest_epoch < 0 or r.end_offset < 0:
                    # No epoch history to compare: the high watermark is what is safe to keep.
                    target = plog.high_watermark
                else:
                    # KIP-279: end of the leader's answer epoch in OUR log, bounded by the leader's.
                    own_end = plog.end_offset_for_epoch(r.leader_epoch)[1] if r.leader_epoch >= 0 else r.end_offset
                    target = min(r.end_offset, own_end if own_end >= 0 else r.end_offset)
                if target < plog.log_end_offset:
                    log.info("%s-%d: truncating %d -> %d to follow leader %d at epoch %d", p.topic, p.index,
                             plog.log_end_offset, target, self.leader_id, s.leader_epoch)
                    plog.truncate_to(target)
                s.needs_truncation = False

    def _restart_session(self) -> None:
        """Open a new session with the next fetch (the old one, if any, is closed by it)."""
        self.session_epoch = INITIAL_EPOCH
        self._in_session.clear()

    def _session_request(self, states: list[FetchState]) -> tuple[list[FetchState], list[tuple[str, int]]]:
        """The partitions this fetch must name and the ones to forget. A full fetch (no
        session yet) names them all; an incremental one only those whose fetch offset or
        leader epoch the leader has not heard, and forgets those we stopped fetching."""
        if self.session_epoch == INITIAL_EPOCH:
            self._in_session.clear()
            return states, []
        named = [s for s in states
                 if self._in_session.get((s.partition.topic, s.partition.index))
                 != (s.partition.log.log_end_offset, s.leader_epoch)]
        fetching = {(s.partition.topic, s.partition.index) for s in states}
        forgotten = [k for k in self._in_session if k not in fetching]
        return named, forgotten

    async def _fetch(self, conn: BrokerConnection, states: list[FetchState]) -> None:
        cfg = self.manager.config
        throttled = [s for s in states if self._throttled(s)]
        granted, cap = 0, cfg["max_bytes"]
        if throttled:
            # follower.replication.throttled.rate: what these replicas may fetch is reserved
            # up front and split between them; with nothing left they sit this fetch out.
            assert self.manager.throttle is not None
            granted = self.manager.throttle.reserve(cfg["max_bytes"] * len(throttled))
            if granted == 0:
                states = [s for s in states if s not in throttled]
                throttled = []
                if not states:
                    await asyncio.sleep(THROTTLED_PAUSE_S)
                    return
            else:
                cap = max(1, granted // len(throttled))
        used = 0
        try:
            used = await self._fetch_some(conn, states, throttled, cap)
        finally:
            if granted and self.manager.throttle is not None:
                self.manager.throttle.settle(granted, used)

    async def _fetch_some(self, conn: BrokerConnection, states: list[FetchState], throttled: list[FetchState],
                          throttled_max_bytes: int) -> int:
        """One fetch of `states`, the `throttled` ones held to `throttled_max_bytes` each;
        the bytes appended for those."""
        cfg = self.manager.config
        named, forgotten = self._session_request(states)
        # A throttled partition's size limit changes fetch to fetch: always name it.
        named += [s for s in throttled if s not in named]
        limits = {id(s): throttled_max_bytes for s in throttled}
        epoch = self.session_epoch
        body = {
            "replica_id": self.manager.broker_id, "max_wait_ms": cfg["wait_ms"], "min_bytes": 1,
            "max_bytes": cfg["response_max_bytes"], "isolation_level": 0,
            "session_id": self.session_id, "session_epoch": epoch,
            "topics": _group_by_topic(named, lambda s: {
                "partition": s.partition.index, "current_leader_epoch": s.leader_epoch,
                "fetch_offset": s.partition.log.log_end_offset, "log_start_offset": -1,
                "partition_max_bytes": limits.get(id(s), cfg["max_bytes"])}),
            "forgotten_topics_data": _group_forgotten(forgotten), "rack_id": "",
        }
        sent = {(s.partition.topic, s.partition.index): (s.partition.log.log_end_offset, s.leader_epoch)
                for s in named}
        resp = await conn.request("Fetch", body, version=FETCH_VERSION,
                                  timeout=cfg["wait_ms"] / 1000.0 + 30)
        if resp.error_code in (Code.FETCH_SESSION_ID_NOT_FOUND, Code.INVALID_FETCH_SESSION_EPOCH):
            log.info("fetcher for leader %d: session %d lost (%s); starting a new one",
                     self.leader_id, self.session_id, for_code(resp.error_code).name)
            self.session_id = NO_SESSION
            self._restart_session()
            return 0
        if resp.session_id == NO_SESSION:
            self.session_id = NO_SESSION            # the leader keeps no session for us
            self._restart_session()
        else:
            self.session_id = resp.session_id
            self.session_epoch = next_epoch(epoch)
            for k in forgotten:
                self._in_session.pop(k, None)
            self._in_session.update(sent)
        used = 0
        for t in resp.responses:
            for r in t.partitions:
                s = self.partitions.get((t.topic, r.partition_index))
                if s is None or s.partition.leader_epoch != s.leader_epoch:
                    continue
                p = s.partition
                if r.error_code == Code.OFFSET_OUT_OF_RANGE:
                    # Below the leader's log start (it deleted what we need): start over there.
                    p.log.truncate_fully_and_start_at(max(r.log_start_offset, 0))
                    continue
                if r.error_code:
                    self._delay(s, r.error_code)
                    continue
                if r.records is not None and len(r.records):
                    try:
                        info = p.log.append_as_follower(r.records)
                    except LogDirFullError:
                        # Nothing was appended and the log agrees with the leader: fetch the
                        # same offset again later (the log said so once; meanwhile the leader
                        # drops us from the ISR and we catch up once there is space).
                        s.delayed_until = asyncio.get_running_loop().time() + DISK_FULL_BACKOFF_S
                        continue
                    except KafkaError as e:
                        log.warning("%s-%d: cannot append the leader's batches: %s", p.topic, p.index, e)
                        s.needs_truncation = True
                        continue
                    self.manager.topic_stats.replicated_in(p.topic, info.size)
                    if id(s) in limits:
                        used += info.size
                self.manager.replicas.follower_appended(p, r.high_watermark)
                p.fetch_lag = max(0, r.high_watermark - p.log.log_end_offset)
                s.caught_up = p.fetch_lag == 0
        return used

    def _throttled(self, s: FetchState) -> bool:
        throttle = self.manager.throttle
        p = s.partition
        return throttle is not None and throttle.applies(p.topic, p.index, s.caught_up)

    def _delay(self, s: FetchState, code: int) -> None:
        # NOT_LEADER / FENCED / UNKNOWN epoch: the controller's next LeaderAndIsr sorts it out.
        s.delayed_until = asyncio.get_running_loop().time() + RETRY_BACKOFF_S * 5
        if code in (Code.FENCED_LEADER_EPOCH, Code.UNKNOWN_LEADER_EPOCH):
            s.needs_truncation = True

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except (asyncio.CancelledError, Exception):
            pass


def _group_forgotten(keys: list[tuple[str, int]]) -> list[dict]:
    topics: dict[str, list[int]] = {}
    for topic, index in keys:
        topics.setdefault(topic, []).append(index)
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]


def _group_by_topic(states: list[FetchState], entry) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for s in states:
        topics.setdefault(s.partition.topic, []).append(entry(s))
    return [{"topic": t, "partitions": ps} for t, ps in topics.items()]


@dataclass(frozen=True)
class FetcherSettings:
    """replica.fetch.wait.max.ms, replica.fetch.max.bytes, replica.fetch.response.max.bytes."""
    wait_ms: int
    max_bytes: int
    response_max_bytes: int


class ReplicaFetcherManager:
    """Keeps one LeaderFetcher per leader broker for the partitions this broker follows."""

    def __init__(self, broker_id: int, settings: FetcherSettings, replicas: ReplicaManager,
                 topic_stats: BrokerTopicStats, address_of: Callable[[int], BrokerInfo | None],
                 security: ClientSecurity = PLAINTEXT, throttle: ReplicationThrottle | None = None):
        self.broker_id = broker_id
        self.config = {"wait_ms": settings.wait_ms, "max_bytes": settings.max_bytes,
                       "response_max_bytes": settings.response_max_bytes}
        self.replicas = replicas
        self.topic_stats = topic_stats
        self.address_of = address_of       # a live broker's advertised address, or None
        self.throttle = throttle           # follower.replication.throttled.rate
        self.pool = ConnectionPool(client_id=f"broker-{self.broker_id}-fetcher", security=security)
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._where: dict[tuple[str, int], int] = {}

    def add_partition(self, p: Partition) -> None:
        self.remove_partition(p)
        fetcher = self.fetchers.get(p.leader_id)
        if fetcher is None:
            fetcher = self.fetchers[p.leader_id] = LeaderFetcher(self, p.leader_id)
        fetcher.add(p)
        self._where[(p.topic, p.index)] = p.leader_id

    def remove_partition(self, p: Partition) -> None:
        leader = self._where.pop((p.topic, p.index), None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].remove(p)

    async def close(self) -> None:
        for f in self.fetchers.values():
            await f.stop()
        await self.pool.close_all()
