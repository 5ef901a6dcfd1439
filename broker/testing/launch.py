"""One broker process of a test: its server.properties, its start (forked from the shared
zygote), the signals a test sends it, and the wait for it to serve or to be gone.

Its first start listens on port 0: the kernel picks a free port and the broker advertises
the port it bound (so no other process can take it in between); the port is read from the
line the broker prints once started ("strom broker N listening on PLAINTEXT://host:port"),
which comes after its topics are loaded (standalone) or its registration in ZooKeeper is
written (cluster). Later starts reuse that port: clients and the other brokers know it.
"""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Callable

from .logs import read_log
from .zygote import Zygote

_LISTENING = re.compile(rb"strom broker -?\d+ listening on [A-Z_]+://[^\s:]+:(\d+)")
PORT_ATTEMPTS = 5      # starts on a port something else took meanwhile (a restart's)


class BrokerExited(RuntimeError):
    """The broker ended before it served."""


class BrokerNode:
    """Broker `broker_id` in `workdir` (its server.properties, kafka-logs/ and broker.log).
    `props` are its server.properties lines; listeners and log.dirs are set here.

    Not thread-safe: one test drives it."""

    def __init__(self, workdir: Path, broker_id: int, props: dict[str, str], zygote: Zygote):
        self.workdir = Path(workdir)
        self.broker_id = broker_id
        self.props = dict(props)
        self.zygote = zygote
        self.port: int | None = None           # known once it first listened
        self.pid: int | None = None            # while started and not seen to exit
        self.returncode: int | None = None     # of the last run (negative: the signal)
        self.paused = False
        self.config_path = self.workdir / "server.properties"
        self.log_path = self.workdir / "broker.log"
        self.log_dir = self.workdir / "kafka-logs"
        self._log_start = 0                     # where the latest run's output begins

    @property
    def address(self) -> str:
        if self.port is None:
            raise RuntimeError(f"broker {self.broker_id} has not started yet")
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        props = dict(self.props, **{"broker.id": str(self.broker_id),
                                    "listeners": f"PLAINTEXT://127.0.0.1:{self.port or 0}",
                                    "log.dirs": str(self.log_dir)})
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    # ---- starting ---------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        """Start the broker (it must not run) and return once it serves."""
        if self.running():
            raise RuntimeError(f"broker {self.broker_id} is already running (pid {self.pid})")
        self.launch()
        self.wait_started(timeout)

    def launch(self) -> None:
        """Fork the broker; do not wait (wait_started does)."""
        self._write_config()
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.returncode = None
        self.paused = False
        self.pid = self.zygote.start([str(self.config_path)], self.workdir, self.log_path,
                                     f"strom-broker-{self.broker_id}")

    def wait_started(self, timeout: float = 30.0) -> None:
        """Wait for the started line of the latest launch. A broker that lost its (known) port
        to another process is launched again after a pause, a few times."""
        deadline = time.monotonic() + timeout
        attempts = 1
        while True:
            try:
                port = self._wait_listening(deadline)
            except BrokerExited:
                if (self.port is None or attempts == PORT_ATTEMPTS
                        or "address already in use" not in self.output(self._log_start).lower()):
                    raise
                time.sleep(0.2 * attempts)
                attempts += 1
                self.launch()
                continue
            self.port = port
            return

    def _wait_listening(self, deadline: float) -> int:
        while True:
            started = _LISTENING.search(self.output(self._log_start).encode())
            if started:
                return int(started.group(1))
            if not self.running():
                raise BrokerExited(f"broker {self.broker_id} exited with {self.returncode} before "
                                   f"serving; the end of {self.log_path}:\n"
                                   f"{self.output(self._log_start)[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {self.broker_id} does not serve; the end of "
                                   f"{self.log_path}:\n{self.output(self._log_start)[-3000:]}")
            time.sleep(0.01)

    # ---- state and signals ------------------------------------------------------------------

    def running(self) -> bool:
        """The process has not exited (a paused broker runs)."""
        if self.pid is None:
            return False
        status = self.zygote.poll(self.pid)
        if status is None:
            return True
        self.pid, self.returncode, self.paused = None, status, False
        return False

    def _signal(self, sig: int) -> None:
        if not self.running():
            raise RuntimeError(f"broker {self.broker_id} is not running")
        assert self.pid is not None
        os.kill(self.pid, sig)

    def kill9(self) -> None:
        """SIGKILL and wait until it is gone: no controlled shutdown, no deregistration (its
        ZooKeeper session lives until it expires)."""
        self._signal(signal.SIGKILL)
        self.wait_exit(10.0)

    def pause(self) -> None:
        """SIGSTOP, and wait until the kernel has stopped it (a signal is delivered when the
        process next runs): it keeps its sockets and its ZooKeeper session until that expires."""
        self._signal(signal.SIGSTOP)
        self.paused = True
        self._wait_state(lambda state: state == "T", "stopped")

    def resume(self) -> None:
        """SIGCONT, and wait until it runs again."""
        self._signal(signal.SIGCONT)
        self.paused = False
        self._wait_state(lambda state: state != "T", "running again")

    def _wait_state(self, ok: Callable[[str], bool], what: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not ok(self._proc_state()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {self.broker_id} (pid {self.pid}) not {what} after {timeout}s")
            time.sleep(0.005)

    def _proc_state(self) -> str:
        """Its state letter in /proc/PID/stat (R, S, T: stopped, Z...)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a cluster broker's controlled shutdown), SIGKILL after `timeout` s."""
        if not self.running():
            return
        if self.paused:
            self.resume()
        self._signal(signal.SIGTERM)
        try:
            self.wait_exit(timeout)
        except TimeoutError:
            self.kill9()

    def kill(self) -> None:
        """Teardown: SIGKILL if it runs, wait, never raise for a broker already gone."""
        if self.running():
            assert self.pid is not None
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait_exit(10.0)

    def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {self.broker_id} (pid {self.pid}) still runs after {timeout}s")
            time.sleep(0.01)
        return self.returncode

    def output(self, start: int = 0) -> str:
        """The broker's log (stdout and stderr of every run), from byte `start`."""
        return read_log(self.log_path, start)
