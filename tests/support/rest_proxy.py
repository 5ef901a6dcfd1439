"""The REST proxy as a real process for integration tests: `python -m clients.rest.main`
on a port of its own choosing (listener port 0, its URL read back from `--ready-file`, so
no port is picked and then raced for)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.broker_process import REPO, terminate


class RestProxyProcess:
    """One proxy in front of `bootstrap`; `overrides` are extra kafka-rest.properties lines."""

    def __init__(self, workdir: Path, bootstrap: str, overrides: dict[str, str] | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "kafka-rest.properties"
        props = {"listeners": "http://127.0.0.1:0", "bootstrap.servers": bootstrap}
        props.update(overrides or {})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.ready_path = self.workdir / "rest.url"
        self.log_path = self.workdir / "rest.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 20.0) -> "RestProxyProcess":
        self.ready_path.unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clients.rest.main", str(self.config_path),
             "--ready-file", str(self.ready_path)],
            cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready_path.exists() and self.ready_path.read_text().endswith("\n"):
                self.url = self.ready_path.read_text().strip()
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"REST proxy failed to start:\n{self.output()[-4000:]}")

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        terminate(self.proc, timeout)
        self._log.close()
        return self.proc.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
