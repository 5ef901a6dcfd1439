"""ReplaceField$Key / ReplaceField$Value: drop, keep or rename fields of a map or Struct
(Kafka's ReplaceField). `exclude` wins over `include`; an empty `include` keeps every
field; `renames` is "old:new,old2:new2". Kafka's deprecated `blacklist`/`whitelist` are
read as `exclude`/`include` when those are not set. A null key/value passes through.
"""
from __future__ import annotations

import logging
from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, ConfigException, Importance, Type
from ..data import Schema, SchemaBuilder, Struct
from .base import (KeyValueTransformation, OnKey, OnValue, REPLACE_NULL_WITH_DEFAULT, SchemaCache,
                   copy_schema_basics, define_replace_null, require_map, require_struct)

__all__ = ["ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue", "parse_rename_mappings"]

log = logging.getLogger(__name__)

_PURPOSE = "field replacement"
_DEPRECATED = (("include", "whitelist"), ("exclude", "blacklist"))


def parse_rename_mappings(mappings: list[str]) -> dict[str, str]:
    """Kafka's parseRenameMappings: each "old:new"; ConfigException naming `renames` else."""
    out = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) != 2:
            raise ConfigException("renames", mappings, f"Invalid rename mapping: {mapping}")
        out[parts[0]] = parts[1]
    return out


def _check_renames(key: str, value: Any) -> None:
    if value:
        parse_rename_mappings(value)


def _translate_deprecated(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's ConfigUtils.translateDeprecatedConfigs for ReplaceField's old names."""
    out = dict(configs)
    for new, old in _DEPRECATED:
        if old not in out:
            continue
        if new in out:
            log.info("ReplaceField: config '%s' is deprecated and ignored, '%s' is set", old, new)
        else:
            log.warning("ReplaceField: config '%s' is deprecated; use '%s'", old, new)
            out[new] = out[old]
        del out[old]
    return out


class ReplaceField(KeyValueTransformation):
    """Filter or rename fields (see the module docstring)."""

    Key: ClassVar[type["ReplaceField"]]
    Value: ClassVar[type["ReplaceField"]]

    def __init__(self) -> None:
        self._exclude: set[str] = set()
        self._include: set[str] = set()
        self._renames: dict[str, str] = {}
        self._reverse: dict[str, str] = {}
        self._replace_null = True
        self._cache = SchemaCache()

    def config(self) -> ConfigDef:
        return define_replace_null(
            ConfigDef()
            .define("exclude", Type.LIST, "", Importance.MEDIUM,
                    "Fields to exclude. This takes precedence over the fields to include.")
            .define("include", Type.LIST, "", Importance.MEDIUM,
                    "Fields to include. If specified, only these fields will be used.")
            .define("renames", Type.LIST, "", Importance.MEDIUM, "Field rename mappings.",
                    _check_renames))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(_translate_deprecated(configs))
        self._exclude = set(c["exclude"])
        self._include = set(c["include"])
        self._renames = parse_rename_mappings(c["renames"])
        self._reverse = {v: k for k, v in self._renames.items()}
        self._replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def _keeps(self, name: str) -> bool:
        return name not in self._exclude and (not self._include or name in self._include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            source = require_map(value, _PURPOSE)
            renames = self._renames
            updated = {renames.get(k, k): v for k, v in source.items() if self._keeps(k)}
            return self.new_record(record, None, updated)
        struct = require_struct(value, _PURPOSE)
        schema = self._cache.get_or_make(struct.schema, self._updated_schema)
        out = Struct(schema)
        get = Struct.get if self._replace_null else Struct.get_without_default
        for f in schema.fields:
            out.put(f.name, get(struct, self._reverse.get(f.name, f.name)))
        return self.new_record(record, schema, out)

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            if self._keeps(f.name):
                builder.field(self._renames.get(f.name, f.name), f.schema)
        return builder.build()

    def close(self) -> None:
        self._cache = SchemaCache()


class ReplaceFieldKey(OnKey, ReplaceField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Key"


class ReplaceFieldValue(OnValue, ReplaceField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ReplaceField$Value"


ReplaceField.Key = ReplaceFieldKey
ReplaceField.Value = ReplaceFieldValue
