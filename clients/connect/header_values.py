"""Connect values as text and back, as Kafka's `Values` (what SimpleHeaderConverter writes).

`convert_to_string` is Values.convertToString: strings as they are, numbers and booleans
as Java prints them, bytes as base64, lists `[a,b]`, maps `{k:v}`, structs `{"f":v}`,
dates/times in ISO 8601 (UTC). `parse_string` is the part of Values.parseString headers
need: null, true/false, the smallest integer type that fits, FLOAT32/FLOAT64 for
fractions, a Decimal beyond those, ISO dates/times/timestamps, JSON-like arrays and maps
(element schemas inferred when they agree), anything else a STRING.
"""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import re
from typing import Any

from .data import (DataException, Date, Decimal, Schema, SchemaBuilder, Struct, Time,
                   Timestamp, Type)

__all__ = ["convert_to_string", "parse_string", "java_double"]

_MILLIS_PER_DAY = 86_400_000
_FLOAT32_MAX = 3.4028234663852886e38


def java_double(f: float) -> str:
    """Java's Double.toString: plain between 1e-3 and 1e7, else "1.0E20" style."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    text = repr(f)
    if f == 0 or 1e-3 <= abs(f) < 1e7:
        return text if ("e" not in text) else format(decimal.Decimal(text), "f")
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci = len(digits) - 1 + exponent
    return ("-" if sign else "") + ds[0] + "." + (ds[1:] or "0") + "E" + str(sci)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def convert_to_string(value: Any) -> str | None:
    """Values.convertToString (the schema is not needed: Python values carry their type)."""
    if value is None:
        return None
    return _append(value, False)


def _append(value: Any, embedded: bool) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (int, decimal.Decimal)):
        return str(value)
    if isinstance(value, str):
        return '"' + _escape(value) + '"' if embedded else value
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = base64.b64encode(value).decode("ascii")
        return '"' + text + '"' if embedded else text
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_append(v, True) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_append(k, True) + ":" + _append(v, True)
                              for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        return "{" + ",".join(_append(f.name, True) + ":" + _append(value.get(f), True)
                              for f in value.schema.fields) + "}"
    if isinstance(value, datetime.datetime):
        ms = Timestamp.from_logical(Timestamp.SCHEMA, value)
        if 0 <= ms < _MILLIS_PER_DAY:
            return _iso_time(Time.to_logical(Time.SCHEMA, ms))
        if ms % _MILLIS_PER_DAY == 0:
            return Date.to_logical(Date.SCHEMA, ms // _MILLIS_PER_DAY).isoformat()
        stamp = Timestamp.to_logical(Timestamp.SCHEMA, ms)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        return _iso_time(value)
    raise DataException(f"Failed to serialize unexpected value type {type(value).__name__}: "
                        f"{value}")


def _iso_time(t: datetime.time) -> str:
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- parsing

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}Z")
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_INT_SCHEMAS = ((1 << 7, Schema.INT8_SCHEMA), (1 << 15, Schema.INT16_SCHEMA),
                (1 << 31, Schema.INT32_SCHEMA), (1 << 63, Schema.INT64_SCHEMA))
_WIDTH = {Type.INT8: 0, Type.INT16: 1, Type.INT32: 2, Type.INT64: 3, Type.FLOAT32: 4,
          Type.FLOAT64: 5}


def parse_string(text: str) -> tuple[Schema | None, Any]:
    """The schema and value a header's text stands for (see the module docstring)."""
    if not text:
        return Schema.STRING_SCHEMA, text
    token = text.strip()
    if token == "null":
        return None, None
    if token in ("true", "false"):
        return Schema.BOOLEAN_SCHEMA, token == "true"
    if token[:1] in ("[", "{"):
        try:
            return _infer(json.loads(token, parse_float=decimal.Decimal))
        except (ValueError, DataException):
            pass
    if token[:1].isdigit():
        temporal = _temporal(token)
        if temporal is not None:
            return temporal
    if token[:1].isdigit() or token[:1] in ("+", "-"):
        number = _number(token)
        if number is not None:
            return number
    return Schema.STRING_SCHEMA, text


def _temporal(token: str) -> tuple[Schema, Any] | None:
    try:
        if _STAMP.fullmatch(token):
            return Timestamp.SCHEMA, datetime.datetime.strptime(
                token, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        if _TIME.fullmatch(token):
            return Time.SCHEMA, datetime.datetime.strptime(token, "%H:%M:%S.%fZ").time()
        if _DATE.fullmatch(token):
            return Date.SCHEMA, datetime.date.fromisoformat(token)
    except ValueError:
        pass
    return None


def _number(token: str) -> tuple[Schema, Any] | None:
    if "_" in token:            # Python's Decimal takes 1_000; Java's BigDecimal does not
        return None
    try:
        d = decimal.Decimal(token)
    except decimal.InvalidOperation:
        return None
    if not d.is_finite():
        return None
    return _number_schema(d)


def _number_schema(d: decimal.Decimal) -> tuple[Schema, Any]:
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    if d == d.to_integral_value():
        n = int(d)
        for limit, schema in _INT_SCHEMAS:
            if -limit <= n < limit:
                return schema, n
    if exponent != 0:
        f = float(d)
        if abs(f) <= _FLOAT32_MAX:
            return Schema.FLOAT32_SCHEMA, f
        if f not in (float("inf"), float("-inf")):
            return Schema.FLOAT64_SCHEMA, f
    return Decimal.schema(-exponent), d


def _infer(value: Any) -> tuple[Schema | None, Any]:
    """A schema for a parsed JSON value (floats as Decimal), and the value in Connect's types."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return Schema.BOOLEAN_SCHEMA, value
    if isinstance(value, (int, decimal.Decimal)):
        return _number_schema(decimal.Decimal(value))
    if isinstance(value, str):
        return Schema.STRING_SCHEMA, value
    if isinstance(value, list):
        pairs = [_infer(v) for v in value]
        common = _common([s for s, _ in pairs])
        if common is None:
            return None, [_plain(v) for _, v in pairs]
        return SchemaBuilder.array(common).build(), [_align(common, v) for _, v in pairs]
    pairs_by_key = {k: _infer(v) for k, v in value.items()}
    common = _common([s for s, _ in pairs_by_key.values()])
    if common is None:
        return None, {k: _plain(v) for k, (_, v) in pairs_by_key.items()}
    schema = SchemaBuilder.map(Schema.STRING_SCHEMA, common).build()
    return schema, {k: _align(common, v) for k, (_, v) in pairs_by_key.items()}


def _common(schemas: list[Schema | None]) -> Schema | None:
    """One schema every element fits, widening numbers as Values.commonSchemaFor (optional
    when an element is null); None if there is none."""
    present = [s for s in schemas if s is not None]
    if not present:
        return None
    first = present[0]
    if all(s == first for s in present):
        common = first
    elif all(s.type in _WIDTH and s.name is None for s in present):
        common = max(present, key=lambda s: _WIDTH[s.type])
    else:
        return None
    if len(present) == len(schemas) or common.optional:
        return common
    return Schema(common.type, True, None, common.name, common.version, common.doc,
                  common.parameters, common.fields if common.type is Type.STRUCT else None,
                  common.key_schema if common.type is Type.MAP else None,
                  common.value_schema if common.type in (Type.MAP, Type.ARRAY) else None)


def _align(schema: Schema, value: Any) -> Any:
    if value is not None and schema.type in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return value


def _plain(value: Any) -> Any:
    return float(value) if isinstance(value, decimal.Decimal) else value
