"""A disk that fails for real: an ext4 file system on a loop device, shut down mid-run with
the kernel's own EXT4_IOC_SHUTDOWN (what xfs_io's `shutdown` sends), after which every read,
write, fsync and create there fails with EIO, as on a dead disk. (A full disk is no longer a
failed one for strom: see broker/log/errors.LogDirFullError and tests/support/tmpfs.py.)

    with FailingDisk(tmp_path / "disk") as disk:    # mkfs.ext4 + mount -o loop
        ...                                          # use disk.path
        disk.fail()                                  # from now on: EIO

Needs root (mount, loop devices). Outside CI a test without it is skipped with the reason;
under CI (CI=true) it fails, as a missing prerequisite must there.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
from pathlib import Path

from tests.support.tmpfs import missing_prerequisite

# _IOR('X', 125, __u32): ext4's copy of XFS_IOC_GOINGDOWN.
EXT4_IOC_SHUTDOWN = 0x8004587D
# Stop at once, without flushing the journal: the closest thing to pulling the disk.
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


class FailingDisk:
    def __init__(self, path: Path, size: int = 64 << 20):
        self.path = Path(path)
        self.image = self.path.with_name(self.path.name + ".img")
        self.size = size
        self.mounted = False

    def mount(self) -> "FailingDisk":
        if shutil.which("mkfs.ext4") is None:
            missing_prerequisite("mkfs.ext4 is not installed (apt-get install -y e2fsprogs)")
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(self.image)], capture_output=True, text=True)
        if made.returncode != 0:
            missing_prerequisite(f"cannot make an ext4 image: {made.stderr.strip()}")
        done = subprocess.run(["mount", "-o", "loop", str(self.image), str(self.path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            missing_prerequisite(f"cannot mount an ext4 image on a loop device (needs root): {done.stderr.strip()}")
        self.mounted = True
        return self

    def __enter__(self) -> "FailingDisk":
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.unmount()

    def fail(self) -> None:
        """Shut the file system down: every operation on it fails with EIO from now on."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)

    def unmount(self) -> None:
        """Lazily (a broker may still hold files there); the loop device goes with the last
        reference (mount -o loop sets autoclear), the image file at once."""
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False
        self.image.unlink(missing_ok=True)
