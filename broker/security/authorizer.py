"""The authorizer handlers ask before they act: may `principal`, connected from `host`, do
`operation` on a resource? Kafka's Authorizer interface, narrowed to what handlers use.

`AllowAll` is the broker's authorizer when `authorizer.class.name` is empty (Kafka's
default: no authorizer, everything allowed).
"""
from __future__ import annotations

from typing import Protocol

from clients.protocol.acl import AclOperation, ResourceType


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
