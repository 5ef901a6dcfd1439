"""What an on-call engineer reads, in process: per-partition under-replicated and ISR gauges,
the replica fetcher's MaxLag, log-dir free bytes, the ZooKeeper session's state, summaries that
say 0 (not NaN) when idle, and /healthz and /readyz with the reasons readiness gives."""
from __future__ import annotations

import asyncio
import json
import shutil
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.metadata_cache import MetadataCache, PartitionInfo
from broker.metrics.collectors import BrokerCollector
from broker.metrics.http import MetricsHttpServer
from broker.metrics.loop_lag import GcPauseMonitor, LoopLagMonitor
from broker.metrics.readiness import readiness
from broker.metrics.render import render_json
from broker.stats import REQUEST_MS_BUCKETS, Histogram
from tests.unit.test_metrics import fake_broker
from tests.unit.test_metrics_http import _get
from zkcoord.store import BrokerInfo
from zkcoord.zk_session import ZkSession


def families(broker, zk_ms: Histogram | None = None) -> dict:
    reg = CollectorRegistry(auto_describe=False)
    monitors = SimpleNamespace(loop_lag=LoopLagMonitor(), gc_pauses=GcPauseMonitor(),
                               zk_request_ms=zk_ms or Histogram(REQUEST_MS_BUCKETS))
    reg.register(BrokerCollector(broker, monitors))
    text = generate_latest(reg).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def val(fams: dict, name: str, sample: str | None = None, **labels: str) -> float:
    return next(s.value for s in fams[name].samples
                if s.labels == labels and (sample is None or s.name == sample))


def test_partition_gauges_on_the_leader_and_zero_on_a_follower():
    fams = families(fake_broker())
    # t-0 is led here with ISR [0, 1] of replicas [0, 1, 2]; t-1 is followed.
    assert val(fams, "kafka_cluster_partition_underreplicated", topic="t", partition="0") == 1
    assert val(fams, "kafka_cluster_partition_insyncreplicascount", topic="t", partition="0") == 2
    assert val(fams, "kafka_cluster_partition_replicascount", topic="t", partition="0") == 3
    assert val(fams, "kafka_cluster_partition_atminisr", topic="t", partition="0") == 1
    assert val(fams, "kafka_cluster_partition_underminisr", topic="t", partition="0") == 0
    for name in ("underreplicated", "insyncreplicascount", "replicascount", "atminisr"):
        assert val(fams, "kafka_cluster_partition_" + name, topic="t", partition="1") == 0


def test_max_lag_is_the_largest_lag_of_a_followed_partition():
    b = fake_broker()
    fams = families(b)
    assert val(fams, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 7
    assert val(fams, "kafka_server_fetcherlagmetrics_consumerlag",
               clientId="ReplicaFetcherThread-0-1", topic="t", partition="1") == 7
    # The leader's own lag is never counted; caught up (or following nothing) is 0.
    b.replicas.partitions[("t", 1)].fetch_lag = 0
    b.replicas.partitions[("t", 0)].fetch_lag = 99
    assert val(families(b), "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0


def test_log_dir_offline_usable_and_total_bytes():
    fams = families(fake_broker())
    du = shutil.disk_usage("/")
    usable = val(fams, "strom_log_dir_usable_bytes", logDirectory="/")
    assert 0 < usable <= du.total and abs(usable - du.free) < du.total * 0.05
    assert val(fams, "strom_log_dir_total_bytes", logDirectory="/") == du.total
    assert {s.labels["logDirectory"] for s in fams["strom_log_dir_usable_bytes"].samples} == {"/"}
    assert val(fams, "kafka_log_logmanager_logdirectoryoffline", logDirectory="/") == 0
    assert val(fams, "kafka_log_logmanager_logdirectoryoffline", logDirectory="/no/such/dir") == 1
    assert val(fams, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    # The write-behind's counters (broker/log/write_behind.py).
    assert val(fams, "strom_log_writeback_started_bytes") == 12 << 20
    assert val(fams, "strom_log_writeback_skipped") == 2
    assert val(fams, "kafka_server_replicamanager_offlinereplicacount") == 1


def test_zookeeper_session_state_counters_and_request_latency():
    b = fake_broker()
    b.zk_session = ZkSession("127.0.0.1:1", 6.0, 6.0)     # never opened
    b.zk_session.disconnects = 2
    zk_ms = Histogram(REQUEST_MS_BUCKETS)
    for ms in (1.0, 3.0, 40.0):
        zk_ms.observe(ms)
    fams = families(b, zk_ms)
    pre = "kafka_server_sessionexpirelistener_"
    states = {s.labels["state"]: s.value for s in fams[pre + "sessionstate"].samples}
    assert states == {"NOT_CONNECTED": 1, "CONNECTING": 0, "CONNECTED": 0, "CLOSED": 0}
    assert val(fams, pre + "zookeeperdisconnects") == 2
    assert val(fams, pre + "zookeeperexpires") == 0
    latency = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
    assert val(fams, latency, sample=latency + "_count") == 3
    assert val(fams, latency, sample=latency + "_sum") == 44
    assert 25 <= val(fams, latency, quantile="0.99") <= 50
    # Standalone (no session): no ZooKeeper families at all.
    assert not any(n.startswith(pre) for n in families(fake_broker()))


def test_idle_summaries_say_zero_never_nan():
    b = fake_broker()
    b.request_stats.times["Produce"] = Histogram(REQUEST_MS_BUCKETS)    # seen, nothing in the window
    b.zk_session = ZkSession("127.0.0.1:1", 6.0, 6.0)
    fams = families(b)
    assert val(fams, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") == 0
    assert val(fams, "kafka_controller_controllerstats_leaderelectionrateandtimems", quantile="0.50") == 0
    assert val(fams, "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms", quantile="0.999") == 0
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(b, SimpleNamespace(loop_lag=LoopLagMonitor(), gc_pauses=GcPauseMonitor(),
                                                    zk_request_ms=Histogram(REQUEST_MS_BUCKETS))))
    assert b"NaN" not in generate_latest(reg)
    assert b"NaN" not in render_json(list(reg.collect()), broker_id=0, timestamp_ms=0)


# ------------------------------------------------------------------ readiness

def cluster_sources(isr_of_followed: list[int]):
    """Broker 0 of a cluster: leads t-0 (ISR [0, 1] of [0, 1, 2]), follows t-1 led by 1."""
    b = fake_broker()
    meta = MetadataCache(BrokerInfo(0, "127.0.0.1", 9092))
    meta.brokers = {i: BrokerInfo(i, "127.0.0.1", 9092 + i) for i in (0, 1)}
    meta.set_controller(1, 3)
    meta.set_partition("t", 0, PartitionInfo(0, 1, [0, 1, 2], [0, 1]))
    meta.set_partition("t", 1, PartitionInfo(1, 1, [1, 0], isr_of_followed))
    b.metadata = meta
    b.zk_session = ZkSession("127.0.0.1:1", 6.0, 6.0)
    b.zk_session.state = "CONNECTED"
    return b


def test_ready_when_serving_registered_and_every_followed_partition_is_in_sync():
    report = readiness(cluster_sources([1, 0]))
    assert report.ready and report.reasons == []
    # A partition it leads is under-replicated, a log dir is offline: reported, but it serves.
    assert report.under_replicated_led == 1 and report.offline_log_dirs == ["/no/such/dir"]


def test_not_ready_says_why():
    b = cluster_sources([1])
    reasons = readiness(b).reasons
    assert len(reasons) == 1 and reasons[0].startswith("catching up: 1 followed partition(s) outside the ISR (t-1;")
    assert "largest fetch lag 7 messages" in reasons[0]
    b.zk_session.state = "CONNECTING"
    b.metadata.brokers.pop(0)
    b.servers = []
    assert readiness(b).reasons[:3] == [
        "no Kafka listener is bound yet", "ZooKeeper session is CONNECTING",
        "the controller does not list this broker as live (not registered in ZooKeeper yet)"]
    b.metadata.controller_id = -1
    assert "no metadata from the controller yet" in readiness(b).reasons
    b.zk_session.closing = True
    assert "shutting down" in readiness(b).reasons


def test_a_standalone_broker_is_ready_once_listening():
    b = fake_broker()
    b.cluster_mode, b.controller = False, None
    b.replicas.partitions = {k: p for k, p in b.replicas.partitions.items() if p.is_leader}
    assert readiness(b).ready


# ------------------------------------------------------------------ the endpoints

def _serve(test, readiness_source=None) -> None:
    """Run `test(server)` against a started listener on port 0 with no metrics."""
    async def main():
        server = MetricsHttpServer("127.0.0.1", 0, lambda: [], 0, readiness_source)
        await server.start()
        try:
            await test(server)
        finally:
            await server.stop()

    asyncio.run(main())


def test_healthz_and_readyz_answers():
    sources = cluster_sources([1])

    async def test(server):
        health = await _get(server.port, "/healthz")
        assert (health.status, health.body) == (200, b"ok\n")
        not_ready = await _get(server.port, "/readyz")
        assert not_ready.status == 503 and not_ready.headers["content-type"] == "application/json"
        doc = json.loads(not_ready.body)
        assert doc["ready"] is False and doc["broker_id"] == 0 and "catching up" in doc["reasons"][0]
        sources.metadata.partition("t", 1).isr.append(0)
        ready = await _get(server.port, "/readyz")
        assert ready.status == 200
        assert json.loads(ready.body) == {"ready": True, "broker_id": 0, "reasons": [],
                                          "under_replicated_led": 1, "offline_log_dirs": ["/no/such/dir"]}

    _serve(test, lambda: readiness(sources))


def test_readyz_is_not_served_without_a_readiness_source():
    async def test(server):
        assert (await _get(server.port, "/readyz")).status == 404
        assert (await _get(server.port, "/healthz")).status == 200

    _serve(test)


# ------------------------------------------------------------------ strom-metrics: expected brokers

def test_the_summary_names_a_dead_broker_that_hosts_replicas():
    from clients.aio.metadata import BrokerInfo as Node, ClusterMetadata, PartitionInfo as Part, TopicInfo
    from clients.cli.strom_metrics import BrokerView, Snapshot, brokers_line, expected_brokers, render

    parts = {i: Part("t", i, i % 2, 0, (i % 2, (i + 1) % 2, 2), (0, 1)) for i in range(4)}
    cluster = ClusterMetadata({0: Node(0, "h", 1), 1: Node(1, "h", 2)}, {"t": TopicInfo("t", parts)})
    views = expected_brokers(cluster)
    assert [(v.broker_id, v.replicas, v.error) for v in views] == [
        (0, 4, None), (1, 4, None), (2, 4, "not live: the controller counts it dead")]
    doc = {"timestamp_ms": 0, "metrics": {}}
    views[0].doc = doc
    views[1].error, views[1].detail = "no answer from http://h:9405/metrics.json", "Connection refused"
    cur = Snapshot(0.0, views)
    assert brokers_line(cur) == (
        "brokers 1/3 reporting; not reporting: 1 (no answer from http://h:9405/metrics.json; hosts 4 replicas), "
        "2 (not live: the controller counts it dead; hosts 4 replicas)")
    text = render(cur, None, "h:1", top=5)
    assert "     2 -                     not live: the controller counts it dead; hosts 4 replicas\n" in text
    assert "     1 h:2                   no answer from http://h:9405/metrics.json; hosts 4 replicas " \
           "(Connection refused)\n" in text
    everyone = Snapshot(0.0, [BrokerView(0, "h", 1, 9404, doc)])
    assert brokers_line(everyone) == "brokers 1/1 reporting"
