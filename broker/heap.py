"""Keep the memory the broker frees, so the next request's buffers reuse it.

A broker allocates and frees the same large buffers all the time: every produce request,
follower fetch response and file read is a buffer of up to a few MiB. glibc serves blocks
above its mmap threshold (128 KiB at first) with fresh mmaps and gives freed memory at the
top of the heap back to the kernel; either way the next buffer lands on pages the kernel
must zero and map again. On the benchmark VM (docs/PERFORMANCE.md) a replicating broker
took 40-80 thousand page faults every 3 s this way, and perf put a fifth of its samples in
them (`clear_page_erms`) and in the copies that took them; the hypervisor also reclaims
returned pages there, so each new one costs a host fault too.

`freeze_startup_objects` does the same for Python's own collector: the objects alive after
start-up stay out of every later full collection.

`retain_freed_memory` raises both thresholds once at start-up, as a JVM keeps its heap: blocks
up to `mmap_threshold` come from the heap, and up to `trim_threshold` bytes of free heap stay
mapped. A broker's RSS then stays near its busiest moment instead of shrinking after it.
An operator's own malloc settings (`GLIBC_TUNABLES`, `MALLOC_TRIM_THRESHOLD_`,
`MALLOC_MMAP_THRESHOLD_`) win; other C libraries are left alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os

log = logging.getLogger("strom.broker")

MMAP_THRESHOLD = 32 << 20   # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 128 << 20

# glibc's older environment variables for the same settings (mallopt would override them).
_OPERATOR_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")
_M_TRIM_THRESHOLD = -1      # mallopt parameter numbers from glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def retain_freed_memory(mmap_threshold: int = MMAP_THRESHOLD,
                        trim_threshold: int = TRIM_THRESHOLD) -> bool:
    """Set glibc's mmap and trim thresholds for this process; False when not applied
    (not glibc, or the operator set malloc tunables of their own)."""
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "") or any(
            k in os.environ for k in _OPERATOR_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018  (present only in glibc)
    except Exception:   # no C library to load by that name, not glibc, not POSIX
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1 and ok
    if not ok:
        log.warning("glibc refused the malloc thresholds (mmap %d, trim %d)",
                    mmap_threshold, trim_threshold)
    return ok


def freeze_startup_objects() -> int:
    """Collect once, then move every object alive (modules, protocol schemas, configs: some
    35,000 objects in a started broker) into the collector's permanent generation, as
    Python's docs suggest for long-running servers. A full (generation-2) collection then
    walks only what was made since: it took a broker 10-19 ms every half minute or so
    under load, each time in all brokers of a cluster at nearly the same moment, and about
    1 ms after this (docs/PERFORMANCE.md, optimisation 9). Returns the frozen count."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
