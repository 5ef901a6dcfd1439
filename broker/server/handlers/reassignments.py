"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455): moving replicas,
as Kafka's ZooKeeper-mode broker answers them.

Both go to the controller (any other broker answers NOT_CONTROLLER for the whole request, and
clients look the controller up again); altering needs ALTER on the Cluster, listing DESCRIBE
(CLUSTER_AUTHORIZATION_FAILED otherwise). The controller does the work
(zkcoord/controller.py, zkcoord/reassignment.py); an alteration is answered once it started.
"""
from __future__ import annotations

from typing import Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code
from zkcoord.controller import Controller

from ...security.authorizer import Authorizer
from ..authz import cluster_authorized
from ..dispatch import RequestContext, handles

TopicPartition = tuple[str, int]


class ReassignmentServices(Protocol):
    cluster_mode: bool
    controller: Controller | None
    authorizer: Authorizer


def _top_level(code: int, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message}


@handles("AlterPartitionReassignments", (0, 0))
async def alter_partition_reassignments(services: ReassignmentServices, request, ctx: RequestContext) -> dict:
    asked = [((t.name, p.partition_index), p.replicas) for t in request.topics for p in t.partitions]

    def answer(code: int, message: str | None, per_partition: dict[TopicPartition, tuple[int, str | None]]) -> dict:
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), _ in asked:
            err, msg = per_partition.get((topic, p), (code, message))
            by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": err, "error_message": msg})
        return {**_top_level(code, message), "responses": [
            {"name": t, "partitions": parts} for t, parts in by_topic.items()]}

    if not cluster_authorized(services, ctx, AclOperation.ALTER):
        return answer(Code.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", {})
    controller = services.controller
    results = await controller.alter_reassignments(asked) if controller is not None else None
    if results is None:
        return answer(Code.NOT_CONTROLLER, "This is not the correct controller for this cluster.", {})
    return answer(Code.NONE, None, results)


@handles("ListPartitionReassignments", (0, 0))
async def list_partition_reassignments(services: ReassignmentServices, request, ctx: RequestContext) -> dict:
    if not cluster_authorized(services, ctx, AclOperation.DESCRIBE):
        return {**_top_level(Code.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."), "topics": []}
    partitions = None if request.topics is None else \
        [(t.name, p) for t in request.topics for p in t.partition_indexes]
    controller = services.controller
    found = await controller.list_reassignments(partitions) if controller is not None else None
    if found is None:
        return {**_top_level(Code.NOT_CONTROLLER, "This is not the correct controller for this cluster."),
                "topics": []}
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), move in sorted(found.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": move.replicas,
                                               "adding_replicas": move.adding,
                                               "removing_replicas": move.removing})
    return {**_top_level(Code.NONE), "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
