"""v3's POST /v3/clusters/{cluster_id}/topics/{topic}/records, single and streaming.

(Being written: the routes arrive with their tests.)
"""
from __future__ import annotations

from aiohttp import web

from clients.rest.config import RestProxyConfig
from clients.rest.kafka import ClientPool

__all__ = ["V3RecordsResource"]


class V3RecordsResource:
    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config

    def routes(self) -> list[web.RouteDef]:
        return []

    async def close(self) -> None:
        pass
