"""AsyncConsumer: strom's asyncio Kafka consumer.

    consumer = AsyncConsumer("events", bootstrap_servers="localhost:9092", group_id="g")
    async with consumer:
        while True:
            for record in await consumer.poll(1.0):
                ...

Two ways to get partitions:
  - `subscribe(topics | pattern, listener)`: group management (clients.aio.group). Every
    rebalance happens inside poll() (and unsubscribe()/close()), which is also where the
    listener runs: `on_partitions_revoked(set)` (eager protocols: everything, before
    rejoining; cooperative-sticky: only partitions that move, after which the member
    rejoins), `on_partitions_assigned(set)` (cooperative: only the added ones; called
    after every rebalance, possibly with an empty set, as in Kafka's Java client) and
    `on_partitions_lost(set)` when the membership was lost (falls back to revoked). The
    listener's methods may be plain functions or coroutines. An exception a callback
    raises does not stop the rebalance: poll() (or unsubscribe()/close()) raises it once
    the rebalance step has finished, as Kafka's Java consumer does. A pattern is matched
    against all of the cluster's topics, again on every metadata refresh.
  - `assign(partitions)`: no group management; commits still go to `group.id` if set.

Positions start from the committed offset (OffsetFetch) or else auto.offset.reset; the
fetcher (clients.aio.fetcher) looks them up and prefetches in the background, and poll()
waits for neither longer than its timeout. With enable.auto.commit,
positions are committed every auto.commit.interval.ms from poll(), before partitions are
revoked and on close. commit_async callbacks `callback(err, offsets)` run inside the next
poll(), commit() or close() (as in Kafka's Java client).

Every method is a coroutine; the consumer starts (connects) on first use or `start()`.
One event loop, one task at a time: not safe for concurrent use (as Kafka's consumer).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import re
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from clients.config import ClientConfig, resolve
from clients.protocol.errors import Code, KafkaError, for_code
from clients.types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

from .assignors import assignor_for
from .client import KafkaClient
from .fetcher import EARLIEST, LATEST, Fetcher
from .group import GroupMember
from .metadata import ClusterMetadata

__all__ = ["AsyncConsumer", "ConsumerGroupMetadata"]

log = logging.getLogger("strom.client.consumer")

# How long poll_buffered() may hand out records without a poll() on the loop: that poll()'s
# checks of the cluster's metadata (a pattern's new topics, changed partition counts) are
# made at most this much later.
_BUFFERED_WINDOW = 0.1

CommitCallback = Callable[[Exception | None, Mapping[TopicPartition, OffsetAndMetadata]], Any]
Committed = dict[TopicPartition, OffsetAndMetadata | None]


class ConsumerGroupMetadata(NamedTuple):
    """The consumer's group membership, for a transactional producer's
    send_offsets_to_transaction() (Kafka's ConsumerGroupMetadata)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class AsyncConsumer:
    """Kafka consumer on asyncio; see the module docstring."""

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self.config: ClientConfig = resolve("consumer", config, **kwargs)
        for name in self.config["partition.assignment.strategy"]:
            assignor_for(name)                  # an unknown name fails now, not at join
        self._client = KafkaClient(self.config)
        self._fetcher: Fetcher | None = None
        self._group: GroupMember | None = None
        self._initial_topics = list(topics)
        self._subscription: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._listener: Any = None
        self._missing_asked_at = 0.0
        # The first exception a listener callback raised, for poll() / unsubscribe() /
        # close() to raise once the rebalance step it interrupted has finished.
        self._listener_error: BaseException | None = None
        self._subscribed = False                # group management (subscribe) is on
        self._assignment: set[TopicPartition] = set()
        self._auto_commit: bool = self.config["enable.auto.commit"] and bool(self.config["group.id"])
        self._auto_commit_interval = self.config.ms("auto.commit.interval.ms")
        self._next_auto_commit = 0.0
        self._api_timeout = self.config.ms("default.api.timeout.ms")
        self._max_poll_records: int = self.config["max.poll.records"]
        self._commit_tasks: set[asyncio.Task[Any]] = set()
        self._join_task: asyncio.Task[Any] | None = None   # a JoinGroup+SyncGroup in flight
        # poll()'s OffsetFetch still in flight, with the partitions it asks about.
        self._committed_lookup: (tuple[frozenset[TopicPartition], asyncio.Task[Committed]]
                                 | None) = None
        self._commit_callbacks: list[tuple[CommitCallback, Exception | None, dict]] = []
        self._start_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._closed = False
        # poll_buffered() needs a poll() on the loop after this time, or once the fetcher
        # wants positions looked up that poll() has not started (lookups_wanted moved on).
        self._buffered_until = 0.0
        self._lookups_started = -1

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect to the cluster (done on first use anyway)."""
        if self._started:
            return
        if self._closed:
            raise RuntimeError("the consumer is closed")
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            await self._client.start()
            self._fetcher = Fetcher(self._client, self.config)
            self._fetcher.start()
            if self.config["group.id"]:
                self._group = GroupMember(self._client, self.config, [
                    assignor_for(n) for n in self.config["partition.assignment.strategy"]])
            self._next_auto_commit = asyncio.get_running_loop().time() + self._auto_commit_interval
            self._loop = asyncio.get_running_loop()
            self._started = True
        if self._initial_topics:
            await self.subscribe(self._initial_topics)

    async def __aenter__(self) -> "AsyncConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def _f(self) -> Fetcher:
        assert self._fetcher is not None
        return self._fetcher

    def _need_group(self, what: str) -> GroupMember:
        if self._group is None:
            raise for_code(Code.INVALID_GROUP_ID)(f"{what} needs group.id")
        return self._group

    async def close(self, autocommit: bool = True) -> None:
        """Commit (with enable.auto.commit and `autocommit`), call the listener's revoked
        callback, leave the group and close connections."""
        if self._closed:
            return
        if self._started:
            try:
                self._drop_committed_lookup()
                await self._abandon_join()
                if self._subscribed:
                    await self._revoke_all(commit=autocommit, lost=False)
                elif autocommit and self._auto_commit and self._assignment:
                    await self._commit_positions_quietly(self._assignment)
                if self._commit_tasks:
                    await asyncio.gather(*self._commit_tasks, return_exceptions=True)
                await self._run_commit_callbacks()
            finally:
                if self._group is not None:
                    await self._group.close(leave=self._subscribed)
                await self._f.close()
                await self._client.close()
        self._closed = True
        self._raise_listener_error()       # closed first, as Java's close()

    # ------------------------------------------------------------------ subscription

    async def subscribe(self, topics: Iterable[str] | None = None, pattern: str | re.Pattern | None = None,
                        listener: Any = None) -> None:
        """Join `group.id` for `topics` or the topics matching `pattern` (full match)."""
        await self.start()
        self._need_group("subscribe()")
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() needs topics or a pattern (not both)")
        if self._assignment and not self._subscribed:
            raise ValueError("subscribe() after assign(): call unsubscribe() first")
        self._listener = listener
        self._subscribed = True
        if pattern is not None:
            self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._client.metadata.all_topics = True
            try:                                # match against the cluster as it is now
                await self._client.metadata.refresh()
            except Exception as e:              # the background refresh retries
                log.info("metadata refresh for the pattern failed: %s", e)
            self._subscription = set(self._client.cluster.matching_topics(
                self._pattern, self.config["exclude.internal.topics"]))
        else:
            if isinstance(topics, str):
                topics = [topics]
            self._pattern = None
            self._client.metadata.all_topics = False
            self._subscription = set(topics or ())
            self._client.metadata.add_topics(self._subscription)
        assert self._group is not None
        self._group.request_rejoin("subscription changed")

    async def subscription(self) -> set[str]:
        return set(self._subscription)

    async def unsubscribe(self) -> None:
        """Give up partitions (listener revoked, commit with auto-commit) and the group."""
        await self.start()
        if self._subscribed:
            await self._abandon_join()
            await self._revoke_all(commit=True, lost=False)
            assert self._group is not None
            await self._group.leave("the consumer unsubscribed")
        self._subscribed = False
        self._subscription = set()
        self._pattern = None
        self._client.metadata.all_topics = False
        self._set_assignment(set())
        self._raise_listener_error()

    async def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, without group management."""
        await self.start()
        if self._subscribed:
            raise ValueError("assign() while subscribed: call unsubscribe() first")
        tps = {TopicPartition(*tp) for tp in partitions}
        self._client.metadata.add_topics({tp.topic for tp in tps})
        self._set_assignment(tps)

    async def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def _set_assignment(self, tps: set[TopicPartition]) -> None:
        self._assignment = set(tps)
        self._drop_committed_lookup()       # its answer may predate this assignment
        self._f.assign(tps)

    # ------------------------------------------------------------------ rebalancing

    async def _call_listener(self, name: str, tps: set[TopicPartition]) -> None:
        fn = getattr(self._listener, name, None)
        if fn is None and name == "on_partitions_lost":
            fn = getattr(self._listener, "on_partitions_revoked", None)
        if fn is None:
            return
        try:
            result = fn(set(tps))
            if inspect.isawaitable(result):
                await result
        except Exception as e:
            # As Kafka's Java consumer (KAFKA-4600): the rebalance completes (the assignment
            # changes as the group decided), then the caller of poll() gets the exception.
            log.warning("rebalance listener %s failed (raised from poll()): %r", name, e)
            if self._listener_error is None:
                self._listener_error = e

    def _raise_listener_error(self) -> None:
        e, self._listener_error = self._listener_error, None
        if e is not None:
            raise e

    async def _revoke(self, tps: set[TopicPartition], commit: bool, lost: bool) -> None:
        if not tps:
            return
        if lost:
            await self._call_listener("on_partitions_lost", tps)
        else:
            if commit and self._auto_commit:
                await self._commit_positions_quietly(tps)
            await self._call_listener("on_partitions_revoked", tps)
        self._set_assignment(self._assignment - tps)

    async def _revoke_all(self, commit: bool, lost: bool) -> None:
        await self._revoke(set(self._assignment), commit, lost)

    async def _abandon_join(self) -> None:
        task, self._join_task = self._join_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _refresh_pattern(self) -> None:
        if self._pattern is None:
            return
        matching = set(self._client.cluster.matching_topics(
            self._pattern, self.config["exclude.internal.topics"]))
        if matching != self._subscription:
            log.info("pattern %s now matches %s", self._pattern.pattern, sorted(matching))
            self._subscription = matching
            assert self._group is not None
            self._group.request_rejoin("topics matching the pattern changed")

    def _ask_for_missing_topics(self) -> None:
        """A subscribed topic the cluster does not know yet: ask again about once a second
        (Kafka's consumer keeps asking too), so a topic created later is read within
        seconds rather than after metadata.max.age.ms."""
        cluster = self._client.cluster
        if not any(not cluster.partitions_for(t) for t in self._subscription):
            return
        now = asyncio.get_running_loop().time()
        if now - self._missing_asked_at >= 1.0:
            self._missing_asked_at = now
            self._client.metadata.request_update()

    async def _ensure_group(self, timeout: float) -> bool:
        """Run the rebalances the group asks for (inside poll). A join still waiting for
        the other members after `timeout` stays in flight for the next poll (False), as
        Kafka's poll(timeout) does, so one thread can drive several consumers."""
        g = self._group
        assert g is not None
        self._refresh_pattern()
        self._ask_for_missing_topics()
        if g.metadata_changed():
            g.request_rejoin("partition counts of subscribed topics changed")
        while (g.need_rejoin or self._join_task is not None) and self._subscribed:
            if self._join_task is None:
                if g.lost:
                    await self._revoke_all(commit=False, lost=True)
                    g.lost = False
                elif not g.cooperative:
                    await self._revoke_all(commit=True, lost=False)
                else:
                    # Cooperative: only partitions of topics no longer subscribed go now;
                    # the others are still consumed while the group rebalances.
                    await self._revoke({tp for tp in self._assignment
                                        if tp.topic not in self._subscription}, True, False)
                owned = sorted(self._assignment) if g.cooperative else []
                self._join_task = asyncio.get_running_loop().create_task(
                    g.join(sorted(self._subscription), owned), name="strom-group-join")
            done, _ = await asyncio.wait({self._join_task}, timeout=max(0.0, timeout))
            if not done:
                return False
            task, self._join_task = self._join_task, None
            new = set(task.result().partitions)
            self._client.metadata.add_topics({tp.topic for tp in new})
            if g.cooperative:
                revoked = self._assignment - new
                added = new - self._assignment
                if revoked:
                    await self._revoke(revoked, True, False)
                    g.request_rejoin("revoked partitions that move to other members")
                self._set_assignment(new)
                await self._call_listener("on_partitions_assigned", added)
            else:
                self._set_assignment(new)
                await self._call_listener("on_partitions_assigned", new)
        return True

    def _start_from_committed(self, tps: Iterable[TopicPartition], committed: Committed) -> None:
        """Positions for `tps` from their committed offsets, else auto.offset.reset (those
        sought or unassigned meanwhile are left alone)."""
        f = self._f
        strategy = self.config["auto.offset.reset"]
        for tp in tps:
            st = f.states.get(tp)
            if st is None or st.position is not None or st.reset is not None:
                continue
            c = committed.get(tp)
            if c is not None:
                f.seek(tp, c.offset, c.leader_epoch)
            elif strategy in ("earliest", "latest"):
                f.request_reset(tp, strategy)
            else:
                raise for_code(Code.OFFSET_OUT_OF_RANGE)(
                    f"{tp}: no committed offset and auto.offset.reset=none")

    async def _update_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Positions for those of `tps` without one (committed offset, else
        auto.offset.reset), waiting up to default.api.timeout.ms (position())."""
        f = self._f
        tps = list(tps)
        missing = [tp for tp in tps if f.states[tp].position is None and f.states[tp].reset is None]
        if missing:
            self._start_from_committed(missing, await self._group.committed(
                missing, self._api_timeout) if self._group is not None else {})
        await f.reset_positions(tps, self._api_timeout)

    async def _poll_positions(self, timeout: float) -> None:
        """poll()'s part of positions, as Kafka's poll(): the committed offsets of partitions
        without a position, waiting at most `timeout` for them, and lookups started for the
        partitions to reset, never waited for (the fetcher fetches each partition as soon
        as its position is known, and looks up the missing ones again)."""
        f = self._f
        pending = f.needs_position()
        if not pending:
            return
        missing = [tp for tp in pending if f.states[tp].reset is None]
        if missing:
            committed = ({} if self._group is None
                         else await self._committed_within(missing, timeout))
            if committed is not None:
                self._start_from_committed(missing, committed)
        f.start_position_resets()

    async def _committed_within(self, tps: list[TopicPartition], timeout: float
                                ) -> Committed | None:
        """The committed offsets of `tps` (OffsetFetch), or None if they have not come
        within `timeout`: the request goes on for a later poll() (as Kafka's consumer keeps
        its pending OffsetFetch) unless that one asks about other partitions. Its error
        (GROUP_AUTHORIZATION_FAILED, a timeout after default.api.timeout.ms) is raised once."""
        key = frozenset(tps)
        if self._committed_lookup is None or self._committed_lookup[0] != key:
            self._drop_committed_lookup()
            assert self._group is not None
            task = asyncio.get_running_loop().create_task(
                self._group.committed(sorted(key), self._api_timeout), name="strom-committed")
            # Retrieved even when dropped: no "exception was never retrieved" at exit.
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._committed_lookup = (key, task)
        task = self._committed_lookup[1]
        if not task.done():
            # asyncio.wait, not wait_for (which, in Python 3.11, can swallow a cancellation
            # of poll() that arrives as the answer does); a cancelled poll() leaves the task.
            await asyncio.wait({task}, timeout=max(0.0, timeout))
            if not task.done():
                return None
        if self._committed_lookup is not None and self._committed_lookup[1] is task:
            self._committed_lookup = None
        return task.result()

    def _drop_committed_lookup(self) -> None:
        lookup, self._committed_lookup = self._committed_lookup, None
        if lookup is not None:
            lookup[1].cancel()

    # ------------------------------------------------------------------ poll

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched since the last poll (at most `max_records`, default
        max.poll.records), waiting up to `timeout` seconds for some. Runs rebalances,
        auto-commits and pending commit callbacks. Looking positions up never makes it wait
        longer: the partitions with one are read meanwhile, and a partition whose position
        cannot be looked up (it does not exist yet, it has no leader) is asked about again
        in the background, as Kafka's consumer does. Raises AuthenticationError when the
        last attempt to connect to a broker was refused (a changed password), as Kafka's
        consumer does."""
        await self.start()
        self._client.raise_authentication_error()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        max_records = max_records or self._max_poll_records
        f = self._f
        while True:
            if self._group is not None:
                self._group.last_poll = loop.time()
            await self._run_commit_callbacks()
            if self._subscribed:
                await self._ensure_group(deadline - loop.time())
                self._raise_listener_error()
            await self._poll_positions(deadline - loop.time())
            self._maybe_auto_commit(loop.time())
            self._buffered_until = loop.time() + _BUFFERED_WINDOW
            self._lookups_started = f.lookups_wanted
            records = f.drain(max_records)
            if records:
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            waiters: list[asyncio.Task[Any]] = [loop.create_task(f.data_ready.wait())]
            if self._join_task is not None:
                waiters.append(loop.create_task(asyncio.wait({self._join_task})))
            elif self._subscribed and self._group is not None:
                waiters.append(loop.create_task(self._group.changed.wait()))
            # Wake at least every second for pattern subscriptions and auto-commit.
            try:
                await asyncio.wait(waiters, timeout=min(remaining, 1.0),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:                        # also when poll() is cancelled
                for t in waiters:
                    t.cancel()

    def poll_buffered(self, max_records: int | None = None) -> list[ConsumerRecord] | None:
        """For a thread that is not the loop's (the sync Consumer): the records poll()
        would return at once, taken in the calling thread, when poll() has nothing else to
        do first; else None, and the caller runs poll() on the loop. Nothing else means: no
        rebalance asked for or in flight, no commit callback or listener error waiting,
        auto-commit not due, no position to look up or committed offset being fetched, no
        authentication failure to raise, and a poll() on the loop within the last
        _BUFFERED_WINDOW seconds."""
        loop = self._loop
        if loop is None or self._closed:
            return None
        now = loop.time()                   # time.monotonic(): any thread may read it
        f = self._f
        if (now >= self._buffered_until or self._commit_callbacks
                or self._listener_error is not None or self._committed_lookup is not None
                or f.lookups_wanted != self._lookups_started
                or (self._auto_commit and now >= self._next_auto_commit)
                or self._client.pool.authentication_error is not None):
            return None
        g = self._group
        if g is not None and self._subscribed and (g.need_rejoin or self._join_task is not None):
            return None
        records = f.drain_in_thread(max_records or self._max_poll_records, loop)
        if not records:
            return None
        if g is not None:
            g.last_poll = now
        return records

    # ------------------------------------------------------------------ commits

    def _positions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        consumed = self._f.consumed_offsets()
        return {tp: OffsetAndMetadata(consumed[tp][0], "", consumed[tp][1])
                for tp in tps if tp in consumed}

    @staticmethod
    def _normalize(offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
                   ) -> dict[TopicPartition, OffsetAndMetadata]:
        return {TopicPartition(*tp): (om if isinstance(om, OffsetAndMetadata)
                                      else OffsetAndMetadata(int(om)))
                for tp, om in offsets.items()}

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None
                     ) -> None:
        """Commit `offsets` (default: the positions of all assigned partitions) and wait."""
        await self.start()
        g = self._need_group("commit()")
        await self._run_commit_callbacks()
        chosen = self._positions(self._assignment) if offsets is None else self._normalize(offsets)
        await g.commit(chosen, self._api_timeout, as_member=self._subscribed)

    async def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                           callback: CommitCallback | None = None) -> "asyncio.Task[None]":
        """Start a commit; `callback(err, offsets)` runs in a later poll()/commit()/close().
        Returns the commit's task (await it to wait)."""
        await self.start()
        g = self._need_group("commit_async()")
        chosen = self._positions(self._assignment) if offsets is None else self._normalize(offsets)

        async def run() -> None:
            err: Exception | None = None
            try:
                await g.commit(chosen, self._api_timeout, as_member=self._subscribed)
            except Exception as e:
                err = e
                log.info("async commit failed: %s", e)
            if callback is not None:
                self._commit_callbacks.append((callback, err, chosen))
        task = asyncio.get_running_loop().create_task(run())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)
        return task

    async def _run_commit_callbacks(self) -> None:
        while self._commit_callbacks:
            cb, err, offsets = self._commit_callbacks.pop(0)
            try:
                result = cb(err, offsets)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("commit callback failed")

    async def _commit_positions_quietly(self, tps: Iterable[TopicPartition]) -> None:
        try:
            assert self._group is not None
            await self._group.commit(self._positions(tps), self._api_timeout,
                                     as_member=self._subscribed)
        except Exception as e:
            log.warning("committing positions failed: %s", e)

    def _maybe_auto_commit(self, now: float) -> None:
        if not self._auto_commit or now < self._next_auto_commit or not self._assignment:
            return
        if self._subscribed and self._group is not None and (
                self._group.need_rejoin or self._join_task is not None):
            return          # the rebalance commits before revoking; due again right after it
        self._next_auto_commit = now + self._auto_commit_interval
        offsets = self._positions(self._assignment)
        if offsets:
            task = asyncio.get_running_loop().create_task(self._commit_positions_quietly(list(offsets)))
            self._commit_tasks.add(task)
            task.add_done_callback(self._commit_tasks.discard)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """group.id, and the generation and member id of the current membership (-1, ""
        outside one), for send_offsets_to_transaction(). InvalidGroupIdError without
        group.id."""
        if not self.config["group.id"]:
            raise for_code(Code.INVALID_GROUP_ID)("group_metadata() needs group.id")
        g = self._group
        if g is None:
            return ConsumerGroupMetadata(self.config["group.id"], -1, "",
                                         self.config["group.instance.id"])
        return ConsumerGroupMetadata(g.group_id, g.generation, g.member_id, g.instance_id)

    async def committed(self, partitions: Iterable[TopicPartition]
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        await self.start()
        return await self._need_group("committed()").committed(
            [TopicPartition(*tp) for tp in partitions], self._api_timeout)

    # ------------------------------------------------------------------ positions

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns for `tp` (looked up if unknown)."""
        await self.start()
        tp = TopicPartition(*tp)
        if self._f.position(tp) is None:
            await self._update_positions([tp])
        pos = self._f.position(tp)
        assert pos is not None
        return pos

    async def seek(self, tp: TopicPartition, offset: int) -> None:
        await self.start()
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}")
        self._f.seek(TopicPartition(*tp), offset)

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        await self.start()
        for tp in (tps or tuple(self._assignment)):
            self._f.request_reset(TopicPartition(*tp), "earliest")

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        await self.start()
        for tp in (tps or tuple(self._assignment)):
            self._f.request_reset(TopicPartition(*tp), "latest")

    async def pause(self, *tps: TopicPartition) -> None:
        await self.start()
        for tp in tps:
            self._f.pause(TopicPartition(*tp), True)

    async def resume(self, *tps: TopicPartition) -> None:
        await self.start()
        for tp in tps:
            self._f.pause(TopicPartition(*tp), False)

    async def paused(self) -> set[TopicPartition]:
        await self.start()
        return {tp for tp, st in self._f.states.items() if st.paused}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition (None if
        there is none)."""
        await self.start()
        for ts in timestamps.values():
            if ts < 0:
                raise ValueError(f"timestamps must be >= 0, not {ts}")
        found = await self._f.list_offsets(
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()}, self._api_timeout)
        return {tp: (OffsetAndTimestamp(o, ts, epoch) if o >= 0 else None)
                for tp, (o, ts, epoch) in found.items()}

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        await self.start()
        found = await self._f.list_offsets({TopicPartition(*tp): EARLIEST for tp in partitions},
                                           self._api_timeout)
        return {tp: v[0] for tp, v in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        await self.start()
        found = await self._f.list_offsets({TopicPartition(*tp): LATEST for tp in partitions},
                                           self._api_timeout)
        return {tp: v[0] for tp, v in found.items()}

    # ------------------------------------------------------------------ metadata

    async def topics(self) -> list[str]:
        """Every topic in the cluster (internal ones excluded)."""
        await self.start()
        resp = await self._client.request_any("Metadata", {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False})
        cluster = ClusterMetadata.from_response(resp)
        return sorted(n for n, t in cluster.topics.items() if not t.is_internal and not t.error_code)

    async def partitions_for(self, topic: str) -> list[int]:
        await self.start()
        try:
            await self._client.metadata.wait_for_topic(topic, self._api_timeout)
        except KafkaError as e:
            if e.code == Code.UNKNOWN_TOPIC_OR_PARTITION:
                return []
            raise
        return self._client.cluster.partitions_for(topic)
