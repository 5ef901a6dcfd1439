"""DescribeConfigs answers: where a value comes from (Kafka's ConfigSource), the synonyms that
could supply it, and the entries for BROKER and TOPIC resources, as Kafka's ConfigHelper and
AdminManager build them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .broker_keys import BROKER_CONFIG, BROKER_CONFIGS, broker_synonyms
from .topic_keys import TOPIC_CONFIG
from .value_types import ConfigValue, to_config_string

# DescribeConfigs wire ids (Kafka's ConfigSource and ConfigType enums).
CONFIG_SOURCE_IDS = {
    "UNKNOWN": 0, "TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6, "CLIENT_METRICS_CONFIG": 7, "GROUP_CONFIG": 8,
}
CONFIG_TYPE_IDS = {
    "UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
    "LIST": 7, "CLASS": 8, "PASSWORD": 9,
}
STATIC = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
TOPIC = "TOPIC_CONFIG"


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry; ``value`` is None when unset or sensitive."""

    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: str  # Kafka's type name (INT, LONG, ...); see CONFIG_TYPE_IDS
    doc: str

    @property
    def source_id(self) -> int:
        return CONFIG_SOURCE_IDS[self.source]

    @property
    def type_id(self) -> int:
        return CONFIG_TYPE_IDS[self.type]


@dataclass(frozen=True)
class ConfigLayers:
    """The broker keys set at each level, raw strings as written (trimmed). The first level
    that sets a key supplies its value; Kafka's defaults come after all three."""

    dynamic_broker: Mapping[str, str]   # AlterConfigs on this broker's id
    dynamic_default: Mapping[str, str]  # AlterConfigs on the cluster-wide entity ("")
    static: Mapping[str, str]           # the file and --override

    def in_precedence(self) -> tuple[tuple[str, Mapping[str, str]], ...]:
        return ((DYNAMIC_BROKER, self.dynamic_broker), (DYNAMIC_DEFAULT, self.dynamic_default),
                (STATIC, self.static))

    def source(self, name: str) -> str:
        """The ConfigSource of a broker key's effective value."""
        for source, layer in self.in_precedence():
            if name in layer:
                return source
        return DEFAULT


def config_synonyms(layers: ConfigLayers, name: str, synonyms: Sequence[str],
                    sensitive: bool) -> list[ConfigSynonym]:
    """Kafka's ConfigHelper.configSynonyms: set values level by level, then defaults, in
    synonym order, with everything before the first entry for ``name`` dropped."""
    out: list[ConfigSynonym] = []
    for source, layer in layers.in_precedence():
        for s in synonyms:
            if s in layer:
                out.append(ConfigSynonym(s, None if sensitive else layer[s], source))
    for s in synonyms:
        d = BROKER_CONFIG[s].default_string()
        if d is not None:
            out.append(ConfigSynonym(s, None if sensitive else d, DEFAULT))
    while out and out[0].name != name:
        out.pop(0)
    return out


def describe_broker_key(name: str, value: ConfigValue, layers: ConfigLayers) -> ConfigEntry:
    """The entry of a broker key (resource type BROKER, this broker's id) given its typed
    effective value."""
    spec = BROKER_CONFIG[name]
    synonyms = config_synonyms(layers, name, broker_synonyms(name), spec.is_sensitive)
    text = None if spec.is_sensitive else to_config_string(spec.type, value)
    return ConfigEntry(name, text, synonyms[0].source if synonyms else DEFAULT,
                       spec.read_only, spec.is_sensitive, tuple(synonyms), spec.kafka_type,
                       spec.doc)


def describe_dynamic_defaults(layers: ConfigLayers) -> list[ConfigEntry]:
    """The entries of the cluster-wide entity (resource name ""): its dynamic configs only,
    with the values set there and only that entity's synonyms (Kafka's
    createBrokerConfigEntry with perBrokerConfig=false)."""
    out = []
    for k in BROKER_CONFIGS:
        value = layers.dynamic_default.get(k.name)
        if value is None:
            continue
        synonyms = [s for s in config_synonyms(layers, k.name, broker_synonyms(k.name),
                                               k.is_sensitive)
                    if s.source == DYNAMIC_DEFAULT]
        out.append(ConfigEntry(k.name, None if k.is_sensitive else value, DYNAMIC_DEFAULT,
                               k.read_only, k.is_sensitive, tuple(synonyms), k.kafka_type,
                               k.doc))
    return out


def describe_topic_key(name: str, overrides: Mapping[str, str], broker_default: str,
                       layers: ConfigLayers) -> ConfigEntry:
    """The entry of a topic key given the topic's own overrides and the default this broker
    gives it; the broker keys behind that default follow the topic's own value."""
    spec = TOPIC_CONFIG[name]
    synonyms: list[ConfigSynonym] = []
    if name in overrides:
        value = overrides[name]
        synonyms.append(ConfigSynonym(name, value, TOPIC))
    else:
        value = broker_default
    if spec.synonyms:
        first = spec.synonyms[0]
        synonyms += config_synonyms(layers, first, broker_synonyms(first), spec.is_sensitive)
    return ConfigEntry(name, value, synonyms[0].source if synonyms else DEFAULT, False,
                       spec.is_sensitive, tuple(synonyms), spec.kafka_type, spec.doc)
