"""How long each broker's event-loop thread sits in the kernel unable to run (state D:
uninterruptible sleep, e.g. an os.write waiting for ext4 while the kernel writes the logs
back), second by second. A broker has one loop thread, so every ms it spends in D is a ms
no client of that broker is served. Beside it, how long that thread ran, and how long it was
ready to run but waited for a CPU (on a machine with more runnable threads than cores, a
request waits that long whatever the broker does).

    python -m bench.loop_blocked OUT PID[,PID...]    # until the pids are gone

Samples each pid's main thread (/proc/PID/stat, the thread whose tid is the pid: the
broker's event loop) every --every ms and writes one JSON line per second to OUT:
{"t": seconds since start, "blocked_ms": {pid: ms}, "waits": {kernel function: samples},
"cpu_ms": {pid: ms}, "runq_ms": {pid: ms}} (the kernel function from /proc/PID/wchan, where
it waited; cpu_ms and runq_ms from the thread's schedstat, exact rather than sampled: the ms
it ran, and the ms it was ready to run but waited for a CPU). Runs in a process of its own
so that it takes no GIL from the benchmark's producer; reading a few small /proc files 200
times a second costs it about 4 % of one core (measured with ps during a run; the mock,
which has no loop to sample, runs without it). Sampling can miss waits shorter than --every.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import time


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split(None, 1)[0].decode()
    except (OSError, IndexError):
        return None


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


def _schedstat(pid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting for one) of the pid's main thread."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            ran, waited, _ = f.read().split()
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None


def sample(out_path: str, pids: list[int], every_ms: float = 5.0) -> None:
    t0 = time.monotonic()
    second = 0
    blocked: collections.Counter[int] = collections.Counter()
    waits: collections.Counter[str] = collections.Counter()
    sched = {p: _schedstat(p) for p in pids}
    with open(out_path, "w") as out:
        while True:
            now = time.monotonic()
            if now - t0 >= second + 1:
                cpu_ms, runq_ms = {}, {}
                for p in pids:
                    before, after = sched[p], _schedstat(p)
                    if before is not None and after is not None:
                        cpu_ms[str(p)] = round((after[0] - before[0]) / 1e6, 1)
                        runq_ms[str(p)] = round((after[1] - before[1]) / 1e6, 1)
                    sched[p] = after
                out.write(json.dumps({"t": second, "blocked_ms": {str(p): blocked[p] for p in pids},
                                      "waits": dict(waits.most_common(5)),
                                      "cpu_ms": cpu_ms, "runq_ms": runq_ms}) + "\n")
                out.flush()
                blocked.clear()
                waits.clear()
                second += 1
            alive = False
            for pid in pids:
                st = _state(pid)
                if st is None or st in ("Z", "X"):     # gone (a zombie until reaped)
                    continue
                alive = True
                if st == "D":
                    blocked[pid] += every_ms
                    waits[_wchan(pid)] += 1
            if not alive:
                return
            time.sleep(every_ms / 1000)


def read(path: str) -> list[dict]:
    """The lines a sampler wrote."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("pids", help="comma-separated")
    ap.add_argument("--every", type=float, default=5.0, help="ms between samples")
    a = ap.parse_args()
    sample(a.out, [int(p) for p in a.pids.split(",")], a.every)


if __name__ == "__main__":
    main()
