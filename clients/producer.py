"""Producer: the synchronous face of `clients.aio.producer.AsyncProducer`.

    with Producer({"bootstrap.servers": "localhost:9092"}, compression_type="zstd") as p:
        fut = p.send("events", b"payload", key=b"user-1", headers={"source": b"app"})
        p.flush()
        print(fut.result())                     # RecordMetadata(topic, partition, offset, ...)

The async core runs on the producer's own I/O thread (`clients._loop.LoopThread`), like
the sender thread of Kafka's Java client. As in that client, `send` serializes and appends
the record in the caller's thread, to its partition's open batch, and returns at once with a
concurrent.futures.Future of its RecordMetadata; a batch goes to the I/O thread whole (full,
after linger.ms, or at flush/close), so a loop of sends costs no thread round trip and no
queue hand-off per record. When buffer.memory is full, `send` waits in the caller's thread
for memory to free (at most max.block.ms); a `send` from an on_delivery callback, on the I/O
thread, never waits there: its record goes the I/O thread's own way. A record whose topic's metadata is not known
yet goes to the I/O thread on its own (which waits for it within max.block.ms), and so does
every record after it until it is appended: one thread's records to a partition keep
their order.

As in Kafka's Java client, what goes wrong with one record is reported through its future and `on_delivery`, not raised by
`send`: no metadata or buffer space within max.block.ms (KafkaTimeoutError), a record
above max.request.size (MessageTooLargeError), a value the serializer refuses. `send`
blocks while buffer.memory is full, and also when 10,000 records are already waiting to be
handed over one by one (then it raises KafkaTimeoutError after max.block.ms).

Delivery callbacks `on_delivery(err, md)` run on the I/O thread, as Kafka's Java client
runs them on its sender thread: keep them quick and never call a blocking method of this
producer from one (that raises RuntimeError). The futures are completed on the I/O thread
too, so `future.add_done_callback` functions run there as well.

Thread-safe: any number of threads may call `send`/`flush` concurrently; records from one
thread to one partition keep their order (appends and hand-offs share one lock, and the
hand-off queue is first in, first out).

Transactions (with `transactional.id`): `init_transactions`, `begin_transaction`,
`send_offsets_to_transaction`, `commit_transaction`, `abort_transaction` and
`prepare_transaction` (two-phase commit: deliver, leave open), blocking versions
of AsyncProducer's (clients/aio/transactions.py). `send` outside a transaction, or after
the transaction or the producer failed, raises at once (TransactionStateError,
TransactionAbortableError, ProducerFencedError); commit and abort first wait for the
records sent before them to reach the core.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import concurrent.futures._base as _futures_base
import threading
import time
from typing import Any, Iterable, Mapping, cast

from clients._loop import LoopThread
from clients.aio.accumulator import (BATCH_OVERHEAD, ProducerBatch,
                                     reject_future, resolve_future, run_delivery_callback)
from clients.aio.errors import KafkaTimeoutError
from clients.aio.producer import _NO_HEADERS, PLAIN_RECORD_OVERHEAD, AsyncProducer, Headers
from clients.types import DeliveryCallback, PreparedTransaction, RecordMetadata, TopicPartition

__all__ = ["Producer"]

_HANDOFF_LIMIT = 10_000  # records queued for the I/O thread before send() blocks

# What send() hands to the I/O thread: the record's future and send() arguments, then the
# time it started waiting; or a 1-tuple marker (flush/close waiting for what came before).
_Handed = tuple["concurrent.futures.Future[RecordMetadata]", str, Any, Any, int | None,
                int | None, Headers, DeliveryCallback | None, float]
_Marker = tuple["concurrent.futures.Future[None]"]


def _report_failure(fut: "concurrent.futures.Future[RecordMetadata]", error: Exception,
                    on_delivery: DeliveryCallback | None) -> None:
    """On the I/O thread: a record that could not be appended fails through its future and
    on_delivery, as a delivery failure does."""
    if not fut.done():
        fut.set_exception(error)
    if on_delivery is not None:
        run_delivery_callback(on_delivery, error, None)


_PENDING, _FINISHED = _futures_base.PENDING, _futures_base.FINISHED


class _Outcome:
    """What a caller's batch came to, shared by its records' futures (Kafka's
    ProduceRequestResult): each future works out its own RecordMetadata from it when asked,
    so completing a batch costs the same for 1 record as for 1,000."""

    __slots__ = ("topic", "partition", "condition", "done", "base_offset", "log_append_time",
                 "error", "watched", "numbers")

    def __init__(self, tp: TopicPartition, condition: threading.Condition):
        self.topic, self.partition = tp
        self.condition = condition
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: Exception | None = None
        # futures that are waited for (concurrent.futures.wait) or have callbacks: told
        # one by one when the batch is done
        self.watched: list[RecordFuture] = []
        # (timestamp, key size, value size) of each record a caller appended, flat, in
        # offset-delta order: kept here rather than on the records' futures (see RecordFuture)
        self.numbers: list[int] = []


class Completions(threading.Condition):
    """The condition one producer's futures share. Every completed batch notifies it, and
    threading.Condition.notify_all() runs four Python calls even when nobody waits (as in
    a send() loop that looks at its futures only afterwards): this one counts its waiters
    and notifies only when there are any. (Unlike Condition's, a notify_all() without
    waiters does not check that the lock is held; every caller here holds it.)"""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = 0        # changed with the lock held only

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1

    def notify_all(self) -> None:
        if self.waiting:
            super().notify_all()


class RecordFuture(concurrent.futures.Future):
    """The concurrent.futures.Future that send() returns, made cheap to make and to
    complete, since a send() loop makes one per record:
    - it has its producer's lock instead of a Condition of its own (making a Future's
      Condition was a fifth of a send() loop's time); because any completion wakes every
      waiter of the producer, waiting re-checks after each wake-up until this future is
      done or the timeout is over;
    - making one runs no Python code: the lock is a class attribute of the producer's own
      subclass (`sharing`), Future.__init__'s lists are made when first used;
    - appended in the caller's thread, it refers to its batch's `_Outcome` (`_outcome`)
      and reads its state, result and exception from there, as Kafka's FutureRecordMetadata
      does: completing a batch sets one outcome, whatever its number of records. Of its own
      it has only its offset delta in the batch (`_delta`, a small int); its timestamp and
      sizes are in the outcome's `numbers`. A send() loop's callers keep their futures:
      appending a record makes no object the cyclic collector tracks besides the future
      (a tuple of numbers per future doubled the collections a loop ran, young and full).
      What Future itself sets (set_result, set_exception, cancel) is kept on the future
      and comes first.
    Everything else (callbacks, cancel, concurrent.futures.wait/as_completed) is Future's
    own (tests/unit/test_producer_record_future.py)."""

    _condition: threading.Condition
    __init__ = object.__init__
    # once appended in a caller's thread: its batch's outcome and its offset delta in the
    # batch; annotations only, so that the future has none before
    _outcome: _Outcome
    _delta: int

    @classmethod
    def sharing(cls, condition: threading.Condition) -> "type[RecordFuture]":
        """The class of one producer's futures: all of them wait on `condition`."""
        return type(cls.__name__, (cls,), {"_condition": condition})

    @property
    def _state(self) -> str:
        d = self.__dict__
        own = d.get("_own_state")
        if own is not None:
            return own
        outcome = d.get("_outcome")
        return _FINISHED if outcome is not None and outcome.done else _PENDING

    @_state.setter
    def _state(self, state: str) -> None:
        self.__dict__["_own_state"] = state

    @property
    def _result(self) -> RecordMetadata | None:
        d = self.__dict__
        if "_own_result" in d:
            return d["_own_result"]
        outcome = d.get("_outcome")
        if outcome is None or not outcome.done or outcome.error is not None:
            return None
        delta = d["_delta"]
        ts, key_size, value_size = outcome.numbers[3 * delta:3 * delta + 3]
        base = outcome.base_offset
        appended = outcome.log_append_time
        return RecordMetadata(outcome.topic, outcome.partition,
                              base + delta if base >= 0 else -1,
                              appended if appended != -1 else ts, key_size, value_size)

    @_result.setter
    def _result(self, result: Any) -> None:
        self.__dict__["_own_result"] = result

    @property
    def _exception(self) -> BaseException | None:
        d = self.__dict__
        if "_own_exception" in d:
            return d["_own_exception"]
        outcome = d.get("_outcome")
        return outcome.error if outcome is not None and outcome.done else None

    @_exception.setter
    def _exception(self, error: BaseException | None) -> None:
        self.__dict__["_own_exception"] = error

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]  # concurrent.futures.wait's
        return self._watched("_waiter_list")

    @property
    def _done_callbacks(self) -> list[Any]:
        return self._watched("_callback_list")

    def _watched(self, name: str) -> list[Any]:
        """A list of Future.__init__'s, made on first use (with the lock held: Future and
        concurrent.futures.wait touch them under it); an outcome not yet done then tells
        this future when it is."""
        d = self.__dict__
        items = d.get(name)
        if items is None:
            items = d[name] = []
            outcome = d.get("_outcome")
            if outcome is not None and not outcome.done and "_in_outcome" not in d:
                d["_in_outcome"] = True
                outcome.watched.append(self)
        return items

    def _wait_done(self, timeout: float | None) -> None:
        pending = (_futures_base.PENDING, _futures_base.RUNNING)
        with self._condition:
            if timeout is None:
                while self._state in pending:
                    self._condition.wait()
                return
            deadline = time.monotonic() + timeout
            while self._state in pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._condition.wait(left)

    def result(self, timeout: float | None = None) -> Any:
        self._wait_done(timeout)
        return super().result(0)        # done (or TimeoutError after `timeout`)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait_done(timeout)
        return super().exception(0)


class _CallerBatch(ProducerBatch):
    """A batch the sync Producer's callers append to. Its records' futures refer to its
    `outcome`; `waiters` holds only the records with an on_delivery."""

    __slots__ = ("outcome",)

    def __init__(self, tp: TopicPartition, now: float, deadline: float,
                 condition: threading.Condition):
        super().__init__(tp, now, deadline)
        self.outcome = _Outcome(tp, condition)

    def add_record(self, fut: RecordFuture, timestamp: int, key: bytes | None,
                   value: bytes | None, headers: bytes, size: int,
                   on_delivery: DeliveryCallback | None) -> None:
        """ProducerBatch.add for a send() of a caller's thread: the record encoded, its
        future referring to this batch's outcome."""
        delta = self.count
        self.append(timestamp, key, value, headers)
        self.size += size
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        fut._outcome = outcome = self.outcome
        fut._delta = delta
        # A caller appends before the batch joins the core's buffer, the I/O thread's
        # records come after: so a caller's record is number `delta` of the outcome's too.
        outcome.numbers += (timestamp, key_size, value_size)
        if on_delivery is not None:
            self.waiters.append((fut, delta, timestamp, key_size, value_size, on_delivery))

    # `waiters` also holds the records the I/O thread appended one by one (ProducerBatch.add,
    # after the batch joined the core's buffer): their futures have no `_delta` and are
    # resolved one by one, as in any batch.

    def resolve_waiters(self, base_offset: int, log_append_time: int) -> None:
        self._settle(base_offset, log_append_time, None)
        if self.waiters:
            for (fut, _, _, _, _, cb), md in zip(self.waiters,
                                                 self.record_metadata(base_offset,
                                                                      log_append_time)):
                if getattr(fut, "_delta", None) is None:
                    resolve_future(fut, md)
                if cb is not None:
                    run_delivery_callback(cb, None, md)

    def reject_waiters(self, error: Exception) -> None:
        self._settle(-1, -1, error)
        for fut, _, _, _, _, cb in self.waiters:
            if getattr(fut, "_delta", None) is None:
                reject_future(fut, error)
            if cb is not None:
                run_delivery_callback(cb, error, None)

    def _settle(self, base_offset: int, log_append_time: int, error: Exception | None) -> None:
        """Every future of the batch done at once, under one acquisition of the lock and
        one notify; then the callbacks of those that have any."""
        outcome = self.outcome
        with outcome.condition:
            outcome.base_offset = base_offset
            outcome.log_append_time = log_append_time
            outcome.error = error
            outcome.done = True
            watched, outcome.watched = outcome.watched, []
            watched = [f for f in watched if "_own_state" not in f.__dict__]  # not cancelled
            for fut in watched:
                for waiter in fut._waiters:         # concurrent.futures.wait's
                    if error is None:
                        waiter.add_result(fut)
                    else:
                        waiter.add_exception(fut)
            outcome.condition.notify_all()
        for fut in watched:
            fut._invoke_callbacks()    # type: ignore[attr-defined]  # Future's own


class Producer:
    """Kafka producer with blocking calls; see the module docstring."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self._closed = False
        self._loop = LoopThread("strom-producer")
        try:
            self._core: AsyncProducer = self._loop.run(self._make(config, kwargs))
            self._loop.run(self._core.start())
        except BaseException:
            self._loop.close()
            raise
        self.config = self._core.config
        self._max_block = self._core.config["max.block.ms"] / 1000.0
        self._linger = self._core.config.ms("linger.ms")
        # One lock for what callers' threads share with the I/O thread: the hand-off queue
        # and the open batches of the callers' side.
        self._lock = threading.Lock()
        self._handoff: collections.deque[_Handed | _Marker | ProducerBatch] = collections.deque()
        self._handoff_room = threading.Condition(self._lock)   # the queue is full
        self._room_waiters = 0
        self._draining = False  # a drain task is scheduled or running
        self._drain_running = False     # (the I/O thread's own: one drain at a time)
        # Records appended in the caller's thread (`_append_here`): each partition's open
        # batch; bytes of records in them or handed off and not yet in the core's buffer;
        # records handed off one by one and not yet appended. While there are any, every
        # record goes that way too: one waiting for metadata and then for buffer memory is
        # not overtaken by later ones taking the memory it waits for. Order itself holds
        # either way: open batches are handed off before such a record.
        # The I/O thread counts what it took in counters of its own, which callers subtract:
        # it then needs no lock to take the queue (see _drain).
        self._open: dict[tuple[str, int], _CallerBatch] = {}
        self._open_bytes = 0            # callers' appends, in bytes ...
        self._adopted_bytes = 0         # ... and what of them the core's buffer took
        self._one_by_one = 0            # records handed off alone ...
        self._one_by_one_done = 0       # ... and appended (or failed) by the I/O thread
        self._appends_here = self._core._txn is None
        # send()'s commonest record is sized without _encode_parts (as AsyncProducer's).
        self._plain_values = self._core._plain_values
        self._largest_plain = self._core._largest_plain
        self._sweeping = False      # the I/O thread will look for lingered open batches
        self._memory_freed = threading.Condition(self._lock)   # callers wait for memory
        self._memory_waiters = 0
        self._core.on_memory_freed = self._notify_memory_freed
        # The class of this producer's futures: they share one lock (see RecordFuture).
        self._future = RecordFuture.sharing(Completions())

    @staticmethod
    async def _make(config: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> AsyncProducer:
        return AsyncProducer(config, **kwargs)

    def send(self, topic: str, value: Any = None, key: Any = None,
             partition: int | None = None, timestamp_ms: int | None = None,
             headers: Headers = None,
             on_delivery: DeliveryCallback | None = None,
             ) -> "concurrent.futures.Future[RecordMetadata]":
        """Buffer one record; the returned future resolves with its RecordMetadata or
        fails with the delivery error."""
        if self._closed:
            raise RuntimeError("send() on a closed Producer")
        txn = self._core._txn
        if txn is not None:
            txn.state.check_send()      # checked again on the I/O thread, at append
        fut = self._future()
        if self._appends_here and self._append_here(fut, topic, value, key, partition,
                                                    timestamp_ms, headers, on_delivery):
            return fut
        # max.block.ms counts from here, not from when the I/O thread gets to the record.
        since = time.monotonic()
        with self._lock:
            if len(self._handoff) >= _HANDOFF_LIMIT:
                self._wait_for_room(topic)
            if self._open:
                self._hand_open_batches()   # what this thread appended goes first
            self._one_by_one += 1
            self._push((fut, topic, value, key, partition, timestamp_ms, headers, on_delivery,
                        since))
        return fut

    def _append_here(self, fut: RecordFuture, topic: str, value: Any, key: Any,
                     partition: int | None, timestamp_ms: int | None, headers: Headers,
                     on_delivery: DeliveryCallback | None) -> bool:
        """Append the record in the caller's thread, as Kafka's Java producer does, to its
        partition's open batch here; a full batch goes to the I/O thread whole. While
        buffer.memory is full it waits here. False (the record then goes to the I/O thread
        alone) when its topic's metadata is not known or records handed off alone are still
        on their way. What is wrong with the record itself (and no memory within
        max.block.ms) is reported through its future, on the I/O thread."""
        core = self._core
        cluster = core._client.metadata.cluster
        num = cluster.partition_counts.get(topic, 0)
        if (not num or (partition is not None and partition >= num)
                or self._one_by_one != self._one_by_one_done):
            return False
        acc = core._acc
        key_bytes: bytes | None
        value_bytes: bytes | None
        if (key is None and type(value) is bytes and not headers and timestamp_ms is None
                and self._plain_values
                and (size := PLAIN_RECORD_OVERHEAD + len(value)) <= self._largest_plain):
            # The common record, without a call: what _encode_parts would give (inline here
            # and in AsyncProducer._append_now, each a per-record path: keep them alike).
            key_bytes, value_bytes, hdrs, ts = None, value, _NO_HEADERS, time.time_ns() // 1_000_000
        else:
            try:
                key_bytes, value_bytes, hdrs, size, ts = core._encode_parts(
                    topic, key, value, headers, timestamp_ms)
            except Exception as e:
                self._loop.call_soon(_report_failure, fut, e, on_delivery)
                return True
        # acquire() and release() rather than a `with`: about half its cost, on every
        # record's path
        lock = self._lock
        lock.acquire()
        try:
            if self._one_by_one != self._one_by_one_done or self._closed:
                return False
            pending = acc.used + self._open_bytes - self._adopted_bytes
            if pending + size > acc.buffer_memory and pending > 0:
                if self._loop.in_loop_thread:
                    # send() from an on_delivery callback: blocking the I/O thread would stop
                    # the very completions that free memory; its drain waits without blocking.
                    return False
                error = self._wait_for_memory(size, topic)
                if error is not None:
                    self._loop.call_soon(_report_failure, fut, error, on_delivery)
                    return True
                if self._one_by_one != self._one_by_one_done or self._closed:
                    return False
            if partition is not None and partition >= 0:
                p, sticky = partition, False
            else:
                try:
                    p, sticky = self._place(topic, key, key_bytes, value, value_bytes,
                                            partition, cluster)
                except Exception as e:
                    self._loop.call_soon(_report_failure, fut, e, on_delivery)
                    return True
            batch_size = acc.batch_size
            batch = self._open.get((topic, p))
            if batch is None or (batch.count and batch.size + size > batch_size):
                if batch is not None:
                    self._hand_batch(batch)
                    batch = None
                if sticky and core._sticky_hook is not None:
                    # KIP-480: the sticky partition's batch is done; move on.
                    core._sticky_hook(topic, cluster, p)
                    p = core._partitioner(topic, key, key_bytes, value, value_bytes, cluster)
                    batch = self._open.get((topic, p))
                    if batch is not None and not batch.has_room(size, batch_size):
                        self._hand_batch(batch)
                        batch = None
                if batch is None:
                    now = time.monotonic()
                    batch = _CallerBatch(TopicPartition(topic, p), now,
                                         now + acc.delivery_timeout, self._future._condition)
                    self._open[(topic, p)] = batch
                    if not self._sweeping:
                        # linger.ms from now; with 0, when the I/O thread gets to it
                        self._sweeping = True
                        self._loop.call_soon(self._loop.loop.call_later, self._linger,
                                             self._sweep)
            batch.add_record(fut, ts, key_bytes, value_bytes, hdrs, size, on_delivery)
            self._open_bytes += size
            if batch.size >= batch_size:
                self._hand_batch(batch)
        finally:
            lock.release()
        return True

    def _place(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
               value_bytes: bytes | None, partition: int | None,
               cluster: Any) -> tuple[int, bool]:
        """The partition of a record send() was given none for (or a negative one:
        ValueError), and whether the sticky rule placed it."""
        core = self._core
        if partition is None and key_bytes is None and core._plain_sticky is not None:
            # the default partitioner's sticky rule, without a call
            p = core._plain_sticky.get(topic)
            if p is None:
                p = core._partitioner(topic, key, None, value, value_bytes, cluster)
            return p, True
        return core._choose_partition(topic, key, key_bytes, value, value_bytes, partition,
                                      cluster)

    def _wait_for_memory(self, size: int, topic: str) -> KafkaTimeoutError | None:
        """With the lock held: wait in the caller's thread, as Kafka's Java producer does,
        until `size` bytes of buffer.memory are free (at most max.block.ms; then the
        record's KafkaTimeoutError). The open batches go to the I/O thread first: they may
        be what holds the memory."""
        self._hand_open_batches()
        acc = self._core._acc
        deadline = time.monotonic() + self._max_block
        self._memory_waiters += 1
        try:
            while (pending := acc.used + self._open_bytes - self._adopted_bytes) + size \
                    > acc.buffer_memory \
                    and pending > 0:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return KafkaTimeoutError(
                        f"no buffer space for a {size}-byte record to {topic} within "
                        f"max.block.ms={self.config['max.block.ms']} (buffer.memory="
                        f"{acc.buffer_memory}, {pending} in use)")
                # A bounded wait: a wake-up sent between our check and the wait is not lost
                # for longer than this.
                self._memory_freed.wait(min(left, 0.05))
        finally:
            self._memory_waiters -= 1
        return None

    def _notify_memory_freed(self) -> None:
        """On the I/O thread, when a batch gave its memory back: callers waiting for memory
        are woken once an eighth of buffer.memory is free, not for every batch (each
        wake-up is a hand-over of the GIL both ways, and it let a caller append one batch
        of records before it waited again)."""
        if self._memory_waiters:
            acc = self._core._acc
            # (read without the lock: a caller that misses a wake-up by it re-checks
            # within its bounded wait)
            free = acc.buffer_memory - (acc.used + self._open_bytes - self._adopted_bytes)
            if free >= acc.buffer_memory >> 3 or not acc.incomplete:
                with self._lock:
                    self._memory_freed.notify_all()

    def _hand_batch(self, batch: ProducerBatch) -> None:
        """With the lock held: an open batch of this side goes to the I/O thread."""
        del self._open[batch.tp]
        self._push(batch)

    def _hand_open_batches(self) -> None:
        """With the lock held: every open batch of this side goes to the I/O thread."""
        for batch in list(self._open.values()):
            self._hand_batch(batch)

    def _sweep(self) -> None:
        """On the I/O thread: hand off the open batches opened linger.ms ago or more, and
        come back when the next one is due: one timer while there are open batches, not a
        wake-up of the I/O thread for each (a wake-up is a write to the loop's self-pipe
        and a GIL hand-over, which cost 1 KiB records more than the hand-off saved)."""
        now = time.monotonic()
        linger = self._linger
        # First a look without the lock (list() of a dict's values is one step under the
        # GIL; `created` never changes): most sweeps find nothing due, and a caller that
        # meets this thread holding the lock waits for a GIL hand-over (up to
        # sys.getswitchinterval(), 5 ms), which cost a send() loop a tenth of its rate.
        due_next: float | None = None
        for batch in list(self._open.values()):
            due = batch.created + linger
            if due <= now:
                break
            if due_next is None or due < due_next:
                due_next = due
        else:
            if due_next is not None:
                self._loop.loop.call_later(due_next - now, self._sweep)
                return
        with self._lock:
            due_next = None
            for batch in list(self._open.values()):
                due = batch.created + linger
                if due <= now:
                    self._hand_batch(batch)
                elif due_next is None or due < due_next:
                    due_next = due
            if due_next is None:
                self._sweeping = False
                return
        self._loop.loop.call_later(due_next - now, self._sweep)

    def _wait_for_room(self, topic: str) -> None:
        """With the lock held: wait until the I/O thread took the queued records."""
        deadline = time.monotonic() + self._max_block
        while len(self._handoff) >= _HANDOFF_LIMIT:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                raise KafkaTimeoutError(
                    f"send to {topic}: {_HANDOFF_LIMIT} records waited for the I/O thread "
                    f"longer than max.block.ms={self.config['max.block.ms']} (buffer.memory "
                    "full?)")
            self._room_waiters += 1
            try:
                self._handoff_room.wait(left)
            finally:
                self._room_waiters -= 1

    def _push(self, item: "_Handed | _Marker | ProducerBatch") -> None:
        """With the lock held: queue `item` for the I/O thread, and a drain if none runs."""
        self._handoff.append(item)
        if not self._draining:
            self._draining = True
            self._loop.call_soon(self._start_drain)

    def _start_drain(self) -> None:
        if not self._drain_running:     # else the running drain takes it (see _drain)
            self._drain_running = True
            self._loop.loop.create_task(self._drain(), name="strom-producer-handoff")

    async def _drain(self) -> None:
        """On the I/O thread: take what was handed off, in order. A ProducerBatch (records
        appended in a caller's thread) joins the core's buffer whole; a 1-tuple is a
        marker (flush/close waiting for what was queued before it); anything else is one
        record, appended without a coroutine when its topic's metadata is known and buffer
        memory is free (`_append_now`)."""
        core = self._core
        handoff = self._handoff
        acc = core._acc
        popleft = handoff.popleft
        while True:
            # Taken without the lock (callers append under it; popleft is one step under
            # the GIL): a caller that meets this thread holding the lock waits for a GIL
            # hand-over (see _sweep).
            items = []
            try:
                while True:
                    items.append(popleft())
            except IndexError:
                pass
            if self._room_waiters:      # send()s waiting for the queue to shrink
                with self._lock:
                    self._handoff_room.notify_all()
            clock = asyncio.get_running_loop().time
            for item in items:
                if isinstance(item, ProducerBatch):
                    acc.adopt(item)
                    self._adopted_bytes += item.size - BATCH_OVERHEAD
                    core._wake.set()
                    continue
                if len(item) == 1:
                    item[0].set_result(None)
                    continue
                (fut, topic, value, key, partition, timestamp_ms, headers, on_delivery,
                 since) = item
                try:
                    num = core._client.cluster.partition_count(topic)
                    if core._started and num and (partition is None or partition < num):
                        core._check_sendable()
                        waiting = core._append_now(fut, topic, value, key, partition,
                                                   timestamp_ms, headers, on_delivery,
                                                   clock())
                        if waiting is not None:
                            await core._append_when_memory_frees(waiting, since)
                        elif core._wake.is_set():
                            await asyncio.sleep(0)  # the sender takes a new or full batch
                    else:
                        await core._send(fut, topic, value, key, partition, timestamp_ms,
                                         headers, on_delivery, blocked_since=since)
                except Exception as e:  # the record's own failure: report it, carry on
                    _report_failure(fut, e, on_delivery)
                finally:
                    self._one_by_one_done += 1
            # Stop without the lock, as Dekker would: a caller appends, then reads
            # _draining; this thread clears it, then looks at the queue. Either it sees the
            # caller's item, or the caller sees False and schedules a drain.
            self._draining = False
            if not handoff:
                self._drain_running = False
                return
            self._draining = True

    def _check_thread(self) -> None:
        if self._loop.in_loop_thread:
            raise RuntimeError("a blocking Producer call was made from its own I/O thread "
                               "(inside an on_delivery callback?)")

    def _handed_off(self, timeout: float | None) -> float | None:
        """Block until every record queued before this call has reached the core (at most
        `timeout` seconds, then KafkaTimeoutError); returns the time left."""
        marker: concurrent.futures.Future[None] = concurrent.futures.Future()
        started = time.monotonic()
        with self._lock:
            self._hand_open_batches()
            self._push((marker,))
        done, _ = concurrent.futures.wait([marker], timeout)
        if not done:
            raise KafkaTimeoutError(f"records sent before the call were still waiting for "
                                    f"metadata or buffer space after {timeout}s")
        return None if timeout is None else max(0.0, timeout - (time.monotonic() - started))

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait until each record sent before the call is
        delivered or failed (KafkaTimeoutError after `timeout` seconds)."""
        self._check_thread()
        remaining = self._handed_off(timeout)
        self._wait(self._core.flush(remaining))

    # ------------------------------------------------------------------ transactions

    def init_transactions(self, timeout: float | None = None) -> None:
        """See AsyncProducer.init_transactions."""
        self._wait(self._core.init_transactions(timeout))

    def begin_transaction(self) -> None:
        """See AsyncProducer.begin_transaction."""
        self._wait(self._core.begin_transaction())

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any] | Iterable[Any],
                                    group_metadata: Any, timeout: float | None = None) -> None:
        """See AsyncProducer.send_offsets_to_transaction."""
        if not isinstance(offsets, Mapping):
            offsets = list(offsets)
        self._wait(self._core.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Wait for the records sent before the call to reach the core, then
        AsyncProducer.commit_transaction."""
        self._check_thread()
        remaining = self._handed_off(timeout)
        self._wait(self._core.commit_transaction(remaining))

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Wait for the records sent before the call to reach the core, then
        AsyncProducer.prepare_transaction."""
        self._check_thread()
        remaining = self._handed_off(timeout)
        return self._wait(self._core.prepare_transaction(remaining))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Wait for the records sent before the call to reach the core, then
        AsyncProducer.abort_transaction."""
        self._check_thread()
        remaining = self._handed_off(timeout)
        self._wait(self._core.abort_transaction(remaining))

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waits up to max.block.ms for its metadata)."""
        return self._wait(self._core.partitions_for(topic))

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (at most `timeout` seconds), fail the rest with
        ProducerClosedError, disconnect and stop the I/O thread. Idempotent."""
        if self._closed:
            return
        self._check_thread()
        self._closed = True
        try:
            timeout = self._handed_off(timeout)
        except KafkaTimeoutError:
            timeout = 0.0   # out of time: the core fails what is left (ProducerClosedError)
        # The loop's own join timeout must outlast the core's close.
        self._loop.close(self._core.close(timeout),
                         timeout=1e9 if timeout is None else timeout + 30.0)

    def _wait(self, coro: Any) -> Any:
        # Not LoopThread.run: it reads any TimeoutError as its own timeout, and our
        # KafkaTimeoutError (max.block.ms, flush) is one; it must reach the caller as is.
        if self._loop.in_loop_thread:
            coro.close()
            raise RuntimeError("a blocking Producer call was made from its own I/O thread "
                               "(inside an on_delivery callback?)")
        return self._loop.submit(coro).result()

    @property
    def retried_batches(self) -> int:
        """How many times a batch was sent again after a failure (statistics)."""
        return self._core.retried_batches

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
