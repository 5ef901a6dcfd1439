"""A real ZooKeeper server process for tests: one standalone server on a free loopback port,
its data and logs in a temp dir, stopped by PID. Ready means `ruok` -> `imok` and `srvr`
reporting a Mode (imok alone comes before the server accepts sessions).

    server = ZooKeeperServer(tmp_path / "zk").start()
    server.connect_string            # "127.0.0.1:PORT"
    server.connect_string_for("/strom")
    server.stop()

The pytest fixture `zookeeper` (below) yields a started server and skips the test with a
clear reason when Java or Debian's ZooKeeper jar is missing. Register it for a test
directory with `from tests.support.zookeeper import zookeeper  # noqa: F401` in that
directory's conftest.py (or `pytest_plugins = ["tests.support.zookeeper"]` in the root one).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Iterator

import pytest

from tests.support.broker_process import free_port

ZOOKEEPER_JAR = Path(os.environ.get("STROM_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperUnavailable(RuntimeError):
    """Java or the ZooKeeper jar is not installed: tests needing ZooKeeper cannot run."""


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailable("java is not on PATH (apt-get install -y zookeeper pulls a JRE)")
    if not ZOOKEEPER_JAR.exists():
        raise ZooKeeperUnavailable(f"{ZOOKEEPER_JAR} not found (apt-get install -y zookeeper)")
    return java


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send one of ZooKeeper's four-letter commands (`ruok`, `srvr`, `mntr`...), return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server. `tick_time_ms` bounds session timeouts to
    [2, 20] ticks, as in ZooKeeper."""

    def __init__(self, workdir: Path, tick_time_ms: int = 2000, port: int | None = None):
        self.workdir = Path(workdir)
        self.tick_time_ms = tick_time_ms
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self.conf_dir = self.workdir / "conf"
        self.log_path = self.workdir / "zookeeper.log"
        self.proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        self.command_prefix: list[str] = []     # e.g. `ip netns exec <ns>` (broker/testing/netns.py)

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string_for(self, chroot: str) -> str:
        return f"{self.connect_string}{chroot}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.conf_dir / "zoo.cfg"
        cfg.write_text("\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            # Tests need no durability against power loss; fsync per write costs ~ms each.
            "forceSync=no",
            "preAllocSize=4096",
            "",
        ]))
        (self.conf_dir / "simplelogger.properties").write_text(
            "org.slf4j.simpleLogger.defaultLogLevel=info\n"
            "org.slf4j.simpleLogger.showDateTime=true\n")
        return cfg

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        java = java_binary()
        cfg = self._write_config()
        classpath = [str(self.conf_dir), str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.exists():
            classpath.append(str(SLF4J_SIMPLE_JAR))
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.command_prefix, java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dzookeeper.admin.enableServer=false",
             "-cp", ":".join(classpath), MAIN_CLASS, str(cfg)],
            cwd=self.workdir, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            self.wait_ready(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.output()[-4000:]}")
            try:
                # `ruok` says imok as soon as the process runs, before it serves clients;
                # `srvr` reports a Mode only once it does.
                last = four_letter_word(self.host, self.port, "ruok")
                if last == "imok":
                    last = four_letter_word(self.host, self.port, "srvr")
                    if "Mode:" in last:
                        return
            except OSError as e:
                last = str(e)
            time.sleep(0.05)
        raise TimeoutError(f"ZooKeeper on {self.connect_string} not ready after {timeout}s "
                           f"(last: {last}):\n{self.output()[-4000:]}")

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` seconds. Data stays; `start()` again resumes."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.stop()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def zookeeper(tmp_path) -> Iterator[ZooKeeperServer]:
    """A started ZooKeeper server for one test; skipped when Java or the jar is missing."""
    try:
        java_binary()
    except ZooKeeperUnavailable as e:
        pytest.skip(f"real ZooKeeper unavailable: {e}")
    server = ZooKeeperServer(tmp_path / "zookeeper")
    try:
        server.start()
    except OSError as e:      # e.g. java present but not executable
        pytest.skip(f"real ZooKeeper could not start: {e}")
    try:
        yield server
    finally:
        server.stop()
