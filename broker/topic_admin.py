"""Topic lifecycle shared by CreateTopics, Metadata auto-creation, DeleteTopics,
CreatePartitions and the config APIs: validation, replica assignment, and applying the
result to the coordinator and to this broker's partitions.
"""
from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING

from clients.protocol.errors import (
    InvalidPartitionsError, InvalidReplicaAssignmentError,
    InvalidReplicationFactorError, InvalidRequestError, InvalidTopicExceptionError,
    TopicAlreadyExistsError, TopicDeletionDisabledError, UnknownTopicOrPartitionError,
)
from zkcoord.store import TopicMetadata

if TYPE_CHECKING:
    from .main import Broker

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str | None) -> None:
    """Kafka's rules (Topic.validate)."""
    if not name:
        raise InvalidTopicExceptionError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicExceptionError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicExceptionError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicExceptionError(
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'")


class TopicAdmin:
    def __init__(self, broker: "Broker"):
        self.broker = broker

    def assign_replicas(self, first_partition: int, count: int, replication_factor: int) -> dict[int, list[int]]:
        """Round-robin replicas over live brokers, starting each partition one broker on."""
        brokers = sorted(b.broker_id for b in self.broker.coordinator.live_brokers())
        if replication_factor < 1 or replication_factor > len(brokers):
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
                if replication_factor > len(brokers) else "Replication factor must be larger than 0.")
        out = {}
        for p in range(first_partition, first_partition + count):
            out[p] = [brokers[(p + i) % len(brokers)] for i in range(replication_factor)]
        return out

    def _check_assignments(self, assignments: dict[int, list[int]]) -> None:
        live = {b.broker_id for b in self.broker.coordinator.live_brokers()}
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) > 1:
            raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
        for p, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(f"Duplicate brokers in the assignment of partition {p}")
            if not set(replicas) <= live:
                raise InvalidReplicaAssignmentError(f"Unknown broker in the assignment of partition {p}")

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     assignments: dict[int, list[int]] | None = None, configs: dict[str, str] | None = None,
                     validate_only: bool = False) -> TopicMetadata:
        validate_topic_name(name)
        cfg = self.broker.config
        if self.broker.coordinator.topic(name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        configs = self.broker.validate_topic_configs(configs or {})
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set.")
            if sorted(assignments) != list(range(len(assignments))):
                raise InvalidReplicaAssignmentError("Partitions should be a consecutive 0-based integer sequence")
            self._check_assignments(assignments)
            plan = {p: list(r) for p, r in assignments.items()}
        else:
            n = cfg.get("num.partitions") if num_partitions == -1 else num_partitions
            rf = cfg.get("default.replication.factor") if replication_factor == -1 else replication_factor
            if n < 1:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            plan = self.assign_replicas(0, n, rf)
        if validate_only:
            return TopicMetadata(name, uuid.UUID(int=0), plan, configs)
        meta = await self.broker.coordinator.create_topic(name, plan, configs)
        self.broker.apply_topic(meta)
        if self.broker.cluster_mode:
            await self.broker.wait_for_leaders(name, len(plan), 10.0)
        return meta

    async def delete(self, name: str) -> TopicMetadata:
        meta = self.broker.coordinator.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        if not self.broker.config.get("delete.topic.enable"):
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        await self.broker.coordinator.delete_topic(name)
        if not self.broker.cluster_mode:      # in a cluster, the controller's StopReplica does it
            for p in list(meta.partitions):
                self.broker.replicas.delete_partition(name, p)
            self.broker.forget_topic(name)
        return meta

    async def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                             validate_only: bool) -> TopicMetadata:
        meta = self.broker.coordinator.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = len(meta.partitions)
        if count < current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise InvalidPartitionsError(f"Topic already has {current} partitions.")
        rf = len(next(iter(meta.partitions.values())))
        if assignments:
            if len(assignments) != count - current:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(assignments)} assignments provided.")
            new = {current + i: list(r) for i, r in enumerate(assignments)}
            self._check_assignments(new)
            if any(len(r) != rf for r in new.values()):
                raise InvalidReplicaAssignmentError("Inconsistent replication factor")
        else:
            new = self.assign_replicas(current, count - current, rf)
        if validate_only:
            return meta
        meta = await self.broker.coordinator.add_partitions(name, new)
        self.broker.apply_topic(meta)
        return meta

    async def set_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        meta = self.broker.coordinator.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        configs = self.broker.validate_topic_configs(configs)
        if validate_only:
            return
        meta = await self.broker.coordinator.set_topic_configs(name, configs)
        self.broker.replicas.update_log_config(name, self.broker.log_config_for(meta))

