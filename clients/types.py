"""Value types shared by strom's producer, consumer and admin client (sync and async).

Plain immutable tuples, named as in Kafka's Java client, so they hash, compare and print
well and can be used as dict keys (`TopicPartition`).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

__all__ = ["TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp", "RecordMetadata",
           "ConsumerRecord", "NewTopic", "PreparedTransaction", "Header", "DeliveryCallback", "TIMESTAMP_CREATE_TIME",
           "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE"]

Header = tuple[str, bytes | None]

TIMESTAMP_NOT_AVAILABLE = -1
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed (or to be committed) position: the offset of the next record to read."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record landed. `offset` is -1 with acks=0 (no answer to read it
    from); `timestamp` is the create time sent, or the broker's LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


# A producer's per-record callback: (None, metadata) once delivered, (error, None) if not.
DeliveryCallback = Callable[[Exception | None, RecordMetadata | None], Any]


class ConsumerRecord(NamedTuple):
    """A record poll() returned. `headers` is a list of (key, value) pairs, or () for a
    record without headers (one shared tuple: nothing to build per record). The consumer
    builds these with tuple.__new__ in the field order of clients.protocol.records'
    ROW_FIELDS."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int          # TIMESTAMP_CREATE_TIME or TIMESTAMP_LOG_APPEND_TIME
    key: object                  # bytes, or what the key deserializer made of them
    value: object
    headers: Sequence[Header] = ()
    leader_epoch: int = -1
    serialized_key_size: int = -1
    serialized_value_size: int = -1


class NewTopic(NamedTuple):
    """A topic to create. -1 partitions / replication factor: the broker's defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: dict[str, str] = {}
    replica_assignment: dict[int, list[int]] | None = None


class PreparedTransaction(NamedTuple):
    """A transaction a producer delivered but left open (`Producer.prepare_transaction()`),
    for another process to commit or abort by its producer id and epoch
    (`AdminClient.complete_transaction`). Producer id -1: nothing was sent, nothing to end."""

    transactional_id: str
    producer_id: int
    producer_epoch: int

    @property
    def empty(self) -> bool:
        return self.producer_id < 0
