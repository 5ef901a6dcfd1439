"""Broker metrics: Prometheus text and JSON on an HTTP port (`metrics.port`), Kafka's names.

  stats.py       the counters the hot path updates (O(1) per request, plain ints)
  collectors.py  broker state -> metric families at scrape time (Kafka JMX-exporter names)
  loop_lag.py    event-loop lag and GC pause monitors
  render.py      /metrics.json
  http.py        the HTTP listener on the broker's loop

`BrokerMetrics` owns a CollectorRegistry of its own (never prometheus_client's global one:
several brokers may share a process in tests) holding the broker collector and
prometheus_client's process, GC and platform collectors. The hot-path counters
(`BrokerTopicStats`, `RequestStats`) live on the broker whether or not the port is set.
"""
from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import Metric

from .collectors import BrokerCollector
from .http import MetricsHttpServer
from .loop_lag import GcPauseMonitor, LoopLagMonitor
from .stats import BrokerTopicStats, ControllerStats, RequestStats

__all__ = ["BrokerMetrics", "BrokerTopicStats", "ControllerStats", "RequestStats"]

log = logging.getLogger(__name__)


class BrokerMetrics:
    """The registry, the monitors and (when `port` >= 0) the HTTP listener of one broker."""

    def __init__(self, broker: Any, host: str, port: int):
        self.broker = broker
        self.host = host
        self.port = port
        self.loop_lag = LoopLagMonitor()
        self.gc_pauses = GcPauseMonitor()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker, self))
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.server: MetricsHttpServer | None = None

    def collect(self) -> list[Metric]:
        return list(self.registry.collect())

    @property
    def bound_port(self) -> int | None:
        return self.server.port if self.server is not None else None

    async def start(self) -> None:
        self.loop_lag.start()
        self.gc_pauses.start()
        self.server = MetricsHttpServer(self.host, self.port, self.collect, self.broker.broker_id)
        await self.server.start()
        log.info("metrics on http://%s:%d/metrics and /metrics.json", self.host, self.server.port)

    async def stop(self) -> None:
        self.loop_lag.stop()
        self.gc_pauses.stop()
        if self.server is not None:
            await self.server.stop()
