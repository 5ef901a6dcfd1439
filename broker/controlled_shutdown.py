"""Controlled shutdown: on SIGTERM in a cluster, a broker asks the controller to move the
leadership of its partitions to other replicas before it stops (Kafka's ControlledShutdown
API), so clients switch leaders at once instead of after a session timeout."""
from __future__ import annotations

import asyncio
import logging

from clients.aio.connection import BrokerConnection
from clients.aio.security import PLAINTEXT, ClientSecurity
from zkcoord.controller import Controller
from zkcoord.store import MetadataStore

from .metadata_cache import MetadataCache

log = logging.getLogger("strom.broker")


async def controlled_shutdown(broker_id: int, store: MetadataStore, metadata: MetadataCache,
                              controller: Controller | None, attempts: int = 3,
                              security: ClientSecurity = PLAINTEXT) -> None:
    """Ask the controller (this broker's own, when it is the controller) until no partition
    is left led here, or `attempts` are used up."""
    for _ in range(attempts):
        controller_id = store.controller_id
        node = metadata.broker(controller_id)
        if controller_id == broker_id and controller is not None and controller.active:
            remaining = await controller.controlled_shutdown(broker_id)
            await controller.drain(3.0)
            if not remaining:
                return
        elif node is not None:
            try:
                async with await BrokerConnection.connect(node.host, node.port, client_id="controlled-shutdown",
                                                           timeout=2, security=security) as conn:
                    r = await conn.request("ControlledShutdown", {"broker_id": broker_id, "broker_epoch": -1},
                                           version=3, timeout=5)
                if r.error_code == 0 and not r.remaining_partitions:
                    return
            except Exception as e:
                log.info("controlled shutdown attempt failed: %s", e)
        await asyncio.sleep(0.5)
