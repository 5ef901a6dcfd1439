"""Kafka's `sasl.jaas.config` syntax: one JAAS login module entry, as Kafka's JaasConfig reads
it (a StreamTokenizer over `<LoginModule class> <flag> key=value ... ;`).

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Values are double-quoted strings (backslash escapes the next character) or bare words. Used by
the clients (their own username and password) and by the broker (a listener's PLAIN users
`user_<name>`, and the credentials it uses towards other brokers).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["JaasEntry", "parse_jaas_config", "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) with kind "word", "string", "=" or ";"."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            buf: list[str] = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted string in JAAS config")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            out.append(("string", "".join(buf)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in '=;"':
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas_config(text: str) -> JaasEntry:
    """The one login module entry of a `sasl.jaas.config` value; ValueError saying what is
    wrong (Kafka allows exactly one entry per config value)."""
    tokens = _tokens(text)
    if not tokens:
        raise ValueError("JAAS config is empty")
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("JAAS config must start with '<LoginModule class> <control flag>'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ValueError(f"JAAS config: {tokens[1][1]!r} is not a control flag "
                         f"({', '.join(_FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" \
                or tokens[i + 2][0] not in ("word", "string"):
            raise ValueError(f"JAAS config: expected key=value, found {tokens[i][1]!r}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ValueError("JAAS config must end with ';'")
    if i != len(tokens) - 1:
        raise ValueError("JAAS config must contain exactly one login module entry")
    return JaasEntry(module, flag, options)
