"""OffsetCommit, TxnOffsetCommit, OffsetFetch (single and multi-group), OffsetDelete.

Authorization as Kafka's: committing needs Read on the group and Read on each topic (a
transactional commit also Write on its transactional id); fetching offsets Describe on the
group, and only the topics the principal may Describe are told; deleting offsets Delete on
the group and Read on each topic. A partition of a refused topic is answered
TOPIC_AUTHORIZATION_FAILED and never reaches the coordinator."""
from __future__ import annotations

from typing import Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code

from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ...txn.verifier import TxnVerifier
from ..authz import authorized, authorized_names
from ..dispatch import RequestContext, handles


class OffsetCommitServices(Protocol):
    groups: GroupCoordinator
    metadata: MetadataCache
    txn_verifier: TxnVerifier
    authorizer: Authorizer


def _by_partition(request, codes: dict[tuple[str, int], int]) -> list[dict]:
    """The response topics of a commit-shaped request, each partition with its code."""
    return [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": codes[(t.name, p.partition_index)]}
        for p in t.partitions]} for t in request.topics]


def _every_partition(request, code: int) -> list[dict]:
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                            for p in t.partitions]} for t in request.topics]


def _unreadable_topics(services: OffsetCommitServices, ctx: RequestContext, request) -> set[str]:
    names = {t.name for t in request.topics}
    return names - authorized_names(services, ctx, AclOperation.READ, ResourceType.TOPIC, names)


def _may_group(services: OffsetCommitServices, ctx: RequestContext, operation: AclOperation,
               group_id: str) -> bool:
    return authorized(services, ctx, operation, ResourceType.GROUP, group_id)


@handles("OffsetCommit", (0, 9))
async def offset_commit(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if not _may_group(services, ctx, AclOperation.READ, request.group_id):
        return {"throttle_time_ms": 0, "topics": _every_partition(request, Code.GROUP_AUTHORIZATION_FAILED)}
    refused = _unreadable_topics(services, ctx, request)
    codes = {(t.name, p.partition_index): Code.TOPIC_AUTHORIZATION_FAILED
             for t in request.topics if t.name in refused for p in t.partitions}
    commits = {}
    for t in request.topics:
        if t.name in refused:
            continue
        for p in t.partitions:
            commits[(t.name, p.partition_index)] = (
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata)
    if commits or not refused:
        generation = request.generation_id_or_member_epoch if v >= 1 else -1
        member_id = request.member_id if v >= 1 else ""
        codes.update(await services.groups.commit_offsets(
            request.group_id, generation, member_id, request.group_instance_id if v >= 7 else None, commits))
    return {"throttle_time_ms": 0, "topics": _by_partition(request, codes)}


@handles("TxnOffsetCommit", (0, 5))
async def txn_offset_commit(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if not authorized(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0,
                "topics": _every_partition(request, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    if not _may_group(services, ctx, AclOperation.READ, request.group_id):
        return {"throttle_time_ms": 0, "topics": _every_partition(request, Code.GROUP_AUTHORIZATION_FAILED)}
    refused = _unreadable_topics(services, ctx, request)
    codes = {(t.name, p.partition_index): Code.TOPIC_AUTHORIZATION_FAILED
             for t in request.topics if t.name in refused for p in t.partitions}
    commits = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                                             p.committed_metadata)
               for t in request.topics if t.name not in refused for p in t.partitions}
    if commits or not refused:
        codes.update(await _txn_commit(services, request, v, commits))
    return {"throttle_time_ms": 0, "topics": _by_partition(request, codes)}


async def _txn_commit(services: OffsetCommitServices, request, v: int, commits: dict) -> dict[tuple[str, int], int]:
    if v >= 5:
        # Transaction version 2: no AddOffsetsToTxn came; add the group's offsets partition
        # to the transaction here (as a partition leader does for Produce v12).
        tp = (OFFSETS_TOPIC, services.groups.partition_for(request.group_id))
        code = (await services.txn_verifier.verify(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, [tp], add=True))[tp]
        if code:
            if code == Code.NOT_ENOUGH_REPLICAS:        # the coordinator was busy or moving
                code = Code.COORDINATOR_LOAD_IN_PROGRESS
            return dict.fromkeys(commits, code)
    return await services.groups.txn_commit_offsets(
        request.group_id, request.producer_id, request.producer_epoch,
        request.generation_id if v >= 3 else -1, request.member_id if v >= 3 else "",
        request.group_instance_id if v >= 3 else None, commits)


def _offset_entry(partition: int, code: int) -> dict:
    return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
            "metadata": "", "error_code": code}


def _fetch_group(services: OffsetCommitServices, ctx: RequestContext, group_id: str, topics, version: int,
                 require_stable: bool = False) -> tuple[int, list[dict]]:
    """(group error, topics) of one group's offsets; `topics` None asks for every committed
    offset, of which only the topics the principal may Describe are told; a named partition
    of a topic it may not describe is answered TOPIC_AUTHORIZATION_FAILED."""
    refused: set[str] = set()
    found: dict = {}
    if not _may_group(services, ctx, AclOperation.DESCRIBE, group_id):
        code = Code.GROUP_AUTHORIZATION_FAILED
    elif topics is None:
        code, found = services.groups.fetch_offsets(group_id, None)
        if services.authorizer.enabled:
            describable = authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           {t for t, _ in found})
            found = {tp: c for tp, c in found.items() if tp[0] in describable}
    else:
        names = {t.name for t in topics}
        refused = names - authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        code, found = services.groups.fetch_offsets(
            group_id, [(t.name, p) for t in topics if t.name not in refused for p in t.partition_indexes])
    if code:
        return code, [] if topics is None else [
            {"name": t.name, "partitions": [_offset_entry(p, code) for p in t.partition_indexes]}
            for t in topics]
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), c in found.items():
        if require_stable and services.groups.has_pending_txn_commit(group_id, (topic, partition)):
            # KIP-447: a transactional commit of this offset waits for its marker.
            c = None
            error = Code.UNSTABLE_OFFSET_COMMIT
        else:
            error = 0
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": c.offset if c else -1,
            "committed_leader_epoch": c.leader_epoch if c else -1,
            "metadata": c.metadata if c else "",
            "error_code": error})
    if refused:
        for t in topics:
            if t.name in refused:
                by_topic.setdefault(t.name, []).extend(
                    _offset_entry(p, Code.TOPIC_AUTHORIZATION_FAILED) for p in t.partition_indexes)
    return 0, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@handles("OffsetFetch", (0, 9))
def offset_fetch(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if v >= 8:
        groups = []
        for g in request.groups:
            code, topics = _fetch_group(services, ctx, g.group_id, g.topics, v, request.require_stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    # v2+: null topics means every committed offset of the group.
    code, out = _fetch_group(services, ctx, request.group_id, request.topics, v,
                             v >= 7 and request.require_stable)
    if v < 2 and code:
        # v0/v1 have no top-level error: it goes on every partition.
        return {"throttle_time_ms": 0, "topics": out}
    return {"throttle_time_ms": 0, "topics": out if not code else [], "error_code": code}


@handles("OffsetDelete", (0, 0))
async def offset_delete(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    if not _may_group(services, ctx, AclOperation.DELETE, request.group_id):
        return {"error_code": Code.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    refused = _unreadable_topics(services, ctx, request)
    codes: dict[tuple[str, int], int] = {}
    tps = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if t.name in refused:
                codes[tp] = Code.TOPIC_AUTHORIZATION_FAILED
            elif services.metadata.partition(*tp) is None:     # as Kafka: not in the metadata
                codes[tp] = Code.UNKNOWN_TOPIC_OR_PARTITION
            else:
                tps.append(tp)
    code, results = await services.groups.delete_offsets(request.group_id, tps)
    if code:
        return {"error_code": code, "throttle_time_ms": 0, "topics": []}
    return {"error_code": 0, "throttle_time_ms": 0, "topics": _by_partition(request, {**results, **codes})}
