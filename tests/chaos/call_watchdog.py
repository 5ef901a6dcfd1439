"""A watchdog for client calls that may block past their own timeout.

librdkafka 2.16's send_offsets_to_transaction can block forever, whatever its timeout, once
the group coordinator it cached has left the cluster's metadata: librdkafka decommissions a
broker that the metadata stops listing, and the coordinator lookup waiting for that broker
is never woken nor timed out again (librdkafka issues #5456 and #5511). strom fences a
killed broker at once (its listener refuses connections), so a transactional application
hits this whenever its group coordinator dies at the wrong moment. A call stuck in C cannot
be interrupted from Python: the watchdog ends the process instead, and whoever runs it
restarts it (a new transactional producer fences the old one, so exactly-once holds).
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

REPORT_EVERY_S = 10.0           # a blocked call is reported this often
GRACE_S = 5.0                   # past its own timeout, a call is given up on
EXIT_CODE = 4


class CallWatchdog:
    """Watches one blocking call at a time from its own daemon thread: prints a line
    (`<prefix>: stalled ...`) every REPORT_EVERY_S while it blocks and ends the process with
    EXIT_CODE once it outlives its timeout by `grace_s`. Call `call()` from one thread only."""

    def __init__(self, prefix: str, grace_s: float = GRACE_S) -> None:
        self.prefix = prefix
        self.grace_s = grace_s
        self.current: tuple[str, float, float] | None = None      # (call, started, timeout)
        threading.Thread(target=self._watch, daemon=True).start()

    @contextmanager
    def call(self, name: str, timeout_s: float) -> Iterator[None]:
        self.current = (name, time.monotonic(), timeout_s)
        try:
            yield
        finally:
            self.current = None

    def _watch(self) -> None:
        reported_at: dict[tuple[str, float, float], float] = {}
        while True:
            time.sleep(0.5)
            current = self.current
            if current is None:
                continue
            name, started, timeout_s = current
            now = time.monotonic()
            blocked = now - started
            if blocked > timeout_s + self.grace_s:
                print(f"{self.prefix}: {name} has not returned {blocked:.0f} s after it began, {timeout_s:.0f} s "
                      f"being its timeout (librdkafka #5456/#5511?); exiting for a restart", flush=True)
                os._exit(EXIT_CODE)
            if blocked >= REPORT_EVERY_S and now - reported_at.get(current, started) >= REPORT_EVERY_S:
                print(f"{self.prefix}: stalled {blocked:.0f} s in {name} at {time.strftime('%H:%M:%S')} "
                      f"(timeout {timeout_s:.0f} s)", flush=True)
                reported_at = {current: now}
