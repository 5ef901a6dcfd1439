"""InitProducerId: an idempotent producer gets a fresh producer id here; a transactional one
(a `transactional.id`) from the transaction coordinator of its id.

A transactional producer needs Write on its transactional id; an idempotent one
IdempotentWrite on the cluster, or Write on some topic (KIP-679), as Kafka checks."""
from __future__ import annotations

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code

from typing import Protocol

from ...security.authorizer import Authorizer
from ...txn.coordinator import TransactionCoordinator
from ...txn.producer_ids import ProducerIdManager
from ..authz import authorized, authorized_by_resource_type, cluster_authorized
from ..dispatch import RequestContext, handles


class ProducerIdServices(Protocol):
    producer_ids: ProducerIdManager
    txn: TransactionCoordinator
    authorizer: Authorizer

MAX_EPOCH = 32767


@handles("InitProducerId", (0, 5))
async def init_producer_id(services: ProducerIdServices, request, ctx: RequestContext) -> dict:
    refusal = _refusal(services, request, ctx)
    if refusal:
        return {"error_code": refusal, "producer_id": -1, "producer_epoch": -1, "throttle_time_ms": 0}
    pid = request.producer_id if ctx.version >= 3 else -1
    epoch = request.producer_epoch if ctx.version >= 3 else -1
    if request.transactional_id is not None:
        code, pid, epoch = await services.txn.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            (pid, epoch) if pid >= 0 else None)
        return {"error_code": code, "producer_id": pid, "producer_epoch": epoch, "throttle_time_ms": 0}
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer that lost track of its sequences bumps its epoch
        # and keeps its id; the partitions reset its sequence on the new epoch.
        return {"error_code": 0, "producer_id": pid, "producer_epoch": epoch + 1, "throttle_time_ms": 0}
    new_id = await services.producer_ids.next_id()
    return {"error_code": 0, "producer_id": new_id, "producer_epoch": 0, "throttle_time_ms": 0}


def _refusal(services: ProducerIdServices, request, ctx: RequestContext) -> int:
    """The authorization error of this InitProducerId, 0 if allowed."""
    if request.transactional_id is not None:
        if not authorized(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                          request.transactional_id):
            return Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not (cluster_authorized(services, ctx, AclOperation.IDEMPOTENT_WRITE)
              or authorized_by_resource_type(services, ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        return Code.CLUSTER_AUTHORIZATION_FAILED
    return 0
