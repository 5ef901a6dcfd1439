"""strom's Kafka client for Python.

    from clients import Producer, Consumer, AdminClient, NewTopic, TopicPartition

The blocking clients here run an asyncio core (`clients.aio`: AsyncProducer, AsyncConsumer,
AsyncAdminClient) on an I/O thread of their own; both take Kafka's configuration keys as a
dict or as Python keywords. docs/CLIENTS.md has the whole API.

Names are imported on first use: the broker imports `clients.protocol` and must not pay
for (or depend on) the client classes.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clients.admin import AdminClient
    from clients.aio.consumer import ConsumerGroupMetadata
    from clients.aio.transactions import TransactionAbortedError, TransactionStateError
    from clients.consumer import Consumer
    from clients.producer import Producer
    from clients.serde import (AvroSerde, BytesSerde, Deserializer, IntegerSerde, JsonSerde,
                               LongSerde, Serde, Serializer, StringSerde)
    from clients.types import (ConsumerRecord, NewTopic, OffsetAndMetadata, OffsetAndTimestamp,
                               PreparedTransaction, RecordMetadata, TopicPartition)

_HOME = {
    "AdminClient": "clients.admin", "Consumer": "clients.consumer", "Producer": "clients.producer",
    "ConsumerGroupMetadata": "clients.aio.consumer",
    "TransactionAbortedError": "clients.aio.transactions",
    "TransactionStateError": "clients.aio.transactions",
    **{name: "clients.serde" for name in (
        "AvroSerde", "BytesSerde", "Deserializer", "IntegerSerde", "JsonSerde", "LongSerde",
        "Serde", "Serializer", "StringSerde")},
    **{name: "clients.types" for name in (
        "ConsumerRecord", "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp",
        "PreparedTransaction", "RecordMetadata", "TopicPartition")},
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'clients' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
