"""The test fixtures of the cluster and fault tests work: a real ZooKeeper server starts,
answers imok, keeps its data across a restart and stops; ChaosProducer and read_back drive the
delivery checker against a real broker; and (once cluster mode exists) a Cluster's brokers
register in /brokers/ids, a killed broker's registration expires and comes back on restart."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.chaos.checker import Checker, ChaosProducer, read_back
from tests.support.cluster import Cluster
from tests.support.zk_process import ZooKeeperProcess, four_letter_word, zookeeper_available

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def broker_uses(*needles: str) -> bool:
    return any(n in f.read_text(errors="replace") for f in (REPO / "broker").rglob("*.py")
               for n in needles)


# Cluster mode exists once zkcoord/zookeeper.py does and the broker uses it.
CLUSTER_MODE = (REPO / "zkcoord" / "zookeeper.py").exists() and broker_uses("ZkMetadataStore",
                                                                            "zkcoord.zookeeper")
CONTROLLER = CLUSTER_MODE and (REPO / "zkcoord" / "controller.py").exists()

needs_zookeeper = pytest.mark.skipif(not zookeeper_available(),
                                     reason="ZooKeeper not installed (apt-get install -y zookeeper)")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@needs_zookeeper
def test_zookeeper_process_starts_answers_imok_keeps_data_and_stops(tmp_path):
    from kazoo.client import KazooClient

    zk = ZooKeeperProcess(tmp_path / "zk")
    with zk:
        assert zk.running
        assert zk.ruok() == "imok"
        assert "Mode: standalone" in four_letter_word("127.0.0.1", zk.port, "srvr")
        client = KazooClient(hosts=zk.connect)
        client.start(timeout=10)
        try:
            client.ensure_path("/strom")
            client.create("/strom/kept", b"v1")
            client.create("/strom/gone", b"x", ephemeral=True)
        finally:
            client.stop()
            client.close()

        zk.restart()
        assert zk.ruok() == "imok"
        client = KazooClient(hosts=zk.connect)
        client.start(timeout=10)
        try:
            assert client.get("/strom/kept")[0] == b"v1"
            assert client.exists("/strom/gone") is None    # ephemeral: its session closed
        finally:
            client.stop()
            client.close()
    assert not zk.running
    assert not port_open(zk.port)
    assert zk.ruok() == ""


def test_chaos_producer_and_read_back_against_a_broker(broker_factory):
    """The confluent-kafka drivers feed the checker with real acks and reads: a clean run
    against one standalone broker reports every acknowledged record read back once."""
    b = broker_factory({"num.partitions": "3"})
    topic = "chaos-tools"
    checker = Checker()
    with ChaosProducer(b.bootstrap, topic, checker, "p0", idempotence=True, max_records=3000) as p:
        p.wait_acked(3000, timeout=60)
    with ChaosProducer(b.bootstrap, topic, checker, "p1", rate=500, max_records=100) as q:
        q.wait_acked(100, timeout=30)
    counts = read_back(b.bootstrap, topic, 3, checker, timeout=60)
    assert sum(counts.values()) == 3100
    assert all(n > 0 for n in counts.values()), counts        # keys spread over partitions
    report = checker.assert_ok(min_acked=3100)
    assert (report.acknowledged, report.read_back, report.unacked_but_present) == (3100, 3100, 0)

    # reading a second time (another consumer) finds the same records at the same offsets
    read_back(b.bootstrap, topic, [0, 1, 2], checker, timeout=60)
    assert checker.report().ok

    # and a record the broker never had is reported lost
    checker.record_acked(0, 10_000, b"k", b"p9-0")
    assert checker.report().lost == 1


@needs_zookeeper
@needs_zookeeper
def test_cluster_reads_kafka_zk_paths_under_its_chroot(tmp_path):
    """The Cluster's views of ZooKeeper, on znodes written by hand as Kafka's ZK mode writes
    them (no broker started), and the broker configs it generates."""
    c = Cluster(tmp_path, brokers=2, overrides={"num.partitions": "4"},
                broker_overrides={1: {"broker.rack": "r1"}}, own_zookeeper=True)
    props = [dict(line.split("=", 1) for line in b.config_path.read_text().splitlines())
             for b in c.brokers]
    assert [p["broker.id"] for p in props] == ["0", "1"]
    assert all(p["zookeeper.connect"] == c.zk_connect == f"127.0.0.1:{c.zookeeper.port}/strom"
               for p in props)
    assert props[0]["offsets.topic.replication.factor"] == "2"
    assert props[0]["default.replication.factor"] == "2" and props[0]["min.insync.replicas"] == "2"
    assert props[0]["zookeeper.session.timeout.ms"] == "6000"
    assert props[0]["replica.lag.time.max.ms"] == "3000"
    assert props[0]["num.partitions"] == "4" and props[1]["broker.rack"] == "r1"
    assert "broker.rack" not in props[0]
    assert c.bootstrap == f"127.0.0.1:{c.broker(0).port},127.0.0.1:{c.broker(1).port}"

    c.zookeeper.start()
    try:
        assert c.broker_ids() == [] and c.controller_id() is None
        assert c.partition_state("t", 0) is None and c.leader("t", 0) is None
        zk = c.zk
        for i in (0, 1):
            zk.create(c.path(f"/brokers/ids/{i}"), json.dumps(
                {"version": 5, "host": "127.0.0.1", "port": c.broker(i).port}).encode(),
                makepath=True, ephemeral=True)
        zk.create("/strom/controller", b'{"version":1,"brokerid":1,"timestamp":"1"}')
        zk.create("/strom/controller_epoch", b"3")
        zk.create("/strom/brokers/topics/t/partitions/0/state", json.dumps(
            {"controller_epoch": 3, "leader": 0, "version": 1, "leader_epoch": 7,
             "isr": [0, 1]}).encode(), makepath=True)
        assert c.wait_for_brokers(2, timeout=5) == [0, 1]
        assert c.broker_registration(1)["port"] == c.broker(1).port
        assert c.wait_for_controller(timeout=5) == 1 and c.controller_epoch() == 3
        assert c.partition_state("t", 0)["leader_epoch"] == 7
        assert c.wait_for_leader("t", 0, timeout=5) == 0 and c.isr("t", 0) == [0, 1]
        with pytest.raises(TimeoutError, match="a controller in /controller"):
            c.wait_for_controller(timeout=0.3, other_than=1)
        zk.delete("/strom/brokers/ids/1")
        c.wait_for_broker_gone(1, timeout=5)
        assert c.broker_ids() == [0]
    finally:
        c.stop()
    assert not c.zookeeper.running


@needs_zookeeper
@pytest.mark.skipif(not CLUSTER_MODE, reason="cluster mode not built yet (zkcoord/zookeeper.py, used by the broker)")
def test_cluster_brokers_register_expire_and_come_back(tmp_path):
    with Cluster(tmp_path, brokers=3, own_zookeeper=True).start(wait_for_controller=CONTROLLER) as c:
        assert c.wait_for_brokers(3) == [0, 1, 2]
        assert len(c.bootstrap.split(",")) == 3
        reg = c.broker_registration(1)
        assert reg is not None and reg["port"] == c.broker(1).port
        if CONTROLLER:
            assert c.controller_id() in (0, 1, 2)

        c.kill9(1)                               # no deregistration: the session expires
        c.wait_for_broker_gone(1, timeout=30)
        assert c.broker_ids() == [0, 2]
        c.restart(1)
        assert c.wait_for_brokers(3, timeout=30) == [0, 1, 2]

        c.terminate(2)                           # controlled shutdown deregisters at once
        c.wait_for_broker_gone(2, timeout=15)
        c.restart(2)
        c.wait_for_brokers(3, timeout=30)
    assert not c.zookeeper.running
    assert not any(c.running(i) for i in range(3))
