"""A small tmpfs to fill up: the real ENOSPC of a full disk for log tests (unit and chaos).

    with Tmpfs(tmp_path / "disk", size=4 << 20) as disk:   # mount -t tmpfs -o size=4M
        disk.fill()               # a ballast file takes every free byte
        disk.fill(leave=8192)     # ... all but about 8 KiB (tmpfs counts whole pages)
        disk.free()               # the ballast goes: space again
        disk.resize(8 << 20)      # mount -o remount,size=8M
    Tmpfs(path, size, inodes=64)  # nr_inodes=64: creating files fails with ENOSPC too

Mounting needs root. Outside CI a test without it is skipped with the reason; under CI
(CI=true) it fails, as a missing prerequisite must there. Unmounted on exit (lazily, so a
process still holding a file there cannot keep the mount alive after the test).
"""
from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

BALLAST = "ballast"


def missing_prerequisite(why: str) -> None:
    """Skip, or fail under CI (CI=true), where a missing prerequisite is a broken set-up."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)            # in CI a missing prerequisite is a broken set-up
    pytest.skip(why)


class Tmpfs:
    def __init__(self, path: Path, size: int, inodes: int | None = None):
        self.path = Path(path)
        self.size = size
        self.inodes = inodes        # nr_inodes: creating a file past it fails with ENOSPC
        self.mounted = False

    def mount(self) -> "Tmpfs":
        self.path.mkdir(parents=True, exist_ok=True)
        options = f"size={self.size}" + (f",nr_inodes={self.inodes}" if self.inodes else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(self.path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            missing_prerequisite(f"cannot mount a tmpfs to fill up (needs root): {done.stderr.strip()}")
        self.mounted = True
        return self

    def __enter__(self) -> "Tmpfs":
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False

    @property
    def ballast(self) -> Path:
        return self.path / BALLAST

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> int:
        """Grow the ballast until the file system is full, then give back `leave` bytes
        (rounded up to whole pages by tmpfs). Returns the ballast's size."""
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 1:
                        break
                    chunk = chunk[:len(chunk) // 2]
            size = os.fstat(fd).st_size
            if leave:
                size = max(size - leave, 0)
                os.ftruncate(fd, size)
            return size
        finally:
            os.close(fd)

    def free(self) -> None:
        """Delete the ballast: its space is free again."""
        try:
            self.ballast.unlink()
        except FileNotFoundError:
            pass

    def resize(self, size: int) -> None:
        """Grow (or shrink) the file system in place: mount -o remount,size=."""
        done = subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"cannot resize the tmpfs at {self.path}: {done.stderr.strip()}")
        self.size = size
