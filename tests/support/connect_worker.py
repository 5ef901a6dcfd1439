"""Real Kafka Connect worker processes for integration tests (`python -m clients.connect.main
standalone|distributed`), each on a free loopback port with its own work dir, and a small
JSON-over-HTTP helper for their REST API (urllib: the tests speak HTTP as a user's script
would, not through strom's code)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from tests.support.broker_process import REPO, free_port, kill9, terminate, wait_for_port


def rest(url: str, method: str = "GET", body: Any = None, timeout: float = 30.0,
         raw: bytes | None = None, content_type: str = "application/json") -> tuple[int, Any]:
    """(status, parsed JSON body or None) of one request; HTTP errors are answers too."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
            return resp.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text) if text else None
        except ValueError:
            return e.code, text.decode(errors="replace")


def wait_until(cond: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2,
               what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except (OSError, ValueError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout}s (last: {last!r})")


class ConnectWorker:
    """One worker process. `props` are the worker's properties (bootstrap.servers etc.);
    `listeners` is set to a free port here."""

    def __init__(self, workdir: Path, mode: str, props: dict[str, str],
                 connector_files: list[Path] = ()):   # type: ignore[assignment]
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.mode = mode
        self.port = free_port()
        self.props = {"listeners": f"http://127.0.0.1:{self.port}",
                      "rest.advertised.host.name": "127.0.0.1",
                      "offset.flush.interval.ms": "1000", **props}
        if mode == "standalone":
            self.props.setdefault("offset.storage.file.filename", str(self.workdir / "offsets.json"))
        self.config_path = self.workdir / f"connect-{mode}.properties"
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        self.connector_files = [str(p) for p in connector_files]
        self.log_path = self.workdir / "worker.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ConnectWorker":
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self._log = open(self.log_path, "ab")
        proc = self.proc = subprocess.Popen(
            [sys.executable, "-m", "clients.connect.main", self.mode, str(self.config_path),
             *self.connector_files], cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", self.port, timeout, proc)
            # 503 until the herder has started (and, standalone, its connectors are created).
            wait_until(lambda: proc.poll() is not None or self.rest("GET", "/")[0] == 200,
                       timeout, what="the worker ready")
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}")
        except Exception:
            self.stop()
            raise RuntimeError(f"worker failed to start:\n{self.output()[-4000:]}")
        return self

    def rest(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        return rest(self.url + path, method, body, **kw)

    def kill9(self) -> None:
        kill9(self.proc)

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        terminate(self.proc, timeout)
        self._log.close()
        return self.proc.returncode

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def append_lines(path: Path, start: int, count: int, chunk: int = 1000, pause: float = 0.0) -> None:
    """Append lines "line-<n> ..." n = start..start+count-1, in chunks (a file being written)."""
    with open(path, "a") as f:
        for base in range(start, start + count, chunk):
            end = min(base + chunk, start + count)
            f.write("".join(f"line-{n:07d} the quick brown fox jumps over the lazy dog\n"
                            for n in range(base, end)))
            f.flush()
            if pause:
                time.sleep(pause)


def expected_text(count: int) -> str:
    return "".join(f"line-{n:07d} the quick brown fox jumps over the lazy dog\n" for n in range(count))
