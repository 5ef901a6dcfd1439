"""Seeing a broker's process die in milliseconds instead of a ZooKeeper session timeout.

A `ProcessWatch` keeps one idle TCP connection open to a broker's listener and never sends
on it. When the broker's process dies (kill -9, a crash, OOM), its kernel closes that
connection at once; the watch then connects again, and only a *refused* connection -
nothing listens on that address any more - counts as death. Everything else is not proof:
a broker that is slow, paused (SIGSTOP, a long GC) or behind a full accept queue still
completes the TCP handshake or lets it time out; a partitioned one times out. So the watch
never reports a live process as dead, and ZooKeeper's session expiry stays the backstop for
the cases it cannot see (a dead machine, a network partition).

What the report lets the caller do is safe because nothing else rests on detection speed:
the controller's partition-state writes are conditional (ZooKeeper versions, controller
epoch), leader epochs fence a deposed leader, and the ISR decides who may be elected.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable

log = logging.getLogger(__name__)

# A connect that takes longer than this is "no proof of death": look again later.
PROBE_TIMEOUT_S = 2.0
# Pause between attempts while the broker is unreachable (but not refusing).
RETRY_S = 1.0
# After a watched connection of long standing ends, the next attempts come this soon, this
# many times: a process being killed closes its connections a moment before its listener,
# and a connect in that moment can land in the dying listener's queue and be reset, or fail
# or time out some other way; that is the death itself, not a reason to wait a second.
QUICK_RETRY_S = 0.02
QUICK_LOOKS = 3


class ProcessWatch:
    """Calls `on_dead()` once, when a connection to (host, port) is refused after the
    watched connection closed (or could not be opened at all)."""

    def __init__(self, name: str, host: str, port: int, on_dead: Callable[[], None],
                 probe_timeout_s: float = PROBE_TIMEOUT_S, retry_s: float = RETRY_S):
        self.name = name
        self.address = (host, port)
        self.on_dead = on_dead
        self.probe_timeout_s = probe_timeout_s
        self.retry_s = retry_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> "ProcessWatch":
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to any address the host resolves to. ConnectionRefusedError only
        when every address refused (asyncio's own multi-address error would hide that,
        e.g. for "localhost" on ::1 and 127.0.0.1)."""
        host, port = self.address
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        errors: list[OSError] = []
        for family, _, _, _, addr in infos:
            try:
                return await asyncio.open_connection(str(addr[0]), int(addr[1]), family=family)
            except OSError as e:
                errors.append(e)
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            raise errors[0]
        raise errors[0] if errors else OSError(f"{host} resolves to no address")

    async def _run(self) -> None:
        host, port = self.address
        loop = asyncio.get_running_loop()
        quick = 0           # quick looks left (QUICK_LOOKS after a long-standing connection ends)
        while True:
            try:
                reader, writer = await asyncio.wait_for(self._connect(), self.probe_timeout_s)
            except ConnectionRefusedError:
                log.warning("%s (%s:%d) refuses connections: its process is gone", self.name, host, port)
                self._task = None
                self.on_dead()
                return
            except (OSError, asyncio.TimeoutError):
                # Unreachable or slow: no proof either way.
                await asyncio.sleep(QUICK_RETRY_S if quick else self.retry_s)
                quick = max(quick - 1, 0)
                continue
            opened = loop.time()
            try:
                # We never send: the broker keeps the connection idle until it closes it
                # (connections.max.idle.ms) or its process ends.
                while await reader.read(4096):
                    pass
            except OSError:
                pass
            finally:
                writer.close()
            if loop.time() - opened >= self.retry_s:
                quick = QUICK_LOOKS             # the watched connection ended: look again now
            elif quick:
                quick -= 1                      # reset at once, as by a dying listener
            else:
                # Closed at once, again and again (a connection quota, a listener that wants
                # a handshake): do not spin; a death is then seen one pause later.
                await asyncio.sleep(self.retry_s)


class RevivalWatch(ProcessWatch):
    """The other way round, for a broker fenced on a refusal: calls `on_alive()` once, when a
    connection to (host, port) succeeds. A refusal is not always a dead process: a firewall
    that rejects, or a network answering with resets, refuses for a live one. A listener that
    answers again is that process (or a new one, which registers anew next)."""

    def __init__(self, name: str, host: str, port: int, on_alive: Callable[[], None],
                 probe_timeout_s: float = PROBE_TIMEOUT_S, retry_s: float = RETRY_S):
        super().__init__(name, host, port, on_alive, probe_timeout_s, retry_s)
        self.on_alive = on_alive

    async def _run(self) -> None:
        host, port = self.address
        while True:
            try:
                _, writer = await asyncio.wait_for(self._connect(), self.probe_timeout_s)
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(self.retry_s)
                continue
            writer.close()
            log.warning("%s (%s:%d) accepts connections again", self.name, host, port)
            self._task = None
            self.on_alive()
            return
