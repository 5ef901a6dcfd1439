"""Kafka's TransactionCoordinator: the producer side of transactions (KIP-98).

A transactional id maps to a partition of `__transaction_state`; the broker leading that
partition coordinates it (TransactionStateManager). What the APIs do:

- InitProducerId: a new id gets a producer id and epoch 0; a known one gets its epoch bumped
  (every earlier producer instance is fenced), or a new producer id when the epoch is spent.
  An ongoing transaction of the earlier instance is first fenced (its epoch bumped) and
  aborted; the caller is told CONCURRENT_TRANSACTIONS and retries.
- AddPartitionsToTxn / AddOffsetsToTxn: the partitions (the group's `__consumer_offsets`
  partition) join the ongoing transaction, which is written before the answer.
- EndTxn: PrepareCommit / PrepareAbort is written, the producer is answered, then the
  markers go to every partition's leader and CompleteCommit / CompleteAbort is written.
  Once PrepareCommit is in the log the transaction commits, whatever fails next: a new
  coordinator that loads the partition finishes it (`on_loaded`).
- Transactions open longer than their timeout are fenced and aborted by `abort_timed_out`;
  ids idle for transactional.id.expiration.ms are removed by `remove_expired`.
- KIP-890 part 1: `verify` answers a partition leader (AddPartitionsToTxn v4, verify_only)
  whether a partition was added to the producer's ongoing transaction, before the leader
  appends that producer's first transactional batch there.

Every state change is two steps: TransactionMetadata.prepare_* proposes it, the state
manager writes it with acks=all and applies it only once written.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterable

from clients.protocol.errors import Code

from .marker_sender import TxnMarkerSender
from .metadata import (MAX_EPOCH, NO_PRODUCER_ID, TransactionMetadata, TxnState, TxnStateError,
                       TxnTransit, is_epoch_exhausted)
from .producer_ids import ProducerIdManager
from .settings import TxnSettings
from .state_manager import TransactionStateManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
COMPLETE_RETRY_S = 0.5
# AddPartitionsToTxn right after EndTxn finds the last transaction still completing (its
# markers are being written): rather than answer CONCURRENT_TRANSACTIONS at once, which
# costs the client its retry backoff (librdkafka and Kafka's Java client: 20 ms and more),
# wait this long for it to settle, looking every SETTLE_POLL_S.
SETTLE_WAIT_S = 0.5
SETTLE_POLL_S = 0.002


class TransactionCoordinator:
    def __init__(self, settings: TxnSettings, state: TransactionStateManager,
                 producer_ids: ProducerIdManager, markers: TxnMarkerSender,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)):
        self.settings = settings
        self.state = state
        self.producer_ids = producer_ids
        self.markers = markers
        self.wall_ms = wall_ms
        self._tasks: set[asyncio.Task] = set()
        state.on_loaded = self._on_loaded

    # ================================================================== InitProducerId
    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[int, int, int]:
        """(error code, producer id, epoch). `expected`: the (id, epoch) a KIP-360 client
        says it had, None for a fresh start."""
        if not transactional_id:
            return Code.INVALID_REQUEST, -1, -1
        if not 0 < txn_timeout_ms <= self.settings.max_timeout_ms:
            return Code.INVALID_TRANSACTION_TIMEOUT, -1, -1
        if not await self.state.ensure_topic():
            return Code.COORDINATOR_NOT_AVAILABLE, -1, -1
        code = self.state.check(transactional_id)
        if code:
            return code, -1, -1
        meta = self.state.get(transactional_id)
        if meta is None:
            producer_id = await self.producer_ids.next_id()
            code = self.state.check(transactional_id)        # the await may have moved it
            if code:
                return code, -1, -1
            meta = self.state.put_if_absent(TransactionMetadata(
                transactional_id, producer_id, -1, txn_timeout_ms, TxnState.EMPTY, self.wall_ms()))
        try:
            transit = await self._init_transit(meta, txn_timeout_ms, expected)
        except TxnStateError as e:
            return e.code, -1, -1
        if transit is None:
            return Code.CONCURRENT_TRANSACTIONS, -1, -1
        code = await self.state.write(meta, transit)
        if code:
            return code, -1, -1
        return 0, meta.producer_id, meta.producer_epoch

    async def _init_transit(self, meta: TransactionMetadata, txn_timeout_ms: int,
                            expected: tuple[int, int] | None) -> TxnTransit | None:
        """The transition InitProducerId writes; None when the caller must retry (a
        transaction is being completed, or the earlier instance's one is being aborted)."""
        if meta.has_pending() or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                                TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return None
        now = self.wall_ms()
        if meta.state == TxnState.ONGOING:
            # The earlier instance left a transaction open: fence it and abort it (Kafka
            # answers CONCURRENT_TRANSACTIONS meanwhile; the client retries).
            await self._fence_and_abort(meta)
            return None
        if meta.is_producer_epoch_exhausted() and (expected is None or expected[1] == meta.producer_epoch):
            new_id = await self.producer_ids.next_id()
            if meta.has_pending() or meta.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                                        TxnState.COMPLETE_ABORT):
                return None
            return meta.prepare_producer_id_rotation(new_id, txn_timeout_ms, now, expected is not None)
        return meta.prepare_increment_producer_epoch(txn_timeout_ms, expected, now)

    # ================================================================== AddPartitions / AddOffsets
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition],
                             client_transaction_version: int = 0) -> int:
        """AddPartitionsToTxn / AddOffsetsToTxn, and (transaction version 2) the implicit add
        of a partition leader's first transactional batch or of TxnOffsetCommit v5."""
        parts = set(partitions)
        meta, code = self._owned(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return code
        if self._busy(meta):
            await self._settle(meta)
            meta, code = self._owned(transactional_id, producer_id, producer_epoch)
            if meta is None:
                return code
            if self._busy(meta):
                return Code.CONCURRENT_TRANSACTIONS
        if meta.state == TxnState.ONGOING and parts <= meta.partitions:
            return 0
        try:
            transit = meta.prepare_add_partitions(parts, self.wall_ms(), client_transaction_version)
        except TxnStateError as e:
            return e.code
        return await self.state.write(meta, transit)

    @staticmethod
    def _busy(meta: TransactionMetadata) -> bool:
        return meta.has_pending() or meta.state in (TxnState.PREPARE_COMMIT,
                                                     TxnState.PREPARE_ABORT)

    async def _settle(self, meta: TransactionMetadata) -> None:
        """Wait up to SETTLE_WAIT_S for `meta` to finish its state write or its completion."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_WAIT_S
        while self._busy(meta) and loop.time() < deadline:
            await asyncio.sleep(SETTLE_POLL_S)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """KIP-890 part 1: for each partition, 0 if it is in the producer's ongoing
        transaction at this epoch, else the error its leader refuses the append with."""
        parts = list(partitions)
        meta, code = self._owned(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return {tp: code for tp in parts}
        ongoing = meta.state == TxnState.ONGOING
        return {tp: 0 if ongoing and tp in meta.partitions else Code.INVALID_TXN_STATE for tp in parts}

    def _owned(self, transactional_id: str, producer_id: int, producer_epoch: int
               ) -> tuple[TransactionMetadata | None, int]:
        """The id's metadata if this broker coordinates it and the producer is its current
        instance; else (None, Kafka's error code)."""
        code = self.state.check(transactional_id)
        if code:
            return None, code
        meta = self.state.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return None, Code.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return None, Code.PRODUCER_FENCED
        return meta, 0

    # ================================================================== EndTxn
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> int:
        meta, code = self._owned(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return code
        if meta.has_pending():
            return Code.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state == TxnState.ONGOING:
            return await self._prepare_end(meta, commit)
        done, in_progress = ((TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT) if commit
                             else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT))
        if state == done:
            return 0                        # a retry of an EndTxn that already completed
        if state == in_progress:
            return Code.CONCURRENT_TRANSACTIONS
        return Code.INVALID_TXN_STATE

    # ================================================================== EndTxn v5
    async def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         commit: bool) -> tuple[int, int, int]:
        """EndTxn of transaction version 2 (KIP-890 part 2, EndTxn v5): (error code, producer
        id, epoch the client goes on with). Every end bumps the epoch, so a late EndTxn or
        write of an ended transaction carries an old epoch and is fenced. A retry of an end
        whose answer was lost comes with the epoch before the bump and gets the same answer."""
        code = self.state.check(transactional_id)
        if code:
            return code, -1, -1
        meta = self.state.get(transactional_id)
        if meta is None:
            return Code.INVALID_PRODUCER_ID_MAPPING, -1, -1
        current = meta.producer_epoch
        fencing = meta.pending_state == TxnState.PREPARE_EPOCH_FENCE
        retry_bump = not fencing and current == producer_epoch + 1
        # The end that is being retried moved the producer to a new id at epoch 0: it was
        # at an epoch whose bump would have been exhausted (see _prepare_end).
        retry_overflow = (not fencing and meta.prev_producer_id == producer_id
                          and is_epoch_exhausted(producer_epoch + 1) and current == 0)
        retry = retry_bump or retry_overflow
        if meta.producer_id != producer_id and not retry_overflow:
            return Code.INVALID_PRODUCER_ID_MAPPING, -1, -1
        if meta.has_pending():
            return Code.CONCURRENT_TRANSACTIONS, -1, -1
        state = meta.state
        if state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = producer_epoch == current
        elif state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            # The current epoch too: that producer got it from the end under way and may
            # end its next transaction before the markers are done (Kafka fences it; a
            # retriable answer is kinder, and only the current producer holds that epoch).
            valid = retry_bump or producer_epoch == current
        elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry or producer_epoch == current
        else:
            valid = False
        if not valid:
            return Code.PRODUCER_FENCED, -1, -1
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        in_progress = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state == TxnState.ONGOING or (not commit and not retry and state in (
                TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)):
            code = await self._prepare_end(meta, commit, client_transaction_version=2)
            if code:
                return code, -1, -1
            if meta.next_producer_id != NO_PRODUCER_ID:
                return 0, meta.next_producer_id, 0
            return 0, meta.producer_id, meta.producer_epoch
        if state == done and retry:
            return 0, meta.producer_id, meta.producer_epoch
        if state == in_progress or (state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                                    and producer_epoch == current):
            return Code.CONCURRENT_TRANSACTIONS, -1, -1
        if state == TxnState.EMPTY and retry:
            return Code.PRODUCER_FENCED, -1, -1
        return Code.INVALID_TXN_STATE, -1, -1

    async def _prepare_end(self, meta: TransactionMetadata, commit: bool,
                           client_transaction_version: int = 0) -> int:
        """Write PrepareCommit / PrepareAbort, then complete in the background. Version 2
        bumps the epoch (a new producer id when the bumped epoch would be exhausted)."""
        next_id = NO_PRODUCER_ID
        if client_transaction_version >= 2 and meta.producer_epoch < MAX_EPOCH \
                and is_epoch_exhausted(meta.producer_epoch + 1):
            next_id = await self.producer_ids.next_id()
        try:
            transit = meta.prepare_abort_or_commit(
                TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, self.wall_ms(),
                next_id, client_transaction_version)
        except (TxnStateError, ValueError) as e:
            return e.code if isinstance(e, TxnStateError) else Code.INVALID_TXN_STATE
        code = await self.state.write(meta, transit)
        if code == 0:
            self._complete_later(meta)
        return code

    async def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Bump the epoch of an ongoing transaction (its producer is fenced) and abort it."""
        try:
            transit = meta.prepare_fence_producer_epoch()
        except TxnStateError:
            return
        if await self.state.write(meta, transit) == 0:
            await self._prepare_end(meta, commit=False)

    def _complete_later(self, meta: TransactionMetadata) -> None:
        epoch = self.state.coordinator_epoch(meta.transactional_id)
        if epoch is None:
            return
        task = asyncio.ensure_future(self._complete(meta, epoch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, meta: TransactionMetadata, coordinator_epoch: int) -> None:
        """Markers to every partition, then CompleteCommit / CompleteAbort; retried until
        done or until this broker no longer coordinates the transaction."""
        tid = meta.transactional_id

        def still_coordinator() -> bool:
            return self.state.coordinator_epoch(tid) == coordinator_epoch and self.state.get(tid) is meta

        commit = meta.state == TxnState.PREPARE_COMMIT
        sent = await self.markers.send(meta.producer_id, meta.producer_epoch, commit, coordinator_epoch,
                                       set(meta.partitions), still_coordinator)
        while sent and still_coordinator():
            if meta.has_pending():
                await asyncio.sleep(COMPLETE_RETRY_S)
                continue
            try:
                transit = meta.prepare_complete(self.wall_ms())
            except TxnStateError as e:
                log.warning("%s: cannot complete %s: %s", tid, meta.state.kafka_name, e)
                return
            code = await self.state.write(meta, transit)
            if code == 0:
                log.debug("%s: %s", tid, meta.state.kafka_name)
                return
            if code == Code.NOT_COORDINATOR:
                return
            await asyncio.sleep(COMPLETE_RETRY_S)

    def _on_loaded(self, partition: int, coordinator_epoch: int,
                   transactions: list[TransactionMetadata]) -> None:
        """A newly loaded partition: finish what the previous coordinator decided."""
        for meta in transactions:
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete_later(meta)
            elif meta.state == TxnState.PREPARE_EPOCH_FENCE:
                task = asyncio.ensure_future(self._prepare_end(meta, commit=False))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    # ================================================================== timeouts
    async def abort_timed_out(self) -> int:
        """Fence and abort every ongoing transaction older than its timeout; how many."""
        now = self.wall_ms()
        late = [m for m in list(self.state.transactions.values())
                if m.state == TxnState.ONGOING and not m.has_pending()
                and 0 <= m.txn_start_ms and m.txn_start_ms + m.txn_timeout_ms < now]
        for meta in late:
            log.info("%s: aborting the transaction of producer %d epoch %d: open for more than %d ms",
                     meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms)
            await self._fence_and_abort(meta)
        return len(late)

    # ================================================================== expiry
    async def remove_expired(self) -> int:
        """Kafka's removeExpiredTransactionalIds: forget each id with no transaction open
        (Empty, CompleteCommit, CompleteAbort) and no update for transactional.id.expiration.ms,
        once its tombstone is written; how many. A producer using it later starts afresh."""
        now = self.wall_ms()
        idle = [m for m in list(self.state.transactions.values())
                if m.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                and not m.has_pending()
                and m.txn_last_update_ms + self.settings.id_expiration_ms <= now]
        removed = 0
        for meta in idle:
            if meta.has_pending() or self.state.get(meta.transactional_id) is not meta:
                continue                    # changed or gone while an earlier write waited
            try:
                transit = meta.prepare_dead()
            except TxnStateError:
                continue
            if await self.state.write(meta, transit) == 0:
                removed += 1
        if removed:
            log.info("removed %d expired transactional ids", removed)
        return removed

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.markers.close()
