"""What strom's producer spends per produce request, beside what it spends per record
(issue 25: the sender's Python per request).

One standalone strom broker, one topic of one partition. Each run is a child process that
runs `await AsyncProducer.send()` for `--records` records (every future kept, as
bench/clients.py does; acks=1, not idempotent, linger.ms=5), then flushes, and reports the
CPU its process used per record and the Produce requests it wrote. Each record size is run
with `--batch-size` (default 16384, the default; a request per batch at one partition) and
with batches of 1 MiB (a request per ~9,000 records of 100 B): the difference in CPU per
record, times the records a request carried, is the CPU per request.

With `--base PATH` (a checkout of an older commit, e.g. `git worktree add /tmp/base
<commit>`), every run is made with both checkouts' clients, one after the other against
the same broker, for a before/after table; the broker is this checkout's. The CPU figures
of this VM vary by 20-40 % from run to run: use `--repeats` >= 7 and read the medians.

    python bench/sender_cost.py [--sizes 100,1024] [--records 60000] [--repeats 7]
                                [--base /tmp/base] [--label L]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from bench._common import (Results, StromBroker, add_results_args, log, machine,  # noqa: E402
                           print_table, run_main, workdir)

TOPIC = "sender-cost"
BIG_BATCH = 1 << 20


def child(repo: str, bootstrap: str, size: int, batch_size: int, records: int) -> None:
    """One run, in a process of its own with `repo`'s clients: prints its figures as JSON."""
    sys.path.insert(0, repo)
    import clients.aio.connection as connection
    from clients.aio import AsyncProducer
    assert Path(connection.__file__).resolve().is_relative_to(Path(repo).resolve()), repo

    requests = 0
    write_frame = connection.BrokerConnection._write_frame

    def counting(self: Any, a: Any, *args: Any, **kw: Any) -> Any:
        nonlocal requests
        if a.name == "Produce":
            requests += 1
        return write_frame(self, a, *args, **kw)

    connection.BrokerConnection._write_frame = counting  # type: ignore[method-assign]

    async def main() -> dict[str, Any]:
        nonlocal requests
        p = AsyncProducer({"bootstrap.servers": bootstrap, "acks": "1",
                           "enable.idempotence": False, "linger.ms": 5,
                           "batch.size": batch_size, "max.request.size": 2 * BIG_BATCH,
                           "buffer.memory": 1 << 30})
        await p.start()
        await (await p.send(TOPIC, b"warm-up", partition=0))
        values = [os.urandom(size) for _ in range(64)]
        futures: list[Any] = []
        append, send = futures.append, p.send
        requests = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(records):
            append(await send(TOPIC, values[i & 63], partition=0))
        await p.flush()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        failed = sum(1 for f in futures if f.exception() is not None)
        await p.close()
        return {"records": records, "acknowledged": records - failed, "requests": requests,
                "seconds": seconds, "cpu_us_per_record": cpu / records * 1e6}

    print(json.dumps(asyncio.run(main())), flush=True)


def run_child(repo: str, bootstrap: str, size: int, batch_size: int, records: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", repo, bootstrap, str(size),
                          str(batch_size), str(records)],
                         capture_output=True, text=True, timeout=300, cwd=repo)
    if out.returncode != 0:
        raise RuntimeError(f"run failed ({repo}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1024", help="record sizes in bytes")
    ap.add_argument("--batch-size", type=int, default=16384)
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--base", help="another checkout whose client is run beside this one")
    add_results_args(ap)
    a = ap.parse_args(argv)
    info = machine()
    checkouts = [("this", str(HERE))] + ([("base", str(Path(a.base).resolve()))] if a.base else [])
    out = Results("sender_cost", a, info)
    runs: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    failed: list[str] = []
    with workdir() as wd:
        broker = StromBroker(wd)
        try:
            broker.create_topic(TOPIC, 1)
            for r in range(a.repeats):
                for size in [int(s) for s in a.sizes.split(",")]:
                    for batch in (a.batch_size, BIG_BATCH):
                        order = checkouts if r % 2 == 0 else checkouts[::-1]
                        for name, repo in order:
                            fig = run_child(repo, broker.bootstrap, size, batch, a.records)
                            if fig["acknowledged"] != fig["records"]:
                                failed.append(f"{name} {size} B batch {batch}: "
                                              f"{fig['records'] - fig['acknowledged']} not acknowledged")
                            runs.setdefault((name, size, batch), []).append(fig)
                            out.run(f"round{r}-{name}-{size}B-batch{batch}", fig)
                            log(f"round {r} {name} {size} B batch {batch}: "
                                f"{fig['cpu_us_per_record']:.2f} us/record, "
                                f"{fig['requests']} requests")
        finally:
            broker.close()
    rows, summary = [], []
    for size in [int(s) for s in a.sizes.split(",")]:
        for name, _ in checkouts:
            small, big = runs[(name, size, a.batch_size)], runs[(name, size, BIG_BATCH)]
            cpu_small = statistics.median(x["cpu_us_per_record"] for x in small)
            cpu_big = statistics.median(x["cpu_us_per_record"] for x in big)
            reqs = statistics.median(x["requests"] for x in small)
            per_request = (cpu_small - cpu_big) * a.records / reqs if reqs else None
            rows.append([f"{size} B", name, f"{cpu_small:.2f}", f"{cpu_big:.2f}", int(reqs),
                         f"{per_request:.0f}" if per_request is not None else "-",
                         len(small)])
            summary.append({"size": size, "checkout": name, "cpu_us_per_record": cpu_small,
                            "cpu_us_per_record_big_batches": cpu_big, "requests": reqs,
                            "cpu_us_per_request": per_request,
                            "runs": [x["cpu_us_per_record"] for x in small],
                            "runs_big_batches": [x["cpu_us_per_record"] for x in big]})
    print_table(["record", "checkout", f"us/record, batch {a.batch_size}",
                 "us/record, 1 MiB batches", "requests", "us per request", "runs"], rows)
    out.summary({"rows": summary})
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        repo, bootstrap, size, batch, records = sys.argv[2:7]
        child(repo, bootstrap, int(size), int(batch), int(records))
    else:
        run_main(main)
