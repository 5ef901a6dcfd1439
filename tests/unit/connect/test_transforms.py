"""clients.connect.transforms: Kafka's SMTs and predicates, and the chain a connector's
`transforms` / `predicates` keys build (errors name the exact key)."""
import datetime

import pytest

from clients.connect.api import ConnectError, SinkRecord, SourceRecord
from clients.connect.config_def import ConfigException
from clients.connect.data import DataException, Schema, SchemaBuilder, Struct, Timestamp
from clients.connect.transforms import (BUILTIN_PREDICATES, BUILTIN_TRANSFORMATIONS, Cast, ExtractField,
                                        Filter, HasHeaderKey, HoistField, InsertField, MaskField,
                                        RecordIsTombstone, RegexRouter, ReplaceField,
                                        TimestampRouter, TopicNameMatches, TransformationChain,
                                        ValueToKey)

UTC = datetime.timezone.utc
_CLASSES = {}
for _cls in BUILTIN_TRANSFORMATIONS + BUILTIN_PREDICATES:
    _CLASSES[_cls.KAFKA_NAME] = _cls
    _CLASSES[_cls.KAFKA_NAME.rsplit(".", 1)[-1]] = _cls     # "RegexRouter", "InsertField$Value"


def resolve(name: str, kind: str) -> type:
    """The plugin registry's lookup, for these tests: Kafka's full or simple names."""
    cls = _CLASSES.get(name)
    if cls is None or (kind == "predicate") != (cls in BUILTIN_PREDICATES):
        raise ConnectError(f"Failed to find any class that implements {kind} and which name matches {name}")
    return cls


def chain(**config: str) -> TransformationChain:
    return TransformationChain.from_connector_config(
        {k.replace("__", "."): v for k, v in config.items()}, resolve)


def source(topic="logs", value=None, key=None, value_schema=None, key_schema=None, headers=(),
           timestamp=1706745600000):
    return SourceRecord(topic, 0, key_schema, key, value_schema, value, timestamp, tuple(headers),
                        {"file": "f"}, {"pos": 1})


def configured(cls, **props):
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


PERSON = (SchemaBuilder.struct().name("person").field("id", Schema.INT64_SCHEMA)
          .field("name", Schema.STRING_SCHEMA)
          .field("email", SchemaBuilder.string().optional().default_value("none").build()).build())


def person(**values):
    return Struct(PERSON, {"id": 1, "name": "Ann", **values})


def test_every_builtin_has_kafkas_name_and_a_config():
    names = {c.KAFKA_NAME for c in BUILTIN_TRANSFORMATIONS + BUILTIN_PREDICATES}
    assert "org.apache.kafka.connect.transforms.InsertField$Value" in names
    assert "org.apache.kafka.connect.transforms.predicates.TopicNameMatches" in names
    assert len(names) == len(BUILTIN_TRANSFORMATIONS) + len(BUILTIN_PREDICATES)
    assert InsertField.Value.KAFKA_NAME.endswith("InsertField$Value")
    for cls in BUILTIN_TRANSFORMATIONS + BUILTIN_PREDICATES:
        cls().config()


@pytest.mark.parametrize("cls, key", [(RegexRouter, "regex"), (ValueToKey, "fields"),
                                      (HoistField.Value, "field"), (ExtractField.Key, "field"),
                                      (MaskField.Value, "fields"), (TopicNameMatches, "pattern"),
                                      (HasHeaderKey, "name")])
def test_a_missing_required_config_names_its_key(cls, key):
    with pytest.raises(ConfigException) as e:
        cls().configure({})
    assert e.value.key == key
    assert f'Missing required configuration "{key}"' in str(e.value)


# --------------------------------------------------------------------------- the chain

def test_chain_applies_in_order_with_kafkas_keys():
    c = chain(transforms="route,insert",
              transforms__route__type="org.apache.kafka.connect.transforms.RegexRouter",
              transforms__route__regex="(.*)-raw", transforms__route__replacement="$1-clean",
              transforms__insert__type="InsertField$Value", transforms__insert__topic__field="t")
    out = c.apply(source(topic="logs-raw", value={"msg": "x"}))
    assert out.topic == "logs-clean" and out.value == {"msg": "x", "t": "logs-clean"}
    assert isinstance(out, SourceRecord) and out.source_offset == {"pos": 1}
    assert len(c.transformations) == 2
    assert not TransformationChain.from_connector_config({}, resolve).transformations
    c.close()


def test_predicates_and_negate():
    c = chain(transforms="dropTombstones,dropOthers", predicates="isTomb,isLogs",
              transforms__dropTombstones__type="Filter", transforms__dropTombstones__predicate="isTomb",
              transforms__dropOthers__type="Filter", transforms__dropOthers__predicate="isLogs",
              transforms__dropOthers__negate="true",
              predicates__isTomb__type="RecordIsTombstone",
              predicates__isLogs__type="org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
              predicates__isLogs__pattern="logs.*")
    kept = source(topic="logs-a", value="v")
    assert c.apply(kept) is kept
    assert c.apply(source(topic="logs-a", value=None)) is None          # a tombstone
    assert c.apply(source(topic="metrics", value="v")) is None          # not logs: negated match
    header = chain(transforms="f", transforms__f__type="Filter", transforms__f__predicate="h",
                   predicates="h", predicates__h__type="HasHeaderKey", predicates__h__name="skip")
    assert header.apply(source(value="v", headers=[("skip", b"1")])) is None
    assert header.apply(source(value="v", headers=[("keep", b"1")])) is not None


@pytest.mark.parametrize("config, key", [
    ({"transforms": "route"}, "transforms.route.type"),
    ({"transforms": "route", "transforms.route.type": "NoSuchTransform"}, "transforms.route.type"),
    ({"transforms": "route", "transforms.route.type": "TopicNameMatches"}, "transforms.route.type"),
    ({"transforms": "route", "transforms.route.type": "RegexRouter"}, "transforms.route.regex"),
    ({"transforms": "route", "transforms.route.type": "RegexRouter", "transforms.route.regex": "(",
      "transforms.route.replacement": "x"}, "transforms.route.regex"),
    ({"transforms": "route", "transforms.route.type": "RegexRouter", "transforms.route.regex": "a",
      "transforms.route.replacement": "$2"}, "transforms.route.replacement"),
    ({"transforms": "a,a", "transforms.a.type": "Filter"}, "transforms"),
    ({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.negate": "true"}, "transforms.f.negate"),
    ({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "p",
      "transforms.f.negate": "maybe"}, "transforms.f.negate"),
    ({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "p"}, "predicates.p.type"),
    ({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.predicate": "p",
      "predicates": "p", "predicates.p.type": "TopicNameMatches"}, "predicates.p.pattern"),
    ({"predicates": "p", "predicates.p.type": "Filter"}, "predicates.p.type"),
    ({"transforms": "r", "transforms.r.type": "ReplaceField$Value", "transforms.r.renames": "a:b:c"},
     "transforms.r.renames"),
    ({"transforms": "c", "transforms.c.type": "Cast$Value"}, "transforms.c.spec"),
])
def test_chain_errors_name_the_exact_key(config, key):
    with pytest.raises(ConfigException) as e:
        TransformationChain.from_connector_config(config, resolve)
    assert e.value.key == key, str(e.value)


def test_unknown_class_keeps_the_registrys_message():
    with pytest.raises(ConfigException, match="Failed to find any class that implements transformation"):
        chain(transforms="x", transforms__x__type="Nope")


# --------------------------------------------------------------------------- SMTs

def test_insert_field_schemaless_and_struct():
    t = configured(InsertField.Value, topic_field="topic", partition_field="part!",
                   timestamp_field="ts", static_field="src", static_value="app")
    out = t.apply(source(value={"a": 1}))
    assert out.value == {"a": 1, "topic": "logs", "part": 0, "ts": 1706745600000, "src": "app"}
    out = t.apply(source(value=person(), value_schema=PERSON))
    s = out.value_schema
    assert [f.name for f in s.fields] == ["id", "name", "email", "topic", "part", "ts", "src"]
    assert s.name == "person" and s.field("topic").schema == Schema.OPTIONAL_STRING_SCHEMA
    assert s.field("part").schema == Schema.INT32_SCHEMA                  # "!" = required
    assert s.field("ts").schema.name == Timestamp.LOGICAL_NAME
    assert out.value.get("ts") == datetime.datetime(2024, 2, 1, tzinfo=UTC)
    assert out.value.get("email") == "none" and out.value.get("src") == "app"
    tomb = source(value=None)
    assert t.apply(tomb) is tomb
    with pytest.raises(DataException, match=r"Only Map objects supported in absence of schema for \[field insertion\], found: str"):
        t.apply(source(value="text"))
    offsets = configured(InsertField.Key, offset_field="off")
    with pytest.raises(DataException, match="Only SinkRecord supported"):
        offsets.apply(source(key={"k": 1}))
    sink = SinkRecord("t", 2, None, {"k": 1}, None, "v", None, (), kafka_offset=42)
    assert offsets.apply(sink).key == {"k": 1, "off": 42}
    with pytest.raises(ConfigException) as e:
        configured(InsertField.Value, static_field="x")
    assert e.value.key == "static.value"


def test_replace_field_include_exclude_renames_and_old_names():
    t = configured(ReplaceField.Value, exclude="email", renames="id:person_id,name:full_name")
    out = t.apply(source(value={"id": 1, "name": "Ann", "email": "a@b"}))
    assert out.value == {"person_id": 1, "full_name": "Ann"}
    out = t.apply(source(value=person(), value_schema=PERSON))
    assert [f.name for f in out.value_schema.fields] == ["person_id", "full_name"]
    assert out.value.get("person_id") == 1 and out.value.get("full_name") == "Ann"
    include = configured(ReplaceField.Value, include="id,email", exclude="email")
    assert include.apply(source(value={"id": 1, "name": "x", "email": "e"})).value == {"id": 1}
    old = configured(ReplaceField.Key, blacklist="b")
    assert old.apply(source(key={"a": 1, "b": 2})).key == {"a": 1}
    old = configured(ReplaceField.Value, whitelist="b")
    assert old.apply(source(value={"a": 1, "b": 2})).value == {"b": 2}
    nulls = configured(ReplaceField.Value, include="email", replace_null_with_default="false")
    assert nulls.apply(source(value=person(), value_schema=PERSON)).value.get_without_default("email") is None


def test_regex_router_uses_java_replacements():
    t = configured(RegexRouter, regex=r"(?<env>\w+)-(\w+)", replacement="${env}_$2_$$1".replace("$$", "\\$"))
    assert t.apply(source(topic="prod-orders")).topic == "prod_orders_$1"
    assert t.apply(source(topic="no_dash")).topic == "no_dash"        # whole name must match
    t = configured(RegexRouter, regex="(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)", replacement="$11-$1")
    assert t.apply(source(topic="abcdefghijk")).topic == "k-a"


def test_timestamp_router():
    t = configured(TimestampRouter)
    assert t.apply(source(timestamp=1706745600000)).topic == "logs-20240201"
    t = configured(TimestampRouter, topic_format="${timestamp}.${topic}",
                   timestamp_format="yyyy-MM-dd'T'HH")
    assert t.apply(source(timestamp=1706745600000 + 3 * 3600_000)).topic == "2024-02-01T03.logs"
    with pytest.raises(DataException, match="Timestamp missing"):
        t.apply(source(timestamp=None))
    with pytest.raises(ConfigException) as e:
        configured(TimestampRouter, timestamp_format="yyyyQ")
    assert e.value.key == "timestamp.format"


def test_value_to_key():
    t = configured(ValueToKey, fields="id,email")
    out = t.apply(source(value={"id": 1, "name": "Ann"}))
    assert out.key == {"id": 1, "email": None} and out.key_schema is None
    out = t.apply(source(value=person(), value_schema=PERSON))
    assert [f.name for f in out.key_schema.fields] == ["id", "email"]
    assert out.key.get("id") == 1 and out.key.get("email") == "none"
    with pytest.raises(DataException, match="Field does not exist: nope"):
        configured(ValueToKey, fields="nope").apply(source(value=person(), value_schema=PERSON))
    with pytest.raises(ConfigException, match="Empty list"):
        configured(ValueToKey, fields="")


def test_hoist_and_extract_field():
    hoist = configured(HoistField.Value, field="line")
    out = hoist.apply(source(value="hello"))
    assert out.value == {"line": "hello"} and out.value_schema is None
    out = hoist.apply(source(value="hello", value_schema=Schema.STRING_SCHEMA))
    assert out.value.get("line") == "hello" and out.value_schema.field("line").schema == Schema.STRING_SCHEMA
    extract = configured(ExtractField.Value, field="line")
    assert extract.apply(out).value == "hello" and extract.apply(out).value_schema == Schema.STRING_SCHEMA
    assert extract.apply(source(value={"line": "x"})).value == "x"
    assert extract.apply(source(value=None)).value is None
    with pytest.raises(DataException, match="Unknown field: nope"):
        configured(ExtractField.Value, field="nope").apply(source(value=person(), value_schema=PERSON))
    nested = configured(ExtractField.Key, field="a.`b.c`.d", field_syntax_version="V2")
    assert nested.apply(source(key={"a": {"b.c": {"d": 5}}})).key == 5
    assert nested.apply(source(key={"a": 1})).key is None
    assert configured(ExtractField.Value, field="email").apply(
        source(value=person(), value_schema=PERSON)).value == "none"


def test_mask_field():
    t = configured(MaskField.Value, fields="id,name,tags,flag,missing")
    out = t.apply(source(value={"id": 7, "name": "Ann", "tags": ["a"], "flag": True, "keep": 1}))
    assert out.value == {"id": 0, "name": "", "tags": [], "flag": False, "keep": 1, "missing": None}
    out = t.apply(source(value=person(), value_schema=PERSON))
    assert out.value.get("id") == 0 and out.value.get("name") == "" and out.value_schema == PERSON
    custom = configured(MaskField.Value, fields="id,name", replacement="42")
    assert custom.apply(source(value={"id": 7, "name": "Ann"})).value == {"id": 42, "name": "42"}
    with pytest.raises(DataException, match="Unable to convert xx"):
        configured(MaskField.Value, fields="id", replacement="xx").apply(source(value={"id": 7}))
    with pytest.raises(DataException, match="with custom replacement"):
        custom.apply(source(value={"id": True}))
    with pytest.raises(DataException, match="Cannot mask value of type"):
        t.apply(source(value={"id": object()}))


def test_cast_fields_and_whole_values():
    t = configured(Cast.Value, spec="id:string,n:int8,f:float64,b:boolean,s:int32")
    out = t.apply(source(value={"id": 7, "n": 300, "f": "2.5", "b": "TRUE", "s": " 12 ", "x": 1}))
    assert out.value == {"id": "7", "n": 44, "f": 2.5, "b": True, "s": 12, "x": 1}   # 300 wraps as (byte)
    schema = (SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA)
              .field("raw", Schema.OPTIONAL_BYTES_SCHEMA)
              .field("n", SchemaBuilder.int64().optional().default_value(5).build()).build())
    cast = configured(Cast.Value, spec="id:string,raw:string,n:int32")
    out = cast.apply(source(value=Struct(schema, {"id": 3, "raw": b"\x01"}), value_schema=schema))
    assert out.value_schema.field("id").schema == Schema.STRING_SCHEMA
    assert out.value_schema.field("n").schema == SchemaBuilder.int32().optional().default_value(5).build()
    assert (out.value.get("id"), out.value.get("raw"), out.value.get("n")) == ("3", "AQ==", 5)
    whole = configured(Cast.Key, spec="int64")
    out = whole.apply(source(key="42", key_schema=Schema.OPTIONAL_STRING_SCHEMA))
    assert (out.key, out.key_schema) == (42, Schema.OPTIONAL_INT64_SCHEMA)
    assert whole.apply(source(key=True)).key == 1
    with pytest.raises(DataException, match="can only be cast to STRING"):
        configured(Cast.Value, spec="raw:int8").apply(source(value=Struct(schema, {"id": 3}), value_schema=schema))
    with pytest.raises(DataException):
        configured(Cast.Value, spec="int8").apply(source(value="300"))     # Java's parseByte refuses it
    for spec in ("id:int128", "id:bytes", "int8,id:string", "a:b:c"):
        with pytest.raises(ConfigException) as e:
            configured(Cast.Value, spec=spec)
        assert e.value.key == "spec"


def test_predicates_alone():
    p = configured(TopicNameMatches, pattern="a.*")
    assert p.test(source(topic="abc")) and not p.test(source(topic="bac"))
    assert RecordIsTombstone().test(source(value=None)) and not RecordIsTombstone().test(source(value=1))
    with pytest.raises(ConfigException) as e:
        configured(HasHeaderKey, name="")
    assert e.value.key == "name"
    assert Filter().apply(source(value=1)) is None
