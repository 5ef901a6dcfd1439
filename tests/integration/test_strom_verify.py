"""strom-verify end to end, as a user runs it: the command (bin/strom-verify.sh and the
console script) against a real 3-broker cluster (ZooKeeper + broker processes), its fault
schedule acting on that cluster's processes through their pid files.

- Safe settings (acks=all, idempotence, min.insync.replicas=2, clean elections) under kill -9,
  SIGSTOP and the leader-ahead fault: the summary shows faults done and 0 lost, exit 0.
- A deliberately unsafe setup (acks=1, unclean.leader.election.enable=true on the topic)
  under leader-ahead: the followers are frozen while the leader acknowledges alone, then the
  leader dies and a follower takes over, so everything acknowledged during the freeze is
  gone, every run; the summary reports the loss (and the offsets acknowledged twice), exit 1.
  The safe run meets the same fault without a loss: it is the settings that lose.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.testing.verify.local_cluster import is_broker_process
from tests.support import broker_process
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
# 3 s sessions (as the chaos tests): a killed leader is replaced within ~4 s.
ZK_SESSION_MS = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for the module (its start is most of a short run's cost), with the pid
    files strom-verify's --cluster-dir reads: run/broker-ID.pid. Brokers strom-verify started
    again are its own processes now: stopped by their pid files at the end."""
    workdir = tmp_path_factory.mktemp("verify") / "cluster"
    c = Cluster(workdir, brokers=3, zookeeper_session_timeout_ms=ZK_SESSION_MS)
    # strom-verify starts a killed broker again with the command line /proc showed, so the
    # brokers must be `python -m broker` processes, not forks of the harness's zygote.
    saved = dict(broker_process.__dict__)
    broker_process.USE_ZYGOTE = False
    try:
        c.start()
    finally:
        if "USE_ZYGOTE" in saved:
            broker_process.USE_ZYGOTE = saved["USE_ZYGOTE"]
        else:
            del broker_process.USE_ZYGOTE
    run = workdir / "run"
    run.mkdir()
    for i, b in enumerate(c.brokers):
        assert b.proc is not None
        (run / f"broker-{i}.pid").write_text(f"{b.proc.pid}\n")
    try:
        yield c
    finally:
        stop_relaunched(run, c)
        c.stop()


def stop_relaunched(run: Path, c: Cluster) -> None:
    ours = {b.proc.pid for b in c.brokers if b.proc is not None}
    pids = []
    for f in run.glob("broker-*.pid"):
        pid = int(f.read_text())
        if pid not in ours and is_broker_process(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
    deadline = time.monotonic() + 30
    for pid in pids:
        while is_broker_process(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if is_broker_process(pid):
            os.kill(pid, signal.SIGKILL)


def verify(command: list[str], cluster: Cluster, *args: str) -> tuple[int, str, dict[str, int]]:
    """Run strom-verify on the cluster; (exit code, its summary, the summary's counts)."""
    argv = [*command, "--bootstrap-server", cluster.bootstrap,
            "--cluster-dir", str(cluster.workdir), *args]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=REPO)
    took = time.monotonic() - started
    print(f"$ {' '.join(argv)}\n-> exit {done.returncode} in {took:.1f}s\n"
          f"--- stderr ---\n{done.stderr}--- summary ---\n{done.stdout}")
    counts = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^  ([a-z][a-z ]+?)\s+(\d+)", done.stdout, re.M)}
    return done.returncode, done.stdout, counts


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "strom-verify"
    assert script.is_file(), f"{script} missing: pip install -e . installs the console script"
    return [str(script)]


def test_safe_settings_under_kill9_pause_and_leader_ahead_lose_nothing(cluster, long_run):
    # Short form: one round of the three kinds, however long the restarts take on a busy
    # machine (producing goes on until they are done); long form: faults in turn for 120 s.
    timing = (["--duration", "120", "--fault-interval", "3"] if long_run else
              ["--duration", "8", "--fault-interval", "1", "--fault-rounds", "1"])
    rc, out, counts = verify([str(REPO / "bin" / "strom-verify.sh")], cluster,
                             "--faults", "leader-ahead,kill9,pause", *timing,
                             "--rate", "200", "--fault-duration", "2", "--seed", "7")
    assert rc == 0, out
    assert counts["lost"] == 0 and counts["conflicting"] == 0, out
    assert counts["duplicated"] == 0 and counts["reordered"] == 0, out
    assert counts["acknowledged"] >= 1000, out
    assert counts["read back"] >= counts["acknowledged"], out
    done = dict(re.findall(r"([a-z0-9-]+) (\d+)[,)]", out.split("faults done", 1)[1].split("\n")[0]))
    assert set(done) == {"kill9", "pause", "leader-ahead"}, out    # each kind at least once
    assert "result: OK" in out


def test_unsafe_setup_loses_acknowledged_records_and_exits_1(cluster, long_run):
    rc, out, counts = verify(console_script(), cluster,
                             "--acks", "1", "--partitions", "1",
                             "--topic-config", "unclean.leader.election.enable=true",
                             "--faults", "leader-ahead", "--fault-rounds", "3" if long_run else "1",
                             "--duration", "6",
                             "--rate", "200", "--fault-interval", "1", "--fault-duration", "2")
    assert rc == 1, out
    # ~2 s of acks=1 records at 200/s were on the dead leader alone
    assert counts["lost"] >= 50, out
    assert counts["conflicting"] >= 1, out          # their offsets were acknowledged again
    assert counts["faults done"] >= 1 and "leader-ahead" in out, out
    assert "result: FAILED" in out and "acked at 0/" in out


START_CLUSTER_PORTS = [2181, 9092, 9093, 9094, 9404, 9405, 9406]


def port_busy(port: int) -> bool:
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_start_cluster_directory_under_kill9_and_pause(tmp_path, long_run):
    """--cluster-dir of a bin/start-cluster.sh cluster: its pid files, and brokers started
    again with start-cluster.sh --broker N (which waits for the registration). Long form
    only: the script's cluster has fixed ports and the sample configs' slower failure
    detection."""
    if not long_run:
        pytest.skip("long form only (--long or STROM_LONG_TESTS=1)")
    if any(port_busy(p) for p in START_CLUSTER_PORTS):
        pytest.skip("a port of bin/start-cluster.sh's cluster is busy here")
    data = tmp_path / "data"
    bootstrap = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    try:
        started = subprocess.run([str(REPO / "bin/start-cluster.sh"), "--no-setup", "--data-dir",
                                  str(data)], cwd=REPO, capture_output=True, text=True, timeout=200)
        assert started.returncode == 0, started.stderr
        done = subprocess.run([str(REPO / "bin/strom-verify.sh"), "--bootstrap-server", bootstrap,
                               "--cluster-dir", str(data), "--faults", "kill9,pause",
                               "--duration", "60", "--fault-interval", "2", "--fault-duration", "3"],
                              capture_output=True, text=True, timeout=400, cwd=REPO)
        print(done.stderr, done.stdout)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill9: broker" in done.stderr and "started again and live" in done.stderr
    finally:
        subprocess.run([str(REPO / "bin/stop-cluster.sh"), "--data-dir", str(data)], cwd=REPO,
                       capture_output=True, timeout=120)
