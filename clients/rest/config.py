"""The REST proxy's configuration: Confluent's KafkaRestConfig keys, read from a
`.properties` file (`config/kafka-rest.properties`).

As in Confluent's proxy, `client.*` keys go to every Kafka client the proxy makes, and
`producer.*`, `consumer.*` and `admin.*` to one kind (overriding `client.*`); a
`bootstrap.servers` of the proxy's own is the clients' too. A bad value is a `ConfigError`
naming the file, the line and the key; a key the proxy does not know is logged once.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from clients.properties import ConfigError, Property, read_properties

__all__ = ["RestProxyConfig", "load_rest_config", "rest_config_from"]

log = logging.getLogger("strom.rest.config")

# Keys of Confluent's that strom reads (name -> default). The per-client prefixes are not here.
DEFAULTS: dict[str, str] = {
    "listeners": "http://127.0.0.1:8082",
    "bootstrap.servers": "localhost:9092",
    "id": "",
    "host.name": "",
    "consumer.instance.timeout.ms": "300000",
    "consumer.request.timeout.ms": "1000",
    "consumer.request.max.bytes": "67108864",
    "api.v2.enable": "true",
    "api.v3.enable": "true",
    "authentication.method": "NONE",
    "authentication.realm": "KafkaRest",
    "streaming.connection.max.duration.ms": "86400000",
    "kafka.rest.resource.extension.class": "",
}
_PREFIXES = ("client.", "producer.", "consumer.", "admin.")
_INTS = ("consumer.instance.timeout.ms", "consumer.request.timeout.ms",
         "consumer.request.max.bytes", "streaming.connection.max.duration.ms")
_BOOLS = ("api.v2.enable", "api.v3.enable")
_AUTH_METHODS = ("NONE", "BASIC")


@dataclass
class RestProxyConfig:
    """The values the proxy uses; the client maps are ready to pass to strom's clients."""

    listeners: list[str]
    bootstrap_servers: str
    id: str = ""
    consumer_instance_timeout_ms: int = 300000
    consumer_request_timeout_ms: int = 1000
    consumer_request_max_bytes: int = 67108864
    api_v2_enable: bool = True
    api_v3_enable: bool = True
    authentication_method: str = "NONE"        # BASIC: credentials go to the broker as SASL PLAIN
    authentication_realm: str = "KafkaRest"
    streaming_connection_max_duration_ms: int = 86400000
    client: dict[str, str] = field(default_factory=dict)      # `client.*`, prefix removed
    producer: dict[str, str] = field(default_factory=dict)
    consumer: dict[str, str] = field(default_factory=dict)
    admin: dict[str, str] = field(default_factory=dict)

    def client_config(self, kind: str) -> dict[str, Any]:
        """The config of one kind of client ("producer", "consumer", "admin"):
        `bootstrap.servers`, then `client.*`, then the kind's own keys."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        out.update(self.client)
        out.update(getattr(self, kind))
        return out


def _int(key: str, prop: Property, where: str) -> int:
    try:
        return int(prop.value.strip())
    except ValueError:
        raise ConfigError(f"{where}:{prop.line}: {key}: '{prop.value.strip()}' is not an integer",
                          key) from None


def _bool(key: str, prop: Property, where: str) -> bool:
    v = prop.value.strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"{where}:{prop.line}: {key}: '{prop.value.strip()}' is not true or false",
                          key)
    return v == "true"


def rest_config_from(props: Mapping[str, Property], where: str = "<config>") -> RestProxyConfig:
    """A config from parsed properties; ConfigError names `where`, the line and the key."""
    given = {k: p for k, p in props.items()}
    values: dict[str, Any] = {}
    prefixed: dict[str, dict[str, str]] = {p[:-1]: {} for p in _PREFIXES}
    for key, prop in given.items():
        prefix = next((p for p in _PREFIXES if key.startswith(p)), None)
        if prefix is not None and key not in DEFAULTS:
            prefixed[prefix[:-1]][key[len(prefix):]] = prop.value.strip()
        elif key not in DEFAULTS:
            log.warning("%s: the key '%s' was supplied but isn't a known config", where, key)
    for key, default in DEFAULTS.items():
        prop = given.get(key, Property(default, 0))
        attr = key.replace(".", "_")
        if key in _INTS:
            values[attr] = _int(key, prop, where)
            if values[attr] < 0:
                raise ConfigError(f"{where}:{prop.line}: {key}: must not be negative", key)
        elif key in _BOOLS:
            values[attr] = _bool(key, prop, where)
        else:
            values[attr] = prop.value.strip()
    listeners = [x.strip() for x in values.pop("listeners").split(",") if x.strip()]
    if not listeners:
        raise ConfigError(f"{where}: listeners: at least one listener is required", "listeners")
    method = values["authentication_method"].upper()
    if method not in _AUTH_METHODS:
        line = given["authentication.method"].line if "authentication.method" in given else 0
        raise ConfigError(f"{where}:{line}: authentication.method: '{values['authentication_method']}' "
                          f"is not one of {', '.join(_AUTH_METHODS)}", "authentication.method")
    values["authentication_method"] = method
    values.pop("host_name")
    values.pop("kafka_rest_resource_extension_class")
    return RestProxyConfig(listeners=listeners, client=prefixed["client"], producer=prefixed["producer"],
                           consumer=prefixed["consumer"], admin=prefixed["admin"], **values)


def load_rest_config(path: str | Path) -> RestProxyConfig:
    """Read and check a proxy config file; ConfigError naming the file and the key."""
    try:
        props = read_properties(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror or e}") from None
    return rest_config_from(props, str(path))
