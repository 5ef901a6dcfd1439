"""The test harness survives losing a port it picked to another process.

free_port() names a port that was free a moment ago; in CI another process bound it before the
broker did, and a test's set-up failed with the broker exiting on "[Errno 98] address already in
use". Here the test takes the port itself, bound (the CI case: the broker exits) or listening
(something answers on the port, but not the broker), and the harness must still start the broker
(tests/support/broker_process.py) or the cluster (zk_process.py, cluster.py) and hand back where it
really listens."""
from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess, free_port, listens_on
from tests.support.cluster import Cluster
from tests.support.wire import WireClient
from tests.support.zk_process import zookeeper_available

pytestmark = pytest.mark.integration


def occupy(port: int, listen: bool) -> socket.socket:
    # No SO_REUSEADDR: the broker binds with it, and two such sockets may share a bound port.
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    if listen:
        s.listen()
    return s


def metadata(port: int) -> Any:
    with WireClient("127.0.0.1", port, timeout=5) as w:
        assert w.request("ApiVersions", 0, {}).error_code == 0
        return w.request("Metadata", 1, {"topics": []})


@pytest.mark.parametrize("listen", [False, True], ids=["bound", "listening"])
def test_a_broker_whose_port_was_taken_starts_on_another(tmp_path, listen):
    b = BrokerProcess(tmp_path / "b", overrides={"advertised.listeners": "PLAINTEXT://127.0.0.1:{port}"})
    taken = b.port
    with occupy(taken, listen):
        try:
            b.start()
            assert b.port != taken
            md = metadata(b.port)
            assert [(x.node_id, x.port) for x in md.brokers] == [(0, b.port)]   # advertised moved too
            config = b.config_path.read_text()
            assert f"listeners=PLAINTEXT://127.0.0.1:{b.port}\n" in config and str(taken) not in config
            assert "address already in use" in b.output().lower()
        finally:
            b.stop()


def test_a_broker_whose_metrics_port_was_taken_moves_it(tmp_path):
    """metrics.port is bound right after the listeners (seen in CI: a cluster's broker exited
    on "Address already in use" for the metrics port its test had picked). Lost to another
    process before the broker first listens, it moves as the listener's port does, and
    `metrics_port` says where."""
    taken = free_port()
    b = BrokerProcess(tmp_path / "b", overrides={"metrics.port": str(taken)})
    with occupy(taken, listen=False):
        try:
            b.start()
            assert b.metrics_port != taken
            assert b.proc is not None and listens_on(b.proc.pid, b.metrics_port)
            assert f"metrics.port={b.metrics_port}\n" in b.config_path.read_text()
            assert "address already in use" in b.output().lower()
        finally:
            b.stop()


def test_a_restarted_broker_waits_for_its_own_port(tmp_path):
    """A broker that listened keeps its port (clients and other brokers know it): a restart
    that finds it taken for a moment tries the same port again."""
    b = BrokerProcess(tmp_path / "b").start()
    port = b.port
    b.kill9()
    b.stop()
    squatter = occupy(port, listen=False)
    log_start = len(b.output())

    def release_once_refused() -> None:
        deadline = time.monotonic() + 30
        while "address already in use" not in b.output()[log_start:].lower() and time.monotonic() < deadline:
            time.sleep(0.02)
        squatter.close()

    releaser = threading.Thread(target=release_once_refused)
    releaser.start()
    try:
        b.start()
        assert b.port == port
        assert metadata(port).brokers[0].port == port
        assert "address already in use" in b.output()[log_start:].lower()
    finally:
        releaser.join()
        b.stop()


def test_a_broker_failing_for_another_reason_is_not_started_again(tmp_path):
    b = BrokerProcess(tmp_path / "b", overrides={"num.partitions": "many"})
    with pytest.raises(RuntimeError, match="broker failed to start"):
        b.start()
    assert b.output().count("'many' is not an integer") == 1


@pytest.mark.skipif(not zookeeper_available(), reason="ZooKeeper not installed (apt-get install -y zookeeper)")
def test_a_cluster_whose_zookeeper_and_broker_ports_were_taken_starts(tmp_path):
    c = Cluster(tmp_path, brokers=1, own_zookeeper=True)
    zk_port, broker_port = c.zookeeper.port, c.broker(0).port
    with occupy(zk_port, listen=True), occupy(broker_port, listen=False), c.start(timeout=60):
        assert c.zookeeper.port != zk_port and c.broker(0).port != broker_port
        assert f"zookeeper.connect=127.0.0.1:{c.zookeeper.port}/strom\n" in c.broker(0).config_path.read_text()
        assert c.broker_ids() == [0]
        registration = c.broker_registration(0)
        assert registration is not None and registration["port"] == c.broker(0).port
        assert [x.port for x in metadata(c.broker(0).port).brokers] == [c.broker(0).port]
