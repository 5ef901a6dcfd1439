"""ListOffsets, OffsetForLeaderEpoch, DeleteRecords: offset lookups and the log start.

Looking offsets up needs Describe on the topic (OffsetForLeaderEpoch: or ClusterAction on
the cluster, which followers have), deleting records Delete on it; a refused topic's
partitions are answered TOPIC_AUTHORIZATION_FAILED, as Kafka does."""
from __future__ import annotations

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError

from typing import Protocol

from ...replication.replica_manager import ReplicaManager
from ...security.authorizer import Authorizer
from ..authz import authorized_names, cluster_authorized
from ..dispatch import RequestContext, handles
from .fetch import check_leader_epoch


class OffsetServices(Protocol):
    replicas: ReplicaManager
    authorizer: Authorizer


def _refused(services: OffsetServices, ctx: RequestContext, operation: AclOperation, names: set[str]) -> set[str]:
    """The topics of `names` the principal may not do `operation` on."""
    return names - authorized_names(services, ctx, operation, ResourceType.TOPIC, names)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _leader_partition(services: OffsetServices, topic: str, index: int):
    p = services.replicas.maybe_get(topic, index)
    if p is None:
        return None, Code.UNKNOWN_TOPIC_OR_PARTITION
    if not p.is_leader:
        return None, Code.NOT_LEADER_OR_FOLLOWER
    return p, 0


def _lookup(p, timestamp: int, isolation: int, replica_id: int = -1) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) as Kafka answers; (-1, -1, -1) when none."""
    log = p.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1, p.leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1       # Kafka without remote storage: nothing is tiered
    if timestamp == LATEST:
        if replica_id >= 0:
            return log.log_end_offset, -1, p.leader_epoch     # a follower may see past the HW
        return p.last_offset_for(isolation), -1, p.leader_epoch
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts, epoch = found
    if offset >= p.last_offset_for(isolation):
        return -1, -1, -1
    return offset, ts, epoch


@handles("ListOffsets", (0, 10))
def list_offsets(services: OffsetServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    isolation = request.isolation_level if v >= 2 else 0
    refused = _refused(services, ctx, AclOperation.DESCRIBE, {t.name for t in request.topics})
    topics = []
    for t in request.topics:
        parts = []
        for rp in t.partitions:
            entry = {"partition_index": rp.partition_index, "error_code": 0,
                     "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if t.name in refused:
                entry["error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            p, code = _leader_partition(services, t.name, rp.partition_index)
            if p is not None and v >= 4:
                code = check_leader_epoch(p, rp.current_leader_epoch)
            if code:
                entry["error_code"] = code
            else:
                try:
                    offset, ts, epoch = _lookup(p, rp.timestamp, isolation, request.replica_id)
                except KafkaError as e:
                    entry["error_code"] = e.code
                else:
                    if v == 0:
                        entry["old_style_offsets"] = [offset] if offset >= 0 else []
                    entry.update(offset=offset, timestamp=ts, leader_epoch=epoch)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


@handles("OffsetForLeaderEpoch", (0, 4))
def offset_for_leader_epoch(services: OffsetServices, request, ctx: RequestContext) -> dict:
    # Kafka (KIP-320): a follower's ClusterAction covers every topic; a consumer checking
    # for truncation needs Describe on each.
    refused: set[str] = set()
    if services.authorizer.enabled and not cluster_authorized(services, ctx, AclOperation.CLUSTER_ACTION):
        refused = _refused(services, ctx, AclOperation.DESCRIBE, {t.topic for t in request.topics})
    topics = []
    for t in request.topics:
        parts = []
        for rp in t.partitions:
            entry = {"error_code": 0, "partition": rp.partition, "leader_epoch": -1, "end_offset": -1}
            if t.topic in refused:
                entry["error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            p, code = _leader_partition(services, t.topic, rp.partition)
            if p is not None and ctx.version >= 2:
                code = check_leader_epoch(p, rp.current_leader_epoch)
            if code:
                entry["error_code"] = code
            else:
                epoch, end = p.log.end_offset_for_epoch(rp.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end)
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


@handles("DeleteRecords", (0, 2))
def delete_records(services: OffsetServices, request, ctx: RequestContext) -> dict:
    refused = _refused(services, ctx, AclOperation.DELETE, {t.name for t in request.topics})
    topics = []
    for t in request.topics:
        parts = []
        for rp in t.partitions:
            entry = {"partition_index": rp.partition_index, "low_watermark": -1, "error_code": 0}
            if t.name in refused:
                entry["error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            p, code = _leader_partition(services, t.name, rp.partition_index)
            if code:
                entry["error_code"] = code
            else:
                offset = p.high_watermark if rp.offset == -1 else rp.offset
                if offset < 0 or offset > p.high_watermark:
                    entry["error_code"] = Code.OFFSET_OUT_OF_RANGE
                else:
                    try:
                        entry["low_watermark"] = p.log.delete_records_before(offset)
                    except KafkaError as e:
                        entry["error_code"] = e.code
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
