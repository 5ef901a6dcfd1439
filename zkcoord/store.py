"""The metadata store: what a broker needs from the cluster's metadata, in the broker's types.

Two implementations: `local.LocalMetadataStore` (one standalone broker, a JSON file under
log.dirs) and `zookeeper.ZkMetadataStore` (cluster mode, Kafka's znodes). The broker speaks
only the types defined here (`BrokerInfo`, `TopicMetadata`, `LeaderAndIsr`, the change
events); each implementation converts them to and from its own format, which no broker
module reads or writes (the znode layout is `zk_paths`, used by the ZooKeeper store and the
controller only). Methods are called from the broker's event loop; implementations must not
block it for long (the ZooKeeper one hands kazoo's calls to its threads).
"""
from __future__ import annotations

import abc
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType


@dataclass
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]            # partition -> replica broker ids
    configs: dict[str, str] = field(default_factory=dict)   # per-topic overrides only
    # A reassignment in progress (KIP-455): partition -> replicas being added / removed.
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leadership as the store keeps it (Kafka's LeaderAndIsr): its leader,
    leader epoch, ISR and the controller epoch that decided them."""
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int


@dataclass(frozen=True)
class TopicConfigChanged:
    """A topic's config overrides changed, whichever broker or tool wrote them."""
    name: str
    configs: Mapping[str, str]


@dataclass(frozen=True)
class BrokerConfigsChanged:
    """The dynamic broker configs changed: the cluster-wide defaults, or this broker's own."""
    defaults: Mapping[str, str]
    own: Mapping[str, str]


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (principal, from which host) may or may not (permission) do what
    (operation) on which resources (type, name, and whether the name is literal or a prefix)."""
    resource_type: ResourceType     # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...
    resource_name: str
    pattern_type: PatternType       # LITERAL or PREFIXED
    principal: str                  # "User:alice"
    host: str                       # "*" or an IP
    operation: AclOperation
    permission: AclPermissionType   # ALLOW or DENY


@dataclass(frozen=True)
class AclsChanged:
    """The ACLs changed, whichever broker or tool wrote them: read `acls()` again."""


@dataclass(frozen=True)
class UserScramCredentialsChanged:
    """A user's SCRAM credentials changed (Kafka's /config/users/<user>)."""
    user: str


# The SCRAM mechanisms whose credentials a user's config holds (Kafka's ScramMechanism).
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# What a store tells the broker that subscribed to it.
StoreEvent = Union[TopicConfigChanged, BrokerConfigsChanged, AclsChanged,
                   UserScramCredentialsChanged]


class MetadataStore(abc.ABC):
    cluster_id: str

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        for t in self.topics().values():
            if t.topic_id == topic_id:
                return t
        return None

    @abc.abstractmethod
    async def create_topic(self, name: str, partitions: dict[int, list[int]],
                           configs: dict[str, str]) -> TopicMetadata:
        """Raises TopicAlreadyExistsError."""

    @abc.abstractmethod
    async def delete_topic(self, name: str) -> None: ...

    @abc.abstractmethod
    async def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata: ...

    @abc.abstractmethod
    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata: ...

    @abc.abstractmethod
    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """Dynamic broker configs as stored: one broker's (its id) or the cluster-wide
        defaults (None). Kafka's /config/brokers/<id> and /config/brokers/<default>."""

    async def fetch_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """As broker_configs(), read from the store itself rather than a cache."""
        return self.broker_configs(broker_id)

    @abc.abstractmethod
    async def set_broker_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        """Replace one broker's (or, with None, the cluster-wide) dynamic configs."""

    @abc.abstractmethod
    def live_brokers(self) -> list[BrokerInfo]: ...

    @property
    @abc.abstractmethod
    def controller_id(self) -> int: ...

    @abc.abstractmethod
    async def allocate_producer_ids(self, count: int) -> int:
        """Reserve `count` producer ids cluster-wide; returns the first."""

    # ------------------------------------------------------------ change events

    @abc.abstractmethod
    def subscribe(self, callback: Callable[[Any], Any]) -> Callable[[], None]:
        """Call `callback(event)` on the loop for every StoreEvent, in order, right after the
        store's reads reflect it; a store may deliver other events of its own, which a
        callback ignores. It must not block. Returns an unsubscribe function."""

    # ------------------------------------------------------------ ACLs

    @abc.abstractmethod
    def acls(self) -> list[AclBinding]:
        """Every ACL, from the store's cache (kept current by watches in a cluster)."""

    @abc.abstractmethod
    async def create_acls(self, bindings: list[AclBinding]) -> None:
        """Add these ACLs (present ones stay as they are); AclsChanged follows."""

    @abc.abstractmethod
    async def delete_acls(self, bindings: list[AclBinding]) -> None:
        """Remove exactly these ACLs (absent ones are ignored); AclsChanged follows."""

    # ------------------------------------------------------------ SCRAM credentials

    @abc.abstractmethod
    def scram_users(self) -> dict[str, dict[str, str]]:
        """user -> {mechanism: credential} for every user with SCRAM credentials, from the
        cache."""

    def user_scram_credentials(self, user: str) -> dict[str, str]:
        """A user's credentials: mechanism ("SCRAM-SHA-256") -> Kafka's credential string
        "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"; {} when none."""
        return dict(self.scram_users().get(user, {}))

    @abc.abstractmethod
    async def alter_user_scram_credentials(self, user: str,
                                           changes: Mapping[str, str | None]) -> None:
        """Set (a credential string) or delete (None) the given mechanisms of one user; the
        user's other configs stay. UserScramCredentialsChanged follows a change."""
