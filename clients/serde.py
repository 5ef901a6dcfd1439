"""Serializers and deserializers: how keys and values become bytes and back.

A `Serializer` turns `(topic, obj)` into bytes, a `Deserializer` turns `(topic, bytes)` back;
both pass None through as None (a null key, a tombstone value). A `Serde` holds one of each
and is itself both, so one object can be given to a producer and a consumer:

    producer = Producer(bootstrap_servers="localhost:9092", value_serializer=JsonSerde())
    consumer = Consumer("events", bootstrap_servers="localhost:9092", group_id="g",
                        value_deserializer=JsonSerde())

Plain functions `f(topic, obj)` work too; `as_serializer` / `as_deserializer` turn whatever
a user configured into an object with `serialize` / `deserialize` (the clients call them).

Provided: StringSerde (utf-8 by default), BytesSerde, IntegerSerde and LongSerde (Kafka's
4 / 8-byte big-endian signed integers, byte-compatible with the Java client's
IntegerSerializer / LongSerializer), JsonSerde (compact utf-8 JSON) and AvroSerde (Avro
binary without framing, written and read with the writer schema you give; no schema
registry).

A serde of your own type, e.g. log messages:

    from dataclasses import asdict, dataclass

    from clients.serde import JsonSerde, Serde

    @dataclass
    class LogMessage:
        level: str
        message: str

    class LogMessageSerde(Serde):
        '''LogMessage <-> {"level": ..., "message": ...} as JSON.'''

        def __init__(self) -> None:
            self.json = JsonSerde()

        def serialize(self, topic: str, msg: LogMessage | None) -> bytes | None:
            return None if msg is None else self.json.serialize(topic, asdict(msg))

        def deserialize(self, topic: str, data: bytes | None) -> LogMessage | None:
            return None if data is None else LogMessage(**self.json.deserialize(topic, data))

    serde = LogMessageSerde()
    data = serde.serialize("logs", LogMessage("WARN", "disk 91% full"))
    # data == b'{"level":"WARN","message":"disk 91% full"}'
    assert serde.deserialize("logs", data) == LogMessage("WARN", "disk 91% full")

Serdes keep no per-call state, so one instance may be shared by threads and clients.
"""
from __future__ import annotations

import io
import json
import struct
from typing import Any, Callable, Protocol, runtime_checkable

__all__ = ["Serializer", "Deserializer", "Serde", "StringSerde", "BytesSerde", "IntegerSerde",
           "LongSerde", "JsonSerde", "AvroSerde", "as_serializer", "as_deserializer"]


@runtime_checkable
class Serializer(Protocol):
    def serialize(self, topic: str, obj: Any) -> bytes | None:
        """obj -> bytes; None -> None."""
        ...


@runtime_checkable
class Deserializer(Protocol):
    def deserialize(self, topic: str, data: bytes | None) -> Any:
        """bytes -> obj; None -> None."""
        ...


class Serde:
    """A serializer and a deserializer together; usable as either.

    `Serde(serializer, deserializer)` pairs two objects (or functions of (topic, x));
    subclasses may instead override `serialize` / `deserialize` directly.
    """

    def __init__(self, serializer: Serializer | Callable[[str, Any], bytes | None],
                 deserializer: Deserializer | Callable[[str, bytes | None], Any]):
        self._ser = as_serializer(serializer)
        self._de = as_deserializer(deserializer)

    @property
    def serializer(self) -> Serializer:
        return self

    @property
    def deserializer(self) -> Deserializer:
        return self

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        return None if obj is None else self._ser.serialize(topic, obj)

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else self._de.deserialize(topic, data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class BytesSerde(Serde):
    """bytes (or bytearray / memoryview) as they are; deserializes to bytes."""

    def __init__(self) -> None:
        pass

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(f"BytesSerde serializes bytes, not {type(obj).__name__}")
        return bytes(obj)

    def deserialize(self, topic: str, data: bytes | None) -> bytes | None:
        return None if data is None else bytes(data)


class StringSerde(Serde):
    """str <-> bytes in `encoding` (utf-8 by default)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise TypeError(f"StringSerde serializes str, not {type(obj).__name__}")
        return obj.encode(self.encoding)

    def deserialize(self, topic: str, data: bytes | None) -> str | None:
        return None if data is None else bytes(data).decode(self.encoding)

    def __repr__(self) -> str:
        return f"StringSerde({self.encoding!r})"


class _FixedIntSerde(Serde):
    _format = ">i"
    _size = 4

    def __init__(self) -> None:
        pass

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise TypeError(f"{type(self).__name__} serializes int, not {type(obj).__name__}")
        try:
            return struct.pack(self._format, obj)
        except struct.error:
            raise ValueError(f"{obj} does not fit in {self._size * 8} signed bits") from None

    def deserialize(self, topic: str, data: bytes | None) -> int | None:
        if data is None:
            return None
        if len(data) != self._size:
            raise ValueError(f"{type(self).__name__} expects {self._size} bytes, got {len(data)}")
        return struct.unpack(self._format, data)[0]


class IntegerSerde(_FixedIntSerde):
    """int <-> 4 bytes big-endian two's complement (Kafka's IntegerSerializer)."""


class LongSerde(_FixedIntSerde):
    """int <-> 8 bytes big-endian two's complement (Kafka's LongSerializer)."""

    _format = ">q"
    _size = 8


class JsonSerde(Serde):
    """JSON-compatible objects <-> compact utf-8 JSON (no spaces after separators).
    `dumps_kwargs` go to json.dumps (e.g. default=str, sort_keys=True)."""

    def __init__(self, **dumps_kwargs: Any) -> None:
        self._dumps = {"separators": (",", ":"), "ensure_ascii": False, **dumps_kwargs}

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        return None if obj is None else json.dumps(obj, **self._dumps).encode("utf-8")

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else json.loads(bytes(data).decode("utf-8"))


class AvroSerde(Serde):
    """Avro binary (schemaless: no container header, no schema-registry framing) with the
    writer schema given here, as a dict or its JSON text. Reading uses the same schema,
    so both sides must agree on it. Needs fastavro."""

    def __init__(self, schema: dict | str) -> None:
        import fastavro
        self._fastavro = fastavro
        parsed = json.loads(schema) if isinstance(schema, str) else schema
        self.schema = fastavro.parse_schema(parsed)

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        if obj is None:
            return None
        buf = io.BytesIO()
        self._fastavro.schemaless_writer(buf, self.schema, obj)
        return buf.getvalue()

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        return self._fastavro.schemaless_reader(io.BytesIO(data), self.schema, self.schema)


class _FunctionSerializer:
    def __init__(self, fn: Callable[[str, Any], bytes | None]):
        self.fn = fn

    def serialize(self, topic: str, obj: Any) -> bytes | None:
        return None if obj is None else self.fn(topic, obj)


class _FunctionDeserializer:
    def __init__(self, fn: Callable[[str, bytes | None], Any]):
        self.fn = fn

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return None if data is None else self.fn(topic, data)


def as_serializer(obj: Any) -> Serializer:
    """A configured key/value serializer made usable: an object with `serialize` as is,
    a function (topic, obj) -> bytes wrapped (None still maps to None), None -> BytesSerde
    (values must already be bytes)."""
    if obj is None:
        return BytesSerde()
    if hasattr(obj, "serialize"):
        return obj
    if callable(obj):
        return _FunctionSerializer(obj)
    raise TypeError(f"a serializer needs a serialize(topic, obj) method or to be callable, "
                    f"not {type(obj).__name__}")


def as_deserializer(obj: Any) -> Deserializer:
    """Like `as_serializer` for deserializers; None -> BytesSerde (values stay bytes)."""
    if obj is None:
        return BytesSerde()
    if hasattr(obj, "deserialize"):
        return obj
    if callable(obj):
        return _FunctionDeserializer(obj)
    raise TypeError(f"a deserializer needs a deserialize(topic, data) method or to be "
                    f"callable, not {type(obj).__name__}")
