"""HoistField$Key / HoistField$Value: wrap the key/value in a single field: a one-entry
map for schemaless data, else a Struct whose one field has the original schema (Kafka's
HoistField)."""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, Importance, Type
from ..data import SchemaBuilder, Struct
from .base import KeyValueTransformation, OnKey, OnValue, SchemaCache

__all__ = ["HoistField", "HoistFieldKey", "HoistFieldValue"]


class HoistField(KeyValueTransformation):
    """Wrap data using the specified field name in a Struct when schema present, or a Map
    in the case of schemaless data."""

    Key: ClassVar[type["HoistField"]]
    Value: ClassVar[type["HoistField"]]

    def __init__(self) -> None:
        self._field = ""
        self._cache = SchemaCache()

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "field", Type.STRING, importance=Importance.MEDIUM,
            documentation="Field name for the single field that will be created in the "
                          "resulting Struct or Map.")

    def configure(self, configs: Mapping[str, Any]) -> None:
        self._field = self.config().parse(configs)["field"]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self._field: value})
        updated = self._cache.get_or_make(
            schema, lambda s: SchemaBuilder.struct().field(self._field, s).build())
        return self.new_record(record, updated, Struct(updated).put(self._field, value))

    def close(self) -> None:
        self._cache = SchemaCache()


class HoistFieldKey(OnKey, HoistField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.HoistField$Key"


class HoistFieldValue(OnValue, HoistField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.HoistField$Value"


HoistField.Key = HoistFieldKey
HoistField.Value = HoistFieldValue
