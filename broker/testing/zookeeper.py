"""One ZooKeeper server for a test cluster: Debian's jar (`apt-get install -y zookeeper`) run
in the foreground on a free loopback port with its data under the cluster's directory.

Tuned to start fast, not to last: the JVM gets C1 only (TieredStopAtLevel=1: ZooKeeper
serves a test's few requests long before C2 would pay off), the serial collector and a
small heap, no perf-data file; zoo.cfg has no fsync per write, no preallocation and a
500 ms tick (session timeouts from 1 s up; failure detection close to the brokers'
zookeeper.session.timeout.ms). Ready means `srvr` reports a mode: `ruok` says imok a
moment before the server accepts sessions.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from .logs import read_log
from .ports import free_port

ZOOKEEPER_JAR = Path(os.environ.get("STROM_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JVM_FLAGS = ["-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-XX:-UsePerfData", "-Xshare:auto", "-Dzookeeper.admin.enableServer=false"]
START_ATTEMPTS = 5     # starts of a server that lost its free port to another process


class ZooKeeperUnavailable(RuntimeError):
    """Java or Debian's ZooKeeper jar is missing."""


def zookeeper_missing() -> str | None:
    """Why no ZooKeeper can be started here, or None when it can."""
    if shutil.which("java") is None:
        return "java is not on PATH (apt-get install -y zookeeper pulls a JRE)"
    if not ZOOKEEPER_JAR.is_file():
        return f"{ZOOKEEPER_JAR} not found (apt-get install -y zookeeper)"
    return None


def four_letter_word(port: int, word: str, timeout: float = 1.0, host: str = "127.0.0.1") -> str:
    """ZooKeeper's answer to a four-letter command (`srvr`, `ruok`...) on host:port."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperNode:
    """A standalone ZooKeeper server in `workdir`; `tick_ms` is its tickTime. It listens on
    `host` (loopback unless set) and runs `command_prefix` + java (e.g. `ip netns exec NS`)."""

    def __init__(self, workdir: Path, tick_ms: int = 500):
        self.workdir = Path(workdir)
        self.tick_ms = tick_ms
        self.host = "127.0.0.1"
        self.command_prefix: list[str] = []
        self.port = free_port()
        self.log_path = self.workdir / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0     # where the output of the latest launch begins

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        cfg = conf / "zoo.cfg"
        cfg.write_text("".join(f"{k}={v}\n" for k, v in {
            "tickTime": self.tick_ms, "dataDir": self.workdir / "data", "clientPort": self.port,
            "clientPortAddress": self.host, "maxClientCnxns": 0, "admin.enableServer": "false",
            "4lw.commands.whitelist": "*", "forceSync": "no", "preAllocSize": 64,
        }.items()))
        (conf / "simplelogger.properties").write_text(
            "org.slf4j.simpleLogger.defaultLogLevel=info\norg.slf4j.simpleLogger.showDateTime=true\n")
        return cfg

    def launch(self) -> None:
        """Start the JVM; do not wait (see wait_ready)."""
        missing = zookeeper_missing()
        if missing:
            raise ZooKeeperUnavailable(missing)
        cfg = self._write_config()
        classpath = [str(cfg.parent), str(ZOOKEEPER_JAR)]
        if SLF4J_SIMPLE_JAR.is_file():
            classpath.append(str(SLF4J_SIMPLE_JAR))
        if self._log is None:
            self._log = open(self.log_path, "ab")
        self._log_start = self._log.tell()
        java = shutil.which("java") or "java"
        self.proc = subprocess.Popen([*self.command_prefix, java, *JVM_FLAGS, "-cp", ":".join(classpath),
                                      MAIN_CLASS, str(cfg)],
                                     cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Return once the server serves; on a lost port race, launch again on another port
        (nobody knows this one yet) a few times."""
        attempts = 1
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                if attempts < START_ATTEMPTS and "Address already in use" in self.output(self._log_start):
                    attempts += 1
                    self.port = free_port()
                    self.launch()
                    continue
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.output()[-3000:]}")
            try:
                if "Mode:" in four_letter_word(self.port, "srvr", host=self.host):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"ZooKeeper on {self.connect} does not serve after {timeout}s:\n"
                                   f"{self.output()[-3000:]}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL and wait: a test cluster's data is thrown away, nothing to flush."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def output(self, start: int = 0) -> str:
        """The server's log (from byte `start`)."""
        return read_log(self.log_path, start)
