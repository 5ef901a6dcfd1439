"""OffsetCommit, TxnOffsetCommit, OffsetFetch (single and multi-group), OffsetDelete."""
from __future__ import annotations

from typing import Protocol

from clients.protocol.errors import Code

from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...txn.verifier import TxnVerifier
from ..dispatch import RequestContext, handles


class OffsetCommitServices(Protocol):
    groups: GroupCoordinator
    txn_verifier: TxnVerifier


@handles("OffsetCommit", (0, 9))
async def offset_commit(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    commits = {}
    for t in request.topics:
        for p in t.partitions:
            commits[(t.name, p.partition_index)] = (
                p.committed_offset, p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata)
    generation = request.generation_id_or_member_epoch if v >= 1 else -1
    member_id = request.member_id if v >= 1 else ""
    results = await services.groups.commit_offsets(
        request.group_id, generation, member_id, request.group_instance_id if v >= 7 else None, commits)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)]}
            for p in t.partitions]}
        for t in request.topics]}


@handles("TxnOffsetCommit", (0, 5))
async def txn_offset_commit(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    commits = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                                             p.committed_metadata)
               for t in request.topics for p in t.partitions}
    if v >= 5:
        # Transaction version 2: no AddOffsetsToTxn came; add the group's offsets partition
        # to the transaction here (as a partition leader does for Produce v12).
        tp = (OFFSETS_TOPIC, services.groups.partition_for(request.group_id))
        code = (await services.txn_verifier.verify(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, [tp], add=True))[tp]
        if code:
            if code == Code.NOT_ENOUGH_REPLICAS:        # the coordinator was busy or moving
                code = Code.COORDINATOR_LOAD_IN_PROGRESS
            return {"throttle_time_ms": 0, "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": code}
                    for p in t.partitions]} for t in request.topics]}
    results = await services.groups.txn_commit_offsets(
        request.group_id, request.producer_id, request.producer_epoch,
        request.generation_id if v >= 3 else -1, request.member_id if v >= 3 else "",
        request.group_instance_id if v >= 3 else None, commits)
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)]}
            for p in t.partitions]}
        for t in request.topics]}


def _fetch_group(services: OffsetCommitServices, group_id: str, topics, version: int,
                 require_stable: bool = False) -> tuple[int, list[dict]]:
    tps = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    code, found = services.groups.fetch_offsets(group_id, tps)
    if code:
        return code, [] if topics is None else [
            {"name": t.name, "partitions": [
                {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": code} for p in t.partition_indexes]} for t in topics]
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
    return 0, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@handles("OffsetFetch", (0, 9))
def offset_fetch(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if v >= 8:
        groups = []
        for g in request.groups:
            code, topics = _fetch_group(services, g.group_id, g.topics, v, request.require_stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return {"throttle_time_ms": 0, "groups": groups}
    # v2+: null topics means every committed offset of the group.
    code, out = _fetch_group(services, request.group_id, request.topics, v,
                             v >= 7 and request.require_stable)
    if v < 2 and code:
        # v0/v1 have no top-level error: it goes on every partition.
        return {"throttle_time_ms": 0, "topics": out}
    return {"throttle_time_ms": 0, "topics": out if not code else [], "error_code": code}


@handles("OffsetDelete", (0, 0))
async def offset_delete(services: OffsetCommitServices, request, ctx: RequestContext) -> dict:
    tps = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    code, results = await services.groups.delete_offsets(request.group_id, tps)
    return {"error_code": code, "throttle_time_ms": 0, "topics": [] if code else [
        {"name": t.name, "partitions": [
            {"partition_index": p.partition_index, "error_code": results[(t.name, p.partition_index)]}
            for p in t.partitions]} for t in request.topics]}
