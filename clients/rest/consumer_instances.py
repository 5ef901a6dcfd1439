"""The v2 consumer instances one REST proxy holds: an AsyncConsumer each, found by
(group, name), forgotten after `consumer.instance.timeout.ms` without a request.

Ownership: an instance answers only the principal that created it (the same user with the
same password; with authentication off every request is the one anonymous principal). To
anyone else it is 404/40403, as if it did not exist: its consumer acts on the broker with
its creator's credentials, and a 403 would tell a stranger the name is in use. A stranger's
request neither waits for the instance nor restarts its idle clock.

Concurrency: a request works on an instance only inside `ConsumerInstances.use()`, which
finds it (404/40403 when unknown or idle too long), marks it in use so expiry passes it
by, and holds its lock, so an instance serves one request at a time (as Confluent's proxy
serializes on its consumer state). Every request restarts the idle clock, at its start and
at its end (a long read does not count as idle time). A background task started with the
first instance closes those idle past the timeout about once a second; a lookup that finds
one idle past it answers 404 at once, without waiting for that task.

The read (`ConsumerInstance.read`) keeps the consumer's position equal to what the client
was given: a record polled but not handed out is sought back to, so auto-commit, an empty
commit and close() commit exactly what the client has seen.
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from clients.aio.consumer import AsyncConsumer
from clients.rest.errors import (CONSUMER_ALREADY_EXISTS, ILLEGAL_STATE, KAFKA_ERROR, RestError,
                                 consumer_instance_not_found)
from clients.rest.kafka import Principal
from clients.types import ConsumerRecord, TopicPartition

__all__ = ["InstanceSettings", "ConsumerInstance", "ConsumerInstances", "Render",
           "already_exists", "illegal_state", "UNSUBSCRIBED", "TOPICS", "PATTERN", "ASSIGNED"]

log = logging.getLogger("strom.rest.consumers")

# How the instance gets its partitions (Kafka's SubscriptionState types): the three are
# mutually exclusive until an unsubscribe.
UNSUBSCRIBED, TOPICS, PATTERN, ASSIGNED = "none", "topics", "pattern", "assigned"

# How long past its own timeout a poll() may run before a read gives up on it.
POLL_GRACE_S = 0.5

# A record turned into the JSON the client gets, and its size as the byte limits count it
# (key and value bytes). Raises ValueError for a record the format cannot represent.
Render = Callable[[ConsumerRecord], tuple[dict[str, Any], int]]


def already_exists() -> RestError:
    return RestError(409, CONSUMER_ALREADY_EXISTS,
                     "Consumer with specified consumer ID already exists in the specified "
                     "consumer group.")


def illegal_state(message: str) -> RestError:
    """Confluent's answer to the Java consumer's IllegalStateException."""
    return RestError(409, ILLEGAL_STATE, f"Illegal state: {message}")


@dataclass(frozen=True)
class InstanceSettings:
    """What a create request chose besides the Kafka consumer's own config."""

    format: str                     # the embedded format: "binary" or "json"
    request_timeout_ms: int         # longest a read waits (consumer.request.timeout.ms)
    response_min_bytes: int = -1    # a read answers once it holds more; -1: at the timeout


class ConsumerInstance:
    """One consumer instance, of the principal `owner` that created it. Use it only inside
    `ConsumerInstances.use()` (its lock held). `mode` is how it gets partitions
    (UNSUBSCRIBED, TOPICS, PATTERN, ASSIGNED)."""

    def __init__(self, group: str, name: str, consumer: AsyncConsumer, settings: InstanceSettings,
                 now: float, owner: Principal):
        self.group = group
        self.name = name
        self.consumer = consumer
        self.settings = settings
        self.owner = owner
        self.mode = UNSUBSCRIBED
        self.lock = asyncio.Lock()
        self.last_used = now
        self.in_use = 0                 # requests holding or waiting for the lock
        self.closed = False

    def owned_by(self, principal: Principal) -> bool:
        """Whether `principal` is the creator: the same user and password (the password
        compared in constant time; the broker checked only the creator's)."""
        return (principal.user == self.owner.user
                and hmac.compare_digest((principal.password or "").encode(),
                                        (self.owner.password or "").encode()))

    async def close(self) -> None:
        """Close the consumer (it commits with auto-commit on and leaves the group); once."""
        if self.closed:
            return
        self.closed = True
        try:
            await self.consumer.close()
        except Exception:
            log.warning("closing consumer instance %s of group %s failed", self.name, self.group,
                        exc_info=True)

    async def read(self, timeout_s: float, max_bytes: int, render: Render) -> list[dict[str, Any]]:
        """Records for one GET .../records. Polls until `timeout_s` has passed, more than
        `settings.response_min_bytes` bytes are held (when not -1), or the next record would
        bring the total to `max_bytes` (Confluent's KafkaConsumerReadTask). A record not
        handed out is sought back to. A record `render` refuses fails the read (RestError
        500) only when it comes first; after others, the read answers those and the refused
        record comes first next time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        min_bytes = self.settings.response_min_bytes
        out: list[dict[str, Any]] = []
        size = 0
        while True:
            batch = await self._poll(max(0.0, deadline - loop.time()))
            if batch is None:
                return out
            taken, full = 0, False
            refused: ValueError | None = None
            for record in batch:
                try:
                    body, n = render(record)
                except ValueError as e:
                    refused, full = e, True
                    break
                if size + n >= max_bytes:
                    full = True
                    break
                out.append(body)
                size += n
                taken += 1
            if taken < len(batch):
                await self._seek_back(batch[taken:])
            if refused is not None and not out:
                bad = batch[taken]
                raise RestError(500, KAFKA_ERROR,
                                f"Kafka error: the record at offset {bad.offset} of "
                                f"{bad.topic}-{bad.partition} cannot be read as "
                                f"{self.settings.format}: {refused}")
            if full or (min_bytes >= 0 and size > min_bytes) or loop.time() >= deadline:
                return out

    async def _poll(self, timeout_s: float) -> list[ConsumerRecord] | None:
        """poll(timeout_s), or None when it runs past its timeout (a guard: poll() keeps to
        its timeout, but a read answers by its deadline whatever happens, as Java's
        poll(timeout) does). Cancelling poll() loses no record: it hands records out without
        awaiting anything after taking them."""
        task = asyncio.ensure_future(self.consumer.poll(timeout_s))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout_s + POLL_GRACE_S)
        except asyncio.CancelledError:
            task.cancel()               # never leave a poll() running outside the lock
            raise
        if task not in done:
            task.cancel()
            await asyncio.wait({task})
            if task.cancelled():
                return None
        return task.result()

    async def _seek_back(self, records: list[ConsumerRecord]) -> None:
        """Position each partition of `records` at its first record there (poll returns a
        partition's records in offset order). Only assigned partitions: poll() runs no
        rebalance between handing records out and this, so that is all of them."""
        first: dict[TopicPartition, int] = {}
        for r in records:
            first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
        assigned = await self.consumer.assignment()
        for tp, offset in first.items():
            if tp in assigned:
                await self.consumer.seek(tp, offset)


class ConsumerInstances:
    """The instances by (group, name); see the module docstring. `clock` is monotonic
    seconds (a test passes its own)."""

    def __init__(self, idle_timeout_ms: int, clock: Callable[[], float] = time.monotonic):
        self.idle_timeout = idle_timeout_ms / 1000.0
        self.clock = clock
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._instances)

    def check_free(self, group: str, name: str) -> None:
        """409/40902 when the group already has a live instance of that name (one idle past
        the timeout is forgotten here, not left to block the name until the next sweep)."""
        instance = self._instances.get((group, name))
        if instance is None:
            return
        if self._idle(instance, self.clock()):
            self._forget(instance)
            return
        raise already_exists()

    def add(self, instance: ConsumerInstance) -> None:
        """Keep `instance` (409/40902 if its name is taken) and start the expiry task."""
        if self._closed:
            raise RestError(503, 503, "The REST proxy is shutting down")
        self.check_free(instance.group, instance.name)
        instance.last_used = self.clock()
        self._instances[(instance.group, instance.name)] = instance
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep_forever(), name="strom-rest-consumer-expiry")

    def _idle(self, instance: ConsumerInstance, now: float) -> bool:
        return instance.in_use == 0 and now - instance.last_used >= self.idle_timeout

    def _find(self, group: str, name: str, principal: Principal) -> ConsumerInstance:
        """The instance, for its owner only: 404/40403 to anyone else, as if there were none."""
        instance = self._instances.get((group, name))
        if instance is None or not instance.owned_by(principal):
            raise consumer_instance_not_found()
        if self._idle(instance, self.clock()):
            self._forget(instance)
            raise consumer_instance_not_found()
        return instance

    def _forget(self, instance: ConsumerInstance) -> None:
        """Drop it from the registry and close it in the background."""
        self._instances.pop((instance.group, instance.name), None)
        task = asyncio.get_running_loop().create_task(self._close_locked(instance))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close_locked(instance: ConsumerInstance) -> None:
        async with instance.lock:
            await instance.close()

    @contextlib.asynccontextmanager
    async def use(self, group: str, name: str, principal: Principal
                  ) -> AsyncIterator[ConsumerInstance]:
        """The instance, its lock held, for one request of `principal`: 404/40403 when there
        is none, another principal made it, it has been idle past the timeout, or it was
        deleted while this request waited."""
        instance = self._find(group, name, principal)
        instance.in_use += 1
        instance.last_used = self.clock()
        try:
            async with instance.lock:
                if instance.closed:
                    raise consumer_instance_not_found()
                yield instance
        finally:
            instance.in_use -= 1
            instance.last_used = self.clock()

    async def delete(self, group: str, name: str, principal: Principal) -> None:
        """Forget and close the instance (after a request it is serving); 404/40403 if none
        or another principal made it."""
        instance = self._find(group, name, principal)
        self._instances.pop((group, name), None)
        await self._close_locked(instance)

    def expire(self) -> list[ConsumerInstance]:
        """Forget (and close in the background) every instance idle past the timeout."""
        now = self.clock()
        idle = [i for i in self._instances.values() if self._idle(i, now)]
        for instance in idle:
            log.info("consumer instance %s of group %s expired after %.0f ms idle",
                     instance.name, instance.group, self.idle_timeout * 1000)
            self._forget(instance)
        return idle

    async def _sweep_forever(self) -> None:
        interval = min(1.0, max(0.05, self.idle_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            self.expire()

    async def wait_closed(self) -> None:
        """Wait for the closes expiry started (tests use it)."""
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def close(self) -> None:
        """Stop expiry and close every instance (at shutdown)."""
        self._closed = True
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        instances = list(self._instances.values())
        self._instances.clear()
        await asyncio.gather(*(self._close_locked(i) for i in instances), return_exceptions=True)
        await self.wait_closed()
