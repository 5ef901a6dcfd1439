"""asyncio client core: connections to brokers and a pool of them (more to come: metadata,
producer, consumer, admin, group member). Builds on the sans-io `clients.protocol`."""
from .connection import STROM_VERSION, BrokerConnection
from .errors import KafkaClientError, KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from .pool import ConnectionPool

__all__ = ["BrokerConnection", "ConnectionPool", "KafkaClientError", "KafkaConnectionError",
           "KafkaTimeoutError", "UnsupportedVersionError", "STROM_VERSION"]
