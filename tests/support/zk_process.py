"""A real ZooKeeper server for the cluster fixture (tests/support/cluster.py) and fault tests:
tests/support/zookeeper.py's `ZooKeeperServer` (Debian's jar started in the foreground as
QuorumPeerMain in the foreground, on a free loopback port, with its own data directory) plus what
fault tests need: ready only once it *serves* (`ruok` answers imok a moment before the server
accepts sessions, so `srvr` must report a mode too), restart on the same port and data,
SIGSTOP/SIGCONT, extra zoo.cfg lines, and a start again when another process took its port."""
from __future__ import annotations

import os
import signal
import shutil
import time
from pathlib import Path

from tests.support.broker_process import PORT_ATTEMPTS, free_port, listens_on
from tests.support.zookeeper import ZOOKEEPER_JAR, ZooKeeperServer, four_letter_word

__all__ = ["ZooKeeperProcess", "four_letter_word", "zookeeper_available"]


def zookeeper_available() -> bool:
    """Java and Debian's ZooKeeper jar are installed (apt-get install -y zookeeper)."""
    return ZOOKEEPER_JAR.is_file() and shutil.which("java") is not None


class ZooKeeperProcess(ZooKeeperServer):
    """One standalone ZooKeeper server. `extra` are additional zoo.cfg lines."""

    def __init__(self, workdir: Path, port: int | None = None, extra: dict[str, str] | None = None,
                 tick_time_ms: int = 2000):
        super().__init__(Path(workdir), tick_time_ms=tick_time_ms, port=port)
        self.extra = dict(extra or {})
        # A port the caller chose, or one clients have been told (the server served on it),
        # is kept when it turns out taken; a port free_port() picked and nobody knows yet is not.
        self.port_fixed = port is not None

    @property
    def connect(self) -> str:
        """host:port for zookeeper.connect (append a chroot as needed)."""
        return self.connect_string

    @property
    def config_path(self) -> Path:
        return self.conf_dir / "zoo.cfg"

    def _write_config(self) -> Path:
        cfg = super()._write_config()
        if self.extra:
            with open(cfg, "a") as f:
                f.writelines(f"{k}={v}\n" for k, v in self.extra.items())
        return cfg

    # ---- readiness --------------------------------------------------------------------------

    def ruok(self) -> str:
        """The answer to `ruok` ('imok' while the process runs), '' when nothing answers."""
        try:
            return four_letter_word(self.host, self.port, "ruok", timeout=1.0)
        except OSError:
            return ""

    def serving(self) -> bool:
        """`srvr` reports a mode: the server accepts sessions."""
        try:
            return "Mode:" in four_letter_word(self.host, self.port, "srvr", timeout=1.0)
        except OSError:
            return False

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        super().wait_ready(timeout)                      # imok (or the process died)
        # Served by this process: imok and a mode could come from a server that took the port.
        while not (self.serving() and self.proc is not None and listens_on(self.proc.pid, self.port)):
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n"
                                   f"{self.output()[-4000:]}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"ZooKeeper on {self.connect} answers imok but does not serve "
                                   f"after {timeout}s:\n{self.output()[-4000:]}")
            time.sleep(0.05)

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> "ZooKeeperProcess":
        """Start (unless running); return once it serves. free_port() only names a port that
        was free a moment ago: if another process binds it first, ZooKeeper exits with
        "Address already in use" and is started again, a few times at most, on a new port or,
        if `port_fixed`, on the same one after a short wait. (Cluster then points its brokers
        at the new port: none has started yet.)"""
        if self.running:
            return self
        attempt = 1
        while True:
            log_start = len(self.output())
            try:
                super().start(timeout)
            except RuntimeError:                         # exited before serving
                if attempt == PORT_ATTEMPTS or "Address already in use" not in self.output()[log_start:]:
                    raise
                if self.port_fixed:
                    time.sleep(0.5 * attempt)
                else:
                    self.port = free_port()
                attempt += 1
                continue
            self.port_fixed = True
            return self

    @property
    def running(self) -> bool:
        return self.is_running()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (continuing a SIGSTOPped server first), then SIGKILL after `timeout`."""
        self.sigcont()
        return super().stop(timeout)

    def restart(self, timeout: float = 30.0) -> "ZooKeeperProcess":
        """Stop (if running) and start again on the same port with the same data."""
        self.stop()
        return self.start(timeout)

    def sigstop(self) -> None:
        """Freeze the server: sessions time out on the clients' side, nothing is lost."""
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGSTOP)

    def sigcont(self) -> None:
        if self.running:
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGCONT)

    def __enter__(self) -> "ZooKeeperProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SharedZooKeeper:
    """One ZooKeeper server for every cluster of the test run that does not fault it: a
    Cluster on it (`lease()`) gets a chroot of its own and deletes it when it stops, so a
    cluster costs no JVM start (about a second of wall time and more of CPU each, several
    hundred times per suite run). The server starts on first use and stops at exit. Clusters
    that stop, pause or restart ZooKeeper take their own (Cluster(own_zookeeper=True))."""

    _server: ZooKeeperProcess | None = None
    _workdir: str | None = None

    @classmethod
    def server(cls) -> ZooKeeperProcess:
        if cls._server is None or not cls._server.running:
            import atexit
            import tempfile
            if cls._workdir is None:
                cls._workdir = tempfile.mkdtemp(prefix="strom-shared-zookeeper-")
                atexit.register(cls._close)
            cls._server = ZooKeeperProcess(Path(cls._workdir), tick_time_ms=500)
            cls._server.start()
        return cls._server

    @classmethod
    def _close(cls) -> None:
        if cls._server is not None:
            cls._server.stop()
        if cls._workdir is not None:
            shutil.rmtree(cls._workdir, ignore_errors=True)

    @classmethod
    def lease(cls) -> "ZooKeeperLease":
        return ZooKeeperLease()


class ZooKeeperLease:
    """What a Cluster sees of the shared server: start (it runs), stop (it keeps running),
    its address and log; a fault of it would reach every other test, so those refuse."""

    shared = True

    def __init__(self) -> None:
        self._server: ZooKeeperProcess | None = None

    def _running_server(self) -> ZooKeeperProcess:
        if self._server is None:
            self._server = SharedZooKeeper.server()
        return self._server

    def start(self, timeout: float = 30.0) -> "ZooKeeperLease":
        self._server = SharedZooKeeper.server()
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        return None

    @property
    def running(self) -> bool:
        return self._running_server().running

    @property
    def host(self) -> str:
        return self._running_server().host

    @property
    def port(self) -> int:
        return self._running_server().port

    @property
    def connect(self) -> str:
        return self._running_server().connect

    @property
    def pid(self) -> int | None:
        return self._running_server().pid

    def output(self) -> str:
        return self._running_server().output()

    def _refuse(self, *args: object, **kw: object) -> None:
        raise RuntimeError("this cluster shares the test run's ZooKeeper: a test that stops, "
                           "pauses or restarts ZooKeeper makes its cluster with "
                           "Cluster(own_zookeeper=True)")

    restart = sigstop = sigcont = kill9 = _refuse
