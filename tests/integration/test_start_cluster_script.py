"""README's first command in cluster mode: bin/start-cluster.sh starts ZooKeeper and three
brokers on 127.0.0.1:2181 and 9092-9094, waits for registration and a controller, prints the
bootstrap servers; the cluster serves kcat; with --rest the REST proxy answers on 8082 with
the cluster's brokers; bin/stop-cluster.sh stops everything."""
from __future__ import annotations

import json
import shutil
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
