"""The pytest plugin (broker/testing/pytest_plugin.py, docs/TESTING.md).

The docs' sample test files, cut out of docs/TESTING.md as printed, run as a user runs them:
`python -m pytest` in a directory of their own, timed from outside (the issue: < 3 s with
`strom_broker`, < 10 s with `strom_cluster(3)`). The controls do to broker i what they say,
and nothing a test started outlives it, also when the test fails.

Timing on a loaded machine: the bounds are the issue's when the load average is below the
number of cores. On a busier machine a process gets only a share of a core, and the bound
allowed is 3x the issue's (LOADED_MARGIN); the test prints the figure, the load and the bound
it used. docs/TESTING.md has the figures with the load they were measured at: at load 5-6 on
2 cores, 1.5-2.1 s and 4.5-5.8 s, within the issue's bounds; at load 10-13, 5.5-6.2 s and
8.8-10.5 s, which the margin is for.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from broker.testing.probe import broker_view

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "TESTING.md"
SAMPLE = re.compile(r"<!-- sample: (\S+) -->\n```python\n(.*?)```", re.S)
LOADED_MARGIN = 3.0


def doc_samples() -> dict[str, str]:
    """file name -> code of every sample test file in docs/TESTING.md."""
    found = dict(SAMPLE.findall(DOCS.read_text()))
    assert found, f"no '<!-- sample: NAME -->' code blocks in {DOCS}"
    return found


def processes_tagged(tag: str) -> list[str]:
    """The processes whose environment holds STROM_PLUGIN_TEST=tag (what ps would list)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"STROM_PLUGIN_TEST={tag}".encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid}: {args[:200]}")
        except OSError:     # gone meanwhile, or not ours to read
            continue
    return found


def run_user_pytest(tmp_path: Path, files: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Write `files` into a fresh directory and run `python -m pytest` there, as a user would
    (no strom conftest, no strom pytest settings). Returns the result and its wall time.
    Afterwards no process of that run may be left: every process it started carries a tag in
    its environment, and /proc is searched for it."""
    project = tmp_path / "user-project"
    project.mkdir()
    for name, code in files.items():
        (project / name).write_text(code)
    tag = uuid.uuid4().hex
    env = dict(os.environ, STROM_PLUGIN_TEST=tag)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--basetemp", str(tmp_path / "user-basetemp"), *args, *files],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - started
    print(result.stdout[-3000:], result.stderr[-3000:])
    left = processes_tagged(tag)
    assert not left, f"processes left behind by the user's pytest run: {left}"
    return result, wall


def bound(quiet_s: float) -> float:
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    allowed = quiet_s if load < cores else quiet_s * LOADED_MARGIN
    print(f"load average {load:.1f} on {cores} cores: bound {allowed:.0f} s "
          f"(the issue's {quiet_s:.0f} s on a quiet machine)")
    return allowed


def require_zookeeper() -> None:
    """strom_cluster needs Java and Debian's ZooKeeper jar: skipped without them, but under CI
    (CI=true) their absence fails the test."""
    from broker.testing.zookeeper import zookeeper_missing
    missing = zookeeper_missing()
    if missing is None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"ZooKeeper is a prerequisite under CI: {missing}")
    pytest.skip(f"no ZooKeeper here: {missing}")


def test_the_plugin_is_installed_as_a_pytest11_entry_point(pytestconfig):
    from importlib.metadata import entry_points
    assert [ep.value for ep in entry_points(group="pytest11") if ep.name == "strom"] == \
        ["broker.testing.pytest_plugin"]
    assert pytestconfig.pluginmanager.get_plugin("strom") is not None


@pytest.mark.parametrize("name, quiet_bound_s", [("test_with_strom_broker.py", 3.0),
                                                  ("test_with_strom_cluster.py", 10.0)])
@pytest.mark.alone
def test_docs_sample_runs_within_the_issues_bound(tmp_path, name, quiet_bound_s):
    """The issue: the strom_broker sample in < 3 s of wall time, the strom_cluster(3) one in
    < 10 s, measured around the user's whole `python -m pytest`."""
    if "strom_cluster" in doc_samples()[name]:
        require_zookeeper()
    result, wall = run_user_pytest(tmp_path, {name: doc_samples()[name]})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    print(f"docs sample {name}: {wall:.2f} s wall")
    assert wall < bound(quiet_bound_s)


# A user's test file that fails with every kind of process running, and a test after it that
# looks for those processes: the fixtures' teardown must have ended them (not the end of the
# pytest run, which ends the broker helper and with it the brokers).
FAILING = '''
import json, os, pytest

def test_fails_with_everything_running(strom_broker, strom_cluster):
    cluster = strom_cluster(1)
    strom_broker.pause()                      # a paused broker too
    pids = [strom_broker.nodes[0].pid, cluster.nodes[0].pid, cluster.zookeeper.proc.pid]
    open("pids.json", "w").write(json.dumps(pids))
    assert False, "deliberate failure"

def test_then_nothing_runs():
    for pid in json.loads(open("pids.json").read()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
'''


def test_teardown_after_a_failed_test_leaves_no_process(tmp_path):
    require_zookeeper()
    files = {"test_fails.py": FAILING, "test_with_strom_clients.py": doc_samples()["test_with_strom_clients.py"]}
    result, wall = run_user_pytest(tmp_path, files)
    assert "1 failed, 2 passed" in result.stdout, result.stdout + result.stderr
    assert "deliberate failure" in result.stdout
    # On failure pytest shows the fixtures' set-up line: where the logs are.
    assert "strom_broker: bootstrap servers 127.0.0.1:" in result.stdout
    assert "strom_cluster(1): bootstrap servers 127.0.0.1:" in result.stdout
    print(f"3 tests (a failing one with a broker and a 1-broker cluster): {wall:.2f} s")


def proc_state(pid: int) -> str:
    """R, S, T (stopped)... from /proc; '' when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""


def produce(bootstrap: str, topic: str, values: range) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, str(v).encode())
    assert p.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[int] = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(int(msg.value()))
    c.close()
    return sorted(out)


def test_cluster_controls_kill9_restart_pause_resume_of_broker_i(strom_cluster):
    require_zookeeper()
    started = time.monotonic()
    # A short session, so that a paused leader is replaced within the test.
    cluster = strom_cluster(3, configs={"zookeeper.session.timeout.ms": "2000"})
    print(f"strom_cluster(3) ready in {time.monotonic() - started:.2f} s")
    ports = [n.port for n in cluster.nodes]
    # Each broker advertises the port it bound (its first start listened on port 0).
    assert broker_view(ports[0]).brokers == dict(enumerate(ports))
    cluster.create_topic("t", partitions=3, replication_factor=3)
    produce(cluster.bootstrap_servers, "t", range(30))

    # kill9(i): the process is gone at once, the cluster leaves it out, leaders move.
    victim = cluster.leader("t", 0)
    pid = cluster.nodes[victim].pid
    cluster.kill9(victim)
    assert proc_state(pid) == "" and not cluster.running(victim)
    assert cluster.wait_for_leader("t", 0, other_than=victim) != victim
    produce(cluster.bootstrap_servers, "t", range(30, 60))

    # restart(i): a new process on the same port with the same data, known to every broker.
    cluster.restart(victim)
    assert cluster.running(victim) and cluster.nodes[victim].pid != pid
    assert cluster.nodes[victim].port == ports[victim]
    assert all(set(broker_view(p).brokers) == {0, 1, 2} for p in ports)
    assert (cluster.nodes[victim].log_dir / "t-0").is_dir()
    assert cluster.log(victim).count("listening on") == 2

    # pause(i) / resume(i): SIGSTOP'd, a paused leader loses its leadership once its ZooKeeper
    # session expires; resumed, it serves again.
    leader = cluster.wait_for_leader("t", 1)
    cluster.pause(leader)
    assert proc_state(cluster.nodes[leader].pid) == "T"
    with pytest.raises(OSError):                      # it answers nothing
        broker_view(cluster.nodes[leader].port, timeout=0.5)
    paused_at = time.monotonic()
    assert cluster.wait_for_leader("t", 1, other_than=leader, timeout=20) != leader
    print(f"a paused leader replaced after {time.monotonic() - paused_at:.2f} s")
    cluster.resume(leader)
    assert proc_state(cluster.nodes[leader].pid) in ("R", "S")
    cluster.wait_for_brokers(20)
    assert set(broker_view(cluster.nodes[leader].port).brokers) == {0, 1, 2}

    assert read_all(cluster.bootstrap_servers, "t", 3, 60) == list(range(60))
    pids = [n.pid for n in cluster.nodes] + [cluster.zookeeper.proc.pid]
    cluster.close()
    assert [proc_state(p) for p in pids] == [""] * 4


@pytest.mark.strom_broker(configs={"num.partitions": "4"})
def test_standalone_controls_and_configs_marker(strom_broker):
    from confluent_kafka import Producer
    # The marker's configs reach the broker: an auto-created topic gets 4 partitions.
    p = Producer({"bootstrap.servers": strom_broker.bootstrap_servers})
    p.produce("auto", b"0")
    assert p.flush(10) == 0
    strom_broker.wait_for_topic("auto", 4)
    assert len(broker_view(strom_broker.nodes[0].port, ["auto"]).leaders["auto"]) == 4

    strom_broker.create_topic("kept", partitions=1)
    strom_broker.create_topic("dropped", partitions=2)
    assert strom_broker.list_topics() == ["auto", "dropped", "kept"]
    strom_broker.delete_topic("dropped")
    assert strom_broker.list_topics() == ["auto", "kept"]
    produce(strom_broker.bootstrap_servers, "kept", range(10))
    port, pid = strom_broker.nodes[0].port, strom_broker.nodes[0].pid
    strom_broker.kill9()
    assert not strom_broker.running() and proc_state(pid) == ""
    started = time.monotonic()
    strom_broker.restart()
    print(f"standalone restart after kill -9: {time.monotonic() - started:.2f} s")
    assert strom_broker.nodes[0].port == port
    assert read_all(strom_broker.bootstrap_servers, "kept", 1, 10) == list(range(10))

    strom_broker.pause()
    assert proc_state(strom_broker.nodes[0].pid) == "T"
    strom_broker.resume()
    strom_broker.stop()                                 # SIGTERM: a clean exit
    assert not strom_broker.running() and strom_broker.nodes[0].returncode == 0
    assert "strom broker stopped" in strom_broker.log()


def test_brokers_die_with_their_zygote(tmp_path):
    """A pytest run killed with -9 runs no teardown: its brokers must still end. They are
    killed by the kernel when the zygote they were forked from ends, and it ends when the
    pytest process that started it does (its stdin closes)."""
    from broker.testing.cluster import StromBroker
    from broker.testing.zygote import Zygote
    zygote = Zygote()
    broker = StromBroker.start(tmp_path / "b", zygote=zygote)
    pid = broker.nodes[0].pid
    assert pid is not None and proc_state(pid) in ("R", "S")
    zygote.close()                         # what the end of the pytest process does
    deadline = time.monotonic() + 10
    while proc_state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc_state(pid) in ("", "Z")    # a zombie until init reaps it: dead either way
    assert not broker.running()
    broker.close()
