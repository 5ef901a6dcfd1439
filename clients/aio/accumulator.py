"""The producer's record accumulator: per-partition batches waiting to be sent. Sans-io.

`send()` appends each record to the last open batch of its partition (`append`); a batch
is full when the next record would take it past `batch.size` (a record bigger than that
gets a batch of its own). The sender asks which brokers have something to send (`ready`)
and takes at most one batch per partition for each such broker (`drain`): a partition is
ready when its first batch is full, has waited `linger.ms`, a flush or close is under way,
or a send is waiting for buffer memory. A broker that is ready for one partition gets the
first batch of every partition it leads, full or not, so one ProduceRequest carries all.

Per-record work is only what `append` does: the record is encoded into its batch at once
(clients/protocol/record_writer.py), its size estimate counted, and a send()'s future
remembered (a send_batch() is counted per call, not per record). Draining *closes* a
batch: it is given its producer id, epoch and base sequence, and its header is written
(the records section compressed then); a retry resends the same bytes.

Ordering and idempotence (Kafka's rules): sequence numbers are assigned per partition in
drain order. A batch that must be retried goes back to the head of its partition's queue in
sequence order (`reenqueue`), and while a partition has a retry queued nothing else of that
partition is sent until everything in flight has come back; retries are then sent one at
a time. So the broker always sees a partition's sequences in order: a retry can be
recognised as a duplicate, never appended twice. Without retries pending, up to
`max_in_flight` batches of a partition may be in flight.

Transactions: a transactional producer sets `transactional` (batches are built with the
transactional flag) and `gate`, which keeps a partition's batches out of `ready`/`drain`
until the partition was added to the transaction (clients/aio/transactions.py).

`buffer.memory` is accounted by record size estimate: `reserve` before appending,
released when the batch completes (`deallocate`). Waiting for memory is the caller's
business (the async producer awaits a condition); `waiting_for_memory` tells the
accumulator to send everything now.

All times are in seconds of a caller-supplied monotonic clock. Not thread-safe: one
producer's event loop owns it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import deque
from typing import Callable, Iterable, Union

from clients.protocol.batch_header import HEADER_SIZE
from clients.protocol.record_writer import BatchWriter
from clients.types import DeliveryCallback, RecordMetadata, TopicPartition

__all__ = ["ProducerBatch", "RecordAccumulator", "Countdown", "record_size", "BATCH_OVERHEAD",
           "run_delivery_callback", "resolve_future", "reject_future"]

BATCH_OVERHEAD = HEADER_SIZE
_RECORD_OVERHEAD = 21        # attributes, the largest timestamp/offset deltas, lengths

NO_SEQUENCE = -1
_new_tuple = tuple.__new__
INT32_MAX = 2**31 - 1

# A record's future: asyncio's (AsyncProducer) or concurrent.futures' (Producer).
RecordFuture = Union["asyncio.Future[RecordMetadata]", "concurrent.futures.Future[RecordMetadata]"]
# A send()'s record: (future, timestamp, key size, value size, on_delivery or None)
Waiter = tuple[RecordFuture, int, int, int, DeliveryCallback | None]
# ... and in its batch: (future, offset delta, timestamp, key size, value size, on_delivery)
BatchWaiter = tuple[RecordFuture, int, int, int, int, DeliveryCallback | None]


class Countdown:
    """The one waiter of a send_batch(): counts its records' deliveries down and resolves
    `future` with their number once all are delivered, or fails it with the first error."""

    __slots__ = ("future", "left", "total", "armed")

    def __init__(self, future: "asyncio.Future[int]"):
        self.future = future
        self.left = 0               # records appended and not yet delivered
        self.total = 0
        self.armed = False          # every record of the call is appended

    def delivered(self, n: int) -> None:
        self.left -= n
        self.settle()

    def settle(self) -> None:
        if self.left == 0 and self.armed and not self.future.done():
            self.future.set_result(self.total)

    def failed(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)
            self.future.exception()     # retrieved, as send()'s futures: an abort is no news


def record_size(key: bytes | None, value: bytes | None, headers: bytes = b"") -> int:
    """Upper-bound estimate of a record's encoded size in a batch (uncompressed); `headers`
    as clients.protocol.record_writer.encode_headers gives them."""
    return (_RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
            + len(headers))


_INVALID_STATE = (asyncio.InvalidStateError, concurrent.futures.InvalidStateError)


def resolve_future(fut: RecordFuture, md: RecordMetadata) -> None:
    try:
        fut.set_result(md)
    except _INVALID_STATE:
        pass        # cancelled by its owner (done() first would cost a lock per record)


def reject_future(fut: RecordFuture, error: Exception) -> None:
    if not fut.done():
        fut.set_exception(error)
        if hasattr(fut, "get_loop"):
            fut.exception()  # asyncio: mark retrieved; callers may rely on callbacks alone


class ProducerBatch(BatchWriter):
    """Records for one partition, sent and acknowledged together. Each record is encoded
    into the batch as it is appended (BatchWriter); what is kept per record is only the
    waiter of a `send()` (its future, offset delta and sizes). Records appended by a
    `send_batch()` are counted per call in `runs` instead (one countdown each)."""

    __slots__ = ("tp", "waiters", "runs", "size", "created", "deadline", "attempts",
                 "retry_at", "producer_id", "producer_epoch", "base_sequence", "built",
                 "done", "_done_callbacks", "in_flight", "error_on_retry")

    def __init__(self, tp: TopicPartition, now: float, deadline: float):
        super().__init__()
        self.tp = tp
        self.waiters: list[BatchWaiter] = []
        self.runs: list[list] = []        # [countdown, records of it in this batch]
        self.size = BATCH_OVERHEAD
        self.created = now
        self.deadline = deadline          # delivery.timeout.ms from creation
        self.attempts = 0
        self.retry_at = 0.0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.built: bytes | None = None
        self.done = False
        self.in_flight = False
        self.error_on_retry: BaseException | None = None
        self._done_callbacks: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return (f"<ProducerBatch {self.tp} n={self.count} seq={self.base_sequence} "
                f"attempts={self.attempts}>")

    @property
    def record_count(self) -> int:
        return self.count

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.count - 1) & INT32_MAX

    @property
    def is_retry(self) -> bool:
        return self.attempts > 0

    @property
    def is_open(self) -> bool:
        """Records may still be appended: not closed for sending, not a retry."""
        return self.base_sequence == NO_SEQUENCE and self.attempts == 0 and self.built is None

    def has_room(self, size: int, batch_size: int) -> bool:
        return not self.count or self.size + size <= batch_size

    def add(self, timestamp: int, key: bytes | None, value: bytes | None, headers: bytes,
            size: int, waiter: "Waiter | Countdown") -> None:
        """Encode a record into the batch; `waiter` hears of its outcome: a send()'s
        (future, timestamp, key size, value size, on_delivery) or a send_batch()'s
        countdown."""
        delta = self.count
        self.append(timestamp, key, value, headers)
        self.size += size
        if type(waiter) is tuple:
            fut, ts, ksz, vsz, cb = waiter
            self.waiters.append((fut, delta, ts, ksz, vsz, cb))
        else:
            runs = self.runs
            if runs and runs[-1][0] is waiter:
                runs[-1][1] += 1
            else:
                runs.append([waiter, 1])

    def build(self, compression: int, level: int | None, transactional: bool = False) -> bytes:
        """The batch's bytes; built once, again only if its producer identity changed."""
        if self.built is None:
            self.built = self.finish(compression=compression, compression_level=level,
                                     producer_id=self.producer_id,
                                     producer_epoch=self.producer_epoch,
                                     base_sequence=self.base_sequence,
                                     transactional=transactional)
        return self.built

    def reset_sequence(self) -> None:
        """Forget the producer identity (an epoch bump): the next drain re-sequences it."""
        self.base_sequence = NO_SEQUENCE
        self.built = None

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        if self.done:
            fn()
        else:
            self._done_callbacks.append(fn)

    def complete(self, base_offset: int, log_append_time: int) -> None:
        """Resolve every record's future with its RecordMetadata (offset -1 when unknown)."""
        if self.done:
            return
        self.done = True
        self.resolve_waiters(base_offset, log_append_time)
        for countdown, n in self.runs:
            countdown.delivered(n)
        self._finish()

    def record_metadata(self, base_offset: int, log_append_time: int,
                        ) -> list[RecordMetadata]:
        """Each send()'s RecordMetadata, in the order of `waiters`."""
        topic, partition = self.tp
        known = base_offset >= 0
        # tuple.__new__: half the cost of the namedtuple's own constructor
        return [_new_tuple(RecordMetadata, (topic, partition,
                                            base_offset + delta if known else -1,
                                            log_append_time if log_append_time != -1 else ts,
                                            ksz, vsz))
                for _, delta, ts, ksz, vsz, _ in self.waiters]

    def resolve_waiters(self, base_offset: int, log_append_time: int) -> None:
        """Resolve the send()s' futures one by one, each then its on_delivery (a subclass
        may resolve them all at once: clients/producer.py)."""
        if not self.waiters:
            return
        # resolve_future and run_delivery_callback inline: a call each per record
        for (fut, _, _, _, _, cb), md in zip(self.waiters,
                                             self.record_metadata(base_offset, log_append_time)):
            try:
                fut.set_result(md)
            except _INVALID_STATE:
                pass        # cancelled by its owner
            if cb is not None:
                try:
                    cb(None, md)
                except Exception:  # a user callback must not break the producer
                    _log_callback_failure()

    def fail(self, error: Exception) -> None:
        if self.done:
            return
        self.done = True
        self.reject_waiters(error)
        for countdown, _ in self.runs:
            countdown.failed(error)
        self._finish()

    def reject_waiters(self, error: Exception) -> None:
        """Fail the send()s' futures, each then its on_delivery."""
        for fut, _, _, _, _, cb in self.waiters:
            reject_future(fut, error)
            if cb is not None:
                run_delivery_callback(cb, error, None)

    def _finish(self) -> None:
        self.buf = bytearray()  # nobody needs the bytes any more: free them
        self.built = None
        callbacks, self._done_callbacks = self._done_callbacks, []
        for fn in callbacks:
            fn()


def run_delivery_callback(cb: DeliveryCallback, err: Exception | None,
                          md: RecordMetadata | None) -> None:
    """Call a user's on_delivery; what it raises is logged, not the producer's failure."""
    try:
        cb(err, md)
    except Exception:  # a user callback must not break the producer
        _log_callback_failure()


def _log_callback_failure() -> None:
    """In an except block: what a user's on_delivery raised, logged with its traceback."""
    logging.getLogger("strom.client.producer").exception("on_delivery callback failed")


class RecordAccumulator:
    """Per-partition queues of batches, plus the sequence state of an idempotent producer.

    `leader_of(tp) -> node id or -1` is passed to `ready`/`drain` so that this stays sans-io.
    """

    def __init__(self, *, batch_size: int = 16384, linger: float = 0.005,
                 buffer_memory: int = 32 * 1024 * 1024, compression: int = 0,
                 compression_level: int | None = None, delivery_timeout: float = 120.0,
                 max_in_flight: int = 5, idempotent: bool = False, transactional: bool = False):
        self.batch_size = batch_size
        self.linger = linger
        self.buffer_memory = buffer_memory
        self.compression = compression
        self.compression_level = compression_level
        self.delivery_timeout = delivery_timeout
        self.max_in_flight = max_in_flight
        self.idempotent = idempotent
        self.transactional = transactional   # batches carry the transactional flag
        # A transactional producer's gate: may batches of this partition be drained yet?
        # (Only once AddPartitionsToTxn added it to the transaction.)
        self.gate: Callable[[TopicPartition], bool] | None = None
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.used = 0                    # buffer bytes reserved by records not yet done
        self.flushes = 0                 # flush() calls under way
        self.closing = False
        self.waiting_for_memory = 0      # sends blocked in reserve (makes everything ready)
        # Idempotence: per-partition sequence state.
        self.producer_id = -1
        self.producer_epoch = -1
        self.next_sequence: dict[TopicPartition, int] = {}
        self.last_acked: dict[TopicPartition, int] = {}
        self.in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self._drain_start = 0

    # ------------------------------------------------------------------ memory

    def reserve(self, size: int) -> bool:
        """Take `size` bytes of buffer memory if they are free."""
        if self.used + size > self.buffer_memory and self.used > 0:
            return False
        self.used += size
        return True

    def deallocate(self, batch: ProducerBatch) -> None:
        """Give a completed batch's memory back and forget it."""
        self.used -= batch.size - BATCH_OVERHEAD
        self.incomplete.discard(batch)
        flights = self.in_flight.get(batch.tp)
        if flights and batch in flights:
            flights.remove(batch)
        batch.in_flight = False

    # ------------------------------------------------------------------ appending

    def append(self, tp: tuple[str, int], timestamp: int, key: bytes | None,
               value: bytes | None, headers: bytes, size: int, waiter: "Waiter | Countdown",
               now: float, abort_on_new_batch: bool = False) -> ProducerBatch | None:
        """Append a record whose memory is reserved (`headers` encoded by
        clients.protocol.record_writer.encode_headers) to the open batch of `tp`, or to a
        new one (then its `count` is 1). None when `abort_on_new_batch` and the record
        would open a new batch (the sticky partitioner then moves on and the caller
        appends elsewhere). `tp` may be a plain (topic, partition) tuple when the partition
        has batches already."""
        # (A plain tuple hashes and compares as the TopicPartition key.)
        dq = self.batches.get(tp)  # type: ignore[call-overload]
        if dq is None:
            dq = self.batches[TopicPartition(*tp)] = deque()
        elif dq:
            last = dq[-1]
            # is_open and has_room, inline: this is every send()'s path
            if (last.built is None and last.attempts == 0 and last.base_sequence == NO_SEQUENCE
                    and (not last.count or last.size + size <= self.batch_size)):
                last.add(timestamp, key, value, headers, size, waiter)
                return last
        if abort_on_new_batch:
            return None
        batch = ProducerBatch(TopicPartition(*tp), now, now + self.delivery_timeout)
        batch.add(timestamp, key, value, headers, size, waiter)
        dq.append(batch)
        self.incomplete.add(batch)
        return batch

    def adopt(self, batch: ProducerBatch) -> None:
        """Queue a batch whose records were appended elsewhere (the sync Producer appends in
        its callers' threads) after everything queued for its partition; its records'
        memory is counted in use from now on."""
        dq = self.batches.get(batch.tp)
        if dq is None:
            dq = self.batches[batch.tp] = deque()
        dq.append(batch)
        self.incomplete.add(batch)
        self.used += batch.size - BATCH_OVERHEAD

    def open_batch(self, tp: TopicPartition) -> ProducerBatch | None:
        """The batch records of `tp` would be appended to now, if it is open."""
        dq = self.batches.get(tp)
        if dq:
            last = dq[-1]
            if last.is_open:
                return last
        return None

    # ------------------------------------------------------------------ sending

    def _sendable(self, tp: TopicPartition, batch: ProducerBatch, now: float) -> bool:
        """May the head batch of `tp` go out now, as far as ordering is concerned?"""
        flights = self.in_flight.get(tp)
        n = len(flights) if flights else 0
        if batch.attempts:         # a retry (is_retry, without the call)
            return n == 0 and batch.retry_at <= now
        return n < self.max_in_flight

    def ready(self, leader_of: Callable[[TopicPartition], int],
              now: float) -> tuple[set[int], float | None, set[str]]:
        """(nodes with a batch to send now, seconds until the next batch may become ready
        or None, topics whose leader is unknown)."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay: float | None = None
        hurry = self.flushes > 0 or self.closing or self.waiting_for_memory > 0
        gate = self.gate
        for tp, dq in self.batches.items():
            if not dq or (gate is not None and not gate(tp)):
                continue
            head = dq[0]
            leader = leader_of(tp)
            if leader < 0:
                unknown.add(tp.topic)
                continue
            if leader in nodes:
                continue
            flights = self.in_flight.get(tp)
            if head.attempts:      # a retry (is_retry, without the call)
                if flights:
                    continue         # retries wait until the partition has nothing in flight
                wait = head.retry_at - now
            elif flights and len(flights) >= self.max_in_flight:
                continue
            elif hurry or len(dq) > 1 or head.size >= self.batch_size:
                wait = 0.0
            else:
                wait = head.created + self.linger - now
            if wait <= 0:
                nodes.add(leader)
            elif next_delay is None or wait < next_delay:
                next_delay = wait
        return nodes, next_delay, unknown

    def drain(self, leader_of: Callable[[TopicPartition], int], nodes: Iterable[int],
              max_request_size: int, now: float) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each of `nodes`, up to
        `max_request_size` bytes per node (the first batch always fits), closing and
        building each. Returned batches are marked in flight."""
        wanted = set(nodes)
        out: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        tps = list(self.batches)
        if not tps:
            return out
        # Rotate the starting partition so that no partition is always last to be drained.
        start = self._drain_start % len(tps)
        self._drain_start += 1
        gate = self.gate
        for tp in tps[start:] + tps[:start]:
            dq = self.batches[tp]
            if not dq or (gate is not None and not gate(tp)):
                continue
            leader = leader_of(tp)
            if leader not in wanted:
                continue
            head = dq[0]
            if not self._sendable(tp, head, now):
                continue
            data = self._close(head)
            used = sizes.get(leader, 0)
            if used and used + len(data) > max_request_size:
                continue
            dq.popleft()
            sizes[leader] = used + len(data)
            out.setdefault(leader, []).append(head)
            head.in_flight = True
            head.attempts += 1
            self.in_flight.setdefault(tp, []).append(head)
        return out

    def _close(self, batch: ProducerBatch) -> bytes:
        if self.idempotent and batch.base_sequence == NO_SEQUENCE:
            seq = self.next_sequence.get(batch.tp, 0)
            batch.producer_id = self.producer_id
            batch.producer_epoch = self.producer_epoch
            batch.base_sequence = seq
            batch.built = None
            self.next_sequence[batch.tp] = (seq + batch.count) & INT32_MAX
        return batch.build(self.compression, self.compression_level, self.transactional)

    # ------------------------------------------------------------------ outcomes

    def acknowledged(self, batch: ProducerBatch) -> None:
        """The broker has the batch: its sequence is the partition's last acknowledged."""
        if self.idempotent and batch.base_sequence != NO_SEQUENCE:
            self.last_acked[batch.tp] = batch.last_sequence

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        """Is `batch` the first one the broker has not acknowledged yet? An
        OUT_OF_ORDER_SEQUENCE_NUMBER for any later batch only means an earlier one failed."""
        last = self.last_acked.get(batch.tp, -1)
        return batch.base_sequence == ((last + 1) & INT32_MAX)

    def reenqueue(self, batch: ProducerBatch, now: float, backoff: float) -> None:
        """Put a batch that will be retried back at the head of its queue, before any
        batch with a higher sequence (or any fresh batch)."""
        flights = self.in_flight.get(batch.tp)
        if flights and batch in flights:
            flights.remove(batch)
        batch.in_flight = False
        batch.retry_at = now + backoff
        dq = self.batches.setdefault(batch.tp, deque())
        key = (batch.base_sequence, batch.created)
        i = 0
        while i < len(dq) and dq[i].is_retry and (dq[i].base_sequence, dq[i].created) < key:
            i += 1
        dq.insert(i, batch)

    def expired(self, now: float) -> list[ProducerBatch]:
        """Batches not in flight whose delivery timeout has passed, removed from the
        queues (the caller fails them)."""
        out = []
        for dq in self.batches.values():
            while dq and dq[0].deadline <= now:
                out.append(dq.popleft())
            # Later batches are younger, except retries put back at the head.
        return out

    def reset_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0, and
        batches not yet acknowledged will be re-sequenced when drained next."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence.clear()
        self.last_acked.clear()
        for dq in self.batches.values():
            for b in dq:
                b.reset_sequence()

    def abort_all(self, error: BaseException) -> list[ProducerBatch]:
        """Remove every queued batch (not those in flight); the caller fails them."""
        out = [b for dq in self.batches.values() for b in dq]
        self.batches.clear()
        return out

    @property
    def has_queued(self) -> bool:
        return any(self.batches.values())

    @property
    def in_flight_count(self) -> int:
        return sum(len(v) for v in self.in_flight.values())
