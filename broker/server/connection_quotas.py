"""How many connections the broker keeps: Kafka's `max.connections` (broker-wide; the
inter-broker listener's connections are not counted, so replication never starves) and
`max.connections.per.ip` with `max.connections.per.ip.overrides`. A connection over a limit
is closed as soon as it is accepted, before it is read, as Kafka does for the per-IP limit
(Kafka waits for a free slot at the broker-wide limit instead; strom closes, so a flood
cannot queue up). With the per-connection read buffers small (network.py), this bounds what
strangers can make the broker hold."""
from __future__ import annotations

import collections
import socket
from typing import Mapping

from clients.properties import ConfigError

from ..config import BrokerConfig


def parse_ip_overrides(text: str | None) -> dict[str, int]:
    """'127.0.0.1:200,host.example:50' -> {ip: limit}; host names are resolved once, here.
    ConfigError naming max.connections.per.ip.overrides for a bad entry."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, limit = item.rpartition(":")
        try:
            count = int(limit)
            if not sep or not host or count < 0:
                raise ValueError
            ip = socket.gethostbyname(host.strip("[]"))
        except (ValueError, OSError):
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count "
                              f"(with a host this machine can resolve)",
                              "max.connections.per.ip.overrides") from None
        out[ip] = count
    return out


class ConnectionQuotas:
    """Counts the open connections; `admit` takes one or says why not, `release` gives it
    back. One instance serves every listener of the broker."""

    def __init__(self, max_connections: int, max_per_ip: int,
                 per_ip_overrides: Mapping[str, int] | None = None,
                 inter_broker_listener: str | None = None):
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.inter_broker_listener = inter_broker_listener
        self.total = 0                  # counted against max.connections
        self.by_ip: collections.Counter[str] = collections.Counter()

    def admit(self, listener: str, ip: str) -> str | None:
        """None when the connection is admitted (and counted); else why it is refused."""
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if self.by_ip[ip] >= limit:
            return f"{ip} has {self.by_ip[ip]} connections (max.connections.per.ip {limit})"
        counted = listener != self.inter_broker_listener
        if counted and self.total >= self.max_connections:
            return f"the broker has {self.total} connections (max.connections {self.max_connections})"
        self.by_ip[ip] += 1
        if counted:
            self.total += 1
        return None

    def release(self, listener: str, ip: str) -> None:
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]
        if listener != self.inter_broker_listener:
            self.total -= 1


def connection_quotas(config: BrokerConfig) -> ConnectionQuotas:
    """The broker's limits from its config (ConfigError for unparsable overrides)."""
    return ConnectionQuotas(config.get("max.connections"), config.get("max.connections.per.ip"),
                            parse_ip_overrides(config.get("max.connections.per.ip.overrides")),
                            config.inter_broker_listener_name)
