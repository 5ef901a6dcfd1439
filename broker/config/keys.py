"""What one declared config key is: its type, default, validator, update mode and synonyms,
the facts parsing, DescribeConfigs and the docs need."""
from __future__ import annotations

from dataclasses import dataclass

from .validators import Validator
from .value_types import ConfigValue, parse_typed, to_config_string

# Update modes of broker keys, as Kafka's docs name them.
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"

_KAFKA_TYPES = {"bool": "BOOLEAN", "int": "INT", "short": "SHORT", "long": "LONG",
                "string": "STRING", "list": "LIST", "double": "DOUBLE",
                "password": "PASSWORD", "class": "CLASS"}


@dataclass(frozen=True)
class ConfigKey:
    """One declared config: the facts DescribeConfigs and the docs need.

    ``type``: int, short, long, bool, string, list, double, password or class.
    ``default``: the typed default; None is Kafka's null (unset, often meaning "derived").
    ``update_mode`` (broker keys): "read-only", "per-broker" or "cluster-wide", as Kafka's docs.
    ``synonyms`` (topic keys): broker keys that supply the default, in Kafka's precedence.
    ``note``: what strom does differently, if anything.
    """

    name: str
    type: str
    default: ConfigValue
    doc: str
    importance: str = "medium"
    validator: Validator | None = None
    update_mode: str = READ_ONLY
    synonyms: tuple[str, ...] = ()
    note: str = ""

    @property
    def is_sensitive(self) -> bool:
        return self.type == "password"

    @property
    def read_only(self) -> bool:
        return self.update_mode == READ_ONLY

    @property
    def kafka_type(self) -> str:
        return _KAFKA_TYPES[self.type]

    def parse(self, raw: str) -> ConfigValue:
        """Typed and validated value of ``raw``; ValueError with the reason otherwise."""
        v = parse_typed(self.type, raw)
        if self.validator is not None:
            err = self.validator(v)
            if err:
                raise ValueError(err)
        return v

    def default_string(self) -> str | None:
        return to_config_string(self.type, self.default)
