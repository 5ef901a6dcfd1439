"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the group
admin APIs DescribeGroups, ListGroups, DeleteGroups. The logic is in broker/group."""
from __future__ import annotations

from typing import Protocol

from ...group.coordinator import GroupCoordinator
from ..dispatch import RequestContext, handles


class GroupServices(Protocol):
    groups: GroupCoordinator


def _client_host(ctx) -> str:
    peer = ctx.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""


@handles("JoinGroup", (0, 9))
async def join_group(services: GroupServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    resp = await services.groups.join(
        request.group_id, request.member_id, request.group_instance_id if v >= 5 else None,
        request.protocol_type, [(p.name, p.metadata) for p in request.protocols],
        request.session_timeout_ms, request.rebalance_timeout_ms if v >= 1 else -1,
        ctx.header.client_id or "", _client_host(ctx), v)
    return {"throttle_time_ms": 0, **resp}


@handles("SyncGroup", (0, 5))
async def sync_group(services: GroupServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    resp = await services.groups.sync(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if v >= 3 else None,
        request.protocol_type if v >= 5 else None, request.protocol_name if v >= 5 else None,
        {a.member_id: a.assignment for a in request.assignments})
    return {"throttle_time_ms": 0, **resp}


@handles("Heartbeat", (0, 4))
def heartbeat(services: GroupServices, request, ctx: RequestContext) -> dict:
    code = services.groups.heartbeat(request.group_id, request.generation_id, request.member_id,
                                              request.group_instance_id if ctx.version >= 3 else None)
    return {"throttle_time_ms": 0, "error_code": code}


@handles("LeaveGroup", (0, 5))
def leave_group(services: GroupServices, request, ctx: RequestContext) -> dict:
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


@handles("DescribeGroups", (0, 5))
def describe_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    return {"throttle_time_ms": 0,
            "groups": [services.groups.describe(g) for g in request.groups]}


@handles("ListGroups", (0, 4))
def list_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    states = set(request.states_filter) if ctx.version >= 4 else set()
    return {"throttle_time_ms": 0, "error_code": 0,
            "groups": services.groups.list_groups(states)}


@handles("DeleteGroups", (0, 2))
async def delete_groups(services: GroupServices, request, ctx: RequestContext) -> dict:
    results = []
    for g in request.groups_names:
        results.append({"group_id": g, "error_code": await services.groups.delete_group(g)})
    return {"throttle_time_ms": 0, "results": results}
