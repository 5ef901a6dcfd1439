"""strom-verify's hold on a local cluster's processes (broker/testing/verify/local_cluster.py),
with real processes that look like brokers to it (`python -m broker` run from a directory whose
`broker` package only sleeps): found by pid file, frozen and thawed, killed and started again
as they were started; a pid file naming anything else is never signalled."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.testing.verify.local_cluster import ClusterError, is_broker_process, open_cluster

REPO = Path(__file__).resolve().parents[2]
SLEEPER = """import os, sys, time
print(f"started {os.getpid()} mark={os.environ.get('VERIFY_MARK')} args={sys.argv[1:]}", flush=True)
time.sleep(120)
"""


@pytest.fixture
def fake_broker(tmp_path):
    """Start a `python -m broker CONFIG` process (the stand-in) with its pid file in
    tmp_path/run/broker-server-1.pid; yields (cluster dir, output file); stops every process
    the pid file named."""
    home = tmp_path / "home"
    (home / "broker").mkdir(parents=True)
    (home / "broker" / "__main__.py").write_text(SLEEPER)
    run = tmp_path / "run"
    run.mkdir()
    output = tmp_path / "broker-1.out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["VERIFY_MARK"] = "m1"
    with open(output, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "broker", "server-1.properties"],
                                cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT)
    (run / "broker-server-1.pid").write_text(f"{proc.pid}\n")
    seen = [proc.pid]
    wait_for(lambda: "started" in output.read_text())
    yield tmp_path, output, seen
    seen.append(int((run / "broker-server-1.pid").read_text()))
    for pid in set(seen):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(5)


def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.02)


def state(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    return "?"


def test_pause_resume_kill_and_start_again_as_it_was_started(fake_broker):
    directory, output, seen = fake_broker
    cluster = open_cluster(directory)
    assert cluster.start_script is None           # not a start-cluster.sh directory
    assert cluster.broker_ids() == [1] and cluster.running(1)
    pid = cluster.pid(1)
    assert pid == seen[0]

    cluster.pause(1)
    wait_for(lambda: state(pid) == "T")
    cluster.resume(1)
    wait_for(lambda: state(pid) != "T")

    cluster.kill9(1)
    wait_for(lambda: not is_broker_process(pid))
    assert not cluster.running(1)
    cluster.start(1)
    new_pid = cluster.pid(1)
    assert new_pid is not None and new_pid != pid
    seen.append(new_pid)
    # the same command line, directory and environment; its output appended to the same file
    wait_for(lambda: output.read_text().count("started") == 2)
    lines = output.read_text().splitlines()
    assert lines[1] == f"started {new_pid} mark=m1 args=['server-1.properties']"
    assert Path(os.readlink(f"/proc/{new_pid}/cwd")) == directory / "home"

    cluster.kill9(1)             # a broker this object started is reaped, not left a zombie
    wait_for(lambda: not cluster.running(1))


def test_a_pid_file_naming_another_process_is_never_signalled(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # /proc shows its command line a moment after the exec
        wait_for(lambda: Path(f"/proc/{other.pid}/cmdline").read_bytes())
        (run / "broker-0.pid").write_text(f"{other.pid}\n")
        (run / "broker-1.pid").write_text("not a pid\n")
        cluster = open_cluster(tmp_path)
        assert cluster.broker_ids() == [0, 1]
        assert not cluster.running(0) and not cluster.running(1)
        with pytest.raises(ClusterError, match="names process .*, which is not a `python -m broker`"):
            cluster.kill9(0)
        with pytest.raises(ClusterError, match="which is not a `python -m broker` process"):
            cluster.pause(0)
        with pytest.raises(ClusterError, match="broker 1 is not running"):
            cluster.kill9(1)
        cluster.resume(0)                          # nothing to resume: nothing sent
        assert state(other.pid) != "T" and other.poll() is None
        with pytest.raises(ClusterError, match="was not stopped by this run"):
            cluster.start(0)
    finally:
        other.kill()
        other.wait(5)


def test_a_start_cluster_directory_is_restarted_by_its_script(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "cluster-brokers").write_text("0 1 2\n")
    (tmp_path / "run" / "broker-server-0.pid").write_text("1\n")
    cluster = open_cluster(tmp_path)
    assert cluster.start_script == REPO / "bin" / "start-cluster.sh"
    assert cluster.broker_ids() == [0]


def test_a_directory_without_pid_files_is_refused(tmp_path):
    with pytest.raises(ClusterError, match="no broker pid files"):
        open_cluster(tmp_path)
    with pytest.raises(ClusterError, match="does not exist"):
        open_cluster(tmp_path / "missing")
