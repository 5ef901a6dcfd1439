"""Consumer-group members as OS processes (tests/support/groups2_consumer.py), their logs,
and the checks the group integration tests share."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.broker_process import REPO


def wait_for(cond: Callable[[], object], timeout: float, what: str, interval: float = 0.05):
    """Poll cond() until it returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Event:
    ts: float
    kind: str
    arg: str

    def parts(self) -> set[int]:
        return {int(p) for p in self.arg.split(",") if p}

    def offsets(self) -> dict[int, int]:
        return {int(p): int(o) for p, o in (x.split(":") for x in self.arg.split(",") if x)}


@dataclass
class MemberLog:
    records: list[tuple[int, int, str, int]] = field(default_factory=list)  # p, o, value, #assign before it
    events: list[Event] = field(default_factory=list)

    @property
    def owned(self) -> set[int]:
        cur: set[int] = set()
        for e in self.events:
            if e.kind == "assign":
                cur = e.parts()
            elif e.kind == "revoke":
                cur -= e.parts()
        return cur

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def intervals(self, end: float) -> dict[int, list[tuple[float, float]]]:
        """Per partition, the [start, end) wall-clock spans this member owned it."""
        out: dict[int, list[tuple[float, float]]] = defaultdict(list)
        since: dict[int, float] = {}
        for e in self.events:
            if e.kind == "assign":
                for p in e.parts():
                    since.setdefault(p, e.ts)
            elif e.kind == "revoke":
                for p in e.parts():
                    if p in since:
                        out[p].append((since.pop(p), e.ts))
        for p, t in since.items():
            out[p].append((t, end))
        return out


def parse_log(path: Path) -> MemberLog:
    log = MemberLog()
    if not path.exists():
        return log
    data = path.read_text(errors="replace")
    lines = data.split("\n")
    lines.pop()                         # "" after the last newline, or a line cut by kill -9
    assigns = 0
    for line in lines:
        if line.startswith("# "):
            ts, kind, *rest = line[2:].split(" ", 2)
            log.events.append(Event(float(ts), kind, rest[0] if rest else ""))
            if kind == "assign":
                assigns += 1
        else:
            p, o, v = line.split(" ", 2)
            log.records.append((int(p), int(o), v, assigns))
    return log


PY_RECORD = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d+) (\w+) ")     # groups2_consumer's format
RDKAFKA_RECORD = re.compile(r"^%(\d)\|(\d+\.\d+)\|")                              # librdkafka's own


def stderr_problems(text: str, until: float | None = None) -> list[str]:
    """The error-level log records (Python logging ERROR/CRITICAL, librdkafka level <= 3) and
    tracebacks in a member's stderr, up to wall-clock time `until` (its "closing" event):
    kafka-python 3.0.12 logs harmless errors while it closes (a recv racing the socket's
    close with a traceback, "Metadata refresh: failed Cancelled")."""
    records: list[tuple[float | None, bool, str]] = []     # (time, error level, text)
    for line in text.splitlines():
        m, r = PY_RECORD.match(line), RDKAFKA_RECORD.match(line)
        if m:
            ts = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            records.append((ts, m.group(3) in ("ERROR", "CRITICAL"), line))
        elif r:
            records.append((float(r.group(2)), int(r.group(1)) <= 3, line))
        elif records:
            t, err, body = records[-1]
            records[-1] = (t, err, body + "\n" + line)
        else:
            records.append((None, False, line))
    return [body for t, err, body in records
            if (err or "Traceback" in body) and (until is None or t is None or t < until)]


def uncommitted_tail(path: Path) -> tuple[int, int]:
    """(records processed, records processed after the last acknowledged commit) of a log."""
    if not path.exists():
        return 0, 0
    lines = path.read_bytes().split(b"\n")[:-1]
    n = tail = 0
    for line in lines:
        if line.startswith(b"# "):
            if line.split(b" ", 3)[2] == b"commit":
                tail = 0
        else:
            n += 1
            tail += 1
    return n, tail


class Member:
    """One groups2_consumer process."""

    def __init__(self, workdir: Path, name: str, client: str, bootstrap: str, topic: str, group: str,
                 strategy: str = "default", session_ms: int = 6000, heartbeat_ms: int = 1000,
                 commit_every: int = 700, commit_idle_s: float = 0.5):
        self.name = name
        self.client = client
        self.log_path = workdir / f"{name}.log"
        self.err_path = workdir / f"{name}.stderr"
        self.args = [sys.executable, "-m", "tests.support.groups2_consumer", "--client", client,
                     "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                     "--log", str(self.log_path), "--client-id", name, "--strategy", strategy,
                     "--session-ms", str(session_ms), "--heartbeat-ms", str(heartbeat_ms),
                     "--commit-every", str(commit_every), "--commit-idle-s", str(commit_idle_s),
                     # e.g. GROUPS2_CLIENT_LOG_LEVEL=DEBUG: the client libraries' logs in <name>.stderr
                     "--log-level", os.environ.get("GROUPS2_CLIENT_LOG_LEVEL", "WARNING")]
        self.proc: subprocess.Popen | None = None
        self.killed_at: float | None = None

    def start(self) -> "Member":
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
        self._err = open(self.err_path, "ab")
        self.proc = subprocess.Popen(self.args, cwd=REPO, env=env, stdout=self._err, stderr=subprocess.STDOUT)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> float:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.killed_at = time.time()
        self.proc.wait(10)
        return self.killed_at

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM: the member commits, leaves the group and exits."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise AssertionError(f"{self.name} did not exit within {timeout}s of SIGTERM:\n{self.stderr()}")
        return self.proc.returncode

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if hasattr(self, "_err"):
            self._err.close()

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-4000:] if self.err_path.exists() else ""

    def log(self) -> MemberLog:
        return parse_log(self.log_path)

    def count(self) -> int:
        """Records processed so far (cheap: data lines of the log)."""
        if not self.log_path.exists():
            return 0
        data = self.log_path.read_bytes()
        return data.count(b"\n") - data.count(b"\n# ") - data.startswith(b"# ")


def current_assignment(members: list[Member], partitions: int) -> dict[str, set[int]] | None:
    """The live members' current assignments if they are a partition of range(partitions) with
    every member holding something; else None."""
    owned = {m.name: m.log().owned for m in members}
    allp = [p for s in owned.values() for p in s]
    if sorted(allp) == list(range(partitions)) and all(owned.values()):
        return owned
    return None


def check_exclusive_ownership(logs: dict[str, MemberLog], ends: dict[str, float]) -> None:
    """No partition was owned by two members at the same time (by the listeners' logs).
    A member's ownership ends at its last revoke, or at ends[name] (kill or close)."""
    spans: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for name, log in logs.items():
        for p, ivs in log.intervals(ends[name]).items():
            spans[p].extend((a, b, name) for a, b in ivs)
    for p, owners in spans.items():
        owners.sort()
        for (a1, b1, n1), (a2, _, n2) in zip(owners, owners[1:]):
            assert a2 >= b1, f"partition {p} owned by {n1} [{a1:.3f}, {b1:.3f}) and {n2} from {a2:.3f}"


def seen_by_member(logs: dict[str, MemberLog]) -> dict[tuple[int, int], list[tuple[str, str]]]:
    """(partition, offset) -> [(member, value), ...] over every member's records."""
    seen: dict[tuple[int, int], list[tuple[str, str]]] = defaultdict(list)
    for name, log in logs.items():
        for p, o, v, _ in log.records:
            seen[(p, o)].append((name, v))
    return seen


def check_all_seen(seen: dict[tuple[int, int], list[tuple[str, str]]],
                   produced: dict[tuple[int, int], str]) -> None:
    missing = sorted(set(produced) - set(seen))
    assert not missing, f"{len(missing)} records never consumed, e.g. {missing[:10]}"
    extra = sorted(set(seen) - set(produced))
    assert not extra, f"{len(extra)} consumed records were never produced, e.g. {extra[:10]}"
    for tp, copies in seen.items():
        for name, v in copies:
            assert v == produced[tp], f"{name} read {v!r} at {tp}, produced {produced[tp]!r}"
