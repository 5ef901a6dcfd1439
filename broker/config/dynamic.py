"""Dynamic broker configs (AlterConfigs on a BROKER resource): which keys strom accepts at which
level, with Kafka's error messages, and the typed values once this broker's own and the
cluster-wide layers are put over its file. BrokerConfig.set_dynamic puts them in force."""
from __future__ import annotations

import logging
from typing import Mapping

from clients.properties import ConfigError

from .broker_keys import BROKER_CONFIG
from .describe import DYNAMIC_BROKER, DYNAMIC_DEFAULT
from .keys import PER_BROKER
from .topic_keys import TOPIC_CONFIGS
from .value_types import ConfigValue

log = logging.getLogger("broker.config")  # the package's one logger name, as operators see it

# Broker keys strom applies while running (AlterConfigs on a BROKER resource), of those
# Kafka lets you change dynamically:
# - the topic defaults (Kafka's DynamicLogConfig): every topic without its own value, and
#   every log on the broker, takes the new default at once;
TOPIC_DEFAULT_KEYS: frozenset[str] = frozenset(
    s for k in TOPIC_CONFIGS for s in k.synonyms if not BROKER_CONFIG[s].read_only)
# - keys read where they are used (BrokerConfig.get at each use, or handed on by
#   broker.dynamic_configs): replication throttles (Kafka's DynamicConfig.Broker), the
#   producer-state settings (DynamicProducerStateManagerConfig), the cleaner's back-off.
RUNTIME_KEYS: frozenset[str] = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "log.cleaner.backoff.ms",
})
DYNAMIC_APPLIED: frozenset[str] = TOPIC_DEFAULT_KEYS | RUNTIME_KEYS
# Thread counts: stored and described as Kafka does; strom serves from one asyncio loop and
# ignores them whether static or dynamic.
DYNAMIC_IGNORED: frozenset[str] = frozenset({
    "num.network.threads", "num.io.threads", "background.threads",
    "num.recovery.threads.per.data.dir",
})
# Kafka's DynamicSecurityConfigs: dynamic only with a listener prefix
# (listener.name.<listener>.<key>), which strom does not take dynamically.
_LISTENER_ONLY: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})


def check_dynamic(configs: Mapping[str, str | None], per_broker: bool) -> None:
    """Validate what AlterConfigs would store for the BROKER resource (a broker's id when
    `per_broker`, else "" for the cluster-wide defaults): Kafka's rules
    (DynamicBrokerConfig.validateConfigs) plus strom's own limit, the keys it applies
    while running. ConfigError names the first offending key."""
    for key, raw in configs.items():
        spec = BROKER_CONFIG.get(key)
        if spec is None:
            raise ConfigError(f"Unknown broker config: {key}", key)
        if spec.read_only:
            raise ConfigError(f"Cannot update these configs dynamically: Set({key})", key)
        if key in _LISTENER_ONLY:
            raise ConfigError("These security configs can be dynamically updated only "
                              f"per-listener using the listener prefix: Set({key})", key)
        if not per_broker and spec.update_mode == PER_BROKER:
            raise ConfigError("Cannot update these configs at default cluster level, broker "
                              f"id must be specified: Set({key})", key)
        if key not in DYNAMIC_APPLIED and key not in DYNAMIC_IGNORED:
            raise ConfigError(f"strom does not apply {key} while running; set it in "
                              f"server.properties (see docs/OPERATIONS.md: the topic "
                              f"defaults, replication throttles, producer-state and cleaner "
                              f"back-off keys are applied while running)", key)
        if raw is None:
            raise ConfigError(f"Invalid value null for configuration {key}", key)
        try:
            spec.parse(raw)
        except ValueError as e:
            raise ConfigError(f"Invalid value {raw} for configuration {key}: {e}", key) from None


def layer_dynamic(static_values: Mapping[str, ConfigValue], defaults: Mapping[str, str],
                  own: Mapping[str, str]
                  ) -> tuple[dict[str, ConfigValue], dict[str, dict[str, str]]]:
    """The typed values if these dynamic configs were in force (this broker's own over the
    cluster-wide defaults over the file), and the raw layers kept, by ConfigSource name.
    Entries a broker cannot apply (written by another tool or version) are skipped with a
    warning."""
    values = dict(static_values)
    layers: dict[str, dict[str, str]] = {}
    for source, props in ((DYNAMIC_DEFAULT, defaults), (DYNAMIC_BROKER, own)):
        kept: dict[str, str] = {}
        for key, raw in props.items():
            try:
                check_dynamic({key: raw}, per_broker=source == DYNAMIC_BROKER)
            except ConfigError as e:
                log.warning("dynamic broker config %s=%r ignored: %s", key, raw, e)
                continue
            values[key] = BROKER_CONFIG[key].parse(raw)
            kept[key] = raw.strip()
        layers[source] = kept
    return values, layers
