"""A connector's configuration: the keys every connector has (Kafka's ConnectorConfig,
SourceConnectorConfig, SinkConnectorConfig), and the validation both herders run before
they accept a config and that `PUT /connector-plugins/{plugin}/config/validate` answers
(Kafka's AbstractHerder.validateConnectorConfig: the common keys, the connector's own,
each transform's and predicate's, in Kafka's groups)."""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..api import Connector, SinkConnector, SourceConnector
from ..config_def import (ConfigDef, ConfigKey, ConfigValue, Importance, Type, at_least, in_values,
                          valid_regex, validate_config)
from ..errors import BadRequestError

__all__ = ["COMMON", "SOURCE", "SINK", "validate_connector", "connector_kind", "sink_topics",
           "client_overrides", "check_valid", "check_name", "ERRORS_TOLERANCE_ALL"]

ERRORS_TOLERANCE_ALL = "all"


def _common() -> ConfigDef:
    return (ConfigDef()
            .define("name", Type.STRING, None, Importance.HIGH, "Globally unique name of the connector.",
                    group="Common", order=1)
            .define("connector.class", Type.STRING, None, Importance.HIGH,
                    "Name or alias of the connector's class.", group="Common", order=2)
            .define("tasks.max", Type.INT, 1, Importance.HIGH, "Maximum number of tasks.",
                    at_least(1), group="Common", order=3)
            .define("tasks.max.enforce", Type.BOOLEAN, True, Importance.LOW, "", group="Common", order=4)
            .define("key.converter", Type.CLASS, None, Importance.LOW, "", group="Common", order=5)
            .define("value.converter", Type.CLASS, None, Importance.LOW, "", group="Common", order=6)
            .define("header.converter", Type.CLASS, None, Importance.LOW, "", group="Common", order=7)
            .define("config.action.reload", Type.STRING, "restart", Importance.LOW, "",
                    in_values("none", "restart"), group="Common", order=8)
            .define("transforms", Type.LIST, "", Importance.LOW, "Aliases of the transformations.",
                    group="Transforms", order=1)
            .define("predicates", Type.LIST, "", Importance.LOW, "Aliases of the predicates.",
                    group="Predicates", order=1)
            .define("errors.retry.timeout", Type.LONG, 0, Importance.MEDIUM, "",
                    group="Error Handling", order=1)
            .define("errors.retry.delay.max.ms", Type.LONG, 60000, Importance.MEDIUM, "",
                    group="Error Handling", order=2)
            .define("errors.tolerance", Type.STRING, "none", Importance.MEDIUM,
                    "none: a conversion or transform error fails the task; all: skip the record.",
                    in_values("none", "all"), group="Error Handling", order=3)
            .define("errors.log.enable", Type.BOOLEAN, False, Importance.MEDIUM, "",
                    group="Error Handling", order=4)
            .define("errors.log.include.messages", Type.BOOLEAN, False, Importance.MEDIUM, "",
                    group="Error Handling", order=5))


COMMON = _common()
SOURCE = COMMON.merge(
    ConfigDef()
    .define("topic.creation.groups", Type.LIST, "", Importance.LOW, "", group="Topic Creation")
    .define("exactly.once.support", Type.STRING, "requested", Importance.MEDIUM, "",
            in_values("requested", "required", case_sensitive=False), group="Exactly Once Support")
    .define("transaction.boundary", Type.STRING, "poll", Importance.MEDIUM, "",
            in_values("poll", "interval", "connector", case_sensitive=False),
            group="Exactly Once Support")
    .define("transaction.boundary.interval.ms", Type.LONG, None, Importance.LOW, "",
            group="Exactly Once Support")
    .define("offsets.storage.topic", Type.STRING, None, Importance.LOW, "",
            group="offsets.topic"))
SINK = COMMON.merge(
    ConfigDef()
    .define("topics", Type.LIST, "", Importance.HIGH, "Topics to consume.", group="Common", order=4)
    .define("topics.regex", Type.STRING, "", Importance.HIGH, "Pattern of topics to consume.",
            valid_regex, group="Common", order=4)
    .define("errors.deadletterqueue.topic.name", Type.STRING, "", Importance.MEDIUM, "",
            group="Error Handling", order=6)
    .define("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3, Importance.MEDIUM, "",
            group="Error Handling", order=7)
    .define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, False, Importance.MEDIUM,
            "", group="Error Handling", order=8))


def connector_kind(cls: type) -> str:
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    return "unknown"


def sink_topics(config: Mapping[str, str]) -> tuple[list[str], str | None]:
    """A sink's `topics` list and `topics.regex` (None when unset)."""
    topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    regex = config.get("topics.regex", "").strip() or None
    return topics, regex


def client_overrides(config: Mapping[str, str], kind: str) -> dict[str, str]:
    """A connector's `producer.override.*` / `consumer.override.*` / `admin.override.*`."""
    prefix = f"{kind}.override."
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def _plugin_values(prefix: str, cls: type, config: Mapping[str, str]) -> list[ConfigValue]:
    """A transform's or predicate's own keys, validated under `prefix` (transforms.<alias>.)."""
    own = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
    definition = cls().config() if hasattr(cls, "config") else ConfigDef()
    values = validate_config(definition, own)
    for v in values:
        v.name = prefix + v.name
    return values


def validate_connector(registry: Any, config: Mapping[str, str]) -> tuple[dict[str, Any], type]:
    """Kafka's ConfigInfos for `config`, and the connector class. BadRequestError when there
    is no `connector.class` or no such plugin (Kafka answers those 400 rather than a report)."""
    class_name = config.get("connector.class")
    if not class_name:
        raise BadRequestError(f"Connector config {dict(config)} contains no connector type")
    try:
        cls = registry.connector_class(class_name)
    except Exception as e:
        raise BadRequestError(str(e)) from None
    kind = connector_kind(cls)
    base = SINK if kind == "sink" else SOURCE if kind == "source" else COMMON
    definitions: dict[str, Any] = dict(base.keys)
    values = {v.name: v for v in validate_config(base, config)}
    if not config.get("name"):
        values["name"].errors.append("Connector name must not be empty")
    if kind == "sink":
        topics, regex = sink_topics(config)
        if topics and regex:
            msg = "topics and topics.regex are mutually exclusive options, but both are set."
            values["topics"].errors.append(msg)
            values["topics.regex"].errors.append(msg)
        elif not topics and not regex:
            msg = "Must configure one of topics or topics.regex"
            values["topics"].errors.append(msg)
            values["topics.regex"].errors.append(msg)
    groups = ["Common", "Transforms", "Predicates", "Error Handling"]
    if kind == "source":
        groups += ["Topic Creation", "Exactly Once Support", "offsets.topic"]
    # Each transform and predicate: its type must resolve, then its own keys validate.
    for section, kind_name in (("transforms", "transformation"), ("predicates", "predicate")):
        aliases = values[section].value or []
        for alias in aliases:
            type_key = f"{section}.{alias}.type"
            group = f"{section.capitalize()}: {alias}"
            groups.append(group)
            tv = ConfigValue(type_key, config.get(type_key))
            definitions[type_key] = _key(type_key, group)
            values[type_key] = tv
            if not config.get(type_key):
                tv.errors.append(f"Missing required configuration \"{type_key}\" which has no default value.")
                continue
            try:
                plugin = registry.resolve(config[type_key], kind_name)
            except Exception as e:
                tv.errors.append(str(e))
                continue
            for v in _plugin_values(f"{section}.{alias}.", plugin, config):
                values[v.name] = v
                definitions[v.name] = _key(v.name, group)
    try:
        connector: Connector = cls()
        own = connector.validate(dict(config))
        own_defs = connector.config().keys
    except Exception as e:          # a plugin's validate() that raises is a config error
        own, own_defs = [ConfigValue("connector.class", class_name, errors=[f"validate() failed: {e}"])], {}
    for v in own:
        if v.name in values:
            values[v.name].errors.extend(e for e in v.errors if e not in values[v.name].errors)
        else:
            values[v.name] = v
        if v.name in own_defs:
            definitions[v.name] = own_defs[v.name]
    configs = []
    for name, v in values.items():
        d = definitions.get(name)
        definition = d.definition_json() if d is not None else _key(name, None).definition_json()
        configs.append({"definition": definition, "value": v.to_json(config.get(name))})
    error_count = sum(len(v.errors) for v in values.values())
    return ({"name": getattr(cls, "KAFKA_NAME", f"{cls.__module__}.{cls.__qualname__}"),
             "error_count": error_count, "groups": groups, "configs": configs}, cls)


def _key(name: str, group: str | None) -> ConfigKey:
    return ConfigKey(name, Type.STRING, None, Importance.HIGH, "", group=group)


def check_valid(info: dict[str, Any]) -> None:
    """BadRequestError listing every error of a validation (creating or updating)."""
    if info["error_count"] == 0:
        return
    lines = []
    for c in info["configs"]:
        for err in c["value"]["errors"]:
            lines.append(f"Invalid value {c['value']['value']} for configuration {c['value']['name']}: {err}")
    raise BadRequestError(
        f"Connector configuration is invalid and contains the following {info['error_count']} "
        f"error(s):\n" + "\n".join(lines) + "\nYou can also find the above list of errors at "
        "the endpoint `/connector-plugins/{connectorType}/config/validate`")


_NAME_OK = re.compile(r"^[^/\\\x00-\x1f]*$")


def check_name(name: str) -> None:
    if not name or not name.strip():
        raise BadRequestError("Connector name must not be empty")
    if not _NAME_OK.match(name):
        raise BadRequestError(f"Connector name {name!r} contains invalid characters")
