"""strom's asyncio Kafka client, on the sans-io `clients.protocol`.

    from clients.aio import AsyncAdminClient, AsyncConsumer, AsyncProducer, KafkaClient

`KafkaClient` (connections, metadata, coordinators) is the core the others share;
`AsyncProducer`, `AsyncConsumer` and `AsyncAdminClient` have the methods of the blocking
clients of `clients` as coroutines. `BrokerConnection` and `ConnectionPool` speak to one
broker / to brokers by id (`Node`); `WriteFlowControl` is the write back-pressure mixin of
an asyncio protocol (the connection's and the broker's); the errors are those of
`clients.aio.errors`.

The client classes are imported on first use: the broker imports the connection layer of
this package and must not pay for the producer, consumer and admin client.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .connection import STROM_VERSION, BrokerConnection
from .errors import (KafkaClientError, KafkaConnectionError, KafkaTimeoutError,
                     RecordDeserializationError, UnsupportedVersionError)
from .flow_control import WriteFlowControl
from .pool import ConnectionPool, Node

if TYPE_CHECKING:
    from .admin import AsyncAdminClient
    from .client import KafkaClient
    from .consumer import AsyncConsumer
    from .producer import AsyncProducer, ProducerClosedError

_HOME = {
    "AsyncAdminClient": "clients.aio.admin", "AsyncConsumer": "clients.aio.consumer",
    "AsyncProducer": "clients.aio.producer", "KafkaClient": "clients.aio.client",
    "ProducerClosedError": "clients.aio.producer",
}

__all__ = ["AsyncAdminClient", "AsyncConsumer", "AsyncProducer", "BrokerConnection",
           "ConnectionPool", "KafkaClient", "KafkaClientError", "KafkaConnectionError",
           "KafkaTimeoutError", "Node", "ProducerClosedError", "RecordDeserializationError",
           "STROM_VERSION", "UnsupportedVersionError", "WriteFlowControl"]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'clients.aio' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
