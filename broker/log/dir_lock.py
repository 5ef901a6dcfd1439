"""Each log dir's `.lock` file, held with flock by the broker that uses the dir (Kafka's
LogManager.lockLogDirs).

While a broker process runs, it holds an exclusive flock on `<dir>/.lock` of every log dir;
the kernel drops the lock when the process ends, however it ends (kill -9 included). So a
broker that takes the locks knows no live broker process uses these dirs, and a second broker
pointed at the same dirs fails at once with Kafka's words instead of corrupting them.
"""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"

__all__ = ["LOCK_FILE", "LogDirLocks", "LogDirLockedError", "LogDirUnusableError", "lock_log_dirs"]


class LogDirLockedError(Exception):
    """Another process holds the dir's lock."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        super().__init__(f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance "
                         f"in another process or thread is using this directory.")


class LogDirUnusableError(Exception):
    """The dir cannot be made or written (not a directory, no permission, read-only, ...)."""

    def __init__(self, log_dir: str, reason: str):
        self.log_dir = log_dir
        self.reason = reason
        super().__init__(f"log dir {log_dir} is not usable: {reason}")


class LogDirLocks:
    """The open, flocked `.lock` files of a broker's log dirs; `release()` lets them go (the
    process ending does too)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    @property
    def dirs(self) -> list[str]:
        return list(self._fds)

    def holds(self, log_dir: str | Path) -> bool:
        return os.path.abspath(log_dir) in self._fds

    def take(self, log_dir: str | Path) -> None:
        """Make the dir if missing and lock it; LogDirLockedError or LogDirUnusableError."""
        path = os.path.abspath(log_dir)
        try:
            os.makedirs(path, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise LogDirUnusableError(str(log_dir), "it exists and is not a directory") from None
        except NotADirectoryError:
            raise LogDirUnusableError(str(log_dir), "a part of its path is not a directory") from None
        except OSError as e:
            raise LogDirUnusableError(str(log_dir), e.strerror or str(e)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(str(log_dir)) from None
        self._fds[path] = fd

    def release(self) -> None:
        for fd in self._fds.values():
            os.close(fd)      # closing the only descriptor drops the flock
        self._fds.clear()


def lock_log_dirs(log_dirs: list[str]) -> LogDirLocks:
    """Lock every log dir, or none: on the first failure the locks taken are released and the
    error raised."""
    locks = LogDirLocks()
    try:
        for d in log_dirs:
            locks.take(d)
    except BaseException:
        locks.release()
        raise
    return locks
