"""The pure pieces of broker metrics: histograms and their quantiles, the event-loop lag and
GC pause monitors, error counting, topic stats, JSON rendering, the Kafka JMX-exporter names
the collectors produce, and the metrics.port config key."""
from __future__ import annotations

import asyncio
import json
import math
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.config import BrokerConfig
from broker.metrics.collectors import BrokerCollector
from broker.metrics.loop_lag import GcPauseMonitor, LoopLagMonitor
from broker.metrics.render import families_to_dict, json_value, render_json, sample_value
from broker.stats import (BYTES_OUT, FAILED_FETCH, REPL_BYTES_OUT, TOTAL_FETCH, BrokerTopicStats,
                          ControllerStats, Histogram, RequestStats, quantile_from_buckets)
from clients.cli.strom_metrics import Snapshot, BrokerView, render, value


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


# ------------------------------------------------------------------ histograms

def test_histogram_cumulative_buckets_sum_and_count():
    h = Histogram((1, 10, 100))
    for v in (0.5, 1, 5, 50, 500):
        h.observe(v)
    assert h.cumulative() == [("1.0", 2), ("10.0", 3), ("100.0", 4), ("+Inf", 5)]
    assert h.count == 5 and h.sum == 556.5


def test_quantiles_interpolate_within_buckets_and_cap_at_the_last_bound():
    assert math.isnan(quantile_from_buckets((1, 2), [0, 0, 0], 0.5))
    # 100 values in (0, 10]: the median is 5 by linear interpolation.
    assert quantile_from_buckets((10, 20), [100, 0, 0], 0.5) == 5.0
    assert quantile_from_buckets((10, 20), [50, 50, 0], 0.75) == 15.0
    assert quantile_from_buckets((10, 20), [0, 0, 7], 0.99) == 20.0


def test_quantiles_come_from_a_sliding_window():
    clock = FakeClock()
    h = Histogram((1, 10, 100), window_s=30, clock=clock)
    for _ in range(100):
        h.observe(50)
    assert 10 < h.quantile(0.99) <= 100
    clock.t += 31                      # one window later: the old values are still "previous"
    for _ in range(100):
        h.observe(0.5)
    assert h.quantile(0.25) <= 1
    clock.t += 31                      # and now they are gone
    h.observe(0.5)
    assert h.quantile(0.99) <= 1
    clock.t += 100                     # nothing recent at all
    assert math.isnan(h.quantile(0.5))
    assert h.count == 201              # the Prometheus counts are cumulative for ever


# ------------------------------------------------------------------ monitors

def test_loop_lag_is_the_delay_beyond_the_due_time():
    m = LoopLagMonitor(interval_s=0.1)
    assert m.observe(due=10.0, now=10.25) == 0.25
    assert m.observe(due=11.0, now=10.9) == 0.0        # early (clock granularity): no lag
    assert m.last == 0.0
    assert m.take_max() == 0.25
    assert m.take_max() == 0.0                          # reset by the scrape
    assert m.histogram.count == 2


def test_loop_lag_monitor_sees_a_blocked_loop():
    import time

    async def main() -> LoopLagMonitor:
        m = LoopLagMonitor(interval_s=0.01)
        m.start()
        await asyncio.sleep(0.05)
        time.sleep(0.2)                                  # hold the loop
        await asyncio.sleep(0.05)
        m.stop()
        return m

    m = asyncio.run(main())
    assert m.take_max() >= 0.15
    assert m.histogram.count >= 3


def test_gc_pause_monitor_times_start_to_stop():
    clock = FakeClock(5.0)
    g = GcPauseMonitor(clock=clock)
    g("start", {"generation": 2})
    clock.t += 0.03
    g("stop", {"generation": 2})
    g("stop", {"generation": 0})                         # a stop without start: ignored
    assert g.histogram.count == 1 and abs(g.histogram.sum - 0.03) < 1e-9


# ------------------------------------------------------------------ hot-path counters

def test_the_response_encoder_counts_every_error_code_it_writes():
    """RequestStats' error counts come from the encoder (no second walk of the response):
    nested partitions and the top level (defaulted or not) all count."""
    from clients.protocol.messages import API_BY_NAME
    produce = API_BY_NAME["Produce"]
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0}, {"index": 1, "error_code": 6}, {"index": 2, "error_code": 0}]}]}
    counts: dict[int, int] = {}
    produce.encode_response(body, 9, error_counts=counts)
    assert counts == {0: 2, 6: 1}
    fetch = API_BY_NAME["Fetch"]
    counts = {}
    fetch.encode_response({"error_code": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 1}]}]}, 11, error_counts=counts)
    assert counts == {0: 1, 1: 1}
    counts = {}
    fetch.encode_response({"responses": []}, 11, error_counts=counts)
    assert counts == {0: 1}          # the top-level error_code, defaulted
    counts = {}
    produce.encode_response({"responses": []}, 9, error_counts=counts)
    assert counts == {}


def test_topic_stats_totals_survive_topic_deletion():
    s = BrokerTopicStats()
    s.produced("a", 10, 1000)
    s.produced("b", 5, 500)
    s.produce_failed("a")
    s.fetched("a", 700, from_follower=False)
    s.fetched("a", 300, from_follower=True)
    s.fetched("b", 0, from_follower=False, failed=1)
    s.replicated_in("b", 42)
    s.remove_topic("a")
    assert "a" not in s.topics
    assert s.total[:5] == [15, 1500, 700, 1, 1]
    assert s.total[-2:] == [42, 300]


def test_topic_stats_count_each_partition_of_a_fetch():
    """Kafka's TotalFetchRequestsPerSec counts a fetch per partition read; one call per
    topic of a request carries them all."""
    s = BrokerTopicStats()
    s.fetched("a", 900, from_follower=False, partitions=16, failed=2)
    s.fetched("a", 100, from_follower=True, partitions=3)
    t = s.topics["a"]
    assert (t[TOTAL_FETCH], t[FAILED_FETCH], t[BYTES_OUT], t[REPL_BYTES_OUT]) == (19, 2, 900, 100)
    assert s.total[TOTAL_FETCH] == 19 and s.total[FAILED_FETCH] == 2


def test_request_stats_count_versions_errors_and_times():
    r = RequestStats()
    r.record("Produce", 9, 2.0, {0: 3})
    r.record("Produce", 9, 4.0, {6: 1, 0: 1})
    r.record("Produce", 7, 1.0, {})
    assert r.requests == {("Produce", 9): 2, ("Produce", 7): 1}
    assert r.errors == {("Produce", 0): 4, ("Produce", 6): 1}
    assert r.times["Produce"].count == 3 and r.times["Produce"].sum == 7.0


# ------------------------------------------------------------------ collectors and names

def fake_broker():
    log = SimpleNamespace(topic="t", partition=0, log_start_offset=5, log_end_offset=42,
                          high_watermark=40, segments=[SimpleNamespace(size=100), SimpleNamespace(size=23)],
                          config=SimpleNamespace(min_insync_replicas=2))
    led = SimpleNamespace(topic="t", index=0, is_leader=True, leader_id=0, isr=[0, 1], replicas=[0, 1, 2],
                          min_isr=2, log=log, fetch_lag=0)
    followed = SimpleNamespace(topic="t", index=1, is_leader=False, leader_id=1, isr=[1], replicas=[1, 0],
                               min_isr=2, log=log, fetch_lag=7)
    topic_stats = BrokerTopicStats()
    topic_stats.produced("t", 3, 300)
    request_stats = RequestStats()
    request_stats.record("Fetch", 11, 12.0, {0: 1, 1: 1})
    ctl_states = {("t", 0): SimpleNamespace(state=SimpleNamespace(leader=0)),
                  ("t", 1): SimpleNamespace(state=SimpleNamespace(leader=-1)),
                  ("u", 0): SimpleNamespace(state=SimpleNamespace(leader=7))}
    from zkcoord.controller import Controller
    ctl = SimpleNamespace(active=True, states=ctl_states, live={0, 1}, assignments={"t": {}, "u": {}})
    ctl.offline_partition_count = lambda: Controller.offline_partition_count(ctl)
    group = SimpleNamespace(group_id="g", state="Stable", members={"m1": None, "m2": None})
    committed = SimpleNamespace(offset=30)
    server = SimpleNamespace(listener_name="PLAINTEXT", connection_count=2, connections_created=5,
                             connections_closed=3, bytes_in=1000, bytes_out=2000, requests_in=10,
                             responses_out=9)
    from broker.server.fetch_sessions import FetchSessionCache, open_context
    sessions = FetchSessionCache()
    part = SimpleNamespace(partition=0, fetch_offset=0, partition_max_bytes=1)
    open_context(sessions, 0, 0, True, [("t", None, [part, SimpleNamespace(**{**vars(part), "partition": 1})])], [])
    open_context(sessions, 0, 0, False, [("t", None, [part])], [])
    return SimpleNamespace(
        broker_id=0, advertised=SimpleNamespace(host="127.0.0.1", port=9092), cluster_mode=True,
        fetch_sessions=sessions,
        topic_stats=topic_stats, request_stats=request_stats,
        replicas=SimpleNamespace(partitions={("t", 0): led, ("t", 1): followed}, isr_shrinks=2, isr_expands=1,
                                 offline={("gone", 0)}),
        controller=ctl, controller_stats=ControllerStats(),
        log_manager=SimpleNamespace(all_logs=lambda: [log], log_dirs=["/", "/no/such/dir"],
                                    offline_dirs={"/no/such/dir": "EIO"},
                                    write_behind=SimpleNamespace(handed_bytes=12 << 20, skipped=2)),
        groups=SimpleNamespace(groups={"g": group},
                                          store=SimpleNamespace(offsets={"g": {("t", 0): committed,
                                                                               ("gone", 0): committed}})),
        servers=[server], zk_session=None, metadata=None)


def collect_text(broker) -> str:
    reg = CollectorRegistry(auto_describe=False)
    monitors = SimpleNamespace(loop_lag=LoopLagMonitor(), gc_pauses=GcPauseMonitor(),
                               zk_request_ms=Histogram([1, 10, 100]))
    reg.register(BrokerCollector(broker, monitors))
    return generate_latest(reg).decode()


def test_collector_names_follow_the_jmx_exporter_kafka_rules():
    text = collect_text(fake_broker())
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    def val(name: str, sample: str | None = None, **labels: str) -> float:
        return next(s.value for s in fams[name].samples
                    if s.labels == labels and (sample is None or s.name == sample))

    assert val("kafka_server_brokertopicmetrics_messagesin", topic="t") == 3
    assert val("kafka_server_brokertopicmetrics_messagesin") == 3
    assert val("kafka_server_brokertopicmetrics_bytesin", topic="t") == 300
    assert val("kafka_network_requestmetrics_requests", request="Fetch", version="11") == 1
    assert val("kafka_network_requestmetrics_errors", request="Fetch", error="OFFSET_OUT_OF_RANGE") == 1
    assert val("kafka_network_requestmetrics_errors", request="Fetch", error="NONE") == 1
    assert val("kafka_network_requestmetrics_totaltimems", request="Fetch", quantile="0.99") > 10
    assert val("kafka_server_replicamanager_partitioncount") == 2
    assert val("kafka_server_replicamanager_leadercount") == 1
    assert val("kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert val("kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert val("kafka_server_replicamanager_atminisrpartitioncount") == 1
    assert val("kafka_server_replicamanager_isrshrinks") == 2
    assert val("kafka_server_replicamanager_isrexpands") == 1
    assert val("kafka_server_fetchsessioncache_numincrementalfetchsessions") == 2
    assert val("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 3
    assert val("kafka_server_fetchsessioncache_incrementalfetchsessionevictions") == 0
    assert val("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert val("kafka_controller_kafkacontroller_offlinepartitionscount") == 2   # leader -1 and dead 7
    assert val("kafka_controller_kafkacontroller_globalpartitioncount") == 3
    assert val("kafka_controller_controllerstats_uncleanleaderelections") == 0
    assert val("kafka_log_log_size", topic="t", partition="0") == 123
    assert val("kafka_log_log_logstartoffset", topic="t", partition="0") == 5
    assert val("kafka_log_log_logendoffset", topic="t", partition="0") == 42
    assert val("kafka_log_log_numlogsegments", topic="t", partition="0") == 2
    assert val("kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert val("kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2
    assert val("kafka_consumergroup_members", consumergroup="g") == 2
    # Lag from the high watermark; no replica of "gone" here: no lag series for it.
    assert val("kafka_consumergroup_lag", consumergroup="g", topic="t", partition="0") == 10
    assert not any(s.labels.get("topic") == "gone" for s in fams["kafka_consumergroup_lag"].samples)
    assert val("kafka_server_socket_server_metrics_connection_count",
               listener="PLAINTEXT", networkProcessor="0") == 2
    assert val("kafka_server_socket_server_metrics_incoming_byte",
               listener="PLAINTEXT", networkProcessor="0") == 1000
    assert fams["strom_event_loop_lag_distribution_seconds"].type == "histogram"


def test_standalone_broker_is_its_own_active_controller():
    b = fake_broker()
    b.controller, b.cluster_mode = None, False
    fams = {f.name: f for f in text_string_to_metric_families(collect_text(b))}
    assert fams["kafka_controller_kafkacontroller_activecontrollercount"].samples[0].value == 1
    assert fams["kafka_controller_kafkacontroller_offlinepartitionscount"].samples[0].value == 0
    assert "kafka_controller_controllerstats_uncleanleaderelections" not in fams


# ------------------------------------------------------------------ JSON

def test_json_carries_the_same_samples_as_the_text():
    reg = CollectorRegistry(auto_describe=False)
    reg.register(BrokerCollector(fake_broker(), None))
    families = list(reg.collect())
    snapshot = SimpleNamespace(collect=lambda: families)     # one collection: free bytes move
    doc = json.loads(render_json(families, broker_id=3, timestamp_ms=123))
    assert doc["broker_id"] == 3 and doc["timestamp_ms"] == 123
    text = {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(generate_latest(snapshot).decode()) for s in f.samples}
    js = {(s["name"], tuple(sorted(s["labels"].items()))): s["value"]
          for f in doc["metrics"].values() for s in f["samples"]}
    assert text.keys() == js.keys()
    for k, v in text.items():
        assert (math.isnan(v) and js[k] == "NaN") or js[k] == v, k
    assert sample_value(doc, "kafka_server_brokertopicmetrics_bytesin", {"topic": "t"}) == 300
    assert sample_value(doc, "kafka_server_brokertopicmetrics_bytesin") == 300
    only = families_to_dict(families, ["kafka_log_log_"])
    assert set(only) == {"kafka_log_log_size", "kafka_log_log_logstartoffset",
                         "kafka_log_log_logendoffset", "kafka_log_log_numlogsegments"}


def test_json_values():
    assert json_value(3.0) == 3 and isinstance(json_value(3.0), int)
    assert json_value(0.25) == 0.25
    assert json_value(float("nan")) == "NaN"
    assert json_value(float("inf")) == "+Inf" and json_value(float("-inf")) == "-Inf"


# ------------------------------------------------------------------ the CLI's summary

def test_cli_summary_from_two_samples():
    def fam(name: str, type_: str, v: float, labels: dict | None = None) -> tuple[str, dict]:
        sample = name + ("_total" if type_ == "counter" else "")
        return name, {"type": type_, "help": "", "samples": [{"name": sample, "labels": labels or {}, "value": v}]}

    def doc(ts: int, msgs: int, nbytes: int, active: int) -> dict:
        return {"timestamp_ms": ts, "metrics": dict([
            fam("kafka_server_brokertopicmetrics_messagesin", "counter", msgs),
            fam("kafka_server_brokertopicmetrics_bytesin", "counter", nbytes),
            fam("kafka_controller_kafkacontroller_activecontrollercount", "gauge", active),
            fam("kafka_consumergroup_lag_sum", "gauge", 7, {"consumergroup": "g", "topic": "t"})])}

    prev = Snapshot(0.0, [BrokerView(0, "h", 1, 9404, doc(1000, 100, 10_000_000, 1)),
                          BrokerView(1, "h", 2, 9405, doc(1000, 0, 0, 0))])
    cur = Snapshot(2.0, [BrokerView(0, "h", 1, 9404, doc(3000, 300, 30_000_000, 1)),
                         BrokerView(1, "h", 2, None, None, "metrics.port is not set")])
    assert value(cur.brokers[0].doc, "kafka_server_brokertopicmetrics_messagesin") == 300
    text = render(cur, prev, "h:1", top=5)
    assert "brokers 1/2 reporting" in text and "controller 0" in text
    assert "in 100.0 msgs/s  10.000 MB/s" in text
    assert "metrics.port is not set" in text
    assert "g" in text.split("top lagging groups")[1]


# ------------------------------------------------------------------ config

def test_metrics_port_key_and_its_deprecated_alias():
    assert BrokerConfig.from_dict({}).metrics_port == -1
    assert BrokerConfig.from_dict({"metrics.port": "9404"}).metrics_port == 9404
    assert BrokerConfig.from_dict({"strom.metrics.port": "9405"}).metrics_port == 9405
    assert BrokerConfig.from_dict({"metrics.port": "9404", "strom.metrics.port": "9405"}).metrics_port == 9404
    assert BrokerConfig.from_dict({"metrics.port": "0"}).metrics_port == 0

