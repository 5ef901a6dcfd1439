"""Write flow control for asyncio protocols: what `StreamWriter.drain()` does, for protocols
that read with `BufferedProtocol` and so have no StreamWriter (the client's connections
and the broker's listener)."""
from __future__ import annotations

import asyncio

__all__ = ["WriteFlowControl"]


class WriteFlowControl:
    """Mix into an asyncio protocol: the transport's pause/resume_writing calls land here,
    `wait_writable()` waits while its buffer is above the high-water mark, and
    `fail_writers()` (from connection_lost) wakes every waiter with ConnectionResetError."""

    _write_paused = False

    def __init__(self) -> None:
        self._drain_waiters: list[asyncio.Future[None]] = []

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)

    def fail_writers(self) -> None:
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(ConnectionResetError("connection lost"))

    async def wait_writable(self) -> None:
        if not self._write_paused:
            return
        w = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(w)
        try:
            await w
        finally:
            self._drain_waiters.remove(w)
