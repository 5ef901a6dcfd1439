"""Topic configs: validation of a topic's overrides with Kafka's error messages (CreateTopics,
AlterConfigs), the defaults a broker's own keys give every topic, and a topic's typed effective
config."""
from __future__ import annotations

from typing import Mapping

from clients.properties import ConfigError

from .broker_keys import first_set_value
from .keys import ConfigKey
from .topic_keys import TOPIC_CONFIG, TOPIC_CONFIGS
from .value_types import ConfigValue, to_config_string


class TopicConfigs:
    """Validation of per-topic config overrides, with Kafka's error messages."""

    @staticmethod
    def names() -> list[str]:
        return sorted(TOPIC_CONFIG)

    @staticmethod
    def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
        """Return the overrides with values trimmed; raise ConfigError (INVALID_CONFIG) naming
        the first bad key: an unknown name, a null value or a value of the wrong type/range."""
        out: dict[str, str] = {}
        typed: dict[str, ConfigValue] = {}
        for name, raw in configs.items():
            spec = TOPIC_CONFIG.get(name)
            if spec is None:
                raise ConfigError(f"Unknown topic config name: {name}", name)
            if raw is None:
                raise ConfigError(f"Null value not supported for topic configs: {name}", name)
            try:
                typed[name] = spec.parse(raw)
            except ValueError as e:
                raise ConfigError(f"Invalid value {raw.strip()} for configuration {name}: {e}",
                                  name) from None
            out[name] = raw.strip()
        # The pair as the topic would have it: its own values over Kafka's defaults.
        lo_key, hi_key = "min.compaction.lag.ms", "max.compaction.lag.ms"
        lo = typed[lo_key] if lo_key in typed else TOPIC_CONFIG[lo_key].default
        hi = typed[hi_key] if hi_key in typed else TOPIC_CONFIG[hi_key].default
        if lo > hi:
            raise ConfigError(f"conflict topic config setting {lo_key} ({lo}) > {hi_key} ({hi})",
                              lo_key if lo_key in typed else hi_key)
        return out


def topic_default_string(spec: ConfigKey, broker_values: Mapping[str, ConfigValue]) -> str:
    """A topic key's default on a broker with these typed broker values: its first set
    synonym (in milliseconds where the synonym counts hours or minutes), else Kafka's default."""
    value = first_set_value(spec.synonyms, broker_values) if spec.synonyms else None
    if value is None:
        value = spec.default
    if spec.name == "retention.ms" and value < 0:
        value = -1  # Kafka: any negative retention means none
    return to_config_string(spec.type, value) or ""


def topic_defaults(broker_values: Mapping[str, ConfigValue]) -> dict[str, str]:
    """Every topic key's default on a broker with these typed broker values, as Kafka's strings."""
    return {k.name: topic_default_string(k, broker_values) for k in TOPIC_CONFIGS}


def typed_topic_config(defaults: Mapping[str, str],
                       overrides: Mapping[str, str]) -> dict[str, ConfigValue]:
    """Typed effective config of a topic: its validated overrides on the broker's defaults."""
    strings = dict(defaults)
    strings.update(TopicConfigs.validate(overrides))
    return {name: TOPIC_CONFIG[name].parse(s) for name, s in strings.items()}
