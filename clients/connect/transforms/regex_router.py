"""RegexRouter: rename the topic when the whole name matches `regex` (Kafka's RegexRouter).
`replacement` uses Java's syntax: `$1`, `${name}`, `\\$` for a literal dollar."""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, ConfigException, Importance, Type
from .base import Transformation, compile_java_regex, java_regex, java_replacement

__all__ = ["RegexRouter"]


class RegexRouter(Transformation):
    """Update the record topic using the configured regular expression and replacement string."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.RegexRouter"

    def __init__(self) -> None:
        self._regex: re.Pattern[str] | None = None
        self._replace: Callable[[re.Match[str]], str] | None = None

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("regex", Type.STRING, importance=Importance.HIGH,
                        documentation="Regular expression to use for matching.",
                        validator=java_regex)
                .define("replacement", Type.STRING, importance=Importance.HIGH,
                        documentation="Replacement string."))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._regex = compile_java_regex(c["regex"])
        try:
            self._replace = java_replacement(self._regex, c["replacement"])
        except ValueError as e:
            raise ConfigException("replacement", c["replacement"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        assert self._regex is not None and self._replace is not None, "configure() first"
        if self._regex.fullmatch(record.topic) is None:
            return record
        # As Java's matches() then replaceFirst(): the first match found, not the full one
        return record.new_record(topic=self._regex.sub(self._replace, record.topic, count=1))
