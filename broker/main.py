"""Wires a broker together and runs it: `python -m broker config/server.properties`.

Standalone (no `zookeeper.connect`): this broker is the whole cluster; topic metadata lives
under the first log dir (zkcoord.local). Background maintenance (retention, flush, recovery
point checkpoints, delayed file deletes) runs as periodic tasks on the same event loop.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
import time
from typing import Callable, cast

from clients.aio.security import ClientSecurity
from clients.protocol.messages import API_BY_NAME
from zkcoord.controller import Controller, ControllerSettings
from zkcoord.local import LocalMetadataStore
from zkcoord.store import AclsChanged, BrokerInfo, LeaderAndIsr, MetadataStore
from zkcoord.zk_registration import SessionRecord
from zkcoord.zk_log_dir_events import announce_log_dir_failure
from zkcoord.zookeeper import ZkMetadataStore
from zkcoord.zk_quotas import ZkQuotas

from .background import BackgroundTasks
from .config import BrokerConfig, ConfigError
from .controlled_shutdown import controlled_shutdown
from .dynamic_configs import DynamicBrokerConfigs
from .group.coordinator import GroupCoordinator
from .group.settings import GroupSettings
from .group.offsets import OFFSETS_TOPIC
from .heap import freeze_startup_objects, retain_freed_memory
from .log import LogManager
from .log.dir_mover import LogDirMover
from .log.dir_lock import lock_log_dirs
from .metadata_cache import MetadataCache
from .metrics import BrokerMetrics, MetricSources
from .metrics.http import load_http_framework
from .replication.throttle import replication_throttles
from .replication.fetcher import FetcherSettings, ReplicaFetcherManager
from .replication.isr_announcer import IsrChangeAnnouncer
from .replication.partition import Partition
from .replication.purgatory import FetchPurgatory
from .replication.replica_manager import ReplicaManager
from .server import handlers  # noqa: F401  (registers every handler)
from .server.connection_quotas import ConnectionQuotas, connection_quotas
from .quota.manager import QuotaSettings
from .quota.service import ClientQuotas
from .server.dispatch import Dispatcher
from .server.handlers.sasl import authenticate_token
from .server.fetch_sessions import FetchSessionCache
from .server.network import KafkaServer
from .security.authorizer import AclAuthorizer, AllowAll, Authorizer
from .security.listener_setup import (ListenerTransport, inter_broker_security, listener_transports,
                                      sasl_server)
from .server.services import ApiServices
from .startup_errors import describe_startup_failure, load_config
from .stats import BrokerTopicStats, ControllerStats, RequestStats
from .topic_admin import TopicAdmin
from .topic_configs import TopicConfigResolver
from .topic_placement import ClusterPlacement, StandalonePlacement, TopicPlacement
from .txn.coordinator import TransactionCoordinator
from .txn.marker_sender import TxnMarkerSender
from .txn.producer_ids import ProducerIdManager
from .txn.settings import TxnSettings
from .txn.state_manager import TXN_TOPIC, TransactionStateManager
from .txn.verifier import TxnVerifier

log = logging.getLogger("strom.broker")

# The hot APIs, dispatched as their frame arrives (see broker.server.network): their handlers
# do their work in a plain call and return a coroutine only when they must wait.
EAGER_API_KEYS = frozenset(API_BY_NAME[name].key for name in ("Produce", "Fetch"))


class Broker:
    """Builds the components, hands each the collaborators it uses, and starts and stops
    them in order. Holds no policy of its own."""

    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 transports: dict[str, ListenerTransport] | None = None,
                 inter_broker: ClientSecurity | None = None, quotas: ConnectionQuotas | None = None):
        """`transports`: each listener's TLS context (listener_transports(config));
        `inter_broker`: how to connect to other brokers (inter_broker_security(config)).
        Both are built before the loop starts, so a bad key store stops the broker with one
        line; they are built here when not given."""
        self.config = config
        self.transports = transports if transports is not None else listener_transports(config)
        self.inter_broker = inter_broker if inter_broker is not None else inter_broker_security(config)
        self.quotas = quotas if quotas is not None else connection_quotas(config)
        self.broker_id = config.broker_id   # standalone: -1 already became 0
        # Hot-path counters, kept whether or not the metrics port is set (plain ints: cheap).
        self.topic_stats = BrokerTopicStats()
        self.request_stats = RequestStats()
        self.controller_stats = ControllerStats()
        self.metrics: BrokerMetrics | None = None
        # Brokers reach each other on the inter-broker listener; a client is given the
        # addresses of the listener it came in on (MetadataCache.alive_brokers).
        self.listener_name = config.inter_broker_listener_name
        adv = next(a for a in config.advertised_listeners if a.name == self.listener_name)
        self.advertised = BrokerInfo(self.broker_id, adv.host, adv.port, config.get("broker.rack"))
        self.metadata = MetadataCache(self.advertised, {a.name: (a.host, a.port)
                                                        for a in config.advertised_listeners})
        self.topic_configs = TopicConfigResolver(config)
        self.log_manager = LogManager(
            config.log_dirs, self.topic_configs.default_log_config(),
            producer_id_expiration_ms=config.get("producer.id.expiration.ms"),
            cleaner_enabled=config.get("log.cleaner.enable"),
            cleaner_dedupe_buffer_size=config.get("log.cleaner.dedupe.buffer.size"),
            writeback_interval_bytes=config.get("log.writeback.interval.bytes"))
        self.purgatory = FetchPurgatory()
        self.fetch_sessions = FetchSessionCache(
            config.get("max.incremental.fetch.session.cache.slots"),
            config.get("min.incremental.fetch.session.eviction.ms"))
        self.replicas = ReplicaManager(self.broker_id, self.log_manager, self.purgatory)
        # Replication throttles (KIP-73): rates and throttled replicas are dynamic configs, read
        # at each use (self.store is set below, before any fetch).
        self.leader_throttle, self.follower_throttle = replication_throttles(
            self.broker_id, config, lambda topic, key: (
                meta.configs.get(key) if (meta := self.store.topic(topic)) is not None else None))
        self.fetchers = ReplicaFetcherManager(
            self.broker_id, FetcherSettings(config.get("replica.fetch.wait.max.ms"),
                                            config.get("replica.fetch.max.bytes"),
                                            config.get("replica.fetch.response.max.bytes")),
            self.replicas, self.topic_stats, self.metadata.broker, security=self.inter_broker,
            throttle=self.follower_throttle)
        self.replicas.on_become_follower = self.fetchers.add_partition
        self.replicas.on_stop_following = self.fetchers.remove_partition
        self.cluster_mode = not config.standalone
        self.store: MetadataStore
        self.controller: Controller | None = None
        self.isr_announcer: IsrChangeAnnouncer | None = None
        placement: TopicPlacement
        self.zk_store: ZkMetadataStore | None = None
        if self.cluster_mode:
            assert config.zookeeper_connect is not None
            self.store = self.zk_store = ZkMetadataStore.for_broker(
                self.advertised, config.zookeeper_connect,
                # The inter-broker listener first: the store reports live brokers on it.
                advertised_listeners=sorted(config.advertised_listeners,
                                            key=lambda a: a[0] != self.listener_name),
                security_protocols=config.security_protocol_map,
                session_timeout_ms=config.get("zookeeper.session.timeout.ms"),
                connection_timeout_ms=config.zookeeper_connection_timeout_ms)
            self.controller = Controller(
                ControllerSettings(self.broker_id, self.listener_name,
                                   auto_leader_rebalance=config.get("auto.leader.rebalance.enable"),
                                   imbalance_check_interval_s=config.get(
                                       "leader.imbalance.check.interval.seconds"),
                                   imbalance_ratio=config.get("leader.imbalance.per.broker.percentage") / 100.0,
                                   security=self.inter_broker),
                self.zk_store, self.controller_stats,
                unclean_leader_election=lambda: bool(config.get("unclean.leader.election.enable")),
                on_elected=lambda epoch: self.metadata.elected_here(self.broker_id, epoch))
            self.replicas.isr_writer = self._write_isr
            self.isr_announcer = IsrChangeAnnouncer(self.zk_store.notify_isr_change)
            placement = ClusterPlacement(self.metadata, self.store)
        else:
            self.store = LocalMetadataStore(config.log_dirs[0], self.advertised)
            self.standalone = StandalonePlacement(self.broker_id, self.replicas, self.metadata,
                                                  self.topic_configs, self.topic_stats)
            placement = self.standalone
        self.dynamic_configs = DynamicBrokerConfigs(self.broker_id, config, self.store, self.log_manager,
                                                    self.replicas, self.topic_configs)
        # Moves between log dirs (AlterReplicaLogDirs); a failed dir is announced to the controller.
        self.dir_mover = LogDirMover(self.log_manager,
                                     lambda: self.dynamic_configs.replication_throttles().alter_log_dirs_rate)
        if self.zk_store is not None:
            zk_session = self.zk_store.session
            self.replicas.on_log_dir_failure = lambda _dir: announce_log_dir_failure(zk_session, self.broker_id)
        if self.controller is not None:
            controller = self.controller
            self.dynamic_configs.on_change = lambda changed: (
                controller.unclean_default_changed() if "unclean.leader.election.enable" in changed else None)
        self.client_quotas = ClientQuotas(
            ZkQuotas(self.zk_store.session, self.zk_store.view, self.zk_store.user_store)
            if self.zk_store is not None else cast(LocalMetadataStore, self.store),
            QuotaSettings.from_config(config))
        self.producer_ids = ProducerIdManager(self.store)
        self.topic_admin = TopicAdmin(config, self.store, self.topic_configs, self.replicas, placement)
        self.group_coordinator = GroupCoordinator(GroupSettings.from_config(config), self.store,
                                                  self.topic_admin, self.replicas, clock, wall_ms)
        txn_settings = TxnSettings.from_config(config)
        self.txn_state = TransactionStateManager(txn_settings, self.store, self.topic_admin,
                                                 self.replicas, wall_ms)
        self.txn_coordinator = TransactionCoordinator(
            txn_settings, self.txn_state, self.producer_ids,
            TxnMarkerSender(self.broker_id, self.metadata, security=self.inter_broker), wall_ms)
        self.txn_verifier = TxnVerifier(self.broker_id, self.metadata, self.txn_state,
                                        self.txn_coordinator.verify,
                                        local_add=self.txn_coordinator.add_partitions,
                                        security=self.inter_broker)
        if not self.cluster_mode:
            self.standalone.on_become_leader = self._standalone_leads
        self.acl_authorizer: AclAuthorizer | None = None
        authorizer: Authorizer = AllowAll()
        if config.acl_authorizer:
            authorizer = self.acl_authorizer = AclAuthorizer(
                self.store.acls, super_users=config.super_users, loaded=False,
                allow_everyone_if_no_acl_found=config.get("allow.everyone.if.no.acl.found"))
            acl_authorizer = self.acl_authorizer
            self.store.subscribe(lambda event: acl_authorizer.refresh()
                                 if isinstance(event, AclsChanged) else None)
        self.services = ApiServices(
            self.broker_id, self.listener_name, self.cluster_mode, config, self.store, self.metadata,
            self.replicas, self.purgatory, self.fetch_sessions, self.topic_stats, self.topic_admin,
            self.topic_configs, self.dynamic_configs, self.group_coordinator, self.producer_ids,
            self.controller, self.txn_coordinator, self.txn_verifier, authorizer,
            sasl_server(config, self.store.user_scram_credentials), self.leader_throttle)
        self.servers: list[KafkaServer] = []
        self.background = BackgroundTasks(config, self.log_manager, self.replicas,
                                          self.isr_announcer, self.group_coordinator.tick,
                                          self.txn_coordinator.abort_timed_out,
                                          self.txn_coordinator.remove_expired)
        self._stopped = asyncio.Event()

    def _standalone_leads(self, topic: str, index: int) -> None:
        """Standalone: the coordinators load the internal partitions this broker leads."""
        if topic == OFFSETS_TOPIC:
            self.group_coordinator.on_become_leader(index)
        elif topic == TXN_TOPIC:
            self.txn_state.on_become_leader(index, 0)

    # ------------------------------------------------------------ lifecycle
    async def _write_isr(self, p: Partition, new_isr: list[int]) -> tuple[list[int], int] | None:
        """A leader's ISR change: a conditional write of the partition state (so a deposed
        leader's write fails), then a notification for the controller to propagate."""
        assert self.zk_store is not None
        state = LeaderAndIsr(self.broker_id, p.leader_epoch, new_isr, p.controller_epoch)
        written = await self.zk_store.update_isr_as_leader(p.topic, p.index, state, p.partition_epoch)
        if written is None:
            log.info("%s-%d: ISR change refused, leader epoch %d is stale", p.topic, p.index, p.leader_epoch)
            return None
        if self.isr_announcer is not None:
            self.isr_announcer.changed((p.topic, p.index))
        return written

    def _acls_loaded(self) -> None:
        """The store has read every ACL: the authorizer decides by them from now on."""
        if self.acl_authorizer is not None:
            self.acl_authorizer.refresh(loaded=True)

    async def _listen(self) -> None:
        self.client_quotas.reload()
        dispatcher = Dispatcher(self.services, self.request_stats, self.client_quotas)
        max_request = self.config.get("socket.request.max.bytes")
        for name, host, port in self.config.listeners:
            transport = self.transports[name]
            server = KafkaServer(host, port, dispatcher, listener_name=name, max_request_size=max_request,
                                 eager_api_keys=EAGER_API_KEYS,
                                 security_protocol=self.config.security_protocol(name),
                                 ssl_context=transport.ssl_context, ssl_principal=transport.ssl_principal,
                                 sasl_max_receive_size=self.config.get("sasl.server.max.receive.size"),
                                 raw_sasl=authenticate_token,
                                 failed_authentication_delay_ms=self.config.get(
                                     "connection.failed.authentication.delay.ms"),
                                 quotas=self.quotas,
                                 idle_timeout_ms=self.config.get("connections.max.idle.ms"))
            await server.start()
            self.servers.append(server)
        for server in self.servers:
            host, port = self.metadata.this_endpoints.get(server.listener_name, ("", -1))
            if port == 0:
                # An ephemeral listener port (tests): advertise the port actually bound.
                self.metadata.this_endpoints[server.listener_name] = (host, server.bound_port)
                if server.listener_name == self.listener_name:
                    self.advertised.port = server.bound_port
                if self.zk_store is not None:
                    # ...and register it: the other brokers and the controller connect to it.
                    self.zk_store.endpoints = [
                        dataclasses.replace(e, port=server.bound_port)
                        if e.listener_name == server.listener_name and e.port == 0 else e
                        for e in self.zk_store.endpoints]

    async def start(self) -> None:
        if self.config.metrics_port >= 0:
            # Before any listener opens: no client waits on the import (hundreds of ms),
            # and the metrics port opens right after the Kafka listeners.
            load_http_framework()
        if self.cluster_mode:
            # Listening before registering (Kafka's order): once the controller sees this
            # broker in ZooKeeper, its first UpdateMetadata can be delivered.
            await self._listen()
            assert self.zk_store is not None
            self.zk_store.subscribe(self.dynamic_configs.on_store_event)
            await self.store.start()
            self._acls_loaded()
            self.dynamic_configs.load()
        else:
            # Standalone: topics are loaded before the first client can ask for them.
            await self.store.start()
            self._acls_loaded()
            self.dynamic_configs.load()
            self.metadata.brokers = {b.broker_id: b for b in self.store.live_brokers()}
            self.metadata.set_controller(self.store.controller_id, 0)
            for meta in list(self.store.topics().values()):
                self.standalone.lead(meta)
            await self._listen()
        self.log_manager.write_meta_properties(self.broker_id, self.store.cluster_id)
        self.dir_mover.start()
        if self.controller is not None:
            await self.controller.start()
        if self.config.metrics_port >= 0:
            await self._start_metrics()
        self.background.start()

    async def _start_metrics(self) -> None:
        host = self.config.listeners[0].host
        self.metrics = BrokerMetrics(MetricSources(
            self.broker_id, self.advertised, self.cluster_mode, self.topic_stats, self.request_stats,
            self.replicas, self.fetch_sessions, self.log_manager, self.group_coordinator,
            self.controller, self.controller_stats, self.servers,
            zk_session=self.zk_store.session if self.zk_store is not None else None,
            metadata=self.metadata, client_quotas=self.client_quotas.managers), host, self.config.metrics_port)
        await self.metrics.start()

    async def stop(self) -> None:
        if self.cluster_mode:
            try:
                # Bounded: when the whole cluster stops at once there may be no controller
                # left to answer, and stopping must not hang on it.
                await asyncio.wait_for(controlled_shutdown(
                    self.broker_id, self.store, self.metadata, self.controller,
                    security=self.inter_broker), 8)
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
            if self.controller is not None:
                await self.controller.stop()
        # Produce requests still waiting for replication here will not complete: answer them
        # now so their clients retry on the new leaders instead of waiting out a timeout.
        self.replicas.fail_waiters()
        self.replicas.stop_isr_changes()
        if self.isr_announcer is not None:
            self.isr_announcer.stop()
        self.background.stop()
        for s in self.servers:
            await s.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        await self.fetchers.close()
        await self.txn_coordinator.close()
        await self.txn_verifier.close()
        self.purgatory.notify_all()
        await self.dir_mover.stop()
        self.log_manager.close()
        await self.store.stop()
        self._stopped.set()

    def describe_listeners(self) -> str:
        out = ", ".join(f"{s.listener_name}://{s.host}:{s.bound_port}" for s in self.servers)
        if self.metrics is not None and self.metrics.bound_port is not None:
            out += f", metrics http://{self.metrics.host}:{self.metrics.bound_port}/metrics"
        return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="strom-broker", description="Run a strom broker.")
    ap.add_argument("config", help="server.properties file (Kafka's key names)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="override a property from the file (repeatable), as kafka-server-start.sh")
    return ap.parse_args(argv)


async def run(config: BrokerConfig, transports: dict[str, ListenerTransport] | None = None,
              inter_broker: ClientSecurity | None = None, quotas: ConnectionQuotas | None = None) -> None:
    # Kafka's .lock in each log dir, held until the process ends: no other broker uses them
    # meanwhile, which is what lets the registration end this broker's previous session.
    locks = lock_log_dirs(config.log_dirs)
    broker = Broker(config, transports=transports, inter_broker=inter_broker, quotas=quotas)
    if broker.zk_store is not None:
        broker.zk_store.session_record = SessionRecord(config.log_dirs[0])
    await broker.start()
    print(f"strom broker {broker.broker_id} listening on {broker.describe_listeners()} "
          f"(advertised {broker.advertised.host}:{broker.advertised.port}), "
          f"log dirs {', '.join(config.log_dirs)}", flush=True)
    freeze_startup_objects()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    locks.release()
    print("strom broker stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--override {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = load_config(args.config, overrides)
        transports = listener_transports(config)
        inter_broker = inter_broker_security(config)
        quotas = connection_quotas(config)
    except (ConfigError, OSError) as e:
        print(f"strom: {e}", file=sys.stderr)
        return 1
    retain_freed_memory()
    try:
        asyncio.run(run(config, transports, inter_broker, quotas))
    except Exception as e:
        line = describe_startup_failure(e, config)
        if line is None:
            raise
        print(f"strom: {line}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
