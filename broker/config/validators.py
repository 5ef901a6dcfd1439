"""Validators of typed config values, printed as Kafka prints them in its docs
(ConfigDef.Range, ValidString, ValidList). A validator returns None for a good value and the
reason otherwise; None (Kafka's null) always passes."""
from __future__ import annotations

from typing import Callable

from .value_types import ConfigValue

Validator = Callable[[ConfigValue], "str | None"]


class Range:
    """Numeric bounds, inclusive; printed as Kafka prints them ("[1,...]", "[0,...,1]")."""

    def __init__(self, min: float | None = None, max: float | None = None):
        self.min, self.max = min, max

    def __call__(self, v: ConfigValue) -> str | None:
        if v is None:
            return None
        if self.min is not None and v < self.min:
            if self.max is None:
                return f"{v} is out of range: must be at least {self.min}"
            return f"{v} is out of range: must be between {self.min} and {self.max}"
        if self.max is not None and v > self.max:
            if self.min is None:
                return f"{v} is out of range: must be at most {self.max}"
            return f"{v} is out of range: must be between {self.min} and {self.max}"
        return None

    def __str__(self) -> str:
        if self.max is None:
            return f"[{self.min},...]"
        if self.min is None:
            return f"[...,{self.max}]"
        return f"[{self.min},...,{self.max}]"


class OneOf:
    """A string from a fixed set (case-sensitive, as Kafka's ValidString)."""

    def __init__(self, *values: str):
        self.values = values

    def __call__(self, v: ConfigValue) -> str | None:
        if v is None or v in self.values:
            return None
        return f"{v!r} is not one of {', '.join(self.values)}"

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


class ListOf(OneOf):
    """A list whose every item comes from a fixed set (Kafka's ValidList.in)."""

    def __call__(self, v: ConfigValue) -> str | None:
        for item in v or ():
            if item not in self.values:
                return f"{item!r} is not one of {', '.join(self.values)}"
        return None


class CustomCheck:
    """Any check, with the text the docs show for the values it accepts."""

    def __init__(self, check: Callable[[ConfigValue], str | None], text: str):
        self.check, self.text = check, text

    def __call__(self, v: ConfigValue) -> str | None:
        return None if v is None else self.check(v)

    def __str__(self) -> str:
        return self.text


def reason_of(parse: Callable[[ConfigValue], object]) -> Callable[[ConfigValue], str | None]:
    """A check out of a parser that raises ValueError: the error's text is the reason."""
    def check(v: ConfigValue) -> str | None:
        try:
            parse(v)
        except ValueError as e:
            return str(e)
        return None
    return check


# Shared by a broker key and the topic key it supplies the default of.
COMPRESSION_TYPES = OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ListOf("compact", "delete")
TIMESTAMP_TYPES = OneOf("CreateTime", "LogAppendTime")
