"""The local strom cluster a fault schedule acts on: its broker processes, found by their pid
files, killed (SIGKILL), frozen (SIGSTOP), thawed (SIGCONT) and started again.

    cluster = open_cluster(Path("data"))      # a bin/start-cluster.sh --data-dir
    cluster.kill9(1); cluster.start(1)

A cluster directory is either

- one of `bin/start-cluster.sh --data-dir DIR` (it holds DIR/run/cluster-brokers): pid files
  DIR/run/broker-server-ID.pid, and a broker is started again with
  `bin/start-cluster.sh --no-setup --data-dir DIR --broker ID`, which keeps the crashed
  run's output and waits until the broker is registered; or
- any directory whose run/ (or itself) holds pid files named broker-...-ID.pid or
  broker-ID.pid (a test harness's cluster, say): a broker is started again as it was started,
  with the command line, working directory and environment /proc showed before it was
  killed, its output appended to the file its stdout was; the new pid goes into its pid file;
- or a cluster whose maker knows how to start a broker again (`launcher`: strom-verify's own
  netns cluster, whose brokers must start again inside their network namespaces): the
  launcher spawns it, the new pid goes into its pid file.

A pid file is trusted only while its process runs `-m broker` (as bin/_setup.sh's
strom_pid_of checks), so a stale file never gets a stranger signalled.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

BROKER_PATTERN = " -m broker "          # bin/_setup.sh strom_pattern broker
PID_FILE = re.compile(r"^broker-(?:.*-)?(\d+)\.pid$")
START_SCRIPT_TIMEOUT = 120.0
EXEC_VISIBLE_TIMEOUT = 10.0


class ClusterError(Exception):
    """The cluster directory cannot be acted on (no pid files, a broker not running, a start
    that failed)."""


class LocalCluster(Protocol):
    """What a fault may do to the brokers of a local cluster, by broker id."""

    def broker_ids(self) -> list[int]: ...

    def running(self, broker_id: int) -> bool: ...

    def kill9(self, broker_id: int) -> None: ...

    def pause(self, broker_id: int) -> None: ...

    def resume(self, broker_id: int) -> None: ...

    def start(self, broker_id: int) -> None: ...


@dataclass
class LaunchRecord:
    """How a broker process was started, read from /proc while it ran."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    output: str | None      # the file its stdout went to, if a file


def process_cmdline(pid: int) -> list[str] | None:
    """The process's arguments, or None if it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    if re.search(r"^State:\s*Z", state, re.M) or not raw:
        return None
    return [a.decode(errors="surrogateescape") for a in raw.rstrip(b"\0").split(b"\0")]


def is_broker_process(pid: int) -> bool:
    args = process_cmdline(pid)
    return args is not None and BROKER_PATTERN in " " + " ".join(args) + " "


def launch_record(pid: int) -> LaunchRecord:
    args = process_cmdline(pid)
    if args is None:
        raise ClusterError(f"process {pid} is gone: cannot learn how to start it again")
    raw_env = Path(f"/proc/{pid}/environ").read_bytes()
    env = dict(item.decode(errors="surrogateescape").split("=", 1)
               for item in raw_env.split(b"\0") if b"=" in item)
    try:
        target = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        target = ""
    # a pipe, a socket or a terminal is not for a restarted broker to write to
    output = target if target.startswith("/") and Path(target).is_file() else None
    return LaunchRecord(argv=args, cwd=os.readlink(f"/proc/{pid}/cwd"), env=env, output=output)


class PidFileCluster:
    """A local cluster by its pid files; see the module docstring. Not thread-safe: one fault
    schedule acts on it at a time."""

    def __init__(self, directory: Path, start_script: Path | None = None,
                 launcher: Callable[[int], subprocess.Popen] | None = None):
        self.directory = Path(directory)
        self.run_dir = self.directory / "run" if (self.directory / "run").is_dir() else self.directory
        self.start_script = start_script
        self.launcher = launcher        # broker id -> its process, spawned (not yet serving)
        self._launched: dict[int, LaunchRecord] = {}
        self._children: dict[int, subprocess.Popen] = {}   # brokers this object started
        if not self._pid_files():
            raise ClusterError(f"no broker pid files (broker-...-ID.pid) in {self.run_dir}")

    def _pid_files(self) -> dict[int, Path]:
        files: dict[int, Path] = {}
        for path in sorted(self.run_dir.glob("broker-*.pid")):
            m = PID_FILE.match(path.name)
            if m:
                files[int(m.group(1))] = path
        return files

    def broker_ids(self) -> list[int]:
        return sorted(self._pid_files())

    def pid(self, broker_id: int) -> int | None:
        """The broker's pid if its pid file names a running broker process."""
        path = self._pid_files().get(broker_id)
        if path is None:
            return None
        try:
            pid = int(path.read_text().strip())
        except (OSError, ValueError):
            return None
        self._reap()
        return pid if is_broker_process(pid) else None

    def running(self, broker_id: int) -> bool:
        return self.pid(broker_id) is not None

    def _running_pid(self, broker_id: int) -> int:
        pid = self.pid(broker_id)
        if pid is not None:
            return pid
        path = self._pid_files().get(broker_id)
        named = path.read_text().strip() if path is not None and path.is_file() else ""
        if named.isdigit() and process_cmdline(int(named)) is not None:
            # e.g. a broker forked by a test harness: no command line to start it again with
            raise ClusterError(f"{path} names process {named}, which is not a `python -m broker` "
                               f"process")
        raise ClusterError(f"broker {broker_id} is not running (pid file in {self.run_dir})")

    def kill9(self, broker_id: int) -> None:
        pid = self._running_pid(broker_id)
        if self.start_script is None and self.launcher is None:
            self._launched[broker_id] = launch_record(pid)
        os.kill(pid, signal.SIGKILL)
        self._reap()

    def pause(self, broker_id: int) -> None:
        os.kill(self._running_pid(broker_id), signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        pid = self.pid(broker_id)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)

    def start(self, broker_id: int) -> None:
        """Start a broker that is not running; returns once it was started (the script:
        registered; a relaunch: spawned, the caller waits for its registration)."""
        if self.running(broker_id):
            return
        if self.start_script is not None:
            self._start_with_script(broker_id)
        else:
            self._relaunch(broker_id)

    def _start_with_script(self, broker_id: int) -> None:
        assert self.start_script is not None
        done = subprocess.run([str(self.start_script), "--no-setup", "--data-dir",
                               str(self.directory), "--broker", str(broker_id)],
                              capture_output=True, text=True, timeout=START_SCRIPT_TIMEOUT)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            raise ClusterError(f"{self.start_script.name} --broker {broker_id} failed "
                               f"({done.returncode}): {' | '.join(tail)}")

    def _relaunch(self, broker_id: int) -> None:
        if self.launcher is not None:
            proc = self.launcher(broker_id)
            output = "the log its launcher keeps"
        else:
            record = self._launched.get(broker_id)
            if record is None:
                raise ClusterError(f"broker {broker_id} is not running and was not stopped by "
                                   f"this run: its command line is unknown")
            out = open(record.output, "ab") if record.output else open(os.devnull, "wb")
            with out:
                # a session of its own: it outlives this process, as the brokers it replaces would
                proc = subprocess.Popen(record.argv, cwd=record.cwd, env=record.env, stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
            output = str(record.output)
        self._children[broker_id] = proc
        # /proc shows an empty command line for a moment after the exec: until it shows the
        # broker's, the pid file would name what looks like a stranger.
        deadline = time.monotonic() + EXEC_VISIBLE_TIMEOUT
        while not is_broker_process(proc.pid):
            if proc.poll() is not None or time.monotonic() >= deadline:
                raise ClusterError(f"broker {broker_id} did not start again "
                                   f"(exit status {proc.poll()}; output: {output})")
            time.sleep(0.01)
        path = self._pid_files()[broker_id]
        tmp = path.with_suffix(".pid.tmp")
        tmp.write_text(f"{proc.pid}\n")
        tmp.replace(path)

    def _reap(self) -> None:
        """Collect the exit status of brokers this object started and something killed (a
        zombie keeps its pid, and its pid file would name it)."""
        for proc in self._children.values():
            proc.poll()


def find_start_script(directory: Path) -> Path:
    """bin/start-cluster.sh of the checkout that made a start-cluster.sh cluster: the one
    beside this package when it runs from a checkout, else the working directory of one of
    the cluster's brokers (the script runs them from the checkout's root)."""
    here = Path(__file__).resolve().parents[3] / "bin" / "start-cluster.sh"
    if here.is_file():
        return here
    for path in sorted((directory / "run").glob("broker-*.pid")):
        try:
            pid = int(path.read_text().strip())
            script = Path(os.readlink(f"/proc/{pid}/cwd")) / "bin" / "start-cluster.sh"
        except (OSError, ValueError):
            continue
        if script.is_file():
            return script
    raise ClusterError(f"{directory} was made by bin/start-cluster.sh, but no checkout with "
                       f"bin/start-cluster.sh was found to start its brokers again")


def open_cluster(directory: Path) -> PidFileCluster:
    """The local cluster of a directory (see the module docstring)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ClusterError(f"cluster directory {directory} does not exist")
    if (directory / "run" / "cluster-brokers").is_file():
        return PidFileCluster(directory, start_script=find_start_script(directory))
    return PidFileCluster(directory)
