"""What appending to the page cache costs on this machine, by how recently memory was freed.

On a VM that reports freed guest memory to the host (virtio-balloon free page reporting,
see docs/PERFORMANCE.md), a page the guest freed a moment ago is still backed by the host
and cheap to reuse; one freed seconds ago has been handed back, and the first write to it
takes a host fault. A broker's log is always new page-cache memory, so its produce path pays
the second price in steady state. This measures both with a plain `os.write` of 1 MiB
blocks (CPU time of the writing thread per MB, and MB/s):

    .venv/bin/python bench/page_cache_reuse.py                  # 1 GiB files, 10 s wait
    .venv/bin/python bench/page_cache_reuse.py --mb 2048 --wait 20 --json out.json

Rows: a first append; an append right after deleting the first file (its page cache just
freed); an append `--wait` seconds after deleting the second.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

_BLOCK = 1 << 20


def append(path: str, mb: int, block: bytes) -> tuple[float, float]:
    """(CPU ms per MB, MB/s) of appending `mb` MiB to a new file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for _ in range(mb):
            os.write(fd, block)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        os.close(fd)
    return cpu * 1000 / mb, mb * _BLOCK / wall / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=1024, help="MiB appended per file")
    ap.add_argument("--wait", type=float, default=10.0, help="seconds before the last append")
    ap.add_argument("--dir", default=None, help="where the files go (default: a temp dir here)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    block = os.urandom(_BLOCK)
    rows = []
    with tempfile.TemporaryDirectory(dir=a.dir or os.getcwd(), prefix=".page-cache-") as d:
        for name, wait in (("first append", 0.0), ("right after freeing the last file", 0.0),
                           (f"{a.wait:g} s after freeing the last file", a.wait)):
            time.sleep(wait)
            path = os.path.join(d, "f")
            ms_per_mb, mb_s = append(path, a.mb, block)
            os.unlink(path)
            rows.append({"append": name, "cpu_ms_per_mb": ms_per_mb, "mb_per_s": mb_s})
    print(f"{'append':<36} | CPU ms/MB |   MB/s")
    print(f"{'-' * 36}-+-----------+-------")
    for r in rows:
        print(f"{r['append']:<36} | {r['cpu_ms_per_mb']:9.2f} | {r['mb_per_s']:6.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mb": a.mb, "wait_s": a.wait, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
