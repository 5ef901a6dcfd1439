"""What the driver-kill tests share: a streaming job run as its own process until a
condition holds, then SIGKILLed (the whole process group: the JVM and its Python workers),
and the batch ids of a checkpoint's offset and commit logs.

The job scripts (stream_job.py, sink_job.py) call `run_job` as their main.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tests.support.broker_process import REPO


def batch_ids(directory: Path) -> set[int]:
    """The batch ids a checkpoint's `offsets` or `commits` directory holds."""
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def kill_when(cmd: Sequence[str], log_path: Path, condition: Callable[[], Any],
              timeout: float = 240, poll_s: float = 0.005) -> Any:
    """Start `cmd` (own process group, output to `log_path`), poll `condition()` and SIGKILL
    the group as soon as it returns something true: that is returned. None when the process
    ended or `timeout` passed first (the group is killed then too)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(list(cmd), cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                found = condition()
                if found:
                    os.killpg(proc.pid, signal.SIGKILL)
                    return found
                time.sleep(poll_s)
            return None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def run_job(app_name: str, start: Callable[..., Any], *args: str) -> int:
    """A job script's main: start the query in a new session, wait for it (availableNow),
    print what it did."""
    from spark_jobs.session import strom_spark_session

    spark = strom_spark_session(app_name)
    q = start(spark, *args)
    q.awaitTermination()
    print(f"done: {sum(p['numInputRows'] for p in q.recentProgress)} rows in "
          f"{len(q.recentProgress)} batches", flush=True)
    spark.stop()
    return 0
