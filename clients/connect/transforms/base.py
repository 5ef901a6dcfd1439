"""What every SMT shares: the Transformation and Predicate interfaces, the $Key/$Value
halves, Kafka's `Requirements` checks, a small schema cache, and Java regex helpers.

A transformation instance belongs to one task: `apply` is called from one thread at a time.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ..plugin_base import Plugin
from ..api import ConnectRecord, SinkRecord
from ..config_def import ConfigDef, ConfigException
from ..data import DataException, Schema, SchemaBuilder, Struct

__all__ = ["Transformation", "Predicate", "KeyValueTransformation", "OnKey", "OnValue",
           "require_map", "require_map_or_null", "require_struct", "require_struct_or_null",
           "require_sink_record", "SchemaCache", "copy_schema_basics", "compile_java_regex",
           "java_regex", "java_replacement", "non_empty_list", "REPLACE_NULL_WITH_DEFAULT",
           "define_replace_null", "field_getter"]


class Transformation(Plugin):
    """Kafka's Transformation: `configure(props)` once, `apply(record)` per record (a new
    record, the same one, or None to drop it), `close()` at the end. `config()` declares
    the keys; `KAFKA_NAME` is Kafka's class name (e.g. "...InsertField$Value")."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError


class Predicate(Plugin):
    """Kafka's Predicate: `test(record)` decides whether a transformation applies."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        raise NotImplementedError


class KeyValueTransformation(Transformation):
    """An SMT with a $Key and a $Value form: the mixin OnKey or OnValue, listed first in
    the concrete class's bases, supplies these three."""

    def operating_schema(self, record: ConnectRecord) -> Any:
        raise NotImplementedError

    def operating_value(self, record: ConnectRecord) -> Any:
        raise NotImplementedError

    def new_record(self, record: ConnectRecord, schema: Any, value: Any) -> ConnectRecord:
        raise NotImplementedError


class OnKey:
    """The $Key half of an SMT: it reads and rewrites the record's key."""

    def operating_schema(self, record: ConnectRecord) -> Any:
        return record.key_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key

    def new_record(self, record: ConnectRecord, schema: Any, value: Any) -> ConnectRecord:
        return record.new_record(key_schema=schema, key=value)


class OnValue:
    """The $Value half of an SMT: it reads and rewrites the record's value."""

    def operating_schema(self, record: ConnectRecord) -> Any:
        return record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.value

    def new_record(self, record: ConnectRecord, schema: Any, value: Any) -> ConnectRecord:
        return record.new_record(value_schema=schema, value=value)


# --------------------------------------------------------------------------- Requirements

def _class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], "
                            f"found: {_class_name(value)}")
    return value


def require_map_or_null(value: Any, purpose: str) -> Mapping[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], "
                            f"found: {_class_name(value)}")
    return value


def require_struct_or_null(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_sink_record(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], "
                            f"found: {_class_name(record)}")
    return record


# --------------------------------------------------------------------------- schemas

class SchemaCache:
    """Derived schemas by source schema, at most `size` (Kafka keeps an LRU of 16); the
    oldest entry goes first."""

    def __init__(self, size: int = 16):
        self._size = size
        self._entries: dict[Schema, Any] = {}

    def get(self, schema: Schema) -> Any:
        return self._entries.get(schema)

    def get_or_make(self, schema: Schema, make: Callable[[Schema], Any]) -> Any:
        found = self._entries.get(schema)
        return found if found is not None else self.put(schema, make(schema))

    def put(self, schema: Schema, derived: Any) -> Any:
        if len(self._entries) >= self._size:
            del self._entries[next(iter(self._entries))]
        self._entries[schema] = derived
        return derived


def copy_schema_basics(source: Schema, builder: SchemaBuilder) -> SchemaBuilder:
    """Kafka's SchemaUtil.copySchemaBasics: name, version, doc and parameters (not optional)."""
    if source.name is not None:
        builder.name(source.name)
    if source.version is not None:
        builder.version(source.version)
    if source.doc is not None:
        builder.doc(source.doc)
    if source.parameters is not None:
        builder.parameters(source.parameters)
    return builder


REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"


def define_replace_null(config: ConfigDef) -> ConfigDef:
    """KIP-1040's key, shared by the SMTs that copy Struct fields."""
    from ..config_def import Importance, Type
    return config.define(REPLACE_NULL_WITH_DEFAULT, Type.BOOLEAN, True, Importance.MEDIUM,
                         "Whether to replace fields that have a default value and that are null "
                         "to the default value. When set to true, the default value is used, "
                         "otherwise null is used.")


def field_getter(replace_null: bool) -> Callable[[Struct, str], Any]:
    return Struct.get if replace_null else Struct.get_without_default


# --------------------------------------------------------------------------- validators

def non_empty_list(key: str, value: Any) -> None:
    """Kafka's NonEmptyListValidator."""
    if not value:
        raise ConfigException(key, value, "Empty list")


_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")


def compile_java_regex(pattern: str) -> re.Pattern[str]:
    """A Java regex as Python's: named groups `(?<name>...)` become `(?P<name>...)`; the
    rest of the common syntax is the same."""
    return re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))


def java_regex(key: str, value: Any) -> None:
    """Kafka's RegexValidator, for Java-style patterns."""
    if value is None:
        return
    try:
        compile_java_regex(value)
    except re.error as e:
        raise ConfigException(key, value, f"Invalid regex: {e}") from None


def java_replacement(pattern: re.Pattern[str], replacement: str) -> Callable[[re.Match[str]], str]:
    """Java's Matcher replacement syntax as a function of a match: `$1` (as many digits as
    name an existing group), `${name}`, and `\\x` for a literal x. Raises ValueError on a
    malformed replacement."""
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i >= n:
                raise ValueError("character to be escaped is missing")
            literal.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if literal:
                parts.append("".join(literal))
                literal = []
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1:end]
                if name not in pattern.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                parts.append(pattern.groupindex[name])
                i = end + 1
                continue
            if not replacement[i].isdigit():
                raise ValueError("Illegal group reference")
            ref = int(replacement[i])
            i += 1
            while i < n and replacement[i].isdigit():   # Java: longest number naming a group
                longer = ref * 10 + int(replacement[i])
                if longer > pattern.groups:
                    break
                ref = longer
                i += 1
            if ref > pattern.groups:
                raise ValueError(f"No group {ref}")
            parts.append(ref)
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append("".join(literal))
    frozen = tuple(parts)

    def expand(m: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in frozen)
    return expand
