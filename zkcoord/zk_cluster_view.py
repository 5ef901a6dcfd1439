"""The cluster as this broker's ZooKeeper watches see it: cached, and told to subscribers.

Watch callbacks and session-state changes do nothing in kazoo's threads but put an item on
ONE `asyncio.Queue`; ONE consumer task takes the items in order, re-reads what changed
(re-arming the one-shot watch), updates the caches and then tells subscribers. So the caches
(`topics`, `brokers`, `controller_id`) are plain reads of state owned by the loop, changed
only by that consumer, and subscribers see events in the order the cache changed (Kafka's
ControllerEventManager pattern).

kazoo drops every watch when the connection drops (SUSPENDED) or the session expires (LOST).
On the next CONNECTED the consumer re-reads everything it watches (a resync), and diffs
against the cache so that subscribers still get one event per real change. After a session
expiry it first has the broker registered again (`on_new_session`), as Kafka does.

Caches with a job of their own (ACLs, users' SCRAM credentials) are `ViewPart`s the consumer
keeps the same way: their watch events come through the same queue, their resync follows the
view's.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Awaitable, Callable, Protocol

from kazoo.exceptions import ConnectionClosedError, NoNodeError
from kazoo.protocol.states import KazooState, WatchedEvent

from . import zk_paths as zp
from .store import (BrokerConfigsChanged, BrokerInfo, StoreEvent, TopicConfigChanged,
                    TopicMetadata)
from .zk_events import (BrokerModified, BrokersChanged, ControllerChanged, IsrChangesNotified,
                        LogDirEventsNotified, ReassignPartitionsRequested,
                        PreferredReplicaElectionRequested, SessionReestablished,
                        SessionStateChanged, TopicDeletionsRequested, TopicModified,
                        TopicsChanged, ZkEvent)
from .zk_paths import BrokerRegistration, TopicAssignment, TopicPartition
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

NO_CONTROLLER = -1
_ZERO_UUID = uuid.UUID(int=0)


class ViewPart(Protocol):
    """A cache the view's consumer keeps besides its own (ACLs, SCRAM credentials): it is
    reset before a start, read again on every resync, and handed the watch events of
    `watched_paths` (it arms those watches with the view's `watcher`, and tells subscribers
    through `emit`)."""

    watched_paths: frozenset[str]

    def reset(self) -> None: ...

    async def resync(self) -> None: ...

    async def on_watch(self, path: str) -> None: ...


class ClusterView:
    """`broker_id` is the broker whose own dynamic configs are watched (-1: none, an
    admin-style client); `listener_name` picks the endpoint `live_brokers()` reports."""

    def __init__(self, session: ZkSession, broker_id: int, listener_name: str):
        self.session = session
        self.broker_id = broker_id
        self.listener_name = listener_name
        self._queue: asyncio.Queue = asyncio.Queue()
        self._consumer: asyncio.Task | None = None
        self._session_id: int | None = None
        self._watches_lost = False
        self._subscribers: list[Callable[[Any], Any]] = []
        self._parts: list[ViewPart] = []
        # Set by the store that composes the view: what a read of /controller means for a
        # won election, and re-registering this broker in a new session -> (done, error).
        self.on_controller_read: Callable[[int], None] = lambda controller_id: None
        self.on_new_session: Callable[[], Awaitable[tuple[bool, str | None]]] = _nothing_to_register

        # Caches: changed only by the consumer task.
        self.brokers: dict[int, BrokerRegistration] = {}
        self._vanished_brokers: set[int] = set()
        self.topic_names: set[str] = set()            # children of /brokers/topics
        self.topics: dict[str, TopicMetadata] = {}    # those whose assignment was readable
        # Dynamic broker configs: /config/brokers/<default> (key None) and this broker's.
        self.broker_configs: dict[int | None, dict[str, str]] = {None: {}}
        self.controller_id = NO_CONTROLLER
        self.deletions: frozenset[str] = frozenset()
        self.isr_nodes: tuple[str, ...] = ()
        self.log_dir_event_nodes: tuple[str, ...] = ()
        self.preferred: frozenset[TopicPartition] = frozenset()

    @property
    def session_id(self) -> int | None:
        """The ZooKeeper session the caches were last read in (a new one only once the
        consumer has registered the broker again and resynced after an expiry)."""
        return self._session_id

    @property
    def _watches_own_configs(self) -> bool:
        return self.broker_id >= 0

    # ------------------------------------------------------------ lifecycle

    def add_part(self, part: ViewPart) -> None:
        """Have the consumer keep `part` too (before start)."""
        self._parts.append(part)

    def reset(self) -> None:
        """Empty caches and queue, before a (re)start."""
        for part in self._parts:
            part.reset()
        self._queue = asyncio.Queue()
        self._watches_lost = False
        self.brokers.clear()
        self.topic_names.clear()
        self.topics.clear()
        self.controller_id = NO_CONTROLLER
        self.deletions, self.isr_nodes, self.preferred = frozenset(), (), frozenset()
        self.log_dir_event_nodes = ()

    def start(self) -> None:
        """Start the consumer (the session is open)."""
        self._session_id = self.session.session_id
        self._consumer = asyncio.create_task(self._consume(), name="zk-events")

    async def stop(self) -> None:
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
                item[2].set_exception(ConnectionClosedError("ZooKeeper metadata store stopped"))

    # ------------------------------------------------------------ reads

    def live_brokers(self) -> list[BrokerInfo]:
        return [self._broker_info(r) for _, r in sorted(self.brokers.items())]

    def _broker_info(self, reg: BrokerRegistration) -> BrokerInfo:
        ep = next((e for e in reg.endpoints if e.listener_name == self.listener_name), None)
        ep = ep or reg.plaintext_endpoint or (reg.endpoints[0] if reg.endpoints else None)
        if ep is None:
            return BrokerInfo(reg.broker_id, "", -1, reg.rack)
        return BrokerInfo(reg.broker_id, ep.host, ep.port, reg.rack)

    # ------------------------------------------------------------ subscribers

    def subscribe(self, callback: Callable[[Any], Any]) -> Callable[[], None]:
        """Call `callback(event)` for every ZkEvent and StoreEvent, on the loop, in order,
        right after the caches reflect it. It must not block; hand work to a task or queue.
        Returns an unsubscribe function."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    def emit(self, event: ZkEvent | StoreEvent) -> None:
        """Tell every subscriber; called on the consumer task only (by the view and its parts)."""
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:
                log.exception("ZooKeeper event subscriber %r failed on %r", cb, event)

    # ------------------------------------------------------------ kazoo threads: only hand over

    def _post(self, item: tuple) -> None:
        loop = self.session.loop
        if loop is None or self.session.closing:
            return
        try:
            loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:       # loop closed during shutdown
            pass

    def watcher(self, event: WatchedEvent) -> None:
        # Session events (type NONE, path None) come from kazoo dropping its watches on a
        # disconnect; the CONNECTED state that follows triggers the resync instead.
        if event.type != "NONE" and event.path:
            self._post(("watch", event.path, event.type))

    def on_session_state(self, state: str) -> None:
        """kazoo's session state, on the loop (ZkSession calls it)."""
        if state != KazooState.CONNECTED:
            self._watches_lost = True
        if not self.session.closing:
            self._queue.put_nowait(("state", state))

    # ------------------------------------------------------------ the one consumer

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

    async def sync(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run `fn` on the consumer, after every event queued before it: when it returns, the
        caches are at least as new as anything this store wrote before calling."""
        if self._consumer is None or self._consumer.done():
            return await fn()
        fut = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(("sync", fn, fut))
        return await fut

    async def catch_up(self, fn: Callable[[], Awaitable[Any]]) -> None:
        """After a write: let the caches reflect it (via `sync`), but give up after the
        connection timeout; the write has landed and the watches will catch up."""
        try:
            await asyncio.wait_for(self.sync(fn), self.session.connection_timeout)
        except asyncio.TimeoutError:
            log.warning("cache not refreshed within %.0fs after a write (ZooKeeper unreachable?)",
                        self.session.connection_timeout)

    async def _on_watch(self, path: str, etype: str) -> None:
        for part in self._parts:
            if path in part.watched_paths:
                await part.on_watch(path)
                return
        parent, name = zp.parent_and_name(path)
        if path == zp.BROKER_IDS:
            await self._refresh_broker_ids()
        elif parent == zp.BROKER_IDS:
            if name.isdigit():
                await self._refresh_broker(int(name))
        elif path == zp.BROKER_TOPICS:
            await self.refresh_topic_names()
        elif parent == zp.BROKER_TOPICS:
            await self.refresh_topic(name)
        elif parent == zp.TOPIC_CONFIGS:
            await self.refresh_topic_config(name)
        elif parent == zp.BROKER_CONFIGS:
            await self.refresh_broker_configs()
        elif path == zp.CONTROLLER:
            await self.refresh_controller()
        elif path == zp.DELETE_TOPICS:
            await self.refresh_deletions()
        elif path == zp.ISR_CHANGE_NOTIFICATION:
            await self._refresh_isr_changes()
        elif path == zp.LOG_DIR_EVENT_NOTIFICATION:
            await self._refresh_log_dir_events()
        elif path == zp.PREFERRED_REPLICA_ELECTION:
            await self._refresh_preferred()
        elif path == zp.REASSIGN_PARTITIONS:
            await self._watch_reassign_partitions()

    async def _on_session_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and self.session.is_open:
            sid = self.session.session_id
            if sid is not None and sid != self._session_id:
                old, self._session_id = self._session_id, sid
                log.warning("ZooKeeper session 0x%x expired; new session 0x%x",
                            old or 0, sid)
                registered, error = await self.on_new_session()
                self._watches_lost = False
                await self.resync()
                self.emit(SessionStateChanged(state))
                self.emit(SessionReestablished(sid, registered, error))
                return
            if self._watches_lost:
                self._watches_lost = False
                await self.resync()
        self.emit(SessionStateChanged(state))

    # ------------------------------------------------------------ cache refreshes (consumer)

    async def resync(self) -> None:
        """Re-read (and re-watch) everything; emit events for what differs from the cache."""
        await self._refresh_broker_ids(full=True)
        await self.refresh_topic_names(full=True)
        await self.refresh_broker_configs()
        await self.refresh_controller()
        await self.refresh_deletions()
        await self._refresh_isr_changes()
        await self._refresh_log_dir_events()
        await self._refresh_preferred()
        await self._watch_reassign_partitions()
        for part in self._parts:
            await part.resync()

    async def _read_broker(self, broker_id: int) -> BrokerRegistration | None:
        c = self.session.client
        try:
            data, _ = await self.session.read(lambda: c.get_async(zp.broker_path(broker_id),
                                                                  self.watcher))
        except NoNodeError:
            return None
        try:
            return zp.decode_broker(broker_id, data)
        except zp.ZkDataError as e:
            log.error("ignoring unreadable broker registration: %s", e)
            return None

    async def _refresh_broker_ids(self, full: bool = False) -> None:
        c = self.session.client
        children = await self.session.read(lambda: c.get_children_async(zp.BROKER_IDS, self.watcher))
        ids = {int(x) for x in children if x.isdigit()}
        # A registration whose node went away (its data watch said so) and is listed again
        # was re-created by a new session in between: read it, or the new process would be
        # taken for the old one.
        to_read = sorted(ids if full else (ids - set(self.brokers)) | (self._vanished_brokers & ids))
        self._vanished_brokers.clear()
        regs = await asyncio.gather(*(self._read_broker(b) for b in to_read))
        before = set(self.brokers)
        for b in before - ids:
            del self.brokers[b]
        modified = []
        for b, reg in zip(to_read, regs):
            if reg is None:
                self.brokers.pop(b, None)
            else:
                if b in self.brokers and self.brokers[b] != reg:
                    modified.append(reg)
                self.brokers[b] = reg
        after = set(self.brokers)
        if before != after:
            self.emit(BrokersChanged(frozenset(after - before), frozenset(before - after),
                                     frozenset(after)))
        for reg in modified:
            self.emit(BrokerModified(reg.broker_id, reg))

    async def _refresh_broker(self, broker_id: int) -> None:
        if broker_id not in self.brokers:
            return                 # the children watch decides membership
        reg = await self._read_broker(broker_id)
        if reg is None:
            self._vanished_brokers.add(broker_id)     # the children watch decides; see above
        if reg is not None and broker_id in self.brokers and self.brokers[broker_id] != reg:
            self.brokers[broker_id] = reg
            self.emit(BrokerModified(broker_id, reg))

    async def _read_assignment(self, name: str) -> TopicAssignment | None:
        c = self.session.client
        try:
            data, _ = await self.session.read(lambda: c.get_async(zp.topic_path(name), self.watcher))
        except NoNodeError:
            return None
        try:
            return zp.decode_topic(name, data)
        except zp.ZkDataError as e:
            log.error("ignoring unreadable topic assignment: %s", e)
            return None

    async def refresh_broker_configs(self) -> None:
        """Re-read (and re-watch) the cluster-wide and this broker's dynamic configs."""
        ids: list[int | None] = [None] + ([self.broker_id] if self._watches_own_configs else [])
        read = await asyncio.gather(*(self._read_entity_config(zp.broker_config_path(b))
                                      for b in ids))
        new = dict(zip(ids, read))
        if new != self.broker_configs:
            self.broker_configs = new
            self.emit(BrokerConfigsChanged(dict(new[None]),
                                           dict(new.get(self.broker_id, {}))))

    async def _read_topic_config(self, name: str) -> dict[str, str]:
        return await self._read_entity_config(zp.topic_config_path(name))

    async def _read_entity_config(self, path: str) -> dict[str, str]:
        c = self.session.client
        while True:
            try:
                data, _ = await self.session.read(lambda: c.get_async(path, self.watcher))
            except NoNodeError:
                # Watch for its creation; if it appeared in between, read it.
                if await self.session.read(lambda: c.exists_async(path, self.watcher)) is None:
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
                             dict(assignment.partitions), configs,
                             dict(assignment.adding_replicas), dict(assignment.removing_replicas))

    def _apply_topic(self, name: str, meta: TopicMetadata | None,
                     added: set[str], removed: set[str]) -> None:
        """Put a freshly read topic into the cache; collect membership changes and emit
        modifications."""
        old = self.topics.get(name)
        if meta is None:
            if old is not None:
                del self.topics[name]
                removed.add(name)
            return
        self.topics[name] = meta
        if old is None:
            added.add(name)
        elif old.topic_id != meta.topic_id:       # deleted and re-created between reads
            self.emit(TopicsChanged(frozenset(), frozenset({name})))
            added.add(name)
        else:
            if old.partitions != meta.partitions:
                self.emit(TopicModified(name, meta))
            if old.configs != meta.configs:
                self.emit(TopicConfigChanged(name, dict(meta.configs)))

    async def refresh_topic_names(self, full: bool = False) -> None:
        c = self.session.client
        children = set(await self.session.read(
            lambda: c.get_children_async(zp.BROKER_TOPICS, self.watcher)))
        gone = self.topic_names - children
        to_read = sorted(children if full else children - self.topic_names)
        self.topic_names = children
        metas = await asyncio.gather(*(self._load_topic(n) for n in to_read))
        added: set[str] = set()
        removed: set[str] = set()
        for name in gone:
            if self.topics.pop(name, None) is not None:
                removed.add(name)
        for name, meta in zip(to_read, metas):
            if name in self.topic_names:
                self._apply_topic(name, meta, added, removed)
        if added or removed:
            self.emit(TopicsChanged(frozenset(added), frozenset(removed)))

    async def refresh_topic(self, name: str) -> None:
        if name not in self.topic_names:
            return
        assignment = await self._read_assignment(name)
        if assignment is None or name not in self.topic_names:
            return                 # deleted: the children watch removes it
        old = self.topics.get(name)
        configs = old.configs if old is not None else await self._read_topic_config(name)
        meta = TopicMetadata(name, assignment.topic_id or _ZERO_UUID,
                             dict(assignment.partitions), dict(configs),
                             dict(assignment.adding_replicas), dict(assignment.removing_replicas))
        added: set[str] = set()
        removed: set[str] = set()
        self._apply_topic(name, meta, added, removed)
        if added or removed:
            self.emit(TopicsChanged(frozenset(added), frozenset(removed)))

    async def refresh_topic_config(self, name: str) -> None:
        if name not in self.topic_names:
            return
        configs = await self._read_topic_config(name)
        old = self.topics.get(name)
        if old is not None and old.configs != configs:
            self.topics[name] = TopicMetadata(name, old.topic_id, old.partitions, configs,
                                              old.adding_replicas, old.removing_replicas)
            self.emit(TopicConfigChanged(name, dict(configs)))

    async def refresh_controller(self) -> None:
        c = self.session.client
        while True:
            try:
                data, _ = await self.session.read(lambda: c.get_async(zp.CONTROLLER, self.watcher))
            except NoNodeError:
                if await self.session.read(lambda: c.exists_async(zp.CONTROLLER, self.watcher)):
                    continue
                new = NO_CONTROLLER
            else:
                try:
                    new = zp.decode_controller(data).broker_id
                except zp.ZkDataError as e:
                    log.error("unreadable %s: %s", zp.CONTROLLER, e)
                    new = NO_CONTROLLER
            break
        old, self.controller_id = self.controller_id, new
        self.on_controller_read(new)
        if old != new:
            self.emit(ControllerChanged(new, old))

    async def refresh_deletions(self) -> None:
        c = self.session.client
        topics = frozenset(await self.session.read(
            lambda: c.get_children_async(zp.DELETE_TOPICS, self.watcher)))
        changed = topics != self.deletions
        self.deletions = topics
        if changed and topics:
            self.emit(TopicDeletionsRequested(topics))

    async def _watched_children(self, path: str) -> tuple[str, ...]:
        c = self.session.client
        return tuple(sorted(await self.session.read(lambda: c.get_children_async(path, self.watcher))))

    async def _refresh_isr_changes(self) -> None:
        nodes = await self._watched_children(zp.ISR_CHANGE_NOTIFICATION)
        changed, self.isr_nodes = nodes != self.isr_nodes, nodes
        if changed and nodes:
            self.emit(IsrChangesNotified(nodes))

    async def _refresh_log_dir_events(self) -> None:
        nodes = await self._watched_children(zp.LOG_DIR_EVENT_NOTIFICATION)
        changed, self.log_dir_event_nodes = nodes != self.log_dir_event_nodes, nodes
        if changed and nodes:
            self.emit(LogDirEventsNotified(nodes))

    async def _refresh_preferred(self) -> None:
        c = self.session.client
        path = zp.PREFERRED_REPLICA_ELECTION
        while True:
            try:
                data, _ = await self.session.read(lambda: c.get_async(path, self.watcher))
            except NoNodeError:
                if await self.session.read(lambda: c.exists_async(path, self.watcher)):
                    continue
                partitions: frozenset[TopicPartition] = frozenset()
            else:
                try:
                    partitions = frozenset(zp.decode_preferred_replica_election(data))
                except zp.ZkDataError as e:
                    log.error("unreadable %s: %s", path, e)
                    partitions = frozenset()
            break
        changed = partitions != self.preferred
        self.preferred = partitions
        if changed and partitions:
            self.emit(PreferredReplicaElectionRequested(partitions))


    async def _watch_reassign_partitions(self) -> None:
        """Watch /admin/reassign_partitions; tell the controller when it exists (it reads it)."""
        c = self.session.client
        if await self.session.read(lambda: c.exists_async(zp.REASSIGN_PARTITIONS, self.watcher)):
            self.emit(ReassignPartitionsRequested())


async def _nothing_to_register() -> tuple[bool, str | None]:
    return True, None
