"""Broker processes forked from one pre-warmed parent (a "zygote"), so that each broker starts
without paying the ~0.5 s of CPU that Python's start and the import of `broker.main` cost: a
3-broker cluster pays it once instead of three times, and a restart of broker i takes tens of
milliseconds.

The zygote is `python -m broker.testing.zygote`, started by `Zygote` with pipes on its
stdin and stdout. It imports the broker, then answers one JSON line per request:

    {"op": "start", "argv": [...], "cwd": DIR, "log": FILE, "name": NAME} -> {"pid": PID}
    {"op": "poll", "pid": PID}   -> {"status": None while it runs, else its exit status}

A started broker is the zygote's child: `broker.main.main(argv)` in a fork, in its own
session (a Ctrl-C in the terminal reaches pytest, whose teardown stops the brokers), its
stdout and stderr appended to FILE, its name (`ps -o comm`) NAME. It is killed by the kernel
when the zygote ends (PR_SET_PDEATHSIG), and the zygote ends when its stdin closes: so no
broker outlives the pytest run that started it, even one killed with -9. Exit statuses are
collected only by "poll" (as `subprocess.Popen.poll`: negative for a signal): until then an
exited broker stays a zombie, which keeps its pid from being reused while a caller may still
signal it.

Linux only (fork, prctl). The zygote is single-threaded, so forking it is safe.
"""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1


def pycache_dir() -> Path:
    """Where the zygote keeps compiled modules when the environment forbids writing them
    beside the sources (PYTHONDONTWRITEBYTECODE): a cache of the user's, not the tree."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "strom" / "pycache"


def _compile_once() -> None:
    # Without .pyc files every broker start compiles ~180 modules again (0.75 s of CPU
    # measured); with PYTHONDONTWRITEBYTECODE set they are kept under pycache_dir() instead.
    if sys.dont_write_bytecode and sys.pycache_prefix is None:
        sys.pycache_prefix = str(pycache_dir())
        sys.dont_write_bytecode = False


def _prctl(option: int, value: Any) -> None:
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: the broker runs all the same
        pass


def _run_child(argv: list[str], cwd: str, log: str, name: str, zygote_pid: int) -> None:
    """In the fork: become the broker. Never returns."""
    code = 1
    try:
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote_pid:      # the zygote ended before the line above
            os._exit(1)
        _prctl(PR_SET_NAME, name.encode()[:15])
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.chdir(cwd)
        # As `python -u` would: a kill -9 must not swallow lines still in a buffer.
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(line_buffering=True)
        sys.argv = ["strom-broker", *argv]
        from broker.main import main
        code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:   # noqa: BLE001 - reported in the broker's log, as Python would
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(requests: IO[str], replies: IO[str]) -> None:
    """The zygote's loop: warm up, then answer requests until `requests` ends."""
    _compile_once()
    warm_error = None
    try:
        import broker.main  # noqa: F401  (the point: imported once, here)
    except BaseException:   # noqa: BLE001 - every start request reports it
        warm_error = traceback.format_exc()
    statuses: dict[int, int] = {}    # reaped children: their exit statuses
    for line in requests:
        req = json.loads(line)
        reply: dict[str, Any]
        if req["op"] == "start":
            if warm_error is not None:
                reply = {"error": f"the broker cannot be imported:\n{warm_error}"}
            else:
                zygote_pid = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _run_child(req["argv"], req["cwd"], req["log"], req["name"], zygote_pid)
                reply = {"pid": pid}
        elif req["op"] == "poll":
            pid = req["pid"]
            try:
                if pid not in statuses:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        statuses[pid] = os.waitstatus_to_exitcode(status)
                reply = {"status": statuses.get(pid)}
            except ChildProcessError:
                reply = {"error": f"pid {pid} is not a broker of this zygote"}
        else:
            reply = {"error": f"unknown op {req['op']!r}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


class ZygoteError(RuntimeError):
    """The zygote could not start a broker (it died, or the broker cannot be imported)."""


class Zygote:
    """The pytest side: starts the zygote on first use and talks to it. Thread-safe (one
    request at a time). `close()` ends the zygote and with it every broker it started."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._parents: dict[int, subprocess.Popen[str]] = {}   # running broker -> its zygote

    def warm(self) -> None:
        """Start the zygote (unless it runs) without waiting for it: its import of the
        broker overlaps whatever the caller does next (ZooKeeper's start)."""
        with self._lock:
            self._ensure_running()

    def _ensure_running(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            # A session of its own: a Ctrl-C in the terminal reaches pytest, whose teardown
            # stops the brokers, not the zygote (which would take them all down at once).
            # Run from the directory this `broker` package is in: `-m` puts the working
            # directory first on sys.path, and a user's project may have a `broker` of its own.
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "broker.testing.zygote"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, bufsize=1, close_fds=True,
                start_new_session=True, cwd=Path(__file__).resolve().parents[2])
        return self._proc

    def _request(self, proc: subprocess.Popen[str], **req: Any) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise ZygoteError(f"the broker zygote exited with {proc.wait()}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise ZygoteError(reply["error"])
        return reply

    def start(self, argv: list[str], cwd: Path, log: Path, name: str) -> int:
        """Fork a broker running `broker.main.main(argv)` in `cwd`; returns its pid."""
        with self._lock:
            proc = self._ensure_running()
            pid: int = self._request(proc, op="start", argv=argv, cwd=str(cwd), log=str(log),
                                     name=name)["pid"]
            self._parents[pid] = proc
        return pid

    def poll(self, pid: int) -> int | None:
        """None while broker `pid` runs, else its exit status (negative: killed by that
        signal). Collects the status: after a non-None answer the pid may be reused."""
        with self._lock:
            proc = self._parents.get(pid)
            if proc is None:
                raise ZygoteError(f"pid {pid} is not a broker started here")
            if proc is not self._proc or proc.poll() is not None:
                # Its zygote is gone, and the kernel killed the brokers it had started.
                return -signal.SIGKILL
            status: int | None = self._request(proc, op="poll", pid=pid)["status"]
            if status is not None:
                del self._parents[pid]
            return status

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.close()      # the zygote ends; the kernel kills its brokers
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


_shared: Zygote | None = None
_shared_lock = threading.Lock()


def shared_zygote() -> Zygote:
    """The zygote of this process, made on first use (closed at interpreter exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit
            _shared = Zygote()
            atexit.register(_shared.close)
        return _shared


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
