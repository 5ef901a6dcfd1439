"""Each start-up failure of a broker, and each failure of a tool to reach a cluster, run as a
subprocess as an operator meets it: ONE line saying what is wrong and what to do, a non-zero
exit, no traceback.

Broker: a listener port in use, a log dir that is not a directory, a log dir another broker
holds (Kafka's .lock), ZooKeeper unreachable (after zookeeper.connection.timeout.ms), a
broker.id a live broker holds, and a typo'd key (a WARN line before any INFO line, the broker
starting anyway). Also the good case of the same machinery: a broker restarted at once after
kill -9 ends its previous session and registers, saying so in one line.

Tools: a refused connection within 1 s in Kafka's words (measured, per tool), --zookeeper
refused, and a listening broker that does not answer keeping the normal timeout.
"""
from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.broker_process import REPO, BrokerProcess, free_port
from tests.support.zk_process import zookeeper_available

pytestmark = [pytest.mark.integration]

ENV = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")


def write_config(d: Path, **props: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    base = {"broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "log.dirs": str(d / "logs"), "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    path = d / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in base.items()))
    return path


def start_fails(config: Path, timeout: float = 90) -> tuple[str, float]:
    """Start a broker that must fail: its one `strom: ` line, and how long it took."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "broker", str(config)], cwd=REPO, env=ENV,
                       capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Traceback" not in out, out
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("strom: ")]
    assert len(lines) == 1, out
    print(f"{config.parent.name}: exit {r.returncode} after {took:.2f} s: {lines[0]}")
    return lines[0], took


# ---------------------------------------------------------------------------- the broker

def test_listener_port_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line, _ = start_fails(write_config(tmp_path / "port", listeners=f"PLAINTEXT://127.0.0.1:{port}"))
    assert f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use." in line
    assert "change listeners" in line


def test_log_dir_that_is_a_file(tmp_path):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    line, _ = start_fails(write_config(tmp_path / "file", log_dirs=str(a_file)))
    assert line.startswith(f"strom: Log directory {a_file} is not usable: it exists and is not a directory.")
    line, _ = start_fails(write_config(tmp_path / "under", log_dirs=str(a_file / "logs")))
    assert "a part of its path is not a directory" in line


def test_log_dir_locked_by_another_broker(tmp_path):
    first = BrokerProcess(tmp_path / "first").start()
    try:
        line, _ = start_fails(write_config(tmp_path / "second", log_dirs=str(first.log_dir)))
    finally:
        first.stop()
    assert (f"Failed to acquire lock on file .lock in {first.log_dir}. A Kafka instance in another "
            f"process or thread is using this directory.") in line
    assert "its own log.dirs" in line


def test_log_dir_locked_by_any_process(tmp_path):
    logs = tmp_path / "held"
    logs.mkdir()
    with open(logs / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        line, _ = start_fails(write_config(tmp_path / "b", log_dirs=str(logs)))
    assert "Failed to acquire lock on file .lock in" in line


@pytest.mark.alone
def test_zookeeper_unreachable_after_the_connection_timeout(tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    line, took = start_fails(write_config(tmp_path / "zk", zookeeper_connect=f"{dead}/strom",
                                          zookeeper_connection_timeout_ms="1500"))
    assert line.startswith(f"strom: Timed out waiting for connection to ZooKeeper at {dead}/strom after 1.5 s")
    assert "zookeeper.connect" in line
    assert 1.5 <= took < 20, took


def test_typoed_key_is_one_warn_line_before_the_info_lines(tmp_path):
    cfg = write_config(tmp_path / "typo", log_retention_hour="5")
    lineno = cfg.read_text().splitlines().index("log.retention.hour=5") + 1
    proc = subprocess.Popen([sys.executable, "-m", "broker", str(cfg)], cwd=REPO, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline().rstrip("\n")
        started = proc.stdout.readline()           # the broker starts anyway
    finally:
        proc.terminate()
        proc.wait(30)
        rest = proc.stderr.read()
    print(first)
    assert first == (f"WARN The configuration 'log.retention.hour' was supplied but isn't a known "
                     f"config. ({cfg}:{lineno}; check its spelling: it is ignored)")
    assert started.startswith("strom broker 0 listening on"), started + rest
    assert "log.retention.hour" not in rest, "warned twice"


# ----------------------------------------------------- broker.id held by a ZooKeeper session

@pytest.mark.alone
@pytest.mark.skipif(not zookeeper_available(), reason="Debian's zookeeper package is not installed")
def test_broker_id_held_by_a_session(tmp_path):
    """kill -9 and an immediate restart: the broker ends its previous run's session (one line)
    and registers at once. A second broker with the same id and other log dirs while the
    first runs: one line after waiting out a session timeout, exit 1."""
    from tests.support.cluster import Cluster
    from tests.support.zk_process import ZooKeeperProcess
    # 30 s sessions: the killed run's session outlives the restart, which must end it.
    c = Cluster(tmp_path / "c", brokers=1, zookeeper_session_timeout_ms=30000)
    c.zookeeper = ZooKeeperProcess(tmp_path / "c" / "zookeeper", tick_time_ms=500,
                                   extra={"maxSessionTimeout": "60000"})
    with c:
        b = c.broker(0)
        before = len(b.output())
        b.kill9()
        t0 = time.monotonic()
        b.start()
        c.wait_until(lambda: "registered broker 0" in b.output()[before:] or None, timeout=20)
        took = time.monotonic() - t0
        said = [ln for ln in b.output()[before:].splitlines() if "still registered by session" in ln]
        print(f"restarted at once after kill -9: registered after {took:.2f} s; {said}")
        assert len(said) == 1 and re.search(r"broker\.id 0 is still registered by session 0x[0-9a-f]+ of this "
                                             r"broker's previous run .*: ending that session", said[0])
        assert took < 30

        twin = write_config(tmp_path / "twin", zookeeper_connect=c.zk_connect,
                            zookeeper_session_timeout_ms="2000")
        line, waited = start_fails(twin)
        assert re.match(r"strom: broker\.id 0 is registered in ZooKeeper by another live broker "
                        r"\(session 0x[0-9a-f]+, still there after \d+ s\): stop the broker", line), line
        assert 4 <= waited < 30, waited
        assert b.proc.poll() is None, "the live broker must be left alone"


# ---------------------------------------------------------------------------- the tools

def tool(name: str, *args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([str(REPO / "bin" / name), *args], cwd=REPO, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=timeout)
    return r, time.monotonic() - t0


def one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def tool_invocations(bootstrap: str) -> dict[str, list[str]]:
    bs = ["--bootstrap-server", bootstrap]
    return {
        "kafka-topics.sh": [*bs, "--list"],
        "kafka-console-producer.sh": [*bs, "--topic", "t"],
        "kafka-console-consumer.sh": [*bs, "--topic", "t"],
        "kafka-consumer-groups.sh": [*bs, "--list"],
        "kafka-configs.sh": [*bs, "--entity-type", "topics", "--entity-name", "t", "--describe"],
        "kafka-acls.sh": [*bs, "--list"],
        "kafka-get-offsets.sh": [*bs],
        "kafka-transactions.sh": [*bs, "list"],
        "kafka-consumer-perf-test.sh": [*bs, "--topic", "t", "--messages", "1"],
        "kafka-producer-perf-test.sh": ["--topic", "t", "--num-records", "1", "--record-size", "1",
                                        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}"],
        "kafka-leader-election.sh": [*bs, "--election-type", "preferred", "--all-topic-partitions"],
        "kafka-reassign-partitions.sh": [*bs, "--list"],
        "kafka-log-dirs.sh": [*bs, "--describe"],
        "strom-metrics.sh": [*bs],
    }


def test_every_tool_reports_a_refused_connection_within_a_second():
    port = free_port()
    refused = (f"Connection to node -1 (127.0.0.1/127.0.0.1:{port}) could not be established. "
               f"Broker may not be available.")
    slow = []
    for name, args in tool_invocations(f"127.0.0.1:{port}").items():
        r, took = tool(name, *args)
        if took >= 1.0:     # once more: the figure is the tool's, not a moment the machine was busy
            r, took = min((r, took), tool(name, *args), key=lambda run: run[1])
        line = one_line(r)
        print(f"{name}: exit {r.returncode} after {took:.2f} s: {line}")
        assert line.endswith(refused), line
        if took >= 1.0:
            slow.append(f"{name}: {took:.2f} s")
    assert not slow, slow


def test_every_tool_refuses_zookeeper():
    for name, args in tool_invocations("127.0.0.1:9092").items():
        r, _ = tool(name, "--zookeeper", "127.0.0.1:2181", *args)
        line = one_line(r)
        assert "--zookeeper is not supported: it was removed in Kafka 3.0; use --bootstrap-server" in line, line
    r, _ = tool("kafka-topics.sh", "--zookeeper=127.0.0.1:2181", "--list")
    assert "--zookeeper is not supported" in one_line(r)


@pytest.mark.alone
def test_a_listening_broker_that_does_not_answer_gets_the_whole_timeout():
    with socket.socket() as mute:       # accepts connections (the kernel does), never answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)
        port = mute.getsockname()[1]
        r, took = tool("kafka-topics.sh", "--bootstrap-server", f"127.0.0.1:{port}", "--list",
                       "--command-timeout", "2")
    line = one_line(r)
    print(f"mute broker: exit {r.returncode} after {took:.2f} s: {line}")
    assert "could not be established" not in line
    assert took >= 2.0, took
