"""A Connect worker's metrics in Prometheus text at `/metrics` on its REST listener, named
as the Prometheus JMX exporter names Kafka Connect's MBeans (`kafka.connect:type=
connect-worker-metrics` -> `kafka_connect_connect_worker_metrics_*`, per-task beans with
`connector` and `task` labels), so dashboards built for Kafka Connect find them.

Collected at scrape time from the herder's worker (the loop's state, read on the loop);
turning them into text runs in a thread, as the broker's endpoint does.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

__all__ = ["ConnectMetrics"]

_W = "kafka_connect_connect_worker_metrics_"
_R = "kafka_connect_connect_worker_rebalance_metrics_"
_T = "kafka_connect_connector_task_metrics_"
_SRC = "kafka_connect_source_task_metrics_"
_SINK = "kafka_connect_sink_task_metrics_"
_STATES = ("running", "paused", "failed", "unassigned", "restarting", "destroyed")


class _Families:
    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


class ConnectMetrics:
    def __init__(self, herder: Any):
        self.herder = herder
        self.started = time.time()

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/metrics", self._serve)]

    async def _serve(self, request: web.Request) -> web.Response:
        families = self.collect()
        body = await asyncio.get_running_loop().run_in_executor(None, generate_latest,
                                                                _Families(families))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def collect(self) -> list[Metric]:
        worker = self.herder.worker
        out: list[Metric] = []
        g = GaugeMetricFamily
        out.append(g(_W + "connector_count", "Connectors run by this worker.",
                     value=len(worker.connectors)))
        out.append(g(_W + "task_count", "Tasks run by this worker.", value=len(worker.tasks)))
        per_state = {s: 0 for s in _STATES}
        for wt in worker.tasks.values():
            key = wt.state.value.lower()
            if key in per_state:
                per_state[key] += 1
        for s, n in per_state.items():
            out.append(g(_W + f"connector_{s}_task_count", f"Tasks {s} on this worker.", value=n))
        member = getattr(self.herder, "member", None)
        if member is not None:
            out.append(CounterMetricFamily(_R + "completed_rebalances", "Rebalances completed.",
                                           value=getattr(self.herder, "rebalances", 0)))
            out.append(g(_R + "epoch", "The group generation.", value=max(member.generation, 0)))
            out.append(g(_R + "rebalancing", "1 while a rebalance is under way.",
                         value=1 if member.need_rejoin else 0))
        self._tasks(worker, out)
        return out

    def _tasks(self, worker: Any, out: list[Metric]) -> None:
        labels = ["connector", "task"]
        g, c = GaugeMetricFamily, CounterMetricFamily
        running = g(_T + "running_ratio", "Fraction of time the task ran.", labels=labels)
        commit_ok = c(_T + "offset_commit_success", "Offset commits that succeeded.", labels=labels)
        commit_fail = c(_T + "offset_commit_failure", "Offset commits that failed.", labels=labels)
        commit_max = g(_T + "offset_commit_max_time_ms", "Longest offset commit.", labels=labels)
        poll = c(_SRC + "source_record_poll", "Records polled from the task.", labels=labels)
        write = c(_SRC + "source_record_write", "Records written to Kafka.", labels=labels)
        read = c(_SINK + "sink_record_read", "Records read from Kafka.", labels=labels)
        send = c(_SINK + "sink_record_send", "Records put into the task.", labels=labels)
        puts = c(_SINK + "put_batch", "put() calls.", labels=labels)
        skipped = c("kafka_connect_task_error_metrics_total_records_skipped",
                    "Records skipped (errors.tolerance=all).", labels=labels)
        custom: dict[str, GaugeMetricFamily] = {}
        for (name, index), wt in worker.task_metrics():
            lv = [name, str(index)]
            m = wt.metrics
            running.add_metric(lv, 1.0 if wt.state.value == "RUNNING" else 0.0)
            commit_ok.add_metric(lv, m.commits_ok)
            commit_fail.add_metric(lv, m.commits_failed)
            commit_max.add_metric(lv, m.commit_seconds_max * 1000)
            skipped.add_metric(lv, m.records_skipped)
            if wt.kind == "source":
                poll.add_metric(lv, m.records_polled)
                write.add_metric(lv, m.records_written)
            else:
                read.add_metric(lv, m.records_polled)
                send.add_metric(lv, m.records_written)
                puts.add_metric(lv, m.put_batches)
            own = getattr(wt.task, "metrics", None)
            if callable(own):
                try:
                    values = own()
                except Exception:
                    values = {}
                for metric, value in values.items():
                    fam = custom.get(metric)
                    if fam is None:
                        fam = custom[metric] = g("kafka_connect_" + metric,
                                                 "A connector's own metric.", labels=labels)
                    fam.add_metric(lv, float(value))
        out.extend([running, commit_ok, commit_fail, commit_max, poll, write, read, send, puts,
                    skipped, *custom.values()])
