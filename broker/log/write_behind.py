"""Start the kernel's writeback of appended log bytes early, a few MB at a time, on a thread
of its own (`log.writeback.interval.bytes`; strom's own key, Kafka has none).

Why: an append is an `os.write` into the page cache on the broker's one event-loop thread.
Left alone, the kernel lets the logs' dirty pages grow to `vm.dirty_background_ratio` (GBs
on a server) and then writes them back in a burst; on ext4 that burst allocates the blocks
of the same files the loop goes on appending to, and the loop's writes wait for it (in
`ext4_da_get_block_prep` / `ext4_da_write_end`: 150-305 ms of a second on one broker's
loop at 50 MB/s, rf 3, in docs/PERFORMANCE.md). Each client of that broker waits with it.
Starting the writeback of every few MB as soon as they are appended keeps each file's dirty
tail small, so those waits are short and the kernel never has a burst to write.

Not durability: nothing waits for this writeback and nothing is fsynced here (the
`log.flush.*` keys and the recovery point do that). `sync_file_range(SYNC_FILE_RANGE_WRITE)`
only queues the range's dirty pages for writing; it may block while the device's queue is
full, which is why it runs here and not on the loop. Where the call does not exist (not
Linux) the write-behind is off and the kernel decides, as before.

Concurrency: `appended` runs on the event-loop thread (the log's only writer); the thread
gets its own duplicate of the segment's descriptor, so a segment closed or deleted meanwhile
is harmless. The queue is bounded: while the device is that far behind, appends skip their
turn (the range is taken with the next one) rather than hold more descriptors; so does an
append that cannot get a descriptor. Nothing here ever fails an append.
"""
from __future__ import annotations

import ctypes
import logging
import mmap
import os
import queue
import sys
import threading
from typing import Callable, Protocol

log = logging.getLogger(__name__)

SYNC_FILE_RANGE_WRITE = 2       # <linux/fs.h>: start writeback of the range's dirty pages
_QUEUE_LIMIT = 64
_PAGE = mmap.PAGESIZE

StartWriteback = Callable[[int, int, int], None]
"""(fd, offset, nbytes): start writing the range's dirty pages back; OSError on failure."""


class Appendable(Protocol):
    """What the write-behind needs of a segment: its descriptor, its size, and where the
    bytes not yet handed to the writeback start."""

    fd: int
    size: int
    writeback_from: int


def sync_file_range_write() -> StartWriteback | None:
    """libc's sync_file_range with SYNC_FILE_RANGE_WRITE, or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def start(fd: int, offset: int, nbytes: int) -> None:
        if fn(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sync_file_range: {os.strerror(err)}")
    return start


class WriteBehind:
    """One broker's write-behind: `appended(segment)` after each append hands the segment's
    whole pages since its last hand-off to the thread once they reach `interval_bytes`. An
    interval of 0 (or no `start_writeback`) turns it off."""

    def __init__(self, interval_bytes: int,
                 start_writeback: StartWriteback | None = None):
        self.start_writeback = start_writeback
        self.interval = interval_bytes if start_writeback is not None else 0
        # (fd, offset, nbytes) to write back; an Event to set when its turn comes; None: stop.
        self._queue: queue.Queue[tuple[int, int, int] | threading.Event | None] = \
            queue.Queue(_QUEUE_LIMIT)
        self._thread: threading.Thread | None = None
        self._warned = False
        self.handed = 0          # ranges handed to the thread
        self.handed_bytes = 0    # their bytes (strom_log_writeback_started_bytes_total)
        self.skipped = 0         # hand-offs skipped because the queue was full

    @classmethod
    def for_this_os(cls, interval_bytes: int) -> WriteBehind:
        start = sync_file_range_write() if interval_bytes > 0 else None
        if interval_bytes > 0 and start is None:
            log.info("log.writeback.interval.bytes=%d: no sync_file_range on this system, "
                     "the kernel alone decides when log data is written back", interval_bytes)
        return cls(interval_bytes, start)

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def appended(self, seg: Appendable) -> None:
        start = seg.writeback_from
        # Whole pages only: the page the next append writes into must not be under
        # writeback (the write would wait for it: seen as waits in __filemap_get_folio).
        end = seg.size - seg.size % _PAGE
        if not self.interval or end - start < self.interval:
            return
        if self._thread is None:
            thread = threading.Thread(target=self._run, name="log-writeback", daemon=True)
            try:
                thread.start()
            except RuntimeError as e:          # no thread to be had: leave it to the kernel
                log.warning("log write-behind off, its thread did not start: %s", e)
                self.interval = 0
                return
            self._thread = thread
        try:
            fd = os.dup(seg.fd)
        except OSError:
            # Out of descriptors, say: the append itself succeeded and must not fail for
            # this; the range goes with a later hand-off (or to the kernel's own writeback).
            self.skipped += 1
            return
        try:
            self._queue.put_nowait((fd, start, end - start))
        except queue.Full:
            os.close(fd)
            self.skipped += 1
            return
        seg.writeback_from = end
        self.handed += 1
        self.handed_bytes += end - start

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Every range handed so far has been passed to the kernel (tests)."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done, timeout=timeout)
        return done.wait(timeout)

    def close(self) -> None:
        """Stop the thread after the ranges already queued."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        start = self.start_writeback
        assert start is not None
        while (item := self._queue.get()) is not None:
            if isinstance(item, threading.Event):
                item.set()
                continue
            fd, offset, nbytes = item
            try:
                start(fd, offset, nbytes)
            except OSError as e:
                # Advisory: the flush that durability needs reports a failing disk itself.
                (log.debug if self._warned else log.warning)(
                    "starting the writeback of %d bytes of log failed: %s", nbytes, e)
                self._warned = True
            finally:
                os.close(fd)
