"""Client quota metrics and Kafka's RequestMetrics time split, as the Prometheus JMX exporter's
Kafka rules (example_configs/kafka-2_0_0.yml, lowercaseOutputName) name them:

  kafka.server:type=Produce|Fetch|Request,user=U,client-id=C  byte-rate, throttle-time,
      request-time  -> kafka_server_quota_byte_rate{resource="Produce",user="U",clientId="C"},
                       kafka_server_quota_throttle_time{...}, kafka_server_quota_request_time{...}
  kafka.network:type=RequestMetrics,name=LocalTimeMs,request=Produce  (a histogram)
      -> kafka_network_requestmetrics_localtimems{request="Produce",quantile="0.99"}, _count, _sum
      and likewise requestqueuetimems, remotetimems, throttletimems, responsequeuetimems,
      responsesendtimems (totaltimems is the broker collector's).

Besides Kafka's gauges, `strom_quota_limit` gives each sensor's quota (absent: none applies).
A sensor exists once its user and client id sent a request while a quota of its kind was
configured; it goes after an hour without one. Read at scrape time, on the broker's loop.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..quota.manager import ClientQuotaManagers, QuotaType
from ..stats import SPLIT_TIMES, RequestStats
from .collectors import summary_from_histogram

__all__ = ["QuotaCollector"]

# Kafka's quota manager of each kind is its MBeans' `type`.
RESOURCES = (("Produce", "produce"), ("Fetch", "fetch"), ("Request", "request"))
LABELS = ["resource", "user", "clientId"]


class QuotaCollector(Collector):
    """Register in the broker's registry: QuotaCollector(request_stats, quota_managers)."""

    def __init__(self, request_stats: RequestStats, quotas: ClientQuotaManagers,
                 clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000.0):
        self.request_stats = request_stats
        self.quotas = quotas
        self.clock_ms = clock_ms

    def collect(self) -> Iterator[Metric]:
        yield from self.quota_metrics()
        yield from self.request_time_split()

    def quota_metrics(self) -> Iterator[Metric]:
        now = self.clock_ms()
        rate = GaugeMetricFamily("kafka_server_quota_byte_rate",
                                 "Bytes per second of a user/client-id over the quota windows "
                                 "(Produce: request bytes, Fetch: response bytes).", labels=LABELS)
        request_time = GaugeMetricFamily("kafka_server_quota_request_time",
                                         "Request handling time of a user/client-id, as a "
                                         "percentage of one thread (request_percentage's measure).",
                                         labels=LABELS)
        throttle = GaugeMetricFamily("kafka_server_quota_throttle_time",
                                     "Mean throttle time in ms given to a user/client-id over "
                                     "the quota windows.", labels=LABELS)
        limit = GaugeMetricFamily("strom_quota_limit",
                                  "The quota a user/client-id's sensor is held to (bytes/s, or "
                                  "percent for Request).", labels=LABELS)
        for resource, attr in RESOURCES:
            kind: QuotaType = getattr(self.quotas, attr)
            kind.expire(now)
            for (user, client), sensor in sorted(kind.sensors.items()):
                labels = [resource, user, client]
                (request_time if resource == "Request" else rate).add_metric(
                    labels, sensor.rate.measure(now))
                throttle.add_metric(labels, sensor.avg_throttle_ms(now))
                if sensor.quota is not None:
                    limit.add_metric(labels, sensor.quota)
        yield from (rate, request_time, throttle, limit)

    def request_time_split(self) -> Iterator[Metric]:
        now = time.monotonic()
        split = sorted(self.request_stats.split.items())
        for i, (name, about) in enumerate(SPLIT_TIMES):
            metric = f"kafka_network_requestmetrics_{name.lower()}ms"
            yield summary_from_histogram(
                metric, f"Request {name}Ms: {about} (ms).", ["request"],
                [([api], s.at(now)[i]) for api, s in split])
