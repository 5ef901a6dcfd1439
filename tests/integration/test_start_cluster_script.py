"""README's first command in cluster mode: bin/start-cluster.sh starts ZooKeeper and three
brokers on 127.0.0.1:2181 and 9092-9094, waits for registration and a controller, prints the
bootstrap servers; the cluster serves kcat; with --rest the REST proxy answers on 8082 with
the cluster's brokers; bin/stop-cluster.sh stops everything. And the operations on one broker
(start what is not running, stop/start/restart one, add one, a rolling restart)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PORTS = [2181, 9092, 9093, 9094, 9404, 9405, 9406, 8082]   # ZooKeeper, brokers, metrics, REST


def in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(any(in_use(p) for p in PORTS), reason="a port of the default cluster is busy here")
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_start_and_stop_cluster(tmp_path):
    data = tmp_path / "data"
    try:
        r = subprocess.run([str(REPO / "bin/start-cluster.sh"), "--no-setup", "--data-dir", str(data),
                            "--timeout", "90", "--rest"], cwd=REPO, capture_output=True, text=True, timeout=150)
        print(r.stdout[-2000:], r.stderr[-2000:])
        assert r.returncode == 0
        assert "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094" in r.stdout
        assert "bin/stop-cluster.sh" in r.stdout
        md = subprocess.run(["kcat", "-b", "127.0.0.1:9093", "-L", "-m", "10"], capture_output=True,
                            text=True, timeout=60)
        assert " 3 brokers:" in md.stdout, md.stdout + md.stderr
        assert "(controller)" in md.stdout
        assert "REST proxy: http://127.0.0.1:8082" in r.stdout
        brokers = subprocess.run(["curl", "-s", "http://127.0.0.1:8082/brokers"], capture_output=True,
                                 text=True, timeout=60)
        assert json.loads(brokers.stdout) == {"brokers": [0, 1, 2]}, brokers.stdout
    finally:
        s = subprocess.run([str(REPO / "bin/stop-cluster.sh"), "--data-dir", str(data)], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
        print(s.stdout[-1000:], s.stderr[-1000:])
    assert s.returncode == 0
    assert not any(in_use(p) for p in PORTS), "something is still listening after stop-cluster.sh"


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([str(REPO / "bin" / name), *args], cwd=REPO, capture_output=True, text=True,
                       timeout=200)
    print(f"$ bin/{name} {' '.join(args)} -> {r.returncode}\n{r.stdout[-1500:]}{r.stderr[-2500:]}")
    return r


@pytest.mark.skipif(any(in_use(p) for p in PORTS + [9095, 9407]), reason="a port of the default cluster is busy here")
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_per_broker_operations(tmp_path):
    """The sample defaults (replication factor 3, min.insync.replicas 2); a crashed broker
    started again by start-cluster.sh with its crash's output kept; stop and start one broker;
    restart one; add a fourth; a rolling restart; then stop-cluster.sh stops all of it."""
    data = tmp_path / "data"
    d = ("--no-setup", "--data-dir", str(data))
    try:
        assert script("start-cluster.sh", *d).returncode == 0
        topics = [str(REPO / "bin/kafka-topics.sh"), "--bootstrap-server", "127.0.0.1:9092"]
        subprocess.run([*topics, "--create", "--topic", "ops", "--partitions", "3"], check=True, timeout=60)
        described = subprocess.run([*topics, "--describe", "--topic", "ops"], capture_output=True,
                                   text=True, timeout=60).stdout
        assert "ReplicationFactor: 3" in described and "min.insync.replicas=2" in described, described

        # kill -9 of broker 1: a start starts it (only it), and its crashed run's output is kept
        pid = int((data / "run/broker-server-1.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        r = script("start-cluster.sh", *d)
        assert r.returncode == 0
        assert "started broker server-1" in r.stderr and "started broker server-0" not in r.stderr
        assert "broker 0 is already running" in r.stderr
        assert "strom broker 1 listening" in (data / "logs/broker-server-1.out.1").read_text()

        s = script("stop-cluster.sh", "--data-dir", str(data), "--broker", "2")
        assert s.returncode == 0 and not in_use(9094)
        assert script("start-cluster.sh", *d, "--broker", "2").returncode == 0 and in_use(9094)

        r = script("start-cluster.sh", *d, "--restart", "0")
        assert r.returncode == 0 and "no partition under-replicated" in r.stderr

        r = script("start-cluster.sh", *d, "--add-broker")
        assert r.returncode == 0 and "127.0.0.1:9095" in r.stdout
        assert (data / "config/server-3.properties").is_file()
        md = subprocess.run(["kcat", "-b", "127.0.0.1:9092", "-L", "-m", "10"], capture_output=True,
                            text=True, timeout=60).stdout
        assert " 4 brokers:" in md, md

        r = script("start-cluster.sh", *d, "--rolling-restart")
        assert r.returncode == 0 and "rolling restart done" in r.stderr
        assert r.stderr.count("no partition under-replicated") == 4
        described = subprocess.run([*topics, "--describe", "--topic", "ops"], capture_output=True,
                                   text=True, timeout=60).stdout
        assert described.count("Isr: ") == 3 and all(
            len(line.split("Isr: ")[1].split(",")) == 3 for line in described.splitlines() if "Isr: " in line), described
    finally:
        s = script("stop-cluster.sh", "--data-dir", str(data))
    assert s.returncode == 0
    assert not any(in_use(p) for p in PORTS + [9095, 9407]), "something is still listening after stop-cluster.sh"
