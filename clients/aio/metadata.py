"""What a client knows of the cluster: brokers, controller, topics and their partitions.

`ClusterMetadata` is an immutable snapshot built from one Metadata response; a new response
gives a new snapshot, so a reader never sees half an update. `partitions_for(topic)`,
`leader_for(topic, partition)` and friends answer from the snapshot; the producers' hot
paths read two maps derived from it once, `partition_counts` (every send()) and `leaders`
(every look of the sender), without a call each.

`MetadataManager` keeps the current snapshot fresh for one client: it asks any reachable
broker (a known one, else a bootstrap address) for the topics the client cares about,
refreshes at least every `metadata.max.age.ms`, and again soon after a caller reports
stale knowledge (`request_update`, e.g. after NOT_LEADER_OR_FOLLOWER). Refreshes are
single-flight: concurrent callers share one request. Broker addresses learnt from
Metadata are handed to the connection pool. Single event loop, not thread-safe.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from clients.protocol.errors import KafkaError, for_code
from clients.protocol.messages import api

from .errors import KafkaConnectionError, KafkaTimeoutError
from .pool import ConnectionPool

__all__ = ["BrokerInfo", "PartitionInfo", "TopicInfo", "ClusterMetadata", "MetadataManager"]

log = logging.getLogger("strom.client.metadata")
_METADATA = api("Metadata")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int                 # -1 when the partition has no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False
    error_code: int = 0
    topic_id: object = None


class _LeaderMap(dict):
    """(topic, partition) -> leader id, -1 for a partition that has none or is unknown."""

    def __missing__(self, key: object) -> int:
        return -1


@dataclass(frozen=True)
class ClusterMetadata:
    """One Metadata response, made convenient. Immutable."""

    brokers: Mapping[int, BrokerInfo] = field(default_factory=dict)
    topics: Mapping[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None

    @classmethod
    def from_response(cls, resp: Mapping) -> "ClusterMetadata":
        brokers = {b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack"))
                   for b in resp["brokers"]}
        topics: dict[str, TopicInfo] = {}
        for t in resp["topics"]:
            parts = {p["partition_index"]: PartitionInfo(
                t["name"], p["partition_index"], p["leader_id"], p.get("leader_epoch", -1),
                tuple(p["replica_nodes"]), tuple(p["isr_nodes"]),
                tuple(p.get("offline_replicas") or ()), p["error_code"])
                for p in t["partitions"]}
            topics[t["name"]] = TopicInfo(t["name"], parts, bool(t.get("is_internal")),
                                          t["error_code"], t.get("topic_id"))
        return cls(brokers, topics, resp.get("controller_id", -1), resp.get("cluster_id"))

    def topic(self, name: str) -> TopicInfo | None:
        t = self.topics.get(name)
        return t if t is not None and t.error_code == 0 else None

    def partitions_for(self, topic: str) -> list[int]:
        """Sorted partition ids of `topic` (empty when unknown)."""
        t = self.topic(topic)
        return sorted(t.partitions) if t else []

    def partition_count(self, topic: str) -> int:
        """How many partitions `topic` has (0 when unknown); cheaper than partitions_for."""
        return self.partition_counts.get(topic, 0)

    # Derived once per snapshot (a frozen dataclass's instance dict takes the cached value).
    @functools.cached_property
    def partition_counts(self) -> Mapping[str, int]:
        """topic -> its partition count, for topics known without an error."""
        return {n: len(t.partitions) for n, t in self.topics.items() if t.error_code == 0}

    @functools.cached_property
    def leaders(self) -> Mapping[tuple[str, int], int]:
        """(topic, partition) -> leader id as `leader_for` gives it (a TopicPartition is
        such a key); `leaders[tp]` is -1 for a partition without one or unknown."""
        return _LeaderMap({(n, p): info.leader for n, t in self.topics.items()
                           if t.error_code == 0 for p, info in t.partitions.items()})

    def available_partitions_for(self, topic: str) -> list[int]:
        """Partitions of `topic` that have a leader right now."""
        t = self.topic(topic)
        return sorted(p for p, info in t.partitions.items() if info.leader >= 0) if t else []

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topic(topic)
        return t.partitions.get(partition) if t else None

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's broker id, or -1 when unknown or leaderless."""
        return self.leaders[(topic, partition)]

    def topic_error(self, topic: str) -> int:
        t = self.topics.get(topic)
        return t.error_code if t is not None else for_code(3).code

    def matching_topics(self, pattern: "re.Pattern[str]", exclude_internal: bool = True) -> list[str]:
        return sorted(n for n, t in self.topics.items() if t.error_code == 0
                      and pattern.fullmatch(n) and not (exclude_internal and t.is_internal))


class MetadataManager:
    """Keeps a fresh `ClusterMetadata` for one client; see the module docstring."""

    def __init__(self, pool: ConnectionPool, bootstrap: list[tuple[str, int]], *,
                 max_age: float = 300.0, retry_backoff: float = 0.1,
                 request_timeout: float = 30.0, allow_auto_create: bool = False):
        self.pool = pool
        self.bootstrap = list(bootstrap)
        self.max_age = max_age
        self.retry_backoff = retry_backoff
        self.request_timeout = request_timeout
        self.allow_auto_create = allow_auto_create
        self.cluster = ClusterMetadata()
        self._topics: set[str] = set()
        self.all_topics = False          # regex subscriptions need every topic
        self._inflight: asyncio.Future[ClusterMetadata] | None = None
        self._last_refresh = float("-inf")
        self._need_update = True
        self._updated = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    # ------------------------------------------------------------------ interest

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track `topics`; True (and an update is requested) when any was new."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self.request_update()
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self._topics:
            self._topics = topics
            self.request_update()

    def request_update(self) -> None:
        """Knowledge is stale (a NOT_LEADER answer, a new topic): refresh soon."""
        self._need_update = True
        self._wake.set()

    # ------------------------------------------------------------------ refreshing

    def start(self) -> None:
        """Run the background refresher (every max_age, or soon after request_update)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._refresh_loop(), name="strom-metadata-refresh")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    async def _refresh_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            due = self._last_refresh + self.max_age - loop.time()
            if not self._need_update and due > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), due)
                except TimeoutError:
                    pass
                continue
            # A requested update waits out the backoff since the last one, so a storm
            # of NOT_LEADER answers costs one Metadata request per backoff period.
            gap = self._last_refresh + self.retry_backoff - loop.time()
            if gap > 0:
                await asyncio.sleep(gap)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.debug("metadata refresh failed: %s", e)
                await asyncio.sleep(self.retry_backoff)

    async def refresh(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Fetch metadata now (for `topics`, else the tracked ones) and return the snapshot.

        Tries known brokers then bootstrap addresses in random order until one answers;
        raises KafkaConnectionError when none does. Concurrent calls share one request
        when they ask for the tracked topics."""
        if topics is not None:
            return await self._fetch(sorted(set(topics)))
        if self._inflight is not None:
            return await asyncio.shield(self._inflight)
        fut: asyncio.Future[ClusterMetadata] = asyncio.get_running_loop().create_future()
        self._inflight = fut
        try:
            self._need_update = False
            wanted = None if self.all_topics else sorted(self._topics)
            cluster = await self._fetch(wanted)
            fut.set_result(cluster)
            return cluster
        except BaseException as e:
            self._need_update = True
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # retrieved: no "never retrieved" warning
            raise
        finally:
            self._inflight = None

    async def _fetch(self, topics: list[str] | None) -> ClusterMetadata:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": self.allow_auto_create,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False}
        last: Exception | None = None
        for node in self._candidates():
            try:
                conn = await self.pool.get(node)
                resp = await conn.request(_METADATA, body, timeout=self.request_timeout)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                last = e
                continue
            cluster = ClusterMetadata.from_response(resp)
            self._install(cluster, partial=topics is not None and topics != sorted(self._topics))
            return cluster
        where = ", ".join(f"{h}:{p}" for h, p in self.bootstrap)
        raise KafkaConnectionError(f"no broker answered Metadata (bootstrap: {where}): {last}")

    def _candidates(self) -> list:
        known: list = list(self.cluster.brokers)
        random.shuffle(known)
        connected = [n for n in known if self.pool.connection(n) is not None]
        rest = [n for n in known if n not in connected]
        boot = list(self.bootstrap)
        random.shuffle(boot)
        return connected + rest + boot

    def _install(self, cluster: ClusterMetadata, partial: bool) -> None:
        for b in cluster.brokers.values():
            self.pool.set_address(b.node_id, b.host, b.port)
        if partial:
            # An answer about other topics (an admin lookup) updates brokers and those
            # topics but must not forget the topics this client tracks.
            merged = dict(self.cluster.topics)
            merged.update(cluster.topics)
            cluster = ClusterMetadata(cluster.brokers, merged, cluster.controller_id,
                                      cluster.cluster_id)
        else:
            self._last_refresh = asyncio.get_running_loop().time()
        self.cluster = cluster
        self._updated.set()
        self._updated = asyncio.Event()

    async def wait_for_update(self, timeout: float | None = None) -> ClusterMetadata:
        """Request an update and wait until the next snapshot is installed."""
        ev = self._updated
        self.request_update()
        if self._task is None:
            return await asyncio.wait_for(self.refresh(), timeout)
        await asyncio.wait_for(ev.wait(), timeout)
        return self.cluster

    async def wait_for_topic(self, topic: str, timeout: float) -> TopicInfo:
        """Track `topic` and wait until metadata knows it with leaders for all partitions,
        or raise the topic's error (UNKNOWN_TOPIC_OR_PARTITION, ...) / KafkaTimeoutError."""
        self.add_topics([topic])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            t = self.cluster.topics.get(topic)
            if t is not None and t.error_code == 0 and t.partitions and all(
                    p.leader >= 0 for p in t.partitions.values()):
                return t
            remaining = deadline - loop.time()
            if remaining <= 0:
                code = t.error_code if t is not None else 0
                if code and not for_code(code).retriable:
                    raise for_code(code)(f"topic {topic}")
                err = for_code(code)(f"topic {topic}") if code else None
                raise KafkaTimeoutError(
                    f"topic {topic} not available within {timeout:.1f}s"
                    + (f" ({err.name})" if isinstance(err, KafkaError) else ""))
            try:
                await self.wait_for_update(min(remaining, max(self.retry_backoff, 0.05) * 10))
            except (TimeoutError, KafkaConnectionError):
                await asyncio.sleep(min(self.retry_backoff, max(0.0, remaining)))
            t = self.cluster.topics.get(topic)
            if t is not None and t.error_code and not for_code(t.error_code).retriable:
                raise for_code(t.error_code)(f"topic {topic}")
