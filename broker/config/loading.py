"""A broker's static config: its ``.properties`` file and ``--override`` values, typed and
validated key by key. Every bad line is reported at once, each naming the file, the line and
the key; unknown keys are warned about, never an error."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from clients.properties import ConfigError, Property, read_properties

from .broker_keys import BROKER_CONFIG, BROKER_CONFIGS
from .value_types import ConfigValue

log = logging.getLogger("broker.config")  # the package's one logger name, as operators see it


def read_config_file(path: str | Path) -> dict[str, Property]:
    """The properties of a file; ConfigError naming the file when it cannot be read."""
    try:
        return read_properties(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file: {e.strerror or e}") from None


@dataclass
class StaticConfig:
    """The typed file-and-override layer of a broker's config."""

    values: dict[str, ConfigValue]  # every broker key: set ones parsed, the rest Kafka's default
    raw: dict[str, str]             # the known keys set, as written (trimmed)
    where: dict[str, str]           # known key -> "path:line" or "--override"
    unknown: dict[str, str]         # set but not known: warned about, otherwise unused
    # listener.name.<listener>.<key>: listener (upper-case) -> key -> (raw value, where)
    per_listener: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)


LISTENER_PREFIX = "listener.name."


def listener_key(key: str) -> tuple[str, str] | None:
    """'listener.name.sasl_ssl.ssl.keystore.location' -> ('SASL_SSL', 'ssl.keystore.location'),
    for the keys a listener may set for itself (ssl.*, sasl.enabled.mechanisms and
    <mechanism>.sasl.jaas.config); None for any other key."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    listener, dot, rest = key[len(LISTENER_PREFIX):].partition(".")
    if not dot or not listener:
        return None
    if rest.startswith("ssl.") and rest in BROKER_CONFIG or rest == "sasl.enabled.mechanisms" \
            or rest.endswith(".sasl.jaas.config"):
        return listener.upper(), rest
    return None


def load_static(props: Mapping[str, str | Property], label: str,
                overrides: Mapping[str, str] | None = None) -> StaticConfig:
    """Type and validate ``props`` (from the file named ``label``; plain strings carry no
    line) with ``overrides`` winning over them, as in Kafka they count as static config.
    ConfigError lists every bad line, one per message line; its ``key`` is the first bad key."""
    merged: dict[str, tuple[str, str]] = {}  # key -> (raw value, where)
    for key, p in props.items():
        if isinstance(p, Property):
            merged[key] = (p.value, f"{label}:{p.line}")
        else:
            merged[key] = (p, label)
    for key, value in (overrides or {}).items():
        merged[key] = (value, "--override")

    static = StaticConfig(
        # copies: a caller mutating a list must not reach the table
        values={k.name: list(k.default) if isinstance(k.default, list) else k.default
                for k in BROKER_CONFIGS},
        raw={}, where={}, unknown={})
    errors: list[tuple[str, str]] = []
    for key, (raw, where) in merged.items():
        spec = BROKER_CONFIG.get(key)
        per_listener = listener_key(key) if spec is None else None
        if per_listener is not None:
            static.per_listener.setdefault(per_listener[0], {})[per_listener[1]] = (raw.strip(), where)
            continue
        if spec is None:
            static.unknown[key] = raw
            log.warning("%s: unknown config %r is ignored", where, key)
            continue
        try:
            static.values[key] = spec.parse(raw)
        except ValueError as e:
            errors.append((key, f"{where}: {key}: {e}"))
            continue
        static.raw[key] = raw.strip()
        static.where[key] = where
        if spec.note:
            log.info("%s: %s is %s", where, key, spec.note)
    if errors:
        raise ConfigError("\n".join(msg for _, msg in errors), errors[0][0])
    return static
