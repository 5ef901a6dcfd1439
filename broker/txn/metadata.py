"""One transactional id's state on the transaction coordinator, and its state machine.

Follows Kafka's TransactionMetadata / TxnTransitMetadata / TransactionState:

    Empty/CompleteCommit/CompleteAbort --AddPartitions--> Ongoing --EndTxn--> PrepareCommit|PrepareAbort
    PrepareCommit --markers written--> CompleteCommit;  PrepareAbort --markers written--> CompleteAbort
    Ongoing --InitProducerId or timeout--> PrepareEpochFence --> PrepareAbort
    Empty/CompleteCommit/CompleteAbort --InitProducerId--> Empty;  --expiry--> Dead

Every change is two steps because the coordinator must write it to `__transaction_state`
before anyone may see it: a `prepare_*` method computes the next values as a `TxnTransit`
and marks it pending (so a second change cannot start meanwhile); once the write succeeded
the coordinator calls `complete_transition`, and if it failed, `abort_pending`.

Sans-io: no I/O, no clock (times come in as `now_ms`), no locks (the coordinator runs on one
event loop).

Epoch fencing (an Ongoing transaction that must be aborted from the coordinator, because a
new producer called InitProducerId or the transaction timed out): `prepare_fence_producer_epoch()`,
then `prepare_abort_or_commit(PREPARE_ABORT, ...)`. Kafka keeps the fence step in memory;
strom's coordinator writes it too (one more write, so a coordinator that takes over after a
crash between the two finds the fenced epoch and finishes the abort). Should the abort's
write fail, the metadata stays in PrepareEpochFence with the fenced epoch, and the
coordinator retries the abort from there (Kafka's hasFailedEpochFence: the epoch is never
bumped twice for one fence). A transaction
version 2 abort bumps the epoch itself, so for such clients the coordinator may skip the
fence step and abort from Ongoing directly.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clients.protocol.errors import Code

MAX_EPOCH = 32767          # Short.MAX_VALUE: producer epochs are int16
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

# A deferred check of the current state: the error code refusing a transition, or None.
_Refusal = Callable[[], "int | None"]


class TxnState(enum.IntEnum):
    """Kafka's TransactionState; the int is the id written in `__transaction_state` records."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka shows (DescribeTransactions, ListTransactions filters)."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_S = TxnState
_ENDED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})   # no transaction open
_IN_FLIGHT = frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT})

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: _ENDED,
    _S.ONGOING: _ENDED | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # From Empty/Complete*: KIP-890 part 2 clients may abort a transaction with no partitions.
    _S.PREPARE_ABORT: _ENDED | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _ENDED,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """An epoch of MAX_EPOCH - 1 or more is never handed to a client, so that the coordinator
    can always fence the producer with one more bump."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransit:
    """The values a transactional id will have once a transition is written: what the
    coordinator appends to `__transaction_state` (Kafka's TxnTransitMetadata)."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    txn_start_ms: int
    txn_last_update_ms: int
    client_transaction_version: int = 0


class TxnStateError(Exception):
    """A transition the current state (or a pending one) does not allow; `code` is the
    Kafka error code the coordinator answers with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TransactionMetadata:
    """The coordinator's view of one transactional id. Fields change only through
    `complete_transition`, after the transition was written to the log."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        txn_timeout_ms: int,
        state: TxnState = TxnState.EMPTY,
        now_ms: int = -1,
        *,
        prev_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        partitions: Iterable[tuple[str, int]] = (),
        txn_start_ms: int = -1,
        client_transaction_version: int = 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set[tuple[str, int]] = set(partitions)
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = now_ms
        self.client_transaction_version = client_transaction_version
        self.pending_state: TxnState | None = None

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TransactionMetadata:
        """Rebuild a transactional id from a record read back from `__transaction_state`."""
        return cls(
            transactional_id, t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.state,
            t.txn_last_update_ms,
            prev_producer_id=t.prev_producer_id,
            next_producer_id=t.next_producer_id,
            last_producer_epoch=t.last_producer_epoch,
            partitions=t.partitions,
            txn_start_ms=t.txn_start_ms,
            client_transaction_version=t.client_transaction_version,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, "
            f"prev_pid={self.prev_producer_id}, next_pid={self.next_producer_id}, "
            f"state={self.state.kafka_name}, pending={self.pending_state}, "
            f"partitions={sorted(self.partitions)}, timeout_ms={self.txn_timeout_ms}, "
            f"start_ms={self.txn_start_ms}, update_ms={self.txn_last_update_ms}, "
            f"tv={self.client_transaction_version})"
        )

    # -- queries -------------------------------------------------------------------------

    def has_pending(self) -> bool:
        """A transition is being written; no other may start until it completes or aborts."""
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        """InitProducerId must then rotate to a new producer id instead of bumping the epoch."""
        return is_epoch_exhausted(self.producer_epoch)

    # -- prepare_* -----------------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransit:
        """The current values, as a transition to the same state (where that state may follow
        itself: Empty, Ongoing); lets the coordinator rewrite the record unchanged."""
        self._check_can_prepare(self.state, self._invalid_unless(VALID_PREVIOUS[self.state]))
        return self._transit(self.state, prev_producer_id=self.prev_producer_id)

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch of an Ongoing transaction so its producer is fenced before the
        coordinator aborts it. At MAX_EPOCH the epoch stays (the abort must still go through)."""
        self._check_can_prepare(_S.PREPARE_EPOCH_FENCE, self._invalid_unless({_S.ONGOING}))
        epoch = self.producer_epoch if self.producer_epoch >= MAX_EPOCH else self.producer_epoch + 1
        return self._transit(_S.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                             last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected: tuple[int, int] | None, now_ms: int,
    ) -> TxnTransit:
        """InitProducerId on an id with no open transaction: a new epoch for the same producer id.

        `expected` is the (producer id, epoch) the client already holds (KIP-360), or None.
        None, or the current pair (or no epoch yet): bump. The pair before the last bump: a
        retry of that bump, whose answer got lost, so keep the epoch; also after a rotation
        (the previous producer id with its exhausted epoch). Anything else: PRODUCER_FENCED.

        The caller checks `is_producer_epoch_exhausted()` first and rotates instead
        (`prepare_producer_id_rotation`); a bump past the limit raises ValueError.
        """
        self._check_can_prepare(_S.EMPTY, self._ended_else_busy)
        if expected is None:
            epoch, last_epoch = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected == (self.producer_id, self.producer_epoch):
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        elif self._is_retry_of_last_bump(*expected):
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise TxnStateError(
                Code.PRODUCER_FENCED,
                f"{self.transactional_id}: producer {expected} is neither the current "
                f"({self.producer_id}, {self.producer_epoch}) nor the previous epoch {self.last_producer_epoch}",
            )
        if epoch != self.producer_epoch and self.is_producer_epoch_exhausted():
            raise ValueError(f"{self.transactional_id}: epoch {self.producer_epoch} is exhausted; rotate the producer id")
        return self._transit(
            _S.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
            txn_timeout_ms=new_txn_timeout_ms, partitions=frozenset(), txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int, record_last_epoch: bool,
    ) -> TxnTransit:
        """InitProducerId when the epoch is exhausted: a fresh producer id at epoch 0.
        `record_last_epoch` keeps the old epoch so that a retry from the old producer id is
        recognised (see `prepare_increment_producer_epoch`)."""
        if new_producer_id < 0:
            raise ValueError(f"illegal producer id {new_producer_id}")
        self._check_can_prepare(_S.EMPTY, self._ended_else_busy)
        return self._transit(
            _S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=new_txn_timeout_ms, partitions=frozenset(), txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_add_partitions(
        self, partitions: set[tuple[str, int]], now_ms: int, client_transaction_version: int = 0,
    ) -> TxnTransit:
        """AddPartitionsToTxn / AddOffsetsToTxn: start the transaction, or add to it.
        While it is being committed or aborted the client must retry (CONCURRENT_TRANSACTIONS)."""
        self._check_can_prepare(_S.ONGOING, self._add_partitions_refusal)
        start_ms = now_ms if self.state in _ENDED else self.txn_start_ms
        return self._transit(
            _S.ONGOING, partitions=frozenset(self.partitions | set(partitions)),
            txn_start_ms=start_ms, txn_last_update_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_abort_or_commit(
        self, new_state: TxnState, now_ms: int, next_producer_id: int = NO_PRODUCER_ID,
        client_transaction_version: int = 0,
    ) -> TxnTransit:
        """EndTxn (or a coordinator abort): PrepareCommit from Ongoing, PrepareAbort from Ongoing
        or PrepareEpochFence, or (transaction version 2) PrepareAbort with nothing added.

        Transaction version >= 2 (KIP-890 part 2) bumps the epoch here, so that the markers
        carry a new epoch and late writes of the old one are fenced. If the bumped epoch is
        exhausted, the caller passes a freshly allocated `next_producer_id`, which the client
        is moved to at `prepare_complete`; below version 2 it must stay -1 (ValueError).
        """
        if new_state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise ValueError(f"prepare_abort_or_commit to {new_state.kafka_name}")
        v2 = client_transaction_version >= 2
        self._check_can_prepare(new_state, lambda: self._end_txn_refusal(new_state, v2))
        if v2:
            if self.producer_epoch >= MAX_EPOCH:
                if new_state == _S.PREPARE_COMMIT:
                    raise ValueError(f"{self.transactional_id}: cannot commit at epoch {MAX_EPOCH}")
                epoch = self.producer_epoch   # already broken: let the abort through, no overflow
            else:
                epoch = self.producer_epoch + 1
            last_epoch = self.producer_epoch
            if is_epoch_exhausted(epoch) and next_producer_id < 0:
                raise ValueError(f"{self.transactional_id}: epoch {epoch} is exhausted; pass next_producer_id")
        else:
            if next_producer_id >= 0:
                raise ValueError("next_producer_id needs client transaction version 2")
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        # A version-2 abort with no partitions added has no start time: it starts now.
        start_ms = now_ms if self.state in _ENDED else self.txn_start_ms
        return self._transit(
            new_state, producer_epoch=epoch, last_producer_epoch=last_epoch,
            next_producer_id=next_producer_id, txn_start_ms=start_ms, txn_last_update_ms=now_ms,
            client_transaction_version=client_transaction_version,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """All markers are written: the transaction is over. Moves to `next_producer_id` (epoch 0)
        if the commit/abort exhausted the epoch; `last_producer_epoch` keeps the epoch the
        client last saw."""
        target = _S.COMPLETE_ABORT if self.state == _S.PREPARE_ABORT else _S.COMPLETE_COMMIT
        self._check_can_prepare(target, self._invalid_unless({_S.PREPARE_COMMIT, _S.PREPARE_ABORT}))
        if self.next_producer_id >= 0:
            pid, epoch = self.next_producer_id, 0
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._transit(
            target, producer_id=pid, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
            partitions=frozenset(), txn_last_update_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        """Expiry of an idle transactional id; completing it means dropping it from the cache."""
        self._check_can_prepare(_S.DEAD, self._invalid_unless(_ENDED))
        return self._transit(_S.DEAD, partitions=frozenset())

    # -- completing ----------------------------------------------------------------------

    def complete_transition(self, t: TxnTransit) -> None:
        """Apply a prepared transition once its record is written. Refuses (changing nothing)
        one that was not the pending one or that the current state may not be followed by."""
        if self.pending_state is None or self.pending_state != t.state:
            raise TxnStateError(
                Code.INVALID_TXN_STATE,
                f"{self.transactional_id}: completing {t.state.kafka_name} but pending is "
                f"{self.pending_state.kafka_name if self.pending_state is not None else None}",
            )
        if self.state not in VALID_PREVIOUS[t.state]:
            raise TxnStateError(
                Code.INVALID_TXN_STATE,
                f"{self.transactional_id}: {t.state.kafka_name} cannot follow {self.state.kafka_name}",
            )
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.txn_start_ms = t.txn_start_ms
        self.txn_last_update_ms = t.txn_last_update_ms
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None

    def abort_pending(self) -> None:
        """The write failed: forget the prepared transition, the metadata is as before."""
        self.pending_state = None

    # -- internals -----------------------------------------------------------------------

    def _is_retry_of_last_bump(self, producer_id: int, epoch: int) -> bool:
        if self.last_producer_epoch < 0 or epoch != self.last_producer_epoch:
            return False
        # After a rotation the retry carries the previous id with its exhausted epoch.
        return producer_id == self.producer_id or (
            producer_id == self.prev_producer_id and is_epoch_exhausted(epoch))

    def _check_can_prepare(self, target: TxnState, refusal_code: _Refusal) -> None:
        if self.pending_state is not None:
            raise TxnStateError(
                Code.CONCURRENT_TRANSACTIONS,
                f"{self.transactional_id}: {self.pending_state.kafka_name} is pending",
            )
        code = refusal_code()
        if code is None and self.state not in VALID_PREVIOUS[target]:
            code = Code.INVALID_TXN_STATE
        if code is not None:
            raise TxnStateError(
                code, f"{self.transactional_id}: cannot go from {self.state.kafka_name} to {target.kafka_name}",
            )

    def _invalid_unless(self, allowed: Iterable[TxnState]) -> _Refusal:
        allowed = frozenset(allowed)
        return lambda: None if self.state in allowed else Code.INVALID_TXN_STATE

    def _ended_else_busy(self) -> int | None:
        """InitProducerId: an open transaction must be fenced or finish first (retriable)."""
        if self.state in _ENDED:
            return None
        return Code.CONCURRENT_TRANSACTIONS if self.state in _IN_FLIGHT else Code.INVALID_TXN_STATE

    def _add_partitions_refusal(self) -> int | None:
        if self.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return Code.CONCURRENT_TRANSACTIONS
        return None if self.state in _ENDED or self.state == _S.ONGOING else Code.INVALID_TXN_STATE

    def _end_txn_refusal(self, target: TxnState, v2: bool) -> int | None:
        """Kafka's EndTxn answers: the same end already under way -> retry later; the other
        end, or nothing to end -> INVALID_TXN_STATE."""
        s = self.state
        if s == target:
            return Code.CONCURRENT_TRANSACTIONS
        if s == _S.ONGOING:
            return None
        if target == _S.PREPARE_ABORT and (s == _S.PREPARE_EPOCH_FENCE or (v2 and s in _ENDED)):
            return None
        return Code.INVALID_TXN_STATE

    def _transit(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        prev_producer_id: int | None = None,
        next_producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[tuple[str, int]] | None = None,
        txn_start_ms: int | None = None,
        txn_last_update_ms: int | None = None,
        client_transaction_version: int | None = None,
    ) -> TxnTransit:
        """The current values with the given ones replaced, marked pending. As in Kafka, the
        previous producer id of a transition is the producer id it moves away from."""
        t = TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            prev_producer_id=self.producer_id if prev_producer_id is None else prev_producer_id,
            next_producer_id=self.next_producer_id if next_producer_id is None else next_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_ms=self.txn_start_ms if txn_start_ms is None else txn_start_ms,
            txn_last_update_ms=self.txn_last_update_ms if txn_last_update_ms is None else txn_last_update_ms,
            client_transaction_version=(
                self.client_transaction_version if client_transaction_version is None
                else client_transaction_version),
        )
        if t.producer_id < 0:
            raise ValueError(f"illegal producer id {t.producer_id}")
        if state != _S.DEAD and t.producer_epoch < 0:
            raise ValueError(f"illegal producer epoch {t.producer_epoch}")
        self.pending_state = state
        return t

