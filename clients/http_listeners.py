"""HTTP listeners as Kafka's REST servers write them (`http://host:port`): shared by
Connect's REST API and the REST proxy, the applications of the clients that serve HTTP."""
from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from aiohttp import web

__all__ = ["parse_listener", "start_sites", "stop_on_signals"]

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


async def start_sites(runner: "web.AppRunner", listeners: list[tuple[str, int]]) -> int:
    """Bind each (host, port) on the set-up `runner`; the port the first one bound (port 0
    resolved). A listener that cannot bind raises OSError with nothing left bound: the
    runner is cleaned up."""
    from aiohttp import web

    first = -1
    try:
        for i, (host, port) in enumerate(listeners):
            site = web.TCPSite(runner, host, port)
            before = len(runner.addresses)
            await site.start()
            if i == 0:
                first = int(runner.addresses[before][1])
    except BaseException:
        await runner.cleanup()
        raise
    return first


def stop_on_signals(loop: "asyncio.AbstractEventLoop", stop: "asyncio.Event") -> None:
    """SIGTERM and SIGINT set `stop` (a server's orderly shutdown); off the main thread (in
    tests) signals cannot be handled and this does nothing."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (RuntimeError, ValueError):
            pass
