"""v2's topic metadata and produce routes: /topics, /topics/{t}, /topics/{t}/partitions..., /brokers.

(Being written: the routes arrive with their tests.)
"""
from __future__ import annotations

from aiohttp import web

from clients.rest.config import RestProxyConfig
from clients.rest.kafka import ClientPool

__all__ = ["V2TopicsResource"]


class V2TopicsResource:
    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config

    def routes(self) -> list[web.RouteDef]:
        return []

    async def close(self) -> None:
        pass
