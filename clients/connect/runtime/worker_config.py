"""A Connect worker's configuration: Kafka Connect's WorkerConfig keys, standalone and
distributed, parsed from a `.properties` file.

Keys a Kafka client also knows (`bootstrap.servers`, `security.protocol`, `sasl.*`,
`ssl.*`, `client.id`...) go to every client the worker makes; `producer.`, `consumer.` and
`admin.` prefixes override them for one kind (Kafka's rule). A key neither the worker nor a
client knows is logged once, as Kafka's "was supplied but isn't a known config".
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from clients.config import KEYS
from clients.properties import ConfigError, read_properties

from ..config_def import ConfigDef, ConfigException, Importance, Type, at_least, in_values

__all__ = ["WorkerConfig", "STANDALONE", "DISTRIBUTED", "load_worker_config"]

log = logging.getLogger("strom.connect.config")

_COMMON = (
    ConfigDef()
    .define("bootstrap.servers", Type.LIST, "localhost:9092", Importance.HIGH,
            "Kafka brokers the worker and its tasks connect to.")
    .define("key.converter", Type.CLASS, "org.apache.kafka.connect.json.JsonConverter", Importance.HIGH,
            "Converter of record keys (connectors may override).")
    .define("value.converter", Type.CLASS, "org.apache.kafka.connect.json.JsonConverter", Importance.HIGH,
            "Converter of record values (connectors may override).")
    .define("header.converter", Type.CLASS, "org.apache.kafka.connect.storage.SimpleHeaderConverter",
            Importance.LOW, "Converter of header values.")
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, 5000, Importance.LOW,
            "How long a task may take to stop before it is abandoned.")
    .define("offset.flush.interval.ms", Type.LONG, 60000, Importance.LOW,
            "How often tasks' offsets are committed.", at_least(1))
    .define("offset.flush.timeout.ms", Type.LONG, 5000, Importance.LOW,
            "How long a commit waits for records to be acknowledged.", at_least(1))
    .define("listeners", Type.LIST, "http://:8083", Importance.LOW,
            "REST API listeners (http://host:port).")
    .define("rest.advertised.host.name", Type.STRING, None, Importance.LOW,
            "Host name other workers use to reach this one's REST API.")
    .define("rest.advertised.port", Type.INT, None, Importance.LOW, "")
    .define("rest.advertised.listener", Type.STRING, None, Importance.LOW, "")
    .define("plugin.path", Type.LIST, "", Importance.LOW,
            "Directories of Python plugins (.py files and packages).")
    .define("client.id", Type.STRING, "", Importance.LOW, "")
    .define("connector.client.config.override.policy", Type.STRING, "All", Importance.MEDIUM,
            "Which producer.override./consumer.override. keys connectors may set.",
            in_values("All", "None", "Principal"))
    .define("topic.creation.enable", Type.BOOLEAN, True, Importance.LOW, "")
    .define("metrics.port", Type.INT, -1, Importance.LOW,
            "strom: port of the Prometheus metrics endpoint (-1: served on the REST listener "
            "at /metrics only).")
)

STANDALONE = _COMMON.merge(
    ConfigDef()
    .define("offset.storage.file.filename", Type.STRING, None, Importance.HIGH,
            "File to store source connectors' offsets in.")
)

DISTRIBUTED = _COMMON.merge(
    ConfigDef()
    .define("group.id", Type.STRING, None, Importance.HIGH, "The Connect cluster's group.")
    .define("session.timeout.ms", Type.INT, 10000, Importance.HIGH, "")
    .define("heartbeat.interval.ms", Type.INT, 3000, Importance.HIGH, "")
    .define("rebalance.timeout.ms", Type.INT, 60000, Importance.HIGH, "")
    .define("worker.sync.timeout.ms", Type.INT, 3000, Importance.MEDIUM, "")
    .define("worker.unsync.backoff.ms", Type.INT, 300000, Importance.MEDIUM, "")
    .define("offset.storage.topic", Type.STRING, None, Importance.HIGH, "")
    .define("offset.storage.partitions", Type.INT, 25, Importance.LOW, "")
    .define("offset.storage.replication.factor", Type.SHORT, 3, Importance.LOW, "")
    .define("config.storage.topic", Type.STRING, None, Importance.HIGH, "")
    .define("config.storage.replication.factor", Type.SHORT, 3, Importance.LOW, "")
    .define("status.storage.topic", Type.STRING, None, Importance.HIGH, "")
    .define("status.storage.partitions", Type.INT, 5, Importance.LOW, "")
    .define("status.storage.replication.factor", Type.SHORT, 3, Importance.LOW, "")
    .define("connect.protocol", Type.STRING, "sessioned", Importance.LOW, "",
            in_values("eager", "compatible", "sessioned"))
    .define("scheduled.rebalance.max.delay.ms", Type.INT, 300000, Importance.LOW,
            "How long lost connectors and tasks wait for their worker to return.", at_least(0))
    .define("exactly.once.source.support", Type.STRING, "disabled", Importance.HIGH,
            "KIP-618: enabled, preparing or disabled.",
            in_values("enabled", "preparing", "disabled", case_sensitive=False))
    .define("inter.worker.key.generation.algorithm", Type.STRING, "HmacSHA256", Importance.LOW, "")
    .define("inter.worker.key.ttl.ms", Type.INT, 3600000, Importance.LOW, "")
)

_DISTRIBUTED_REQUIRED = ("group.id", "offset.storage.topic", "config.storage.topic",
                         "status.storage.topic")
_CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")
_ALL_CLIENT_KEYS = set(KEYS["producer"]) | set(KEYS["consumer"]) | set(KEYS["admin"])


@dataclass
class WorkerConfig:
    """Parsed worker settings (`values`, typed) and the raw strings (`raw`) for clients."""

    mode: str                       # "standalone" | "distributed"
    values: dict[str, Any]
    raw: dict[str, str]
    source: str = "<config>"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def exactly_once(self) -> bool:
        return str(self.values.get("exactly.once.source.support", "disabled")).lower() == "enabled"

    def client_config(self, kind: str, overrides: Mapping[str, str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
        """The config of a `kind` client ("producer", "consumer", "admin"): the worker's
        keys that client knows, then its `kind.` prefixed ones, then `overrides` (a
        connector's `producer.override.*` etc.)."""
        known = KEYS[kind]
        out: dict[str, Any] = {}
        for key, value in self.raw.items():
            if key in known and not key.startswith(_CLIENT_PREFIXES):
                out[key] = value
        prefix = kind + "."
        for key, value in self.raw.items():
            if key.startswith(prefix) and key[len(prefix):] in known:
                out[key[len(prefix):]] = value
        out.update(overrides or {})
        out["bootstrap.servers"] = ",".join(self.values["bootstrap.servers"])
        return out

    def shared_client_config(self) -> dict[str, Any]:
        """The keys every kind of client knows (bootstrap, security, client.id): for the
        worker's own topics, whose producer, consumer and admin client share them."""
        shared = set(KEYS["producer"]) & set(KEYS["consumer"]) & set(KEYS["admin"])
        out = {k: v for k, v in self.raw.items() if k in shared}
        out["bootstrap.servers"] = ",".join(self.values["bootstrap.servers"])
        return out

    def rest_listener(self) -> tuple[str, int]:
        """(host, port) of the first http listener; an empty host means all interfaces."""
        url = self.values["listeners"][0]
        if not url.startswith("http://"):
            raise ConfigException("listeners", url, "only http:// listeners are supported")
        host, _, port = url[len("http://"):].rstrip("/").rpartition(":")
        return host, int(port)


def parse_worker_config(mode: str, props: Mapping[str, str], source: str = "<config>") -> WorkerConfig:
    definition = STANDALONE if mode == "standalone" else DISTRIBUTED
    values = definition.parse(props)
    if mode == "distributed":
        for key in _DISTRIBUTED_REQUIRED:
            if not values.get(key):
                raise ConfigException(key, None, f'Missing required configuration "{key}" which has no default value.')
    elif not values.get("offset.storage.file.filename"):
        raise ConfigException("offset.storage.file.filename", None,
                              'Missing required configuration "offset.storage.file.filename" which has no default value.')
    for key in props:
        if key in definition.keys or key in _ALL_CLIENT_KEYS or key.startswith(_CLIENT_PREFIXES):
            continue
        if key.startswith(("key.converter.", "value.converter.", "header.converter.",
                           "config.providers", "listeners.https.", "metric.")):
            continue
        log.warning("%s: the configuration '%s' was supplied but isn't a known config.", source, key)
    return WorkerConfig(mode, values, dict(props), source)


def load_worker_config(mode: str, path: str | Path) -> WorkerConfig:
    """Read and check a worker file; ConfigError naming the file and the key."""
    props = {k: p.value for k, p in read_properties(path).items()}
    try:
        return parse_worker_config(mode, props, str(path))
    except ConfigException as e:
        raise ConfigError(f"{path}: {e}", e.key) from None
