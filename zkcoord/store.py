"""The Coordinator interface: what a broker needs from the cluster's metadata store.

Two implementations: `local.LocalCoordinator` (one standalone broker, persisted under
log.dirs) and the ZooKeeper one (cluster mode). Brokers never touch the store's format.
Methods are called from the broker's event loop; implementations must not block it for
long (the ZooKeeper one runs kazoo calls in a thread).
"""
from __future__ import annotations

import abc
import uuid
from dataclasses import dataclass, field


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

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


class Coordinator(abc.ABC):
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
