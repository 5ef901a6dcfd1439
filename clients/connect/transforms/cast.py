"""Cast$Key / Cast$Value: cast fields, or the whole key/value, to another primitive type
(Kafka's Cast). `spec` is "field1:type,field2:type" for a map or Struct, or one "type"
for the whole value; types are int8..int64, float32, float64, boolean and string. Bytes
cast only to string (base64); a Decimal casts to numbers or string, a date/time to
string. Numbers narrow as Java's casts do; strings parse as Java's parseInt & co.
A null key/value passes through.
"""
from __future__ import annotations

import decimal
from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, ConfigException, Importance, Type as CType
from ..data import DataException, Decimal, Schema, SchemaBuilder, Struct, Type
from ..header_values import convert_to_string
from .base import (KeyValueTransformation, OnKey, OnValue, REPLACE_NULL_WITH_DEFAULT, SchemaCache,
                   copy_schema_basics, define_replace_null, non_empty_list, require_map,
                   require_struct)

__all__ = ["Cast", "CastKey", "CastValue", "cast_value"]

_PURPOSE = "cast types"
_WHOLE_VALUE = ""
_OUTPUT = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
           Type.BOOLEAN, Type.STRING)
_INPUT = _OUTPUT + (Type.BYTES,)
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
_TEMPORAL = ("org.apache.kafka.connect.data.Date", "org.apache.kafka.connect.data.Time",
             "org.apache.kafka.connect.data.Timestamp")


def _parse_spec(key: str, mappings: list[str]) -> dict[str, Type]:
    """Field -> target type ("" for the whole value), checked as Kafka's parseFieldTypes."""
    out: dict[str, Type] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise ConfigException(key, mappings, f"Invalid cast mapping: {mapping}")
        name = parts[-1].strip()
        target = Type.__members__.get(name.upper())
        if target is None:
            raise ConfigException(key, mappings, f"Invalid type found in casting spec: {name}")
        if target not in _OUTPUT:
            raise ConfigException(key, mappings, f"Cast transformation does not support casting "
                                                 f"to {target}; supported types are "
                                                 f"{', '.join(str(t) for t in _OUTPUT)}")
        out[_WHOLE_VALUE if len(parts) == 1 else parts[0].strip()] = target
    if _WHOLE_VALUE in out and len(mappings) > 1:
        raise ConfigException(key, mappings, "Cast transformations that specify a type to cast to "
                                             "can only cast to one of the primitive types; a whole "
                                             "value cast cannot be combined with field casts.")
    return out


def _check_spec(key: str, value: Any) -> None:
    non_empty_list(key, value)
    _parse_spec(key, value)


def _wrap(n: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return n if -half <= n < half else (n + half) % (1 << bits) - half


def cast_value(value: Any, target: Type) -> Any:
    """`value` (a Connect primitive, a Decimal, or for STRING anything) as `target`."""
    if value is None:
        return None
    try:
        if target is Type.STRING:
            return convert_to_string(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"Unexpected type in Cast transformation: "
                                f"class {type(value).__name__}")
        if target in _BITS:
            if isinstance(value, bool):
                return 1 if value else 0
            if isinstance(value, str):
                return _range_checked(int(value.strip()), _BITS[target])
            if isinstance(value, (int, float, decimal.Decimal)):
                return _wrap(int(value), _BITS[target])
        elif target in (Type.FLOAT32, Type.FLOAT64):
            if isinstance(value, bool):
                return 1.0 if value else 0.0
            if isinstance(value, (int, float, decimal.Decimal, str)):
                return float(value.strip() if isinstance(value, str) else value)
        elif target is Type.BOOLEAN:
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                return value.strip().lower() == "true"
            if isinstance(value, (int, float, decimal.Decimal)):
                return int(value) != 0
    except (ValueError, OverflowError, decimal.InvalidOperation) as e:
        raise DataException(f"Cast transformation could not cast {value!r} to {target}: "
                            f"{e}") from None
    raise DataException(f"Unexpected type in Cast transformation: class {type(value).__name__}")


def _range_checked(n: int, bits: int) -> int:
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):     # Java's parseByte & co. refuse these
        raise ValueError(f'Value out of range. Value:"{n}"')
    return n


def _check_input(schema: Schema) -> None:
    if schema.name == Decimal.LOGICAL_NAME or schema.name in _TEMPORAL:
        return
    if schema.type not in _INPUT:
        raise DataException(f"Cast transformation does not support casting from {schema.type}; "
                            f"supported types are {', '.join(str(t) for t in _INPUT)}")


def _check_cast(schema: Schema, target: Type) -> None:
    _check_input(schema)
    if (schema.type is Type.BYTES and schema.name is None or schema.name in _TEMPORAL) \
            and target is not Type.STRING:
        raise DataException(f"Cast transformation does not support casting {schema!r} to {target}; "
                            f"it can only be cast to STRING")


class Cast(KeyValueTransformation):
    """Cast fields or the entire key or value to a specific type."""

    Key: ClassVar[type["Cast"]]
    Value: ClassVar[type["Cast"]]

    def __init__(self) -> None:
        self._casts: dict[str, Type] = {}
        self._replace_null = True
        self._cache = SchemaCache()

    def config(self) -> ConfigDef:
        return define_replace_null(ConfigDef().define(
            "spec", CType.LIST, importance=Importance.HIGH, validator=_check_spec,
            documentation="List of fields and the type to cast them to of the form "
                          "field1:type,field2:type to cast fields of Maps or Structs. A single "
                          "type to cast the entire value. Valid types are int8, int16, int32, "
                          "int64, float32, float64, boolean, and string. Note that binary fields "
                          "can only be cast to string."))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._casts = _parse_spec("spec", c["spec"])
        self._replace_null = c[REPLACE_NULL_WITH_DEFAULT]
        self._cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        whole = self._casts.get(_WHOLE_VALUE)
        if schema is None:
            if whole is not None:
                return self.new_record(record, None, cast_value(value, whole))
            updated = dict(require_map(value, _PURPOSE))
            for name, target in self._casts.items():
                if name in updated:
                    updated[name] = cast_value(updated[name], target)
            return self.new_record(record, None, updated)
        updated_schema = self._cache.get_or_make(schema, self._updated_schema)
        if whole is not None:
            return self.new_record(record, updated_schema, cast_value(value, whole))
        struct = require_struct(value, _PURPOSE)
        out = Struct(updated_schema)
        get = Struct.get if self._replace_null else Struct.get_without_default
        for f in schema.fields:
            v = get(struct, f)
            out.put(f.name, cast_value(v, self._casts[f.name]) if f.name in self._casts else v)
        return self.new_record(record, updated_schema, out)

    def _updated_schema(self, schema: Schema) -> Schema:
        whole = self._casts.get(_WHOLE_VALUE)
        if whole is not None:
            return self._cast_schema(schema, whole, copy_basics=True)
        if schema.type is not Type.STRUCT:
            raise DataException(f"Only Struct objects supported for [{_PURPOSE}], "
                                f"found: {schema!r}")
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        if schema.optional:
            builder.optional()
        for f in schema.fields:
            target = self._casts.get(f.name)
            cast_schema = f.schema if target is None else self._cast_schema(f.schema, target)
            builder.field(f.name, cast_schema)
        return builder.build()

    @staticmethod
    def _cast_schema(source: Schema, target: Type, copy_basics: bool = False) -> Schema:
        _check_cast(source, target)
        builder = SchemaBuilder(target)
        if copy_basics and source.name not in _TEMPORAL and source.name != Decimal.LOGICAL_NAME:
            copy_schema_basics(source, builder)
        if source.optional:
            builder.optional()
        if source.default is not None:
            builder.default_value(cast_value(source.default, target))
        return builder.build()

    def close(self) -> None:
        self._cache = SchemaCache()


class CastKey(OnKey, Cast):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.Cast$Key"


class CastValue(OnValue, Cast):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.Cast$Value"


Cast.Key = CastKey
Cast.Value = CastValue
