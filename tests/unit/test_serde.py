"""clients.serde: round trips, Kafka's byte layouts, None handling, the docstring example."""
from __future__ import annotations

import re
from pathlib import Path
import struct
import textwrap

import pytest

import clients.serde as serde_module
from clients.serde import (AvroSerde, BytesSerde, Deserializer, IntegerSerde, JsonSerde, LongSerde,
                           Serde, Serializer, StringSerde, as_deserializer, as_serializer)

ALL = [StringSerde(), BytesSerde(), IntegerSerde(), LongSerde(), JsonSerde(),
       AvroSerde({"type": "string"})]


@pytest.mark.parametrize("serde", ALL, ids=lambda s: type(s).__name__)
def test_none_passes_through_both_ways(serde):
    assert serde.serialize("t", None) is None
    assert serde.deserialize("t", None) is None
    assert isinstance(serde, Serializer) and isinstance(serde, Deserializer)
    assert serde.serializer.serialize("t", None) is None
    assert serde.deserializer.deserialize("t", None) is None


@pytest.mark.parametrize("serde, value", [
    (StringSerde(), "héllo ✓"), (StringSerde("latin-1"), "héllo"), (BytesSerde(), b"\x00\xffab"),
    (IntegerSerde(), -(2 ** 31)), (IntegerSerde(), 2 ** 31 - 1), (LongSerde(), -(2 ** 63)),
    (LongSerde(), 2 ** 63 - 1), (JsonSerde(), {"a": [1, 2.5, None, True], "ü": "x"}),
], ids=lambda x: type(x).__name__ if isinstance(x, Serde) else "")
def test_round_trips(serde, value):
    data = serde.serialize("t", value)
    assert isinstance(data, bytes)
    assert serde.deserialize("t", data) == value


def test_kafka_byte_layouts():
    # Kafka's IntegerSerializer / LongSerializer: big-endian two's complement.
    assert IntegerSerde().serialize("t", 1) == b"\x00\x00\x00\x01"
    assert IntegerSerde().serialize("t", -1) == b"\xff\xff\xff\xff"
    assert IntegerSerde().serialize("t", 0x01020304) == b"\x01\x02\x03\x04"
    assert LongSerde().serialize("t", 1) == b"\x00" * 7 + b"\x01"
    assert LongSerde().deserialize("t", b"\xff" * 8) == -1
    assert StringSerde().serialize("t", "é") == b"\xc3\xa9"
    assert StringSerde("utf-16-be").serialize("t", "A") == b"\x00A"
    assert JsonSerde().serialize("t", {"a": 1, "b": [1, 2]}) == b'{"a":1,"b":[1,2]}'
    assert JsonSerde().serialize("t", "ü") == "\"ü\"".encode()


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        IntegerSerde().serialize("t", 2 ** 31)
    with pytest.raises(ValueError, match="4 bytes"):
        IntegerSerde().deserialize("t", b"\x00\x01")
    with pytest.raises(TypeError):
        IntegerSerde().serialize("t", True)
    with pytest.raises(TypeError):
        StringSerde().serialize("t", b"bytes")
    with pytest.raises(TypeError):
        BytesSerde().serialize("t", "str")


AVRO_SCHEMA = {"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"}, {"name": "celsius", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None}]}


def test_avro_round_trip_and_schemaless_layout():
    serde = AvroSerde(AVRO_SCHEMA)
    reading = {"sensor": "s1", "celsius": 21.5, "tags": ["a", "b"], "note": None}
    data = serde.serialize("t", reading)
    assert serde.deserialize("t", data) == reading
    # Schemaless Avro binary: zigzag-varint length + utf-8 for a string, 8-byte LE double,
    # then the array block and the union branch index - no header, no magic byte.
    assert data[:3] == b"\x04s1"
    assert struct.unpack("<d", data[3:11])[0] == 21.5
    assert data[11:] == b"\x04\x02a\x02b\x00\x00"
    # The schema may also be given as JSON text.
    import json
    assert AvroSerde(json.dumps(AVRO_SCHEMA)).deserialize("t", data) == reading
    with pytest.raises(Exception):
        serde.serialize("t", {"sensor": "s1"})          # missing required fields


def test_serde_pairs_two_functions_and_normalisers():
    upper = Serde(lambda topic, s: s.upper().encode(), lambda topic, b: b.decode().lower())
    assert upper.serialize("t", "ab") == b"AB"
    assert upper.deserialize("t", b"AB") == "ab"
    assert upper.serialize("t", None) is None and upper.deserialize("t", None) is None
    paired = Serde(StringSerde(), IntegerSerde())
    assert paired.serialize("t", "x") == b"x" and paired.deserialize("t", b"\x00\x00\x00\x07") == 7

    calls = []
    ser = as_serializer(lambda topic, v: calls.append(topic) or b"v")
    assert ser.serialize("topic-a", 1) == b"v" and calls == ["topic-a"]
    assert ser.serialize("topic-a", None) is None and calls == ["topic-a"]
    de = as_deserializer(lambda topic, data: data[::-1])
    assert de.deserialize("t", b"ab") == b"ba" and de.deserialize("t", None) is None
    s = StringSerde()
    assert as_serializer(s) is s and as_deserializer(s) is s
    assert as_serializer(None).serialize("t", b"raw") == b"raw"
    assert as_deserializer(None).deserialize("t", b"raw") == b"raw"
    with pytest.raises(TypeError):
        as_serializer(42)
    with pytest.raises(TypeError):
        as_deserializer("not a deserializer")


# ------------------------------------------------------------------ the LogMessage example

def docstring_example() -> tuple[str, dict]:
    """The LogMessage example of clients.serde's docstring: its code, and what it defines."""
    doc = serde_module.__doc__
    code = textwrap.dedent(doc[doc.index("    from dataclasses import"):
                               doc.index("Serdes keep no per-call state")])
    namespace: dict = {"__name__": "serde_docstring_example"}
    exec(compile(code, "<clients.serde docstring>", "exec", dont_inherit=True), namespace)
    return code, namespace


def test_log_message_serde():
    _, ns = docstring_example()
    LogMessage, serde = ns["LogMessage"], ns["LogMessageSerde"]()
    msg = LogMessage("WARN", "disk 91% full")
    data = serde.serialize("logs", msg)
    assert data == b'{"level":"WARN","message":"disk 91% full"}'
    assert serde.deserialize("logs", data) == msg
    assert serde.serialize("logs", None) is None and serde.deserialize("logs", None) is None
    assert as_serializer(serde) is serde and as_deserializer(serde.deserializer) is serde


def test_docs_quote_the_tested_example():
    """docs/CLIENTS.md shows the same LogMessage and LogMessageSerde as the docstring."""
    code, _ = docstring_example()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "CLIENTS.md").read_text()
    definition = code[code.index("@dataclass"):code.index("serde = LogMessageSerde()")].strip()
    assert definition.replace("'''", '"""') in docs


def test_docstring_example_runs_as_written():
    """The module docstring's example (the docs quote it) executes and its asserts hold."""
    code, namespace = docstring_example()
    data = namespace["data"]
    assert data == b'{"level":"WARN","message":"disk 91% full"}'
    # The comment in the example shows the real bytes.
    assert re.search(r"# data == (b'.*')", code).group(1) == repr(data)
