"""How this broker's partitions follow a topic that was created, grown or deleted in the
metadata store.

Standalone, this broker is the whole cluster: it leads every partition at once (leader
epoch 0, ISR itself) and deletes a deleted topic's logs itself. In a cluster the controller
decides (LeaderAndIsr, StopReplica); the broker only waits, as Kafka's delayed topic
operations do, so that CreateTopics answers once every partition has a leader and
DeleteTopics once the controller finished. Runs on the event loop.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from zkcoord.store import MetadataStore, TopicMetadata

from .metadata_cache import MetadataCache, PartitionInfo
from .stats import BrokerTopicStats
from .replication.replica_manager import ReplicaManager
from .topic_configs import TopicConfigResolver


class TopicPlacement(Protocol):
    async def created(self, meta: TopicMetadata) -> None: ...
    async def partitions_added(self, meta: TopicMetadata) -> None: ...
    async def deleted(self, meta: TopicMetadata) -> None: ...


class StandalonePlacement:
    def __init__(self, broker_id: int, replicas: ReplicaManager, metadata: MetadataCache,
                 topic_configs: TopicConfigResolver, topic_stats: BrokerTopicStats) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.metadata = metadata
        self.topic_configs = topic_configs
        self.topic_stats = topic_stats
        # Told of each partition this broker starts to lead (the group coordinator loads
        # the offsets topic's partitions), as LeaderAndIsr tells it in a cluster.
        self.on_become_leader: Callable[[str, int], None] = lambda topic, partition: None

    def lead(self, meta: TopicMetadata) -> None:
        """Lead every partition of `meta` not led yet (start-up, creation, new partitions)."""
        cfg = self.topic_configs.log_config_for(meta)
        for index, replicas in sorted(meta.partitions.items()):
            if self.broker_id in replicas and self.replicas.maybe_get(meta.name, index) is None:
                self.replicas.become_leader(meta.name, meta.topic_id, index, replicas, 0, cfg)
                self.metadata.set_partition(meta.name, index, PartitionInfo(
                    self.broker_id, 0, list(replicas), [self.broker_id]))
                self.on_become_leader(meta.name, index)

    async def created(self, meta: TopicMetadata) -> None:
        self.lead(meta)

    async def partitions_added(self, meta: TopicMetadata) -> None:
        self.lead(meta)

    async def deleted(self, meta: TopicMetadata) -> None:
        for p in list(meta.partitions):
            self.replicas.delete_partition(meta.name, p)
        self.metadata.remove_topic(meta.name)
        self.topic_stats.remove_topic(meta.name)


class ClusterPlacement:
    def __init__(self, metadata: MetadataCache, store: MetadataStore) -> None:
        self.metadata = metadata
        self.store = store

    async def created(self, meta: TopicMetadata) -> None:
        await self.metadata.wait_for_leaders(meta.name, len(meta.partitions), 10.0)

    async def partitions_added(self, meta: TopicMetadata) -> None:
        pass                                  # the controller's LeaderAndIsr follows

    async def deleted(self, meta: TopicMetadata) -> None:
        # Kafka answers DeleteTopics once the controller completed the deletion.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30.0
        while self.store.topic(meta.name) is not None and loop.time() < deadline:
            await asyncio.sleep(0.05)
