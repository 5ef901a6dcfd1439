"""FindCoordinator: which broker coordinates a consumer group or a transactional id.

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional
id's the leader of its `__transaction_state` partition; each topic is created on the first
lookup, as Kafka does.

The API must be advertised even for clients that never use groups: librdkafka < 2.11.1
(Debian's kcat) enables LZ4 only if FindCoordinator v0 is advertised, and otherwise
silently sends `-z lz4` batches uncompressed.
"""
from __future__ import annotations

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code
from clients.protocol.messages.group import COORDINATOR_GROUP, COORDINATOR_TRANSACTION

from typing import Protocol

from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ...txn.coordinator import TransactionCoordinator
from ...txn.state_manager import TXN_TOPIC
from ..authz import authorized
from ..dispatch import RequestContext, handles


class CoordinatorLookupServices(Protocol):
    cluster_mode: bool
    metadata: MetadataCache
    groups: GroupCoordinator
    txn: TransactionCoordinator
    authorizer: Authorizer


async def _lookup(services: CoordinatorLookupServices, key: str, key_type: int, ctx: RequestContext) -> dict:
    """The coordinator of `key`, at its address on the listener the request came in on; the
    principal must be allowed to Describe the group or transactional id."""
    none = {"node_id": -1, "host": "", "port": -1}
    if key_type not in (COORDINATOR_GROUP, COORDINATOR_TRANSACTION):
        return {**none, "error_code": Code.INVALID_REQUEST,
                "error_message": f"Unknown coordinator key type {key_type}."}
    if key_type == COORDINATOR_GROUP:
        if not authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return {**none, "error_code": Code.GROUP_AUTHORIZATION_FAILED,
                    "error_message": "Group authorization failed."}
    elif not authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return {**none, "error_code": Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "error_message": "Transactional Id authorization failed."}
    if not key:
        what = "group id" if key_type == COORDINATOR_GROUP else "transactional id"
        return {**none, "error_code": Code.INVALID_REQUEST, "error_message": f"Empty {what}."}
    if key_type == COORDINATOR_GROUP:
        topic, partitions = OFFSETS_TOPIC, services.groups.num_partitions
        created = await services.groups.ensure_offsets_topic()
        partition = services.groups.partition_for(key)
    else:
        state = services.txn.state
        topic, partitions = TXN_TOPIC, state.settings.num_partitions
        created = await state.ensure_topic()
        partition = state.partition_for(key)
    if not created:
        return {**none, "error_code": Code.COORDINATOR_NOT_AVAILABLE,
                "error_message": f"The coordinator is not available: {topic} cannot be created."}
    if services.cluster_mode:
        await services.metadata.wait_for_leaders(topic, partitions, 5.0)
    info = services.metadata.partition(topic, partition)
    node = (services.metadata.broker(info.leader, ctx.conn.listener)
            if info is not None and info.leader >= 0 else None)
    if node is None:
        return {**none, "error_code": Code.COORDINATOR_NOT_AVAILABLE,
                "error_message": "The coordinator is not available."}
    return {"node_id": node.broker_id, "host": node.host, "port": node.port,
            "error_code": 0, "error_message": None}


@handles("FindCoordinator", (0, 4))
async def find_coordinator(services: CoordinatorLookupServices, request, ctx: RequestContext) -> dict:
    key_type = request.key_type if ctx.version >= 1 else COORDINATOR_GROUP
    if ctx.version >= 4:
        # KIP-699: one answer per key, no top-level error.
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, **await _lookup(services, key, key_type, ctx)} for key in request.coordinator_keys]}
    return {"throttle_time_ms": 0, **await _lookup(services, request.key, key_type, ctx)}
