"""The codes of Kafka's ACL model as they travel in CreateAcls, DescribeAcls and DeleteAcls
(org.apache.kafka.common.acl and .resource): resource types, pattern types, operations and
permission types, with the names Kafka's tools and ZooKeeper's JSON use.

Shared by the broker's authorizer, the admin client and kafka-acls.sh, so one table says what
"Read" or "TransactionalId" is on the wire.
"""
from __future__ import annotations

import enum


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def title(self) -> str:
        """Kafka's name in ZooKeeper paths and tool output: Topic, Group, Cluster, ..."""
        return "".join(w.capitalize() for w in self.name.split("_"))


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1        # filters only: literal or prefixed
    MATCH = 2      # filters only: the ACLs that apply to a resource (literal, wildcard, prefixed)
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def title(self) -> str:
        """Kafka's name in ZooKeeper's JSON and tool flags: Read, ClusterAction, ..."""
        return "".join(w.capitalize() for w in self.name.split("_"))


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return self.name.capitalize()


WILDCARD_RESOURCE = "*"             # a literal resource name matching every name
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"      # the one Cluster resource's name
ANONYMOUS = "User:ANONYMOUS"        # the principal of an unauthenticated PLAINTEXT connection


def parse_title(enum_cls: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """'Read' / 'read' / 'READ' / 'ClusterAction' / 'cluster_action' -> the member; ValueError
    naming the choices otherwise."""
    key = text.strip().replace("-", "_")
    for member in enum_cls:
        title = "".join(w.capitalize() for w in member.name.split("_"))
        if key.upper() == member.name or key.lower() == title.lower():
            return member
    choices = ", ".join("".join(w.capitalize() for w in m.name.split("_")) for m in enum_cls
                        if m.name not in ("UNKNOWN",))
    raise ValueError(f"{text!r} is not one of {choices}")
