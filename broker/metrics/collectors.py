"""Collectors: the broker's state read at scrape time, as Prometheus metric families.

Names follow what the Prometheus JMX exporter's Kafka rules (example_configs/kafka-2_0_0.yml,
lowercaseOutputName) make of Kafka's MBeans, so dashboards and alert rules written for Kafka
find them:

  kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T
      -> kafka_server_brokertopicmetrics_messagesin_total{topic="T"}   (no topic: all topics)
  kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
      -> kafka_server_replicamanager_underreplicatedpartitions
  kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce  (a histogram)
      -> kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}, _count
  kafka.log:type=Log,name=Size,topic=T,partition=P -> kafka_log_log_size{topic,partition}
  kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica
      -> kafka_server_replicafetchermanager_maxlag{clientId="Replica"}

A Yammer histogram with nothing in its reservoir reports 0 for every percentile (its empty
Snapshot's getValue), so an idle summary here says 0, never NaN.

Consumer lag is not a Kafka broker MBean; it uses the names of kafka_exporter
(kafka_consumergroup_lag{consumergroup,topic,partition}), which lag dashboards expect.
strom's own figures (event-loop lag, GC pauses, a Prometheus-native request histogram) are
prefixed `strom_`, and so are figures Kafka exposes through no MBean: a log dir's usable and
total bytes (Kafka reports them only in DescribeLogDirs, KIP-827).

Everything here runs on the broker's event loop and costs O(partitions + groups' committed
offsets) per scrape; nothing is updated on the hot path.
"""
from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector

from zkcoord.store import BrokerInfo
from zkcoord.zk_session import SESSION_STATES, ZkSession

from ..group.coordinator import GroupCoordinator
from ..log import LogManager
from ..quota.manager import ClientQuotaManagers
from ..metadata_cache import MetadataCache
from ..replication.replica_manager import ReplicaManager
from ..server.fetch_sessions import FetchSessionCache
from ..server.network import KafkaServer
from .loop_lag import GcPauseMonitor, LoopLagMonitor
from ..stats import (ERROR_NAMES, QUANTILES, TOPIC_METRICS, BrokerTopicStats, ControllerStats, Histogram,
                     RequestStats)

if TYPE_CHECKING:
    from zkcoord.controller import Controller

STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")


def gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=list(labels or ()))
    g.add_metric(list((labels or {}).values()), value)
    return g


# The JMX exporter's quantile labels: "0." and the digits of the Yammer attribute's name
# (50thPercentile -> "0.50", 999thPercentile -> "0.999").
QUANTILE_LABELS = {q: f"{q:.3f}".rstrip("0").ljust(4, "0") for q in QUANTILES}


def summary_from_histogram(name: str, doc: str, label_names: list[str],
                           series: list[tuple[list[str], Histogram]], scale: float = 1.0) -> Metric:
    """A summary as the JMX exporter renders Kafka's Yammer histograms: `name{quantile=..}`
    per percentile (of the recent window), `name_count`, and `name_sum`."""
    m = Metric(name, doc, "summary")
    for values, h in series:
        labels = dict(zip(label_names, values))
        for q in QUANTILES:
            v = h.quantile(q)      # NaN: nothing observed in the window
            m.add_sample(name, {**labels, "quantile": QUANTILE_LABELS[q]}, 0.0 if math.isnan(v) else v * scale)
        m.add_sample(name + "_count", labels, h.count)
        m.add_sample(name + "_sum", labels, h.sum * scale)
    return m


def histogram(name: str, doc: str, label_names: list[str],
              series: list[tuple[list[str], Histogram]]) -> HistogramMetricFamily:
    f = HistogramMetricFamily(name, doc, labels=label_names)
    for values, h in series:
        f.add_metric(values, h.cumulative(), h.sum)
    return f


@dataclass
class MetricSources:
    """What the collectors read at scrape time."""
    broker_id: int
    advertised: BrokerInfo
    cluster_mode: bool
    topic_stats: BrokerTopicStats
    request_stats: RequestStats
    replicas: ReplicaManager
    fetch_sessions: FetchSessionCache
    log_manager: LogManager
    groups: GroupCoordinator
    controller: Controller | None
    controller_stats: ControllerStats
    servers: list[KafkaServer]          # filled as the listeners start
    zk_session: ZkSession | None = None     # cluster mode: the metadata store's session
    metadata: MetadataCache | None = None   # what the controller told this broker (readiness)
    client_quotas: ClientQuotaManagers | None = None   # quota rates and throttles (quota_metrics)


class Monitors(Protocol):
    loop_lag: LoopLagMonitor
    gc_pauses: GcPauseMonitor
    zk_request_ms: Histogram


class BrokerCollector(Collector):
    """Every broker-side family."""

    def __init__(self, sources: MetricSources, monitors: Monitors | None = None):
        self.sources = sources
        self.monitors = monitors

    def collect(self) -> Iterator[Metric]:
        yield from self.broker_info()
        yield from self.topic_metrics()
        yield from self.request_metrics()
        yield from self.replica_manager()
        yield from self.partitions()
        yield from self.replica_fetcher()
        yield from self.fetch_sessions()
        yield from self.controller()
        yield from self.logs()
        yield from self.log_dirs()
        yield from self.zookeeper()
        yield from self.groups()
        yield from self.socket_server()
        yield from self.runtime()

    # ------------------------------------------------------------------ identity
    def broker_info(self) -> Iterator[Metric]:
        b = self.sources
        yield gauge("strom_broker_info", "This broker: id, listener and mode (value 1).", 1,
                    {"broker_id": str(b.broker_id),
                     "advertised": f"{b.advertised.host}:{b.advertised.port}",
                     "mode": "cluster" if b.cluster_mode else "standalone"})
        # Kafka's BrokerState: 3 = RunningAsBroker.
        yield gauge("kafka_server_kafkaserver_brokerstate", "3 while running (Kafka's BrokerState).", 3)

    # ------------------------------------------------------------------ BrokerTopicMetrics
    def topic_metrics(self) -> Iterator[Metric]:
        stats = self.sources.topic_stats
        topics = sorted(stats.topics.items())
        for i, (name, doc) in enumerate(TOPIC_METRICS):
            c = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            c.add_metric([], stats.total[i])
            for topic, values in topics:
                c.add_metric([topic], values[i])
            yield c

    # ------------------------------------------------------------------ RequestMetrics
    def request_metrics(self) -> Iterator[Metric]:
        rs = self.sources.request_stats
        c = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                "Requests received, per API and version (RequestsPerSec).",
                                labels=["request", "version"])
        for (api, version), n in sorted(rs.requests.items()):
            c.add_metric([api, str(version)], n)
        yield c
        e = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                "Error codes in responses, per API and error (ErrorsPerSec; NONE "
                                "counts successes).", labels=["request", "error"])
        for (api, code), n in sorted(rs.errors.items()):
            e.add_metric([api, ERROR_NAMES.get(code, str(code))], n)
        yield e
        series = [([api], h) for api, h in sorted(rs.times.items())]
        yield summary_from_histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Request total time in ms, frame received to response ready (TotalTimeMs); "
            "quantiles over the last 30-60 s.", ["request"], series)
        yield histogram("strom_request_total_time_ms",
                        "Request total time in ms as a Prometheus histogram (for histogram_quantile).",
                        ["request"], series)

    # ------------------------------------------------------------------ ReplicaManager
    def replica_manager(self) -> Iterator[Metric]:
        rm = self.sources.replicas
        partitions = leaders = urp = under_min = at_min = 0
        for p in rm.partitions.values():
            partitions += 1
            if p.is_leader:
                leaders += 1
                n = len(p.isr)
                if n < len(p.replicas):
                    urp += 1
                min_isr = p.min_isr
                if n < min_isr:
                    under_min += 1
                elif n == min_isr:
                    at_min += 1
        pre = "kafka_server_replicamanager_"
        yield gauge(pre + "partitioncount", "Partitions with a replica on this broker.", partitions)
        yield gauge(pre + "leadercount", "Partitions this broker leads.", leaders)
        yield gauge(pre + "underreplicatedpartitions",
                    "Led partitions whose ISR is smaller than the replica set.", urp)
        yield gauge(pre + "underminisrpartitioncount",
                    "Led partitions whose ISR is below min.insync.replicas (acks=all fails).", under_min)
        yield gauge(pre + "atminisrpartitioncount",
                    "Led partitions whose ISR is exactly min.insync.replicas.", at_min)
        yield gauge(pre + "offlinereplicacount", "Replicas here whose log dir failed (offline until restart).",
                    len(rm.offline))
        c = CounterMetricFamily(pre + "isrshrinks", "ISR shrinks decided by this leader (IsrShrinksPerSec).")
        c.add_metric([], rm.isr_shrinks)
        yield c
        c = CounterMetricFamily(pre + "isrexpands", "ISR expands decided by this leader (IsrExpandsPerSec).")
        c.add_metric([], rm.isr_expands)
        yield c

    # ------------------------------------------------------------------ Partition
    def partitions(self) -> Iterator[Metric]:
        """Kafka's per-partition gauges, for every replica here: the leader reports them, a
        follower reports 0 (Kafka's Partition does the same)."""
        labels = ["topic", "partition"]
        pre = "kafka_cluster_partition_"
        fams = {
            "underreplicated": "1 if this broker leads the partition and its ISR is smaller than its replicas.",
            "insyncreplicascount": "ISR size, on the leader.",
            "replicascount": "Replicas assigned, on the leader.",
            "underminisr": "1 if led here with an ISR below min.insync.replicas.",
            "atminisr": "1 if led here with an ISR of exactly min.insync.replicas.",
        }
        out = {k: GaugeMetricFamily(pre + k, doc, labels=labels) for k, doc in fams.items()}
        for (topic, index), p in sorted(self.sources.replicas.partitions.items()):
            lv = [topic, str(index)]
            isr, replicas, min_isr = (len(p.isr), len(p.replicas), p.min_isr) if p.is_leader else (0, 0, 0)
            out["underreplicated"].add_metric(lv, int(isr < replicas))
            out["insyncreplicascount"].add_metric(lv, isr)
            out["replicascount"].add_metric(lv, replicas)
            out["underminisr"].add_metric(lv, int(p.is_leader and isr < min_isr))
            out["atminisr"].add_metric(lv, int(p.is_leader and isr == min_isr))
        yield from out.values()

    # ------------------------------------------------------------------ ReplicaFetcherManager
    def replica_fetcher(self) -> Iterator[Metric]:
        """MaxLag: the largest lag of a partition this broker follows, the lag being the
        leader's high watermark minus this replica's log end after its latest fetch
        (Kafka's FetcherLagMetrics); 0 when it follows nothing."""
        lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag",
                                "Leader's high watermark minus this follower's log end, per partition.",
                                labels=["clientId", "topic", "partition"])
        max_lag = 0
        for (topic, index), p in sorted(self.sources.replicas.partitions.items()):
            if p.is_leader:
                continue
            lag.add_metric([f"ReplicaFetcherThread-0-{p.leader_id}", topic, str(index)], p.fetch_lag)
            max_lag = max(max_lag, p.fetch_lag)
        yield gauge("kafka_server_replicafetchermanager_maxlag",
                    "Largest lag in messages of a partition this broker follows.", max_lag,
                    {"clientId": "Replica"})
        yield lag

    # ------------------------------------------------------------------ FetchSessionCache
    def fetch_sessions(self) -> Iterator[Metric]:
        cache = self.sources.fetch_sessions
        pre = "kafka_server_fetchsessioncache_"
        yield gauge(pre + "numincrementalfetchsessions", "Incremental fetch sessions (KIP-227) held.",
                    len(cache))
        yield gauge(pre + "numincrementalfetchpartitionscached",
                    "Partitions held by incremental fetch sessions.", cache.partitions_cached())
        c = CounterMetricFamily(pre + "incrementalfetchsessionevictions",
                                "Sessions evicted to make room (IncrementalFetchSessionEvictionsPerSec).")
        c.add_metric([], cache.evictions)
        yield c

    # ------------------------------------------------------------------ controller
    def controller(self) -> Iterator[Metric]:
        b = self.sources
        ctl = b.controller
        pre = "kafka_controller_kafkacontroller_"
        if ctl is None:   # standalone: this broker is the whole cluster and its controller
            topics = {p.topic for p in b.replicas.partitions.values()}
            active, offline, n_topics, n_parts = 1, 0, len(topics), len(b.replicas.partitions)
            stats = None
        else:
            active = 1 if ctl.active else 0
            offline = ctl.offline_partition_count() if active else 0
            n_topics = len(ctl.assignments) if active else 0
            n_parts = len(ctl.states) if active else 0
            stats = self.sources.controller_stats
        yield gauge(pre + "activecontrollercount", "1 on the active controller, else 0.", active)
        yield gauge(pre + "offlinepartitionscount",
                    "Partitions without a live leader (reported by the active controller).", offline)
        yield gauge(pre + "globaltopiccount", "Topics (reported by the active controller).", n_topics)
        yield gauge(pre + "globalpartitioncount", "Partitions (reported by the active controller).", n_parts)
        if stats is not None:
            yield summary_from_histogram(
                "kafka_controller_controllerstats_leaderelectionrateandtimems",
                "Leader election rounds and their time in ms (LeaderElectionRateAndTimeMs).",
                [], [([], stats.election_ms)])
            c = CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                    "Unclean leader elections (UncleanLeaderElectionsPerSec).")
            c.add_metric([], stats.unclean_elections)
            yield c

    # ------------------------------------------------------------------ Log
    def logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's segments.", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset.", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments.", labels=labels)
        for plog in sorted(self.sources.log_manager.all_logs(), key=lambda lg: (lg.topic, lg.partition)):
            lv = [plog.topic, str(plog.partition)]
            segments = plog.segments
            size.add_metric(lv, sum(s.size for s in segments))
            start.add_metric(lv, plog.log_start_offset)
            end.add_metric(lv, plog.log_end_offset)
            segs.add_metric(lv, len(segments))
        yield from (size, start, end, segs)

    def log_dirs(self) -> Iterator[Metric]:
        """Kafka's LogManager gauges, and each log dir's file system read at scrape time (a
        statvfs per dir; a dir that cannot be read has no sample)."""
        lm = self.sources.log_manager
        labels = ["logDirectory"]
        offline = lm.offline_dirs
        yield gauge("kafka_log_logmanager_offlinelogdirectorycount", "Log dirs offline after an I/O error.",
                    len(offline))
        dir_offline = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline",
                                        "1 if the log dir is offline after an I/O error.", labels=labels)
        for d in lm.log_dirs:
            dir_offline.add_metric([d], int(d in offline))
        yield dir_offline
        usable = GaugeMetricFamily("strom_log_dir_usable_bytes",
                                   "Bytes free to this broker on the log dir's file system "
                                   "(DescribeLogDirs' UsableBytes; no Kafka MBean).", labels=labels)
        total = GaugeMetricFamily("strom_log_dir_total_bytes",
                                  "Size of the log dir's file system (DescribeLogDirs' TotalBytes).",
                                  labels=labels)
        for d in lm.log_dirs:
            try:
                du = shutil.disk_usage(d)
            except OSError:
                continue
            usable.add_metric([d], du.free)
            total.add_metric([d], du.total)
        yield from (usable, total)
        wb = lm.write_behind
        started = CounterMetricFamily(
            "strom_log_writeback_started_bytes",
            "Bytes of log whose writeback the write-behind asked the kernel to start "
            "(log.writeback.interval.bytes; no Kafka MBean).")
        started.add_metric([], wb.handed_bytes)
        skipped = CounterMetricFamily(
            "strom_log_writeback_skipped",
            "Hand-offs to the write-behind skipped because its queue was full (the device "
            "that far behind); their bytes went with a later one.")
        skipped.add_metric([], wb.skipped)
        yield from (started, skipped)

    # ------------------------------------------------------------------ ZooKeeper client
    def zookeeper(self) -> Iterator[Metric]:
        """Kafka's SessionExpireListener and ZooKeeperClientMetrics. SessionState is a string
        in Kafka (which the JMX exporter cannot export): here one series per state, 1 on the
        current one."""
        zk = self.sources.zk_session
        if zk is None:
            return
        pre = "kafka_server_sessionexpirelistener_"
        state = GaugeMetricFamily(pre + "sessionstate", "ZooKeeper client state (1 on the current one).",
                                  labels=["state"])
        for name in SESSION_STATES:
            state.add_metric([name], int(zk.state == name))
        yield state
        for name, doc, n in (("zookeeperdisconnects", "ZooKeeper connections dropped.", zk.disconnects),
                             ("zookeeperexpires", "ZooKeeper sessions expired.", zk.expires),
                             ("zookeepersyncconnects", "ZooKeeper connections established.", zk.sync_connects)):
            c = CounterMetricFamily(pre + name, doc)
            c.add_metric([], n)
            yield c
        if self.monitors is not None:
            yield summary_from_histogram(
                "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
                "ZooKeeper request round trips in ms, counted since the metrics endpoint started "
                "(ZooKeeperRequestLatencyMs).", [], [([], self.monitors.zk_request_ms)])

    # ------------------------------------------------------------------ groups
    def groups(self) -> Iterator[Metric]:
        gc_ = self.sources.groups
        pre = "kafka_coordinator_group_groupmetadatamanager_"
        groups = list(gc_.groups.values())
        by_state = {s: 0 for s in STATES}
        for g in groups:
            by_state[g.state] = by_state.get(g.state, 0) + 1
        yield gauge(pre + "numgroups", "Groups this broker coordinates.", len(groups))
        for state in STATES:
            yield gauge(pre + "numgroups" + state.lower(), f"Groups in state {state}.", by_state[state])
        offsets = gc_.store.offsets
        yield gauge(pre + "numoffsets", "Committed offsets this broker holds.",
                    sum(len(o) for o in offsets.values()))
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group.",
                                    labels=["consumergroup"])
        for g in sorted(groups, key=lambda g: g.group_id):
            members.add_metric([g.group_id], len(g.members))
        yield members
        yield from self.lag(offsets)

    def lag(self, offsets: dict[str, dict[tuple[str, int], Any]]) -> Iterator[Metric]:
        """Lag = the partition's high watermark (the log end a consumer can reach, what
        kafka-consumer-groups.sh shows as LOG-END-OFFSET) minus the committed offset, for
        committed offsets of groups this broker coordinates whose partition has a replica
        here (leader: exact; follower: its replicated high watermark)."""
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                    "Committed offset of the group.", labels=labels)
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Log end (high watermark) minus committed offset.", labels=labels)
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag summed over the topic's partitions.",
                                    labels=["consumergroup", "topic"])
        rm = self.sources.replicas
        for group_id in sorted(offsets):
            sums: dict[str, int] = {}
            for (topic, part), committed in sorted(offsets[group_id].items()):
                lv = [group_id, topic, str(part)]
                current.add_metric(lv, committed.offset)
                p = rm.partitions.get((topic, part))
                if p is None:
                    continue
                value = max(0, p.log.high_watermark - committed.offset)
                lag.add_metric(lv, value)
                sums[topic] = sums.get(topic, 0) + value
            for topic, value in sorted(sums.items()):
                lag_sum.add_metric([group_id, topic], value)
        yield from (current, lag, lag_sum)

    # ------------------------------------------------------------------ network
    def socket_server(self) -> Iterator[Metric]:
        pre = "kafka_server_socket_server_metrics_"
        labels = ["listener", "networkProcessor"]
        count = GaugeMetricFamily(pre + "connection_count", "Open connections.", labels=labels)
        counters = {
            "connection_creation": "Connections accepted.",
            "connection_close": "Connections closed.",
            "incoming_byte": "Bytes received (request frames with their size prefix).",
            "outgoing_byte": "Bytes sent (response frames with their size prefix).",
            "request": "Requests received.",
            "response": "Responses sent.",
        }
        fams = {k: CounterMetricFamily(pre + k, doc, labels=labels) for k, doc in counters.items()}
        for s in self.sources.servers:
            lv = [s.listener_name, "0"]
            count.add_metric(lv, s.connection_count)
            fams["connection_creation"].add_metric(lv, s.connections_created)
            fams["connection_close"].add_metric(lv, s.connections_closed)
            fams["incoming_byte"].add_metric(lv, s.bytes_in)
            fams["outgoing_byte"].add_metric(lv, s.bytes_out)
            fams["request"].add_metric(lv, s.requests_in)
            fams["response"].add_metric(lv, s.responses_out)
        yield count
        yield from fams.values()

    # ------------------------------------------------------------------ the Python process
    def runtime(self) -> Iterator[Metric]:
        m = self.monitors
        if m is None:
            return
        lag = m.loop_lag
        yield gauge("strom_event_loop_lag_seconds",
                    "How late the latest periodic loop callback ran (delay beyond its due time).",
                    lag.last)
        yield gauge("strom_event_loop_lag_max_seconds",
                    "Largest event-loop lag since the previous scrape.", lag.take_max())
        yield histogram("strom_event_loop_lag_distribution_seconds",
                        "Event-loop lag of every periodic callback.", [], [([], lag.histogram)])
        yield histogram("strom_gc_pause_seconds", "Duration of each garbage collection.", [],
                        [([], m.gc_pauses.histogram)])
