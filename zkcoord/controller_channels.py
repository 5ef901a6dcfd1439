"""The controller's requests to brokers (Kafka's ControllerChannelManager): one queue and one
sending task per live broker, so each broker gets LeaderAndIsr / UpdateMetadata /
StopReplica in the order the controller decided them, each retried until delivered or the
broker leaves the cluster."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from clients.aio.errors import KafkaConnectionError
from clients.aio.pool import ConnectionPool
from clients.aio.security import AuthenticationError, ClientSecurity

from .zk_paths import BrokerRegistration

log = logging.getLogger("zkcoord.controller")

# API name, version, body, and what to call with the broker's answer (or None).
Request = tuple[str, int, dict[str, Any], "Callable[[Any], None] | None"]


class BrokerChannel:
    """Requests to one broker, sent in order by one task."""

    def __init__(self, channels: "BrokerChannels", broker_id: int):
        self.channels = channels
        self.broker_id = broker_id
        self.queue: asyncio.Queue[Request] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            api, version, body, on_answer = await self.queue.get()
            try:
                answer = await self._deliver(api, version, body)
                if answer is not None and on_answer is not None:
                    try:
                        on_answer(answer)
                    except Exception:      # a reader's bug must not end this broker's channel
                        log.exception("controller: reading the answer to %s from broker %d failed",
                                      api, self.broker_id)
            finally:
                self.queue.task_done()

    async def _deliver(self, api: str, version: int, body: dict[str, Any]) -> Any:
        """The broker's answer, or None when it left the cluster first."""
        channels = self.channels
        pool = channels.pool
        while channels.is_live(self.broker_id):
            node = channels.registrations().get(self.broker_id)
            try:
                if node is not None:
                    host, port = channels.endpoint(node)
                    pool.set_address(self.broker_id, host, port)
                conn = await pool.get(self.broker_id)
                return await conn.request(api, body, version=version)
            except (KafkaConnectionError, OSError, asyncio.TimeoutError) as e:
                log.info("controller: %s to broker %d failed (%s); retrying", api, self.broker_id, e)
                await asyncio.sleep(0.2)
            except AuthenticationError as e:
                # Final for a client, not for the controller: the broker may not have read
                # the credential yet, or an operator is fixing it. Say so, and keep trying.
                log.warning("controller: %s to broker %d: authentication failed (%s); retrying",
                            api, self.broker_id, e)
                await asyncio.sleep(1.0)
        return None

    def stop(self) -> None:
        self.task.cancel()


class BrokerChannels:
    """`registrations()` gives the brokers' registered endpoints; `is_live(id)` tells whether
    a broker is still in the cluster (a request to one that left is dropped)."""

    def __init__(self, client_id: str, listener_name: str, security: ClientSecurity,
                 registrations: Callable[[], Mapping[int, BrokerRegistration]],
                 is_live: Callable[[int], bool]):
        self.pool = ConnectionPool(client_id=client_id, security=security)
        self.listener_name = listener_name
        self.registrations = registrations
        self.is_live = is_live
        self._channels: dict[int, BrokerChannel] = {}

    def endpoint(self, reg: BrokerRegistration) -> tuple[str, int]:
        """The broker's address on the controller's listener (else its first endpoint)."""
        for ep in reg.endpoints:
            if ep.listener_name == self.listener_name:
                return ep.host, ep.port
        ep = reg.endpoints[0]
        return ep.host, ep.port

    def open(self, broker_id: int) -> BrokerChannel:
        ch = self._channels.get(broker_id)
        if ch is None:
            ch = self._channels[broker_id] = BrokerChannel(self, broker_id)
        return ch

    def send(self, broker_id: int, api: str, version: int, body: dict[str, Any],
             on_answer: Callable[[Any], None] | None = None) -> None:
        self.open(broker_id).queue.put_nowait((api, version, body, on_answer))

    def close(self, broker_id: int) -> None:
        ch = self._channels.pop(broker_id, None)
        if ch is not None:
            ch.stop()

    def close_all(self) -> None:
        for ch in self._channels.values():
            ch.stop()
        self._channels.clear()

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every queued request was delivered; False if `timeout_s` passed first."""
        try:
            await asyncio.wait_for(asyncio.gather(*(ch.queue.join() for ch in list(self._channels.values()))),
                                   timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    async def close_connections(self) -> None:
        await self.pool.close_all()
