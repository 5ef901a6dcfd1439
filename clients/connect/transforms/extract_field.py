"""ExtractField$Key / ExtractField$Value: replace the key/value with one of its fields
(Kafka's ExtractField). With `field.syntax.version=V2` the field may be a dotted path into
nested maps/Structs ("a.b.c"; a name holding dots is written in backticks). A null
key/value passes through."""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, Importance, Type as CType, in_values
from ..data import DataException, Schema, Struct, Type
from .base import (KeyValueTransformation, OnKey, OnValue, REPLACE_NULL_WITH_DEFAULT,
                   define_replace_null, require_map_or_null, require_struct_or_null)

__all__ = ["ExtractField", "ExtractFieldKey", "ExtractFieldValue", "field_path"]

_PURPOSE = "field extraction"


def field_path(text: str, v2: bool) -> list[str]:
    """The names along a field path: V1 is the name itself; V2 splits on dots, a segment
    in backticks keeping its dots (\\` is a backtick inside one)."""
    if not v2:
        return [text]
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == "`":
            j, seg = i + 1, []
            while j < n:
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "`":
                    seg.append("`")
                    j += 2
                elif text[j] == "`" and (j + 1 == n or text[j + 1] == "."):
                    break
                else:
                    seg.append(text[j])
                    j += 1
            if j < n:                   # a closed backtick segment
                out.append("".join(seg))
                i = j + 1
            else:                       # no closing backtick: the text is a plain name
                end = text.find(".", i)
                end = n if end < 0 else end
                out.append(text[i:end])
                i = end
        else:
            end = text.find(".", i)
            end = n if end < 0 else end
            out.append(text[i:end])
            i = end
        if i >= n:
            return out
        i += 1                          # the dot


class ExtractField(KeyValueTransformation):
    """Extract the specified field from a Struct when schema present, or a Map in the case
    of schemaless data. Any null values are passed through unmodified."""

    Key: ClassVar[type["ExtractField"]]
    Value: ClassVar[type["ExtractField"]]

    def __init__(self) -> None:
        self._field = ""
        self._path: list[str] = []
        self._replace_null = True

    def config(self) -> ConfigDef:
        return define_replace_null(
            ConfigDef()
            .define("field", CType.STRING, importance=Importance.MEDIUM,
                    documentation="Field name to extract.")
            .define("field.syntax.version", CType.STRING, "V1", Importance.HIGH,
                    "Defines the version of the syntax to access fields. V1 accesses only the "
                    "root level; V2 accesses nested fields with dotted paths.",
                    in_values("V1", "V2", case_sensitive=False)))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._field = c["field"]
        self._path = field_path(self._field, c["field.syntax.version"].upper() == "V2")
        self._replace_null = c[REPLACE_NULL_WITH_DEFAULT]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        if schema is None:
            value = require_map_or_null(self.operating_value(record), _PURPOSE)
            if value is None:
                return self.new_record(record, None, None)
            found: Any = value
            for name in self._path:
                found = found.get(name) if isinstance(found, Mapping) else None
            return self.new_record(record, None, found)
        struct = require_struct_or_null(self.operating_value(record), _PURPOSE)
        field_schema: Schema = schema
        for name in self._path:
            f = field_schema.field(name) if field_schema.type is Type.STRUCT else None
            if f is None:
                raise DataException(f"Unknown field: {self._field}")
            field_schema = f.schema
        if struct is None:
            return self.new_record(record, field_schema, None)
        found = struct
        for name in self._path:
            if not isinstance(found, Struct):
                found = None
                break
            found = found.get(name) if self._replace_null else found.get_without_default(name)
        return self.new_record(record, field_schema, found)


class ExtractFieldKey(OnKey, ExtractField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ExtractField$Key"


class ExtractFieldValue(OnValue, ExtractField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.ExtractField$Value"


ExtractField.Key = ExtractFieldKey
ExtractField.Value = ExtractFieldValue
