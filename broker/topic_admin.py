"""Topic lifecycle shared by CreateTopics, Metadata auto-creation, DeleteTopics,
CreatePartitions and the config APIs: validation, replica assignment, the write to the
metadata store, and then this broker's partitions (through its TopicPlacement).
"""
from __future__ import annotations

import asyncio
import logging
import re
import uuid

from clients.protocol.errors import (
    Code, KafkaError, InvalidPartitionsError, InvalidReplicaAssignmentError,
    InvalidReplicationFactorError, InvalidRequestError, InvalidTopicExceptionError,
    TopicAlreadyExistsError, TopicDeletionDisabledError, UnknownTopicOrPartitionError,
)
from zkcoord.store import MetadataStore, TopicMetadata

from .config import BrokerConfig
from .replication.replica_manager import ReplicaManager
from .topic_configs import TopicConfigResolver
from .topic_placement import TopicPlacement

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


log = logging.getLogger(__name__)


class TopicAdmin:
    """Runs on the event loop; each operation's checks read the store's cache, so two
    concurrent creations of one name are settled by the store (TopicAlreadyExists)."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, topic_configs: TopicConfigResolver,
                 replicas: ReplicaManager, placement: TopicPlacement) -> None:
        self.config = config
        self.store = store
        self.topic_configs = topic_configs
        self.replicas = replicas
        self.placement = placement
        self._creating: dict[str, asyncio.Future[bool]] = {}

    async def ensure_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                    configs: dict[str, str], sizing_key: str) -> bool:
        """Create a coordinator's internal topic on first use, as Kafka does (one creation
        however many ask at once); False if it cannot be, logged with the config key that
        sizes it (`sizing_key`)."""
        if self.store.topic(name) is not None:
            return True
        fut = self._creating.get(name)
        if fut is None:
            fut = self._creating[name] = asyncio.ensure_future(
                self._create_internal(name, partitions, replication_factor, configs, sizing_key))
            fut.add_done_callback(lambda _: self._creating.pop(name, None))
        return await asyncio.shield(fut)

    async def _create_internal(self, name: str, partitions: int, replication_factor: int,
                               configs: dict[str, str], sizing_key: str) -> bool:
        try:
            await self.create(name, partitions, replication_factor, configs=configs)
            return True
        except KafkaError as e:
            if e.code == Code.TOPIC_ALREADY_EXISTS:
                return True
            log.warning("cannot create %s: %s (%s=%d)", name, e, sizing_key, replication_factor)
            return False

    def assign_replicas(self, first_partition: int, count: int, replication_factor: int) -> dict[int, list[int]]:
        """Kafka's assignment: leaders round-robin over the brokers, followers shifted; with
        `broker.rack` on every broker, the broker list alternates racks and each partition's
        replicas take distinct racks first (AdminUtils' rack-aware assignment)."""
        live = sorted(self.store.live_brokers(), key=lambda b: b.broker_id)
        if replication_factor < 1 or replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"Replication factor: {replication_factor} larger than available brokers: {len(live)}."
                if replication_factor > len(live) else "Replication factor must be larger than 0.")
        racks = {b.broker_id: b.rack for b in live if b.rack}
        if len(racks) == len(live) and len(set(racks.values())) > 1:
            return assign_rack_aware(first_partition, count, replication_factor, racks)
        ids = [b.broker_id for b in live]
        return assign_round_robin(first_partition, count, replication_factor, ids)

    def _check_assignments(self, assignments: dict[int, list[int]]) -> None:
        live = {b.broker_id for b in self.store.live_brokers()}
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
        cfg = self.config
        if self.store.topic(name) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        configs = self.topic_configs.validate(configs or {})
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
        meta = await self.store.create_topic(name, plan, configs)
        await self.placement.created(meta)
        return meta

    async def delete(self, name: str) -> TopicMetadata:
        meta = self.store.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
        if not self.config.get("delete.topic.enable"):
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        await self.store.delete_topic(name)
        await self.placement.deleted(meta)
        return meta

    async def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                             validate_only: bool) -> TopicMetadata:
        meta = self.store.topic(name)
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
        meta = await self.store.add_partitions(name, new)
        await self.placement.partitions_added(meta)
        return meta

    async def set_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        meta = self.store.topic(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        configs = self.topic_configs.validate(configs)
        if validate_only:
            return
        await self.store.set_topic_configs(name, configs)
        # From the coordinator's cache, not our own write: a newer write by another broker
        # may have landed meanwhile (the ZooKeeper watch applies that one too).
        meta = self.store.topic(name)
        if meta is not None:
            self.replicas.update_log_config(name, self.topic_configs.log_config_for(meta))



def assign_round_robin(first_partition: int, count: int, rf: int, brokers: list[int]) -> dict[int, list[int]]:
    """Leader of partition p on broker p mod n; followers at a shift that grows each time
    the leaders wrap around, so replicas of consecutive partitions spread (Kafka's scheme)."""
    n = len(brokers)
    out = {}
    for p in range(first_partition, first_partition + count):
        first = p % n
        next_shift = p // n
        # Kafka's replicaIndex: each follower's shift is in 1..n-1, so it never lands on the
        # leader, and followers of one partition take distinct shifts.
        out[p] = [brokers[first]] + [brokers[(first + 1 + (next_shift + j) % max(n - 1, 1)) % n]
                                     for j in range(rf - 1)]
    return out


def assign_rack_aware(first_partition: int, count: int, rf: int, racks: dict[int, str]) -> dict[int, list[int]]:
    """Brokers listed alternating racks (r1b0, r2b0, r1b1, ...); each partition's followers
    go to racks it does not use yet, then to brokers it does not use yet."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    arranged: list[int] = []
    rack_lists = [by_rack[r] for r in sorted(by_rack)]
    for i in range(max(len(lst) for lst in rack_lists)):
        arranged += [lst[i] for lst in rack_lists if i < len(lst)]
    n = len(arranged)
    n_racks = len(rack_lists)
    out = {}
    for p in range(first_partition, first_partition + count):
        leader = arranged[p % n]
        replicas = [leader]
        used_racks = {racks[leader]}
        k = (p % n) + 1 + (p // n) % max(n - 1, 1)
        while len(replicas) < rf:
            b = arranged[k % n]
            k += 1
            if b in replicas:
                continue
            if racks[b] in used_racks and len(used_racks) < n_racks:
                continue
            replicas.append(b)
            used_racks.add(racks[b])
        out[p] = replicas
    return out
