"""ACL bindings and filters as the admin client takes and returns them, and the bodies of
CreateAcls, DescribeAcls and DeleteAcls at each version (sans-io: no connection here).

The types are Kafka's `org.apache.kafka.common.acl.AclBinding` / `AclBindingFilter` with the
resource pattern and the access control entry flattened into one record, plus the two halves
(`ResourcePattern`, `AccessControlEntry`) that kafka-acls prints. `str()` of each gives Kafka's
`toString()`, which is what Kafka's tools print:

    ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)
    (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

Version rules (Kafka's request builders): version 0 of the three APIs has no pattern type
field and means LITERAL, so a PREFIXED binding or a PREFIXED/MATCH filter cannot be sent at
v0 (UnsupportedVersionError); a filter's ANY pattern is sent as LITERAL there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable

from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.schema import Struct

__all__ = ["ResourcePattern", "AccessControlEntry", "AclBinding", "AclBindingFilter",
           "create_acls_request", "describe_acls_request", "delete_acls_request",
           "bindings_from_describe", "binding_from_match", "check_creatable"]

_ANY = "<any>"


def _text(value: str | None) -> str:
    return _ANY if value is None else value


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A resource pattern (resource_type, name, pattern_type), or a filter of them when a
    field is ANY / MATCH / None."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={_text(self.name)}, patternType={self.pattern_type.name})")


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """Who may (or may not) do what from where; a filter of entries when a field is
    None / ANY."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={_text(self.principal)}, host={_text(self.host)}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: `principal` ("User:alice") is allowed or denied `operation` from `host`
    ("*" for any) on the resources `pattern_type` selects with `name` (LITERAL: that name,
    or every name when "*"; PREFIXED: every name starting with it)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __post_init__(self) -> None:
        _coerce_enums(self)

    @property
    def pattern(self) -> ResourcePattern:
        return ResourcePattern(self.resource_type, self.name, self.pattern_type)

    @property
    def entry(self) -> AccessControlEntry:
        return AccessControlEntry(self.principal, self.host, self.operation, self.permission)

    @classmethod
    def of(cls, pattern: ResourcePattern, entry: AccessControlEntry) -> "AclBinding":
        if pattern.name is None or entry.principal is None or entry.host is None:
            raise ValueError(f"an ACL binding needs a name, a principal and a host: "
                             f"{pattern} {entry}")
        return cls(pattern.resource_type, pattern.name, pattern.pattern_type, entry.principal,
                   entry.host, entry.operation, entry.permission)

    def to_filter(self) -> "AclBindingFilter":
        """The filter matching exactly this binding."""
        return AclBindingFilter(self.resource_type, self.name, self.pattern_type, self.principal,
                                self.host, self.operation, self.permission)

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True)
class AclBindingFilter:
    """Selects ACL bindings: a None field, or ANY, matches every value. `pattern_type` ANY
    matches literal and prefixed bindings whose name equals `name`; MATCH selects every
    binding that applies to the resource `name` (literal, the "*" wildcard, and prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    ANY: ClassVar["AclBindingFilter"]       # matches every binding (Kafka's AclBindingFilter.ANY)

    def __post_init__(self) -> None:
        _coerce_enums(self)

    @classmethod
    def of(cls, pattern: ResourcePattern,
           entry: AccessControlEntry | None = None) -> "AclBindingFilter":
        """`pattern` (a pattern or pattern filter) and `entry` (None: any entry)."""
        e = entry or AccessControlEntry(None, None, AclOperation.ANY, AclPermissionType.ANY)
        return cls(pattern.resource_type, pattern.name, pattern.pattern_type, e.principal,
                   e.host, e.operation, e.permission)

    @property
    def pattern(self) -> ResourcePattern:
        return ResourcePattern(self.resource_type, self.name, self.pattern_type)

    @property
    def entry(self) -> AccessControlEntry:
        return AccessControlEntry(self.principal, self.host, self.operation, self.permission)

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern}, entryFilter={self.entry})"


_ENUM_FIELDS: tuple[tuple[str, Any], ...] = (
    ("resource_type", ResourceType), ("pattern_type", PatternType),
    ("operation", AclOperation), ("permission", AclPermissionType))


def _coerce_enums(obj: Any) -> None:
    # Plain ints (wire codes) become the enum members, so equality and hashing agree.
    for name, enum_cls in _ENUM_FIELDS:
        value = getattr(obj, name)
        coerced = enum_cls.ANY if value is None else enum_cls(value)
        if coerced is not value:
            object.__setattr__(obj, name, coerced)


AclBindingFilter.ANY = AclBindingFilter()


# ---------------------------------------------------------------------- requests

def _unsupported(message: str) -> KafkaError:
    return for_code(Code.UNSUPPORTED_VERSION)(message)


def check_creatable(binding: AclBinding) -> None:
    """InvalidRequestError unless every field of `binding` is concrete (no ANY, MATCH or
    UNKNOWN; a name, principal and host), as Kafka's admin client checks before sending."""
    problems = []
    if binding.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        problems.append(f"resource type {binding.resource_type.name}")
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        problems.append(f"pattern type {binding.pattern_type.name}")
    if binding.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        problems.append(f"operation {binding.operation.name}")
    if binding.permission in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
        problems.append(f"permission type {binding.permission.name}")
    for what in ("name", "principal", "host"):
        if not isinstance(getattr(binding, what), str):
            problems.append(f"no {what}")
    if problems:
        raise for_code(Code.INVALID_REQUEST)(
            f"invalid ACL creation {binding}: {', '.join(problems)}")


def create_acls_request(bindings: Iterable[AclBinding], version: int) -> dict[str, Any]:
    """The CreateAcls body for `version`."""
    creations = []
    for b in bindings:
        if version == 0 and b.pattern_type != PatternType.LITERAL:
            raise _unsupported(f"CreateAcls v0 (the broker's highest) cannot carry the "
                               f"{b.pattern_type.name} ACL {b}")
        creations.append({
            "resource_type": int(b.resource_type), "resource_name": b.name,
            "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
            "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)})
    return {"creations": creations}


def _filter_fields(f: AclBindingFilter, api_name: str, version: int) -> dict[str, Any]:
    pattern = f.pattern_type
    if version == 0:
        if pattern == PatternType.ANY:
            pattern = PatternType.LITERAL       # v0 brokers know literal ACLs only
        if pattern != PatternType.LITERAL:
            raise _unsupported(f"{api_name} v0 (the broker's highest) only filters literal "
                               f"ACLs, not {f.pattern_type.name}: {f}")
    if pattern == PatternType.UNKNOWN or f.resource_type == ResourceType.UNKNOWN \
            or f.operation == AclOperation.UNKNOWN or f.permission == AclPermissionType.UNKNOWN:
        raise for_code(Code.INVALID_REQUEST)(f"filter contains UNKNOWN elements: {f}")
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(pattern), "principal_filter": f.principal,
            "host_filter": f.host, "operation": int(f.operation),
            "permission_type": int(f.permission)}


def describe_acls_request(f: AclBindingFilter, version: int) -> dict[str, Any]:
    """The DescribeAcls body for `version`."""
    return _filter_fields(f, "DescribeAcls", version)


def delete_acls_request(filters: Iterable[AclBindingFilter], version: int) -> dict[str, Any]:
    """The DeleteAcls body for `version`."""
    return {"filters": [_filter_fields(f, "DeleteAcls", version) for f in filters]}


# ---------------------------------------------------------------------- responses

def bindings_from_describe(resp: Struct) -> list[AclBinding]:
    """Every binding in a DescribeAcls answer (its error code is the caller's to check)."""
    out = []
    for r in resp.resources:
        pattern = r.get("pattern_type", PatternType.LITERAL)
        for a in r.acls:
            out.append(AclBinding(ResourceType(r.resource_type), r.resource_name,
                                  PatternType(pattern), a.principal, a.host,
                                  AclOperation(a.operation), AclPermissionType(a.permission_type)))
    return out


def binding_from_match(m: Struct) -> AclBinding:
    """One `matching_acls` entry of a DeleteAcls answer."""
    return AclBinding(ResourceType(m.resource_type), m.resource_name,
                      PatternType(m.get("pattern_type", PatternType.LITERAL)), m.principal,
                      m.host, AclOperation(m.operation), AclPermissionType(m.permission_type))
