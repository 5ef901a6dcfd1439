"""DescribeClientQuotas and AlterClientQuotas (KIP-546): the quota configs of users and client
ids, kept in the metadata store (ZooKeeper: /config/users, /config/clients) and put in force
on every broker.

Describe needs DESCRIBE_CONFIGS on the Cluster, Alter needs ALTER_CONFIGS on it (Kafka's
KafkaApis): without it Describe answers CLUSTER_AUTHORIZATION_FAILED, and Alter gives that
error to every entry. An entry Kafka would refuse (an unknown key, a fractional byte rate, a
duplicate entity type) gets INVALID_REQUEST with Kafka's reason; the others are stored.
"""
from __future__ import annotations

import logging
from typing import Any, Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code

from ...quota.service import ClientQuotas
from ...security.authorizer import Authorizer
from ..authz import cluster_authorized
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)

CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."


class ClientQuotaServices(Protocol):
    authorizer: Authorizer


def _quotas(ctx: RequestContext) -> ClientQuotas:
    if ctx.quotas is None:      # a dispatcher built without quotas (some unit tests)
        raise RuntimeError("this broker keeps no client quotas")
    return ctx.quotas


@handles("DescribeClientQuotas", (0, 1))
def describe_client_quotas(services: ClientQuotaServices, request: Any, ctx: RequestContext) -> dict:
    if not cluster_authorized(services, ctx, AclOperation.DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": Code.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_AUTHORIZATION_FAILED, "entries": None}
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = _quotas(ctx).describe(components, request.strict)
    except ValueError as e:
        return {"throttle_time_ms": 0, "error_code": Code.INVALID_REQUEST, "error_message": str(e),
                "entries": None}
    entries = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in found]
    return {"throttle_time_ms": 0, "error_code": Code.NONE, "error_message": None,
            "entries": entries}


@handles("AlterClientQuotas", (0, 1))
async def alter_client_quotas(services: ClientQuotaServices, request: Any,
                              ctx: RequestContext) -> dict:
    allowed = cluster_authorized(services, ctx, AclOperation.ALTER_CONFIGS)
    quotas = _quotas(ctx)
    out = []
    for entry in request.entries:
        parts = [(e.entity_type, e.entity_name) for e in entry.entity]
        code, message = Code.NONE, None
        if not allowed:
            code, message = Code.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED
        else:
            try:
                entity, changes = quotas.check_alteration(
                    parts, [(op.key, op.value, op.remove) for op in entry.ops])
                if not request.validate_only:
                    await quotas.alter(entity, changes)
            except ValueError as e:
                code, message = Code.INVALID_REQUEST, str(e)
        out.append({"error_code": code, "error_message": message,
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in parts]})
    return {"throttle_time_ms": 0, "entries": out}
