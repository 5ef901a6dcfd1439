"""Declared configuration of connectors, transforms and converters: Kafka's ConfigDef.

A `ConfigDef` lists keys with a type, a default (or none: required), an importance, a
doc and an optional validator. `parse` turns string properties into typed values or raises
`ConfigException` naming the key; `validate_config` gives every key's value and errors
without raising, which is what `PUT /connector-plugins/{plugin}/config/validate` answers
(`ConfigKey.definition_json` and `ConfigValue.to_json` are Kafka's JSON bodies).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

__all__ = ["ConfigDef", "ConfigKey", "ConfigValue", "ConfigException", "NO_DEFAULT",
           "Type", "Importance", "Width", "in_values", "at_least", "between", "non_empty",
           "valid_regex", "validate_config"]


class ConfigException(ValueError):
    """A bad config value: `key` names it (Kafka's ConfigException)."""

    def __init__(self, key: str, value: Any, reason: str):
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


class Type:
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance:
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width:
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


Validator = Callable[[str, Any], None]     # raises ConfigException


def _parse(key: str, type_: str, raw: Any) -> Any:
    """A string (or already typed) value as `type_`; ConfigException when it is not one."""
    if raw is None:
        return None
    if type_ in (Type.STRING, Type.PASSWORD, Type.CLASS):
        if not isinstance(raw, str):
            raise ConfigException(key, raw, f"Expected value to be a string, but it was a {type(raw).__name__}")
        return raw.strip() if type_ != Type.PASSWORD else raw
    if type_ == Type.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigException(key, raw, "Expected value to be either true or false")
    if type_ in (Type.INT, Type.SHORT, Type.LONG):
        try:
            value = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw).strip())
        except ValueError:
            raise ConfigException(key, raw, "Not a number of type " + type_) from None
        limit = {Type.SHORT: 2 ** 15, Type.INT: 2 ** 31, Type.LONG: 2 ** 63}[type_]
        if not -limit <= value < limit:
            raise ConfigException(key, raw, "Not a number of type " + type_)
        return value
    if type_ == Type.DOUBLE:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise ConfigException(key, raw, "Not a number of type DOUBLE") from None
    if type_ == Type.LIST:
        if isinstance(raw, (list, tuple)):
            return [str(x) for x in raw]
        text = str(raw).strip()
        return [] if not text else [p.strip() for p in text.split(",")]
    raise ValueError(f"unknown config type {type_}")


@dataclass
class ConfigKey:
    name: str
    type: str
    default: Any = NO_DEFAULT
    importance: str = Importance.MEDIUM
    documentation: str = ""
    validator: Validator | None = None
    group: str | None = None
    order: int = -1
    width: str = Width.NONE
    display_name: str | None = None
    dependents: list[str] = field(default_factory=list)
    recommended_values: list[Any] = field(default_factory=list)

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def definition_json(self) -> dict[str, Any]:
        """Kafka's ConfigKeyInfo, as `config/validate` answers it."""
        default = None if self.default is NO_DEFAULT else self.default
        return {"name": self.name, "type": self.type, "required": self.required,
                "default_value": _as_text(default), "importance": self.importance,
                "documentation": self.documentation, "group": self.group,
                "width": self.width, "display_name": self.display_name or self.name,
                "dependents": list(self.dependents), "order": self.order}


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass
class ConfigValue:
    """One key's outcome of a validation (Kafka's ConfigValue / ConfigValueInfo)."""

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def to_json(self, raw: Any = None) -> dict[str, Any]:
        shown = raw if raw is not None else _as_text(self.value)
        return {"name": self.name, "value": shown,
                "recommended_values": [str(v) for v in self.recommended_values],
                "errors": list(self.errors), "visible": self.visible}


class ConfigDef:
    """An ordered set of declared keys; `define` returns self so declarations chain."""

    def __init__(self, keys: Iterable[ConfigKey] = ()):
        self.keys: dict[str, ConfigKey] = {}
        for k in keys:
            self.keys[k.name] = k

    def define(self, name: str, type_: str, default: Any = NO_DEFAULT,
               importance: str = Importance.MEDIUM, documentation: str = "",
               validator: Validator | None = None, **extra: Any) -> "ConfigDef":
        if name in self.keys:
            raise ValueError(f"Configuration {name} is defined twice.")
        self.keys[name] = ConfigKey(name, type_, default, importance, documentation, validator,
                                    **extra)
        return self

    def merge(self, other: "ConfigDef") -> "ConfigDef":
        """A new ConfigDef with this one's keys, then the other's not already here."""
        out = ConfigDef(self.keys.values())
        for k in other.keys.values():
            out.keys.setdefault(k.name, k)
        return out

    def names(self) -> list[str]:
        return list(self.keys)

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every declared key's typed value (defaults filled in); undeclared keys are
        passed through as given. Raises ConfigException on the first bad key."""
        out: dict[str, Any] = dict(props)
        for key in self.keys.values():
            out[key.name] = self._value(key, props)
        return out

    def _value(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            value = _parse(key.name, key.type, props[key.name])
        elif key.required:
            raise ConfigException(key.name, None,
                                  f'Missing required configuration "{key.name}" which has no default value.')
        else:
            value = _parse(key.name, key.type, key.default)
        if key.validator is not None and (value is not None or key.name in props):
            key.validator(key.name, value)
        return value


def validate_config(config_def: ConfigDef, props: Mapping[str, Any]) -> list[ConfigValue]:
    """Every declared key's ConfigValue, errors collected instead of raised."""
    out = []
    for key in config_def.keys.values():
        cv = ConfigValue(key.name, props.get(key.name), list(key.recommended_values))
        try:
            cv.value = config_def._value(key, props)
        except ConfigException as e:
            cv.errors.append(e.reason if key.required and key.name not in props else str(e))
        out.append(cv)
    return out


# --------------------------------------------------------------------------- validators

def in_values(*allowed: str, case_sensitive: bool = True) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        ok = value in allowed if case_sensitive else str(value).lower() in {a.lower() for a in allowed}
        if not ok:
            raise ConfigException(key, value, f"String must be one of: {', '.join(allowed)}")
    return check


def at_least(minimum: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigException(key, value, f"Value must be at least {minimum}")
    return check


def between(low: float, high: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigException(key, value, f"Value must be no less than {low} and no more than {high}")
    return check


def non_empty(key: str, value: Any) -> None:
    if value is None or (isinstance(value, str) and not value):
        raise ConfigException(key, value, "String must be non-empty")


def valid_regex(key: str, value: Any) -> None:
    if value is None:
        return
    try:
        re.compile(value)
    except re.error as e:
        raise ConfigException(key, value, f"Invalid regex: {e}") from None
