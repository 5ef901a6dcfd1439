"""Concatenated JSON read as it arrives: the body of v3's produce route, where a client
writes JSON values one after another (whitespace between them optional) on one request
for as long as it likes. Sans-io: bytes in, parsed values out.

Only the text of values not yet complete is kept, so a stream of any length costs the
memory of its largest value. Parsing is `json.JSONDecoder.raw_decode` (C) on that text;
a value split across chunks is parsed again once more text arrived. Parsing again is
skipped while a value is large and the new text cannot have ended it (a long base64
string arriving in many chunks is scanned a few times, not once per chunk).
"""
from __future__ import annotations

import codecs
import json
from typing import Any

__all__ = ["JsonStreamReader", "JsonStreamError"]

_DECODER = json.JSONDecoder()
_raw_decode = _DECODER.raw_decode
_WHITESPACE = " \t\n\r"
_NUMBER_CHARS = "0123456789.eE+-"

# A value cut short by the end of the text fails within its last few characters ("tru",
# "1.5e", "\u00"); a failure further back is in the text itself, and more text cannot mend it.
_TRUNCATION_REACH = 8
# Above this much pending text, parse again only when the new text holds a closing
# character: a value ends with one (or with a quote, for a bare string).
_RESCAN_FREELY_BELOW = 64 * 1024


class JsonStreamError(ValueError):
    """The text is not concatenated JSON, or a value is longer than the limit. Nothing
    after it can be read: there is no telling where the next value would start."""

    def __init__(self, message: str, too_large: bool = False):
        super().__init__(message)
        self.too_large = too_large


class JsonStreamReader:
    """Feed it the body's bytes as they come; `feed` and `finish` return the values that
    became complete, in order. After an error, `error` is set and nothing more is returned
    (the values before it are returned first). `max_value_chars` bounds the text of one
    value (and so the memory held)."""

    def __init__(self, max_value_chars: int):
        self.max_value_chars = max_value_chars
        self.error: JsonStreamError | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._text = ""                 # the start of the pending text, already joined
        self._more: list[str] = []      # text that arrived after it, joined when parsing
        self._size = 0                  # len(_text) + the lengths in _more
        self._bytes = 0                 # bytes fed before
        self._chars = 0                 # characters parsed and dropped before _text

    def feed(self, data: bytes) -> list[Any]:
        if self.error is not None:
            return []
        try:
            text = self._utf8.decode(data)
        except UnicodeDecodeError as e:
            # The records before the bad byte stand; nothing after it can be read.
            values = self._parse_more(e.object[:e.start].decode("utf-8"), final=False)
            if self.error is None:
                self._fail(f"the body is not UTF-8: {e.reason} at byte {self._bytes + e.start}")
            return values
        self._bytes += len(data)
        return self._parse_more(text, final=False)

    def _parse_more(self, text: str, final: bool) -> list[Any]:
        if not text:
            return self._parse(final) if final else []
        self._more.append(text)
        self._size += len(text)
        if self._size > _RESCAN_FREELY_BELOW and not any(c in text for c in '}]"'):
            return self._check_size()
        return self._parse(final)

    def finish(self) -> list[Any]:
        """The end of the body: the values left, or an error for an unfinished one."""
        if self.error is not None:
            return []
        try:
            text = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as e:
            values = self._parse(final=True)
            if self.error is None:
                self._fail(f"the body is not UTF-8: {e.reason} at its end")
            return values
        return self._parse_more(text, final=True)

    def _parse(self, final: bool) -> list[Any]:
        if self._more:
            self._text = self._text + "".join(self._more)
            self._more.clear()
        text = self._text
        end = len(text)
        pos = 0
        values: list[Any] = []
        while True:
            while pos < end and text[pos] in _WHITESPACE:
                pos += 1
            if pos == end:
                break
            try:
                value, after = _raw_decode(text, pos)
            except json.JSONDecodeError as e:
                if not final and (e.msg.startswith("Unterminated string")
                                  or e.pos >= end - _TRUNCATION_REACH):
                    break       # cut short: wait for more text
                self.error = JsonStreamError(f"{e.msg} at character {self._chars + e.pos}")
                self._text, self._size = "", 0
                return values
            if (not final and type(value) in (int, float)
                    and not text[after:end].strip(_NUMBER_CHARS)):
                break           # a number at the end of the text may go on ("12." then "5")
            values.append(value)
            pos = after
        self._text = text[pos:] if pos else text
        self._size = end - pos
        self._chars += pos
        self._check_size()
        return values

    def _check_size(self) -> list[Any]:
        """Fail when the pending text is over the limit (the values before it stand)."""
        if self._size > self.max_value_chars:
            self.error = JsonStreamError(
                f"a record's JSON text is over {self.max_value_chars} characters", too_large=True)
            self._text, self._more, self._size = "", [], 0
        return []

    def _fail(self, message: str) -> list[Any]:
        self.error = JsonStreamError(message)
        self._text, self._more, self._size = "", [], 0
        return []
