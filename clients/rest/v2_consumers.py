"""v2's consumer instances: /consumers/{group}/instances/{instance}/...

(Being written: the routes arrive with their tests.)
"""
from __future__ import annotations

from aiohttp import web

from clients.rest.config import RestProxyConfig
from clients.rest.kafka import ClientPool

__all__ = ["V2ConsumersResource"]


class V2ConsumersResource:
    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config

    def routes(self) -> list[web.RouteDef]:
        return []

    async def close(self) -> None:
        pass
