"""Kafka's JSON form of Connect schemas and values: the schema translation and, per
schema, a compiled writer (value -> JSON text) and reader (parsed JSON -> value). Used by
JsonConverter; the compiled functions are pure, so a converter caches them per schema.

Layout is Jackson's as Kafka configures it: compact, non-ASCII kept, keys of a schema in
the order type, items|keys,values|fields, optional, name, version, doc, parameters,
default (a struct field's "field" last). Bytes are base64; a Decimal base64 of its
unscaled two's complement or a number (NUMERIC); Date/Time/Timestamp numbers; a MAP with
non-string keys an array of [key, value] pairs.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
from json.encoder import encode_basestring as _quote    # the C one when available
from typing import Any, Callable, Mapping

from .data import (DataException, Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp,
                   Type)

__all__ = ["JsonCodec", "schemaless_encoder", "as_floats"]

_JSON_TYPE_NAMES = {Type.INT8: "int8", Type.INT16: "int16", Type.INT32: "int32",
                    Type.INT64: "int64", Type.FLOAT32: "float", Type.FLOAT64: "double",
                    Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes",
                    Type.ARRAY: "array", Type.MAP: "map", Type.STRUCT: "struct"}
_TYPES_BY_JSON_NAME = {v: k for k, v in _JSON_TYPE_NAMES.items()}


def _schemaless_default(o: Any) -> Any:
    """What the JSON encoder cannot write itself: bytes as base64 (as Jackson)."""
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(o).decode("ascii")
    if isinstance(o, Struct):
        raise DataException("Mismatching schema.")
    raise DataException(f"Java class {type(o)} does not have corresponding schema type.")


def schemaless_encoder() -> Callable[[Any], str]:
    """Compact JSON text of a plain value, non-ASCII kept (as Jackson). The C encoder is
    made once, without the cycle check (a cycle ends in RecursionError): 3x json.dumps."""
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                            default=_schemaless_default).encode
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    try:
        encode = make(None, _schemaless_default, _quote, None, ":", ",", False, False, True)
    except TypeError:       # no C encoder, or another signature in this Python
        return slow
    return lambda value: "".join(encode(value, 0))


def _node_type(v: Any) -> str:
    """Jackson's JsonNodeType name of a parsed JSON value (for Kafka's messages)."""
    if isinstance(v, dict):
        return "OBJECT"
    if isinstance(v, list):
        return "ARRAY"
    if isinstance(v, str):
        return "STRING"
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "BOOLEAN"
    return "NUMBER"


def as_floats(v: Any) -> Any:
    """A payload parsed with exact decimals, as schemaless JSON reads (doubles)."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, list):
        return [as_floats(x) for x in v]
    if isinstance(v, dict):
        return {k: as_floats(x) for k, x in v.items()}
    return v


_INF = float("inf")


class JsonCodec:
    """Schema translation and compiled writers/readers for one setting of `decimal.format`
    (`numeric_decimals`) and `replace.null.with.default` (`replace_null`)."""

    def __init__(self, numeric_decimals: bool = False, replace_null: bool = True):
        self._numeric_decimals = numeric_decimals
        self._replace_null = replace_null

    def as_json_schema(self, schema: Schema) -> str:
        """Kafka's JSON form of a schema, as text with Jackson's key order."""
        t = schema.type
        parts = ['"type":"' + _JSON_TYPE_NAMES[t] + '"']
        if t is Type.ARRAY:
            parts.append('"items":' + self.as_json_schema(schema.value_schema))
        elif t is Type.MAP:
            parts.append('"keys":' + self.as_json_schema(schema.key_schema))
            parts.append('"values":' + self.as_json_schema(schema.value_schema))
        elif t is Type.STRUCT:
            fields = [self.as_json_schema(f.schema)[:-1] + ',"field":' + _quote(f.name) + "}"
                      for f in schema.fields]
            parts.append('"fields":[' + ",".join(fields) + "]")
        parts.append('"optional":' + ("true" if schema.optional else "false"))
        if schema.name is not None:
            parts.append('"name":' + _quote(schema.name))
        if schema.version is not None:
            parts.append('"version":' + str(schema.version))
        if schema.doc is not None:
            parts.append('"doc":' + _quote(schema.doc))
        if schema.parameters is not None:
            parts.append('"parameters":{' + ",".join(_quote(k) + ":" + _quote(v) for k, v in
                                                    schema.parameters.items()) + "}")
        if schema.default is not None:
            parts.append('"default":' + self.writer(schema)(schema.default))
        return "{" + ",".join(parts) + "}"

    def writer(self, schema: Schema) -> Callable[[Any], str]:
        """A function writing a value of `schema` as JSON text (nulls and defaults included)."""
        base = self._logical_writer(schema) or self._type_writer(schema)
        default_text = None
        if schema.default is not None and self._replace_null:
            default_text = base(schema.default)
        optional = schema.optional

        def write(v: Any) -> str:
            if v is None:
                if default_text is not None:
                    return default_text
                if optional:
                    return "null"
                raise DataException("Conversion error: null value for field that is required "
                                    "and has no default value")
            return base(v)
        return write

    def _logical_writer(self, schema: Schema) -> Callable[[Any], str] | None:
        name = schema.name
        if name == Decimal.LOGICAL_NAME:
            numeric = self._numeric_decimals

            def write_decimal(v: Any) -> str:
                if not isinstance(v, decimal.Decimal):
                    raise DataException(f"Invalid type for Decimal, expected BigDecimal but was "
                                        f"class {type(v).__name__}")
                if numeric:
                    return str(v)
                return '"' + base64.b64encode(Decimal.from_logical(schema, v)).decode("ascii") + '"'
            return write_decimal
        for logical, cls in ((Date, datetime.date), (Time, datetime.time),
                             (Timestamp, datetime.datetime)):
            if name == logical.LOGICAL_NAME:
                def write_temporal(v: Any, logical: Any = logical, cls: type = cls) -> str:
                    if not isinstance(v, cls):
                        raise DataException(f"Invalid type for {logical.__name__}, expected Date "
                                            f"but was class {type(v).__name__}")
                    return str(logical.from_logical(schema, v))
                return write_temporal
        return None

    def _type_writer(self, schema: Schema) -> Callable[[Any], str]:
        t = schema.type

        def bad(v: Any) -> DataException:
            return DataException(f"Invalid type for {t}: class {type(v).__name__}")

        if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
            def write_int(v: Any) -> str:
                if isinstance(v, int) and v.__class__ is not bool:
                    return int.__repr__(v)
                raise bad(v)
            return write_int
        if t is Type.FLOAT32 or t is Type.FLOAT64:
            def write_float(v: Any) -> str:
                if isinstance(v, (float, int)) and v.__class__ is not bool:
                    f = float(v)
                    if f != f or f in (_INF, -_INF):    # Jackson writes these as strings
                        return '"NaN"' if f != f else ('"Infinity"' if f > 0 else '"-Infinity"')
                    return float.__repr__(f)
                raise bad(v)
            return write_float
        if t is Type.BOOLEAN:
            def write_bool(v: Any) -> str:
                if v is True or v is False:
                    return "true" if v else "false"
                raise bad(v)
            return write_bool
        if t is Type.STRING:
            def write_str(v: Any) -> str:
                if isinstance(v, str):
                    return _quote(v)
                raise bad(v)
            return write_str
        if t is Type.BYTES:
            def write_bytes(v: Any) -> str:
                if isinstance(v, (bytes, bytearray, memoryview)):
                    return '"' + base64.b64encode(v).decode("ascii") + '"'
                raise DataException(f"Invalid type for bytes type: class {type(v).__name__}")
            return write_bytes
        if t is Type.ARRAY:
            item = self.writer(schema.value_schema)

            def write_array(v: Any) -> str:
                if not isinstance(v, (list, tuple)):
                    raise bad(v)
                return "[" + ",".join([item(x) for x in v]) + "]"
            return write_array
        if t is Type.MAP:
            key, val = self.writer(schema.key_schema), self.writer(schema.value_schema)
            string_keys = schema.key_schema.type is Type.STRING

            def write_map(v: Any) -> str:
                if not isinstance(v, Mapping):
                    raise bad(v)
                if string_keys:     # a JSON object; other keys: an array of [key, value] pairs
                    return "{" + ",".join([key(k) + ":" + val(x) for k, x in v.items()]) + "}"
                pairs = ["[" + key(k) + "," + val(x) + "]" for k, x in v.items()]
                return "[" + ",".join(pairs) + "]"
            return write_map
        names = [_quote(f.name) + ":" for f in schema.fields]
        writers = [self.writer(f.schema) for f in schema.fields]
        pairs = list(zip(names, writers))

        def write_struct(v: Any) -> str:
            if not isinstance(v, Struct):
                raise bad(v)
            if v.schema is not schema and v.schema != schema:
                raise DataException("Mismatching schema.")
            return "{" + ",".join([n + w(x) for (n, w), x in zip(pairs, v._values)]) + "}"
        return write_struct

    def as_connect_schema(self, node: Any) -> Schema | None:
        """Kafka's asConnectSchema: a parsed JSON schema (dict) as a Schema (None for null)."""
        if node is None:
            return None
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise DataException("Schema must contain 'type' field")
        type_name = node["type"]
        t = _TYPES_BY_JSON_NAME.get(type_name)
        if t is None:
            raise DataException(f"Unknown schema type: {type_name}")
        builder = SchemaBuilder(t)
        if t is Type.ARRAY:
            items = node.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            builder = SchemaBuilder.array(self.required_schema(items))
        elif t is Type.MAP:
            if "keys" not in node:
                raise DataException("Map schema did not specify the key type")
            if "values" not in node:
                raise DataException("Map schema did not specify the value type")
            builder = SchemaBuilder.map(self.required_schema(node["keys"]),
                                        self.required_schema(node["values"]))
        elif t is Type.STRUCT:
            fields = node.get("fields")
            if not isinstance(fields, list):
                raise DataException("Struct schema's \"fields\" argument is not an array.")
            for f in fields:
                name = f.get("field") if isinstance(f, dict) else None
                if not isinstance(name, str):
                    raise DataException("Struct schema's field name not specified properly")
                builder.field(name, self.required_schema(f))
        if node.get("optional") is True:
            builder.optional()
        else:
            builder.required()
        if isinstance(node.get("name"), str):
            builder.name(node["name"])
        version = node.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            builder.version(version)
        if isinstance(node.get("doc"), str):
            builder.doc(node["doc"])
        params = node.get("parameters")
        if isinstance(params, dict):
            for k, v in params.items():
                if not isinstance(v, str):
                    raise DataException("Schema parameters must have string values.")
                builder.parameter(k, v)
        if "default" in node and node["default"] is not None:
            builder.default_value(self.reader(builder.build())(node["default"]))
        return builder.build()

    def required_schema(self, node: Any) -> Schema:
        schema = self.as_connect_schema(node)
        if schema is None:
            raise DataException("Schema must contain 'type' field")
        return schema

    def reader(self, schema: Schema) -> Callable[[Any], Any]:
        """A function reading a parsed JSON value (floats as Decimal) as a value of `schema`."""
        base = self._logical_reader(schema) or self._type_reader(schema)
        default = schema.default if self._replace_null else None
        optional, t = schema.optional, schema.type

        def read(v: Any) -> Any:
            if v is None:
                if default is not None:
                    return default
                if optional:
                    return None
                raise DataException(f"Invalid null value for required {t} field")
            return base(v)
        return read

    def _logical_reader(self, schema: Schema) -> Callable[[Any], Any] | None:
        name = schema.name
        if name == Decimal.LOGICAL_NAME:
            def read_decimal(v: Any) -> Any:
                if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
                    return decimal.Decimal(v)
                if isinstance(v, str):
                    try:
                        return Decimal.to_logical(schema, base64.b64decode(v, validate=True))
                    except (binascii.Error, ValueError):
                        raise DataException("Invalid bytes for Decimal field") from None
                raise DataException(f"Invalid type for Decimal, underlying representation should "
                                    f"be numeric or bytes but was {_node_type(v)}")
            return read_decimal
        for logical in (Date, Time, Timestamp):
            if name == logical.LOGICAL_NAME:
                def read_temporal(v: Any, logical: Any = logical) -> Any:
                    if isinstance(v, int) and not isinstance(v, bool):
                        return logical.to_logical(schema, v)
                    raise DataException(f"Invalid type for {logical.__name__}, underlying "
                                        f"representation should be integer but was {_node_type(v)}")
                return read_temporal
        return None

    def _type_reader(self, schema: Schema) -> Callable[[Any], Any]:
        t = schema.type

        def bad(v: Any) -> DataException:
            return DataException(f"Invalid type for {t}: JSON {_node_type(v)}")

        if t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
            bits = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}[t]
            half, full = 1 << (bits - 1), 1 << bits

            def read_int(v: Any) -> Any:
                if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
                    n = int(v)
                    # Java's narrowing casts wrap; so does Kafka's reading of a wider number
                    return n if -half <= n < half else (n + half) % full - half
                raise bad(v)
            return read_int
        if t is Type.FLOAT32 or t is Type.FLOAT64:
            def read_float(v: Any) -> Any:
                if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
                    return float(v)
                if v in ("NaN", "Infinity", "-Infinity"):
                    return float(v)
                raise bad(v)
            return read_float
        if t is Type.BOOLEAN:
            def read_bool(v: Any) -> Any:
                if isinstance(v, bool):
                    return v
                raise bad(v)
            return read_bool
        if t is Type.STRING:
            def read_str(v: Any) -> Any:
                if isinstance(v, str):
                    return v
                raise bad(v)
            return read_str
        if t is Type.BYTES:
            def read_bytes(v: Any) -> Any:
                if isinstance(v, str):
                    try:
                        return base64.b64decode(v, validate=True)
                    except (binascii.Error, ValueError):
                        pass
                raise DataException("Invalid bytes field")
            return read_bytes
        if t is Type.ARRAY:
            item = self.reader(schema.value_schema)

            def read_array(v: Any) -> Any:
                if not isinstance(v, list):
                    raise bad(v)
                return [item(x) for x in v]
            return read_array
        if t is Type.MAP:
            key, val = self.reader(schema.key_schema), self.reader(schema.value_schema)
            if schema.key_schema.type is Type.STRING:
                def read_object(v: Any) -> Any:
                    if not isinstance(v, dict):
                        raise DataException(f"Maps with string fields should be encoded as JSON "
                                            f"objects, but found {_node_type(v)}")
                    return {k: val(x) for k, x in v.items()}
                return read_object

            def read_pairs(v: Any) -> Any:
                if not isinstance(v, list):
                    raise DataException(f"Maps with non-string fields should be encoded as JSON "
                                        f"array of tuples, but found {_node_type(v)}")
                out = {}
                for entry in v:
                    if not isinstance(entry, list):
                        raise DataException(f"Found invalid map entry instead of array tuple: "
                                            f"{_node_type(entry)}")
                    if len(entry) != 2:
                        raise DataException(f"Found invalid map entry, expected length 2 but "
                                            f"found :{len(entry)}")
                    try:
                        out[key(entry[0])] = val(entry[1])
                    except TypeError as e:      # a key Python cannot hash (a list, a Struct)
                        raise DataException(f"Unsupported map key: {e}") from None
                return out
            return read_pairs
        fields = [(f.name, self.reader(f.schema)) for f in schema.fields]

        def read_struct(v: Any) -> Any:
            if not isinstance(v, dict):
                raise DataException(f"Structs should be encoded as JSON objects, but found "
                                    f"{_node_type(v)}")
            out = Struct(schema)
            out._values = [r(v.get(n)) for n, r in fields]     # each reader checked its value
            return out
        return read_struct
