"""Real broker processes for integration tests: started with `python -m broker`, on a free
loopback port, with their own log dir; stopped politely or with kill -9."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_OWN_REPO = REPO
# Brokers are forked from one pre-imported process (broker/testing/zygote.py): a start costs
# tens of milliseconds instead of a Python start and the broker's import (~0.5-1 s of CPU),
# which hundreds of broker starts in the suite pay otherwise. STROM_TEST_ZYGOTE=0 turns it off.
USE_ZYGOTE = os.environ.get("STROM_TEST_ZYGOTE", "1") != "0"

# Starts of a process that lost its port to another process before binding it (see
# BrokerProcess.start), counting the first.
PORT_ATTEMPTS = 5


def free_port() -> int:
    """A port that was free a moment ago. Nothing reserves it: a process started on it can find
    it taken (BrokerProcess.start and ZooKeeperProcess.start start theirs again if so)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listens_on(pid: int, port: int) -> bool:
    """Process `pid` itself has a socket listening on TCP `port` (from Linux's /proc). Unlike a
    connection test, this is not fooled by another process that took the port and listens.
    The tables are the process's own: it may run in another network namespace."""
    listening = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:       # no IPv6, or the process is gone
            continue
        for row in rows:
            # sl local_address(HEXIP:HEXPORT) rem_address st(0A = LISTEN) ... inode
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                listening.add(f"socket:[{fields[9]}]")
    if not listening:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:           # exited
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in listening:
                return True
        except OSError:                 # closed meanwhile
            continue
    return False


def wait_for_port(host: str, port: int, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def kill9(proc: "subprocess.Popen | ForkedBroker | None") -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def terminate(proc: "subprocess.Popen | ForkedBroker", timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class ForkedBroker:
    """The subprocess.Popen subset the tests use, for a broker forked by the zygote: its exit
    status comes from the zygote (its parent), signals go straight to its pid."""

    def __init__(self, pid: int):
        from broker.testing.zygote import shared_zygote
        self._zygote = shared_zygote()
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["broker", str(pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.poll(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.02)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:     # reaped pids may be reused: never signal those
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class BrokerProcess:
    """One standalone broker. `overrides` are extra server.properties lines; "{port}" in one
    is replaced by the broker's port (`listeners=SASL_SSL://127.0.0.1:{port}`)."""

    def __init__(self, workdir: Path, broker_id: int = 0, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = free_port()
        self.listened = False           # once True, `port` is the broker's for good
        self.log_dir = self.workdir / "kafka-logs"
        self.config_path = self.workdir / "server.properties"
        # server.properties before "{port}" is filled in (write_config), so that a broker can
        # move to another port before it first listens (start).
        self.props = {
            "broker.id": str(broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        self.props.update(overrides or {})
        self.write_config()
        self.proc: subprocess.Popen | ForkedBroker | None = None
        self._log: Any = None
        self.log_path = self.workdir / "broker.log"
        # Where clients reach it, and what runs it: a network namespace host
        # (broker/testing/netns.py) sets its address and `ip netns exec <ns>`.
        self.host = "127.0.0.1"
        self.command_prefix: list[str] = []

    @property
    def metrics_port(self) -> int:
        """The port of its metrics HTTP server (0: none), from `props`: it may move before
        the broker first listens, as `port` may (start)."""
        return int(self.props.get("metrics.port", "0") or 0)

    def write_config(self) -> None:
        """server.properties from `props`, "{port}" in a value replaced by `port`."""
        self.config_path.write_text("".join(f"{k}={v.replace('{port}', str(self.port))}\n"
                                            for k, v in self.props.items()))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        """Start the broker; return once it listens on `port`.

        free_port() only names a port that was free a moment ago, and another process can bind
        it before the broker does (seen in CI: the broker exiting with "[Errno 98] address
        already in use" in a test's set-up). A broker that loses that race is started again, a
        few times at most: on a new port if it never listened, as nothing knows its port yet
        (a cluster's brokers register in ZooKeeper only after listening); on the same port after
        a short wait if it did (a restart), as its port is part of its identity. The same holds
        for its metrics port (metrics.port), which it binds right after its listeners."""
        attempt = 1
        while True:
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._spawn()
            try:
                self._wait_listening(timeout)
            except Exception:
                self.stop()
                if attempt == PORT_ATTEMPTS or not self._lost_port(log_start):
                    raise RuntimeError(f"broker failed to start:\n{self.log_path.read_text()[-4000:]}")
                if self.listened:
                    time.sleep(0.5 * attempt)
                else:
                    self.port = free_port()
                    if self.metrics_port:
                        self.props["metrics.port"] = str(free_port())
                    self.write_config()
                attempt += 1
                continue
            self.listened = True
            return self

    def _spawn(self) -> None:
        if self._log is not None and not self._log.closed:
            self._log.close()           # restarted after kill9(): the old handle is done
        if USE_ZYGOTE and not self.command_prefix and REPO == _OWN_REPO:
            from broker.testing.zygote import shared_zygote
            pid = shared_zygote().start([str(self.config_path)], cwd=REPO, log=self.log_path,
                                        name=f"strom-broker-{self.broker_id}")
            self.proc = ForkedBroker(pid)
            return
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([*self.command_prefix, sys.executable, "-m", "broker", str(self.config_path)],
                                     cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def _wait_listening(self, timeout: float) -> None:
        # This process's own listener: the one that took the port first may listen on it too.
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        ports = [self.port] + ([self.metrics_port] if self.metrics_port else [])
        while not all(listens_on(self.proc.pid, port) for port in ports):
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode} before listening")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"broker not listening on {self.port} after {timeout}s")
            time.sleep(0.05)

    def _lost_port(self, log_start: int) -> bool:
        """The start whose output begins at byte `log_start` of the log failed to bind `port`
        (or its metrics port)."""
        with open(self.log_path, "rb") as f:
            f.seek(log_start)
            output = f.read().decode(errors="replace")
        ports = [str(self.port)] + ([str(self.metrics_port)] if self.metrics_port else [])
        return any("address already in use" in line.lower() and any(p in line for p in ports)
                   for line in output.splitlines())

    def kill9(self) -> None:
        kill9(self.proc)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        terminate(self.proc, timeout)
        if self._log is not None:
            self._log.close()
        return self.proc.returncode

    def rss_bytes(self) -> int:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")
