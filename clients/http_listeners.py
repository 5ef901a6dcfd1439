"""HTTP listeners as Kafka's REST servers write them (`http://host:port`): shared by
Connect's REST API and the REST proxy, the applications of the clients that serve HTTP."""
from __future__ import annotations

import re

__all__ = ["parse_listener"]

# Kafka's RestServerConfig.LISTENER_PATTERN: scheme://[host]:port, the host possibly empty.
_LISTENER = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://\[?(?P<host>[0-9A-Za-z\-%._:]*?)\]?:(?P<port>-?\d+)/?$")


def parse_listener(listener: str) -> tuple[str, int]:
    """(host, port) of an `http://host:port` listener; an empty host means all interfaces
    ("0.0.0.0"). Any other scheme, or a malformed one, is a ValueError."""
    m = _LISTENER.match(listener.strip())
    if m is None:
        raise ValueError(f"Could not parse listener '{listener}': expected http://host:port")
    if m["scheme"].lower() != "http":
        raise ValueError(f"Listener '{listener}': only http listeners are supported")
    port = int(m["port"])
    if not 0 <= port <= 65535:
        raise ValueError(f"Listener '{listener}': port {port} is out of range")
    return m["host"] or "0.0.0.0", port
