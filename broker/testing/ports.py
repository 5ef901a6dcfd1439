"""Loopback ports for test processes."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago. Nothing reserves it: whoever binds it
    must be ready to find it taken (ZooKeeperNode and BrokerNode start again if so)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
