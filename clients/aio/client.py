"""The core every strom client is built on: config, connections, metadata, coordinators.

`KafkaClient` owns one `ConnectionPool` and one `MetadataManager` for a producer, consumer
or admin client, and offers the few ways they talk to brokers:

  - `request(node, api, body)`: to one broker (by id, or a (host, port) address);
  - `request_any(api, body)`: to any live broker (a connected one first), retried on
    connection errors across brokers until the request timeout;
  - `coordinator(key, key_type)`: the broker coordinating a group (0) or transactional id
    (1), looked up with FindCoordinator and cached until `forget_coordinator`.

Broker error codes in responses are returned, not raised: each caller knows which codes it
retries. Connection and timeout errors raise `KafkaConnectionError`/`KafkaTimeoutError`.
Every connection is secured as the config's security keys say (`ClientSecurity.from_config`,
read once here: a bad setting is a ConfigError when the client is made). A refused
authentication raises `AuthenticationError`, which none of the retry loops here catch: it
reaches the caller at once, as Kafka's AuthenticationException does.
Single event loop, not thread-safe; the sync facades run it on a thread of their own.
"""
from __future__ import annotations

import asyncio
from typing import Any, Mapping

from clients.config import ClientConfig, bootstrap_addresses
from clients.protocol.errors import for_code
from clients.protocol.messages import api
from clients.protocol.schema import Api, Struct

from .connection import BrokerConnection
from .errors import KafkaConnectionError, KafkaTimeoutError
from .metadata import ClusterMetadata, MetadataManager
from .pool import ConnectionPool, Node
from .security import ClientSecurity

__all__ = ["KafkaClient"]

_FIND_COORDINATOR = api("FindCoordinator")


class KafkaClient:
    """Connections + metadata for one client. Create, then `await start()`."""

    def __init__(self, config: ClientConfig):
        self.config = config
        self.client_id: str = config["client.id"]
        self.request_timeout: float = config.ms("request.timeout.ms")
        self.retry_backoff: float = config.ms("retry.backoff.ms")
        self.retry_backoff_max: float = config.ms("retry.backoff.max.ms")
        self.security = ClientSecurity.from_config(config)
        self.pool = ConnectionPool(
            client_id=self.client_id,
            connect_timeout=config.ms("socket.connection.setup.timeout.ms"),
            request_timeout=self.request_timeout,
            reconnect_backoff_ms=config["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=config["reconnect.backoff.max.ms"],
            security=self.security)
        self.metadata = MetadataManager(
            self.pool, bootstrap_addresses(config["bootstrap.servers"]),
            max_age=config.ms("metadata.max.age.ms"), retry_backoff=self.retry_backoff,
            request_timeout=self.request_timeout,
            # Producers ask for auto-creation as Kafka's do (the broker's
            # auto.create.topics.enable decides); consumers only when configured to.
            allow_auto_create=bool(config.get("allow.auto.create.topics",
                                              config.kind == "producer")))
        self._coordinators: dict[tuple[int, str], int] = {}
        self._started = False

    @property
    def cluster(self) -> ClusterMetadata:
        return self.metadata.cluster

    async def start(self, timeout: float | None = None) -> None:
        """Reach the cluster once (raising KafkaConnectionError naming the bootstrap list if
        no broker answers within `timeout`, default request.timeout.ms; AuthenticationError
        at once if a broker refuses this client) and start the background metadata
        refresh."""
        if self._started:
            return
        timeout = self.request_timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                async with asyncio.timeout(max(0.01, deadline - loop.time())):
                    await self.metadata.refresh()
                break
            except (KafkaConnectionError, TimeoutError) as e:
                if loop.time() + self.retry_backoff >= deadline:
                    servers = ",".join(self.config["bootstrap.servers"])
                    raise KafkaConnectionError(
                        f"no broker reachable at {servers} within {timeout:.1f}s "
                        f"(last: {e})") from e
                await asyncio.sleep(self.retry_backoff)
        self.metadata.start()
        self._started = True

    def raise_authentication_error(self) -> None:
        """Raise the AuthenticationError of the last failed connection attempt, if no
        attempt has succeeded since (for loops that only see connections fail in the
        background: a user's send or poll should fail with the reason, as in Kafka)."""
        error = self.pool.authentication_error
        if error is not None:
            raise type(error)(error.message) from error

    async def close(self) -> None:
        await self.metadata.close()
        await self.pool.close_all()

    # ------------------------------------------------------------------ requests

    async def connection(self, node: Node) -> BrokerConnection:
        return await self.pool.get(node)

    async def request(self, node: Node, api_name: str | Api, body: Any,
                      version: int | None = None, timeout: float | None = None) -> Struct:
        """One request to one broker; connection problems raise, error codes return."""
        conn = await self.pool.get(node)
        return await conn.request(api_name, body, version=version,
                                  timeout=self.request_timeout if timeout is None else timeout)

    def least_loaded_node(self) -> Node:
        """A connected broker with the fewest requests in flight, else any known broker,
        else a bootstrap address."""
        best: tuple[int, Node] | None = None
        for node_id in self.cluster.brokers:
            conn = self.pool.connection(node_id)
            if conn is not None and not conn.closed:
                if best is None or conn.in_flight < best[0]:
                    best = (conn.in_flight, node_id)
        if best is not None:
            return best[1]
        for node_id in self.cluster.brokers:
            if self.pool.backoff_remaining(node_id) == 0:
                return node_id
        return self.metadata.bootstrap[0]

    async def request_any(self, api_name: str | Api, body: Any, version: int | None = None,
                          timeout: float | None = None) -> Struct:
        """A request any broker can answer, retried on other brokers when a connection
        fails, until `timeout` (default request.timeout.ms) runs out."""
        loop = asyncio.get_running_loop()
        timeout = self.request_timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        tried: set[Node] = set()
        while True:
            node = self.least_loaded_node()
            if node in tried:
                for candidate in list(self.cluster.brokers) + list(self.metadata.bootstrap):
                    if candidate not in tried:
                        node = candidate
                        break
            tried.add(node)
            try:
                return await self.request(node, api_name, body, version,
                                          timeout=max(0.01, deadline - loop.time()))
            except (KafkaConnectionError, KafkaTimeoutError):
                if loop.time() >= deadline:
                    raise
                if len(tried) > len(self.cluster.brokers) + len(self.metadata.bootstrap):
                    tried.clear()
                    await asyncio.sleep(self.retry_backoff)

    # ------------------------------------------------------------------ coordinators

    async def coordinator(self, key: str, key_type: int = 0,
                          timeout: float | None = None) -> int:
        """The broker id coordinating group `key` (key_type 0) or transactional id (1).
        Retries COORDINATOR_NOT_AVAILABLE and connection errors until `timeout`."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None and cached in self.cluster.brokers:
            return cached
        loop = asyncio.get_running_loop()
        timeout = self.request_timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        while True:
            node = self.least_loaded_node()
            conn = await self.pool.get(node)
            version = conn.version_for(_FIND_COORDINATOR)
            body: Mapping[str, Any] = ({"key_type": key_type, "coordinator_keys": [key]}
                                       if version >= 4 else {"key": key, "key_type": key_type})
            try:
                resp = await conn.request(_FIND_COORDINATOR, body, version=version,
                                          timeout=max(0.01, deadline - loop.time()))
            except (KafkaConnectionError, KafkaTimeoutError):
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(self.retry_backoff)
                continue
            entry = resp.coordinators[0] if version >= 4 else resp
            if entry.error_code == 0:
                self.pool.set_address(entry.node_id, entry.host, entry.port)
                self._coordinators[(key_type, key)] = entry.node_id
                return entry.node_id
            err = for_code(entry.error_code)
            if not err.retriable or loop.time() + self.retry_backoff >= deadline:
                raise err(f"FindCoordinator for {key!r}")
            await asyncio.sleep(self.retry_backoff)

    def forget_coordinator(self, key: str, key_type: int = 0) -> None:
        """The coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost
        connection): look it up again next time."""
        self._coordinators.pop((key_type, key), None)
