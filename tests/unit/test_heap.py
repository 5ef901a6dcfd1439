"""broker.heap: freed buffers are reused instead of being mapped (and zeroed) again."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Eight 1 MiB buffers alive at once, freed together, twenty times over: the shape of a
# broker's request and fetch buffers. Prints the page faults of rounds 2..21.
_PROBE = """
import resource, sys
from broker.heap import retain_freed_memory
if sys.argv[1] == "retain":
    print(retain_freed_memory())
def one_round():
    buffers = [bytearray(1 << 20) for _ in range(8)]
    del buffers
one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    one_round()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, **env: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], cwd=REPO, check=True,
                         capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO), **env))
    return out.stdout.split()


def _glibc() -> bool:
    import ctypes
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except AttributeError:
        return False
    return True


@pytest.mark.skipif(not _glibc(), reason="glibc malloc only")
def test_freed_buffers_are_reused_without_new_page_faults():
    env = {"GLIBC_TUNABLES": ""}
    pages = 20 * 8 * (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    (plain,) = _faults("plain", **env)
    applied, retained = _faults("retain", **env)
    # glibc's own thresholds hand the freed top of the heap back to the kernel, so every
    # round maps and zeroes its 8 MiB again; with the broker's thresholds it stays mapped.
    assert int(plain) > pages // 2, plain
    assert applied == "True"
    assert int(retained) < pages // 20, retained


@pytest.mark.skipif(not _glibc(), reason="glibc malloc only")
@pytest.mark.parametrize("env", [{"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"},
                                 {"MALLOC_TRIM_THRESHOLD_": "1048576"},
                                 {"MALLOC_MMAP_THRESHOLD_": "131072"}])
def test_an_operators_malloc_settings_win(env):
    applied, _ = _faults("retain", **env)
    assert applied == "False"


_FREEZE_PROBE = """
import gc, weakref
import broker.main  # noqa: F401  (what a broker has loaded by the time it serves)
from broker.heap import freeze_startup_objects
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a          # start-up garbage: a cycle only the collector frees
dead = weakref.ref(a)
del a, b
tracked = len(gc.get_objects())
frozen = freeze_startup_objects()
print(dead() is None, tracked, frozen, len(gc.get_objects()))
"""


def test_startup_objects_leave_the_collectors_generations_and_garbage_goes_first() -> None:
    out = subprocess.run([sys.executable, "-c", _FREEZE_PROBE], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    garbage_freed, tracked, frozen, left = out[0] == "True", int(out[1]), int(out[2]), int(out[3])
    assert garbage_freed
    assert frozen > 10_000 and left < tracked // 10, (tracked, frozen, left)
