"""Consumer: the synchronous facade of `clients.aio.consumer.AsyncConsumer`.

    with Consumer("events", bootstrap_servers="localhost:9092", group_id="g") as consumer:
        while True:
            for record in consumer.poll(1.0):
                ...

The async core runs on a `LoopThread` of the consumer's own (fetching and heartbeats go on
in the background there). Each method hands its coroutine to that thread and waits, but
for poll() when records are already fetched and nothing else is due: it takes them in the
caller's thread (AsyncConsumer.poll_buffered), as a thread switch there and back costs more
than a poll's worth of records.

User code runs in the user's thread, inside the call that triggered it, as in Kafka's Java
client: rebalance listener callbacks (`on_partitions_revoked` / `on_partitions_assigned` /
`on_partitions_lost`, plain methods taking a set of TopicPartition) run inside poll() (and
unsubscribe()/close()), commit_async callbacks inside a later poll()/commit()/close(). So a
callback may call the consumer again (commit() in on_partitions_revoked, seek() in
on_partitions_assigned). While the callback runs, the rebalance waits for it; what it
raises comes out of the poll()/unsubscribe()/close() that ran it, after the rebalance.

Like Kafka's consumer, one instance is used from one thread at a time.
"""
from __future__ import annotations

import asyncio
import queue
import re
from typing import Any, Callable, Coroutine, Iterable, Mapping, TypeVar

from clients._loop import LoopThread
from clients.types import ConsumerRecord, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

from .aio.consumer import AsyncConsumer, ConsumerGroupMetadata

__all__ = ["Consumer"]

T = TypeVar("T")


class _UserThread:
    """Runs functions the loop asks for in the thread blocked in `run` (the user's)."""

    def __init__(self, lt: LoopThread):
        self.lt = lt
        self.calls: "queue.SimpleQueue[Any]" = queue.SimpleQueue()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """On the loop: have `fn(*args)` run in the user's thread; wait for its result."""
        fut = asyncio.get_running_loop().create_future()
        self.calls.put((fn, args, fut))
        return await fut

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """In the user's thread: run `coro` on the loop, serving `call`s meanwhile."""
        outcome: list[tuple[bool, Any]] = []
        calls = self.calls

        async def reported() -> None:
            try:
                outcome.append((True, await coro))
            except BaseException as e:          # raised in the user's thread, below
                outcome.append((False, e))
            calls.put(None)
        try:
            self.lt.spawn(reported())
        except BaseException:
            coro.close()                        # never started: no "never awaited" warning
            raise
        while True:
            item = calls.get()
            if item is None:
                if outcome:
                    ok, value = outcome[0]
                    if ok:
                        return value
                    raise value
                continue                        # a wake-up of an earlier (nested) call
            fn, args, fut = item
            try:
                result, error = fn(*args), None
            except BaseException as e:          # handed back to the loop, raised there
                result, error = None, e
            self.lt.loop.call_soon_threadsafe(_settle, fut, result, error)


def _settle(fut: "asyncio.Future[Any]", result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class _ListenerInUserThread:
    """The user's listener, as coroutines the async consumer awaits."""

    def __init__(self, listener: Any, user: _UserThread):
        self._listener = listener
        self._user = user
        for name in ("on_partitions_revoked", "on_partitions_assigned", "on_partitions_lost"):
            fn = getattr(listener, name, None)
            if fn is not None:
                setattr(self, name, self._wrap(fn))

    def _wrap(self, fn: Callable[[set[TopicPartition]], Any]) -> Callable[..., Any]:
        async def call(tps: set[TopicPartition]) -> Any:
            return await self._user.call(fn, tps)
        return call


class Consumer:
    """Kafka consumer with blocking methods; see the module docstring and AsyncConsumer."""

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self._lt = LoopThread("strom-consumer")
        self._user = _UserThread(self._lt)
        self._closed = False

        async def make() -> AsyncConsumer:
            return AsyncConsumer(config=config, **kwargs)
        try:
            self._c = self._lt.run(make())
            self._lt.run(self._c.start())
        except BaseException:
            self._lt.close()
            raise
        self.config = self._c.config
        if topics:
            self.subscribe(list(topics))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._user.run(coro)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | re.Pattern | None = None,
                  listener: Any = None) -> None:
        wrapped = _ListenerInUserThread(listener, self._user) if listener is not None else None
        self._run(self._c.subscribe(topics, pattern, wrapped))

    def subscription(self) -> set[str]:
        return self._run(self._c.subscription())

    def unsubscribe(self) -> None:
        self._run(self._c.unsubscribe())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._run(self._c.assign(list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        return self._run(self._c.assignment())

    # ------------------------------------------------------------------ records + commits

    def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        if not self._closed:
            # Records already fetched are taken here, without a round trip to the loop's
            # thread, when poll() has nothing else to do (AsyncConsumer.poll_buffered).
            records = self._c.poll_buffered(max_records)
            if records is not None:
                return records
        return self._run(self._c.poll(timeout, max_records))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        self._run(self._c.commit(offsets))

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[Exception | None, Mapping[TopicPartition, OffsetAndMetadata]],
                                        Any] | None = None) -> None:
        if callback is None:
            self._run(self._c.commit_async(offsets, None))
            return

        async def in_user_thread(err: Exception | None,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Any:
            return await self._user.call(callback, err, offsets)
        self._run(self._c.commit_async(offsets, in_user_thread))

    def group_metadata(self) -> ConsumerGroupMetadata:
        """(group_id, generation_id, member_id, group_instance_id) of the current
        membership, for a transactional producer's send_offsets_to_transaction()."""
        return self._c.group_metadata()

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._run(self._c.committed(list(partitions)))

    # ------------------------------------------------------------------ positions

    def position(self, tp: TopicPartition) -> int:
        return self._run(self._c.position(tp))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._run(self._c.seek(tp, offset))

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._run(self._c.seek_to_beginning(*tps))

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._run(self._c.seek_to_end(*tps))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._c.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._c.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._c.end_offsets(list(partitions)))

    def pause(self, *tps: TopicPartition) -> None:
        self._run(self._c.pause(*tps))

    def resume(self, *tps: TopicPartition) -> None:
        self._run(self._c.resume(*tps))

    def paused(self) -> set[TopicPartition]:
        return self._run(self._c.paused())

    def topics(self) -> list[str]:
        return self._run(self._c.topics())

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._c.partitions_for(topic))

    def close(self, autocommit: bool = True) -> None:
        """Commit (auto-commit), revoke, leave the group, stop the I/O thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._c.close(autocommit))
        finally:
            self._lt.close()
