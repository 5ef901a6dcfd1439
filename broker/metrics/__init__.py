"""Broker metrics: Prometheus text and JSON on an HTTP port (`metrics.port`), Kafka's names.

  (broker/stats.py holds the counters the hot path updates: O(1) per request, plain ints)
  collectors.py  broker state -> metric families at scrape time (Kafka JMX-exporter names)
  loop_lag.py    event-loop lag and GC pause monitors
  render.py      /metrics.json
  readiness.py   what /readyz checks: serving, registered, caught up
  http.py        the HTTP listener on the broker's loop

`BrokerMetrics` owns a CollectorRegistry of its own (never prometheus_client's global one:
several brokers may share a process in tests) holding the broker collector and
prometheus_client's process, GC and platform collectors. The hot-path counters
(`BrokerTopicStats`, `RequestStats`) live on the broker whether or not the port is set.
"""
from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import Metric

from ..stats import REQUEST_MS_BUCKETS, Histogram
from .collectors import BrokerCollector, MetricSources
from .http import MetricsHttpServer
from .loop_lag import GcPauseMonitor, LoopLagMonitor
from .quota_metrics import QuotaCollector
from .readiness import ReadinessReport, readiness

__all__ = ["BrokerMetrics", "MetricSources"]

log = logging.getLogger(__name__)


class BrokerMetrics:
    """The registry, the monitors and (when `port` >= 0) the HTTP listener of one broker.
    In cluster mode it times the ZooKeeper session's requests from construction on."""

    def __init__(self, sources: MetricSources, host: str, port: int):
        self.broker_id = sources.broker_id
        self.host = host
        self.port = port
        self.loop_lag = LoopLagMonitor()
        self.gc_pauses = GcPauseMonitor()
        self.zk_request_ms = Histogram(REQUEST_MS_BUCKETS)
        if sources.zk_session is not None:
            sources.zk_session.request_ms = self.zk_request_ms
        self.sources = sources
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(sources, self))
        if sources.client_quotas is not None:
            self.registry.register(QuotaCollector(sources.request_stats, sources.client_quotas))
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.server: MetricsHttpServer | None = None

    def collect(self) -> list[Metric]:
        return list(self.registry.collect())

    def readiness(self) -> ReadinessReport:
        return readiness(self.sources)

    @property
    def bound_port(self) -> int | None:
        return self.server.port if self.server is not None else None

    async def start(self) -> None:
        self.loop_lag.start()
        self.gc_pauses.start()
        self.server = MetricsHttpServer(self.host, self.port, self.collect, self.broker_id,
                                        self.readiness)
        await self.server.start()
        log.info("metrics on http://%s:%d/metrics and /metrics.json, health on /healthz and /readyz",
                 self.host, self.server.port)

    async def stop(self) -> None:
        self.loop_lag.stop()
        self.gc_pauses.stop()
        if self.server is not None:
            await self.server.stop()
