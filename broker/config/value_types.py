"""Config values: a raw string to the typed value of a key's type, and back to the string
Kafka prints (ConfigDef.parseType and ConfigDef.convertToString)."""
from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# int, float, bool, str, list[str] or None (Kafka's null): which one depends on the key's type,
# so a caller reading a known key uses it as that type without a cast.
ConfigValue = Any

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_BOUNDS = {"short": (-2**15, 2**15 - 1), "int": (-2**31, INT_MAX), "long": (-2**63, LONG_MAX)}


def parse_typed(type_: str, raw: str) -> ConfigValue:
    """Raw string -> typed value, or ValueError with the reason (not naming key or file)."""
    s = raw.strip()
    if type_ in _BOUNDS:
        if not _INT_RE.match(s):
            raise ValueError(f"{s!r} is not an integer")
        v = int(s)
        lo, hi = _BOUNDS[type_]
        if not lo <= v <= hi:
            raise ValueError(f"{s} is out of range for a {type_} ({lo}..{hi})")
        return v
    if type_ == "bool":
        if s.lower() not in ("true", "false"):
            raise ValueError(f"{s!r} is not a boolean (expected true or false)")
        return s.lower() == "true"
    if type_ == "double":
        try:
            if "_" in s:
                raise ValueError
            return float(s)
        except ValueError:
            raise ValueError(f"{s!r} is not a number") from None
    if type_ == "list":
        return [p.strip() for p in s.split(",") if p.strip()]
    return s  # string, password, class


def java_double_string(d: float) -> str:
    """Double.toString: plain between 1e-3 and 1e7, else d.dddE[-]n."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)
    t = Decimal(repr(d)).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    exp = int(t.exponent) + len(digits) - 1
    return f"{'-' if t.sign else ''}{digits[0]}.{digits[1:] or '0'}E{exp}"


def to_config_string(type_: str, value: ConfigValue) -> str | None:
    """A typed value as Kafka prints it (ConfigDef.convertToString); None stays None."""
    if value is None:
        return None
    if type_ == "bool":
        return "true" if value else "false"
    if type_ == "list":
        return ",".join(value)
    if type_ == "double":
        return java_double_string(float(value))
    return str(value)
