"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the group
admin APIs DescribeGroups, ListGroups, DeleteGroups. The logic is in broker/group.

A member needs Read on its group; describing a group needs Describe on it, deleting one
Delete; ListGroups lists every group to a principal with Describe on the cluster, else only
the groups it may Describe (Kafka's KafkaApis)."""
from __future__ import annotations

from typing import Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code

from ...group.coordinator import GroupCoordinator
from ...group.state import DEAD
from ...security.authorizer import Authorizer
from ..authz import authorized, authorized_operations, cluster_authorized
from ..dispatch import RequestContext, handles


CLASSIC_GROUP_TYPE = "classic"   # Kafka's GroupType of JoinGroup/SyncGroup groups


class GroupServices(Protocol):
    groups: GroupCoordinator
    authorizer: Authorizer


def _client_host(ctx) -> str:
    peer = ctx.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""


def _may_read(services: GroupServices, ctx: RequestContext, group_id: str) -> bool:
    return authorized(services, ctx, AclOperation.READ, ResourceType.GROUP, group_id)


@handles("JoinGroup", (0, 9))
async def join_group(services: GroupServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if not _may_read(services, ctx, request.group_id):
        # Kafka answers with the unknown member id, whatever the request named, and no
        # protocol (null from v7, where it may be; "" before).
        return {"throttle_time_ms": 0, "error_code": Code.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if v >= 7 else "", "leader": "",
                "member_id": "", "skip_assignment": False, "members": []}
    resp = await services.groups.join(
        request.group_id, request.member_id, request.group_instance_id if v >= 5 else None,
        request.protocol_type, [(p.name, p.metadata) for p in request.protocols],
        request.session_timeout_ms, request.rebalance_timeout_ms if v >= 1 else -1,
        ctx.header.client_id or "", _client_host(ctx), v)
    if v < 7 and resp.get("protocol_name") is None:
        resp = {**resp, "protocol_name": ""}    # nullable from v7 only
    return {"throttle_time_ms": 0, **resp}


@handles("SyncGroup", (0, 5))
async def sync_group(services: GroupServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if not _may_read(services, ctx, request.group_id):
        return {"throttle_time_ms": 0, "error_code": Code.GROUP_AUTHORIZATION_FAILED,
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    resp = await services.groups.sync(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if v >= 3 else None,
        request.protocol_type if v >= 5 else None, request.protocol_name if v >= 5 else None,
        {a.member_id: a.assignment for a in request.assignments})
    return {"throttle_time_ms": 0, **resp}


@handles("Heartbeat", (0, 4))
def heartbeat(services: GroupServices, request, ctx: RequestContext) -> dict:
    if not _may_read(services, ctx, request.group_id):
        return {"throttle_time_ms": 0, "error_code": Code.GROUP_AUTHORIZATION_FAILED}
    code = services.groups.heartbeat(request.group_id, request.generation_id, request.member_id,
                                              request.group_instance_id if ctx.version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": code}


@handles("LeaveGroup", (0, 5))
def leave_group(services: GroupServices, request, ctx: RequestContext) -> dict:
    if not _may_read(services, ctx, request.group_id):
        return {"throttle_time_ms": 0, "error_code": Code.GROUP_AUTHORIZATION_FAILED, "members": []}
    leaving: list[tuple[str, str | None]]
    if ctx.version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    code, results = services.groups.leave(request.group_id, leaving)
    if ctx.version < 3:
        return {"throttle_time_ms": 0, "error_code": code or results[0]}
    return {"throttle_time_ms": 0, "error_code": code,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": e}
                        for (m, i), e in zip(leaving, results)]}


@handles("DescribeGroups", (0, 6))
def describe_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    with_ops = ctx.version >= 3 and request.include_authorized_operations
    out = []
    for g in request.groups:
        if not authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g):
            out.append({"error_code": Code.GROUP_AUTHORIZATION_FAILED, "group_id": g, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        described = services.groups.describe(g)
        if ctx.version >= 6 and described["error_code"] == 0 and described["group_state"] == DEAD:
            described.update(error_code=Code.GROUP_ID_NOT_FOUND, error_message=f"Group {g} not found.")
        if with_ops and described["error_code"] == 0:
            described["authorized_operations"] = authorized_operations(services, ctx, ResourceType.GROUP, g)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}


@handles("ListGroups", (0, 5))
def list_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    states = set(request.states_filter) if ctx.version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if ctx.version >= 5 else set()
    # Every group here is a classic one (JoinGroup/SyncGroup); KIP-848's are not served.
    groups = [] if types and CLASSIC_GROUP_TYPE not in types else services.groups.list_groups(states)
    for g in groups:
        g["group_type"] = CLASSIC_GROUP_TYPE
    if services.authorizer.enabled and not cluster_authorized(services, ctx, AclOperation.DESCRIBE):
        groups = [g for g in groups
                  if authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g["group_id"])]
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}


@handles("DeleteGroups", (0, 2))
async def delete_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    results = []
    for g in request.groups_names:
        if authorized(services, ctx, AclOperation.DELETE, ResourceType.GROUP, g):
            code = await services.groups.delete_group(g)
        else:
            code = Code.GROUP_AUTHORIZATION_FAILED
        results.append({"group_id": g, "error_code": code})
    return {"throttle_time_ms": 0, "results": results}
