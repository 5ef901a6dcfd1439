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

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def kill9(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


def terminate(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class BrokerProcess:
    """One standalone broker. `overrides` are extra server.properties lines; "{port}" in one
    is replaced by the broker's port (`listeners=SASL_SSL://127.0.0.1:{port}`)."""

    def __init__(self, workdir: Path, broker_id: int = 0, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.port = free_port()
        self.log_dir = self.workdir / "kafka-logs"
        self.config_path = self.workdir / "server.properties"
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        # "{port}" in an override is this broker's port (a SASL or TLS listener in tests).
        props.update({k: v.replace("{port}", str(self.port)) for k, v in (overrides or {}).items()})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        if getattr(self, "_log", None) is not None and not self._log.closed:
            self._log.close()           # restarted after kill9(): the old handle is done
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "broker", str(self.config_path)],
                                     cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", self.port, timeout, self.proc)
        except Exception:
            self.stop()
            raise RuntimeError(f"broker failed to start:\n{self.log_path.read_text()[-4000:]}")
        return self

    def kill9(self) -> None:
        kill9(self.proc)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        terminate(self.proc, timeout)
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
