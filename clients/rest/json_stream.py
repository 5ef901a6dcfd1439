"""Concatenated JSON read as it arrives: the body of v3's produce route, where a client
writes JSON values one after another (whitespace between them optional) on one request
for as long as it likes. Sans-io: bytes in, parsed values out.

Only the text of values not yet complete is kept, so a stream of any length costs the
memory of its largest value. Parsing is `json.JSONDecoder.raw_decode` (C) on that text. A
value split across chunks is parsed again when more text came, as long as the text pending
is at most a few times the new text (so parsing again costs at most a few times reading);
a value longer than that (a large record in many chunks) is scanned instead, each piece
of new text once, for where it ends (quotes, escapes and bracket depth), and parsed once
its end has come: linear in its size, however the chunks fall.

JSON is what Jackson reads: NaN and Infinity, which Python's json takes, are errors; so is
text Python cannot parse (nesting too deep, an integer of more than 4300 digits).
"""
from __future__ import annotations

import codecs
import json
import re
from itertools import accumulate
from typing import Any

__all__ = ["JsonStreamReader", "JsonStreamError"]


class _NonStandardToken(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON (and Jackson) does not."""

    def __init__(self, token: str):
        super().__init__(token)
        self.token = token


def _refuse_constant(token: str) -> Any:
    raise _NonStandardToken(token)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_raw_decode = _DECODER.raw_decode
_WHITESPACE = " \t\n\r"
_NUMBER_CHARS = "0123456789.eE+-"

# A value cut short by the end of the text fails within its last few characters ("tru",
# "1.5e", "\u00"); a failure further back is in the text itself, and more text cannot mend it.
_TRUNCATION_REACH = 8
# The text pending is parsed again (not scanned) while it is at most this many times the
# new text, or this short.
_REPARSE_RATIO = 4
_REPARSE_BELOW = 512
_MERGE_PIECES = 256


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
        self._end: _ValueEnd | None = None  # scanning the pending text for its first value's end
        self._pieces = 0                # scanning: pieces in _more since they were last merged

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
        end = self._end
        if end is None:
            if self._size <= _REPARSE_BELOW or self._size <= _REPARSE_RATIO * len(text):
                return self._parse(final)
            # The first value pending is long and grows by little at a time: scan it once
            # from its start, then each new text as it comes.
            self._text += "".join(self._more)
            self._more.clear()
            self._pieces = 0
            end = self._end = _ValueEnd()
            found = end.found_in(self._text)
        else:
            found = end.found_in(text)
            if not found:
                self._merge_pieces()
        if found or final:
            return self._parse(final)
        return self._check_size()

    def _merge_pieces(self) -> None:
        """While scanning: every _MERGE_PIECES pieces of text, make the ones since the last
        merge one. Tiny pieces (a client writing a byte at a time) would otherwise cost
        far more memory than their text."""
        self._pieces += 1
        if self._pieces == _MERGE_PIECES:
            more = self._more
            more[-_MERGE_PIECES:] = ["".join(more[-_MERGE_PIECES:])]
            self._pieces = 0

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
        self._end = None
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
            except _NonStandardToken as e:
                self._fail(f"Non-standard token '{e.token}' in the value at character "
                           f"{self._chars + pos}")
                return values
            except RecursionError:
                self._fail(f"the JSON text is nested too deeply at character {self._chars + pos}")
                return values
            except ValueError as e:     # an integer of more digits than int() takes
                self._fail(f"{e} in the value at character {self._chars + pos}")
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
            self._text, self._more, self._size, self._end = "", [], 0, None
        return []

    def _fail(self, message: str) -> list[Any]:
        self.error = JsonStreamError(message)
        self._text, self._more, self._size, self._end = "", [], 0, None
        return []


# A token (number, true, ...) at the top level runs to a structural character or a space.
_SPACE = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'[^][{}" \t\n\r,:]*')
# A string, or one still open at the end of the text (its last backslash may escape the
# next text's first character); the group is its closing quote. Matching an open string
# to the end, not failing on it, keeps the search linear (a failed match would be tried
# again from each quote in it).
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:(")|\\?\Z)', re.DOTALL)
# The rest of a string: up to its closing quote, or a backslash that ends the text.
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^][{}]+")
_DEPTH_CHANGE = {"[": 1, "{": 1, "]": -1, "}": -1}


def _end_of(run: "re.Pattern[str]", text: str, i: int) -> int:
    """Where the run of `run`'s characters from `i` ends."""
    m = run.match(text, i)
    return i if m is None else m.end()


def _odd_backslashes_at_end(text: str) -> bool:
    end = k = len(text)
    while k and text[k - 1] == "\\":
        k -= 1
    return (end - k) % 2 == 1


class _ValueEnd:
    """Where the first JSON value of a text ends, found by scanning the text piece by piece
    as it arrives, each character once, the inside of brackets in bulk (regular
    expressions and counting, in C). Not a parser: it only tells when to parse. Text that
    is not JSON may make it answer early (parsing then finds the error) or never (a
    bracket never closed: the end of the body or the size limit ends it)."""

    __slots__ = ("depth", "in_string", "escaped", "in_token")

    def __init__(self) -> None:
        self.depth = 0              # brackets open
        self.in_string = False
        self.escaped = False        # in a string, after an odd run of backslashes
        self.in_token = False       # in a number or literal at the top level

    def found_in(self, text: str) -> bool:
        """Scan `text`, the piece after the ones before; True when the first value (or
        something the scan cannot judge) ended in it."""
        n = len(text)
        if self.in_token:
            return _end_of(_TOKEN, text, 0) < n
        i = 0
        if self.escaped:
            self.escaped = False
            i = 1
        while i < n:
            if self.in_string:
                i = _end_of(_STRING_REST, text, i)     # at its closing quote, or a lone \
                if i == n:
                    return False
                if text[i] == "\\":                   # the last character: it escapes
                    self.escaped = True                 # the next text's first one
                    return False
                i += 1
                self.in_string = False
                if self.depth == 0:
                    return True
            elif self.depth == 0:
                i = _end_of(_SPACE, text, i)
                if i == n:
                    return False
                c = text[i]
                i += 1
                if c == '"':
                    self.in_string = True
                elif c in "[{":
                    self.depth = 1
                else:               # a number or literal: it ends where its token does
                    if _end_of(_TOKEN, text, i) < n:
                        return True
                    self.in_token = True
                    return False
            else:
                return self._inside_brackets(text[i:] if i else text)
        return False

    def _inside_brackets(self, text: str) -> bool:
        """The rest of a piece, at depth 1 or more outside a string."""
        # [outside, closing quote or None, outside, ...]: split() keeps the text between
        # strings and each string's group, in C (a replacement template would not be).
        parts = _STRINGS.split(text)
        if len(parts) > 1 and parts[-2] is None:     # it ends in a string
            self.in_string = True
            self.escaped = _odd_backslashes_at_end(text)
        brackets = _NOT_BRACKETS.sub("", "".join(parts[::2]))
        if not brackets:
            return False
        opened = brackets.count("[") + brackets.count("{")
        closed = len(brackets) - opened
        if closed >= self.depth and min(accumulate(map(_DEPTH_CHANGE.__getitem__, brackets),
                                                   initial=self.depth)) <= 0:
            return True
        self.depth += opened - closed
        return False
