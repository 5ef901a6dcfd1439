"""ValueToKey: replace the key with fields copied from the value (Kafka's ValueToKey): a
map of those fields for a schemaless value, a Struct (and its schema) otherwise."""
from __future__ import annotations

from typing import Any, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, Importance, Type
from ..data import DataException, Schema, SchemaBuilder, Struct
from .base import (REPLACE_NULL_WITH_DEFAULT, SchemaCache, Transformation, define_replace_null,
                   non_empty_list, require_map, require_struct)

__all__ = ["ValueToKey"]

_PURPOSE = "copying fields from value to key"


class ValueToKey(Transformation):
    """Replace the record key with a new key formed from a subset of fields in the record value."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.ValueToKey"

    def __init__(self) -> None:
        self._fields: list[str] = []
        self._replace_null = True
        self._cache = SchemaCache()

    def config(self) -> ConfigDef:
        return define_replace_null(ConfigDef().define(
            "fields", Type.LIST, importance=Importance.HIGH, validator=non_empty_list,
            documentation="Field names on the record value to extract as the record key."))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._fields = c["fields"]
        self._replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, _PURPOSE)
            key = {f: value.get(f) for f in self._fields}
            return record.new_record(key_schema=None, key=key)
        struct = require_struct(record.value, _PURPOSE)
        key_schema = self._cache.get_or_make(struct.schema, self._key_schema)
        key_struct = Struct(key_schema)
        get = Struct.get if self._replace_null else Struct.get_without_default
        for name in self._fields:
            key_struct.put(name, get(struct, name))
        return record.new_record(key_schema=key_schema, key=key_struct)

    def _key_schema(self, value_schema: Schema) -> Schema:
        builder = SchemaBuilder.struct()
        for name in self._fields:
            f = value_schema.field(name)
            if f is None:
                raise DataException(f"Field does not exist: {name}")
            builder.field(name, f.schema)
        return builder.build()

    def close(self) -> None:
        self._cache = SchemaCache()
