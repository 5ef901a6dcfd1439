"""A leader's ISR changes, announced to the controller (which propagates them in
UpdateMetadata) with one notification at a time, carrying every partition changed since
the last one (Kafka's leaders batch their isr_change_notification znodes too).

A failed notification keeps its partitions for the next one; `flush` (from the periodic ISR
check) retries. Announcing never delays applying an ISR change: the write that landed is
what the leader uses.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class IsrChangeAnnouncer:
    def __init__(self, notify: Callable[[list[TopicPartition]], Awaitable[object]]):
        self._notify = notify
        self._unannounced: set[TopicPartition] = set()
        self._task: asyncio.Future | None = None

    def changed(self, tp: TopicPartition) -> None:
        self._unannounced.add(tp)
        self.flush()

    def flush(self) -> None:
        """Start a notification of what is unannounced, unless one is under way."""
        if self._unannounced and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._announce())

    @property
    def unannounced(self) -> set[TopicPartition]:
        return set(self._unannounced)

    async def _announce(self) -> None:
        while self._unannounced:
            batch, self._unannounced = self._unannounced, set()
            try:
                await self._notify(sorted(batch))
            except Exception as e:
                self._unannounced |= batch
                log.warning("ISR changes of %d partition(s) not announced to the controller yet: %r",
                            len(self._unannounced), e)
                return

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
