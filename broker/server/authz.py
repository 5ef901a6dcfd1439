"""What handlers ask the authorizer, in Kafka's words (AuthHelper): may the request's
principal, from its host, do an operation on a resource; which of these names may it; which
operations may it on one resource (the "authorized operations" bit fields of Metadata,
DescribeCluster and DescribeGroups).

Every function first looks at `services.authorizer.enabled`: with no authorizer configured
(AllowAll) nothing is asked, so a handler's checks cost one attribute read.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Protocol

from clients.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from clients.protocol.errors import ClusterAuthorizationFailedError

from ..security.authorizer import Authorizer

if TYPE_CHECKING:
    from .dispatch import RequestContext


class HasAuthorizer(Protocol):
    authorizer: Authorizer


# Kafka's AclEntry.supportedOperations: what an "authorized operations" field reports.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def authorized(services: HasAuthorizer, ctx: RequestContext, operation: AclOperation,
               resource_type: ResourceType, name: str) -> bool:
    """Whether the request's principal may do `operation` on the literal resource."""
    a = services.authorizer
    return not a.enabled or a.authorize(ctx.conn.principal, ctx.conn.host, operation, resource_type, name)


def cluster_authorized(services: HasAuthorizer, ctx: RequestContext, operation: AclOperation) -> bool:
    """`operation` on the Cluster resource."""
    return authorized(services, ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def require_cluster(services: HasAuthorizer, ctx: RequestContext, operation: AclOperation) -> None:
    """Kafka's authorizeClusterOperation: CLUSTER_AUTHORIZATION_FAILED for the whole request
    (the dispatcher turns it into the API's error response)."""
    if not cluster_authorized(services, ctx, operation):
        raise ClusterAuthorizationFailedError(
            f"{ctx.conn.principal} is not authorized to {operation.title} the cluster.")


def authorized_names(services: HasAuthorizer, ctx: RequestContext, operation: AclOperation,
                     resource_type: ResourceType, names: Iterable[str | None]) -> set[str]:
    """The names among `names` the principal may do `operation` on; each distinct name is
    asked once (Kafka's filterByAuthorized). None (an unresolved topic id) is never in it."""
    distinct = {n for n in names if n is not None}
    a = services.authorizer
    if not a.enabled:
        return distinct
    principal, host = ctx.conn.principal, ctx.conn.host
    return {n for n in distinct if a.authorize(principal, host, operation, resource_type, n)}


def authorized_by_resource_type(services: HasAuthorizer, ctx: RequestContext, operation: AclOperation,
                                resource_type: ResourceType) -> bool:
    """Whether `operation` is allowed on some resource of the type (KIP-679)."""
    a = services.authorizer
    return not a.enabled or a.authorize_by_resource_type(ctx.conn.principal, ctx.conn.host, operation,
                                                         resource_type)


def authorized_operations(services: HasAuthorizer, ctx: RequestContext, resource_type: ResourceType,
                          name: str) -> int:
    """The bit field (1 << operation code) of the operations the principal may do on the
    resource, among those its type supports; all of them when no authorizer is configured."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    a = services.authorizer
    if a.enabled:
        principal, host = ctx.conn.principal, ctx.conn.host
        ops = tuple(op for op in ops if a.authorize(principal, host, op, resource_type, name))
    field = 0
    for op in ops:
        field |= 1 << int(op)
    return field
