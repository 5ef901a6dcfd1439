"""The authorizer handlers ask before they act: may `principal`, connected from `host`, do
`operation` on a resource? Kafka's Authorizer interface, narrowed to what handlers use.

`AllowAll` is the broker's authorizer when `authorizer.class.name` is empty (Kafka's
default: no authorizer, everything allowed). `AclAuthorizer` is Kafka's
kafka.security.authorizer.AclAuthorizer over the ACLs of the metadata store: the same
decisions, answered from an index that `refresh()` rebuilds whenever the ACLs change.
"""
from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Protocol

from clients.protocol.acl import (
    WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AclOperation, AclPermissionType,
    PatternType, ResourceType,
)
from zkcoord.store import AclBinding


class Authorizer(Protocol):
    """What a handler may ask. `enabled` False means every answer is True, so a hot path
    may skip its checks altogether."""

    enabled: bool

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        """Whether the ACLs allow `operation` on the literal resource (Kafka's
        AclAuthorizer.authorize for one action)."""
        ...

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether `operation` is allowed on at least one resource of the type (KIP-679:
        an idempotent producer may InitProducerId if it may Write to some topic)."""
        ...


class AllowAll:
    """No authorizer configured: everything is allowed."""

    enabled = False

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        return True

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True


# The ACL operations whose ALLOW allows an operation: itself, ALL, and for Describe and
# DescribeConfigs the operations that imply them (Kafka's AclOperation docs, and
# AclAuthorizer.authorizeAction's allowOps). A DENY implies nothing: it denies its own
# operation, or every one when it is ALL.
_IMPLIED = {
    AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.ALTER_CONFIGS,),
}
_ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    op: frozenset((op, AclOperation.ALL, *_IMPLIED.get(op, ()))) for op in AclOperation}


class _Entry(NamedTuple):
    """One access control entry, without its resource (Kafka's AccessControlEntry)."""
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


# Kafka's ResourceTypeKey: (entry, resource type, pattern type) -> the names it is on.
_TypeKey = tuple[_Entry, ResourceType, PatternType]


class _AclIndex:
    """An immutable snapshot of every ACL, arranged for the two questions: the entries on
    one resource (literal name, literal "*", and each prefix of the name that carries
    PREFIXED ACLs), and, per entry and resource type, the names it is on (KIP-679)."""

    __slots__ = ("literal", "prefixed", "prefix_lengths", "by_type")

    def __init__(self, bindings: Iterable[AclBinding]):
        # resource -> its entries, each once (a dict keeps their order)
        literal: dict[tuple[ResourceType, str], dict[_Entry, None]] = {}
        prefixed: dict[tuple[ResourceType, str], dict[_Entry, None]] = {}
        by_type: dict[_TypeKey, set[str]] = {}
        for b in bindings:
            entry = _Entry(b.principal, b.host, AclOperation(b.operation), AclPermissionType(b.permission))
            rt, pt = ResourceType(b.resource_type), PatternType(b.pattern_type)
            if pt == PatternType.LITERAL:
                table = literal
            elif pt == PatternType.PREFIXED:
                table = prefixed
            else:
                continue                    # a stored ACL is LITERAL or PREFIXED; ignore anything else
            table.setdefault((rt, b.resource_name), {})[entry] = None
            by_type.setdefault((entry, rt, pt), set()).add(b.resource_name)
        self.literal = {k: tuple(v) for k, v in literal.items()}
        self.prefixed = {k: tuple(v) for k, v in prefixed.items()}
        lengths: dict[ResourceType, set[int]] = {}
        for rt, name in prefixed:
            lengths.setdefault(rt, set()).add(len(name))
        # Only the prefix lengths that exist are looked up, so a resource costs a few dict
        # lookups however many prefixed ACLs there are.
        self.prefix_lengths = {rt: tuple(sorted(ls)) for rt, ls in lengths.items()}
        self.by_type = {k: frozenset(v) for k, v in by_type.items()}

    def matching(self, resource_type: ResourceType, name: str) -> list[_Entry]:
        """Every entry that applies to the resource (Kafka's AclAuthorizer.matchingAcls)."""
        found: list[_Entry] = []
        wildcard = self.literal.get((resource_type, WILDCARD_RESOURCE))
        if wildcard:
            found.extend(wildcard)
        if name != WILDCARD_RESOURCE:
            exact = self.literal.get((resource_type, name))
            if exact:
                found.extend(exact)
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = self.prefixed.get((resource_type, name[:length]))
            if entries:
                found.extend(entries)
        return found

    def names(self, principals: tuple[str, ...], hosts: tuple[str, ...], operations: tuple[AclOperation, ...],
              permission: AclPermissionType, resource_type: ResourceType, pattern_type: PatternType
              ) -> list[frozenset[str]]:
        """The name sets of every (principal, host, operation) combination that has ACLs
        (Kafka's AclAuthorizer.matchingResources)."""
        found = []
        for p in principals:
            for h in hosts:
                for o in operations:
                    names = self.by_type.get((_Entry(p, h, o, permission), resource_type, pattern_type))
                    if names:
                        found.append(names)
        return found


class AclAuthorizer:
    """Kafka's AclAuthorizer: ACLs decide, DENY wins over ALLOW, super users may do
    anything, and a resource without any ACL is allowed only when
    `allow_everyone_if_no_acl_found` (Kafka's allow.everyone.if.no.acl.found).

    `acls` gives every ACL (the store's cache); `refresh()` reads it again and swaps in a
    new index at once, so a decision never sees half an update. Call it after the store has
    started and on each AclsChanged event. Decisions are plain dict lookups, safe to make
    from the event loop at any time."""

    enabled = True

    def __init__(self, acls: Callable[[], Iterable[AclBinding]], *,
                 super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 loaded: bool = True):
        """`loaded` False: the store has not read the ACLs yet (a broker listens before its
        store starts), so only super users are allowed until `refresh(loaded=True)`;
        allow.everyone.if.no.acl.found must not open a window before the ACLs are known."""
        self._acls = acls
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._loaded = loaded
        self._index = _AclIndex(())
        if loaded:
            self.refresh()

    def refresh(self, loaded: bool = False) -> None:
        """Rebuild the index from the current ACLs; `loaded`: the store has read them all."""
        self._index = _AclIndex(self._acls())
        self._loaded = self._loaded or loaded

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        if principal in self.super_users:
            return True
        if not self._loaded:
            return False
        acls = self._index.matching(resource_type, resource_name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        for e in acls:
            if (e.permission == AclPermissionType.DENY
                    and (e.operation == operation or e.operation == AclOperation.ALL)
                    and (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                    and (e.host == host or e.host == WILDCARD_HOST)):
                return False
        allowing = _ALLOWED_BY[operation]
        for e in acls:
            if (e.permission == AclPermissionType.ALLOW
                    and e.operation in allowing
                    and (e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                    and (e.host == host or e.host == WILDCARD_HOST)):
                return True
        return False

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """KIP-679, as Kafka's AclAuthorizer.authorizeByResourceType: allowed when some
        ALLOW ACL (literal or prefixed) for the principal, host and operation (or ALL) is
        not dominated by a DENY: a DENY on the literal "*" dominates everything; a DENY on
        a literal name dominates an ALLOW on that literal; a DENY on a prefix dominates
        every ALLOW whose name starts with it. An ALLOW on the literal "*" is dominated
        only by a DENY on "*". Implied operations (Read implies Describe) do not count."""
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete resource type, not {resource_type.name}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete operation, not {operation.name}")
        if principal in self.super_users:
            return True
        if not self._loaded:
            return False
        index = self._index
        principals = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        hosts = (host,) if host == WILDCARD_HOST else (host, WILDCARD_HOST)
        ops = (operation,) if operation == AclOperation.ALL else (operation, AclOperation.ALL)

        def names(permission: AclPermissionType, pattern: PatternType) -> list[frozenset[str]]:
            return index.names(principals, hosts, ops, permission, resource_type, pattern)

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if any(WILDCARD_RESOURCE in s for s in deny_literals):
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)
        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        if not deny_literals and not deny_prefixes:
            return bool(allow_prefixes or allow_literals)

        def dominated_by_prefix_deny(name: str) -> bool:
            return any(name[:n] in s for n in range(len(name) + 1) for s in deny_prefixes)

        for allowed in allow_prefixes:
            if any(not dominated_by_prefix_deny(name) for name in allowed):
                return True
        for allowed in allow_literals:
            for name in allowed:
                if name == WILDCARD_RESOURCE:
                    return True
                if not any(name in s for s in deny_literals) and not dominated_by_prefix_deny(name):
                    return True
        return False
