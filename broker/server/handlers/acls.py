"""CreateAcls, DescribeAcls, DeleteAcls: the ACLs of the metadata store, as Kafka's AclApis
with its AclAuthorizer (ZooKeeper mode) answers them.

Creating and deleting need ALTER on the Cluster, describing needs DESCRIBE on it
(CLUSTER_AUTHORIZATION_FAILED otherwise, in every result as Kafka's getErrorResponse puts
it). With no authorizer configured every answer is SECURITY_DISABLED. A creation is
checked on its own (INVALID_REQUEST with Kafka's messages) and the valid ones are written in
one store call; a delete filter removes every stored ACL it matches, and each removed ACL is
reported under the first filter that matched it (AclAuthorizer.deleteAcls).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol, TypeVar

from clients.protocol.acl import (
    CLUSTER_NAME, WILDCARD_RESOURCE, AclOperation, AclPermissionType, PatternType, ResourceType,
)
from clients.protocol.errors import Code, KafkaError
from zkcoord.store import AclBinding, MetadataStore

from ...security.authorizer import Authorizer
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)


class AclServices(Protocol):
    store: MetadataStore
    authorizer: Authorizer


# Kafka's messages (AclApis, AclControlManager.validateNewAcl, AclAuthorizer).
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"

E = TypeVar("E", bound=IntEnum)


def _decode(enum_cls: type[E], code: int) -> E:
    """A wire code as the enum; a code Kafka does not know is UNKNOWN (its fromCode)."""
    try:
        return enum_cls(code)
    except ValueError:
        return enum_cls(0)          # every ACL enum has UNKNOWN = 0


def _result(code: int = Code.NONE, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message}


def _cluster_denied(services: AclServices, ctx: RequestContext, operation: AclOperation) -> str | None:
    """None when the connection's principal may do `operation` on the Cluster, else
    Kafka's message (AuthHelper.authorizeClusterOperation)."""
    conn = ctx.conn
    if services.authorizer.authorize(conn.principal, conn.host, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return (f"Request {ctx.api.name} v{ctx.version} from {conn.principal} at {conn.host} "
            f"(listener {conn.listener}) is not authorized.")


class InvalidAcl(Exception):
    """A creation that cannot become an ACL; the message is what the client is told."""


def binding_from_creation(c: Any) -> AclBinding:
    """The ACL a CreateAcls creation asks for, or InvalidAcl with Kafka's message. Kafka's
    order: the codes (AclControlManager.validateNewAcl), the Cluster's name and an empty
    name (AclApis.handleCreateAcls), the principal's form, a name ZooKeeper cannot hold
    (AclAuthorizer.validateAclBinding)."""
    resource_type = _decode(ResourceType, c.resource_type)
    pattern_type = _decode(PatternType, c.resource_pattern_type)
    operation = _decode(AclOperation, c.operation)
    permission = _decode(AclPermissionType, c.permission_type)
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {resource_type.name}")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {pattern_type.name}")
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl(f"Invalid operation {operation.name}")
    if permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"Invalid permissionType {permission.name}")
    name, principal = c.resource_name, c.principal
    if resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not name:
        raise InvalidAcl("Invalid empty resource name")
    if ":" not in principal:
        raise InvalidAcl(f"Could not parse principal from `{principal}` (no colon is present separating "
                         "the principal type from the principal name)")
    if "/" in name:
        # The name is a znode's name (/kafka-acl/<type>/<name>); Kafka's answer hides the cause.
        raise InvalidAcl("Failed to create ACL")
    return AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern_type,
                      principal=principal, host=c.host, operation=operation, permission=permission)


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None and ANY match anything; pattern type MATCH matches
    the ACLs that apply to the named resource (its literal ACLs, the literal "*" ones, and
    the prefixed ones whose name starts the resource's)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_request(cls, f: Any) -> AclBindingFilter:
        """From a DescribeAcls request or a DeleteAcls filter (the same field names)."""
        return cls(_decode(ResourceType, f.resource_type_filter), f.resource_name_filter,
                   _decode(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
                   _decode(AclOperation, f.operation), _decode(AclPermissionType, f.permission_type))

    def unknown(self) -> str | None:
        """Kafka's message when a part is UNKNOWN (AclControlManager.validateFilter)."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == AclPermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        return self._matches_pattern(b) and self._matches_entry(b)

    def _matches_pattern(self, b: AclBinding) -> bool:
        # Kafka's ResourcePatternFilter.matches
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != b.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.resource_name == b.resource_name
        if b.pattern_type == PatternType.LITERAL:       # the filter is MATCH from here on
            return b.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        if b.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(b.resource_name)
        return False

    def _matches_entry(self, b: AclBinding) -> bool:
        # Kafka's AccessControlEntryFilter.matches
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == AclOperation.ANY or self.operation == b.operation)
                and (self.permission == AclPermissionType.ANY or self.permission == b.permission))


def _store_error(e: Exception, what: str) -> tuple[int, str | None]:
    """A failed store write as a result's code and message (Kafka's ApiError.fromThrowable:
    no message for an unexpected error)."""
    if isinstance(e, KafkaError):
        return e.code, e.message
    log.exception("%s failed", what, exc_info=e)
    return Code.UNKNOWN_SERVER_ERROR, None


@handles("CreateAcls", (0, 3))
async def create_acls(services: AclServices, request: Any, ctx: RequestContext) -> dict:
    creations = request.creations
    denied = _cluster_denied(services, ctx, AclOperation.ALTER)
    if denied is not None:
        return {"throttle_time_ms": 0,
                "results": [_result(Code.CLUSTER_AUTHORIZATION_FAILED, denied) for _ in creations]}
    if not services.authorizer.enabled:
        return {"throttle_time_ms": 0,
                "results": [_result(Code.SECURITY_DISABLED, NO_AUTHORIZER) for _ in creations]}
    results: list[dict] = []
    valid: dict[int, AclBinding] = {}         # creation index -> its ACL
    for i, c in enumerate(creations):
        try:
            valid[i] = binding_from_creation(c)
            results.append(_result())
        except InvalidAcl as e:
            results.append(_result(Code.INVALID_REQUEST, str(e)))
    existing = set(services.store.acls())
    # An ACL that exists already is created again successfully, as Kafka's set union.
    new = [b for b in dict.fromkeys(valid.values()) if b not in existing]
    if new:
        try:
            await services.store.create_acls(new)
        except Exception as e:
            code, message = _store_error(e, "CreateAcls")
            for i in valid:
                results[i] = _result(code, message)
    return {"throttle_time_ms": 0, "results": results}


@handles("DescribeAcls", (0, 3))
def describe_acls(services: AclServices, request: Any, ctx: RequestContext) -> dict:
    def failed(code: int, message: str) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}

    denied = _cluster_denied(services, ctx, AclOperation.DESCRIBE)
    if denied is not None:
        return failed(Code.CLUSTER_AUTHORIZATION_FAILED, denied)
    if not services.authorizer.enabled:
        return failed(Code.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE)
    acl_filter = AclBindingFilter.from_request(request)
    unknown = acl_filter.unknown()
    if unknown is not None:
        return failed(Code.INVALID_REQUEST, unknown)
    # Grouped by resource pattern, as Kafka's DescribeAclsResponse.aclsResources.
    resources: dict[tuple[ResourceType, str, PatternType], list[dict]] = {}
    for b in services.store.acls():
        if acl_filter.matches(b):
            resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                {"principal": b.principal, "host": b.host, "operation": int(b.operation),
                 "permission_type": int(b.permission)})
    return {"throttle_time_ms": 0, "error_code": Code.NONE, "error_message": None,
            "resources": [{"resource_type": int(rt), "resource_name": name, "pattern_type": int(pt),
                           "acls": acls}
                          for (rt, name, pt), acls in resources.items()]}


@handles("DeleteAcls", (0, 3))
async def delete_acls(services: AclServices, request: Any, ctx: RequestContext) -> dict:
    def every_filter(code: int, message: str) -> dict:
        return {"throttle_time_ms": 0,
                "filter_results": [{**_result(code, message), "matching_acls": []} for _ in request.filters]}

    denied = _cluster_denied(services, ctx, AclOperation.ALTER)
    if denied is not None:
        return every_filter(Code.CLUSTER_AUTHORIZATION_FAILED, denied)
    if not services.authorizer.enabled:
        return every_filter(Code.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [AclBindingFilter.from_request(f) for f in request.filters]
    invalid = [f.unknown() for f in filters]
    deleted: dict[AclBinding, int] = {}       # ACL -> the first filter that matched it
    for b in services.store.acls():
        for i, f in enumerate(filters):
            if invalid[i] is None and f.matches(b):
                deleted[b] = i
                break
    failure: tuple[int, str | None] = (Code.NONE, None)
    if deleted:
        try:
            await services.store.delete_acls(list(deleted))
        except Exception as e:
            failure = _store_error(e, "DeleteAcls")
    matching: list[list[dict]] = [[] for _ in filters]
    for b, i in deleted.items():
        matching[i].append({
            **_result(*failure), "resource_type": int(b.resource_type), "resource_name": b.resource_name,
            "pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission)})
    return {"throttle_time_ms": 0,
            "filter_results": [{**(_result(Code.INVALID_REQUEST, message) if message else _result()),
                                "matching_acls": matching[i]}
                               for i, message in enumerate(invalid)]}
