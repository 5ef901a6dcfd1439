"""clients.connect.data: Connect's schemas, Structs and logical types, with Kafka's rules
and messages."""
import datetime
import decimal

import pytest

from clients.connect.api import ConnectError
from clients.connect.data import (DataException, Date, Decimal, Field, Schema, SchemaBuilder,
                                  SchemaBuilderException, Struct, Time, Timestamp, Type,
                                  validate_value)


def person_schema() -> Schema:
    return (SchemaBuilder.struct().name("com.example.Person").version(2).doc("a person")
            .field("name", Schema.STRING_SCHEMA)
            .field("age", SchemaBuilder.int32().optional().default_value(18).build())
            .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
            .build())


def test_builder_makes_the_schema_kafka_would():
    s = person_schema()
    assert s.type is Type.STRUCT and not s.optional
    assert (s.name, s.version, s.doc) == ("com.example.Person", 2, "a person")
    assert [f.name for f in s.fields] == ["name", "age", "tags"]
    assert s.field("age") == Field("age", 1, s.fields[1].schema)
    assert s.field("age").schema.default == 18
    assert s.field("missing") is None
    assert s.field("tags").schema.value_schema == Schema.STRING_SCHEMA
    assert repr(s) == "Schema{com.example.Person:STRUCT}"
    assert str(Type.FLOAT32) == "FLOAT32" and Type.FLOAT32.value == "float32"


def test_constants_and_equality():
    assert Schema.OPTIONAL_STRING_SCHEMA.optional and Schema.OPTIONAL_STRING_SCHEMA.type is Type.STRING
    assert not Schema.INT64_SCHEMA.optional
    assert SchemaBuilder.string().optional().build() == Schema.OPTIONAL_STRING_SCHEMA
    assert SchemaBuilder.string().build() != Schema.OPTIONAL_STRING_SCHEMA
    assert person_schema() == person_schema() and hash(person_schema()) == hash(person_schema())
    assert {person_schema(): 1}[person_schema()] == 1
    with_default = SchemaBuilder.int32().default_value(5).build()
    assert with_default != Schema.INT32_SCHEMA
    assert SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT8_SCHEMA).build().key_schema == Schema.STRING_SCHEMA


def test_accessors_of_other_types_raise_as_kafkas():
    with pytest.raises(DataException, match="Cannot list fields on non-struct type"):
        Schema.INT32_SCHEMA.fields
    with pytest.raises(DataException, match="Cannot look up key schema on non-map type"):
        Schema.INT32_SCHEMA.key_schema
    with pytest.raises(DataException, match="non-array and non-map"):
        person_schema().value_schema


def test_builder_refuses_what_kafkas_refuses():
    with pytest.raises(SchemaBuilderException, match="name has already been set"):
        SchemaBuilder.int8().name("a").name("b")
    with pytest.raises(SchemaBuilderException, match="field name duplication a"):
        SchemaBuilder.struct().field("a", Schema.INT8_SCHEMA).field("a", Schema.INT8_SCHEMA)
    with pytest.raises(SchemaBuilderException, match="Cannot create fields on type INT32"):
        SchemaBuilder.int32().field("a", Schema.INT8_SCHEMA)
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.int8().default_value(300)
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.string().default_value(5)
    assert issubclass(DataException, ConnectError)


def test_struct_put_get_defaults_and_validation():
    s = person_schema()
    p = Struct(s).put("name", "Ann")
    assert p.get("name") == "Ann"
    assert p.get("age") == 18 and p.get_without_default("age") is None
    assert p.get(s.field("tags")) is None
    p.validate()
    assert repr(p) == "Struct{name=Ann}"
    assert p == Struct(s, {"name": "Ann"})
    assert p != Struct(s, {"name": "Bob"})
    assert p.to_dict() == {"name": "Ann", "age": 18, "tags": None}
    with pytest.raises(DataException, match="nope is not a valid field name"):
        p.put("nope", 1)
    with pytest.raises(DataException, match='Invalid Java object for schema with type INT32: class str for field: "age"'):
        p.put("age", "old")
    with pytest.raises(DataException, match="element of array"):
        p.put("tags", ["a", 1])
    with pytest.raises(DataException, match='null used for required field: "name", schema type: STRING'):
        Struct(s).validate()
    with pytest.raises(DataException, match="Not a struct schema"):
        Struct(Schema.INT8_SCHEMA)


def test_validate_value_checks_widths_types_and_nested_structs():
    validate_value(Schema.INT8_SCHEMA, 127)
    for schema, bad in ((Schema.INT8_SCHEMA, 128), (Schema.INT16_SCHEMA, -32769),
                        (Schema.INT32_SCHEMA, True), (Schema.BOOLEAN_SCHEMA, 1),
                        (Schema.BYTES_SCHEMA, "x"), (Schema.FLOAT64_SCHEMA, "1.0")):
        with pytest.raises(DataException):
            validate_value(schema, bad)
    validate_value(Schema.FLOAT32_SCHEMA, 1)            # an int is a fine float
    validate_value(Schema.BYTES_SCHEMA, bytearray(b"x"))
    validate_value(Schema.OPTIONAL_INT8_SCHEMA, None)
    other = SchemaBuilder.struct().field("name", Schema.STRING_SCHEMA).build()
    outer = SchemaBuilder.struct().field("p", person_schema()).build()
    with pytest.raises(DataException, match="Struct schemas do not match"):
        Struct(outer).put("p", Struct(other).put("name", "x"))
    m = SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build()
    with pytest.raises(DataException, match="key of map"):
        validate_value(m, {1: 1})


def test_decimal_is_kafkas_unscaled_twos_complement():
    s = Decimal.schema(2)
    assert s.name == "org.apache.kafka.connect.data.Decimal" and s.parameters == {"scale": "2"}
    assert s.version == 1 and s.type is Type.BYTES
    # BigInteger.toByteArray of 12345, -1, 128 and 0
    assert Decimal.from_logical(s, decimal.Decimal("123.45")) == b"\x30\x39"
    assert Decimal.from_logical(s, decimal.Decimal("-0.01")) == b"\xff"
    assert Decimal.from_logical(s, decimal.Decimal("1.28")) == b"\x00\x80"
    assert Decimal.from_logical(s, decimal.Decimal("0.00")) == b"\x00"
    for text in ("123.45", "-0.01", "1.28", "-99999999999999999999999999999999.99"):
        assert Decimal.to_logical(s, Decimal.from_logical(s, decimal.Decimal(text))) == decimal.Decimal(text)
    assert str(Decimal.to_logical(s, b"\x00")) == "0.00"
    with pytest.raises(DataException, match="mismatching scale"):
        Decimal.from_logical(s, decimal.Decimal("1.5"))
    validate_value(s, decimal.Decimal("1.50"))
    with pytest.raises(DataException, match='schema "org.apache.kafka.connect.data.Decimal"'):
        validate_value(s, b"\x01")


def test_temporal_logical_types():
    assert Date.SCHEMA.type is Type.INT32 and Date.SCHEMA.name == "org.apache.kafka.connect.data.Date"
    assert Date.from_logical(Date.SCHEMA, datetime.date(1970, 1, 11)) == 10
    assert Date.to_logical(Date.SCHEMA, -1) == datetime.date(1969, 12, 31)
    with pytest.raises(DataException, match="should not have any time fields"):
        Date.from_logical(Date.SCHEMA, datetime.datetime(2020, 1, 1, 1))
    assert Time.from_logical(Time.SCHEMA, datetime.time(1, 2, 3, 4000)) == 3_723_004
    assert Time.to_logical(Time.SCHEMA, 3_723_004) == datetime.time(1, 2, 3, 4000)
    with pytest.raises(DataException):
        Time.to_logical(Time.SCHEMA, 86_400_000)
    utc = datetime.timezone.utc
    stamp = datetime.datetime(2024, 1, 31, 12, 0, 0, 123000, tzinfo=utc)
    assert Timestamp.from_logical(Timestamp.SCHEMA, stamp) == 1706702400123
    assert Timestamp.from_logical(Timestamp.SCHEMA, stamp.replace(tzinfo=None)) == 1706702400123
    assert Timestamp.to_logical(Timestamp.SCHEMA, 1706702400123) == stamp
    validate_value(Timestamp.SCHEMA, stamp)
    with pytest.raises(DataException):
        validate_value(Timestamp.SCHEMA, 1706702400123)
