"""Dynamic broker configs (Kafka's DynamicBrokerConfig and its config handlers): the values
AlterConfigs stores for the cluster-wide default entity or for one broker, checked before
they are stored and put in force on every broker when the store says they changed.

The dynamic keys strom applies (broker.config.DYNAMIC_APPLIED): the topic defaults (every
log here whose topic does not set the key itself takes the new value at once, as do logs
created later; the controller reads unclean.leader.election.enable when it elects), the
producer-state keys (handed to the log manager here, or read at each use), and the
replication throttles, which the replication code reads through `replication_throttles()`
and `throttled_replicas(topic)`. A topic's own overrides changing (any broker may write
them) reaches its replicas here too. Runs on the event loop.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from zkcoord.store import MetadataStore
from zkcoord.store import BrokerConfigsChanged, TopicConfigChanged

from .config import BrokerConfig, ConfigError
from .config.throttles import ReplicationThrottles, ThrottledReplicas, throttled_replicas
from .log import LogConfig, LogManager
from .replication.replica_manager import ReplicaManager
from .topic_configs import TopicConfigResolver

log = logging.getLogger("strom.broker")


class DynamicBrokerConfigs:
    def __init__(self, broker_id: int, config: BrokerConfig, store: MetadataStore,
                 log_manager: LogManager, replicas: ReplicaManager,
                 topic_configs: TopicConfigResolver) -> None:
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.log_manager = log_manager
        self.replicas = replicas
        self.topic_configs = topic_configs
        # Called with the names of the keys that changed (the controller's unclean flag).
        self.on_change: Callable[[set[str]], None] = lambda changed: None

    def on_store_event(self, event: object) -> None:
        """Configs changed in the store, whichever broker wrote them: a topic's (its replicas
        here take the new LogConfig, as Kafka's TopicConfigHandler) or the dynamic broker
        configs (Kafka's BrokerConfigHandler)."""
        if isinstance(event, TopicConfigChanged):
            meta = self.store.topic(event.name)
            if meta is not None:
                self.replicas.update_log_config(event.name, self.topic_configs.log_config_for(meta))
        elif isinstance(event, BrokerConfigsChanged):
            self.apply(event.defaults, event.own)

    def check(self, broker_id: int | None, configs: dict[str, str]) -> None:
        """What AlterConfigs may store for a BROKER resource (None: cluster-wide): each key
        (BrokerConfig.check_dynamic), then the topic defaults they make together, which
        must give a valid LogConfig (Kafka validates a reconfiguration the same way before
        storing it). ConfigError otherwise."""
        self.config.check_dynamic(configs, per_broker=broker_id is not None)
        defaults = configs if broker_id is None else self.store.broker_configs(None)
        own = configs if broker_id is not None else self.store.broker_configs(self.broker_id)
        try:
            LogConfig.from_topic_configs(self.config.topic_defaults_with(defaults, own))
        except ValueError as e:
            raise ConfigError(f"Invalid topic defaults: {e}", next(iter(configs), "")) from None

    def load(self) -> None:
        """Put in force what the store holds now (at start-up, and after this broker's own
        AlterConfigs: the watch would bring it too, later)."""
        self.apply(self.store.broker_configs(None), self.store.broker_configs(self.broker_id))

    def replication_throttles(self) -> ReplicationThrottles:
        """The rates in force on this broker now (this broker's dynamic value over the
        cluster-wide one over server.properties over Kafka's default, Long.MAX: none)."""
        get = self.config.get
        return ReplicationThrottles(int(get("leader.replication.throttled.rate")),
                                    int(get("follower.replication.throttled.rate")),
                                    int(get("replica.alter.log.dirs.io.max.bytes.per.second")))

    def throttled_replicas(self, topic: str) -> tuple[ThrottledReplicas, ThrottledReplicas]:
        """(leader side, follower side): which replicas of `topic` the rates apply to, from
        its `*.replication.throttled.replicas` configs (none for an unknown topic)."""
        meta = self.store.topic(topic)
        return throttled_replicas(meta.configs if meta is not None else {})

    def apply(self, defaults: Mapping[str, str], own: Mapping[str, str]) -> None:
        changed = self.config.set_dynamic(defaults, own, validate=LogConfig.from_topic_configs)
        if not changed:
            return
        log.info("dynamic broker configs changed: %s",
                 ", ".join(f"{k}={self.config.describe(k).value}" for k in sorted(changed)))
        if "producer.id.expiration.ms" in changed:
            self.log_manager.producer_id_expiration_ms = int(self.config.get("producer.id.expiration.ms"))
        default = self.topic_configs.default_log_config()
        self.log_manager.default_config = default
        configs: dict[str, LogConfig] = {}
        for plog in self.log_manager.all_logs():
            if plog.topic not in configs:
                meta = self.store.topic(plog.topic)
                configs[plog.topic] = (self.topic_configs.log_config_for(meta)
                                       if meta is not None else default)
            plog.update_config(configs[plog.topic])
        self.on_change(set(changed))
