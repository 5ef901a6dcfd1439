"""One ZooKeeper session seen from asyncio: kazoo's requests as awaitables.

kazoo runs its own threads (a connection thread, a callback thread). Nothing here blocks the
asyncio loop: every request uses kazoo's `*_async` call, whose completion is handed to the
loop with `call_soon_threadsafe`. A request that meets a dropped connection is retried once
the client is connected again, until the connection timeout (Kafka's
retryRequestUntilConnected); reads that must not give up use `read`.

What Kafka reports of its ZooKeeper client is kept here for the broker's metrics to read
(zkcoord imports no metrics library): the session state in the words of ZooKeeper's client
(`state`), the connection events SessionExpireListener counts (`disconnects`, `expires`,
`sync_connects`), and each request's round trip in ms handed to `request_ms` when one is set
(ZooKeeperClientMetrics' ZooKeeperRequestLatencyMs).
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Callable, Protocol

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (ConnectionClosedError, ConnectionLoss, NodeExistsError, NoNodeError,
                              OperationTimeoutError, RolledBackError, SessionExpiredError)
from kazoo.protocol.states import KazooState, ZnodeStat
from kazoo.retry import KazooRetry

from . import zk_paths as zp
from .zk_errors import ControllerMovedError, ZkNotConnectedError

log = logging.getLogger("strom.zkcoord")

# Failures after which a request is retried once the client is connected again.
_RETRIABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)


# ZooKeeper's client states (org.apache.zookeeper.ZooKeeper.States), the values of Kafka's
# SessionExpireListener SessionState gauge, in the order the metrics list them.
SESSION_STATES = ("NOT_CONNECTED", "CONNECTING", "CONNECTED", "CLOSED")
# kazoo's session events -> the ZooKeeper client state they leave it in: SUSPENDED is a
# dropped connection being re-established; LOST is an expired (or closed) session.
_STATE_OF = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "CONNECTING",
             KazooState.LOST: "CLOSED"}


class RequestTimer(Protocol):
    """Where request round trips go (the broker's metrics hand in a histogram)."""

    def observe(self, value: float) -> None: ...


def split_connect(connect: str) -> tuple[str, str | None]:
    """`h1:2181,h2:2181/strom` -> (`h1:2181,h2:2181`, `/strom`); no chroot -> None."""
    hosts, sep, chroot = connect.partition("/")
    if not sep or not chroot.strip("/"):
        return hosts, None
    return hosts, "/" + chroot.strip("/")


def _connection_retry() -> KazooRetry:
    # kazoo's default backs off up to an hour between attempts; a broker should find a
    # restarted ZooKeeper within a second or so.
    return KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, max_jitter=0.1)


def _ensure_chroot(hosts: str, chroot: str, timeout: float) -> None:
    """Kafka creates a missing chroot with a client outside it; so do we (blocking: run it in
    a thread)."""
    client = KazooClient(hosts=hosts, timeout=timeout, connection_retry=_connection_retry())
    client.start(timeout=timeout)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()


class ZkSession:
    """The kazoo client of one metadata store. `on_state(state)` is called on the loop for
    each of kazoo's session states (CONNECTED, SUSPENDED, LOST)."""

    def __init__(self, connect: str, session_timeout_s: float, connection_timeout_s: float):
        self.connect = connect
        self.session_timeout = session_timeout_s
        self.connection_timeout = connection_timeout_s
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closing = False
        self.connected = asyncio.Event()
        self._client: KazooClient | None = None
        self._on_state: Callable[[str], None] = lambda state: None
        self.state = "NOT_CONNECTED"
        self.disconnects = 0        # connections dropped (ZooKeeperDisconnectsPerSec)
        self.expires = 0            # sessions expired (ZooKeeperExpiresPerSec)
        self.sync_connects = 0      # connections (re)established (ZooKeeperSyncConnectsPerSec)
        self.request_ms: RequestTimer | None = None

    # ------------------------------------------------------------ lifecycle

    async def open(self, on_state: Callable[[str], None]) -> None:
        """Connect (creating the chroot first if it is missing); ZkNotConnectedError if
        ZooKeeper does not answer within the connection timeout."""
        self.loop = asyncio.get_running_loop()
        self.closing = False
        self.connected = asyncio.Event()
        self._on_state = on_state
        self.state = "CONNECTING"
        hosts, chroot = split_connect(self.connect)
        if chroot:
            try:
                await asyncio.to_thread(_ensure_chroot, hosts, chroot, self.connection_timeout)
            except Exception as e:
                raise ZkNotConnectedError(
                    f"cannot create chroot {chroot} on ZooKeeper at {hosts}: {e!r}") from e
        client = KazooClient(hosts=self.connect, timeout=self.session_timeout,
                             connection_retry=_connection_retry())
        client.add_listener(self._kazoo_state)
        self._client = client
        try:
            await asyncio.to_thread(client.start, self.connection_timeout)
        except Exception as e:
            self._client = None
            self.state = "NOT_CONNECTED"
            raise ZkNotConnectedError(
                f"cannot connect to ZooKeeper at {self.connect} within "
                f"{self.connection_timeout:.0f}s: {e}") from e
        self.connected.set()

    async def close(self) -> None:
        """Close the session: its ephemeral znodes vanish at once."""
        client, self._client = self._client, None
        if client is not None:
            def close() -> None:
                client.stop()
                client.close()
            await asyncio.to_thread(close)
        self.connected.clear()
        self.state = "CLOSED"

    @property
    def client(self) -> KazooClient:
        if self._client is None:
            raise ConnectionClosedError("ZooKeeper metadata store is not started")
        return self._client

    @property
    def is_open(self) -> bool:
        return self._client is not None

    @property
    def session_id(self) -> int | None:
        """The id of the current ZooKeeper session (a new one after an expiry)."""
        cid = self._client.client_id if self._client is not None else None
        return cid[0] if cid else None

    def _kazoo_state(self, state: str) -> None:      # kazoo's thread
        loop = self.loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._state_on_loop, state)
        except RuntimeError:
            pass

    def _state_on_loop(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self.connected.set()
            self.sync_connects += 1
        else:
            self.connected.clear()
            if state == KazooState.SUSPENDED:
                self.disconnects += 1
            elif not self.closing:
                self.expires += 1
        self.state = _STATE_OF.get(state, self.state)
        self._on_state(state)

    # ------------------------------------------------------------ kazoo -> asyncio

    def _future(self, async_result: Any, sent: float) -> asyncio.Future:
        """The request's outcome on the loop; `sent`: its perf_counter() time of sending."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        timer = self.request_ms

        def resolve(value: Any, exc: BaseException | None, took_ms: float) -> None:
            if timer is not None:
                timer.observe(took_ms)
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(value)

        def done(result: Any) -> None:     # kazoo's completion thread
            took_ms = (time.perf_counter() - sent) * 1000.0
            try:
                value, exc = result.get_nowait(), None
            except BaseException as e:     # noqa: BLE001 - handed to the awaiting task
                value, exc = None, e
            try:
                loop.call_soon_threadsafe(resolve, value, exc, took_ms)
            except RuntimeError:
                pass

        async_result.rawlink(done)
        return fut

    async def call(self, make: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run one kazoo request (`make` returns its IAsyncResult), retried when the
        connection drops until `timeout` (default: the connection timeout), like Kafka's
        retryRequestUntilConnected. `make` is called again for each attempt."""
        limit = self.connection_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            if self._client is None or self.closing:
                raise ConnectionClosedError("ZooKeeper metadata store is stopped")
            if not self.connected.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ZkNotConnectedError(f"no ZooKeeper connection to {self.connect} "
                                              f"for {limit:.0f}s")
                try:
                    await asyncio.wait_for(self.connected.wait(),
                                           None if math.isinf(remaining) else remaining)
                except asyncio.TimeoutError:
                    continue
            try:
                sent = time.perf_counter()
                return await self._future(make(), sent)
            except _RETRIABLE:
                if self.closing or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.02)

    async def read(self, make: Callable[[], Any]) -> Any:
        """A read by the watching consumer: retried until connected, however long that takes."""
        return await self.call(make, timeout=math.inf)

    async def read_data(self, path: str) -> bytes | None:
        """`read` of a node's data; None when the node does not exist."""
        c = self.client
        try:
            data, _ = await self.read(lambda: c.get_async(path))
        except NoNodeError:
            return None
        return data

    async def read_children(self, path: str) -> list[str]:
        """`read` of a node's children; none when the node does not exist."""
        c = self.client
        try:
            children: list[str] = await self.read(lambda: c.get_children_async(path))
        except NoNodeError:
            return []
        return children

    # ------------------------------------------------------------ plain requests

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        c = self.client
        try:
            return await self.call(lambda: c.get_async(path))
        except NoNodeError:
            return None

    async def exists(self, path: str) -> ZnodeStat | None:
        c = self.client
        return await self.call(lambda: c.exists_async(path))

    async def children(self, path: str) -> list[str]:
        c = self.client
        try:
            return await self.call(lambda: c.get_children_async(path))
        except NoNodeError:
            return []

    async def create(self, path: str, data: bytes, **kw: Any) -> str:
        c = self.client
        return await self.call(lambda: c.create_async(path, data, **kw))

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        c = self.client
        return await self.call(lambda: c.set_async(path, data, version))

    async def set_or_create(self, path: str, data: bytes) -> ZnodeStat:
        c = self.client
        while True:
            try:
                return await self.call(lambda: c.set_async(path, data))
            except NoNodeError:
                try:
                    _, stat = await self.call(
                        lambda: c.create_async(path, data, makepath=True, include_data=True))
                    return stat
                except NodeExistsError:
                    continue

    async def ensure_path(self, path: str) -> None:
        c = self.client
        await self.call(lambda: c.ensure_path_async(path))

    async def delete_if_exists(self, path: str, version: int = -1) -> bool:
        c = self.client
        try:
            await self.call(lambda: c.delete_async(path, version))
            return True
        except NoNodeError:
            return False

    def is_own_ephemeral(self, stat: ZnodeStat) -> bool:
        cid = self._client.client_id if self._client is not None else None
        return cid is not None and stat.ephemeralOwner == cid[0]

    async def guarded(self, controller_epoch_zk_version: int | None,
                      add_op: Callable[[TransactionRequest], None], plain: Callable[[], Any]) -> Any:
        """Run one write, guarded by a check of /controller_epoch's zk version when given
        (Kafka's controllerZkVersionCheck): ControllerMovedError when another broker became
        controller since. Returns the write's result."""
        if controller_epoch_zk_version is None:
            return await self.call(plain)
        c = self.client

        def make() -> Any:
            t = c.transaction()
            t.check(zp.CONTROLLER_EPOCH, controller_epoch_zk_version)
            add_op(t)
            return t.commit_async()

        check, result = await self.call(make)
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(
                f"controller epoch zk version is no longer {controller_epoch_zk_version}: "
                f"another broker is controller now")
        if isinstance(result, Exception):
            raise result
        return result
