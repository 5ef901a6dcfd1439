"""How many of a file's page-cache pages are dirty: Linux's cachestat(2) (6.5+), for tests
that check what the broker leaves to the kernel's writeback."""
from __future__ import annotations

import ctypes
import errno
import os

_SYS_CACHESTAT = 451        # the same number on every architecture


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


class NoCachestat(Exception):
    """This kernel has no cachestat(2) (or refuses it here)."""


def dirty_pages(fd: int) -> int:
    """Dirty page-cache pages of the file open at `fd`; NoCachestat where the call is
    missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    rng, st = _Range(0, 0), _Stat()       # len 0: to the end of the file
    if libc.syscall(_SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(st), 0) != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM):
            raise NoCachestat(os.strerror(err))
        raise OSError(err, os.strerror(err))
    return st.nr_dirty


def dirty_pages_of(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return dirty_pages(fd)
    finally:
        os.close(fd)


def writeback_visible(directory: str) -> bool:
    """Whether files in `directory` are written back at all (not tmpfs): a page written and
    fsynced there is clean afterwards."""
    path = os.path.join(directory, ".writeback-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
        return dirty_pages(fd) == 0
    finally:
        os.close(fd)
        os.unlink(path)
