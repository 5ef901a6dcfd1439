"""Confluent's v3 admin routes: clusters, brokers, topics, partitions, configs, consumer groups and lags.

(Being written: the routes arrive with their tests.)
"""
from __future__ import annotations

from aiohttp import web

from clients.rest.config import RestProxyConfig
from clients.rest.kafka import ClientPool

__all__ = ["V3AdminResource"]


class V3AdminResource:
    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config

    def routes(self) -> list[web.RouteDef]:
        return []

    async def close(self) -> None:
        pass
