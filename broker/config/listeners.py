"""Listener endpoints (``NAME://host:port``) and the listener name -> security protocol map,
parsed as Kafka parses ``listeners`` and ``listener.security.protocol.map``."""
from __future__ import annotations

import re
from typing import NamedTuple

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class Listener(NamedTuple):
    """One endpoint: ``name`` upper-cased (Kafka normalises listener names), ``host`` without
    IPv6 brackets."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


_LISTENER_RE = re.compile(
    r"(?P<name>[A-Za-z0-9_\-]+)://(?:\[(?P<v6>[0-9A-Za-z:.%]*)\]|(?P<host>[0-9A-Za-z\-._]*))"
    r":(?P<port>[0-9]+)\Z")


def parse_listeners(value: str | list[str]) -> list[Listener]:
    """'PLAINTEXT://:9092,INTERNAL://[::1]:9093' -> Listeners (hosts as written, '' kept)."""
    items = value if isinstance(value, list) else [p.strip() for p in value.split(",") if p.strip()]
    out: list[Listener] = []
    for item in items:
        m = _LISTENER_RE.match(item)
        if not m:
            raise ValueError(f"{item!r} is not a valid listener (expected NAME://host:port)")
        port = int(m["port"])
        if port > 65535:
            raise ValueError(f"{item!r}: port {port} is out of range (0..65535)")
        out.append(Listener(m["name"].upper(), m["v6"] if m["v6"] is not None else m["host"], port))
    names = [listener.name for listener in out]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError(f"each listener must have a different name; repeated: {', '.join(dups)}")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    """'PLAINTEXT:PLAINTEXT,internal:ssl' -> {listener name: security protocol}, upper-cased."""
    out: dict[str, str] = {}
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not a listener mapping (expected NAME:PROTOCOL)")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"{item!r}: {proto!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out
