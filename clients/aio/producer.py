"""AsyncProducer: strom's asyncio Kafka producer.

    producer = AsyncProducer({"bootstrap.servers": "localhost:9092"}, linger_ms=5)
    await producer.start()                      # optional: send() starts it too
    fut = await producer.send("t", b"value", key=b"k", headers=[("h", b"1")])
    md = await fut                              # RecordMetadata(topic, partition, offset, ...)
    await producer.flush()
    await producer.close()

`await send(...)` returns once the record is in the accumulator: it only waits for the
topic's metadata and for buffer memory, together at most `max.block.ms` (then
KafkaTimeoutError), and yields to the event loop once when the record opened or filled a
batch, so that the sender takes full batches while a loop of sends goes on. The returned
future resolves with the record's RecordMetadata or fails with the delivery error;
`on_delivery(err, md)` is called then too, on the event loop (keep it quick). Records to
one partition are delivered in `send` order.

One sender task drains ready batches grouped by partition leader into one ProduceRequest
per broker (at most `max.in.flight.requests.per.connection` unanswered per broker),
writes it at once and handles its answer in a done callback of the request's future (no
task per request): success resolves the batch's futures (offset = base offset + the
record's offset delta; timestamp = LogAppendTime if the broker set it, else the create
time); leader errors and lost connections request a metadata update and retry the batch
with a backoff growing from `retry.backoff.ms` to `retry.backoff.max.ms`, within
`retries` and `delivery.timeout.ms`; other errors fail the batch with the error table's
exception. With acks=0 requests get no answer and every offset is -1.

Idempotence (default on, as in Kafka 3): the producer gets a producer id with
InitProducerId and numbers each partition's batches; the accumulator retries them strictly
in order (see clients/aio/accumulator.py), and batches are drained only for brokers with an
open connection and written on it in drain order, so at most 5 batches of a partition are
ever unacknowledged (the broker remembers 5) and a retry is recognised by the broker as a
duplicate of what it already has and answered with the original offsets.
DUPLICATE_SEQUENCE_NUMBER counts as success. OUT_OF_ORDER_SEQUENCE_NUMBER for a batch
behind one that failed is retried with it; for the next batch the broker expects, and
UNKNOWN_PRODUCER_ID, mean the broker lost the producer's state: as Kafka does since
KIP-360, the producer waits for its in-flight requests, bumps its epoch and restarts every
partition's sequence at 0 (its unacknowledged batches are re-sequenced and retried).
Failing or expiring a batch that already had a sequence number also bumps the epoch, so
no later batch is stuck behind the gap.

Transactions (`transactional.id`; the API, state machine and coordinator requests are in
clients/aio/transactions.py): the producer id comes from init_transactions(); send() works
only inside a transaction; a partition's batches (flagged transactional) are drained only
once the partition was added to the transaction; a failed batch makes it abortable.

Concurrency: a single event loop; not thread-safe (the sync `clients.producer.Producer`
runs one on a thread of its own).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import operator
import random
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from clients.config import ClientConfig, ConfigError, acks_value, resolve
from clients.partitioner import DefaultPartitioner, PartitionerFn
from clients.protocol.compression import codec_for_name
from clients.protocol.errors import BY_NAME, KafkaError, for_code
from clients.protocol.messages import api as lookup_api
from clients.protocol.record_writer import encode_headers
from clients.protocol.schema import Struct
from clients.types import DeliveryCallback, RecordMetadata

from .accumulator import (BATCH_OVERHEAD, Countdown, ProducerBatch, RecordAccumulator,
                          RecordFuture, record_size)
from .client import KafkaClient
from .connection import BrokerConnection
from .errors import KafkaConnectionError, KafkaTimeoutError
from .transactions import ProducerTransactions, TransactionManager, fenced, is_fatal
from .wakeup import Broadcast, Wakeup

__all__ = ["AsyncProducer"]

log = logging.getLogger("strom.client.producer")

MessageTooLargeError = BY_NAME["MESSAGE_TOO_LARGE"]
UnknownTopicOrPartitionError = BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]

# Errors after which the partition's leader may have moved: refresh metadata, then retry.
_METADATA_ERRORS = {BY_NAME[n].code for n in (
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION",
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "KAFKA_STORAGE_ERROR", "REPLICA_NOT_AVAILABLE")}
_DUPLICATE_SEQUENCE = BY_NAME["DUPLICATE_SEQUENCE_NUMBER"].code
_PRODUCE = lookup_api("Produce")     # resolved once, not by name per request
_OUT_OF_ORDER_SEQUENCE = BY_NAME["OUT_OF_ORDER_SEQUENCE_NUMBER"].code
_UNKNOWN_PRODUCER_ID = BY_NAME["UNKNOWN_PRODUCER_ID"].code
_INT32_MAX = 2**31 - 1
_TIMESTAMP_MAX = 2**63 - 1      # a record's timestamp is a Kafka Long, never negative

Headers = Sequence[tuple[str, "bytes | str | None"]] | Mapping[str, "bytes | str | None"] | None


class ProducerClosedError(KafkaError):
    """The producer was closed before the record could be delivered."""

    name = "PRODUCER_CLOSED"


def _serializer(s: Any) -> Callable[[str, Any], bytes | None] | None:
    if s is None:
        return None
    if hasattr(s, "serialize"):
        return s.serialize
    if callable(s):
        return s
    raise ConfigError(f"serializer {s!r} is neither a Serializer nor callable(topic, obj)",
                      "value.serializer")


def _as_bytes(obj: Any, what: str) -> bytes | None:
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, str):
        return obj.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None without a {what}.serializer "
                    f"(got {type(obj).__name__})")


def _serialized(out: Any, what: str) -> bytes:
    """A serializer's output that is not bytes (nor None): a bytearray or memoryview as
    bytes (the record encoder takes bytes); anything else is refused at send(). Called only
    then, so a serializer returning bytes costs no call more per record."""
    if isinstance(out, (bytes, bytearray, memoryview)):
        return bytes(out)
    raise TypeError(f"the {what} serializer returned {type(out).__name__}, not bytes or None")


_NO_HEADERS = b"\x00"
PLAIN_RECORD_OVERHEAD = record_size(None, b"", _NO_HEADERS)  # a value-only record's size beyond it


def _checked_timestamp(timestamp_ms: Any) -> int:
    """A timestamp given to send() that is not a plain int in 0..2^63-1: the int it stands
    for (an int subclass, or anything with __index__), else TypeError or ValueError (Kafka's
    ProducerRecord: IllegalArgumentException "Invalid timestamp"). Refused before the
    record is buffered: a batch holding it would fail to encode on every pass of the
    sender, and nothing after it would be sent."""
    try:
        ts = operator.index(timestamp_ms)
    except TypeError:
        raise TypeError(f"timestamp_ms must be an int (milliseconds), not "
                        f"{type(timestamp_ms).__name__}") from None
    if not 0 <= ts <= _TIMESTAMP_MAX:
        raise ValueError(f"Invalid timestamp: {ts}. Timestamp should always be non-negative "
                         f"and at most {_TIMESTAMP_MAX}, or None.")
    return ts


def _encoded_headers(headers: Headers) -> bytes:
    """A record's headers as they go into its batch."""
    if not headers:
        return _NO_HEADERS
    items = headers.items() if isinstance(headers, Mapping) else headers
    return encode_headers([(k, _as_bytes(v, "header value")) for k, v in items])


def _resolver(f: "asyncio.Future[None]") -> Callable[[], None]:
    def resolve() -> None:
        if not f.done():
            f.set_result(None)
    return resolve


class AsyncProducer(ProducerTransactions):
    """See the module docstring. Construct with a config dict and/or keyword arguments."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        given = set(config or ()) | {k.replace("_", ".") for k in kwargs}
        cfg: ClientConfig = resolve("producer", config, **kwargs)
        tid: str | None = cfg["transactional.id"]
        if tid is not None and not (tid and cfg["enable.idempotence"]):
            raise ConfigError("transactional.id: transactions need a non-empty id and "
                              "enable.idempotence=true", "enable.idempotence")
        self.config = cfg
        self._acks = acks_value(cfg["acks"])
        idempotent = bool(cfg["enable.idempotence"])
        max_in_flight = cfg["max.in.flight.requests.per.connection"]
        if idempotent:
            conflict = ("acks" if self._acks != -1 else "retries" if cfg["retries"] == 0
                        else "max.in.flight.requests.per.connection" if max_in_flight > 5
                        else None)
            if conflict is not None:
                if "enable.idempotence" in given or tid is not None:
                    raise ConfigError(f"{conflict}: {cfg[conflict]} conflicts with "
                                      "enable.idempotence=true (needs acks=all, retries > 0, "
                                      "max.in.flight.requests.per.connection <= 5)", conflict)
                idempotent = False      # Kafka's rule: the default gives way silently
        self.idempotent = idempotent
        self._max_in_flight = max(1, max_in_flight)
        self._client = KafkaClient(cfg)
        self._acc = RecordAccumulator(
            batch_size=max(1, cfg["batch.size"]), linger=cfg.ms("linger.ms"),
            buffer_memory=cfg["buffer.memory"],
            compression=codec_for_name(cfg["compression.type"]),
            compression_level=cfg["compression.level"],
            delivery_timeout=cfg.ms("delivery.timeout.ms"),
            max_in_flight=self._max_in_flight, idempotent=idempotent,
            transactional=tid is not None)
        self._partitioner: PartitionerFn = cfg["partitioner"] or DefaultPartitioner(
            cfg["partitioner.ignore.keys"])
        self._sticky_hook = getattr(self._partitioner, "on_new_batch", None)
        # The default partitioner's current sticky partition per topic, read directly.
        self._plain_sticky = (self._partitioner.sticky if type(self._partitioner)
                              is DefaultPartitioner else None)
        self._uses_sticky = getattr(self._partitioner, "uses_sticky", None)
        self._key_ser = _serializer(cfg["key.serializer"])
        self._value_ser = _serializer(cfg["value.serializer"])
        self._max_block = cfg.ms("max.block.ms")
        self._max_request_size = cfg["max.request.size"]
        # send()'s commonest record (bytes value; no key, headers or timestamp) is sized here
        # without _encode_parts when no serializer is set and it cannot be too large.
        self._plain_values = self._key_ser is None and self._value_ser is None
        self._largest_plain = min(self._max_request_size - BATCH_OVERHEAD,
                                  self._acc.buffer_memory)
        self._retries = cfg["retries"]
        self._backoff = cfg.ms("retry.backoff.ms")
        self._backoff_max = max(self._backoff, cfg.ms("retry.backoff.max.ms"))
        self._request_timeout = cfg.ms("request.timeout.ms")
        self._request_timeout_ms = int(self._request_timeout * 1000)   # as Produce says it
        self._wake = Wakeup()        # the sender's: work may be waiting
        self._space = Broadcast()    # a batch completed: buffer memory was freed
        # Called (on the loop) whenever a batch gives its buffer memory back: the sync
        # Producer's callers wait for memory in their own threads.
        self.on_memory_freed: Callable[[], None] | None = None
        self._node_in_flight: dict[int, int] = {}
        # produce requests in flight: answers' futures (acks=0: tasks)
        self._requests: set[asyncio.Future[Any]] = set()
        self._connecting: dict[int, asyncio.Task[None]] = {}
        self._sender: asyncio.Task[None] | None = None
        self._need_bump = False
        self._started = False
        self._closed = False
        self.retried_batches = 0          # statistics: batches sent again after a failure
        self._txn: TransactionManager | None = None
        if tid is not None:
            self._txn = TransactionManager(
                self._client, self._acc, tid, cfg["transaction.timeout.ms"],
                max_block=self._max_block, delivery_timeout=cfg.ms("delivery.timeout.ms"),
                start=self.start, wake=self._wake.set, flush=self.flush,
                drop_queued=self._drop_queued)
            self._acc.gate = self._txn.state.sendable

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect to the cluster (KafkaConnectionError if no bootstrap broker answers
        within request.timeout.ms) and start the sender."""
        if self._started:
            return
        self._started = True
        try:
            await self._client.start()
        except BaseException:
            self._started = False
            raise
        self._sender = asyncio.get_running_loop().create_task(self._run(),
                                                              name="strom-producer-sender")

    async def __aenter__(self) -> "AsyncProducer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until every record sent before this call
        is delivered or failed; KafkaTimeoutError after `timeout` seconds."""
        pending = list(self._acc.incomplete)
        if not pending:
            return
        loop = asyncio.get_running_loop()
        waits = []
        for b in pending:
            f: asyncio.Future[None] = loop.create_future()
            b.add_done_callback(_resolver(f))
            waits.append(f)
        self._acc.flushes += 1
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except TimeoutError:
            left = sum(1 for b in pending if not b.done)
            raise KafkaTimeoutError(f"flush: {left} batches not delivered within {timeout}s") from None
        finally:
            self._acc.flushes -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is buffered (waiting at most `timeout` seconds, None: until done or
        delivery.timeout.ms), then fail what is left with ProducerClosedError and
        disconnect."""
        if self._closed:
            return
        txn = self._txn
        if txn is not None and self._started:
            await txn.abort_open(timeout)   # as Kafka's close()
        self._closed = True
        self._acc.closing = True
        self._wake.set()
        if self._sender is not None and not self._sender.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._sender), timeout)
            except TimeoutError:
                pass
            except Exception as e:  # the sender crashed: still close
                log.error("producer sender failed: %r", e)
            self._sender.cancel()
            await asyncio.wait([self._sender])
        pending = list(self._requests) + list(self._connecting.values())
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
        if txn is not None:
            await txn.close()
        err = ProducerClosedError("the producer was closed before the record was delivered")
        for b in list(self._acc.incomplete):
            self._finish(b, error=err)
        await self._client.close()

    # ------------------------------------------------------------------ sending

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, waiting up to max.block.ms for its metadata
        (KafkaTimeoutError, or the topic's error such as UNKNOWN_TOPIC_OR_PARTITION)."""
        if not self._started:
            await self.start()
        if not self._client.cluster.partitions_for(topic):
            await self._client.metadata.wait_for_topic(topic, self._max_block)
        return self._client.cluster.partitions_for(topic)

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   headers: Headers = None,
                   on_delivery: DeliveryCallback | None = None,
                   ) -> "asyncio.Future[RecordMetadata]":
        """Buffer one record; returns the future of its RecordMetadata (see the module
        docstring). Raises at once: MessageTooLargeError (record above max.request.size or
        buffer.memory), KafkaTimeoutError (no metadata / no buffer space within
        max.block.ms), TypeError/serializer errors, ValueError (a timestamp_ms outside
        0..2^63-1, as Kafka's "Invalid timestamp"), ProducerClosedError,
        AuthenticationError (the last attempt to connect to a broker was refused)."""
        client = self._client
        if client.pool.authentication_error is not None:
            client.raise_authentication_error()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RecordMetadata] = loop.create_future()
        num = client.metadata.cluster.partition_counts.get(topic, 0)  # (a dict: no call)
        if (self._started and num and (partition is None or partition < num)
                and not self._closed and self._txn is None):
            # The common case, without a second coroutine: metadata known, no transaction.
            waiting = self._append_now(fut, topic, value, key, partition, timestamp_ms,
                                       headers, on_delivery, loop.time())
            if waiting is not None:
                await self._append_when_memory_frees(waiting, loop.time())
            elif self._wake.is_set():
                # A batch was opened or filled: let the sender take it now, or a tight
                # loop of sends fills batch after batch while none goes out, and records
                # wait in the buffer (seconds, unthrottled) instead of on the wire.
                await asyncio.sleep(0)
            return fut
        await self._send(fut, topic, value, key, partition, timestamp_ms, headers, on_delivery)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            partition: int | None = None, timestamp_ms: int | None = None,
                            headers: Headers = None) -> RecordMetadata:
        """send() and wait for delivery."""
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    async def _send(self, fut: RecordFuture, topic: str, value: Any, key: Any,
                    partition: int | None, timestamp_ms: int | None, headers: Headers,
                    on_delivery: DeliveryCallback | None,
                    blocked_since: float | None = None) -> None:
        """Append one record whose outcome goes to `fut` (an asyncio or concurrent future).
        max.block.ms counts from `blocked_since` (time.monotonic(), the loop's clock) when
        the record waited before reaching here (the sync Producer's hand-off)."""
        self._check_sendable()
        if not self._started:
            await self.start()
        loop = asyncio.get_running_loop()
        since = loop.time() if blocked_since is None else blocked_since
        num = self._client.cluster.partition_count(topic)
        if num == 0 or (partition is not None and partition >= num):
            await self._wait_for_partitions(topic, partition, since + self._max_block)
        waiting = self._append_now(fut, topic, value, key, partition, timestamp_ms, headers,
                                   on_delivery, loop.time())
        if waiting is not None:
            await self._append_when_memory_frees(waiting, since)

    def _check_sendable(self) -> None:
        if self._closed:
            raise ProducerClosedError("send() on a closed producer")
        if self._txn is not None:
            self._txn.state.check_send()

    def _append_now(self, fut: RecordFuture, topic: str, value: Any, key: Any,
                    partition: int | None, timestamp_ms: int | None, headers: Headers,
                    on_delivery: DeliveryCallback | None, now: float) -> tuple[Any, ...] | None:
        """send()'s work once the topic's metadata is known: serialize, place and append
        the record (`now`: the loop's time). Returns None when it is appended, or (the
        record is serialized and placed, but buffer.memory is full) what
        `_append_when_memory_frees` needs. The per-record path: keep it lean."""
        cluster = self._client.metadata.cluster
        key_bytes: bytes | None
        value_bytes: bytes | None
        if (key is None and type(value) is bytes and not headers and timestamp_ms is None
                and self._plain_values
                and (size := PLAIN_RECORD_OVERHEAD + len(value)) <= self._largest_plain):
            # The common record, without a call: what _encode_parts would give (inline here
            # and in the sync Producer's _append_here: keep them alike).
            key_bytes, value_bytes, hdrs, ts = None, value, _NO_HEADERS, time.time_ns() // 1_000_000
        else:
            key_bytes, value_bytes, hdrs, size, ts = self._encode_parts(topic, key, value,
                                                                        headers, timestamp_ms)
        acc = self._acc
        if partition is not None and partition >= 0:
            sticky = False      # given (send() checked it against the partition count)
        elif partition is None and key_bytes is None and self._plain_sticky is not None:
            sticky = True       # the default partitioner's sticky rule, without a call
            partition = self._plain_sticky.get(topic)
            if partition is None:
                partition = self._partitioner(topic, key, None, value, value_bytes, cluster)
        else:
            partition, sticky = self._choose_partition(topic, key, key_bytes, value,
                                                       value_bytes, partition, cluster)
        waiter = (fut, ts, -1 if key_bytes is None else len(key_bytes),
                  -1 if value_bytes is None else len(value_bytes), on_delivery)
        if not acc.reserve(size):
            return (topic, partition, sticky, key, key_bytes, value, value_bytes, ts, hdrs,
                    size, waiter)
        self._append(topic, partition, sticky, key, key_bytes, value, value_bytes, ts, hdrs,
                     size, waiter, now, cluster, self._txn)
        return None

    def _encode_parts(self, topic: str, key: Any, value: Any, headers: Headers,
                      timestamp_ms: int | None) -> tuple[bytes | None, bytes | None, bytes, int, int]:
        """A record's serialized key and value, encoded headers, size estimate and timestamp;
        raises what send() raises for them (a serializer's error, TypeError, ValueError,
        MessageTooLargeError). Any thread may call it: it reads only settings."""
        key_ser, value_ser = self._key_ser, self._value_ser
        key_bytes = (key if key is None and key_ser is None
                     else key_ser(topic, key) if key_ser else _as_bytes(key, "key"))
        if key_bytes is not None and type(key_bytes) is not bytes:
            key_bytes = _serialized(key_bytes, "key")
        value_bytes = (value if type(value) is bytes and value_ser is None
                       else value_ser(topic, value) if value_ser else _as_bytes(value, "value"))
        if value_bytes is not None and type(value_bytes) is not bytes:
            value_bytes = _serialized(value_bytes, "value")
        hdrs = _encoded_headers(headers) if headers else _NO_HEADERS
        size = record_size(key_bytes, value_bytes, hdrs)
        if size + BATCH_OVERHEAD > self._max_request_size or size > self._acc.buffer_memory:
            raise self._too_large(size)
        if timestamp_ms is None:
            ts = time.time_ns() // 1_000_000
        elif type(timestamp_ms) is int and 0 <= timestamp_ms <= _TIMESTAMP_MAX:
            ts = timestamp_ms
        else:
            ts = _checked_timestamp(timestamp_ms)
        return key_bytes, value_bytes, hdrs, size, ts

    async def _append_when_memory_frees(self, record: tuple[Any, ...], since: float) -> None:
        """Wait (within max.block.ms from `since`) for the buffer memory of a record
        `_append_now` could not append, then append it."""
        (topic, partition, sticky, key, key_bytes, value, value_bytes, ts, hdrs, size,
         waiter) = record
        await self._wait_for_memory(size, since + self._max_block)
        txn = self._txn
        if txn is not None:
            try:
                txn.state.check_send()      # again: the wait may have ended it
            except Exception:
                self._acc.used -= size
                raise
        self._append(topic, partition, sticky, key, key_bytes, value, value_bytes, ts, hdrs,
                     size, waiter, asyncio.get_running_loop().time(), self._client.cluster, txn)

    def _too_large(self, size: int) -> KafkaError:
        return MessageTooLargeError(
            f"a record of about {size + BATCH_OVERHEAD} bytes is larger than "
            f"max.request.size={self._max_request_size} or "
            f"buffer.memory={self._acc.buffer_memory}")

    def _choose_partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                          value_bytes: bytes | None, partition: int | None,
                          cluster: Any) -> tuple[int, bool]:
        """The record's partition, and whether the sticky partitioner placed it (KIP-480)."""
        if partition is None:
            partition = self._partitioner(topic, key, key_bytes, value, value_bytes, cluster)
            sticky = self._sticky_hook is not None and (
                self._uses_sticky(key_bytes) if self._uses_sticky else key_bytes is None)
            return partition, sticky
        if partition < 0:
            raise ValueError(f"invalid partition {partition}")
        return partition, False

    def _append(self, topic: str, partition: int, sticky: bool, key: Any,
                key_bytes: bytes | None, value: Any, value_bytes: bytes | None, ts: int,
                headers: bytes, size: int, waiter: Any, now: float, cluster: Any,
                txn: "TransactionManager | None") -> ProducerBatch:
        """Put a record whose memory is reserved into its partition's batch."""
        acc = self._acc
        batch = acc.append((topic, partition), ts, key_bytes, value_bytes, headers, size,
                           waiter, now, abort_on_new_batch=sticky)
        if batch is None:
            # KIP-480: the sticky partition's batch is full; move on, then place the record.
            assert self._sticky_hook is not None
            self._sticky_hook(topic, cluster, partition)
            partition = self._partitioner(topic, key, key_bytes, value, value_bytes, cluster)
            batch = acc.append((topic, partition), ts, key_bytes, value_bytes, headers, size,
                               waiter, now)
            assert batch is not None
        if txn is not None:
            txn.add_partition(batch.tp)
        if batch.count == 1 or batch.size >= acc.batch_size:
            self._wake.set()        # a new batch (its linger starts) or a full one
        return batch

    async def send_batch(self, topic: str,
                         records: Iterable[tuple[Any, Any, Headers, int | None, int | None]]
                         ) -> "asyncio.Future[int]":
        """Buffer many records of one topic, each (key, value, headers, timestamp_ms,
        partition), in order; returns ONE future that resolves to their count once every
        one is delivered, or fails with the first error. Cheaper per record than send()
        (no future and no coroutine per record, and a run of records without key or
        partition goes straight into the sticky partition's open batch): for callers
        that track delivery per batch, such as Kafka Connect's source tasks. Raises at
        once as send() does."""
        if self._closed:
            raise ProducerClosedError("send_batch() on a closed producer")
        self._client.raise_authentication_error()
        txn = self._txn
        if txn is not None:
            txn.state.check_send()
        if not self._started:
            await self.start()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        waiting = Countdown(done)
        deadline = loop.time() + self._max_block
        if not self._client.cluster.partition_count(topic):
            await self._wait_for_partitions(topic, None, deadline)
        key_ser, value_ser, acc = self._key_ser, self._value_ser, self._acc
        limit = min(self._max_request_size - BATCH_OVERHEAD, acc.buffer_memory)
        batch_size = acc.batch_size
        # Batches a record may go straight into when it has room: `sticky` for a keyless
        # record after one the default partitioner placed (the sticky partition's open
        # batch), `opened[p]` for a record for explicit partition p (p's open batch, as the
        # last record for p left it; records alternating over partitions included).
        # Nothing can move the sticky partition, close a batch or shrink the topic until
        # this loop awaits something: then both are forgotten. A record placed another way
        # (a key, a new batch) updates or drops what it may have made stale.
        plain_sticky = type(self._partitioner) is DefaultPartitioner
        sticky: ProducerBatch | None = None
        opened: dict[int, ProducerBatch] = {}
        now = loop.time()
        count = 0
        for key, value, headers, timestamp_ms, partition in records:
            if timestamp_ms is None:
                ts = time.time_ns() // 1_000_000
            elif type(timestamp_ms) is int and 0 <= timestamp_ms <= _TIMESTAMP_MAX:
                ts = timestamp_ms
            else:
                ts = _checked_timestamp(timestamp_ms)
            key_bytes = (key if key is None and key_ser is None
                         else key_ser(topic, key) if key_ser else _as_bytes(key, "key"))
            if key_bytes is not None and type(key_bytes) is not bytes:
                key_bytes = _serialized(key_bytes, "key")
            value_bytes = (value if type(value) is bytes and value_ser is None
                           else value_ser(topic, value) if value_ser else _as_bytes(value, "value"))
            if value_bytes is not None and type(value_bytes) is not bytes:
                value_bytes = _serialized(value_bytes, "value")
            if headers:
                hdrs = _encoded_headers(headers)
                size = record_size(key_bytes, value_bytes, hdrs)
            else:
                hdrs = _NO_HEADERS      # record_size inline, for the common record
                size = PLAIN_RECORD_OVERHEAD + (len(key_bytes) if key_bytes else 0) + (
                    len(value_bytes) if value_bytes else 0)
            if size > limit:
                raise self._too_large(size)
            if not acc.reserve(size):
                sticky = None
                opened.clear()
                await self._wait_for_memory(size, loop.time() + self._max_block)
                if txn is not None:
                    try:
                        txn.state.check_send()  # again: the wait may have ended it
                    except BaseException:
                        acc.used -= size
                        raise
                now = loop.time()
            waiting.left += 1
            count += 1
            last = (opened.get(partition) if partition is not None
                    else sticky if key_bytes is None else None)
            if last is not None and last.size + size <= batch_size:
                last.add(ts, key_bytes, value_bytes, hdrs, size, waiting)
                if last.size >= batch_size:
                    self._wake.set()
                    sticky = None
                    opened.clear()
                    await asyncio.sleep(0)      # the sender takes the full batch now
                continue
            cluster = self._client.cluster
            partition_given = partition
            try:
                if partition is not None and partition >= cluster.partition_count(topic):
                    sticky = None
                    opened.clear()
                    await self._wait_for_partitions(topic, partition, deadline)
                    cluster = self._client.cluster
                partition, placed_sticky = self._choose_partition(
                    topic, key, key_bytes, value, value_bytes, partition, cluster)
            except BaseException:
                acc.used -= size        # the record is refused: its memory is free again
                waiting.left -= 1
                raise
            batch = self._append(topic, partition, placed_sticky, key, key_bytes, value,
                                 value_bytes, ts, hdrs, size, waiting, now, cluster, txn)
            placed = batch.tp.partition
            if sticky is not None and sticky.tp.partition == placed:
                sticky = None
            if placed_sticky and plain_sticky and key_bytes is None:
                sticky = batch
            if partition_given is not None:
                opened[placed] = batch
            else:
                opened.pop(placed, None)
            if batch.size >= batch_size:
                sticky = None
                opened.clear()
                await asyncio.sleep(0)
        waiting.total = count
        waiting.armed = True
        waiting.settle()
        return done

    async def _wait_for_partitions(self, topic: str, partition: int | None,
                                   deadline: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._client.metadata.wait_for_topic(topic, max(0.0, deadline - loop.time()))
        except KafkaTimeoutError as e:
            raise KafkaTimeoutError(f"send to {topic}: {e} (max.block.ms="
                                    f"{self.config['max.block.ms']})") from None
        if partition is not None:
            n = len(self._client.cluster.partitions_for(topic))
            if partition >= n:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic} does not exist ({n} partitions)")

    async def _wait_for_memory(self, size: int, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        self._acc.waiting_for_memory += 1
        self._wake.set()
        try:
            while not self._acc.reserve(size):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"no buffer space for a {size}-byte record within max.block.ms="
                        f"{self.config['max.block.ms']} (buffer.memory="
                        f"{self._acc.buffer_memory}, {self._acc.used} in use)")
                await self._space.wait(remaining)
        finally:
            self._acc.waiting_for_memory -= 1

    # ------------------------------------------------------------------ the sender

    async def _run(self) -> None:
        while True:
            try:
                await self._sender_loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: keep sending rather than hang every future
                log.exception("producer sender failed; restarting it")
                await asyncio.sleep(self._backoff)

    async def _sender_loop(self) -> None:
        loop = asyncio.get_running_loop()
        acc = self._acc
        while True:
            self._wake.clear()
            now = loop.time()
            for b in acc.expired(now):
                self._finish(b, error=KafkaTimeoutError(
                    f"{b.tp}: {b.record_count} records expired after delivery.timeout.ms="
                    f"{self.config['delivery.timeout.ms']} ({b.attempts} attempts)"))
            if acc.closing and not acc.incomplete:
                return
            delay: float | None = None
            if self._txn is not None and self._txn.state.failing and acc.has_queued:
                dropped = self._txn.state.dropped_batch_error()   # aborting, or failed
                assert dropped is not None
                self._drop_queued(dropped)
            if self._txn is None and self.idempotent and (acc.producer_id < 0
                                                          or self._need_bump):
                if acc.in_flight_count == 0 and acc.incomplete:
                    if not await self._init_producer_id():
                        await asyncio.sleep(self._backoff)
                    continue
                # Wait for the requests in flight (or for records) before (re)initialising.
            else:
                # The snapshot's leader map itself: a dict lookup per partition, no call.
                leader_of = self._client.metadata.cluster.leaders.__getitem__
                nodes, delay, unknown = acc.ready(leader_of, now)
                if unknown:
                    self._client.metadata.add_topics(unknown)
                    self._client.metadata.request_update()
                    delay = self._backoff if delay is None else min(delay, self._backoff)
                # Only nodes with an open connection: a drained batch goes out on the
                # connection it was drained for, before anything drained after it. (Batches
                # drained while a connection was being opened could reach a new one ahead of
                # retries of earlier ones, and more than the broker's 5 deduplicated batches
                # of a partition could then be unacknowledged: a retry of a batch the broker
                # already had was refused, or written twice after an epoch bump.)
                conns = {}
                for n in nodes:
                    if self._node_in_flight.get(n, 0) >= self._max_in_flight:
                        continue
                    conn = self._client.pool.connection(n)
                    if conn is None:
                        self._connect_soon(n)
                    else:
                        conns[n] = conn
                if conns:
                    drained = acc.drain(leader_of, conns, self._max_request_size, now)
                    for node, batches in drained.items():
                        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
                        self._produce(node, conns[node], batches)
                    if drained:
                        continue
            if self._connecting:
                # Waiting for a connection: still look at delivery timeouts now and then.
                delay = self._backoff if delay is None else min(delay, self._backoff)
            await self._wake.wait(delay)

    def _connect_soon(self, node: int) -> None:
        """Open a connection to `node` in the background (the pool paces failed attempts)
        and wake the sender when it is open or the attempt failed."""
        if node in self._connecting:
            return

        async def connect() -> None:
            try:
                await self._client.connection(node)
            except Exception as e:
                if isinstance(e, (KafkaConnectionError, KafkaTimeoutError, OSError)):
                    log.debug("connecting to broker %s: %s", node, e)
                else:
                    log.warning("connecting to broker %s failed: %r", node, e)
                self._client.metadata.request_update()
                # Not every failure goes through the pool's reconnect backoff (a leader
                # whose address is unknown fails at once): wait here, or the sender would
                # start the next attempt immediately, in a loop.
                await asyncio.sleep(max(self._client.pool.backoff_remaining(node),
                                        self._backoff))
            finally:
                self._connecting.pop(node, None)
                self._wake.set()

        self._connecting[node] = asyncio.get_running_loop().create_task(connect())

    async def _init_producer_id(self) -> bool:
        """Get a producer id (or bump the epoch of ours); False when it must be retried."""
        acc = self._acc
        bump = self._need_bump and acc.producer_id >= 0
        body = {"transactional_id": None, "transaction_timeout_ms": _INT32_MAX,
                "producer_id": acc.producer_id if bump else -1,
                "producer_epoch": acc.producer_epoch if bump else -1}
        try:
            resp = await self._client.request_any("InitProducerId", body)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("InitProducerId failed: %s", e)
            return False
        if resp.error_code:
            err = for_code(resp.error_code)
            if err.retriable:
                return False
            if bump:          # the epoch cannot be bumped: start over with a new id
                acc.producer_id = -1
                return False
            exc = err("InitProducerId: the producer cannot get a producer id")
            for b in acc.abort_all(exc):
                self._finish(b, error=exc)
            return True
        if bump:
            log.info("producer %d: epoch bumped to %d, sequences restart at 0",
                     resp.producer_id, resp.producer_epoch)
        acc.reset_producer(resp.producer_id, resp.producer_epoch)
        self._need_bump = False
        return True

    def _produce_version(self, conn: BrokerConnection) -> int | None:
        """Produce v12+ means transaction version 2 (the leader adds the partition to the
        transaction): a transactional producer of version 0 stays at v11 (as Kafka's).
        None: the connection's negotiated version."""
        if self._txn is not None and not self._txn.tv2:
            return min(conn.version_for("Produce"), 11)
        return None

    def _produce(self, node: int, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """One ProduceRequest to `node` on `conn`, written now (in drain order); its answer
        is handled by a done callback of the request's future (`_produced`), not by a task
        per request: a task's creation and its extra step were a measurable share of the
        sender's Python per request."""
        topics: dict[str, list[dict[str, Any]]] = {}
        by_tp: dict[tuple[str, int], ProducerBatch] = {}
        for b in batches:
            topics.setdefault(b.tp.topic, []).append({"index": b.tp.partition,
                                                      "records": b.built})
            by_tp[(b.tp.topic, b.tp.partition)] = b
        if self._txn is not None:
            self._txn.sent_batch()
        body = {"transactional_id": self._txn.tid if self._txn else None, "acks": self._acks,
                "timeout_ms": self._request_timeout_ms,
                "topic_data": [{"name": t, "partition_data": pd} for t, pd in topics.items()]}
        if self._acks == 0:
            task = asyncio.get_running_loop().create_task(
                self._produce_unacknowledged(node, conn, batches, by_tp, body))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
            return
        try:
            fut = conn.request_nowait(_PRODUCE, body, version=None if self._txn is None
                                      else self._produce_version(conn),
                                      timeout=self._request_timeout)
        except Exception as e:
            self._produced(node, batches, by_tp, None, e)
            return
        self._requests.add(fut)
        fut.add_done_callback(functools.partial(self._answered, node, batches, by_tp))

    def _answered(self, node: int, batches: list[ProducerBatch],
                  by_tp: dict[tuple[str, int], ProducerBatch],
                  fut: "asyncio.Future[Struct]") -> None:
        self._requests.discard(fut)
        if fut.cancelled():         # close(): what is still open fails there
            self._request_ended(node)
            return
        error = fut.exception()
        self._produced(node, batches, by_tp, None if error is not None else fut.result(),
                       error)

    async def _produce_unacknowledged(self, node: int, conn: BrokerConnection,
                                      batches: list[ProducerBatch],
                                      by_tp: dict[tuple[str, int], ProducerBatch],
                                      body: dict[str, Any]) -> None:
        """acks=0: written, and done once the bytes are on their way."""
        error: BaseException | None = None
        try:
            await conn.send("Produce", body)
        except asyncio.CancelledError:
            self._request_ended(node)
            raise
        except Exception as e:
            error = e
        self._produced(node, batches, by_tp, None, error)

    def _produced(self, node: int, batches: list[ProducerBatch],
                  by_tp: dict[tuple[str, int], ProducerBatch], resp: Struct | None,
                  error: BaseException | None) -> None:
        """A produce request ended: its answer (`resp`; None with acks=0), or the error
        that ended it."""
        try:
            if isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
                self._client.metadata.request_update()
                for b in batches:
                    self._retry_or_fail(b, error)
            elif isinstance(error, KafkaError):     # UNSUPPORTED_VERSION and the like
                for b in batches:
                    self._finish(b, error=error)
            elif error is not None:
                raise error
            elif resp is None:
                for b in batches:
                    self._finish(b, base_offset=-1, log_append_time=-1)
            else:
                for t in resp.responses:
                    for p in t.partition_responses:
                        key = (t.name, p.index)
                        if key in by_tp:
                            self._handle(by_tp.pop(key), p)
                for b in by_tp.values():    # the broker did not answer for it: treat as lost
                    self._retry_or_fail(b, KafkaConnectionError(f"no answer for {b.tp}"))
        except Exception as e:
            # A bug or an answer we cannot read: fail the batches still open instead of
            # leaving them in flight forever (flush() and close() would never return).
            log.exception("produce request to broker %s failed unexpectedly", node)
            for b in batches:
                if not b.done:
                    self._finish(b, error=e)
        finally:
            self._request_ended(node)

    def _request_ended(self, node: int) -> None:
        self._node_in_flight[node] -= 1
        self._wake.set()

    def _handle(self, b: ProducerBatch, p: Struct) -> None:
        code = p.error_code
        if code == 0 or code == _DUPLICATE_SEQUENCE:
            self._acc.acknowledged(b)
            self._finish(b, base_offset=p.base_offset, log_append_time=p.log_append_time_ms)
            return
        msg = p.error_message if getattr(p, "error_message", None) else ""
        err = for_code(code)(f"{b.tp}: {msg}" if msg else f"producing to {b.tp}")
        if code in _METADATA_ERRORS:
            self._client.metadata.request_update()
        # (Transactional: any such failure makes the transaction abortable; its abort
        # bumps the epoch.)
        kip360 = self.idempotent and self._txn is None
        if kip360 and code == _OUT_OF_ORDER_SEQUENCE and not self._acc.is_next_sequence(b):
            # An earlier batch of the partition failed; this one follows it again.
            self._retry_or_fail(b, err, force=True)
            return
        if kip360 and code in (_OUT_OF_ORDER_SEQUENCE, _UNKNOWN_PRODUCER_ID):
            # The broker lost this producer's state (KIP-360): new epoch, sequences from 0.
            log.warning("%s: %s for sequence %d; bumping the producer epoch",
                        b.tp, err.name, b.base_sequence)
            self._need_bump = True
            self._retry_or_fail(b, err, force=True)
            return
        self._retry_or_fail(b, err)

    def _retry_or_fail(self, b: ProducerBatch, err: Exception, force: bool = False) -> None:
        retriable = force or getattr(err, "retriable", False)
        if self._txn is not None and (self._txn.state.failing or is_fatal(err)):
            retriable = False           # aborting or failed: nothing more is sent
        now = asyncio.get_running_loop().time()
        if not retriable or b.attempts > self._retries or now >= b.deadline:
            self._finish(b, error=err)
            return
        backoff = min(self._backoff_max, self._backoff * 2 ** (b.attempts - 1))
        backoff *= random.uniform(0.8, 1.2)
        self.retried_batches += 1
        log.debug("retrying %r after %s in %.3fs", b, err, backoff)
        self._acc.reenqueue(b, now, backoff)
        self._wake.set()

    def _drop_queued(self, error: BaseException) -> None:
        """Fail every batch not sent yet (a transaction aborted or failed)."""
        for b in self._acc.abort_all(error):
            self._finish(b, error=error)    # type: ignore[arg-type]

    def _finish(self, b: ProducerBatch, base_offset: int = -1, log_append_time: int = -1,
                error: Exception | None = None) -> None:
        if b.done:
            return
        if error is not None and self.idempotent and b.base_sequence >= 0 and not self._closed:
            # A failed or expired batch that had sequence numbers leaves a gap the broker
            # would make every later batch of its partition wait for: start a new epoch
            # (a transactional producer: once the transaction is aborted).
            if self._txn is not None:
                self._txn.need_bump = True
            else:
                self._need_bump = True
        if error is not None and self._txn is not None:
            # A newer producer took the transactional id (PRODUCER_FENCED from an add, or
            # INVALID_PRODUCER_EPOCH from a leader): the batch says so as the producer does.
            error = fenced(error)   # type: ignore[assignment]
            if not self._closed:
                self._txn.state.failed(error)
                self._wake.set()
        self._acc.deallocate(b)
        if error is None:
            b.complete(base_offset, log_append_time)
        else:
            b.fail(error)
        self._space.notify()
        if self.on_memory_freed is not None:
            self.on_memory_freed()
