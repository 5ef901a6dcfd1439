"""Connections to many brokers, one per broker, reopened lazily after a failure.

`ConnectionPool.get(node)` returns the open connection to a broker, connecting if there is
none or the last one was closed. A node is either an address `(host, port)` or a broker id
whose address the owner keeps current with `set_address` (from Metadata, or from the
coordinator on the broker side). Reconnects back off exponentially as Kafka clients do
(`reconnect.backoff.ms` 50 doubling up to `reconnect.backoff.max.ms` 1000, with 20% jitter):
the delay counts from the previous connection attempt and grows with each consecutive failed
attempt; a successful connect resets it. `get` waits out what is left of the delay, tries
once, and raises KafkaConnectionError if that attempt fails; retrying is the caller's call.

Every connection is opened with the pool's `security` (TLS, SASL; see
`clients.aio.security`). A refused authentication raises `AuthenticationError` from `get`:
it is final (not a KafkaConnectionError), paced by the same backoff if the caller tries again,
and remembered in `authentication_error` until a later attempt succeeds, so code that only
sees connections fail in the background can still tell the user why. A connection whose
SASL session is about to expire (KIP-368) is replaced at the next `get`; the old one closes
once its requests in flight are answered.

Concurrency: any number of tasks may call `get` concurrently; tasks asking for the same node
share one connection attempt. Single event loop, not thread-safe.
"""
from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Union

from .connection import STROM_VERSION, BrokerConnection
from .errors import KafkaConnectionError
from .security import PLAINTEXT, AuthenticationError, ClientSecurity

__all__ = ["ConnectionPool", "Node", "Connector"]

Node = Union[int, tuple[str, int]]
"""A broker id (resolved through `set_address`) or a (host, port) address."""

Connector = Callable[[str, int], Awaitable[BrokerConnection]]

_JITTER = 0.2


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conn: BrokerConnection | None = None
    failures: int = 0              # consecutive failed attempts
    next_attempt: float = 0.0      # loop time before which no attempt is made


class ConnectionPool:
    """One lazily (re)opened `BrokerConnection` per node."""

    def __init__(self, *, client_id: str | None = "strom", connect_timeout: float = 10.0,
                 request_timeout: float | None = 30.0,
                 reconnect_backoff_ms: float = 50, reconnect_backoff_max_ms: float = 1000,
                 software: tuple[str, str] = ("strom", STROM_VERSION),
                 addresses: Mapping[int, tuple[str, int]] | None = None,
                 connector: Connector | None = None,
                 security: ClientSecurity = PLAINTEXT):
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.reconnect_backoff = reconnect_backoff_ms / 1000.0
        self.reconnect_backoff_max = reconnect_backoff_max_ms / 1000.0
        self.software = software
        self.security = security
        self.authentication_error: AuthenticationError | None = None
        self._retiring: dict[asyncio.Task[None], BrokerConnection] = {}
        self._addresses: dict[int, tuple[str, int]] = dict(addresses or {})
        self._connector = connector or self._connect
        self._slots: dict[Node, _Slot] = {}
        self._closed = False

    # ------------------------------------------------------------------ addresses

    def set_address(self, node_id: int, host: str, port: int) -> None:
        """Where broker `node_id` listens. A connection to its old address is replaced at
        the next `get`."""
        self._addresses[node_id] = (host, port)

    def address_of(self, node: Node) -> tuple[str, int]:
        if isinstance(node, tuple):
            return node
        try:
            return self._addresses[node]
        except KeyError:
            raise KafkaConnectionError(f"no address known for broker {node}") from None

    # ------------------------------------------------------------------ connections

    async def get(self, node: Node) -> BrokerConnection:
        """The open connection to `node`, connecting (after any backoff) if needed."""
        if self._closed:
            raise KafkaConnectionError("the connection pool is closed")
        slot = self._slots.get(node)
        if slot is None:
            slot = self._slots[node] = _Slot()
        conn = slot.conn
        if conn is not None and self._usable(node, conn):
            return conn
        async with slot.lock:
            conn = slot.conn
            if conn is not None:
                if self._usable(node, conn):
                    return conn  # another task reconnected while we waited
                slot.conn = None
                if self._session_ending(conn) and self._points_at(node, conn):
                    self._retire(conn)     # still fine for what it carries: let that finish
                else:
                    await conn.close()
            if self._closed:
                raise KafkaConnectionError("the connection pool is closed")
            loop = asyncio.get_running_loop()
            delay = slot.next_attempt - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            started = loop.time()
            try:
                # An unknown address (a broker metadata names but does not list) is a
                # failed attempt too: it is paced by the backoff like a refused connect.
                host, port = self.address_of(node)
                conn = await self._connector(host, port)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                slot.failures += 1
                slot.next_attempt = started + self.backoff(slot.failures)
                if isinstance(e, AuthenticationError):
                    self.authentication_error = e
                raise
            self.authentication_error = None
            slot.failures = 0
            slot.next_attempt = started + self.backoff(0)
            if self._closed:
                await conn.close()
                raise KafkaConnectionError("the connection pool is closed")
            slot.conn = conn
            return conn

    def _usable(self, node: Node, conn: BrokerConnection) -> bool:
        return not conn.closed and not self._session_ending(conn) and self._points_at(node, conn)

    def _points_at(self, node: Node, conn: BrokerConnection) -> bool:
        if isinstance(node, int):
            return self._addresses.get(node) == (conn.host, conn.port)
        return True

    @staticmethod
    def _session_ending(conn: BrokerConnection) -> bool:
        """The broker will soon end the connection's SASL session (KIP-368)."""
        # getattr: a custom connector may hand out connection-like objects without it.
        at = getattr(conn, "reauthenticate_at", None)
        return at is not None and not conn.closed and asyncio.get_running_loop().time() >= at

    def backoff(self, failures: int) -> float:
        """Seconds between attempts after `failures` consecutive failed ones (jittered)."""
        base = min(self.reconnect_backoff * (2 ** min(failures, 30)), self.reconnect_backoff_max)
        return base * random.uniform(1 - _JITTER, 1 + _JITTER)

    def backoff_remaining(self, node: Node) -> float:
        """Seconds until `get(node)` would attempt a connection (0: now)."""
        slot = self._slots.get(node)
        if slot is None:
            return 0.0
        return max(0.0, slot.next_attempt - asyncio.get_running_loop().time())

    def connection(self, node: Node) -> BrokerConnection | None:
        """The open connection to `node` if there is one, without connecting."""
        slot = self._slots.get(node)
        if slot is None or slot.conn is None or not self._usable(node, slot.conn):
            return None
        return slot.conn

    async def _connect(self, host: str, port: int) -> BrokerConnection:
        return await BrokerConnection.connect(
            host, port, client_id=self.client_id, timeout=self.connect_timeout,
            request_timeout=self.request_timeout, software=self.software,
            security=self.security)

    def _retire(self, conn: BrokerConnection) -> None:
        """Close `conn` in the background once the requests it carries are answered."""
        task = asyncio.get_running_loop().create_task(
            conn.close_when_idle(self.request_timeout or 30.0))
        self._retiring[task] = conn
        task.add_done_callback(lambda t: self._retiring.pop(t, None))

    async def close(self, node: Node) -> None:
        """Close the connection to `node`, if any; a later `get` reconnects."""
        slot = self._slots.get(node)
        if slot is not None and slot.conn is not None:
            conn, slot.conn = slot.conn, None
            await conn.close()

    async def close_all(self) -> None:
        """Close every connection; the pool refuses `get` afterwards."""
        self._closed = True
        conns = [s.conn for s in self._slots.values() if s.conn is not None]
        for s in self._slots.values():
            s.conn = None
        retiring, self._retiring = self._retiring, {}
        for task in retiring:
            task.cancel()
        conns += retiring.values()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    @property
    def closed(self) -> bool:
        return self._closed
