"""Fetch: file regions of the segment files, bounded by the high watermark (or LSO).

Record bytes never enter Python: the log returns (file, position, size) regions that the
network layer sends with sendfile. A fetch below `min_bytes` parks in the purgatory until
an append to one of its partitions or `max_wait_ms`. Fetch v7+ may use an incremental
fetch session (KIP-227, see fetch_sessions): then the partitions read are the session's,
and an incremental answer carries only those with something new.

Metrics: once the response is final, each partition adds the size of its file regions to
the topic's bytes-out (replication-bytes-out for a follower) or counts a failed fetch.
"""
from __future__ import annotations

import time
from typing import Any, Container, Coroutine, Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError

from ...security.authorizer import Authorizer
from ...stats import BrokerTopicStats
from ...replication.purgatory import FetchPurgatory
from ...replication.partition import Partition
from ...replication.replica_manager import READ_COMMITTED, ReplicaManager
from ...replication.throttle import ReplicationThrottle
from ..authz import authorized_names, cluster_authorized
from ..dispatch import RequestContext, handles
from ..fetch_sessions import SessionContext, FetchSessionCache, open_context


class FetchServices(Protocol):
    replicas: ReplicaManager
    purgatory: FetchPurgatory
    fetch_sessions: FetchSessionCache
    topic_stats: BrokerTopicStats
    authorizer: Authorizer
    leader_throttle: ReplicationThrottle | None    # leader.replication.throttled.rate


class _Everything:
    """Contains every topic name, and None: a replica fetch from a principal without
    ClusterAction is refused on every partition."""

    def __contains__(self, name: object) -> bool:
        return True


def check_leader_epoch(partition, requested: int) -> int:
    """Kafka's fencing of a client whose view of the leader epoch differs from ours."""
    if requested == -1 or requested == partition.leader_epoch:
        return 0
    if requested > partition.leader_epoch:
        return Code.UNKNOWN_LEADER_EPOCH
    return Code.FENCED_LEADER_EPOCH


def replica_id_of(request, version: int) -> int:
    """A follower (replica id >= 0) reads up to the log end and reports its position;
    consumers (-1) read up to the high watermark or the last stable offset."""
    return request.replica_state.replica_id if version >= 15 else request.replica_id


def _request_topics(replicas, request, version: int) -> list[tuple[Any, Any, list]]:
    if version >= 13:
        return [(replicas.topic_name_for_id(t.topic_id), t.topic_id, t.partitions)
                for t in request.topics]
    return [(t.topic, None, t.partitions) for t in request.topics]


def _forgotten(request, version: int) -> list[tuple[Any, list[int]]]:
    """(topic id from v13 on, else name; partitions) to drop from the session."""
    if version >= 13:
        return [(t.topic_id, t.partitions) for t in request.forgotten_topics_data]
    return [(t.topic, t.partitions) for t in request.forgotten_topics_data]


class _FetchPlan:
    """The resolved partitions of one fetch request, read again after each wake-up."""

    def __init__(self, replicas: ReplicaManager, request, version: int, topics: list[tuple[Any, Any, list]],
                 denied: Container[Any] = (), throttle: ReplicationThrottle | None = None):
        """`topics`: (name or None, topic id, partitions) from the request or a session;
        a partition has `partition`, `fetch_offset`, `partition_max_bytes` and
        `current_leader_epoch` either way. A topic in `denied` is answered
        TOPIC_AUTHORIZATION_FAILED on each of its partitions and never read, whether it
        exists or not (its existence is not told)."""
        self.replicas = replicas
        self.version = version
        self.replica_id = replica_id_of(request, version)
        # A follower's fetch on a leader with a replication throttle (None otherwise).
        self.throttle = throttle if self.replica_id >= 0 else None
        self.isolation = request.isolation_level if version >= 4 else 0
        self.max_bytes = request.max_bytes if version >= 3 else 2 ** 31 - 1
        self.topics = []   # (response key dict, [(request partition, Partition or error code)])
        for name, topic_id, partitions in topics:
            if version >= 13:
                key = {"topic_id": topic_id, "topic": name or ""}
                missing = Code.UNKNOWN_TOPIC_ID
            else:
                key = {"topic": name}
                missing = Code.UNKNOWN_TOPIC_OR_PARTITION
            parts: list[tuple[Any, Partition | int]] = []   # a partition, or its error code
            if name in denied:
                parts.extend((rp, Code.TOPIC_AUTHORIZATION_FAILED) for rp in partitions)
                self.topics.append((key, parts))
                continue
            for rp in partitions:
                p = replicas.maybe_get(name, rp.partition) if name else None
                if p is None:    # not here, or its log dir failed (KAFKA_STORAGE_ERROR)
                    parts.append((rp, replicas.missing_code(name, rp.partition, missing) if name else missing))
                elif not p.is_leader:
                    parts.append((rp, Code.NOT_LEADER_OR_FOLLOWER))
                else:
                    code = check_leader_epoch(p, rp.current_leader_epoch) if version >= 9 else 0
                    parts.append((rp, code or p))
            self.topics.append((key, parts))

    def keys(self) -> list[tuple[str, int]]:
        return [(p.topic, p.index) for _, parts in self.topics for _, p in parts if not isinstance(p, int)]

    def drop_lost_leaders(self) -> None:
        """Before a parked fetch reads again: a partition no longer led here is answered
        NOT_LEADER_OR_FOLLOWER at once, as Kafka's DelayedFetch does, so its client looks for
        the new leader instead of waiting out max_wait_ms (and this broker stops reading a
        log it no longer leads). Only a fetch that waited pays for the check."""
        for _, parts in self.topics:
            for i, (rp, p) in enumerate(parts):
                if not isinstance(p, int) and not p.is_leader:
                    parts[i] = (rp, Code.NOT_LEADER_OR_FOLLOWER)

    def record_follower_positions(self) -> None:
        if self.replica_id < 0:
            return
        for _, parts in self.topics:
            for rp, p in parts:
                # As Kafka, only a position the read will accept counts: an offset beyond
                # our log end (a follower with a tail it has not truncated) would otherwise
                # count as the follower holding records it does not have.
                if not isinstance(p, int) \
                        and p.log.log_start_offset <= rp.fetch_offset <= p.log.log_end_offset:
                    self.replicas.record_follower_fetch(p, self.replica_id, rp.fetch_offset)

    def read(self) -> tuple[list[dict], int, bool]:
        """(topic responses, bytes of records, whether any partition has an error)."""
        remaining = self.max_bytes
        total = 0
        any_error = False
        min_one = self.version >= 3   # KIP-74: the first batch always fits
        follower = self.replica_id >= 0
        isolation = self.isolation
        aborted: list | None = [] if isolation == READ_COMMITTED else None
        zstd_refused = self.version < 10 and not follower
        responses = []
        for key, parts in self.topics:
            out = []
            for rp, p in parts:
                if isinstance(p, int):
                    any_error = True
                    out.append(_error_entry(rp.partition, p, aborted))
                    continue
                log = p.log
                if zstd_refused and log.config.compression_type == "zstd":
                    # Kafka (answering, after any wait): a client older than Fetch v10
                    # cannot read zstd, which a zstd topic stores whatever was produced.
                    out.append(_error_entry(rp.partition, Code.UNSUPPORTED_COMPRESSION_TYPE, aborted))
                    continue
                lso = log.last_stable_offset
                offset = rp.fetch_offset
                entry = {"partition_index": rp.partition, "error_code": 0,
                         "high_watermark": log.high_watermark, "last_stable_offset": lso,
                         "log_start_offset": log.log_start_offset,
                         "aborted_transactions": aborted, "preferred_read_replica": -1,
                         "records": b""}
                out.append(entry)
                leo = log.log_end_offset
                bound = leo if follower else (lso if isolation == READ_COMMITTED else log.high_watermark)
                if bound <= offset <= leo and offset >= log.log_start_offset:
                    continue     # caught up: nothing to read (the common case of a long poll)
                throttled = self.throttle is not None and self.throttle.applies(
                    p.topic, p.index, self.replica_id in p.isr)
                if throttled and self.throttle.exceeded():       # type: ignore[union-attr]
                    continue     # over leader.replication.throttled.rate: nothing this time
                try:
                    info = log.read(offset, min(rp.partition_max_bytes, remaining),
                                    None if follower else bound, min_one and total == 0)
                except KafkaError as e:
                    entry["error_code"] = e.code
                    any_error = True
                    continue
                if info.regions:
                    size = info.size
                    entry["records"] = info.regions
                    if throttled:
                        self.throttle.record(size)                  # type: ignore[union-attr]
                    total += size
                    remaining = max(0, remaining - size)
                    if aborted is not None:
                        # Bounded by the LSO rather than the end of what was read: an entry
                        # beyond the records is ignored by every client, and rare.
                        entry["aborted_transactions"] = [
                            {"producer_id": t.producer_id, "first_offset": t.first_offset}
                            for t in log.collect_aborted_txns(offset, bound)]
            responses.append({**key, "partitions": out})
        return responses, total, any_error


def _error_entry(partition: int, code: int, aborted: list | None) -> dict:
    return {"partition_index": partition, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": aborted,
            "preferred_read_replica": -1, "records": b""}


@handles("Fetch", (0, 17))
def fetch(services: FetchServices, request, ctx: RequestContext
          ) -> dict | Coroutine[Any, Any, dict]:
    v = ctx.version
    replicas = services.replicas
    topics = _request_topics(replicas, request, v)
    session_ctx = None
    if v >= 7:
        session_ctx = open_context(services.fetch_sessions, request.session_id, request.session_epoch,
                                   replica_id_of(request, v) >= 0, topics,
                                   _forgotten(request, v))
        if session_ctx.error:
            return {"throttle_time_ms": 0, "error_code": session_ctx.error, "session_id": 0,
                    "responses": []}
        if session_ctx.session is not None:
            topics = session_ctx.session.topics(replicas.topic_name_for_id if v >= 13 else None)
    # Asked on every request, a session's partitions included: an ACL removed while a
    # consumer long-polls in a session stops its reads at its next request.
    denied: Container[Any] = _denied(services, request, ctx, topics) if services.authorizer.enabled else ()
    plan = _FetchPlan(replicas, request, v, topics, denied, services.leader_throttle)
    plan.record_follower_positions()
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000.0
    responses, total, any_error = plan.read()
    if _must_wait(request, plan, total, any_error, deadline):
        return _after_waiting(services, request, ctx, plan, session_ctx, deadline)
    return _answer(services, plan, responses, session_ctx)


def _denied(services: FetchServices, request, ctx: RequestContext, topics: list[tuple[Any, Any, list]]
            ) -> Container[Any]:
    """The topics this fetch may not read. A follower's fetch (replica id >= 0) needs
    ClusterAction on the cluster, or reads nothing at all (CVE-2018-1288: anyone could
    otherwise read every partition, and move the high watermark as a fake follower); a
    consumer's needs Read on each topic."""
    if replica_id_of(request, ctx.version) >= 0:
        return () if cluster_authorized(services, ctx, AclOperation.CLUSTER_ACTION) else _Everything()
    names = {name for name, _, _ in topics if name is not None}
    return names - authorized_names(services, ctx, AclOperation.READ, ResourceType.TOPIC, names)


def _must_wait(request, plan: _FetchPlan, total: int, any_error: bool, deadline: float) -> bool:
    return not (total >= request.min_bytes or any_error or deadline <= time.monotonic() or not plan.keys())


async def _after_waiting(services: FetchServices, request, ctx: RequestContext, plan: _FetchPlan,
                         session_ctx: SessionContext | None, deadline: float) -> dict:
    """Below min_bytes: park in the purgatory until an append to one of the partitions or
    max_wait_ms, read again, and so on until there is enough or the time is up.

    It starts in a task an event-loop pass after `fetch` read: it reads once more before it
    parks, or an append in that pass (which wakes only fetches already parked) would go
    unnoticed until max_wait_ms."""
    while True:
        plan.drop_lost_leaders()
        responses, total, any_error = plan.read()
        if not _must_wait(request, plan, total, any_error, deadline):
            break
        await services.purgatory.wait(plan.keys(), deadline - time.monotonic())
        if ctx.conn.closed:
            break
    return _answer(services, plan, responses, session_ctx)


def _answer(services: FetchServices, plan: _FetchPlan, responses: list[dict],
            session_ctx: SessionContext | None) -> dict:
    _record_stats(services.topic_stats, plan, responses)
    session_id = 0
    if session_ctx is not None and session_ctx.session is not None:
        if not session_ctx.still_current(services.fetch_sessions):
            return {"throttle_time_ms": 0, "error_code": Code.INVALID_FETCH_SESSION_EPOCH,
                    "session_id": 0, "responses": []}
        session_id = session_ctx.session.id
        responses = _session_answer(plan, responses, session_ctx.session, session_ctx.incremental)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id,
            "responses": responses}


def _session_answer(plan: _FetchPlan, responses: list[dict], session, incremental: bool) -> list[dict]:
    """Remember what a session's fetcher is told; an incremental answer keeps only the
    partitions with something new, and those that brought records move to the end of the
    session so the others are read first next time (no starvation under max_bytes)."""
    out = []
    moved = []
    for (_, parts), r in zip(plan.topics, responses):
        if not incremental:
            for (cp, _), entry in zip(parts, r["partitions"]):
                cp.sent(entry)
            out.append(r)
            continue
        kept = []
        for (cp, _), entry in zip(parts, r["partitions"]):
            if cp.must_respond(entry):
                kept.append(entry)
                if entry["records"]:
                    moved.append(cp)
        if kept:
            out.append({**r, "partitions": kept})
    for cp in moved:
        session.move_to_end(cp)
    return out


def _record_stats(stats, plan: _FetchPlan, responses: list[dict]) -> None:
    """One count per topic of the request (its partitions served here, those that failed,
    the bytes of records the others returned)."""
    follower = plan.replica_id >= 0
    for (_, parts), r in zip(plan.topics, responses):
        topic = None
        served = failed = size = 0
        for (_, p), entry in zip(parts, r["partitions"]):
            if isinstance(p, int):
                continue    # not served here: no series for names that may not exist
            topic = p.topic
            served += 1
            if entry["error_code"]:
                failed += 1
                continue
            records = entry["records"]
            if isinstance(records, list):
                size += sum(region.size for region in records)
        if topic is not None:
            stats.fetched(topic, size, follower, served, failed)
