"""What an on-call engineer looks for, against real brokers and a real ZooKeeper:
`bin/strom-metrics.sh` names a killed broker (expected: live or hosting replicas) and the leader's per-partition under-replicated gauge says 1; a follower that falls
behind shows MaxLag > 0 and is not ready until it is back in the ISR, then MaxLag is 0 and
/readyz 200; the ZooKeeper session is CONNECTED and its request latency count grows; idle summaries print
no NaN; a standalone broker reports its log dir's free bytes and answers /healthz and /readyz."""
from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.metrics.render import sample_value
from tests.support.broker_process import REPO, free_port
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration

LAG_MS = 1500


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metrics(port: int) -> dict:
    status, body = get(port, "/metrics.json")
    assert status == 200
    return json.loads(body)


def start_cluster(workdir, broker_overrides: dict[int, dict[str, str]] | None = None) -> Cluster:
    """A started 3-broker cluster whose brokers serve metrics (`c.metrics_ports[i]`)."""
    ports = [free_port() for _ in range(3)]
    c = Cluster(workdir, brokers=3, replica_lag_time_max_ms=LAG_MS,
                broker_overrides={i: {"metrics.port": str(ports[i]), **(broker_overrides or {}).get(i, {})}
                                  for i in range(3)})
    c.start()
    # Where they listen: a broker that lost a port to another process moved (BrokerProcess.start).
    c.metrics_ports = ports = [b.metrics_port for b in c.brokers]
    try:
        c.wait_until(lambda: all(_answers(p) for p in ports), timeout=10)
    except BaseException:
        c.stop()
        raise
    return c


def _answers(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


def strom_metrics(bootstrap: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin/strom-metrics.sh"), "--bootstrap-server", bootstrap,
                           "--interval", "0", "--timeout", "5"], capture_output=True, text=True, timeout=60)


def brokers_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("brokers "))


def test_strom_metrics_names_the_dead_broker_and_the_leader_reports_it_under_replicated(tmp_path):
    with start_cluster(tmp_path / "c") as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("ops", num_partitions=6, replication_factor=3)])["ops"].result(30)
        for p in range(6):
            c.wait_for_leader("ops", p)
        healthy = strom_metrics(c.bootstrap)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert brokers_line(healthy.stdout) == "brokers 3/3 reporting"

        victim = 2
        hosted = sum(victim in p.replicas for t in admin.list_topics(timeout=10).topics.values()
                     for p in t.partitions.values())
        led_by_0 = next(p for p in range(6) if c.leader("ops", p) == 0)
        c.kill9(victim)
        # At once: the controller may not have counted it dead yet, but it is expected and
        # silent either way.
        at_once = strom_metrics(c.bootstrap_except(victim))
        print(f"\njust after kill -9 of broker {victim}: {brokers_line(at_once.stdout)}")
        assert at_once.returncode == 2, at_once.stdout + at_once.stderr
        assert brokers_line(at_once.stdout).startswith(f"brokers 2/3 reporting; not reporting: {victim} (")

        c.wait_for_broker_gone(victim)
        out = strom_metrics(c.bootstrap_except(victim))
        line = brokers_line(out.stdout)
        print(f"its session expired: {line}\n{out.stdout}")
        assert out.returncode == 2, out.stdout + out.stderr
        assert line == (f"brokers 2/3 reporting; not reporting: {victim} "
                        f"(not live: the controller counts it dead; hosts {hosted} replicas)")
        assert hosted >= 6

        # The leader of a partition that lost its follower: under-replicated, ISR 2 of 3.
        labels = {"topic": "ops", "partition": str(led_by_0)}
        c.wait_until(lambda: sample_value(metrics(c.metrics_ports[0]), "kafka_cluster_partition_underreplicated",
                                          labels) == 1, timeout=LAG_MS / 1000 * 4)
        doc = metrics(c.metrics_ports[0])
        assert sample_value(doc, "kafka_cluster_partition_insyncreplicascount", labels) == 2
        assert sample_value(doc, "kafka_cluster_partition_replicascount", labels) == 3
        # A follower reports 0 for a partition it does not lead.
        followed = next(p for p in range(6) if c.leader("ops", p) == 1)
        assert sample_value(doc, "kafka_cluster_partition_underreplicated",
                            {"topic": "ops", "partition": str(followed)}) == 0
        # The survivors lead under-replicated partitions but serve and are caught up: ready.
        status, body = get(c.metrics_ports[0], "/readyz")
        assert status == 200 and json.loads(body)["under_replicated_led"] >= 1


def test_a_follower_behind_shows_max_lag_and_is_not_ready_until_back_in_the_isr(tmp_path):
    # Broker 1 fetches one batch at a time, so catching up on many batches takes a while.
    with start_cluster(tmp_path / "c", {1: {"replica.fetch.max.bytes": "1",
                                            "replica.fetch.response.max.bytes": "1"}}) as c:
        leader, follower = 0, 1
        port = c.metrics_ports[follower]
        # Brokers that never timed an election: their election summary says 0, not NaN.
        for i in range(3):
            assert b"NaN" not in get(c.metrics_ports[i], "/metrics")[1]
        zk0 = metrics(port)
        latency = "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms"
        assert sample_value(zk0, "kafka_server_sessionexpirelistener_sessionstate", {"state": "CONNECTED"}) == 1
        count0 = sample_value(zk0, latency, sample=latency + "_count")

        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("behind", num_partitions=1, replica_assignment=[[leader, follower]],
                                      config={"min.insync.replicas": "1"})])["behind"].result(30)
        c.wait_for_leader("behind", 0)
        c.wait_until(lambda: sorted(c.isr("behind", 0)) == [leader, follower])
        # Creating a topic made this broker read it from ZooKeeper: timed requests.
        c.wait_until(lambda: sample_value(metrics(port), latency, sample=latency + "_count") > count0, timeout=10)
        doc = metrics(port)
        assert sample_value(doc, "kafka_server_replicafetchermanager_maxlag", {"clientId": "Replica"}) == 0
        assert get(port, "/readyz")[0] == 200

        c.sigstop(follower)
        try:
            c.wait_until(lambda: c.isr("behind", 0) == [leader], timeout=LAG_MS / 1000 * 6)
            p = Producer({"bootstrap.servers": c.broker(leader).bootstrap, "acks": "1", "linger.ms": 0,
                          "batch.num.messages": 1, "log_level": 0})
            for i in range(1500):
                p.produce("behind", value=b"x" * 100, partition=0)
                p.poll(0)
            assert p.flush(30) == 0
        finally:
            c.sigcont(follower)
        seen: list[tuple[float, int]] = []

        def lagging() -> bool:
            lag = sample_value(metrics(port), "kafka_server_replicafetchermanager_maxlag", {"clientId": "Replica"})
            status, body = get(port, "/readyz")
            seen.append((lag, status))
            return lag > 0 and status == 503 and b"catching up" in body

        c.wait_until(lagging, timeout=20, interval=0.05)
        print(f"\nfollower {follower} resumed behind 1500 batches: MaxLag {seen[-1][0]:.0f}, /readyz {seen[-1][1]}")
        c.wait_until(lambda: sorted(c.isr("behind", 0)) == [leader, follower], timeout=60)
        c.wait_until(lambda: get(port, "/readyz")[0] == 200, timeout=20)
        doc = metrics(port)
        assert sample_value(doc, "kafka_server_replicafetchermanager_maxlag", {"clientId": "Replica"}) == 0
        print(f"back in the ISR: MaxLag 0, /readyz 200; ZooKeeper requests timed "
              f"{sample_value(doc, latency, sample=latency + '_count'):.0f} (from {count0:.0f})")


def test_an_idle_broker_prints_no_nan_and_answers_health_and_readiness(broker_factory):
    port = free_port()
    b = broker_factory({"metrics.port": str(port)})
    assert b"NaN" not in get(port, "/metrics")[1]
    assert b"NaN" not in get(port, "/metrics.json")[1]
    doc = metrics(port)
    free = doc["metrics"]["strom_log_dir_usable_bytes"]["samples"]
    assert len(free) == 1 and free[0]["value"] > 0
    assert sample_value(doc, "kafka_log_logmanager_logdirectoryoffline", free[0]["labels"]) == 0
    out = subprocess.run([str(REPO / "bin/strom-metrics.sh"), "--bootstrap-server", b.bootstrap,
                          "--interval", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "nan" not in out.stdout.lower(), out.stdout + out.stderr
    assert get(port, "/healthz") == (200, b"ok\n")
    status, body = get(port, "/readyz")
    assert status == 200 and json.loads(body) == {"ready": True, "broker_id": 0, "reasons": [],
                                                  "under_replicated_led": 0, "offline_log_dirs": []}


def test_request_time_split_and_client_quota_families_are_served(broker_factory):
    """RequestMetrics' queue/local/remote/throttle/response-queue/send times beside the total,
    and a configured quota's rate and limit (broker/metrics/quota_metrics.py, registered by
    BrokerMetrics)."""
    port = free_port()
    b = broker_factory({"metrics.port": str(port)})
    cfg = subprocess.run([str(REPO / "bin/kafka-configs.sh"), "--bootstrap-server", b.bootstrap, "--alter",
                          "--entity-type", "clients", "--entity-name", "metered",
                          "--add-config", "producer_byte_rate=1048576"], capture_output=True, text=True, timeout=60)
    assert cfg.returncode == 0, cfg.stderr
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "metered", "log_level": 0})
    p.produce("split", b"v")
    assert p.flush(30) == 0
    doc = metrics(port)["metrics"]
    for part in ("requestqueuetimems", "localtimems", "remotetimems", "throttletimems",
                 "responsequeuetimems", "responsesendtimems"):
        assert f"kafka_network_requestmetrics_{part}" in doc, part
    limits = doc["strom_quota_limit"]["samples"]
    assert any(s["labels"].get("clientId") == "metered" and s["value"] == 1048576 for s in limits), limits
    assert "kafka_server_quota_byte_rate" in doc


def test_a_zookeeper_session_expiry_is_counted_and_the_session_reconnects(tmp_path):
    port = free_port()
    with Cluster(tmp_path / "c", brokers=1, zookeeper_session_timeout_ms=2000,
                 broker_overrides={0: {"metrics.port": str(port)}}) as c:
        c.wait_until(lambda: _answers(port), timeout=10)
        pre = "kafka_server_sessionexpirelistener_"
        before = metrics(port)
        assert sample_value(before, pre + "sessionstate", {"state": "CONNECTED"}) == 1
        assert sample_value(before, pre + "zookeeperexpires") == 0
        c.sigstop(0)                    # past its session timeout: ZooKeeper expires the session
        time.sleep(3.5)
        c.sigcont(0)

        def reconnected_after_expiry() -> dict | None:
            doc = metrics(port)
            ok = sample_value(doc, pre + "zookeeperexpires") == 1 \
                and sample_value(doc, pre + "sessionstate", {"state": "CONNECTED"}) == 1
            return doc if ok else None

        after = c.wait_until(reconnected_after_expiry, timeout=20)
        print(f"\nsession expired while paused: expires {sample_value(after, pre + 'zookeeperexpires'):.0f}, "
              f"disconnects {sample_value(after, pre + 'zookeeperdisconnects'):.0f}, "
              f"connects {sample_value(after, pre + 'zookeepersyncconnects'):.0f}; state CONNECTED again")
        assert sample_value(after, pre + "zookeeperdisconnects") >= 1
        assert sample_value(after, pre + "zookeepersyncconnects") > sample_value(before, pre + "zookeepersyncconnects")
        c.wait_until(lambda: get(port, "/readyz")[0] == 200, timeout=20)
