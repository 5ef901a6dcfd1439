"""BrokerConfig: the effective, typed configuration of one broker, with the attributes derived
from several keys (listeners, log dirs, broker id, millisecond synonyms), their cross-key
checks, and the dynamic layers put in force on a running broker."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clients.properties import ConfigError, Property

from .broker_keys import BROKER_CONFIG, BROKER_CONFIGS, first_set_value
from .describe import (DYNAMIC_BROKER, DYNAMIC_DEFAULT, ConfigEntry, ConfigLayers,
                       describe_broker_key, describe_dynamic_defaults, describe_topic_key)
from .dynamic import check_dynamic, layer_dynamic
from .listeners import Listener, parse_listeners, parse_protocol_map
from .loading import LISTENER_PREFIX, listener_key, load_static, read_config_file
from .security import (ACL_AUTHORIZERS, ListenerSecurity, inter_broker_credentials, parse_super_users,
                       refuse_unenforced, resolve_listeners)
from .topic_configs import topic_default_string, topic_defaults, typed_topic_config
from .topic_keys import TOPIC_CONFIG, TOPIC_CONFIGS
from .value_types import ConfigValue

log = logging.getLogger("broker.config")  # the package's one logger name, as operators see it

_NON_ROUTABLE = ("0.0.0.0", "::", "0:0:0:0:0:0:0:0")


class BrokerConfig:
    """The effective, typed configuration of one broker.

    Typed attributes: ``broker_id``, ``listeners``, ``advertised_listeners``,
    ``security_protocol_map``, ``inter_broker_listener_name``, ``log_dirs``,
    ``zookeeper_connect``, ``standalone``, ``metrics_port`` and the effective millisecond
    values ``log_retention_ms``, ``log_roll_ms``, ``log_roll_jitter_ms``,
    ``log_flush_interval_ms``, ``zookeeper_connection_timeout_ms``. Any other key reads as an
    attribute with dots turned into underscores (``cfg.num_partitions``) and is the same as
    ``cfg.get("num.partitions")``: the typed value, None where Kafka's default is null.

    It changes only through ``set_dynamic``, on the broker's event loop; read it there.
    """

    def __init__(self, props: Mapping[str, str | Property], *, path: str | Path | None = None,
                 overrides: Mapping[str, str] | None = None):
        self.path: Path | None = Path(path) if path is not None else None
        label = str(path) if path is not None else "<config>"
        static = load_static(props, label, overrides)
        self._where = static.where
        self._raw = static.raw
        self.unknown: dict[str, str] = static.unknown
        self._per_listener = static.per_listener
        self._values = static.values
        self._label = label
        self._static_values = dict(self._values)
        # Dynamic configs (AlterConfigs on a BROKER resource, kept by the coordinator):
        # the cluster-wide defaults and this broker's own, raw strings; see set_dynamic().
        self._dynamic: dict[str, dict[str, str]] = {DYNAMIC_DEFAULT: {}, DYNAMIC_BROKER: {}}
        self._derive()

    # ---- construction ------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Read ``path`` (a .properties file); ``overrides`` win over it."""
        return cls(read_config_file(path), path=path, overrides=overrides)

    @classmethod
    def from_dict(cls, props: Mapping[str, str] | None = None) -> BrokerConfig:
        """A config from plain strings (tests, embedded brokers); all count as static config."""
        return cls(dict(props or {}))

    def _fail(self, key: str, message: str) -> ConfigError:
        where = self._where.get(key)
        if where is None and key.startswith(LISTENER_PREFIX):
            own = listener_key(key)
            if own is not None and own[1] in self._per_listener.get(own[0], {}):
                where = self._per_listener[own[0]][own[1]][1]
        return ConfigError(f"{where or self._label}: {key}: {message}", key)

    def _parse_listener_value(self, key: str, raw: str) -> ConfigValue:
        own = listener_key(key)
        assert own is not None
        spec = BROKER_CONFIG[own[1]] if own[1] in BROKER_CONFIG else None
        if spec is None:
            return raw
        try:
            return spec.parse(raw)
        except ValueError as e:
            raise self._fail(key, str(e)) from None

    def _derive(self) -> None:
        v = self._values
        self.zookeeper_connect: str | None = v["zookeeper.connect"] or None
        self.standalone: bool = self.zookeeper_connect is None

        bid = v["broker.id"]
        if v["broker.id.generation.enable"]:
            if not -1 <= bid <= v["reserved.broker.max.id"]:
                raise self._fail("broker.id", f"{bid} must be at least -1 and at most "
                                              f"reserved.broker.max.id ({v['reserved.broker.max.id']})")
        elif bid < 0:
            raise self._fail("broker.id", f"{bid} must be at least 0")
        self.broker_id: int = 0 if bid == -1 and self.standalone else bid

        dirs = v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"]
        key = "log.dirs" if v["log.dirs"] is not None else "log.dir"
        if not dirs:
            raise self._fail(key, "at least one log directory must be defined")
        if len(set(dirs)) != len(dirs):
            raise self._fail(key, f"duplicate directories in {','.join(dirs)!r}")
        self.log_dirs: list[str] = [os.path.abspath(d) for d in dirs]

        self.security_protocol_map: dict[str, str] = parse_protocol_map(
            v["listener.security.protocol.map"])
        raw_listeners = parse_listeners(v["listeners"])
        if not raw_listeners:
            raise self._fail("listeners", "at least one listener must be defined")
        ports = [lst.port for lst in raw_listeners if lst.port != 0]
        if len(set(ports)) != len(ports):
            raise self._fail("listeners", "each listener must have a different port")
        for lst in raw_listeners:
            if lst.name not in self.security_protocol_map:
                raise self._fail("listeners", f"no security protocol defined for listener "
                                              f"{lst.name} in listener.security.protocol.map")
        self.listeners: list[Listener] = [
            lst._replace(host=lst.host or "0.0.0.0") for lst in raw_listeners]

        if v["advertised.listeners"] is not None:
            adv_key, adv = "advertised.listeners", parse_listeners(v["advertised.listeners"])
            names = {lst.name for lst in raw_listeners}
            extra = [a.name for a in adv if a.name not in names]
            if extra:
                raise self._fail(adv_key, f"listener names {', '.join(extra)} are not in listeners "
                                          f"(advertised names must be a subset of them)")
        else:
            adv_key, adv = "listeners", raw_listeners
        for a in adv:
            if a.host in _NON_ROUTABLE:
                hint = "" if adv_key == "advertised.listeners" else \
                    " (advertised.listeners defaults to listeners: set it to a routable address)"
                raise self._fail(adv_key, f"cannot advertise the non-routable address {a.host} "
                                          f"in {a}{hint}")
        self.advertised_listeners: list[Listener] = [
            a._replace(host=a.host or "127.0.0.1") for a in adv]

        ibl = v["inter.broker.listener.name"]
        if ibl is not None:
            if "security.inter.broker.protocol" in self._raw:
                raise self._fail("inter.broker.listener.name",
                                 "set only one of inter.broker.listener.name and "
                                 "security.inter.broker.protocol")
            ibl_key, ibl = "inter.broker.listener.name", ibl.upper()
        else:
            ibl_key, ibl = "security.inter.broker.protocol", v["security.inter.broker.protocol"]
        if ibl not in {a.name for a in self.advertised_listeners}:
            raise self._fail(ibl_key, f"inter-broker listener {ibl} must be a listener name in "
                                      f"advertised.listeners (have: "
                                      f"{', '.join(a.name for a in self.advertised_listeners)})")
        self.inter_broker_listener_name: str = ibl
        self._derive_security()

        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise self._fail("replica.fetch.wait.max.ms",
                             "must not be greater than replica.lag.time.max.ms")
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise self._fail("group.min.session.timeout.ms",
                             "must not be greater than group.max.session.timeout.ms")

        self.metrics_port: int = (v["metrics.port"] if "metrics.port" in self._raw
                                  else v["strom.metrics.port"])
        self.zookeeper_connection_timeout_ms: int = (
            v["zookeeper.connection.timeout.ms"] if v["zookeeper.connection.timeout.ms"] is not None
            else v["zookeeper.session.timeout.ms"])
        self.log_roll_ms: int = self._first_of(("log.roll.ms", "log.roll.hours"))
        self.log_roll_jitter_ms: int = self._first_of(("log.roll.jitter.ms", "log.roll.jitter.hours"))
        retention = self._first_of(("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
        self.log_retention_ms: int = -1 if retention < 0 else retention  # Kafka: any negative = -1
        self.log_flush_interval_ms: int = self._first_of(
            ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))

    def _derive_security(self) -> None:
        v = self._values
        self.listener_security: dict[str, ListenerSecurity] = resolve_listeners(
            v, self._per_listener, self.security_protocol_map, [lst.name for lst in self.listeners],
            self._parse_listener_value, self._fail)
        authorizer = v["authorizer.class.name"]
        if authorizer and authorizer not in ACL_AUTHORIZERS:
            raise self._fail("authorizer.class.name",
                             f"{authorizer} is not available: strom's authorizer is Kafka's ACL "
                             f"authorizer ({ACL_AUTHORIZERS[0]}); empty allows everything")
        self.acl_authorizer: bool = bool(authorizer)
        if v["connections.max.reauth.ms"] != 0:
            raise self._fail("connections.max.reauth.ms",
                             "re-authentication (KIP-368) is not implemented; only 0 is supported")
        self.super_users: frozenset[str] = parse_super_users(v["super.users"], self._fail)
        refuse_unenforced(self.unknown, self._fail)
        ib = self.listener_security.get(self.inter_broker_listener_name)
        mechanism = str(v["sasl.mechanism.inter.broker.protocol"]).upper()
        self.inter_broker_sasl_mechanism: str | None = mechanism if ib is not None and ib.sasl else None
        self.inter_broker_credentials: tuple[str, str] | None = None if ib is None else \
            inter_broker_credentials(ib, mechanism, "sasl.mechanism.inter.broker.protocol", self._fail)

    def _first_of(self, keys: Sequence[str]) -> ConfigValue:
        return first_set_value(keys, self._values)

    # ---- reading -----------------------------------------------------------------------

    def __getattr__(self, attr: str) -> ConfigValue:
        if not attr.startswith("_"):
            key = attr.replace("_", ".")
            if key in BROKER_CONFIG:
                return self._values[key]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {attr!r}")

    def get(self, name: str) -> ConfigValue:
        """The typed value of a broker key (None where unset and Kafka's default is null)."""
        if name not in BROKER_CONFIG:
            raise KeyError(f"unknown broker config {name!r}")
        return self._values[name]

    def values(self) -> dict[str, ConfigValue]:
        """Every broker key with its typed effective value (defaults included)."""
        return dict(self._values)

    def source(self, name: str) -> str:
        """Where the effective value comes from: "DYNAMIC_BROKER_CONFIG" (set for this broker
        with AlterConfigs), "DYNAMIC_DEFAULT_BROKER_CONFIG" (set for all brokers),
        "STATIC_BROKER_CONFIG" (the file or an override) or "DEFAULT_CONFIG"."""
        if name not in BROKER_CONFIG:
            raise KeyError(f"unknown broker config {name!r}")
        return self._layers().source(name)

    def where(self, name: str) -> str | None:
        """Where a key was set: "path:line", "--override", or None for a default."""
        return self._where.get(name)

    def security_protocol(self, listener_name: str) -> str:
        return self.security_protocol_map[listener_name.upper()]

    def _layers(self) -> ConfigLayers:
        return ConfigLayers(self._dynamic[DYNAMIC_BROKER], self._dynamic[DYNAMIC_DEFAULT],
                            self._raw)

    # ---- dynamic configs (rules in dynamic.py) -----------------------------------------

    def check_dynamic(self, configs: Mapping[str, str | None], per_broker: bool) -> None:
        """Validate what AlterConfigs would store for the BROKER resource (this broker's id
        when `per_broker`, else "" for the cluster-wide defaults): Kafka's rules
        (DynamicBrokerConfig.validateConfigs) plus strom's own limit, the keys it applies
        while running. ConfigError names the first offending key."""
        check_dynamic(configs, per_broker)

    def topic_defaults_with(self, defaults: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
        """What topic_defaults() would be with these dynamic configs (nothing changes)."""
        return topic_defaults(layer_dynamic(self._static_values, defaults, own)[0])

    def set_dynamic(self, defaults: Mapping[str, str], own: Mapping[str, str],
                    validate: Callable[[dict[str, str]], object] | None = None) -> set[str]:
        """Put the dynamic configs as the coordinator stores them in force; the keys whose
        effective value changed. Entries this broker cannot apply (written by another tool
        or version) are skipped with a warning. `validate(topic defaults)` may raise
        ValueError: then nothing changes (logged), as when the combination fails here."""
        values, layers = layer_dynamic(self._static_values, defaults, own)
        try:
            if validate is not None:
                validate(topic_defaults(values))
        except ValueError as e:
            log.error("dynamic broker configs not applied: %s", e)
            return set()
        changed = {k for k, v in values.items() if v != self._values[k]}
        old_values, old_layers = self._values, self._dynamic
        self._values, self._dynamic = values, layers
        try:
            self._derive()
        except ConfigError as e:          # a combination the file alone would not allow
            log.error("dynamic broker configs not applied: %s", e)
            self._values, self._dynamic = old_values, old_layers
            self._derive()
            return set()
        return changed

    # ---- topic defaults ------------------------------------------------------------------

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config's effective default on this broker, as Kafka's strings."""
        return topic_defaults(self._values)

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> dict[str, ConfigValue]:
        """Typed effective config of a topic: its validated overrides on this broker's defaults."""
        return typed_topic_config(self.topic_defaults(), overrides or {})

    # ---- DescribeConfigs (entries built in describe.py) ----------------------------------

    def describe(self, name: str) -> ConfigEntry:
        """The DescribeConfigs entry of a broker key (resource type BROKER)."""
        return describe_broker_key(name, self._values[name], self._layers())

    def describe_all(self) -> list[ConfigEntry]:
        return [self.describe(k.name) for k in BROKER_CONFIGS]

    def describe_dynamic_defaults(self) -> list[ConfigEntry]:
        """DescribeConfigs of the cluster-wide entity (resource name ""): its dynamic
        configs only, with the values set there and only that entity's synonyms (Kafka's
        createBrokerConfigEntry with perBrokerConfig=false)."""
        return describe_dynamic_defaults(self._layers())

    def describe_topic(self, name: str, overrides: Mapping[str, str] | None = None) -> ConfigEntry:
        """The DescribeConfigs entry of a topic config, given the topic's own overrides."""
        return describe_topic_key(name, overrides or {},
                                  topic_default_string(TOPIC_CONFIG[name], self._values),
                                  self._layers())

    def describe_topic_all(self, overrides: Mapping[str, str] | None = None) -> list[ConfigEntry]:
        return [self.describe_topic(k.name, overrides) for k in TOPIC_CONFIGS]

    def __repr__(self) -> str:
        return f"BrokerConfig(path={str(self.path)!r}, broker_id={self.broker_id})"
