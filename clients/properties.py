"""Java `.properties` files read exactly as java.util.Properties.load reads them.

`#`/`!` comments, `=`/`:`/whitespace separators, backslash line continuations, and
`\\t \\n \\r \\f \\\\ \\uXXXX` escapes; every value remembers its line so that a bad value
can be reported as `file:line: key: problem`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, NamedTuple


class ConfigError(ValueError):
    """A config value (or name, for topic configs) is invalid.

    ``key`` names the first offending key; ``code`` is the Kafka wire error to answer with
    (INVALID_CONFIG) when the error comes from a request (CreateTopics, AlterConfigs).
    """

    code = 40
    name = "INVALID_CONFIG"

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


class Property(NamedTuple):
    value: str
    line: int  # 1-based line where the (logical) line starts


_WS = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str, line: int, where: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash (only possible at EOF) is dropped, as Java does
            break
        c = s[i]
        i += 1
        if c == "u":
            hexdigits = s[i:i + 4]
            if len(hexdigits) < 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ConfigError(f"{where}:{line}: malformed \\uxxxx escape")
            out.append(chr(int(hexdigits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _odd_trailing_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = _NEWLINE.split(text)
    i, n = 0, len(lines)
    while i < n:
        start = i + 1
        s = lines[i].lstrip(_WS)
        i += 1
        if not s or s[0] in "#!":  # comment lines never continue onto the next line
            continue
        while _odd_trailing_backslashes(s):
            s = s[:-1]
            if i >= n:
                break
            s += lines[i].lstrip(_WS)  # a continuation line loses its leading whitespace
            i += 1
        yield start, s


def parse_properties(text: str, where: str = "<string>") -> dict[str, Property]:
    """Parse .properties text as java.util.Properties.load does; the last duplicate wins.

    Values keep trailing whitespace (as Java does); typed parsing trims them later.
    """
    props: dict[str, Property] = {}
    for line, s in _logical_lines(text):
        key_end, value_start, has_sep, backslash = 0, len(s), False, False
        while key_end < len(s):
            c = s[key_end]
            if c in "=:" and not backslash:
                value_start, has_sep = key_end + 1, True
                break
            if c in _WS and not backslash:
                value_start = key_end + 1
                break
            backslash = (not backslash) if c == "\\" else False
            key_end += 1
        while value_start < len(s):
            c = s[value_start]
            if c not in _WS:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        key = _unescape(s[:key_end], line, where)
        props[key] = Property(_unescape(s[value_start:], line, where), line)
    return props


def read_properties(path: str | Path) -> dict[str, Property]:
    """Read a .properties file (UTF-8; falls back to ISO-8859-1, Java's encoding for streams)."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, str(path))
