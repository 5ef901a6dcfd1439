"""Drive tests/support/groups_consumer.py processes and read what they wrote."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .broker_process import REPO


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll `cond` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class ConsumerProc:
    """One group member in its own process (python -m tests.support.groups_consumer)."""

    def __init__(self, out_dir: Path, name: str, bootstrap: str, group: str, topic: str,
                 conf: dict | None = None, commit_every: int = 500, commit_interval: float = 1.0,
                 final_commit: bool = True):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.cfg = {"bootstrap": bootstrap, "group": group, "topic": topic, "name": name,
                    "out_dir": str(self.out_dir), "conf": conf or {}, "commit_every": commit_every,
                    "commit_interval": commit_interval, "final_commit": final_commit}
        self.proc: subprocess.Popen | None = None
        self.events_path = self.out_dir / f"{name}.events"
        self.records_path = self.out_dir / f"{name}.records"
        self.stop_path = self.out_dir / f"{name}.stop"
        self.stderr_path = self.out_dir / f"{name}.stderr"

    def start(self) -> "ConsumerProc":
        if self.stop_path.exists():
            self.stop_path.unlink()
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.groups_consumer",
                                      json.dumps(self.cfg)], cwd=REPO, env=env,
                                     stdout=self._stderr, stderr=subprocess.STDOUT)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._stderr.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the member to close (commit, close()) and wait for its process to exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.stop_path.touch()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"{self.name} did not close within {timeout}s:\n{self.stderr()}")
        finally:
            self._stderr.close()

    def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    # ------------------------------------------------------------ what it wrote
    def events(self) -> list[dict]:
        if not self.events_path.exists():
            return []
        out = []
        for line in self.events_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:          # a line cut by kill -9
                pass
        return out

    def records(self) -> list[tuple[int, int, str]]:
        if not self.records_path.exists():
            return []
        out = []
        for line in self.records_path.read_text().splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3:
                out.append((int(parts[0]), int(parts[1]), parts[2]))
        return out

    def record_count(self) -> int:
        if not self.records_path.exists():
            return 0
        with open(self.records_path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))

    def assignment(self) -> set[int] | None:
        """Partitions owned after the last rebalance callback; None before the first one."""
        now = None
        for e in self.events():
            if e["ev"] in ("assign", "revoke", "lost"):
                now = set(e["now"])
        return now

    def rebalance_events(self) -> list[dict]:
        return [e for e in self.events() if e["ev"] in ("assign", "revoke", "lost")]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:] if self.stderr_path.exists() else ""


def assignments_settled(members: list[ConsumerProc], partitions: int) -> dict[str, set[int]] | None:
    """Every member has an assignment, they are disjoint and cover every partition."""
    got = {m.name: m.assignment() for m in members}
    if any(a is None for a in got.values()):
        return None
    union: set[int] = set()
    for a in got.values():
        if union & a:
            return None
        union |= a
    return got if union == set(range(partitions)) else None
