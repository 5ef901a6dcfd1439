"""The cluster-mode Coordinator: metadata in ZooKeeper, laid out as Kafka's ZK mode lays it out
(paths and JSON in `zk_paths`).

Threads and the event loop
--------------------------
kazoo runs its own threads (a connection thread, a callback thread). Nothing here blocks the
asyncio loop: every ZooKeeper request uses kazoo's `*_async` call, whose completion is handed
to the loop with `call_soon_threadsafe`. Watch callbacks and session-state changes do nothing
in kazoo's threads but put an item on ONE `asyncio.Queue`; ONE consumer task takes the items
in order, re-reads what changed (re-arming the one-shot watch), updates the caches and then
tells subscribers. So the caches (`topics()`, `live_brokers()`, `controller_id`) are plain
reads of state owned by the loop, changed only by that consumer, and subscribers see events
in the order the cache changed (Kafka's ControllerEventManager pattern).

kazoo drops every watch when the connection drops (SUSPENDED) or the session expires (LOST).
On the next CONNECTED the consumer re-reads everything it watches (a resync), and diffs
against the cache so that subscribers still get one event per real change. After a session
expiry it first re-registers this broker's ephemeral znode, as Kafka does.

Writes that must not overwrite newer state are conditional on a znode version (ZooKeeper's
compare-and-set): partition states, the topic assignment, the producer id block, and the
controller epoch. A controller passes `controller_epoch_zk_version` (from its election) to its
writes, which then run in a transaction with a check of /controller_epoch, so a deposed
controller's write fails with ControllerMovedError (invariant 4).
"""
from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Union

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss,
                              NodeExistsError, NoNodeError, NotEmptyError, OperationTimeoutError,
                              RolledBackError, SessionExpiredError)
from kazoo.protocol.states import KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from clients.protocol.errors import (InvalidPartitionsError, InvalidTopicExceptionError,
                                     TopicAlreadyExistsError, UnknownTopicOrPartitionError)

from . import zk_paths as zp
from .store import BrokerInfo, Coordinator, TopicMetadata
from .zk_paths import (BrokerRegistration, ControllerRegistration, EndPoint, PartitionState,
                       ProducerIdBlock, TopicAssignment, TopicPartition)

log = logging.getLogger("strom.zkcoord")

NO_CONTROLLER = -1
_ZERO_UUID = uuid.UUID(int=0)
# Failures after which a request is retried once the client is connected again.
_RETRIABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)


# ------------------------------------------------------------------ errors

class ZkCoordinatorError(Exception):
    """Base of the ZooKeeper coordinator's own errors."""


class ZkNotConnectedError(ZkCoordinatorError):
    """No ZooKeeper connection within the connection timeout."""


class BrokerIdInUseError(ZkCoordinatorError):
    """NODEEXISTS on /brokers/ids/<id>: another live broker (another session) holds this id."""


class StaleZkVersionError(ZkCoordinatorError):
    """BADVERSION on a conditional write: the znode changed since it was read. The caller
    holds stale state (e.g. a deposed leader or controller) and must re-read, not retry."""

    def __init__(self, path: str, expected_version: int, message: str = ""):
        self.path = path
        self.expected_version = expected_version
        super().__init__(message or f"BADVERSION: {path} is no longer at zk version "
                                    f"{expected_version}; someone wrote a newer value")


class ControllerMovedError(ZkCoordinatorError):
    """The /controller_epoch version check failed: another broker became controller since."""


class PartitionStateExistsError(ZkCoordinatorError):
    pass


class NoPartitionStateError(ZkCoordinatorError):
    pass


# ------------------------------------------------------------------ events (to subscribers)

@dataclass(frozen=True)
class BrokersChanged:
    """Children of /brokers/ids changed. `live` is the full set after the change."""
    added: frozenset[int]
    removed: frozenset[int]
    live: frozenset[int]


@dataclass(frozen=True)
class BrokerModified:
    """A live broker rewrote its registration (e.g. new endpoints)."""
    broker_id: int
    registration: BrokerRegistration


@dataclass(frozen=True)
class TopicsChanged:
    added: frozenset[str]
    removed: frozenset[str]


@dataclass(frozen=True)
class TopicModified:
    """/brokers/topics/<t> changed (partitions added, reassignment)."""
    name: str
    metadata: TopicMetadata


@dataclass(frozen=True)
class TopicConfigChanged:
    name: str
    configs: Mapping[str, str]


@dataclass(frozen=True)
class BrokerConfigsChanged:
    """/config/brokers/<default> or this broker's /config/brokers/<id> changed."""
    defaults: Mapping[str, str]
    own: Mapping[str, str]


@dataclass(frozen=True)
class ControllerChanged:
    controller_id: int            # NO_CONTROLLER (-1) when /controller is gone
    previous_id: int


@dataclass(frozen=True)
class TopicDeletionsRequested:
    """Children of /admin/delete_topics (non-empty and different from the last event)."""
    topics: frozenset[str]


@dataclass(frozen=True)
class IsrChangesNotified:
    """Sequence nodes under /isr_change_notification (names, sorted)."""
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class PreferredReplicaElectionRequested:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class SessionStateChanged:
    state: str                    # "CONNECTED", "SUSPENDED" or "LOST" (kazoo's KazooState)


@dataclass(frozen=True)
class SessionReestablished:
    """A new ZooKeeper session replaced an expired one; the broker znode was re-created
    (`registered`) unless `error` says why not. Ephemeral /controller is gone with the old
    session: a controller must stand down and run for election again."""
    session_id: int
    registered: bool
    error: str | None = None


ZkEvent = Union[BrokersChanged, BrokerModified, TopicsChanged, TopicModified, TopicConfigChanged,
                BrokerConfigsChanged, ControllerChanged, TopicDeletionsRequested, IsrChangesNotified,
                PreferredReplicaElectionRequested, SessionStateChanged, SessionReestablished]


# ------------------------------------------------------------------ helpers

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


def _check_topic_name(name: str) -> None:
    # The broker validates names fully (Kafka's Topic.validate); a name that is not a single
    # znode name must never reach a path.
    if not name or "/" in name or name in (".", ".."):
        raise InvalidTopicExceptionError(f"Topic name '{name}' is illegal")


class ZkCoordinator(Coordinator):
    """Coordinator over ZooKeeper (kazoo). Use from one asyncio loop; see the module docstring
    for the threading rule. `broker=None` makes an admin-style client that registers nothing
    (its controller-election broker id must then be passed explicitly)."""

    def __init__(self, connect: str, broker: BrokerInfo | None, *,
                 session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None,
                 endpoints: list[EndPoint] | None = None,
                 jmx_port: int = -1,
                 listener_name: str | None = None):
        self.connect = connect
        self.broker = broker
        self.broker_id = broker.broker_id if broker is not None else -1
        self.session_timeout = session_timeout_ms / 1000.0
        self.connection_timeout = (connection_timeout_ms if connection_timeout_ms is not None
                                   else session_timeout_ms) / 1000.0
        if endpoints is None and broker is not None:
            endpoints = [EndPoint("PLAINTEXT", broker.host, broker.port, "PLAINTEXT")]
        self.endpoints = endpoints or []
        self.jmx_port = jmx_port
        # Which registered endpoint live_brokers() reports (Kafka answers Metadata with the
        # endpoint of the listener the request came in on).
        self.listener_name = listener_name or (self.endpoints[0].listener_name
                                               if self.endpoints else "PLAINTEXT")
        self.cluster_id = ""

        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue = asyncio.Queue()
        self._consumer: asyncio.Task | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._session_id: int | None = None
        self._watches_lost = False
        self._subscribers: list[Callable[[ZkEvent], Any]] = []

        # Caches: changed only by the consumer task.
        self._brokers: dict[int, BrokerRegistration] = {}
        self._topic_names: set[str] = set()          # children of /brokers/topics
        self._topics: dict[str, TopicMetadata] = {}  # those whose assignment was readable
        # Dynamic broker configs: /config/brokers/<default> (key None) and this broker's.
        self._broker_configs: dict[int | None, dict[str, str]] = {None: {}}
        self._controller_id = NO_CONTROLLER
        self._deletions: frozenset[str] = frozenset()
        self._isr_nodes: tuple[str, ...] = ()
        self._preferred: frozenset[TopicPartition] = frozenset()

        # Set by a won election (on the consumer); passed to controller writes by the
        # controller. Cleared when /controller stops being ours.
        self.controller_epoch_zk_version: int | None = None
        self.elected_controller_epoch: int | None = None
        self._elected_as: int | None = None

    @classmethod
    def from_config(cls, config: Any, broker: BrokerInfo) -> "ZkCoordinator":
        """From a BrokerConfig: zookeeper.connect, zookeeper.session.timeout.ms,
        zookeeper.connection.timeout.ms, advertised.listeners and the protocol map."""
        pmap = dict(getattr(config, "security_protocol_map", None) or {})
        endpoints = [EndPoint(name, host, port, pmap.get(name, name))
                     for name, host, port, *_ in config.advertised_listeners]
        return cls(config.zookeeper_connect, broker,
                   session_timeout_ms=config.get("zookeeper.session.timeout.ms"),
                   connection_timeout_ms=config.zookeeper_connection_timeout_ms,
                   endpoints=endpoints)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._closing = False
        self._queue = asyncio.Queue()
        self._connected = asyncio.Event()
        self._watches_lost = False
        self._brokers.clear()
        self._topic_names.clear()
        self._topics.clear()
        self._controller_id = NO_CONTROLLER
        self._deletions, self._isr_nodes, self._preferred = frozenset(), (), frozenset()
        self._clear_election()
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
            raise ZkNotConnectedError(
                f"cannot connect to ZooKeeper at {self.connect} within "
                f"{self.connection_timeout:.0f}s: {e}") from e
        self._connected.set()
        self._session_id = client.client_id[0]
        self._consumer = asyncio.create_task(self._consume(), name="zk-events")
        try:
            await asyncio.gather(*(self._ensure_path(p) for p in zp.PERSISTENT_PATHS))
            self.cluster_id = await self._get_or_create_cluster_id()
            if self.broker is not None:
                await self._register_broker()
            await self._sync(self._resync)
        except BaseException:
            await self.stop()
            raise
        log.info("ZooKeeper coordinator started: %s, session 0x%x, cluster id %s, broker %d",
                 self.connect, self._session_id, self.cluster_id, self.broker_id)

    async def stop(self) -> None:
        """Close the session: this broker's ephemeral znodes (registration, /controller)
        vanish at once."""
        self._closing = True
        if self._consumer is not None:
            self._consumer.cancel()
            try:
                await self._consumer
            except (asyncio.CancelledError, Exception):
                pass
            self._consumer = None
        while not self._queue.empty():        # nobody will run these any more
            item = self._queue.get_nowait()
            if item[0] == "sync" and not item[2].done():
                item[2].set_exception(ConnectionClosedError("ZooKeeper coordinator stopped"))
        client, self._client = self._client, None
        if client is not None:
            def close() -> None:
                client.stop()
                client.close()
            await asyncio.to_thread(close)
        self._connected.clear()

    # ------------------------------------------------------------ Coordinator reads

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    def live_brokers(self) -> list[BrokerInfo]:
        return [self._broker_info(r) for _, r in sorted(self._brokers.items())]

    def broker_registrations(self) -> dict[int, BrokerRegistration]:
        return dict(self._brokers)

    @property
    def controller_id(self) -> int:
        return self._controller_id

    @property
    def is_controller(self) -> bool:
        return (self._elected_as is not None and self._controller_id == self._elected_as
                and self.controller_epoch_zk_version is not None)

    def _clear_election(self) -> None:
        if self._elected_as is not None:
            log.info("broker %d is no longer controller (epoch %s)", self._elected_as,
                     self.elected_controller_epoch)
        self._elected_as = None
        self.controller_epoch_zk_version = None
        self.elected_controller_epoch = None

    @property
    def session_id(self) -> int | None:
        return self._session_id

    def topics_pending_deletion(self) -> frozenset[str]:
        """Cached children of /admin/delete_topics."""
        return self._deletions

    def _broker_info(self, reg: BrokerRegistration) -> BrokerInfo:
        ep = next((e for e in reg.endpoints if e.listener_name == self.listener_name), None)
        ep = ep or reg.plaintext_endpoint or (reg.endpoints[0] if reg.endpoints else None)
        if ep is None:
            return BrokerInfo(reg.broker_id, "", -1, reg.rack)
        return BrokerInfo(reg.broker_id, ep.host, ep.port, reg.rack)

    # ------------------------------------------------------------ events

    def subscribe(self, callback: Callable[[ZkEvent], Any]) -> Callable[[], None]:
        """Call `callback(event)` for every ZkEvent, on the loop, in order, right after the
        caches reflect it. It must not block; hand work to a task or queue. Returns an
        unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    def _emit(self, event: ZkEvent) -> None:
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:
                log.exception("ZooKeeper event subscriber %r failed on %r", cb, event)

    # kazoo threads: only hand over to the loop.

    def _post(self, item: tuple) -> None:
        loop = self._loop
        if loop is None or self._closing:
            return
        try:
            loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:       # loop closed during shutdown
            pass

    def _watcher(self, event: WatchedEvent) -> None:
        # Session events (type NONE, path None) come from kazoo dropping its watches on a
        # disconnect; the CONNECTED state that follows triggers the resync instead.
        if event.type != "NONE" and event.path:
            self._post(("watch", event.path, event.type))

    def _kazoo_state(self, state: str) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._on_state, state)
        except RuntimeError:
            pass

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
            self._watches_lost = True
        if not self._closing:
            self._queue.put_nowait(("state", state))

    # The one consumer.

    async def _consume(self) -> None:
        while True:
            item = await self._queue.get()
            kind = item[0]
            try:
                if kind == "watch":
                    await self._on_watch(item[1], item[2])
                elif kind == "state":
                    await self._on_session_state(item[1])
                elif kind == "sync":
                    _, fn, fut = item
                    try:
                        result = await fn()
                    except asyncio.CancelledError:
                        fut.cancel()
                        raise
                    except Exception as e:
                        if not fut.done():
                            fut.set_exception(e)
                    else:
                        if not fut.done():
                            fut.set_result(result)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("processing ZooKeeper event %r failed", item)

    async def _sync(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run `fn` on the consumer, after every event queued before it: when it returns, the
        caches are at least as new as anything this coordinator wrote before calling."""
        if self._consumer is None or self._consumer.done():
            return await fn()
        fut = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(("sync", fn, fut))
        return await fut

    async def _catch_up(self, fn: Callable[[], Awaitable[Any]]) -> None:
        """After a write: let the caches reflect it (via `_sync`), but give up after the
        connection timeout; the write has landed and the watches will catch up."""
        try:
            await asyncio.wait_for(self._sync(fn), self.connection_timeout)
        except asyncio.TimeoutError:
            log.warning("cache not refreshed within %.0fs after a write (ZooKeeper unreachable?)",
                        self.connection_timeout)

    async def _on_watch(self, path: str, etype: str) -> None:
        parent, name = zp.parent_and_name(path)
        if path == zp.BROKER_IDS:
            await self._refresh_broker_ids()
        elif parent == zp.BROKER_IDS:
            if name.isdigit():
                await self._refresh_broker(int(name))
        elif path == zp.BROKER_TOPICS:
            await self._refresh_topic_names()
        elif parent == zp.BROKER_TOPICS:
            await self._refresh_topic(name)
        elif parent == zp.TOPIC_CONFIGS:
            await self._refresh_topic_config(name)
        elif parent == zp.BROKER_CONFIGS:
            await self._refresh_broker_configs()
        elif path == zp.CONTROLLER:
            await self._refresh_controller()
        elif path == zp.DELETE_TOPICS:
            await self._refresh_deletions()
        elif path == zp.ISR_CHANGE_NOTIFICATION:
            await self._refresh_isr_changes()
        elif path == zp.PREFERRED_REPLICA_ELECTION:
            await self._refresh_preferred()

    async def _on_session_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and self._client is not None:
            cid = self._client.client_id
            sid = cid[0] if cid else None
            if sid is not None and sid != self._session_id:
                old, self._session_id = self._session_id, sid
                log.warning("ZooKeeper session 0x%x expired; new session 0x%x",
                            old or 0, sid)
                registered, error = self.broker is None, None
                if self.broker is not None:
                    try:
                        await self._register_broker()
                        registered = True
                    except Exception as e:
                        error = str(e)
                        log.error("re-registering broker %d failed: %s", self.broker_id, e)
                self._clear_election()
                self._watches_lost = False
                await self._resync()
                self._emit(SessionStateChanged(state))
                self._emit(SessionReestablished(sid, registered, error))
                return
            if self._watches_lost:
                self._watches_lost = False
                await self._resync()
        self._emit(SessionStateChanged(state))

    # ------------------------------------------------------------ kazoo -> asyncio

    def _future(self, async_result: Any) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def resolve(value: Any, exc: BaseException | None) -> None:
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(value)

        def done(result: Any) -> None:     # kazoo's completion thread
            try:
                value, exc = result.get_nowait(), None
            except BaseException as e:     # noqa: BLE001 - handed to the awaiting task
                value, exc = None, e
            try:
                loop.call_soon_threadsafe(resolve, value, exc)
            except RuntimeError:
                pass

        async_result.rawlink(done)
        return fut

    async def _call(self, make: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run one kazoo request (`make` returns its IAsyncResult), retried when the
        connection drops until `timeout` (default: the connection timeout), like Kafka's
        retryRequestUntilConnected. `make` is called again for each attempt."""
        limit = self.connection_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            if self._client is None or self._closing:
                raise ConnectionClosedError("ZooKeeper coordinator is stopped")
            if not self._connected.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ZkNotConnectedError(f"no ZooKeeper connection to {self.connect} "
                                              f"for {limit:.0f}s")
                try:
                    await asyncio.wait_for(self._connected.wait(),
                                           None if math.isinf(remaining) else remaining)
                except asyncio.TimeoutError:
                    continue
            try:
                return await self._future(make())
            except _RETRIABLE:
                if self._closing or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.02)

    async def _read(self, make: Callable[[], Any]) -> Any:
        """A read by the consumer: retried until connected, however long that takes."""
        return await self._call(make, timeout=math.inf)

    @property
    def client(self) -> KazooClient:
        if self._client is None:
            raise ConnectionClosedError("ZooKeeper coordinator is not started")
        return self._client

    async def _get(self, path: str, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        c = self.client
        try:
            return await self._call(lambda: c.get_async(path, self._watcher if watch else None))
        except NoNodeError:
            return None

    async def _exists(self, path: str) -> ZnodeStat | None:
        c = self.client
        return await self._call(lambda: c.exists_async(path))

    async def _children(self, path: str) -> list[str]:
        c = self.client
        try:
            return await self._call(lambda: c.get_children_async(path))
        except NoNodeError:
            return []

    async def _set_or_create(self, path: str, data: bytes) -> ZnodeStat:
        c = self.client
        while True:
            try:
                return await self._call(lambda: c.set_async(path, data))
            except NoNodeError:
                try:
                    _, stat = await self._call(
                        lambda: c.create_async(path, data, makepath=True, include_data=True))
                    return stat
                except NodeExistsError:
                    continue

    async def _ensure_path(self, path: str) -> None:
        c = self.client
        await self._call(lambda: c.ensure_path_async(path))

    async def _delete_if_exists(self, path: str, version: int = -1) -> bool:
        c = self.client
        try:
            await self._call(lambda: c.delete_async(path, version))
            return True
        except NoNodeError:
            return False

    def _is_own_ephemeral(self, stat: ZnodeStat) -> bool:
        cid = self._client.client_id if self._client is not None else None
        return cid is not None and stat.ephemeralOwner == cid[0]

    # ------------------------------------------------------------ cluster id, registration

    async def _get_or_create_cluster_id(self) -> str:
        c = self.client
        while True:
            got = await self._get(zp.CLUSTER_ID)
            if got is not None:
                return zp.decode_cluster_id(got[0])
            new_id = zp.new_cluster_id()
            try:
                await self._call(lambda: c.create_async(
                    zp.CLUSTER_ID, zp.encode_cluster_id(new_id), makepath=True))
                log.info("created cluster id %s", new_id)
                return new_id
            except NodeExistsError:
                continue          # another broker won the race: read its id

    def _registration(self) -> BrokerRegistration:
        assert self.broker is not None
        return BrokerRegistration(self.broker_id, list(self.endpoints), self.broker.rack,
                                  self.jmx_port)

    async def _register_broker(self) -> None:
        """Kafka's checkedEphemeralCreate: NODEEXISTS owned by this very session (a retried
        create after a dropped connection) is success; owned by another session is fatal."""
        c = self.client
        path = zp.broker_path(self.broker_id)
        data = zp.encode_broker(self._registration())
        try:
            await self._call(lambda: c.create_async(path, data, ephemeral=True, makepath=True))
        except NodeExistsError:
            got = await self._get(path)
            if got is not None and self._is_own_ephemeral(got[1]):
                return
            owner = f"0x{got[1].ephemeralOwner:x}" if got is not None else "?"
            raise BrokerIdInUseError(
                f"NODEEXISTS: {path} is registered by another live broker (session {owner}); "
                f"broker.id {self.broker_id} is in use") from None
        log.info("registered broker %d at %s with endpoints %s", self.broker_id, path,
                 [e.connection_string for e in self.endpoints])

    async def generate_broker_id(self, reserved_broker_max_id: int = 1000) -> int:
        """Kafka's broker.id.generation: the new version of /brokers/seqid plus
        reserved.broker.max.id."""
        c = self.client
        stat = await self._call(lambda: c.set_async(zp.BROKER_SEQID, b""))
        return stat.version + reserved_broker_max_id

    # ------------------------------------------------------------ cache refreshes (consumer)

    async def _resync(self) -> None:
        """Re-read (and re-watch) everything; emit events for what differs from the cache."""
        await self._refresh_broker_ids(full=True)
        await self._refresh_topic_names(full=True)
        await self._refresh_broker_configs()
        await self._refresh_controller()
        await self._refresh_deletions()
        await self._refresh_isr_changes()
        await self._refresh_preferred()

    async def _read_broker(self, broker_id: int) -> BrokerRegistration | None:
        c = self.client
        try:
            data, _ = await self._read(lambda: c.get_async(zp.broker_path(broker_id),
                                                           self._watcher))
        except NoNodeError:
            return None
        try:
            return zp.decode_broker(broker_id, data)
        except zp.ZkDataError as e:
            log.error("ignoring unreadable broker registration: %s", e)
            return None

    async def _refresh_broker_ids(self, full: bool = False) -> None:
        c = self.client
        children = await self._read(lambda: c.get_children_async(zp.BROKER_IDS, self._watcher))
        ids = {int(x) for x in children if x.isdigit()}
        to_read = sorted(ids if full else ids - set(self._brokers))
        regs = await asyncio.gather(*(self._read_broker(b) for b in to_read))
        before = set(self._brokers)
        for b in before - ids:
            del self._brokers[b]
        modified = []
        for b, reg in zip(to_read, regs):
            if reg is None:
                self._brokers.pop(b, None)
            else:
                if b in self._brokers and self._brokers[b] != reg:
                    modified.append(reg)
                self._brokers[b] = reg
        after = set(self._brokers)
        if before != after:
            self._emit(BrokersChanged(frozenset(after - before), frozenset(before - after),
                                      frozenset(after)))
        for reg in modified:
            self._emit(BrokerModified(reg.broker_id, reg))

    async def _refresh_broker(self, broker_id: int) -> None:
        if broker_id not in self._brokers:
            return                 # the children watch decides membership
        reg = await self._read_broker(broker_id)
        if reg is not None and broker_id in self._brokers and self._brokers[broker_id] != reg:
            self._brokers[broker_id] = reg
            self._emit(BrokerModified(broker_id, reg))

    async def _read_assignment(self, name: str) -> TopicAssignment | None:
        c = self.client
        try:
            data, _ = await self._read(lambda: c.get_async(zp.topic_path(name), self._watcher))
        except NoNodeError:
            return None
        try:
            return zp.decode_topic(name, data)
        except zp.ZkDataError as e:
            log.error("ignoring unreadable topic assignment: %s", e)
            return None

    async def _refresh_broker_configs(self) -> None:
        """Re-read (and re-watch) the cluster-wide and this broker's dynamic configs."""
        ids: list[int | None] = [None] + ([self.broker_id] if self.broker is not None else [])
        read = await asyncio.gather(*(self._read_entity_config(zp.broker_config_path(b))
                                      for b in ids))
        new = dict(zip(ids, read))
        if new != self._broker_configs:
            self._broker_configs = new
            self._emit(BrokerConfigsChanged(dict(new[None]),
                                            dict(new.get(self.broker_id, {}))))

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        return dict(self._broker_configs.get(broker_id, {}))

    async def fetch_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """/config/brokers/<entity> as stored now (no watch): the base of an incremental
        change, as Kafka's fetchEntityConfig."""
        got = await self._get(zp.broker_config_path(broker_id))
        if got is None:
            return {}
        try:
            return zp.decode_entity_config(got[0])
        except zp.ZkDataError as e:
            log.error("ignoring unreadable broker config: %s", e)
            return {}

    async def set_broker_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        """Kafka's AdminZkClient.changeBrokerConfig: write /config/brokers/<entity>, then the
        change notification (entity_path brokers/<entity>) other tools and brokers follow."""
        path = zp.broker_config_path(broker_id)
        await self._set_or_create(path, zp.encode_entity_config(configs))
        c = self.client
        entity = zp.DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        note = zp.encode_config_change(zp.ConfigChangeNotification(f"{zp.CONFIG_TYPE_BROKER}/{entity}"))
        await self._call(lambda: c.create_async(zp.config_change_create_path(), note,
                                                sequence=True, makepath=True))
        if broker_id is None or broker_id == self.broker_id:
            await self._catch_up(self._refresh_broker_configs)

    async def _read_topic_config(self, name: str) -> dict[str, str]:
        return await self._read_entity_config(zp.topic_config_path(name))

    async def _read_entity_config(self, path: str) -> dict[str, str]:
        c = self.client
        while True:
            try:
                data, _ = await self._read(lambda: c.get_async(path, self._watcher))
            except NoNodeError:
                # Watch for its creation; if it appeared in between, read it.
                if await self._read(lambda: c.exists_async(path, self._watcher)) is None:
                    return {}
                continue
            try:
                return zp.decode_entity_config(data)
            except zp.ZkDataError as e:
                log.error("ignoring unreadable config %s: %s", path, e)
                return {}

    async def _load_topic(self, name: str) -> TopicMetadata | None:
        assignment, configs = await asyncio.gather(self._read_assignment(name),
                                                   self._read_topic_config(name))
        if assignment is None:
            return None
        return TopicMetadata(name, assignment.topic_id or _ZERO_UUID,
                             dict(assignment.partitions), configs)

    def _apply_topic(self, name: str, meta: TopicMetadata | None,
                     added: set[str], removed: set[str]) -> None:
        """Put a freshly read topic into the cache; collect membership changes and emit
        modifications."""
        old = self._topics.get(name)
        if meta is None:
            if old is not None:
                del self._topics[name]
                removed.add(name)
            return
        self._topics[name] = meta
        if old is None:
            added.add(name)
        elif old.topic_id != meta.topic_id:       # deleted and re-created between reads
            self._emit(TopicsChanged(frozenset(), frozenset({name})))
            added.add(name)
        else:
            if old.partitions != meta.partitions:
                self._emit(TopicModified(name, meta))
            if old.configs != meta.configs:
                self._emit(TopicConfigChanged(name, dict(meta.configs)))

    async def _refresh_topic_names(self, full: bool = False) -> None:
        c = self.client
        children = set(await self._read(
            lambda: c.get_children_async(zp.BROKER_TOPICS, self._watcher)))
        gone = self._topic_names - children
        to_read = sorted(children if full else children - self._topic_names)
        self._topic_names = children
        metas = await asyncio.gather(*(self._load_topic(n) for n in to_read))
        added: set[str] = set()
        removed: set[str] = set()
        for name in gone:
            if self._topics.pop(name, None) is not None:
                removed.add(name)
        for name, meta in zip(to_read, metas):
            if name in self._topic_names:
                self._apply_topic(name, meta, added, removed)
        if added or removed:
            self._emit(TopicsChanged(frozenset(added), frozenset(removed)))

    async def _refresh_topic(self, name: str) -> None:
        if name not in self._topic_names:
            return
        assignment = await self._read_assignment(name)
        if assignment is None or name not in self._topic_names:
            return                 # deleted: the children watch removes it
        old = self._topics.get(name)
        configs = old.configs if old is not None else await self._read_topic_config(name)
        meta = TopicMetadata(name, assignment.topic_id or _ZERO_UUID,
                             dict(assignment.partitions), dict(configs))
        added: set[str] = set()
        removed: set[str] = set()
        self._apply_topic(name, meta, added, removed)
        if added or removed:
            self._emit(TopicsChanged(frozenset(added), frozenset(removed)))

    async def _refresh_topic_config(self, name: str) -> None:
        if name not in self._topic_names:
            return
        configs = await self._read_topic_config(name)
        old = self._topics.get(name)
        if old is not None and old.configs != configs:
            self._topics[name] = TopicMetadata(name, old.topic_id, old.partitions, configs)
            self._emit(TopicConfigChanged(name, dict(configs)))

    async def _refresh_controller(self) -> None:
        c = self.client
        while True:
            try:
                data, _ = await self._read(lambda: c.get_async(zp.CONTROLLER, self._watcher))
            except NoNodeError:
                if await self._read(lambda: c.exists_async(zp.CONTROLLER, self._watcher)):
                    continue
                new = NO_CONTROLLER
            else:
                try:
                    new = zp.decode_controller(data).broker_id
                except zp.ZkDataError as e:
                    log.error("unreadable %s: %s", zp.CONTROLLER, e)
                    new = NO_CONTROLLER
            break
        old, self._controller_id = self._controller_id, new
        if self._elected_as is not None and new != self._elected_as:
            self._clear_election()
        if old != new:
            self._emit(ControllerChanged(new, old))

    async def _refresh_deletions(self) -> None:
        c = self.client
        topics = frozenset(await self._read(
            lambda: c.get_children_async(zp.DELETE_TOPICS, self._watcher)))
        changed = topics != self._deletions
        self._deletions = topics
        if changed and topics:
            self._emit(TopicDeletionsRequested(topics))

    async def _refresh_isr_changes(self) -> None:
        c = self.client
        nodes = tuple(sorted(await self._read(
            lambda: c.get_children_async(zp.ISR_CHANGE_NOTIFICATION, self._watcher))))
        changed = nodes != self._isr_nodes
        self._isr_nodes = nodes
        if changed and nodes:
            self._emit(IsrChangesNotified(nodes))

    async def _refresh_preferred(self) -> None:
        c = self.client
        path = zp.PREFERRED_REPLICA_ELECTION
        while True:
            try:
                data, _ = await self._read(lambda: c.get_async(path, self._watcher))
            except NoNodeError:
                if await self._read(lambda: c.exists_async(path, self._watcher)):
                    continue
                partitions: frozenset[TopicPartition] = frozenset()
            else:
                try:
                    partitions = frozenset(zp.decode_preferred_replica_election(data))
                except zp.ZkDataError as e:
                    log.error("unreadable %s: %s", path, e)
                    partitions = frozenset()
            break
        changed = partitions != self._preferred
        self._preferred = partitions
        if changed and partitions:
            self._emit(PreferredReplicaElectionRequested(partitions))

    # ------------------------------------------------------------ topics (admin writes)

    async def create_topic(self, name: str, partitions: dict[int, list[int]],
                           configs: dict[str, str]) -> TopicMetadata:
        """Kafka's order: /config/topics/<t> first, then /brokers/topics/<t> (the node the
        controller watches). Partition states are the controller's to create."""
        _check_topic_name(name)
        # Kafka's validateTopicCreate order: pending deletion first, then existence.
        if await self._exists(zp.delete_topic_path(name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' is marked for deletion.")
        if name in self._topic_names or await self._exists(zp.topic_path(name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        await self._set_or_create(zp.topic_config_path(name), zp.encode_entity_config(configs))
        topic_id = zp.new_kafka_uuid()
        data = zp.encode_topic(TopicAssignment(dict(partitions), topic_id))
        c = self.client
        try:
            await self._call(lambda: c.create_async(zp.topic_path(name), data, makepath=True))
        except NodeExistsError:
            got = await self._get(zp.topic_path(name))
            if got is None or got[0] != data:     # not our own create, retried
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
        await self._catch_up(self._refresh_topic_names)
        return self._topics.get(name) or TopicMetadata(name, topic_id, dict(partitions),
                                                       dict(configs))

    async def delete_topic(self, name: str) -> None:
        """Mark for deletion (/admin/delete_topics/<t>); the controller deletes the topic,
        after which it leaves topics(). Marking twice is not an error."""
        if await self._exists(zp.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        c = self.client
        try:
            await self._call(lambda: c.create_async(zp.delete_topic_path(name), b"",
                                                    makepath=True))
        except NodeExistsError:
            pass
        await self._catch_up(self._refresh_deletions)

    async def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata:
        c = self.client
        path = zp.topic_path(name)
        while True:
            got = await self._get(path)
            if got is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            assignment = zp.decode_topic(name, got[0])
            clash = sorted(set(new) & set(assignment.partitions))
            if clash:
                raise InvalidPartitionsError(f"Topic '{name}' already has partitions {clash}.")
            assignment.partitions.update({p: list(r) for p, r in new.items()})
            try:
                await self._call(lambda: c.set_async(path, zp.encode_topic(assignment),
                                                     got[1].version))
                break
            except BadVersionError:
                continue          # changed concurrently: re-read and re-check
        await self._catch_up(lambda: self._refresh_topic(name))
        return self._topics.get(name) or TopicMetadata(
            name, assignment.topic_id or _ZERO_UUID, dict(assignment.partitions), {})

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        """Replace the topic's overrides, then write Kafka's change notification
        (/config/changes/config_change_<seq>, entity_path topics/<t>)."""
        if name not in self._topic_names and await self._exists(zp.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        await self._set_or_create(zp.topic_config_path(name), zp.encode_entity_config(configs))
        c = self.client
        note = zp.encode_config_change(zp.ConfigChangeNotification(f"{zp.CONFIG_TYPE_TOPIC}/{name}"))
        await self._call(lambda: c.create_async(zp.config_change_create_path(), note,
                                                sequence=True, makepath=True))
        await self._catch_up(lambda: self._refresh_topic_config(name))
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        if meta.configs != configs:        # cache behind (or a newer write): report ours
            meta = TopicMetadata(name, meta.topic_id, meta.partitions, dict(configs))
        return meta

    async def topic_assignment(self, name: str) -> tuple[TopicAssignment, int] | None:
        """/brokers/topics/<t> as stored, with its zk version."""
        got = await self._get(zp.topic_path(name))
        return None if got is None else (zp.decode_topic(name, got[0]), got[1].version)

    async def topics_marked_for_deletion(self) -> set[str]:
        return set(await self._children(zp.DELETE_TOPICS))

    async def complete_topic_deletion(self, name: str, *,
                                      controller_epoch_zk_version: int | None = None) -> None:
        """The controller's last step of a deletion: remove /brokers/topics/<t> (with its
        partition states), /config/topics/<t> and /admin/delete_topics/<t> in one
        transaction, so the topic disappears at once or not at all."""
        c = self.client
        for _ in range(10):
            paths = await self._subtree(zp.topic_path(name))
            for p in (zp.topic_config_path(name), zp.delete_topic_path(name)):
                if await self._exists(p) is not None:
                    paths.append(p)
            if not paths:
                return

            def make(paths: list[str] = paths) -> Any:
                t = c.transaction()
                if controller_epoch_zk_version is not None:
                    t.check(zp.CONTROLLER_EPOCH, controller_epoch_zk_version)
                for p in paths:
                    t.delete(p)
                return t.commit_async()

            results = await self._call(make)
            if controller_epoch_zk_version is not None:
                check, results = results[0], results[1:]
                if isinstance(check, Exception) and not isinstance(check, RolledBackError):
                    raise ControllerMovedError(
                        f"controller epoch zk version is no longer {controller_epoch_zk_version}")
            failure = next((r for r in results if isinstance(r, Exception)
                            and not isinstance(r, RolledBackError)), None)
            if failure is None:
                await self._catch_up(self._refresh_topic_names)
                return
            if not isinstance(failure, (NotEmptyError, NoNodeError)):
                raise failure
            # a node appeared or vanished since the listing: list again
        raise ZkCoordinatorError(f"topic '{name}' kept changing while being deleted")

    async def _subtree(self, root: str) -> list[str]:
        """All paths under and including `root`, children before parents."""
        c = self.client
        try:
            children = await self._call(lambda: c.get_children_async(root))
        except NoNodeError:
            return []
        out: list[str] = []
        for sub in await asyncio.gather(*(self._subtree(f"{root}/{ch}") for ch in children)):
            out.extend(sub)
        out.append(root)
        return out

    # ------------------------------------------------------------ producer ids

    async def allocate_producer_ids(self, count: int) -> int:
        """Kafka's ZkProducerIdManager: a versioned read-modify-write of
        /latest_producer_id_block; concurrent allocators retry, so blocks never overlap."""
        if count <= 0:
            raise ValueError("count must be positive")
        c = self.client
        path = zp.LATEST_PRODUCER_ID_BLOCK
        while True:
            got = await self._get(path)
            if got is None:
                try:
                    await self._call(lambda: c.create_async(path, b"", makepath=True))
                except NodeExistsError:
                    pass
                continue
            data, stat = got
            if data:
                block = zp.decode_producer_id_block(data).next_block(self.broker_id, count)
            else:
                block = ProducerIdBlock(self.broker_id, 0, count - 1)
            if block.block_end >= 2**63 - 1:
                raise ZkCoordinatorError("all producer ids are exhausted")
            try:
                await self._call(lambda: c.set_async(path, zp.encode_producer_id_block(block),
                                                     stat.version))
                return block.block_start
            except BadVersionError:
                continue

    # ------------------------------------------------------------ partition states

    async def get_partition_state(self, topic: str, partition: int
                                  ) -> tuple[PartitionState, int] | None:
        """(state, zk version) or None when the partition has no state yet."""
        path = zp.partition_state_path(topic, partition)
        got = await self._get(path)
        if got is None:
            return None
        return zp.decode_partition_state(got[0], path), got[1].version

    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, tuple[PartitionState, int]]:
        tps = list(partitions)
        got = await asyncio.gather(*(self.get_partition_state(t, p) for t, p in tps))
        return {tp: g for tp, g in zip(tps, got) if g is not None}

    async def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     *, controller_epoch_zk_version: int | None = None) -> int:
        """Create the state znode (and its parents); returns its zk version (0). Raises
        PartitionStateExistsError, or ControllerMovedError when the epoch check fails."""
        c = self.client
        for parent in (zp.topic_partitions_path(topic), zp.topic_partition_path(topic, partition)):
            try:
                await self._create_parent(parent)
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.") from None
        path = zp.partition_state_path(topic, partition)
        data = zp.encode_partition_state(state)
        try:
            await self._conditional(controller_epoch_zk_version,
                                    lambda t: t.create(path, data), lambda: c.create_async(path, data))
        except NodeExistsError:
            got = await self._get(path)
            if got is not None and got[0] == data and got[1].version == 0:
                return 0           # our own create, retried after a dropped connection
            raise PartitionStateExistsError(f"{path} already exists") from None
        return 0

    async def _create_parent(self, path: str) -> None:
        c = self.client
        await self._call(lambda: c.create_async(path, b""))

    async def create_partition_states(self, states: Mapping[TopicPartition, PartitionState], *,
                                      controller_epoch_zk_version: int | None = None
                                      ) -> dict[TopicPartition, int | Exception]:
        tps = list(states)
        results = await asyncio.gather(
            *(self.create_partition_state(t, p, states[(t, p)],
                                          controller_epoch_zk_version=controller_epoch_zk_version)
              for t, p in tps), return_exceptions=True)
        return {tp: r for tp, r in zip(tps, results)}   # type: ignore[misc]

    async def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                                     expected_version: int, *,
                                     controller_epoch_zk_version: int | None = None) -> int:
        """Conditional write of a partition's leader/ISR; returns the new zk version.

        Raises StaleZkVersionError when the znode is no longer at `expected_version` (a newer
        leader or controller wrote it: re-read, never blindly retry), NoPartitionStateError
        when it does not exist, ControllerMovedError when the controller-epoch check fails.
        (After a dropped connection the retried write can report StaleZkVersionError for a
        write that did land; re-reading shows it.)"""
        c = self.client
        path = zp.partition_state_path(topic, partition)
        data = zp.encode_partition_state(state)
        try:
            stat = await self._conditional(
                controller_epoch_zk_version,
                lambda t: t.set_data(path, data, expected_version),
                lambda: c.set_async(path, data, expected_version))
        except BadVersionError:
            raise StaleZkVersionError(
                path, expected_version,
                f"BADVERSION: partition state of {topic}-{partition} is no longer at zk version "
                f"{expected_version} (a newer leader or controller wrote it)") from None
        except NoNodeError:
            raise NoPartitionStateError(f"{path} does not exist") from None
        return stat.version

    async def update_isr_as_leader(self, topic: str, partition: int, state: PartitionState,
                                   expected_version: int) -> tuple[list[int], int] | None:
        """A leader's conditional ISR write (Kafka's Partition.updateIsr in ZooKeeper mode):
        the ISR the znode then holds at `state`'s leader and epoch, with its zk version; None
        when it holds another leader or epoch (this leader's view is stale).

        Refused for its version, the znode is re-read: only the leader writes at its own
        epoch (the controller bumps the epoch), so a znode at our leader and epoch holds an
        earlier write of ours whose answer was lost with a connection (Kafka's
        checkLeaderAndIsrZkData). Its ISR is what the controller would elect from: taken."""
        try:
            version = await self.update_partition_state(topic, partition, state, expected_version)
            return list(state.isr), version
        except NoPartitionStateError:
            return None                     # the topic is being deleted
        except StaleZkVersionError:
            got = await self.get_partition_state(topic, partition)
            if got is None:
                return None
            held, version = got
            if held.leader != state.leader or held.leader_epoch != state.leader_epoch:
                return None
            return list(held.isr), version

    async def update_partition_states(
            self, updates: Mapping[TopicPartition, tuple[PartitionState, int]], *,
            controller_epoch_zk_version: int | None = None) -> dict[TopicPartition, int | Exception]:
        """Many conditional writes at once (like Kafka's updateLeaderAndIsr): per partition
        the new zk version or the exception (StaleZkVersionError means retry after re-read)."""
        tps = list(updates)
        results = await asyncio.gather(
            *(self.update_partition_state(t, p, *updates[(t, p)],
                                          controller_epoch_zk_version=controller_epoch_zk_version)
              for t, p in tps), return_exceptions=True)
        return {tp: r for tp, r in zip(tps, results)}   # type: ignore[misc]

    async def _conditional(self, controller_epoch_zk_version: int | None,
                           add_op: Callable[[Any], None], plain: Callable[[], Any]) -> Any:
        """Run one write, guarded by a check of /controller_epoch's zk version when given
        (Kafka's controllerZkVersionCheck). Returns the write's result."""
        if controller_epoch_zk_version is None:
            return await self._call(plain)
        c = self.client

        def make() -> Any:
            t = c.transaction()
            t.check(zp.CONTROLLER_EPOCH, controller_epoch_zk_version)
            add_op(t)
            return t.commit_async()

        check, result = await self._call(make)
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(
                f"controller epoch zk version is no longer {controller_epoch_zk_version}: "
                f"another broker is controller now")
        if isinstance(result, Exception):
            raise result
        return result

    # ------------------------------------------------------------ controller election

    async def try_elect_controller(self, broker_id: int | None = None) -> int | None:
        """Kafka's registerControllerAndIncrementControllerEpoch, in one transaction: create
        ephemeral /controller and set /controller_epoch to epoch+1 at the version just read.
        Returns the new epoch, or None when another broker is (or just became) controller.
        On success `controller_epoch_zk_version` holds the version to guard writes with."""
        bid = self.broker_id if broker_id is None else broker_id
        if bid < 0:
            raise ValueError("a broker id is needed to run for controller")
        c = self.client
        try:
            await self._call(lambda: c.create_async(
                zp.CONTROLLER_EPOCH, zp.encode_controller_epoch(zp.INITIAL_CONTROLLER_EPOCH - 1)))
        except NodeExistsError:
            pass
        got = await self._get(zp.CONTROLLER_EPOCH)
        if got is None:
            return None
        epoch, epoch_version = zp.decode_controller_epoch(got[0]), got[1].version
        new_epoch = epoch + 1
        reg = zp.encode_controller(ControllerRegistration(bid))

        def make() -> Any:
            t = c.transaction()
            t.create(zp.CONTROLLER, reg, ephemeral=True)
            t.set_data(zp.CONTROLLER_EPOCH, zp.encode_controller_epoch(new_epoch), epoch_version)
            return t.commit_async()

        created, stat = await self._call(make)
        if isinstance(created, Exception) or isinstance(stat, Exception):
            # Lost the race, unless this is our own transaction retried after a dropped
            # connection (then /controller is ours and the epoch is the one we wrote).
            ctl = await self._get(zp.CONTROLLER)
            if ctl is None or not self._is_own_ephemeral(ctl[1]):
                return None
            if zp.decode_controller(ctl[0]).broker_id != bid:
                return None
            now = await self._get(zp.CONTROLLER_EPOCH)
            if now is None:
                return None
            new_epoch, version = zp.decode_controller_epoch(now[0]), now[1].version
        else:
            version = stat.version

        async def won() -> bool:
            # On the consumer, so no refresh that read /controller before our write can
            # interleave and undo this; the refresh clears it if /controller is gone again.
            self._elected_as = bid
            self.elected_controller_epoch = new_epoch
            self.controller_epoch_zk_version = version
            await self._refresh_controller()
            return self._elected_as == bid

        if not await self._sync(won):
            return None
        log.info("broker %d elected controller, epoch %d (zk version %d)", bid, new_epoch, version)
        return new_epoch

    async def resign_controller(self) -> bool:
        """Delete /controller if this session holds it. True if it did."""
        got = await self._get(zp.CONTROLLER)
        self._clear_election()
        if got is None or not self._is_own_ephemeral(got[1]):
            return False
        try:
            deleted = await self._delete_if_exists(zp.CONTROLLER, got[1].version)
        except BadVersionError:
            deleted = False
        await self._catch_up(self._refresh_controller)
        return deleted

    async def controller_epoch(self) -> int:
        """/controller_epoch (0 before any election)."""
        got = await self._get(zp.CONTROLLER_EPOCH)
        return zp.INITIAL_CONTROLLER_EPOCH - 1 if got is None else zp.decode_controller_epoch(got[0])

    async def controller_epoch_and_zk_version(self) -> tuple[int, int] | None:
        got = await self._get(zp.CONTROLLER_EPOCH)
        return None if got is None else (zp.decode_controller_epoch(got[0]), got[1].version)

    async def read_controller(self) -> ControllerRegistration | None:
        got = await self._get(zp.CONTROLLER)
        return None if got is None else zp.decode_controller(got[0])

    # ------------------------------------------------------------ ISR change notifications

    async def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """A leader that changed ISRs tells the controller: creates
        /isr_change_notification/isr_change_<seq>; returns the node name."""
        c = self.client
        data = zp.encode_isr_change(partitions)
        path = await self._call(lambda: c.create_async(zp.isr_change_create_path(), data,
                                                       sequence=True, makepath=True))
        return zp.parent_and_name(path)[1]

    async def isr_change_notifications(self) -> dict[str, set[TopicPartition]]:
        """Pending notifications by node name (the controller reads, acts, then deletes)."""
        names = sorted(await self._children(zp.ISR_CHANGE_NOTIFICATION))
        datas = await asyncio.gather(*(self._get(zp.isr_change_path(n)) for n in names))
        out: dict[str, set[TopicPartition]] = {}
        for name, got in zip(names, datas):
            if got is None:
                continue
            try:
                out[name] = zp.decode_isr_change(got[0])
            except zp.ZkDataError as e:
                log.error("unreadable ISR change notification %s: %s", name, e)
                out[name] = set()
        return out

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        await asyncio.gather(*(self._delete_if_exists(zp.isr_change_path(n)) for n in names))

    # ------------------------------------------------------------ preferred replica election

    async def request_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        c = self.client
        data = zp.encode_preferred_replica_election(partitions)
        await self._call(lambda: c.create_async(zp.PREFERRED_REPLICA_ELECTION, data,
                                                makepath=True))

    async def preferred_replica_election(self) -> set[TopicPartition] | None:
        got = await self._get(zp.PREFERRED_REPLICA_ELECTION)
        return None if got is None else zp.decode_preferred_replica_election(got[0])

    async def clear_preferred_replica_election(self) -> None:
        await self._delete_if_exists(zp.PREFERRED_REPLICA_ELECTION)
