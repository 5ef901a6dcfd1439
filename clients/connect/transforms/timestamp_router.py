"""TimestampRouter: route each record to a topic named from its topic and timestamp, e.g.
"${topic}-${timestamp}" with "yyyyMMdd" -> "logs-20240131" (Kafka's TimestampRouter).
`timestamp.format` is a Java SimpleDateFormat pattern, formatted in UTC."""
from __future__ import annotations

import datetime
from typing import Any, Callable, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigDef, ConfigException, Importance, Type
from ..data import DataException
from .base import Transformation

__all__ = ["TimestampRouter", "simple_date_format"]

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


Formatter = Callable[[datetime.datetime], str]


def _number(get: Callable[[datetime.datetime], int]) -> Callable[[int], Formatter]:
    return lambda width: (lambda t: str(get(t)).zfill(width))


def _year(width: int) -> Callable[[datetime.datetime], str]:
    if width == 2:
        return lambda t: f"{t.year % 100:02d}"
    return lambda t: str(t.year).zfill(width)


def _month(width: int) -> Callable[[datetime.datetime], str]:
    if width >= 4:
        return lambda t: _MONTHS[t.month - 1]
    if width == 3:
        return lambda t: _MONTHS[t.month - 1][:3]
    return lambda t: str(t.month).zfill(width)


def _weekday(width: int) -> Callable[[datetime.datetime], str]:
    return (lambda t: _DAYS[t.weekday()]) if width >= 4 else (lambda t: _DAYS[t.weekday()][:3])


_FIELDS: dict[str, Callable[[int], Callable[[datetime.datetime], str]]] = {
    "G": lambda w: (lambda t: "AD"),
    "y": _year,
    "Y": _year,
    "M": _month,
    "L": _month,
    "d": _number(lambda t: t.day),
    "D": _number(lambda t: t.timetuple().tm_yday),
    "E": _weekday,
    "u": _number(lambda t: t.isoweekday()),
    "a": lambda w: (lambda t: "AM" if t.hour < 12 else "PM"),
    "H": _number(lambda t: t.hour),
    "k": _number(lambda t: t.hour or 24),
    "K": _number(lambda t: t.hour % 12),
    "h": _number(lambda t: t.hour % 12 or 12),
    "m": _number(lambda t: t.minute),
    "s": _number(lambda t: t.second),
    "S": _number(lambda t: t.microsecond // 1000),
    "z": lambda w: (lambda t: "Coordinated Universal Time" if w >= 4 else "UTC"),
    "Z": lambda w: (lambda t: "+0000"),
    "X": lambda w: (lambda t: "Z"),
}


def simple_date_format(pattern: str) -> Callable[[int], str]:
    """A formatter of epoch milliseconds (UTC) for a Java SimpleDateFormat pattern: letters
    G y Y M L d D E u a H k K h m s S z Z X, quoted 'text' and '' for a quote. Raises
    ValueError for letters it does not know."""
    parts: list[Callable[[datetime.datetime], str] | str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":     # '' is a quote
                parts.append("'")
                i += 2
                continue
            j, text = i + 1, []
            while True:                                 # 'quoted text', '' inside it a quote
                if j >= n:
                    raise ValueError("Unterminated quote")
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(pattern[j])
                j += 1
            parts.append("".join(text))
            i = j + 1
        elif c.isascii() and c.isalpha():
            width = 1
            while i + width < n and pattern[i + width] == c:
                width += 1
            if c not in _FIELDS:
                raise ValueError(f"Illegal pattern character '{c}'")
            parts.append(_FIELDS[c](width))
            i += width
        else:
            parts.append(c)
            i += 1
    frozen = tuple(parts)
    epoch = datetime.datetime(1970, 1, 1)

    def format_ms(ms: int) -> str:
        t = epoch + datetime.timedelta(milliseconds=ms)
        return "".join(p if isinstance(p, str) else p(t) for p in frozen)
    return format_ms


class TimestampRouter(Transformation):
    """Update the record's topic field as a function of the original topic value and the
    record timestamp."""

    KAFKA_NAME = "org.apache.kafka.connect.transforms.TimestampRouter"

    def __init__(self) -> None:
        self._topic_format = "${topic}-${timestamp}"
        self._format: Callable[[int], str] = simple_date_format("yyyyMMdd")

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("topic.format", Type.STRING, "${topic}-${timestamp}", Importance.HIGH,
                        "Format string which can contain <code>${topic}</code> and "
                        "<code>${timestamp}</code> as placeholders for the topic and timestamp, "
                        "respectively.")
                .define("timestamp.format", Type.STRING, "yyyyMMdd", Importance.HIGH,
                        "Format string for the timestamp that is compatible with "
                        "<code>java.text.SimpleDateFormat</code>."))

    def configure(self, configs: Mapping[str, Any]) -> None:
        c = self.config().parse(configs)
        self._topic_format = c["topic.format"]
        try:
            self._format = simple_date_format(c["timestamp.format"])
        except ValueError as e:
            raise ConfigException("timestamp.format", c["timestamp.format"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = self._format(record.timestamp)
        topic = self._topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)
