"""KafkaBasedLog: a compacted topic read from the start into memory and followed (Kafka's
class of that name), the storage under Connect's distributed offset, config and status
stores.

    log = KafkaBasedLog("connect-offsets", {"bootstrap.servers": "h:9092"}, 25, -1,
                        consumed=on_record, config_key="offset.storage.topic",
                        purpose="source connector offsets")
    await log.start()          # topic created if missing, everything read once
    md = await log.send(b"key", b"value")
    await log.read_to_end()    # everything up to the end offsets of now was consumed
    await log.stop()

start() creates the topic when it is missing (cleanup.policy=compact, the partitions and
replication factor given; -1: the broker's default), or checks that an existing one is
compacted (ConnectError with Kafka's message otherwise), assigns all its partitions to a
consumer without a group, reads from the beginning up to the end offsets taken then (with
read_committed: the last stable offsets) and leaves a task polling: `consumed(record)` is
called for every record, in offset order per partition, on the event loop.

End offsets come from an admin client, as in Kafka: asking the consumer would wait behind
its poll. Writes go through an idempotent producer with acks=all.

Concurrency: one event loop. `consumed` runs on it (keep it quick; an exception it raises
is logged and the record skipped). `offsets()` may be read from any thread.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from clients.aio.admin import AsyncAdminClient
from clients.aio.consumer import AsyncConsumer
from clients.aio.producer import AsyncProducer
from clients.config import KEYS
from clients.protocol.errors import BY_NAME, KafkaError
from clients.types import ConsumerRecord, NewTopic, RecordMetadata, TopicPartition

from ..api import ConnectError

__all__ = ["KafkaBasedLog", "KeyPositions", "LogBacked", "client_settings"]

log = logging.getLogger("strom.connect.kafka_log")

TopicAlreadyExistsError = BY_NAME["TOPIC_ALREADY_EXISTS"]

_POLL_TIMEOUT = 0.2     # seconds; also how late a read_to_end sees a position move past markers
_STOP_TIMEOUT = 5.0
# Keys a client must not take from the shared config: this log sets them itself.
_OWN_KEYS = {"group.id", "group.instance.id", "transactional.id", "isolation.level",
             "enable.auto.commit", "auto.offset.reset", "acks", "enable.idempotence",
             "key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


def client_settings(kind: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `client_config` that a client of `kind` ("producer", "consumer",
    "admin") takes: bootstrap.servers, security keys, timeouts... A worker's config holds
    keys of every client kind (and its own); each client gets those it knows."""
    known = KEYS[kind]
    return {k: v for k, v in client_config.items() if k in known and k not in _OWN_KEYS}


def cleanup_policy_message(topic: str, config_key: str, purpose: str, found: str) -> str:
    """Kafka's TopicAdmin message for an internal topic that is not compacted."""
    return (f"Topic '{topic}' supplied via the '{config_key}' property is required to have "
            f"'cleanup.policy=compact' to guarantee consistency and durability of {purpose}, "
            f"but found the topic currently has 'cleanup.policy={found}'. Continuing would "
            f"likely result in eventually losing {purpose} and problems restarting this "
            f"Connect cluster in the future. Change the '{config_key}' property in the "
            f"Connect worker configurations to use a topic with 'cleanup.policy=compact'.")


class KeyPositions:
    """Per key, the (partition, offset) of the record last applied to a store's memory.

    A store that applies its own write as soon as it is acknowledged (read-your-writes)
    asks `newer()` before applying a consumed record, so an older record of the key read
    afterwards does not undo it, and the acknowledged record itself is not applied twice.
    Records of one key land in one partition (the key's hash); when they do not (keys that
    differ only in JSON spelling), offsets are not comparable and the later one wins."""

    def __init__(self) -> None:
        self._last: dict[Any, tuple[int, int]] = {}

    def newer(self, key: Any, partition: int, offset: int) -> bool:
        """True (and remembered) when the record is not behind the last applied one."""
        last = self._last.get(key)
        if last is not None and last[0] == partition and offset <= last[1]:
            return False
        self._last[key] = (partition, offset)
        return True


class KafkaBasedLog:
    """See the module docstring."""

    def __init__(self, topic: str, client_config: Mapping[str, Any], topic_partitions: int,
                 replication_factor: int, consumed: Callable[[ConsumerRecord], None],
                 read_committed: bool = True, producer: bool = True, *,
                 config_key: str | None = None, purpose: str = "data",
                 topic_config: Mapping[str, str] | None = None):
        """`config_key` (e.g. "offset.storage.topic") and `purpose` (e.g. "source
        connector offsets") name the topic in errors; with `config_key` None an existing
        topic's cleanup policy is not checked. `topic_config`: more configs for a topic
        created here (cleanup.policy is always compact)."""
        if not topic or not topic.strip():
            raise ConnectError(f"Must specify topic for {purpose}.")
        self.topic = topic
        self.config_key = config_key
        self.purpose = purpose
        self._client_config = dict(client_config)
        self._topic_partitions = topic_partitions
        self._replication_factor = replication_factor
        self._topic_config = {**(topic_config or {}), "cleanup.policy": "compact"}
        self._consumed = consumed
        self.read_committed = read_committed
        self._want_producer = producer
        self._admin: AsyncAdminClient | None = None
        self._consumer: AsyncConsumer | None = None
        self._producer: AsyncProducer | None = None
        self._tps: list[TopicPartition] = []
        self._positions: dict[int, int] = {}
        self._waiters: list[tuple[dict[int, int], asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.partitions = 0          # the topic's partition count, known after start()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Create or check the topic, read it to the end and keep following it. Raises
        ConnectError (a topic that is not compacted, no partition metadata) or the
        client's error; the clients are closed again then."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        self._admin = AsyncAdminClient(client_settings("admin", self._client_config))
        await self._ensure_topic()
        consumer_cfg = client_settings("consumer", self._client_config)
        consumer_cfg.update({"enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": ("read_committed" if self.read_committed
                                                 else "read_uncommitted")})
        self._consumer = AsyncConsumer(config=consumer_cfg)
        partitions = await self._consumer.partitions_for(self.topic)
        if not partitions:
            raise ConnectError(
                f"Could not look up partition metadata for topic '{self.topic}' in allotted "
                f"period. This could indicate a connectivity issue, unavailable topic "
                f"partitions, or if this is your first use of the topic it may have taken "
                f"too long to create.")
        self.partitions = len(partitions)
        self._tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        await self._consumer.assign(self._tps)
        await self._consumer.seek_to_beginning(*self._tps)
        for tp in self._tps:
            self._positions[tp.partition] = await self._consumer.position(tp)
        if self._want_producer:
            producer_cfg = client_settings("producer", self._client_config)
            producer_cfg.update({"acks": "all", "enable.idempotence": True, "linger.ms": 0})
            self._producer = AsyncProducer(producer_cfg)
            await self._producer.start()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"strom-connect-log-{self.topic}")
        await self.read_to_end()
        log.info("read topic %s to its end (%d partitions)", self.topic, self.partitions)

    async def _ensure_topic(self) -> None:
        assert self._admin is not None
        new = NewTopic(self.topic, self._topic_partitions, self._replication_factor,
                       dict(self._topic_config))
        try:
            await self._admin.create_topics([new])
            log.info("created topic %s (%d partitions, replication factor %d, compacted)",
                     self.topic, self._topic_partitions, self._replication_factor)
            return
        except TopicAlreadyExistsError:
            pass
        if self.config_key is None:
            return
        try:
            entries = await self._admin.describe_configs("topic", self.topic,
                                                         ["cleanup.policy"])
        except KafkaError as e:
            # Kafka's rule: without the permission (or an old broker) the check is skipped.
            log.info("Unable to use admin client to verify the cleanup policy of '%s' topic "
                     "is 'compact' (%s)", self.topic, e)
            return
        entry = entries.get("cleanup.policy")
        value = entry.value if entry is not None and entry.value is not None else "delete"
        policies = {p.strip() for p in value.split(",") if p.strip()}
        if policies != {"compact"}:
            raise ConnectError(cleanup_policy_message(self.topic, self.config_key,
                                                      self.purpose, ",".join(sorted(policies))))

    async def stop(self) -> None:
        """Stop following the topic, deliver what was sent and close the clients. Waiting
        read_to_end() calls fail with ConnectError."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=_STOP_TIMEOUT)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._fail_waiters(ConnectError(f"the log of topic {self.topic} was stopped"))
        await self._close_clients()

    async def _close_clients(self) -> None:
        producer, consumer, admin = self._producer, self._consumer, self._admin
        self._producer = self._consumer = self._admin = None
        for close in ((producer.close() if producer else None),
                      (consumer.close(autocommit=False) if consumer else None),
                      (admin.close() if admin else None)):
            if close is None:
                continue
            try:
                await close
            except Exception as e:
                log.warning("closing a client of topic %s: %r", self.topic, e)

    # ------------------------------------------------------------------ reading

    def offsets(self) -> dict[int, int]:
        """The next offset to be consumed, per partition."""
        return dict(self._positions)

    async def read_to_end(self) -> None:
        """Return once every record below the end offsets of now (the last stable offsets
        under read_committed) has been passed to `consumed` (Kafka's readToEnd)."""
        if self._task is None or self._admin is None:
            raise ConnectError(f"the log of topic {self.topic} is not running")
        ends = await self._end_offsets()
        if self._reached(ends):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((ends, fut))
        await fut

    async def _end_offsets(self) -> dict[int, int]:
        assert self._admin is not None
        found = await self._admin.list_offsets(
            {tp: "latest" for tp in self._tps},
            isolation_level="read_committed" if self.read_committed else "read_uncommitted")
        return {tp.partition: o.offset for tp, o in found.items()}

    def _reached(self, ends: dict[int, int]) -> bool:
        return all(self._positions.get(p, 0) >= end for p, end in ends.items())

    def _fail_waiters(self, error: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(error)

    async def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        backoff = 0.1
        while not self._stopping:
            try:
                records = await consumer.poll(_POLL_TIMEOUT)
                for r in records:
                    try:
                        self._consumed(r)
                    except Exception:
                        log.exception("topic %s: handling the record at %s-%d offset %d "
                                      "failed; skipped", self.topic, r.topic, r.partition,
                                      r.offset)
                # Positions also move past transaction markers without records.
                for tp in self._tps:
                    self._positions[tp.partition] = await consumer.position(tp)
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("reading topic %s failed (%r); retrying in %.1fs", self.topic, e,
                            backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if self._waiters:
                left = []
                for ends, fut in self._waiters:
                    if fut.done():
                        continue
                    if self._reached(ends):
                        fut.set_result(None)
                    else:
                        left.append((ends, fut))
                self._waiters = left

    # ------------------------------------------------------------------ writing

    def _need_producer(self) -> AsyncProducer:
        if self._producer is None:
            raise ConnectError(f"the log of topic {self.topic} has no producer "
                               f"(read-only, or not started)")
        return self._producer

    async def send_nowait(self, key: bytes | None, value: bytes | None,
                          partition: int | None = None) -> "asyncio.Future[RecordMetadata]":
        """Buffer one record; returns its delivery future (to send several and wait once)."""
        return await self._need_producer().send(self.topic, value, key=key,
                                                partition=partition)

    async def send(self, key: bytes | None, value: bytes | None,
                   partition: int | None = None) -> RecordMetadata:
        """Write one record and wait until the broker acknowledged it (acks=all)."""
        fut = await self.send_nowait(key, value, partition)
        return await fut

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged (or failed)."""
        if self._producer is not None:
            await self._producer.flush()


class LogBacked:
    """A store over one KafkaBasedLog (`self.log`): its life is the log's."""

    log: KafkaBasedLog

    async def start(self) -> None:
        await self.log.start()

    async def stop(self) -> None:
        await self.log.stop()

    async def read_to_end(self) -> None:
        await self.log.read_to_end()
