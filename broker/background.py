"""The broker's periodic maintenance, as tasks on its event loop: log retention, flushes
and producer-state expiry, the group coordinator's tick, the abort of timed-out transactions and
the removal of expired transactional ids,
compaction, the ISR shrink check, and recovery-point checkpoints. A failed round is logged and the next one runs as usual.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from .config import BrokerConfig
from .log import LogManager
from .replication.isr_announcer import IsrChangeAnnouncer
from .replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.broker")


class BackgroundTasks:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, replicas: ReplicaManager,
                 isr_announcer: IsrChangeAnnouncer | None, group_tick: Callable[[], Any],
                 abort_timed_out_txns: Callable[[], Any],
                 remove_expired_txn_ids: Callable[[], Any]) -> None:
        self.config = config
        self.log_manager = log_manager
        self.replicas = replicas
        self.isr_announcer = isr_announcer
        self.group_tick = group_tick
        self.abort_timed_out_txns = abort_timed_out_txns
        self.remove_expired_txn_ids = remove_expired_txn_ids
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        cfg = self.config
        self._tasks = [
            asyncio.create_task(self._every(cfg.get("log.retention.check.interval.ms"), self._retention)),
            asyncio.create_task(self._every(1000, self._flush_and_tick)),
            asyncio.create_task(self._every(200, self.group_tick)),
            asyncio.create_task(self._every(
                cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                self.abort_timed_out_txns)),
            asyncio.create_task(self._every(
                cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
                self.remove_expired_txn_ids)),
            asyncio.create_task(self._clean_logs()),
            asyncio.create_task(self._shrink_isrs()),
            asyncio.create_task(self._every(cfg.get("log.flush.offset.checkpoint.interval.ms"),
                                            self.log_manager.checkpoint_recovery_points_async)),
        ]

    def stop(self) -> None:
        for t in self._tasks:
            t.cancel()

    async def _shrink_isrs(self) -> None:
        """Kafka checks every replica.lag.time.max.ms / 2 for followers that fell behind."""
        lag_ms = self.config.get("replica.lag.time.max.ms")
        while True:
            await asyncio.sleep(lag_ms / 2000.0)
            try:
                await self.replicas.shrink_isrs(lag_ms)
                if self.isr_announcer is not None:
                    self.isr_announcer.flush()
            except Exception:
                log.exception("ISR shrink check failed")

    async def _clean_logs(self) -> None:
        """Compaction: one log per call; back off when no log needs cleaning."""
        backoff = self.config.get("log.cleaner.backoff.ms") / 1000.0
        while True:
            try:
                cleaned = self.log_manager.run_cleaner(int(time.time() * 1000))
            except Exception:
                log.exception("log cleaner failed")
                cleaned = 0
            await asyncio.sleep(0 if cleaned else backoff)

    def _retention(self) -> None:
        self.log_manager.run_retention(int(time.time() * 1000))

    def _flush_and_tick(self) -> None:
        now = int(time.time() * 1000)
        self.log_manager.flush_due(now)
        self.log_manager.tick(now)

    async def _every(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000.0)
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))
