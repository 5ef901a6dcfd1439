"""Kafka's predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone. A connector's
`transforms.<alias>.predicate` names one (by its alias in `predicates`) to decide whether
the transformation applies; `negate` inverts it."""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, Importance, Type, non_empty
from .base import Predicate, compile_java_regex, java_regex

__all__ = ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"]


def _non_empty_regex(key: str, value: Any) -> None:
    non_empty(key, value)
    java_regex(key, value)


class TopicNameMatches(Predicate):
    """A predicate which is true for records with a topic name that matches the configured
    regular expression."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"

    def __init__(self) -> None:
        self._pattern: re.Pattern[str] | None = None

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "pattern", Type.STRING, importance=Importance.MEDIUM, validator=_non_empty_regex,
            documentation="A Java regular expression for matching against the name of a "
                          "record's topic.")

    def configure(self, configs: Mapping[str, Any]) -> None:
        self._pattern = compile_java_regex(self.config().parse(configs)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        assert self._pattern is not None, "configure() first"
        return record.topic is not None and self._pattern.fullmatch(record.topic) is not None

    def __repr__(self) -> str:
        return f"TopicNameMatches{{pattern={self._pattern.pattern if self._pattern else None}}}"


class HasHeaderKey(Predicate):
    """A predicate which is true for records with at least one header with the configured name."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"

    def __init__(self) -> None:
        self._name = ""

    def config(self) -> ConfigDef:
        return ConfigDef().define("name", Type.STRING, importance=Importance.MEDIUM,
                                  validator=non_empty, documentation="The header name.")

    def configure(self, configs: Mapping[str, Any]) -> None:
        self._name = self.config().parse(configs)["name"]

    def test(self, record: ConnectRecord) -> bool:
        name = self._name
        return any(k == name for k, _ in record.headers)

    def __repr__(self) -> str:
        return f"HasHeaderKey{{name='{self._name}'}}"


class RecordIsTombstone(Predicate):
    """A predicate which is true for records which are tombstones (i.e. have null value)."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None

    def __repr__(self) -> str:
        return "RecordIsTombstone{}"
