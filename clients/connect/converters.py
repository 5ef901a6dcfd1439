"""Converters: Connect data <-> the bytes of a record's key, value or header, as Kafka's.

`StringConverter`, `ByteArrayConverter` and `JsonConverter` (each also a header
converter, as in Kafka) and `SimpleHeaderConverter`. Names, config keys, JSON layout and
error messages are Kafka's. A converter instance is used by one task: not thread-safe.

The hot paths (a str through StringConverter, schemaless JSON, a cached schema through
JsonConverter) are a type test and one C call each; with a schema, JsonConverter compiles
a writer and a reader per schema once (Kafka caches its schema translations likewise).
"""
from __future__ import annotations

import codecs
import decimal
import json
from typing import Any, Callable, Mapping

from .plugin_base import Plugin
from .config_def import ConfigDef, ConfigException, Importance, Type as CType, in_values
from .data import DataException, Schema, Type
from .header_values import convert_to_string, java_double, parse_string
from .json_codec import JsonCodec, as_floats, schemaless_encoder

__all__ = ["Converter", "HeaderConverter", "StringConverter", "ByteArrayConverter",
           "JsonConverter", "SimpleHeaderConverter", "DataException"]

_OPTIONAL_STRING = Schema.OPTIONAL_STRING_SCHEMA
_OPTIONAL_BYTES = Schema.OPTIONAL_BYTES_SCHEMA
TYPE_CONFIG = "converter.type"


class Converter(Plugin):
    """Kafka's Converter. `configure(configs, is_key)` once, then `from_connect_data` /
    `to_connect_data` per record; `config()` declares the keys."""

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_data(self, topic: str, value: bytes | None) -> tuple[Schema | None, Any]:
        raise NotImplementedError


class HeaderConverter(Plugin):
    """Kafka's HeaderConverter: one header value <-> bytes."""

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_header(self, topic: str, header_key: str,
                          value: bytes | None) -> tuple[Schema | None, Any]:
        raise NotImplementedError


def _converter_config_def() -> ConfigDef:
    """Kafka's ConverterConfig: every converter knows whether it serves keys, values or headers."""
    return ConfigDef().define(TYPE_CONFIG, CType.STRING, None, Importance.LOW,
                              "How this converter will be used.",
                              in_values("key", "value", "header"))


def _with_type(configs: Mapping[str, Any], is_key: bool) -> dict[str, Any]:
    props = dict(configs)
    props.setdefault(TYPE_CONFIG, "key" if is_key else "value")
    return props


class _AsHeaderConverter(HeaderConverter):
    """Kafka's String/ByteArray/Json converters serve headers with their data methods."""

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)   # type: ignore[attr-defined]

    def to_connect_header(self, topic: str, header_key: str,
                          value: bytes | None) -> tuple[Schema | None, Any]:
        return self.to_connect_data(topic, value)   # type: ignore[attr-defined]


# --------------------------------------------------------------------------- String

class StringConverter(_AsHeaderConverter, Converter):
    """Any value as its string's bytes in `converter.encoding` (UTF-8); bytes back as an
    OPTIONAL_STRING value. Undecodable bytes become U+FFFD, as Java's String does."""

    KAFKA_NAME = "org.apache.kafka.connect.storage.StringConverter"

    def __init__(self) -> None:
        self._encoding = "utf-8"

    def config(self) -> ConfigDef:
        return _converter_config_def().define(
            "converter.encoding", CType.STRING, "UTF-8", Importance.HIGH,
            "The name of the Java character set to use for encoding strings as byte arrays.")

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        parsed = self.config().parse(_with_type(configs, is_key))
        name = parsed["converter.encoding"]
        try:
            self._encoding = codecs.lookup(name).name
        except LookupError:
            raise ConfigException("converter.encoding", name, "Unsupported encoding") from None

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value.__class__ is str:
            return value.encode(self._encoding, "replace")
        if value is None:
            return None
        return _java_to_string(value).encode(self._encoding, "replace")

    def to_connect_data(self, topic: str, value: bytes | None) -> tuple[Schema | None, Any]:
        if value is None:
            return _OPTIONAL_STRING, None
        return _OPTIONAL_STRING, value.decode(self._encoding, "replace")


def _java_to_string(value: Any) -> str:
    """Java's toString() for the types a Connect value has (true, 1.0E20, Struct{...})."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


# --------------------------------------------------------------------------- ByteArray

class ByteArrayConverter(_AsHeaderConverter, Converter):
    """Bytes through unchanged (schema BYTES or none); bytes back as OPTIONAL_BYTES."""

    KAFKA_NAME = "org.apache.kafka.connect.converters.ByteArrayConverter"

    def config(self) -> ConfigDef:
        return _converter_config_def()

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        self.config().parse(_with_type(configs, is_key))

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type}")
        if value is None or value.__class__ is bytes:
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise DataException(f"ByteArrayConverter is not compatible with objects of type "
                            f"class {type(value).__name__}")

    def to_connect_data(self, topic: str, value: bytes | None) -> tuple[Schema | None, Any]:
        return _OPTIONAL_BYTES, value


# --------------------------------------------------------------------------- Json

_ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields "
                   "and may not contain additional fields. If you are trying to deserialize plain "
                   "JSON data, set schemas.enable=false in your converter configuration.")


class JsonConverter(_AsHeaderConverter, Converter):
    """Kafka's JsonConverter. With `schemas.enable` (the default) each value is the
    envelope `{"schema": <Kafka's JSON schema>, "payload": <value>}`; without, plain JSON.
    Bytes are base64, a Decimal base64 or a number (`decimal.format`), Date/Time/Timestamp
    numbers. Schemaless values read back as dict/list/str/int/float/bool/None."""

    KAFKA_NAME = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        self._schemas = True
        self._cache_size = 1000
        self._codec = JsonCodec()
        self._from_cache: dict[Schema, tuple[str, Callable[[Any], str]]] = {}
        self._to_cache: dict[str, tuple[Schema, Callable[[Any], Any]]] = {}
        self._dumps = schemaless_encoder()
        self._loads = json.JSONDecoder().decode
        self._exact = json.JSONDecoder(parse_float=decimal.Decimal).decode

    def config(self) -> ConfigDef:
        return (_converter_config_def()
                .define("schemas.enable", CType.BOOLEAN, True, Importance.HIGH,
                        "Include schemas within each of the serialized values and keys.",
                        group="Schemas", order=0, display_name="Enable Schemas")
                .define("schemas.cache.size", CType.INT, 1000, Importance.HIGH,
                        "The maximum number of schemas that can be cached in this converter "
                        "instance.",
                        group="Schemas", order=1, display_name="Schema Cache Size")
                .define("decimal.format", CType.STRING, "BASE64", Importance.LOW,
                        "Controls which format this converter will serialize decimals in. This "
                        "value is case insensitive and can be either 'BASE64' (default) or "
                        "'NUMERIC'",
                        in_values("BASE64", "NUMERIC", case_sensitive=False),
                        group="Serialization", order=0, display_name="Decimal Format")
                .define("replace.null.with.default", CType.BOOLEAN, True, Importance.LOW,
                        "Whether to replace fields that have a default value and that are null to "
                        "the default value. When set to true, the default value is used, otherwise "
                        "null is used.", group="Serialization", order=1,
                        display_name="Replace null with default"))

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        parsed = self.config().parse(_with_type(configs, is_key))
        self._schemas = parsed["schemas.enable"]
        self._cache_size = max(1, parsed["schemas.cache.size"])
        self._codec = JsonCodec(parsed["decimal.format"].upper() == "NUMERIC",
                                parsed["replace.null.with.default"])
        self._from_cache.clear()
        self._to_cache.clear()

    # ------------------------------------------------------------------ Connect -> bytes

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            try:
                text = self._dumps(value)
            except (TypeError, ValueError, RecursionError) as e:
                raise DataException(f"Converting Kafka Connect data to byte[] failed due to "
                                    f"serialization error: {e}") from e
            if self._schemas:
                text = '{"schema":null,"payload":' + text + "}"
            return text.encode("utf-8", "replace")
        entry = self._from_cache.get(schema)
        if entry is None:
            entry = self._remember(self._from_cache, schema, self._compile_from(schema))
        prefix, write = entry
        if self._schemas:
            return (prefix + write(value) + "}").encode("utf-8", "replace")
        return write(value).encode("utf-8", "replace")

    def _remember(self, cache: dict[Any, Any], key: Any, entry: Any) -> Any:
        if len(cache) >= self._cache_size:
            del cache[next(iter(cache))]
        cache[key] = entry
        return entry

    def _compile_from(self, schema: Schema) -> tuple[str, Callable[[Any], str]]:
        prefix = '{"schema":' + self._codec.as_json_schema(schema) + ',"payload":'
        return prefix, self._codec.writer(schema)

    # ------------------------------------------------------------------ bytes -> Connect

    def to_connect_data(self, topic: str, value: bytes | None) -> tuple[Schema | None, Any]:
        if value is None:
            return None, None
        try:
            if not self._schemas:
                return None, self._loads(value.decode("utf-8"))
            node = self._exact(value.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error: {e}") from e
        if (node.__class__ is not dict or len(node) != 2 or "schema" not in node
                or "payload" not in node):
            raise DataException(_ENVELOPE_ERROR)
        schema_node = node["schema"]
        if schema_node is None:
            return None, as_floats(node["payload"])
        key = repr(schema_node)     # Jackson's trees compare by content; an equal repr suffices
        entry = self._to_cache.get(key)
        if entry is None:
            schema = self._codec.required_schema(schema_node)
            entry = self._remember(self._to_cache, key, (schema, self._codec.reader(schema)))
        schema, read = entry
        return schema, read(node["payload"])

    def as_json_schema(self, schema: Schema) -> str:
        """Kafka's JSON form of `schema`, as text."""
        return self._codec.as_json_schema(schema)

    def as_connect_schema(self, node: Any) -> Schema | None:
        """A parsed JSON schema (dict) as a Schema; None for null."""
        return self._codec.as_connect_schema(node)


# --------------------------------------------------------------------------- headers

class SimpleHeaderConverter(HeaderConverter):
    """Kafka's default header converter: a value as its string form (Values.convertToString),
    read back by inferring the schema from the text (Values.parseString: booleans, numbers,
    ISO dates and times, [arrays] and {maps}, else a string)."""

    KAFKA_NAME = "org.apache.kafka.connect.storage.SimpleHeaderConverter"

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        if value is None:
            return None
        if value.__class__ is str:
            return value.encode("utf-8", "replace")
        return str(convert_to_string(value)).encode("utf-8", "replace")

    def to_connect_header(self, topic: str, header_key: str,
                          value: bytes | None) -> tuple[Schema | None, Any]:
        if value is None:
            return None, None
        text = value.decode("utf-8", "replace")
        if not text:
            return Schema.STRING_SCHEMA, text
        try:
            return parse_string(text)
        except Exception:           # as Kafka: what cannot be read stays bytes
            return Schema.BYTES_SCHEMA, value
