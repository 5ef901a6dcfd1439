"""clients.connect.converters: Kafka's String, ByteArray, Json and SimpleHeader converters,
byte for byte against Kafka's documented JSON formats."""
import base64
import datetime
import decimal
import json

import pytest

from clients.connect.api import ConnectError
from clients.connect.config_def import ConfigException
from clients.connect.converters import (ByteArrayConverter, JsonConverter, SimpleHeaderConverter,
                                        StringConverter)
from clients.connect.data import (DataException, Date, Decimal, Schema, SchemaBuilder, Struct,
                                  Time, Timestamp)

UTC = datetime.timezone.utc


def json_converter(**configs: str) -> JsonConverter:
    c = JsonConverter()
    c.configure({k.replace("_", "."): v for k, v in configs.items()}, False)
    return c


def test_kafka_names():
    assert StringConverter.KAFKA_NAME == "org.apache.kafka.connect.storage.StringConverter"
    assert ByteArrayConverter.KAFKA_NAME == "org.apache.kafka.connect.converters.ByteArrayConverter"
    assert JsonConverter.KAFKA_NAME == "org.apache.kafka.connect.json.JsonConverter"
    assert SimpleHeaderConverter.KAFKA_NAME == "org.apache.kafka.connect.storage.SimpleHeaderConverter"


# --------------------------------------------------------------------------- String

def test_string_converter_both_ways():
    c = StringConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "héllo") == "héllo".encode()
    assert c.from_connect_data("t", None, None) is None
    assert c.from_connect_data("t", None, 42) == b"42"
    assert c.from_connect_data("t", None, True) == b"true"       # Java's toString
    assert c.from_connect_data("t", None, 1e20) == b"1.0E20"
    assert c.to_connect_data("t", b"abc") == (Schema.OPTIONAL_STRING_SCHEMA, "abc")
    assert c.to_connect_data("t", None) == (Schema.OPTIONAL_STRING_SCHEMA, None)
    assert c.to_connect_data("t", b"\xff") == (Schema.OPTIONAL_STRING_SCHEMA, "\ufffd")
    assert c.to_connect_header("t", "h", b"x") == (Schema.OPTIONAL_STRING_SCHEMA, "x")
    assert c.from_connect_header("t", "h", None, "x") == b"x"


def test_string_converter_encoding_and_its_errors():
    c = StringConverter()
    assert "converter.encoding" in c.config().keys
    assert c.config().keys["converter.encoding"].default == "UTF-8"
    c.configure({"converter.encoding": "ISO-8859-1"}, True)
    assert c.from_connect_data("t", None, "é") == b"\xe9"
    assert c.to_connect_data("t", b"\xe9")[1] == "é"
    with pytest.raises(ConfigException) as e:
        StringConverter().configure({"converter.encoding": "no-such-charset"}, False)
    assert e.value.key == "converter.encoding"


# --------------------------------------------------------------------------- ByteArray

def test_byte_array_converter():
    c = ByteArrayConverter()
    c.configure({}, False)
    assert c.from_connect_data("t", Schema.BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert c.from_connect_data("t", None, bytearray(b"ab")) == b"ab"
    assert c.from_connect_data("t", None, None) is None
    assert c.to_connect_data("t", b"z") == (Schema.OPTIONAL_BYTES_SCHEMA, b"z")
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: STRING"):
        c.from_connect_data("t", Schema.STRING_SCHEMA, b"x")
    with pytest.raises(DataException, match="not compatible with objects of type"):
        c.from_connect_data("t", None, "text")


# --------------------------------------------------------------------------- Json: Connect -> bytes

KSQL_USERS = (b'{"schema":{"type":"struct","fields":['
              b'{"type":"int64","optional":false,"field":"registertime"},'
              b'{"type":"string","optional":false,"field":"userid"},'
              b'{"type":"string","optional":false,"field":"regionid"},'
              b'{"type":"string","optional":false,"field":"gender"}],'
              b'"optional":false,"name":"ksql.users"},'
              b'"payload":{"registertime":1493819497170,"userid":"User_1","regionid":"Region_5","gender":"MALE"}}')


def ksql_users() -> tuple[Schema, Struct]:
    schema = (SchemaBuilder.struct().name("ksql.users")
              .field("registertime", Schema.INT64_SCHEMA).field("userid", Schema.STRING_SCHEMA)
              .field("regionid", Schema.STRING_SCHEMA).field("gender", Schema.STRING_SCHEMA).build())
    value = Struct(schema, {"registertime": 1493819497170, "userid": "User_1",
                            "regionid": "Region_5", "gender": "MALE"})
    return schema, value


def test_json_struct_envelope_is_kafkas_byte_for_byte():
    schema, value = ksql_users()
    c = json_converter()
    assert c.from_connect_data("users", schema, value) == KSQL_USERS
    assert c.from_connect_data("users", schema, value) == KSQL_USERS      # cached path
    back_schema, back = c.to_connect_data("users", KSQL_USERS)
    assert back_schema == schema and back == value


@pytest.mark.parametrize("schema, value, expected", [
    (Schema.INT8_SCHEMA, 12, b'{"schema":{"type":"int8","optional":false},"payload":12}'),
    (Schema.INT16_SCHEMA, 12, b'{"schema":{"type":"int16","optional":false},"payload":12}'),
    (Schema.INT32_SCHEMA, 12, b'{"schema":{"type":"int32","optional":false},"payload":12}'),
    (Schema.INT64_SCHEMA, 4398046511104, b'{"schema":{"type":"int64","optional":false},"payload":4398046511104}'),
    (Schema.FLOAT32_SCHEMA, 12.5, b'{"schema":{"type":"float","optional":false},"payload":12.5}'),
    (Schema.FLOAT64_SCHEMA, 12.0, b'{"schema":{"type":"double","optional":false},"payload":12.0}'),
    (Schema.BOOLEAN_SCHEMA, True, b'{"schema":{"type":"boolean","optional":false},"payload":true}'),
    (Schema.OPTIONAL_STRING_SCHEMA, "a\"b", b'{"schema":{"type":"string","optional":true},"payload":"a\\"b"}'),
    (Schema.OPTIONAL_STRING_SCHEMA, None, b'{"schema":{"type":"string","optional":true},"payload":null}'),
    (Schema.BYTES_SCHEMA, b"test-string",
     b'{"schema":{"type":"bytes","optional":false},"payload":"dGVzdC1zdHJpbmc="}'),
    (SchemaBuilder.array(Schema.INT32_SCHEMA).build(), [1, 2, 3],
     b'{"schema":{"type":"array","items":{"type":"int32","optional":false},"optional":false},"payload":[1,2,3]}'),
    (SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.INT32_SCHEMA).build(), {"a": 1},
     b'{"schema":{"type":"map","keys":{"type":"string","optional":false},'
     b'"values":{"type":"int32","optional":false},"optional":false},"payload":{"a":1}}'),
    (SchemaBuilder.map(Schema.INT32_SCHEMA, Schema.INT32_SCHEMA).build(), {1: 12, 2: 15},
     b'{"schema":{"type":"map","keys":{"type":"int32","optional":false},'
     b'"values":{"type":"int32","optional":false},"optional":false},"payload":[[1,12],[2,15]]}'),
    (SchemaBuilder.string().name("n").version(3).doc("d").parameter("p", "v").default_value("x").build(), "y",
     b'{"schema":{"type":"string","optional":false,"name":"n","version":3,"doc":"d",'
     b'"parameters":{"p":"v"},"default":"x"},"payload":"y"}'),
])
def test_json_envelopes_in_kafkas_schema_format(schema, value, expected):
    c = json_converter()
    assert c.from_connect_data("t", schema, value) == expected
    assert c.to_connect_data("t", expected) == (schema, value)


def test_json_logical_types():
    c = json_converter()
    d = Decimal.schema(2)
    enc = c.from_connect_data("t", d, decimal.Decimal("156.78"))
    assert json.loads(enc)["payload"] == base64.b64encode(b"\x3d\x3e").decode()   # 15678
    assert json.loads(enc)["schema"] == {"type": "bytes", "optional": False, "version": 1,
                                         "name": "org.apache.kafka.connect.data.Decimal",
                                         "parameters": {"scale": "2"}}
    assert c.to_connect_data("t", enc) == (d, decimal.Decimal("156.78"))
    numeric = json_converter(decimal_format="numeric")
    enc = numeric.from_connect_data("t", d, decimal.Decimal("156.78"))
    assert enc.endswith(b'"payload":156.78}')
    assert numeric.to_connect_data("t", enc) == (d, decimal.Decimal("156.78"))
    for schema, value, payload in ((Date.SCHEMA, datetime.date(1970, 1, 11), 10),
                                   (Time.SCHEMA, datetime.time(0, 0, 1, 500000), 1500),
                                   (Timestamp.SCHEMA, datetime.datetime(2024, 1, 1, tzinfo=UTC), 1704067200000)):
        enc = c.from_connect_data("t", schema, value)
        assert json.loads(enc)["payload"] == payload
        assert c.to_connect_data("t", enc) == (schema, value)


def test_json_nested_round_trip_with_defaults_and_optionals():
    inner = SchemaBuilder.struct().name("inner").optional().field("x", Schema.FLOAT64_SCHEMA).build()
    schema = (SchemaBuilder.struct()
              .field("a", SchemaBuilder.int32().optional().default_value(7).build())
              .field("b", SchemaBuilder.array(inner).build())
              .field("c", SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.OPTIONAL_BYTES_SCHEMA).build())
              .field("d", inner)
              .build())
    value = Struct(schema, {"b": [Struct(inner, {"x": 1.5}), None], "c": {"k": b"\x00", "n": None}})
    c = json_converter()
    enc = c.from_connect_data("t", schema, value)
    assert json.loads(enc)["payload"] == {"a": 7, "b": [{"x": 1.5}, None], "c": {"k": "AA==", "n": None}, "d": None}
    back_schema, back = c.to_connect_data("t", enc)
    assert back_schema == schema
    assert back.get("a") == 7 and back.get("b")[0].get("x") == 1.5 and back.get("c") == {"k": b"\x00", "n": None}
    # KIP-581: without replace.null.with.default a null stays null
    plain = json_converter(replace_null_with_default="false")
    assert json.loads(plain.from_connect_data("t", schema, value))["payload"]["a"] is None


def test_json_reads_kafkas_own_test_inputs():
    c = json_converter()
    assert c.to_connect_data("t", b'{ "schema": { "type": "boolean" }, "payload": true }') == (Schema.BOOLEAN_SCHEMA, True)
    assert c.to_connect_data("t", b'{ "schema": null, "payload": {"a": 1.5} }') == (None, {"a": 1.5})
    schema, value = c.to_connect_data("t", b'{ "schema": { "type": "struct", "fields": ['
                                           b'{ "field": "field1", "type": "boolean" }, '
                                           b'{ "field": "field2", "type": "string", "optional": true } ] }, '
                                           b'"payload": { "field1": true } }')
    assert [f.name for f in schema.fields] == ["field1", "field2"]
    assert value.get("field1") is True and value.get("field2") is None
    assert c.to_connect_data("t", None) == (None, None)
    assert c.from_connect_data("t", None, None) is None       # a tombstone stays one


def test_json_without_schemas_is_plain_json():
    c = json_converter(schemas_enable="false")
    assert c.from_connect_data("t", None, {"a": [1, None, "é", b"\x01"]}) == '{"a":[1,null,"é","AQ=="]}'.encode()
    assert c.from_connect_data("t", Schema.STRING_SCHEMA, "x") == b'"x"'
    assert c.to_connect_data("t", b'{"a": [1, 2.5, true, null]}') == (None, {"a": [1, 2.5, True, None]})
    assert c.from_connect_data("t", None, None) is None
    with_schemas = json_converter()
    assert with_schemas.from_connect_data("t", None, [1]) == b'{"schema":null,"payload":[1]}'


def test_json_errors_are_kafkas():
    c = json_converter()
    with pytest.raises(ConnectError, match="^Converting byte\\[\\] to Kafka Connect data failed due to serialization error"):
        c.to_connect_data("t", b"{not json")
    with pytest.raises(ConnectError, match='JsonConverter with schemas.enable requires "schema" and "payload" fields'):
        c.to_connect_data("t", b'{"a": 1}')
    with pytest.raises(ConnectError, match="schemas.enable=false"):
        c.to_connect_data("t", b'{"schema": null, "payload": 1, "extra": 2}')
    with pytest.raises(DataException, match="Unknown schema type: int128"):
        c.to_connect_data("t", b'{"schema": {"type": "int128"}, "payload": 1}')
    with pytest.raises(DataException, match="Invalid null value for required INT32 field"):
        c.to_connect_data("t", b'{"schema": {"type": "int32"}, "payload": null}')
    with pytest.raises(DataException, match="null value for field that is required"):
        c.from_connect_data("t", Schema.INT32_SCHEMA, None)
    with pytest.raises(DataException, match="Invalid type for INT32"):
        c.from_connect_data("t", Schema.INT32_SCHEMA, "12")
    with pytest.raises(DataException, match="does not have corresponding schema type"):
        c.from_connect_data("t", None, {"when": datetime.date(2020, 1, 1)})
    with pytest.raises(ConfigException) as e:
        json_converter(decimal_format="octal")
    assert e.value.key == "decimal.format"


def test_json_caches_stay_bounded_and_right():
    c = json_converter(schemas_cache_size="1")
    a = SchemaBuilder.int32().name("a").build()
    b = SchemaBuilder.int32().name("b").build()
    for _ in range(3):
        for s in (a, b):
            enc = c.from_connect_data("t", s, 5)
            assert c.to_connect_data("t", enc) == (s, 5)
    assert len(c._from_cache) == 1 and len(c._to_cache) == 1


def test_json_config_is_kafkas():
    keys = JsonConverter().config().keys
    assert keys["schemas.enable"].default is True
    assert keys["schemas.cache.size"].default == 1000
    assert keys["decimal.format"].default == "BASE64"
    assert keys["replace.null.with.default"].default is True
    assert "converter.type" in keys


# --------------------------------------------------------------------------- headers

@pytest.mark.parametrize("value, text, schema", [
    ("plain text", b"plain text", Schema.STRING_SCHEMA),
    (5, b"5", Schema.INT8_SCHEMA),
    (40000, b"40000", Schema.INT32_SCHEMA),
    (2 ** 40, b"1099511627776", Schema.INT64_SCHEMA),
    (1.5, b"1.5", Schema.FLOAT32_SCHEMA),
    (True, b"true", Schema.BOOLEAN_SCHEMA),
    ([1, 2], b"[1,2]", SchemaBuilder.array(Schema.INT8_SCHEMA).build()),
    ({"a": "b"}, b'{"a":"b"}', SchemaBuilder.map(Schema.STRING_SCHEMA, Schema.STRING_SCHEMA).build()),
    (datetime.date(2024, 2, 3), b"2024-02-03", Date.SCHEMA),
    (datetime.datetime(2024, 2, 3, 4, 5, 6, 7000, tzinfo=UTC), b"2024-02-03T04:05:06.007Z", Timestamp.SCHEMA),
    (datetime.time(4, 5, 6), b"04:05:06.000Z", Time.SCHEMA),
])
def test_simple_header_converter_round_trips_with_inferred_schemas(value, text, schema):
    h = SimpleHeaderConverter()
    h.configure({})
    assert h.from_connect_header("t", "k", None, value) == text
    assert h.to_connect_header("t", "k", text) == (schema, value)


def test_simple_header_converter_edges():
    h = SimpleHeaderConverter()
    assert h.from_connect_header("t", "k", None, None) is None
    assert h.to_connect_header("t", "k", None) == (None, None)
    assert h.to_connect_header("t", "k", b"") == (Schema.STRING_SCHEMA, "")
    assert h.from_connect_header("t", "k", None, b"\x01\x02") == b"AQI="     # bytes as base64
    assert h.to_connect_header("t", "k", b"[1, unclosed") == (Schema.STRING_SCHEMA, "[1, unclosed")
    assert h.to_connect_header("t", "k", b"12ab") == (Schema.STRING_SCHEMA, "12ab")
    assert h.from_connect_header("t", "k", None, ["a", 'q"uote']) == b'["a","q\\"uote"]'
    schema, value = h.to_connect_header("t", "k", b"[1, null, 300]")
    assert value == [1, None, 300]
    assert schema == SchemaBuilder.array(Schema.OPTIONAL_INT16_SCHEMA).build()
