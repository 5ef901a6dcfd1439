"""InsertField$Key / InsertField$Value: add the record's topic, partition, offset,
timestamp or a static value as fields of a map or Struct key/value (Kafka's InsertField).

A field name ending in "!" makes a required field in the new schema, "?" (or nothing) an
optional one. A null key/value passes through unchanged.
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, ConfigException, Importance, Type
from ..data import Schema, SchemaBuilder, Struct, Timestamp
from .base import (KeyValueTransformation, OnKey, OnValue, REPLACE_NULL_WITH_DEFAULT, SchemaCache,
                   copy_schema_basics, define_replace_null, require_map, require_sink_record,
                   require_struct)

__all__ = ["InsertField", "InsertFieldKey", "InsertFieldValue"]

_PURPOSE = "field insertion"
_OPTIONALITY = ("Suffix with <code>!</code> to make this a required field, or <code>?</code> to "
                "keep it optional (the default).")
_OPTIONAL_TIMESTAMP = Timestamp.builder().optional().build()


def _spec(spec: str | None) -> tuple[str, bool] | None:
    """(name, optional) of a field spec such as "ts!" or "topic?"."""
    if spec is None:
        return None
    if spec.endswith("?"):
        return spec[:-1], True
    if spec.endswith("!"):
        return spec[:-1], False
    return spec, True


class InsertField(KeyValueTransformation):
    Key: ClassVar[type["InsertField"]]
    Value: ClassVar[type["InsertField"]]

    def __init__(self) -> None:
        self._topic: tuple[str, bool] | None = None
        self._partition: tuple[str, bool] | None = None
        self._offset: tuple[str, bool] | None = None
        self._timestamp: tuple[str, bool] | None = None
        self._static: tuple[str, bool] | None = None
        self._static_value: str | None = None
        self._replace_null = True
        self._cache = SchemaCache()

    def config(self) -> ConfigDef:
        return define_replace_null(
            ConfigDef()
            .define("topic.field", Type.STRING, None, Importance.MEDIUM,
                    "Field name for Kafka topic. " + _OPTIONALITY)
            .define("partition.field", Type.STRING, None, Importance.MEDIUM,
                    "Field name for Kafka partition. " + _OPTIONALITY)
            .define("offset.field", Type.STRING, None, Importance.MEDIUM,
                    "Field name for Kafka offset - only applicable to sink connectors.<br/>"
                    + _OPTIONALITY)
            .define("timestamp.field", Type.STRING, None, Importance.MEDIUM,
                    "Field name for record timestamp. " + _OPTIONALITY)
            .define("static.field", Type.STRING, None, Importance.MEDIUM,
                    "Field name for static data field. " + _OPTIONALITY)
            .define("static.value", Type.STRING, None, Importance.MEDIUM,
                    "Static field value, if field name configured."))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._topic = _spec(c["topic.field"])
        self._partition = _spec(c["partition.field"])
        self._offset = _spec(c["offset.field"])
        self._timestamp = _spec(c["timestamp.field"])
        self._static = _spec(c["static.field"])
        self._static_value = c["static.value"]
        self._replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        if self._static is not None and self._static_value is None:
            raise ConfigException("static.value", None,
                                  f"No value specified for static field: {self._static[0]}")
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            return self._schemaless(record, value)
        return self._with_schema(record, value)

    def _inserted(self, record: ConnectRecord, as_struct: bool) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        if self._topic is not None:
            out.append((self._topic[0], record.topic))
        if self._partition is not None and record.kafka_partition is not None:
            out.append((self._partition[0], record.kafka_partition))
        if self._offset is not None:
            out.append((self._offset[0], require_sink_record(record, _PURPOSE).kafka_offset))
        if self._timestamp is not None and record.timestamp is not None:
            ts: Any = record.timestamp
            if as_struct:
                ts = Timestamp.to_logical(Timestamp.SCHEMA, ts)
            out.append((self._timestamp[0], ts))
        if self._static is not None and self._static_value is not None:
            out.append((self._static[0], self._static_value))
        return out

    def _schemaless(self, record: ConnectRecord, value: Any) -> ConnectRecord:
        updated = dict(require_map(value, _PURPOSE))
        updated.update(self._inserted(record, False))
        return self.new_record(record, None, updated)

    def _with_schema(self, record: ConnectRecord, value: Any) -> ConnectRecord:
        struct = require_struct(value, _PURPOSE)
        schema = self._cache.get_or_make(struct.schema, self._updated_schema)
        updated = Struct(schema)
        get = Struct.get if self._replace_null else Struct.get_without_default
        for f in struct.schema.fields:
            updated.put(f.name, get(struct, f))
        for name, v in self._inserted(record, True):
            updated.put(name, v)
        return self.new_record(record, schema, updated)

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for f in schema.fields:
            builder.field(f.name, f.schema)
        for spec, optional_schema, required_schema in (
                (self._topic, Schema.OPTIONAL_STRING_SCHEMA, Schema.STRING_SCHEMA),
                (self._partition, Schema.OPTIONAL_INT32_SCHEMA, Schema.INT32_SCHEMA),
                (self._offset, Schema.OPTIONAL_INT64_SCHEMA, Schema.INT64_SCHEMA),
                (self._timestamp, _OPTIONAL_TIMESTAMP, Timestamp.SCHEMA),
                (self._static, Schema.OPTIONAL_STRING_SCHEMA, Schema.STRING_SCHEMA)):
            if spec is not None:
                builder.field(spec[0], optional_schema if spec[1] else required_schema)
        return builder.build()

    def close(self) -> None:
        self._cache = SchemaCache()


class InsertFieldKey(OnKey, InsertField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.InsertField$Key"


class InsertFieldValue(OnValue, InsertField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.InsertField$Value"


InsertField.Key = InsertFieldKey
InsertField.Value = InsertFieldValue
