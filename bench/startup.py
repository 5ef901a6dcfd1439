"""Broker start-up: cold start to accepting connections, idle RSS, and recovery after kill -9
with a log of --log-mb MiB (1 GiB by default) that was never flushed.

    .venv/bin/python bench/startup.py                       # 5 cold starts, 3 x 1 GiB recovery
    .venv/bin/python bench/startup.py --quick               # 3 cold starts, 1 x 256 MiB recovery
    .venv/bin/python bench/startup.py --label after --json startup.json

Every cold start and every recovery is written to a results file of its own
(bench/results/startup-<date>-<time>[-<label>]/), the medians to summary.json there.

"accepting connections" is the first successful TCP connect, polled every 2 ms from the
moment the process is spawned (`python -m broker server.properties`, interpreter start-up
included). A standalone broker loads (and recovers) its logs before it listens, so after
kill -9 that time includes recovery; "first produce" is when a produce to the recovered
partition is acknowledged.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (Results, add_results_args, log, machine,  # noqa: E402
                           median_of_runs, print_table, produce_run, rss_of, run_main,
                           use_broker_repo, workdir, write_json)


def spawn_and_wait(bp, timeout: float = 120.0) -> tuple[subprocess.Popen, float]:
    import tests.support.broker_process as broker_process   # REPO: --broker-repo's checkout
    repo = broker_process.REPO
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHONUNBUFFERED="1")
    out = open(bp.log_path, "ab")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "broker", str(bp.config_path)], cwd=repo,
                            env=env, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited: {bp.log_path.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", bp.port), timeout=0.5):
                return proc, time.perf_counter() - t0
        except OSError:
            time.sleep(0.002)
    proc.kill()
    raise TimeoutError("broker did not listen")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def first_produce_s(bootstrap: str, topic: str, t0: float) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "log_level": 3,
                  "message.timeout.ms": 60000})
    p.produce(topic, b"after-recovery", partition=0)
    if p.flush(60):
        raise RuntimeError("produce after recovery not acknowledged")
    return time.perf_counter() - t0


def recovery_runs(bp, proc: subprocess.Popen, a: argparse.Namespace,
                  out: Results) -> tuple[int, list[dict]]:
    """Fill one partition with --log-mb MiB (never flushed: no fsync), kill -9, restart and
    time the recovery; --repeats times (each restart leaves the log unflushed again)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    admin.create_topics([NewTopic("recover", 1, 1)])["recover"].result(30)
    del admin
    time.sleep(0.5)
    size = 1024
    produce_run(bp.bootstrap, "recover", 1, size, "none", "1", 600.0, (a.log_mb << 20) // size, [])
    log_bytes = sum(f.stat().st_size for f in (bp.log_dir / "recover-0").glob("*.log"))
    recs = []
    for r in range(a.repeats):
        stop(proc, signal.SIGKILL)
        t0 = time.perf_counter()
        proc, listen = spawn_and_wait(bp)
        bp._bench_proc = proc          # for the caller's clean-up
        produced = first_produce_s(bp.bootstrap, "recover", t0)
        recs.append({"listen_s": listen, "first_produce_s": produced})
        out.run(f"recovery-{r}", {"log_bytes": log_bytes, **recs[-1]})
        log(f"recovery {r}: {log_bytes / 2**20:.0f} MiB of log, listening after {listen:.2f} s, "
            f"first produce acknowledged after {produced:.2f} s")
    return log_bytes, recs


def main(argv: list[str] | None = None) -> int:
    from tests.support.broker_process import BrokerProcess
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--log-mb", type=int, default=1024, help="MiB of log to recover after kill -9")
    ap.add_argument("--repeats", type=int, default=3, help="kill -9 / recovery repeats")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="also write the summary to this file")
    ap.add_argument("--broker-repo", metavar="DIR", help="run strom from this checkout (before/after)")
    add_results_args(ap)
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.quick:
        a.starts, a.log_mb, a.repeats = 3, 256, 1
    info = machine()
    use_broker_repo(a.broker_repo, info)
    out = Results("startup", a, info)
    with workdir() as wd:
        # Cold starts on an empty log dir (a fresh one each time) and idle RSS.
        starts, rss = [], []
        for i in range(a.starts):
            bp = BrokerProcess(wd / f"cold-{i}")
            proc, t = spawn_and_wait(bp)
            time.sleep(2.0)
            rss.append(rss_of(proc.pid))
            stop(proc)
            starts.append(t)
            log(f"cold start {i}: {t * 1000:.0f} ms, idle RSS {rss[-1] / 2**20:.1f} MiB")
            out.run(f"cold-start-{i}", {"cold_start_s": t, "idle_rss_bytes": rss[-1]})
        # Warm start (same dir again: bytecode and page cache warm, log dir present).
        proc, warm = spawn_and_wait(bp)
        stop(proc)

        # Recovery after kill -9 with --log-mb of unflushed log.
        bp = BrokerProcess(wd / "recovery", overrides={"log.segment.bytes": str(1 << 30)})
        proc, _ = spawn_and_wait(bp)
        try:
            log_bytes, recs = recovery_runs(bp, proc, a, out)
        finally:
            stop(getattr(bp, "_bench_proc", proc))
    cold = median_of_runs(starts)
    idle = median_of_runs(rss)
    listen = median_of_runs([x["listen_s"] for x in recs])
    first = median_of_runs([x["first_produce_s"] for x in recs])
    rows = [["cold start to listening (s)", cold["median"], cold["n"], cold["min"], cold["max"]],
            ["warm restart to listening (s)", warm, 1, warm, warm],
            ["idle RSS (MiB)", idle["median"] / 2**20, idle["n"], idle["min"] / 2**20, idle["max"] / 2**20],
            [f"kill -9 with {log_bytes / 2**20:.0f} MiB: listening (s)", listen["median"],
             listen["n"], listen["min"], listen["max"]],
            [f"kill -9 with {log_bytes / 2**20:.0f} MiB: first produce (s)", first["median"],
             first["n"], first["min"], first["max"]]]
    print()
    print_table(["measure", "median", "runs", "min", "max"], rows)
    summary = {"cold_start_s": starts, "warm_start_s": warm, "idle_rss_bytes": rss,
               "recovery_log_bytes": log_bytes, "recovery": recs,
               "medians": {"cold_start_s": cold, "idle_rss_bytes": idle,
                           "recovery_listen_s": listen, "recovery_first_produce_s": first}}
    out.summary(summary)
    write_json(a.json, {"benchmark": "startup", "args": vars(a), "machine": info,
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "run_dir": str(out.dir),
                        **summary})
    return 0


if __name__ == "__main__":
    run_main(main)
