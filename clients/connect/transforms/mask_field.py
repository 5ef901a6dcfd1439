"""MaskField$Key / MaskField$Value: replace the listed fields' values with their type's
"empty" value (0, false, "", an empty list or map, the epoch) or with `replacement`
parsed as the value's type (numbers and strings only), as Kafka's MaskField."""
from __future__ import annotations

import datetime
import decimal
from typing import Any, ClassVar, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, Importance, Type, non_empty
from ..data import DataException, Struct
from .base import (KeyValueTransformation, OnKey, OnValue, non_empty_list, require_map,
                   require_struct)

__all__ = ["MaskField", "MaskFieldKey", "MaskFieldValue"]

_PURPOSE = "mask fields"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _empty(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, datetime.datetime):    # Kafka: new Date(0) for every temporal type
        return _EPOCH
    if isinstance(value, datetime.date):
        return _EPOCH.date()
    if isinstance(value, datetime.time):
        return datetime.time(0)
    if isinstance(value, (list, tuple)):
        return []
    if isinstance(value, Mapping):
        return {}
    raise DataException(f"Cannot mask value of type: class {type(value).__name__}")


def _replaced(value: Any, replacement: str) -> Any:
    try:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            return int(replacement)
        elif isinstance(value, float):
            return float(replacement)
        elif isinstance(value, decimal.Decimal):
            return decimal.Decimal(replacement)
        elif isinstance(value, str):
            return replacement
    except (ValueError, decimal.InvalidOperation):
        raise DataException(f"Unable to convert {replacement} (class str) to number") from None
    raise DataException(f"Cannot mask value of type class {type(value).__name__} with custom "
                        f"replacement.")


class MaskField(KeyValueTransformation):
    """Mask specified fields with a valid null value for the field type (i.e. 0, false,
    empty string, and so on)."""

    Key: ClassVar[type["MaskField"]]
    Value: ClassVar[type["MaskField"]]

    def __init__(self) -> None:
        self._fields: set[str] = set()
        self._replacement: str | None = None

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("fields", Type.LIST, importance=Importance.HIGH, validator=non_empty_list,
                        documentation="Names of fields to mask.")
                .define("replacement", Type.STRING, None, Importance.LOW,
                        "Custom value replacement, that will be applied to all 'fields' values "
                        "(numeric or non-empty string values only).", non_empty))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._fields = set(c["fields"])
        self._replacement = c["replacement"]

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        if self._replacement is None:
            return _empty(value)
        return _replaced(value, self._replacement)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            source = require_map(value, _PURPOSE)
            updated = dict(source)
            for name in self._fields:
                updated[name] = self._masked(source.get(name))
            return self.new_record(record, None, updated)
        struct = require_struct(value, _PURPOSE)
        out = Struct(struct.schema)
        for f in struct.schema.fields:
            v = struct.get(f)
            out.put(f, self._masked(v) if f.name in self._fields else v)
        return self.new_record(record, schema, out)


class MaskFieldKey(OnKey, MaskField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.MaskField$Key"


class MaskFieldValue(OnValue, MaskField):
    KAFKA_NAME = "org.apache.kafka.connect.transforms.MaskField$Value"


MaskField.Key = MaskFieldKey
MaskField.Value = MaskFieldValue
