"""Connect's data model, as Kafka's `org.apache.kafka.connect.data`.

A `Schema` describes a value: a `Type`, whether it may be null (`optional`), a `default`,
and for logical types a `name` (e.g. "org.apache.kafka.connect.data.Timestamp"),
`version`, `doc` and string `parameters`. A STRUCT has ordered `fields` (`Field`: name,
index, schema), a MAP a `key_schema` and `value_schema`, an ARRAY a `value_schema`.
Build one with `SchemaBuilder` (fluent, as Kafka's) or the constructor; treat a built
Schema as immutable (it is hashed, and converters cache per schema).

Values in Python: INT8..INT64 -> int, FLOAT32/FLOAT64 -> float (an int is accepted),
BOOLEAN -> bool, STRING -> str, BYTES -> bytes (bytearray/memoryview accepted), ARRAY ->
list (tuple accepted), MAP -> dict, STRUCT -> `Struct`. The logical types map to
decimal.Decimal (`Decimal`), datetime.date (`Date`), datetime.time (`Time`) and a UTC
datetime.datetime (`Timestamp`). Schemaless values are plain Python.
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import enum
from typing import Any, ClassVar, Mapping, Sequence

from .api import ConnectError

__all__ = ["Type", "Schema", "Field", "Struct", "SchemaBuilder", "DataException",
           "SchemaBuilderException", "validate_value", "Decimal", "Date", "Time", "Timestamp"]


class DataException(ConnectError):
    """Data does not fit its schema, or cannot be converted (Kafka's DataException)."""


class SchemaBuilderException(DataException):
    pass


class Type(enum.Enum):
    """A schema's type; the value is Kafka's `Type.getName()`, str() its enum name."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    def __str__(self) -> str:
        return self.name

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


class Field:
    """One field of a STRUCT schema: its name, its position and its schema."""

    __slots__ = ("name", "index", "schema")

    def __init__(self, name: str, index: int, schema: "Schema"):
        self.name = name
        self.index = index
        self.schema = schema

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Field) and self.name == other.name
                and self.index == other.index and self.schema == other.schema)

    def __hash__(self) -> int:
        return hash((self.name, self.index, self.schema))

    def __repr__(self) -> str:
        return f"Field{{name={self.name}, index={self.index}, schema={self.schema!r}}}"


class Schema:
    """Kafka's ConnectSchema. `fields`, `key_schema` and `value_schema` raise DataException
    on a schema of another type, as Kafka's accessors do; `field(name)` gives None for an
    unknown name."""

    __slots__ = ("type", "optional", "default", "name", "version", "doc", "parameters",
                 "_fields", "_by_name", "_key_schema", "_value_schema", "_hash")

    INT8_SCHEMA: ClassVar["Schema"]
    INT16_SCHEMA: ClassVar["Schema"]
    INT32_SCHEMA: ClassVar["Schema"]
    INT64_SCHEMA: ClassVar["Schema"]
    FLOAT32_SCHEMA: ClassVar["Schema"]
    FLOAT64_SCHEMA: ClassVar["Schema"]
    BOOLEAN_SCHEMA: ClassVar["Schema"]
    STRING_SCHEMA: ClassVar["Schema"]
    BYTES_SCHEMA: ClassVar["Schema"]
    OPTIONAL_INT8_SCHEMA: ClassVar["Schema"]
    OPTIONAL_INT16_SCHEMA: ClassVar["Schema"]
    OPTIONAL_INT32_SCHEMA: ClassVar["Schema"]
    OPTIONAL_INT64_SCHEMA: ClassVar["Schema"]
    OPTIONAL_FLOAT32_SCHEMA: ClassVar["Schema"]
    OPTIONAL_FLOAT64_SCHEMA: ClassVar["Schema"]
    OPTIONAL_BOOLEAN_SCHEMA: ClassVar["Schema"]
    OPTIONAL_STRING_SCHEMA: ClassVar["Schema"]
    OPTIONAL_BYTES_SCHEMA: ClassVar["Schema"]

    def __init__(self, type: Type, optional: bool = False, default: Any = None,
                 name: str | None = None, version: int | None = None, doc: str | None = None,
                 parameters: Mapping[str, str] | None = None,
                 fields: Sequence[Field] | None = None, key_schema: "Schema | None" = None,
                 value_schema: "Schema | None" = None):
        self.type = type
        self.optional = optional
        self.default = default
        self.name = name
        self.version = version
        self.doc = doc
        self.parameters = dict(parameters) if parameters is not None else None
        if type is Type.STRUCT:
            self._fields: tuple[Field, ...] | None = tuple(fields or ())
            self._by_name = {f.name: f for f in self._fields}
        else:
            self._fields = None
            self._by_name = {}
        self._key_schema = key_schema
        self._value_schema = value_schema
        self._hash: int | None = None

    @property
    def fields(self) -> tuple[Field, ...]:
        if self._fields is None:
            raise DataException("Cannot list fields on non-struct type")
        return self._fields

    def field(self, name: str) -> Field | None:
        if self._fields is None:
            raise DataException("Cannot look up fields on non-struct type")
        return self._by_name.get(name)

    @property
    def key_schema(self) -> "Schema":
        if self.type is not Type.MAP or self._key_schema is None:
            raise DataException("Cannot look up key schema on non-map type")
        return self._key_schema

    @property
    def value_schema(self) -> "Schema":
        if self.type not in (Type.MAP, Type.ARRAY) or self._value_schema is None:
            raise DataException("Cannot look up value schema on non-array and non-map type")
        return self._value_schema

    def _identity(self) -> tuple[Any, ...]:
        return (self.type, self.optional, self.name, self.version, self.doc, self.parameters,
                self._fields, self._key_schema, self._value_schema)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Schema):
            return NotImplemented
        return (hash(self) == hash(other) and self._identity() == other._identity()
                and self.default == other.default)

    def __hash__(self) -> int:
        if self._hash is None:
            params = frozenset(self.parameters.items()) if self.parameters is not None else None
            self._hash = hash((self.type, self.optional, self.name, self.version, self.doc, params,
                               self._fields, self._key_schema, self._value_schema))
        return self._hash

    def __repr__(self) -> str:
        if self.name is not None:
            return f"Schema{{{self.name}:{self.type}}}"
        return f"Schema{{{self.type}}}"


def _primitive(type_: Type, optional: bool) -> Schema:
    return Schema(type_, optional)


for _t in (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64,
           Type.BOOLEAN, Type.STRING, Type.BYTES):
    setattr(Schema, f"{_t.name}_SCHEMA", _primitive(_t, False))
    setattr(Schema, f"OPTIONAL_{_t.name}_SCHEMA", _primitive(_t, True))


# --------------------------------------------------------------------------- validation

# The Python classes of the logical types' values, by the types' names
_LOGICAL_CLASSES: dict[str, type] = {
    "org.apache.kafka.connect.data.Decimal": _decimal.Decimal,
    "org.apache.kafka.connect.data.Date": _dt.date,
    "org.apache.kafka.connect.data.Time": _dt.time,
    "org.apache.kafka.connect.data.Timestamp": _dt.datetime,
}
_INT_RANGES = {Type.INT8: 1 << 7, Type.INT16: 1 << 15, Type.INT32: 1 << 31, Type.INT64: 1 << 63}


def _type_ok(schema: Schema, value: Any) -> bool:
    t = schema.type
    name = schema.name
    if name is not None and name in _LOGICAL_CLASSES:
        return isinstance(value, _LOGICAL_CLASSES[name])
    cls = type(value)
    if t in _INT_RANGES:
        limit = _INT_RANGES[t]
        return cls is not bool and isinstance(value, int) and -limit <= value < limit
    if t is Type.STRING:
        return isinstance(value, str)
    if t is Type.BOOLEAN:
        return cls is bool
    if t is Type.FLOAT32 or t is Type.FLOAT64:
        return cls is not bool and isinstance(value, (float, int))
    if t is Type.BYTES:
        return isinstance(value, (bytes, bytearray, memoryview))
    if t is Type.STRUCT:
        return isinstance(value, Struct)
    if t is Type.ARRAY:
        return isinstance(value, (list, tuple))
    if t is Type.MAP:
        return isinstance(value, Mapping)
    return False


def validate_value(schema: Schema, value: Any, field_name: str | None = None) -> None:
    """Raise DataException unless `value` fits `schema` (Kafka's ConnectSchema.validateValue)."""
    _validate(schema, value, "value" if field_name is None else f'field: "{field_name}"')


def _validate(schema: Schema, value: Any, location: str) -> None:
    if value is None:
        if not schema.optional:
            raise DataException(f"Invalid value: null used for required {location}, "
                                f"schema type: {schema.type}")
        return
    if not _type_ok(schema, value):
        named = f' "{schema.name}"' if schema.name is not None else ""
        raise DataException(f"Invalid Java object for schema{named} with type {schema.type}: "
                            f"class {type(value).__name__} for {location}")
    t = schema.type
    if t is Type.STRUCT:
        if value.schema != schema:
            raise DataException("Struct schemas do not match.")
        value.validate()
    elif t is Type.ARRAY:
        element = schema.value_schema
        for item in value:
            _validate(element, item, "element of array")
    elif t is Type.MAP:
        ks, vs = schema.key_schema, schema.value_schema
        for k, v in value.items():
            _validate(ks, k, "key of map")
            _validate(vs, v, "value of map")


# --------------------------------------------------------------------------- Struct

class Struct:
    """A STRUCT value: one slot per field of its schema. `put` checks the value against
    the field's schema; `get` gives the field's default when its value is null."""

    __slots__ = ("schema", "_values")
    __hash__ = None     # type: ignore[assignment]   # mutable, as Kafka's (no use as a key)

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None):
        if schema.type is not Type.STRUCT:
            raise DataException(f"Not a struct schema: {schema!r}")
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)
        if values:
            for name, value in values.items():
                self.put(name, value)

    def _lookup(self, field: str | Field) -> Field:
        if isinstance(field, Field):
            found = self.schema.field(field.name)
            if found is None or found != field:
                raise DataException(f"Field {field.name} is not in this struct's schema")
            return found
        found = self.schema.field(field)
        if found is None:
            raise DataException(f"{field} is not a valid field name")
        return found

    def get(self, field: str | Field) -> Any:
        f = self._lookup(field)
        value = self._values[f.index]
        if value is None:
            return f.schema.default
        return value

    def get_without_default(self, field: str | Field) -> Any:
        return self._values[self._lookup(field).index]

    def put(self, field: str | Field, value: Any) -> "Struct":
        f = self._lookup(field)
        _validate(f.schema, value, f'field: "{f.name}"')
        self._values[f.index] = value
        return self

    def validate(self) -> None:
        """Raise DataException if a required field without a default is null (or any
        value does not fit its field)."""
        for f in self.schema.fields:
            value = self._values[f.index]
            if value is None and (f.schema.optional or f.schema.default is not None):
                continue
            _validate(f.schema, value, f'field: "{f.name}"')

    def to_dict(self) -> dict[str, Any]:
        """The field values by name (defaults applied), nested Structs as dicts too."""
        out: dict[str, Any] = {}
        for f in self.schema.fields:
            value = self.get(f)
            out[f.name] = value.to_dict() if isinstance(value, Struct) else value
        return out

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Struct) and self.schema == other.schema
                and self._values == other._values)

    def __repr__(self) -> str:
        parts = [f"{f.name}={v}" for f, v in zip(self.schema.fields, self._values) if v is not None]
        return "Struct{" + ",".join(parts) + "}"


# --------------------------------------------------------------------------- builder

class SchemaBuilder:
    """Kafka's SchemaBuilder: `SchemaBuilder.struct().name("x").field("a",
    Schema.INT32_SCHEMA).optional().build()`. Each property may be set once."""

    def __init__(self, type: Type):
        self._type = type
        self._optional: bool | None = None
        self._default: Any = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None
        self._fields: dict[str, Field] | None = {} if type is Type.STRUCT else None
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    # Kafka's static factories (bool/bytes end in "_": they would shadow the builtins here)
    int8 = staticmethod(lambda: SchemaBuilder(Type.INT8))
    int16 = staticmethod(lambda: SchemaBuilder(Type.INT16))
    int32 = staticmethod(lambda: SchemaBuilder(Type.INT32))
    int64 = staticmethod(lambda: SchemaBuilder(Type.INT64))
    float32 = staticmethod(lambda: SchemaBuilder(Type.FLOAT32))
    float64 = staticmethod(lambda: SchemaBuilder(Type.FLOAT64))
    bool_ = staticmethod(lambda: SchemaBuilder(Type.BOOLEAN))
    string = staticmethod(lambda: SchemaBuilder(Type.STRING))
    bytes_ = staticmethod(lambda: SchemaBuilder(Type.BYTES))
    struct = staticmethod(lambda: SchemaBuilder(Type.STRUCT))

    @staticmethod
    def array(value_schema: Schema) -> "SchemaBuilder":
        b = SchemaBuilder(Type.ARRAY)
        b._value_schema = value_schema
        return b

    @staticmethod
    def map(key_schema: Schema, value_schema: Schema) -> "SchemaBuilder":
        b = SchemaBuilder(Type.MAP)
        b._key_schema, b._value_schema = key_schema, value_schema
        return b

    @staticmethod
    def type(type_: Type) -> "SchemaBuilder":
        return SchemaBuilder(type_)

    def _set_once(self, what: str, attr: str, value: Any) -> "SchemaBuilder":
        if getattr(self, attr) is not None and getattr(self, attr) != value:
            raise SchemaBuilderException(
                f"Invalid SchemaBuilder call: {what} has already been set.")
        setattr(self, attr, value)
        return self

    def optional(self) -> "SchemaBuilder":
        return self._set_once("optional", "_optional", True)

    def required(self) -> "SchemaBuilder":
        return self._set_once("optional", "_optional", False)

    def name(self, name: str) -> "SchemaBuilder":
        return self._set_once("name", "_name", name)

    def version(self, version: int) -> "SchemaBuilder":
        return self._set_once("version", "_version", version)

    def doc(self, doc: str) -> "SchemaBuilder":
        return self._set_once("doc", "_doc", doc)

    def parameter(self, key: str, value: str) -> "SchemaBuilder":
        if self._parameters is None:
            self._parameters = {}
        self._parameters[key] = value
        return self

    def parameters(self, params: Mapping[str, str]) -> "SchemaBuilder":
        for k, v in params.items():
            self.parameter(k, v)
        return self

    def field(self, name: str, schema: Schema) -> "SchemaBuilder":
        if self._fields is None:
            raise SchemaBuilderException(f"Cannot create fields on type {self._type}")
        if not name:
            raise SchemaBuilderException("fieldName cannot be null.")
        if name in self._fields:
            raise SchemaBuilderException(
                f"Cannot create field because of field name duplication {name}")
        self._fields[name] = Field(name, len(self._fields), schema)
        return self

    def default_value(self, value: Any) -> "SchemaBuilder":
        if self._default is not None:
            raise SchemaBuilderException(
                "Invalid SchemaBuilder call: default has already been set.")
        try:
            validate_value(self._build(None), value)
        except DataException as e:
            raise SchemaBuilderException(f"Invalid default value: {e}") from None
        self._default = value
        return self

    def _build(self, default: Any) -> Schema:
        return Schema(self._type, bool(self._optional), default, self._name, self._version,
                      self._doc, self._parameters,
                      list(self._fields.values()) if self._fields is not None else None,
                      self._key_schema, self._value_schema)

    def build(self) -> Schema:
        return self._build(self._default)


# --------------------------------------------------------------------------- logical types

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)
_MILLIS_PER_DAY = 86_400_000


class Decimal:
    """BYTES holding a two's-complement big-endian unscaled integer; parameter "scale"."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return (SchemaBuilder.bytes_().name(Decimal.LOGICAL_NAME)
                .parameter(Decimal.SCALE_FIELD, str(scale)).version(1))

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        text = (schema.parameters or {}).get(Decimal.SCALE_FIELD)
        if text is None:
            raise DataException("Invalid Decimal schema: scale parameter not found.")
        return int(text)

    @staticmethod
    def from_logical(schema: Schema, value: _decimal.Decimal) -> bytes:
        sign, digits, exponent = value.as_tuple()
        if not isinstance(exponent, int) or -exponent != Decimal.scale(schema):
            raise DataException("Decimal value has mismatching scale for given Decimal schema")
        unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        return unscaled.to_bytes(length, "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> _decimal.Decimal:
        unscaled = int.from_bytes(value, "big", signed=True)
        digits = tuple(int(c) for c in str(abs(unscaled)))
        return _decimal.Decimal((1 if unscaled < 0 else 0, digits, -Decimal.scale(schema)))


class Date:
    """INT32 days since the epoch; the value is a datetime.date."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Date"
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Date.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.date) -> int:
        if isinstance(value, _dt.datetime):
            if value.time() != _dt.time(0):
                raise DataException("Kafka Connect Date type should not have any time fields "
                                    "set to non-zero values.")
            value = value.date()
        return (value - _EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.date:
        return _EPOCH_DATE + _dt.timedelta(days=value)


class Time:
    """INT32 milliseconds since midnight; the value is a datetime.time."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Time"
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(Time.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.time) -> int:
        seconds = (value.hour * 60 + value.minute) * 60 + value.second
        return seconds * 1000 + value.microsecond // 1000

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.time:
        if not 0 <= value < _MILLIS_PER_DAY:
            raise DataException("Time values must use number of milliseconds greater than 0 "
                                "and less than 86400000")
        s, ms = divmod(value, 1000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        return _dt.time(h, m, s, ms * 1000)


class Timestamp:
    """INT64 milliseconds since the epoch; the value is a datetime.datetime (naive ones
    are taken as UTC; to_logical gives UTC-aware ones)."""

    LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"
    SCHEMA: ClassVar[Schema]

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(Timestamp.LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: _dt.datetime) -> int:
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return (value - _EPOCH) // _MS

    @staticmethod
    def to_logical(schema: Schema, value: int) -> _dt.datetime:
        return _EPOCH + _dt.timedelta(milliseconds=value)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()
