"""The cluster-mode metadata store: metadata in ZooKeeper, laid out as Kafka's ZK mode lays it
out (paths and JSON in `zk_paths`).

`ZkMetadataStore` presents the store's interface (`store.MetadataStore`) by composing parts
of one job each:

- `zk_session.ZkSession`: the kazoo client, its requests as awaitables (nothing blocks the
  asyncio loop; kazoo's threads only hand results over);
- `zk_cluster_view.ClusterView`: the watches, the caches they keep (`topics()`,
  `live_brokers()`, `controller_id`) and the events told to subscribers, all changed by ONE
  consumer task in order;
- `zk_topic_writes.TopicWrites`: topics and configs as AdminZkClient writes them;
- `zk_partition_states.PartitionStates`: compare-and-set partition states, ISR change
  notifications, preferred replica election requests;
- `zk_election.ControllerElection`: /controller and /controller_epoch;
- `zk_producer_ids`: producer id blocks;
- `zk_acls.ZkAcls` and `zk_users.ZkUsers`: ACLs and users' SCRAM credentials as Kafka's
  AclAuthorizer and AdminZkClient keep them, cached on every broker and followed through
  their change notifications (parts of the cluster view, so its one consumer changes them).

This module itself registers the broker (ephemeral /brokers/ids/<id>, again in every new
session after an expiry, as Kafka does) and keeps the cluster id. Writes that must not
overwrite newer state are conditional on a znode version (ZooKeeper's compare-and-set):
partition states, the topic assignment, the producer id block, and the controller epoch. A
controller passes `controller_epoch_zk_version` (from its election) to its writes, which then
run in a transaction with a check of /controller_epoch, so a deposed controller's write fails
with ControllerMovedError (invariant 4 of docs/ARCHITECTURE.md).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from . import zk_log_dir_events
from . import zk_paths as zp
from .store import (AclBinding, AclsChanged, BrokerConfigsChanged, BrokerInfo, LeaderAndIsr,
                    MetadataStore, TopicConfigChanged, TopicMetadata,
                    UserScramCredentialsChanged)
from .zk_acls import ZkAcls
from .zk_cluster_view import NO_CONTROLLER, ClusterView
from .zk_election import ControllerElection
from .zk_errors import (BrokerIdInUseError, ControllerMovedError, NoPartitionStateError,
                        PartitionStateExistsError, StaleZkVersionError, ZkStoreError,
                        ZkNotConnectedError)
from .zk_events import (BrokerModified, BrokersChanged, ControllerChanged, IsrChangesNotified,
                        PreferredReplicaElectionRequested, SessionReestablished,
                        SessionStateChanged, TopicDeletionsRequested, TopicModified,
                        TopicsChanged, ZkEvent)
from .zk_partition_states import PartitionStates
from .zk_paths import (BrokerRegistration, ControllerRegistration, EndPoint, PartitionState,
                       TopicAssignment, TopicPartition)
from .zk_producer_ids import allocate_producer_ids
from .zk_registration import SessionRecord, register_broker
from .zk_session import ZkSession, split_connect
from .zk_topic_writes import TopicWrites
from .zk_users import ZkUsers

log = logging.getLogger("strom.zkcoord")

__all__ = [
    "ZkMetadataStore", "NO_CONTROLLER", "split_connect",
    "ZkStoreError", "ZkNotConnectedError", "BrokerIdInUseError", "StaleZkVersionError",
    "ControllerMovedError", "PartitionStateExistsError", "NoPartitionStateError",
    "BrokersChanged", "BrokerModified", "TopicsChanged", "TopicModified", "TopicConfigChanged",
    "BrokerConfigsChanged", "ControllerChanged", "TopicDeletionsRequested", "IsrChangesNotified",
    "PreferredReplicaElectionRequested", "SessionStateChanged", "SessionReestablished", "ZkEvent",
    "AclsChanged", "UserScramCredentialsChanged",
]


class ZkMetadataStore(MetadataStore):
    """The metadata store over ZooKeeper (kazoo). Use from one asyncio loop. `broker=None`
    makes an admin-style client that registers nothing (its controller-election broker id
    must then be passed explicitly)."""

    def __init__(self, connect: str, broker: BrokerInfo | None, *,
                 session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None,
                 endpoints: list[EndPoint] | None = None,
                 jmx_port: int = -1,
                 listener_name: str | None = None):
        self.connect = connect
        self.broker = broker
        self.broker_id = broker.broker_id if broker is not None else -1
        self.session_timeout = session_timeout_ms / 1000.0
        self.connection_timeout = (connection_timeout_ms if connection_timeout_ms is not None
                                   else session_timeout_ms) / 1000.0
        if endpoints is None and broker is not None:
            endpoints = [EndPoint("PLAINTEXT", broker.host, broker.port, "PLAINTEXT")]
        self.endpoints = endpoints or []
        self.jmx_port = jmx_port
        # Which registered endpoint live_brokers() reports (Kafka answers Metadata with the
        # endpoint of the listener the request came in on).
        self.listener_name = listener_name or (self.endpoints[0].listener_name
                                               if self.endpoints else "PLAINTEXT")
        self.cluster_id = ""
        self.session = ZkSession(connect, self.session_timeout, self.connection_timeout)
        self.view = ClusterView(self.session, self.broker_id, self.listener_name)
        self.view.on_new_session = self._on_new_session
        self.election = ControllerElection(self.session, self.view)
        self.topic_writes = TopicWrites(self.session, self.view)
        self.partition_states = PartitionStates(self.session)
        self.acl_store = ZkAcls(self.session, self.view)
        self.user_store = ZkUsers(self.session, self.view)
        self.view.add_part(self.acl_store)
        self.view.add_part(self.user_store)

    @classmethod
    def for_broker(cls, broker: BrokerInfo, connect: str, *,
                   advertised_listeners: Iterable[tuple[str, str, int]],
                   security_protocols: Mapping[str, str],
                   session_timeout_ms: int, connection_timeout_ms: int) -> "ZkMetadataStore":
        """The store of a broker that registers `broker` with its advertised listeners, each
        a (name, host, port) whose security protocol `security_protocols` maps by name (Kafka's
        zookeeper.connect, zookeeper.session.timeout.ms, zookeeper.connection.timeout.ms,
        advertised.listeners and listener.security.protocol.map)."""
        endpoints = [EndPoint(name, host, port, security_protocols.get(name, name))
                     for name, host, port in advertised_listeners]
        return cls(connect, broker, session_timeout_ms=session_timeout_ms,
                   connection_timeout_ms=connection_timeout_ms, endpoints=endpoints)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.view.reset()
        self.election.clear()
        await self.session.open(self.view.on_session_state)
        self.view.start()
        try:
            await asyncio.gather(*(self.session.ensure_path(p) for p in zp.PERSISTENT_PATHS),
                                 self.acl_store.ensure_paths())
            self.cluster_id = await self._get_or_create_cluster_id()
            if self.broker is not None:
                # The credentials and ACLs first: once registered, the controller and the
                # other brokers connect, and a SCRAM login needs the credential cached.
                await self.view.sync(self.user_store.resync)
                await self.view.sync(self.acl_store.resync)
                await self._register_broker()
            await self.view.sync(self.view.resync)
        except BaseException:
            await self.stop()
            raise
        log.info("ZooKeeper metadata store started: %s, session 0x%x, cluster id %s, broker %d",
                 self.connect, self.session.session_id or 0, self.cluster_id, self.broker_id)

    async def stop(self) -> None:
        """Close the session: this broker's ephemeral znodes (registration, /controller)
        vanish at once."""
        self.session.closing = True
        await self.view.stop()
        await self.session.close()

    @property
    def client(self) -> KazooClient:
        return self.session.client

    @property
    def session_id(self) -> int | None:
        return self.view.session_id

    # ------------------------------------------------------------ reads (the view's caches)

    def topics(self) -> dict[str, TopicMetadata]:
        return self.view.topics

    def live_brokers(self) -> list[BrokerInfo]:
        return self.view.live_brokers()

    def broker_registrations(self) -> dict[int, BrokerRegistration]:
        return dict(self.view.brokers)

    @property
    def controller_id(self) -> int:
        return self.view.controller_id

    def topics_pending_deletion(self) -> frozenset[str]:
        """Cached children of /admin/delete_topics."""
        return self.view.deletions

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        return dict(self.view.broker_configs.get(broker_id, {}))

    def subscribe(self, callback: Callable[[Any], Any]) -> Callable[[], None]:
        """Call `callback(event)` for every ZkEvent and StoreEvent, on the loop, in order, right after the
        caches reflect it. It must not block; hand work to a task or queue. Returns an
        unsubscribe function."""
        return self.view.subscribe(callback)

    # ------------------------------------------------------------ topics and configs

    async def create_topic(self, name: str, partitions: dict[int, list[int]],
                           configs: dict[str, str]) -> TopicMetadata:
        return await self.topic_writes.create_topic(name, partitions, configs)

    async def delete_topic(self, name: str) -> None:
        await self.topic_writes.delete_topic(name)

    async def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata:
        return await self.topic_writes.add_partitions(name, new)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        return await self.topic_writes.set_topic_configs(name, configs)

    async def fetch_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        return await self.topic_writes.fetch_broker_configs(broker_id)

    async def set_broker_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        await self.topic_writes.set_broker_configs(broker_id, configs)

    async def topic_assignment(self, name: str) -> tuple[TopicAssignment, int] | None:
        return await self.topic_writes.topic_assignment(name)

    async def topics_marked_for_deletion(self) -> set[str]:
        return await self.topic_writes.topics_marked_for_deletion()

    async def write_topic_assignment(self, name: str, assignment: TopicAssignment, expected_version: int,
                                     *, controller_epoch_zk_version: int) -> int | None:
        return await self.topic_writes.write_topic_assignment(
            name, assignment, expected_version, controller_epoch_zk_version=controller_epoch_zk_version)

    async def complete_topic_deletion(self, name: str, *,
                                      controller_epoch_zk_version: int | None = None) -> None:
        await self.topic_writes.complete_topic_deletion(
            name, controller_epoch_zk_version=controller_epoch_zk_version)

    # ------------------------------------------------------------ ACLs and SCRAM credentials

    def acls(self) -> list[AclBinding]:
        return self.acl_store.bindings()

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        await self.acl_store.create(bindings)

    async def delete_acls(self, bindings: list[AclBinding]) -> None:
        await self.acl_store.delete(bindings)

    def scram_users(self) -> dict[str, dict[str, str]]:
        return self.user_store.scram_users()

    def user_scram_credentials(self, user: str) -> dict[str, str]:
        return dict(self.user_store.cache.get(user, {}))

    async def alter_user_scram_credentials(self, user: str,
                                           changes: Mapping[str, str | None]) -> None:
        await self.user_store.alter(user, changes)

    # ------------------------------------------------------------ producer ids

    async def allocate_producer_ids(self, count: int) -> int:
        return await allocate_producer_ids(self.session, self.broker_id, count)

    # ------------------------------------------------------------ partition states

    async def get_partition_state(self, topic: str, partition: int
                                  ) -> tuple[PartitionState, int] | None:
        return await self.partition_states.get(topic, partition)

    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, tuple[PartitionState, int]]:
        return await self.partition_states.get_many(partitions)

    async def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     *, controller_epoch_zk_version: int | None = None) -> int:
        return await self.partition_states.create(
            topic, partition, state, controller_epoch_zk_version=controller_epoch_zk_version)

    async def create_partition_states(self, states: Mapping[TopicPartition, PartitionState], *,
                                      controller_epoch_zk_version: int | None = None
                                      ) -> dict[TopicPartition, int | Exception]:
        return await self.partition_states.create_many(
            states, controller_epoch_zk_version=controller_epoch_zk_version)

    async def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     expected_version: int, *,
                                     controller_epoch_zk_version: int | None = None) -> int:
        return await self.partition_states.update(
            topic, partition, state, expected_version,
            controller_epoch_zk_version=controller_epoch_zk_version)

    async def update_partition_states(
            self, updates: Mapping[TopicPartition, tuple[PartitionState, int]], *,
            controller_epoch_zk_version: int | None = None) -> dict[TopicPartition, int | Exception]:
        return await self.partition_states.update_many(
            updates, controller_epoch_zk_version=controller_epoch_zk_version)

    async def update_isr_as_leader(self, topic: str, partition: int, state: LeaderAndIsr,
                                   expected_version: int) -> tuple[list[int], int] | None:
        """A leader's conditional ISR write at its own leader epoch: the ISR the partition
        then has, with its zk version (the next `expected_version`); None when the
        partition has another leader or epoch by now (this leader's view is stale)."""
        znode = PartitionState(state.leader, state.leader_epoch, list(state.isr), state.controller_epoch)
        return await self.partition_states.update_isr_as_leader(topic, partition, znode,
                                                                expected_version)

    async def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        return await self.partition_states.notify_isr_change(partitions)

    async def isr_change_notifications(self) -> dict[str, set[TopicPartition]]:
        return await self.partition_states.isr_change_notifications()

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        await self.partition_states.delete_isr_change_notifications(names)

    async def request_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        await self.partition_states.request_preferred_replica_election(partitions)

    async def preferred_replica_election(self) -> set[TopicPartition] | None:
        return await self.partition_states.preferred_replica_election()

    async def clear_preferred_replica_election(self) -> None:
        await self.partition_states.clear_preferred_replica_election()

    # ------------------------------------------------------------ controller election

    @property
    def controller_epoch_zk_version(self) -> int | None:
        return self.election.controller_epoch_zk_version

    @property
    def elected_controller_epoch(self) -> int | None:
        return self.election.elected_controller_epoch

    @property
    def is_controller(self) -> bool:
        return self.election.is_controller

    async def try_elect_controller(self, broker_id: int | None = None) -> int | None:
        """Run for controller as `broker_id` (default: this broker); the new epoch, or None
        when another broker is (or just became) controller."""
        return await self.election.try_elect(self.broker_id if broker_id is None else broker_id)

    async def resign_controller(self) -> bool:
        return await self.election.resign()

    async def controller_epoch(self) -> int:
        return await self.election.controller_epoch()

    async def controller_epoch_and_zk_version(self) -> tuple[int, int] | None:
        return await self.election.controller_epoch_and_zk_version()

    async def read_controller(self) -> ControllerRegistration | None:
        return await self.election.read_controller()

    async def remove_dead_controller(self, broker_id: int) -> bool:
        return await self.election.remove_dead_controller(broker_id)

    async def reassign_partitions_request(self) -> tuple[dict[TopicPartition, list[int]], int] | None:
        return await self.partition_states.reassign_partitions_request()

    async def finish_reassign_partitions(self, done: Iterable[TopicPartition]) -> None:
        await self.partition_states.finish_reassign_partitions(done)

    async def log_dir_failure_events(self) -> dict[str, int]:
        return await zk_log_dir_events.log_dir_failure_events(self.session)

    async def delete_log_dir_events(self, names: Iterable[str]) -> None:
        await zk_log_dir_events.delete_log_dir_events(self.session, names)

    # ------------------------------------------------------------ cluster id, registration

    async def _get_or_create_cluster_id(self) -> str:
        while True:
            got = await self.session.get(zp.CLUSTER_ID)
            if got is not None:
                return zp.decode_cluster_id(got[0])
            new_id = zp.new_cluster_id()
            try:
                await self.session.create(zp.CLUSTER_ID, zp.encode_cluster_id(new_id), makepath=True)
                log.info("created cluster id %s", new_id)
                return new_id
            except NodeExistsError:
                continue          # another broker won the race: read its id

    def _registration(self) -> BrokerRegistration:
        assert self.broker is not None
        return BrokerRegistration(self.broker_id, list(self.endpoints), self.broker.rack,
                                  self.jmx_port)

    # The broker's record of its session in its locked first log dir (set by broker.main.run):
    # lets a restart end its previous run's session instead of waiting for it to expire.
    session_record: SessionRecord | None = None

    async def _register_broker(self) -> None:
        """Register this broker (zk_registration.register_broker: a previous run's session
        still holding the id is ended or waited out, in one log line)."""
        path = zp.broker_path(self.broker_id)
        await register_broker(self.session, self.broker_id, path, zp.encode_broker(self._registration()),
                              self.session_record, self.session_timeout)
        log.info("registered broker %d at %s with endpoints %s", self.broker_id, path,
                 [e.connection_string for e in self.endpoints])

    async def _on_new_session(self) -> tuple[bool, str | None]:
        """A new session replaced an expired one: register again (ephemeral znodes died with
        the old session, /controller among them, so any won election is over)."""
        registered, error = self.broker is None, None
        if self.broker is not None:
            try:
                await self._register_broker()
                registered = True
            except Exception as e:
                error = str(e)
                log.error("re-registering broker %d failed: %s", self.broker_id, e)
        self.election.clear()
        return registered, error

    async def generate_broker_id(self, reserved_broker_max_id: int = 1000) -> int:
        """Kafka's broker.id.generation: the new version of /brokers/seqid plus
        reserved.broker.max.id."""
        stat = await self.session.set(zp.BROKER_SEQID, b"")
        return stat.version + reserved_broker_max_id
