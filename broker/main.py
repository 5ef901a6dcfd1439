"""Wires a broker together and runs it: `python -m broker config/server.properties`.

Standalone (no `zookeeper.connect`): this broker is the whole cluster; topic metadata lives
under the first log dir (zkcoord.local). Background maintenance (retention, flush, recovery
point checkpoints, delayed file deletes) runs as periodic tasks on the same event loop.
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import signal
import sys
import time
from typing import Any

from clients.protocol.errors import InvalidConfigError
from clients.protocol.messages import API_BY_NAME

from .config import BrokerConfig, ConfigError, TopicConfigs
from .group.coordinator import GroupCoordinator
from .heap import freeze_startup_objects, retain_freed_memory
from .group.offsets import OFFSETS_TOPIC
from .log import LogConfig, LogManager
from .metadata_cache import MetadataCache, PartitionInfo
from .metrics import BrokerTopicStats, RequestStats
from .replication.fetcher import ReplicaFetcherManager
from .replication.isr_announcer import IsrChangeAnnouncer
from .replication.replica_manager import ReplicaManager
from .server import handlers  # noqa: F401  (registers every handler)
from .server.dispatch import Dispatcher
from .server.network import KafkaServer
from .server.fetch_sessions import FetchSessionCache
from .server.purgatory import FetchPurgatory
from .topic_admin import TopicAdmin
from .txn.producer_ids import ProducerIdManager

log = logging.getLogger("strom.broker")

# The hot APIs, dispatched as their frame arrives (see broker.server.network). Their
# handlers must not need a current task (asyncio.timeout, current_task()) before they
# first wait: they only append, read and wait on the purgatory.
EAGER_API_KEYS = frozenset(API_BY_NAME[name].key for name in ("Produce", "Fetch"))


class Broker:
    def __init__(self, config: BrokerConfig):
        from zkcoord.local import LocalCoordinator
        from zkcoord.store import BrokerInfo

        self.config = config
        self.broker_id = config.broker_id   # standalone: -1 already became 0
        # Hot-path counters, kept whether or not the metrics port is set (plain ints: cheap).
        self.topic_stats = BrokerTopicStats()
        self.request_stats = RequestStats()
        self.metrics: Any = None            # broker.metrics.BrokerMetrics once started
        adv = config.advertised_listeners[0]
        self.advertised = BrokerInfo(self.broker_id, adv[1], adv[2], config.get("broker.rack"))
        self.listener_name = adv[0]
        self.metadata = MetadataCache(self.advertised)
        self.log_manager = LogManager(
            config.log_dirs, LogConfig.from_topic_configs(config.topic_defaults()),
            producer_id_expiration_ms=config.get("producer.id.expiration.ms"),
            cleaner_enabled=config.get("log.cleaner.enable"),
            cleaner_dedupe_buffer_size=config.get("log.cleaner.dedupe.buffer.size"))
        self.purgatory = FetchPurgatory()
        self.fetch_sessions = FetchSessionCache(
            config.get("max.incremental.fetch.session.cache.slots"),
            config.get("min.incremental.fetch.session.eviction.ms"))
        self.replicas = ReplicaManager(self.broker_id, self.log_manager, self.purgatory)
        self.fetchers = ReplicaFetcherManager(self)
        self.replicas.on_become_follower = self.fetchers.add_partition
        self.replicas.on_stop_following = self.fetchers.remove_partition
        self.cluster_mode = not config.standalone
        if self.cluster_mode:
            from zkcoord.controller import Controller
            from zkcoord.zookeeper import ZkCoordinator
            self.coordinator = ZkCoordinator.from_config(config, self.advertised)
            self.controller: Any = Controller(self, self.coordinator)
            self.replicas.isr_writer = self._write_isr
            self.isr_announcer: IsrChangeAnnouncer | None = IsrChangeAnnouncer(self.coordinator.notify_isr_change)
        else:
            self.coordinator = LocalCoordinator(config.log_dirs[0], self.advertised)
            self.controller = None
            self.isr_announcer = None
        self.producer_ids = ProducerIdManager(self.coordinator)
        self.topic_admin = TopicAdmin(self)
        self.group_coordinator = GroupCoordinator(self)
        self.servers: list[KafkaServer] = []
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()

    # ------------------------------------------------------------ topic configs
    def validate_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        try:
            return TopicConfigs.validate(configs)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None

    def topic_config_values(self, overrides: dict[str, str]) -> dict[str, str]:
        return {**self.config.topic_defaults(), **overrides}

    def log_config_for(self, meta: Any) -> LogConfig:
        return LogConfig.from_topic_configs(self.topic_config_values(meta.configs))

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_topic_configs(self.config.topic_defaults())

    def describe_topic_configs(self, topic: str, overrides: dict[str, str]) -> list[dict]:
        from .server.handlers.configs import topic_config_entries
        return topic_config_entries(self, overrides, include_synonyms=False)

    def _on_cluster_event(self, event: Any) -> None:
        """Configs changed in ZooKeeper, whichever broker wrote them: a topic's (its replicas
        here take the new LogConfig, as Kafka's TopicConfigHandler) or the dynamic broker
        configs (Kafka's BrokerConfigHandler)."""
        from zkcoord.zookeeper import BrokerConfigsChanged, TopicConfigChanged
        if isinstance(event, TopicConfigChanged):
            meta = self.coordinator.topic(event.name)
            if meta is not None:
                self.replicas.update_log_config(event.name, self.log_config_for(meta))
        elif isinstance(event, BrokerConfigsChanged):
            self.apply_dynamic_configs(event.defaults, event.own)

    def check_dynamic_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        """What AlterConfigs may store for a BROKER resource (None: cluster-wide): each key
        (BrokerConfig.check_dynamic), then the topic defaults they make together, which
        must give a valid LogConfig (Kafka validates a reconfiguration the same way before
        storing it). ConfigError otherwise."""
        self.config.check_dynamic(configs, per_broker=broker_id is not None)
        defaults = configs if broker_id is None else self.coordinator.broker_configs(None)
        own = configs if broker_id is not None else self.coordinator.broker_configs(self.broker_id)
        try:
            LogConfig.from_topic_configs(self.config.topic_defaults_with(defaults, own))
        except ValueError as e:
            raise ConfigError(f"Invalid topic defaults: {e}", next(iter(configs), "")) from None

    def apply_dynamic_configs(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        """Put dynamic broker configs in force. They are all topic defaults
        (config.DYNAMIC_APPLIED): every log here whose topic does not set the key itself
        takes the new value at once (as Kafka's updateLogsConfig over all logs), as do logs
        created later; the controller reads unclean.leader.election.enable when it elects."""
        changed = self.config.set_dynamic(defaults, own, validate=LogConfig.from_topic_configs)
        if not changed:
            return
        log.info("dynamic broker configs changed: %s",
                 ", ".join(f"{k}={self.config.describe(k).value}" for k in sorted(changed)))
        self.log_manager.default_config = self.default_log_config()
        configs: dict[str, LogConfig] = {}
        for plog in self.log_manager.all_logs():
            if plog.topic not in configs:
                meta = self.coordinator.topic(plog.topic)
                configs[plog.topic] = (self.log_config_for(meta) if meta is not None
                                       else self.default_log_config())
            plog.update_config(configs[plog.topic])
        if self.controller is not None and "unclean.leader.election.enable" in changed:
            self.controller.unclean_default_changed()

    def _load_dynamic_configs(self) -> None:
        self.apply_dynamic_configs(self.coordinator.broker_configs(None),
                                   self.coordinator.broker_configs(self.broker_id))

    # ------------------------------------------------------------ partitions
    def apply_topic(self, meta: Any) -> None:
        """Standalone: lead every partition of `meta`. (In a cluster the controller decides,
        with LeaderAndIsr.)"""
        if self.cluster_mode:
            return
        cfg = self.log_config_for(meta)
        for index, replicas in sorted(meta.partitions.items()):
            if self.broker_id in replicas and self.replicas.maybe_get(meta.name, index) is None:
                self.replicas.become_leader(meta.name, meta.topic_id, index, replicas, 0, cfg)
                self.metadata.set_partition(meta.name, index, PartitionInfo(
                    self.broker_id, 0, list(replicas), [self.broker_id]))
                if meta.name == OFFSETS_TOPIC:
                    self.group_coordinator.on_become_leader(index)

    def forget_topic(self, name: str) -> None:
        self.metadata.remove_topic(name)
        self.topic_stats.remove_topic(name)

    def node(self, broker_id: int):
        """The advertised address of a live broker, or None."""
        return self.metadata.broker(broker_id)

    # ------------------------------------------------------------ lifecycle
    async def _write_isr(self, p: Any, new_isr: list[int]) -> tuple[list[int], int] | None:
        """A leader's ISR change: a conditional write of the partition state (so a deposed
        leader's write fails), then a notification for the controller to propagate."""
        from zkcoord import zk_paths as zp
        state = zp.PartitionState(self.broker_id, p.leader_epoch, new_isr, p.controller_epoch)
        written = await self.coordinator.update_isr_as_leader(p.topic, p.index, state, p.partition_epoch)
        if written is None:
            log.info("%s-%d: ISR change refused, leader epoch %d is stale", p.topic, p.index, p.leader_epoch)
            return None
        if self.isr_announcer is not None:
            self.isr_announcer.changed((p.topic, p.index))
        return written

    async def wait_for_leaders(self, name: str, partitions: int, timeout_s: float) -> None:
        """Cluster mode: CreateTopics answers once the controller elected every leader (or
        the time is up), as Kafka's delayed topic creation does."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            infos = [self.metadata.partition(name, p) for p in range(partitions)]
            if all(i is not None and i.leader >= 0 for i in infos):
                return
            await asyncio.sleep(0.05)

    async def _listen(self) -> None:
        dispatcher = Dispatcher(self)
        max_request = self.config.get("socket.request.max.bytes")
        for name, host, port in self.config.listeners:
            server = KafkaServer(host, port, dispatcher, listener_name=name, max_request_size=max_request,
                                 eager_api_keys=EAGER_API_KEYS)
            await server.start()
            self.servers.append(server)
        if self.advertised.port == 0:
            # An ephemeral listener port (tests): advertise the port actually bound.
            self.advertised.port = self.servers[0].bound_port

    async def start(self) -> None:
        if self.cluster_mode:
            # Listening before registering (Kafka's order): once the controller sees this
            # broker in ZooKeeper, its first UpdateMetadata can be delivered.
            await self._listen()
            self.coordinator.subscribe(self._on_cluster_event)
            await self.coordinator.start()
            self._load_dynamic_configs()
        else:
            # Standalone: topics are loaded before the first client can ask for them.
            await self.coordinator.start()
            self._load_dynamic_configs()
            self.metadata.brokers = {b.broker_id: b for b in self.coordinator.live_brokers()}
            self.metadata.controller_id = self.coordinator.controller_id
            for meta in list(self.coordinator.topics().values()):
                self.apply_topic(meta)
            await self._listen()
        if self.controller is not None:
            await self.controller.start()
        if self.config.metrics_port >= 0:
            await self._start_metrics()
        self._tasks = [
            asyncio.create_task(self._every(self.config.get("log.retention.check.interval.ms"),
                                            self._retention)),
            asyncio.create_task(self._every(1000, self._flush_and_tick)),
            asyncio.create_task(self._every(200, self.group_coordinator.tick)),
            asyncio.create_task(self._clean_logs()),
            asyncio.create_task(self._shrink_isrs()),
            asyncio.create_task(self._every(self.config.get("log.flush.offset.checkpoint.interval.ms"),
                                            self.log_manager.checkpoint_recovery_points_async)),
        ]

    async def _start_metrics(self) -> None:
        from .metrics import BrokerMetrics
        host = self.config.listeners[0].host
        self.metrics = BrokerMetrics(self, host, self.config.metrics_port)
        await self.metrics.start()

    async def _shrink_isrs(self) -> None:
        """Kafka checks every replica.lag.time.max.ms / 2 for followers that fell behind."""
        lag_ms = self.config.get("replica.lag.time.max.ms")
        while True:
            await asyncio.sleep(lag_ms / 2000.0)
            try:
                await self.replicas.shrink_isrs(lag_ms)
                if self.isr_announcer is not None:
                    self.isr_announcer.flush()
            except Exception:
                log.exception("ISR shrink check failed")

    async def _clean_logs(self) -> None:
        """Compaction: one log per call; back off when no log needs cleaning."""
        backoff = self.config.get("log.cleaner.backoff.ms") / 1000.0
        while True:
            try:
                cleaned = self.log_manager.run_cleaner(int(time.time() * 1000))
            except Exception:
                log.exception("log cleaner failed")
                cleaned = 0
            await asyncio.sleep(0 if cleaned else backoff)

    def _retention(self) -> None:
        self.log_manager.run_retention(int(time.time() * 1000))

    def _flush_and_tick(self) -> None:
        now = int(time.time() * 1000)
        self.log_manager.flush_due(now)
        self.log_manager.tick(now)

    async def _every(self, interval_ms: int, fn) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def controlled_shutdown(self, attempts: int = 3) -> None:
        """SIGTERM in a cluster: ask the controller to move leadership away first."""
        from clients.aio.connection import BrokerConnection
        for _ in range(attempts):
            controller_id = self.coordinator.controller_id
            node = self.metadata.broker(controller_id)
            if controller_id == self.broker_id and self.controller is not None and self.controller.active:
                remaining = await self.controller.controlled_shutdown(self.broker_id)
                await self.controller.drain(3.0)
                if not remaining:
                    return
            elif node is not None:
                try:
                    async with await BrokerConnection.connect(node.host, node.port, client_id="controlled-shutdown",
                                                               timeout=2) as conn:
                        r = await conn.request("ControlledShutdown", {"broker_id": self.broker_id, "broker_epoch": -1},
                                               version=3, timeout=5)
                    if r.error_code == 0 and not r.remaining_partitions:
                        return
                except Exception as e:
                    log.info("controlled shutdown attempt failed: %s", e)
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        if self.cluster_mode:
            try:
                # Bounded: when the whole cluster stops at once there may be no controller
                # left to answer, and stopping must not hang on it.
                await asyncio.wait_for(self.controlled_shutdown(), 8)
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
            await self.controller.stop()
        # Produce requests still waiting for replication here will not complete: answer them
        # now so their clients retry on the new leaders instead of waiting out a timeout.
        self.replicas.fail_waiters()
        self.replicas.stop_isr_changes()
        if self.isr_announcer is not None:
            self.isr_announcer.stop()
        for t in self._tasks:
            t.cancel()
        for s in self.servers:
            await s.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        await self.fetchers.close()
        self.purgatory.notify_all()
        self.log_manager.close()
        await self.coordinator.stop()
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


async def run(config: BrokerConfig) -> None:
    broker = Broker(config)
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
        config = BrokerConfig.load(args.config, overrides)
    except (ConfigError, OSError) as e:
        print(f"strom: {e}", file=sys.stderr)
        return 1
    retain_freed_memory()
    asyncio.run(run(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
