"""Transactions of strom's producer (KIP-98): the transaction manager of a producer with
`transactional.id`.

    await producer.init_transactions()          # FindCoordinator(key_type 1), InitProducerId
    await producer.begin_transaction()
    await producer.send("out", b"v", partition=0)   # first batch of a partition: AddPartitionsToTxn
    await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42},
                                               consumer.group_metadata())
    await producer.commit_transaction()         # flush, then EndTxn(commit)

`TxnState` is the sans-io part (Kafka's TransactionManager.State and its bookkeeping):

    UNINITIALIZED -init_transactions-> INITIALIZING -> READY -begin-> IN_TRANSACTION
    IN_TRANSACTION -commit-> COMMITTING -> READY        IN_TRANSACTION -abort-> ABORTING -> READY
    IN_TRANSACTION -prepare-> PREPARED -commit/abort-> ...   (PREPARED is left open on close)
    IN_TRANSACTION / COMMITTING -a batch or a transactional request failed-> ABORTABLE_ERROR
    ABORTABLE_ERROR -abort-> ABORTING -> READY
    anything -fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...)-> FATAL_ERROR (for good)

A partition is *added* once AddPartitionsToTxn for it succeeded; the accumulator drains a
partition's batches only then (the broker checks it, KIP-890 part 1). The partitions that
become new while an AddPartitionsToTxn is in flight go in the next one.

Transaction version 2 (KIP-890 part 2), when the coordinator's broker has finalized the
feature `transaction.version` at 2 and speaks EndTxn v5: no AddPartitionsToTxn and no
AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 make the leaders add the partitions);
every EndTxn (v5) bumps the epoch and answers the producer id and epoch to go on with, so a
late request of an ended transaction is fenced. Otherwise version 0: EndTxn v4, Produce
v11, TxnOffsetCommit v4 at most.

`TransactionManager` does the I/O: every request goes to the transactional id's
coordinator (TxnOffsetCommit to the group's) and is retried on COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (after finding the coordinator again),
CONCURRENT_TRANSACTIONS and lost connections, until the call's timeout. The producer gives
it `flush(timeout)` (deliver everything) and `drop_queued(error)` (fail the batches not yet
sent). One event loop; not thread-safe.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable, Mapping

from clients.protocol.errors import BY_NAME, Code, KafkaError, for_code
from clients.protocol.schema import Struct
from clients.types import OffsetAndMetadata, PreparedTransaction, TopicPartition

from .accumulator import RecordAccumulator
from .client import KafkaClient
from .errors import KafkaClientError, KafkaConnectionError, KafkaTimeoutError

__all__ = ["ProducerTransactions", "TransactionManager", "TxnState", "TransactionStateError",
           "TransactionAbortedError", "ProducerFencedError", "TransactionAbortableError"]

log = logging.getLogger("strom.client.transactions")

ProducerFencedError = BY_NAME["PRODUCER_FENCED"]
TransactionAbortableError = BY_NAME["TRANSACTION_ABORTABLE"]

UNINITIALIZED = "UNINITIALIZED"
INITIALIZING = "INITIALIZING"
READY = "READY"
IN_TRANSACTION = "IN_TRANSACTION"
PREPARED = "PREPARED"           # delivered, left open for a commit or abort (two-phase commit)
COMMITTING = "COMMITTING"
ABORTING = "ABORTING"
ABORTABLE_ERROR = "ABORTABLE_ERROR"
FATAL_ERROR = "FATAL_ERROR"

# The coordinator moved: find it again, then retry.
_MOVED = frozenset({Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE})
# Retry the same request after a backoff.
_RETRY = frozenset({Code.COORDINATOR_LOAD_IN_PROGRESS, Code.CONCURRENT_TRANSACTIONS,
                    Code.UNKNOWN_TOPIC_OR_PARTITION, Code.OPERATION_NOT_ATTEMPTED,
                    Code.REQUEST_TIMED_OUT, Code.NETWORK_EXCEPTION})
# This producer instance is done: a newer one has the transactional id.
_FENCED = frozenset({Code.PRODUCER_FENCED, Code.INVALID_PRODUCER_EPOCH})
# Fatal as in Kafka's client: every later call raises.
_FATAL = _FENCED | {Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Code.CLUSTER_AUTHORIZATION_FAILED,
                    Code.INVALID_TXN_STATE, Code.INVALID_PRODUCER_ID_MAPPING,
                    Code.UNSUPPORTED_VERSION, Code.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                    Code.TRANSACTIONAL_ID_NOT_FOUND}


class TransactionStateError(KafkaClientError, RuntimeError):
    """A transactional call that does not fit the producer's state (Kafka's
    IllegalStateException): begin_transaction() twice, send() outside a transaction,
    commit_transaction() before begin_transaction(), any of them before init_transactions()."""


class TransactionAbortedError(KafkaClientError):
    """The record's batch was dropped because its transaction was aborted."""


def is_fatal(error: BaseException) -> bool:
    """Does `error` (of a batch or a transactional request) end the producer?"""
    return getattr(error, "code", None) in _FATAL


def fenced(error: BaseException) -> BaseException:
    """PRODUCER_FENCED / INVALID_PRODUCER_EPOCH as ProducerFencedError; others as they are."""
    if getattr(error, "code", None) in _FENCED and not isinstance(error, ProducerFencedError):
        return ProducerFencedError(f"{error}: a newer producer with the same transactional.id "
                                   "fenced this one")
    return error


def _again(error: BaseException) -> BaseException:
    """A fresh exception like `error` (raising one instance repeatedly grows its traceback)."""
    try:
        new = type(error)(str(error))
    except Exception:
        return error
    new.__cause__ = error.__cause__
    return new


class TxnState:
    """Sans-io state of one transactional producer; see the module docstring."""

    def __init__(self, transactional_id: str):
        self.transactional_id = transactional_id
        self.state = UNINITIALIZED
        self.error: BaseException | None = None
        self.added: set[TopicPartition] = set()      # in the coordinator's transaction
        self.pending: set[TopicPartition] = set()    # new, not yet asked for
        self.adding: set[TopicPartition] = set()     # in the AddPartitionsToTxn in flight
        self.started = False        # the coordinator has the transaction (an add succeeded)
        self.uncertain = False      # an add's outcome is unknown (no answer)

    # ------------------------------------------------------------------ queries

    @property
    def failing(self) -> bool:
        """Batches are failed rather than retried or sent (aborting, or an error state)."""
        return self.state in (ABORTING, ABORTABLE_ERROR, FATAL_ERROR)

    def sendable(self, tp: TopicPartition) -> bool:
        """May batches of `tp` be drained? Only once it was added to the transaction."""
        return tp in self.added

    def raise_if_error(self, what: str) -> None:
        if self.state == FATAL_ERROR:
            assert self.error is not None
            raise _again(self.error)
        if self.state == ABORTABLE_ERROR:
            raise TransactionAbortableError(
                f"cannot {what}: an earlier transactional or produce request failed "
                f"({self.error!r}); call abort_transaction()") from self.error

    def check_send(self) -> None:
        """send() is allowed only inside a transaction with no error."""
        self.raise_if_error("send")
        if self.state != IN_TRANSACTION:
            raise TransactionStateError(
                f"cannot send in state {self.state}: call "
                + ("init_transactions()" if self.state in (UNINITIALIZED, INITIALIZING)
                   else "begin_transaction()") + " first")

    # ------------------------------------------------------------------ transitions

    def require(self, what: str, *states: str) -> None:
        self.raise_if_error(what)
        if self.state not in states:
            raise TransactionStateError(f"cannot {what} in state {self.state}")

    def begin_init(self) -> None:
        if self.state == FATAL_ERROR:
            self.raise_if_error("init_transactions")
        if self.state not in (UNINITIALIZED, INITIALIZING):
            raise TransactionStateError("init_transactions() was already called")
        self.state = INITIALIZING

    def begin(self) -> None:
        self.require("begin a transaction", READY)
        self.state = IN_TRANSACTION

    def add_partition(self, tp: TopicPartition) -> bool:
        """A record for `tp` was appended: True if `tp` is new to the transaction."""
        if tp in self.added or tp in self.pending or tp in self.adding:
            return False
        self.pending.add(tp)
        return True

    def take_pending(self) -> set[TopicPartition]:
        """The partitions for the next AddPartitionsToTxn (now in flight)."""
        self.adding |= self.pending
        self.pending = set()
        return set(self.adding)

    def partitions_added(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        self.added |= tps
        self.adding -= tps
        self.started = True

    def add_failed(self) -> None:
        """The AddPartitionsToTxn in flight is given up: its partitions wait again."""
        self.pending |= self.adding
        self.adding = set()

    def begin_commit(self) -> None:
        self.require("commit the transaction", IN_TRANSACTION, COMMITTING, PREPARED)
        self.state = COMMITTING

    def begin_abort(self) -> None:
        if self.state == FATAL_ERROR:
            self.raise_if_error("abort the transaction")
        if self.state not in (IN_TRANSACTION, ABORTABLE_ERROR, ABORTING, PREPARED):
            raise TransactionStateError(f"cannot abort the transaction in state {self.state}")
        self.state = ABORTING

    def offsets_added(self) -> None:
        self.started = True

    def completed(self) -> None:
        """EndTxn succeeded (or was not needed): ready for the next transaction."""
        self.state = READY
        self.error = None
        self.added.clear()
        self.pending.clear()
        self.adding.clear()
        self.started = self.uncertain = False

    def abortable(self, error: BaseException) -> None:
        """Something of the transaction failed: it can only be aborted now."""
        if self.state in (IN_TRANSACTION, COMMITTING):
            self.state = ABORTABLE_ERROR
            self.error = error

    def fatal(self, error: BaseException) -> None:
        if self.state != FATAL_ERROR:
            self.state = FATAL_ERROR
            self.error = fenced(error)

    def failed(self, error: BaseException) -> None:
        """A batch or request failed with `error`: fatal or abortable, by its code."""
        if is_fatal(error):
            self.fatal(error)
        else:
            self.abortable(error)

    def dropped_batch_error(self) -> BaseException | None:
        """The error to fail batches not yet sent with, when they must not be sent."""
        if self.state == ABORTING:
            return TransactionAbortedError("the transaction was aborted; the batch was not sent")
        if self.state == FATAL_ERROR:
            assert self.error is not None
            return _again(self.error)
        if self.state == ABORTABLE_ERROR:
            err = TransactionAbortableError(
                f"not sent: the transaction failed earlier ({self.error!r}) and must be aborted")
            err.__cause__ = self.error
            return err
        return None


def _add_partitions_code(resp: Struct) -> int:
    """The error of a v0-3 AddPartitionsToTxn answer: 0, else the worst partition error."""
    codes = {p.partition_error_code for t in resp.results_by_topic_v3_and_below
             for p in t.results_by_partition} - {0}
    for c in codes:                                  # a final error wins over a retriable one
        if c not in _RETRY and c not in _MOVED:
            return c
    return min(codes) if codes else 0


def _offset_commit_code(resp: Struct) -> int:
    codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
    for c in codes:
        if c not in _RETRY and c not in _MOVED:
            return c
    return min(codes) if codes else 0


def group_fields(group_metadata: Any) -> tuple[str, int, str, str | None]:
    """(group id, generation, member id, group instance id) of a consumer's
    `group_metadata()` (or of a bare group id string, Kafka's older form)."""
    if isinstance(group_metadata, str):
        return group_metadata, -1, "", None
    gid = getattr(group_metadata, "group_id", None)
    if not gid:
        raise ValueError(f"{group_metadata!r} has no group_id: pass consumer.group_metadata()")
    return (gid, int(getattr(group_metadata, "generation_id", -1)),
            getattr(group_metadata, "member_id", "") or "",
            getattr(group_metadata, "group_instance_id", None))


def offsets_by_topic(offsets: Mapping[Any, Any] | Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """TxnOffsetCommit's topics from {(topic, partition): offset | OffsetAndMetadata} or
    from objects with topic, partition and offset (confluent-kafka's TopicPartition)."""
    items: list[tuple[str, int, OffsetAndMetadata]] = []
    if isinstance(offsets, Mapping):
        for tp, om in offsets.items():
            topic, partition = TopicPartition(*tp)
            items.append((topic, partition, om if isinstance(om, OffsetAndMetadata)
                          else OffsetAndMetadata(int(om))))
    else:
        for o in offsets:
            epoch = getattr(o, "leader_epoch", None)
            items.append((o.topic, o.partition, OffsetAndMetadata(
                int(o.offset), getattr(o, "metadata", None) or "",
                -1 if epoch is None else int(epoch))))
    out: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, om in sorted(items):
        if om.offset < 0:
            raise ValueError(f"invalid offset {om.offset} for {topic}-{partition}")
        out.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": om.offset,
            "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
    return out


async def coordinated(client: KafkaClient, key: str, key_type: int, api: str,
                      body: dict[str, Any], deadline: float,
                      code_of: Callable[[Struct], int] = lambda r: r.error_code,
                      max_version: int | None = None,
                      keep_going: Callable[[], bool] = lambda: True) -> Struct:
    """`api` to the coordinator of `key` (key_type 0: group, 1: transactional id), retried
    (see the module docstring) until `deadline` (the loop's clock): the answer without
    error, or raises the error's class (KafkaTimeoutError when out of time).
    `keep_going()` False stops retrying (TransactionAbortedError)."""
    loop = asyncio.get_running_loop()
    backoff = client.retry_backoff
    last: object = None
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise KafkaTimeoutError(f"{api} for {key!r}: no success within the timeout "
                                    f"(last: {last})")
        if not keep_going():
            raise TransactionAbortedError(f"{api} for {key!r} given up")
        try:
            node = await client.coordinator(key, key_type, timeout=remaining)
            conn = await client.connection(node)
            version = conn.version_for(api)
            if max_version is not None:
                version = min(version, max_version)
            resp = await conn.request(api, body, version=version,
                                      timeout=max(0.05, min(remaining, client.request_timeout)))
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            client.forget_coordinator(key, key_type)
            last = e
        except KafkaError as e:                 # FindCoordinator's (retriable ones timed out)
            if not e.retriable:
                raise
            client.forget_coordinator(key, key_type)
            last = e
        else:
            code = code_of(resp)
            if code == 0:
                return resp
            last = for_code(code).name
            if code in _MOVED:
                client.forget_coordinator(key, key_type)
            elif code not in _RETRY:
                raise for_code(code)(f"{api} for {key!r}")
        log.debug("%s for %r: %s; retrying", api, key, last)
        await asyncio.sleep(min(backoff, max(0.0, deadline - loop.time())))
        backoff = min(backoff * 2, client.retry_backoff_max)


class TransactionManager:
    """The transactional requests of one producer; see the module docstring."""

    def __init__(self, client: KafkaClient, acc: RecordAccumulator, transactional_id: str,
                 transaction_timeout_ms: int, *, max_block: float, delivery_timeout: float,
                 start: Callable[[], Awaitable[None]], wake: Callable[[], None],
                 flush: Callable[[float | None], Awaitable[None]],
                 drop_queued: Callable[[BaseException], None]):
        self.client = client
        self.acc = acc
        self.tid = transactional_id
        self.txn_timeout_ms = transaction_timeout_ms
        self.max_block = max_block
        self.delivery_timeout = delivery_timeout
        self.state = TxnState(transactional_id)
        self.need_bump = False      # a batch with sequence numbers failed: new epoch after abort
        self.tv2 = False            # transaction version 2 (module docstring), set by init()
        self._start = start
        self._wake = wake
        self._flush = flush
        self._drop_queued = drop_queued
        self._adder: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ requests

    async def _coordinated(self, key: str, key_type: int, api: str, body: dict[str, Any],
                           deadline: float,
                           code_of: Callable[[Struct], int] = lambda r: r.error_code,
                           max_version: int | None = None,
                           keep_going: Callable[[], bool] = lambda: True) -> Struct:
        return await coordinated(self.client, key, key_type, api, body, deadline, code_of,
                                 max_version, keep_going)

    def _deadline(self, timeout: float | None) -> float:
        return asyncio.get_running_loop().time() + (self.max_block if timeout is None else timeout)

    def _check(self, error: BaseException) -> BaseException:
        """A transactional request failed with `error`: update the state; the error to raise."""
        if isinstance(error, (KafkaTimeoutError, TransactionAbortedError)):
            return error
        self.state.failed(error)
        return fenced(error)

    # ------------------------------------------------------------------ init

    async def init(self, timeout: float | None) -> None:
        st = self.state
        st.begin_init()
        await self._start()
        body = {"transactional_id": self.tid, "transaction_timeout_ms": self.txn_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        try:
            resp = await self._coordinated(self.tid, 1, "InitProducerId", body,
                                           self._deadline(timeout))
        except KafkaTimeoutError:
            raise                     # still INITIALIZING: init_transactions() may be called again
        except Exception as e:
            st.fatal(e)
            raise fenced(e) from None
        self.acc.reset_producer(resp.producer_id, resp.producer_epoch)
        self.tv2 = await self._coordinator_speaks_tv2()
        st.state = READY
        log.info("transactional.id %r: producer id %d, epoch %d, transaction version %d",
                 self.tid, resp.producer_id, resp.producer_epoch, 2 if self.tv2 else 0)

    async def _coordinator_speaks_tv2(self) -> bool:
        """Has the coordinator's broker finalized transaction.version 2, with EndTxn v5?"""
        try:
            node = await self.client.coordinator(self.tid, 1, timeout=self.max_block)
            conn = await self.client.connection(node)
            return (conn.finalized_features.get("transaction.version", 0) >= 2
                    and conn.version_for("EndTxn") >= 5)
        except Exception as e:                      # no answer: the older protocol is safe
            log.info("transactional.id %r: transaction version unknown (%r): using 0",
                     self.tid, e)
            return False

    async def _bump_epoch(self, deadline: float) -> None:
        """KIP-360: after an abort with a failed sequenced batch, a new epoch (sequences
        restart at 0) keeps the producer usable."""
        body = {"transactional_id": self.tid, "transaction_timeout_ms": self.txn_timeout_ms,
                "producer_id": self.acc.producer_id, "producer_epoch": self.acc.producer_epoch}
        resp = await self._coordinated(self.tid, 1, "InitProducerId", body, deadline)
        self.acc.reset_producer(resp.producer_id, resp.producer_epoch)
        self.need_bump = False
        log.info("transactional.id %r: epoch bumped to %d", self.tid, resp.producer_epoch)

    # ------------------------------------------------------------------ partitions

    def begin(self) -> None:
        self.state.begin()

    def add_partition(self, tp: TopicPartition) -> None:
        if self.tv2:
            st = self.state
            if st.add_partition(tp):                # the leader adds it (Produce v12) ...
                started = st.started
                st.partitions_added(st.take_pending())
                st.started = started                # ... once a batch is sent (sent_batch)
                self._wake()
            return
        if self.state.add_partition(tp) and (self._adder is None or self._adder.done()):
            self._adder = asyncio.get_running_loop().create_task(
                self._add_loop(), name="strom-producer-add-partitions")

    def sent_batch(self) -> None:
        """A batch of the transaction went to its leader: with version 2 the transaction may
        have started there, so its end needs an EndTxn."""
        self.state.started = True

    async def _add_loop(self) -> None:
        st = self.state
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.delivery_timeout

        def keep_going() -> bool:
            return st.state in (IN_TRANSACTION, COMMITTING)
        while st.pending and keep_going():
            tps = st.take_pending()
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(tps):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            body = {"v3_and_below_transactional_id": self.tid,
                    "v3_and_below_producer_id": self.acc.producer_id,
                    "v3_and_below_producer_epoch": self.acc.producer_epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": ps}
                                            for t, ps in by_topic.items()]}
            try:
                await self._coordinated(self.tid, 1, "AddPartitionsToTxn", body, deadline,
                                        _add_partitions_code, max_version=3,
                                        keep_going=keep_going)
            except TransactionAbortedError:
                st.uncertain = True
                st.add_failed()
                break
            except Exception as e:
                st.uncertain = True
                st.add_failed()
                if not isinstance(e, KafkaError):
                    e = TransactionAbortableError(f"AddPartitionsToTxn: {e!r}")
                st.failed(e)
                log.warning("transactional.id %r: AddPartitionsToTxn failed: %r", self.tid, e)
                break
            else:
                st.partitions_added(tps)
                log.debug("transactional.id %r: added %s", self.tid, sorted(tps))
            finally:
                self._wake()

    async def _adds_done(self, deadline: float) -> None:
        task = self._adder
        if task is not None and not task.done():
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(asyncio.shield(task), max(0.0, remaining))
            except TimeoutError:
                raise KafkaTimeoutError("AddPartitionsToTxn still in flight") from None

    # ------------------------------------------------------------------ offsets

    async def send_offsets(self, offsets: Mapping[Any, Any] | Iterable[Any], group_metadata: Any,
                           timeout: float | None) -> None:
        st = self.state
        st.require("send offsets to the transaction", IN_TRANSACTION)
        topics = offsets_by_topic(offsets)
        group_id, generation, member_id, instance_id = group_fields(group_metadata)
        deadline = self._deadline(timeout)
        pid, epoch = self.acc.producer_id, self.acc.producer_epoch
        try:
            if not self.tv2:           # version 2: TxnOffsetCommit v5 adds the offsets partition
                await self._coordinated(self.tid, 1, "AddOffsetsToTxn", {
                    "transactional_id": self.tid, "producer_id": pid, "producer_epoch": epoch,
                    "group_id": group_id}, deadline)
                st.offsets_added()
            if not topics:
                return
            await self._coordinated(group_id, 0, "TxnOffsetCommit", {
                "transactional_id": self.tid, "group_id": group_id, "producer_id": pid,
                "producer_epoch": epoch, "generation_id": generation, "member_id": member_id,
                "group_instance_id": instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                deadline, _offset_commit_code, max_version=None if self.tv2 else 4)
            st.offsets_added()
        except Exception as e:
            raise self._check(e) from None
        finally:
            self._wake()

    # ------------------------------------------------------------------ commit / abort

    async def _end(self, commit: bool, deadline: float) -> None:
        st = self.state
        if not st.started and not st.uncertain:
            return                    # the coordinator never heard of this transaction
        try:
            resp = await self._coordinated(self.tid, 1, "EndTxn", {
                "transactional_id": self.tid, "producer_id": self.acc.producer_id,
                "producer_epoch": self.acc.producer_epoch, "committed": commit}, deadline,
                max_version=None if self.tv2 else 4)
        except KafkaError as e:
            if (not commit and not st.started and st.uncertain
                    and e.code == Code.INVALID_TXN_STATE):
                return                # the add that may have started it had not, after all
            raise
        if self.tv2:
            # The epoch was bumped: the next transaction goes on with the answer's.
            self.acc.reset_producer(resp.producer_id, resp.producer_epoch)
            self.need_bump = False

    async def commit(self, timeout: float | None) -> None:
        st = self.state
        st.begin_commit()
        deadline = self._deadline(timeout)
        await self._adds_done(deadline)
        remaining = deadline - asyncio.get_running_loop().time()
        await self._flush(max(0.0, remaining))    # KafkaTimeoutError: stays COMMITTING
        st.raise_if_error("commit the transaction")
        try:
            await self._end(True, deadline)
        except KafkaTimeoutError:
            raise
        except Exception as e:
            raise self._check(e) from None
        st.completed()

    async def prepare(self, timeout: float | None) -> PreparedTransaction:
        """Deliver the transaction's records and leave it open (first phase of a two-phase
        commit): what another process needs to end it."""
        st = self.state
        st.require("prepare the transaction", IN_TRANSACTION)
        deadline = self._deadline(timeout)
        await self._adds_done(deadline)
        remaining = deadline - asyncio.get_running_loop().time()
        await self._flush(max(0.0, remaining))
        st.raise_if_error("prepare the transaction")
        if st.pending or st.adding:
            raise KafkaTimeoutError("prepare_transaction: partitions still being added")
        st.state = PREPARED
        if not st.started and not st.uncertain:
            return PreparedTransaction(self.tid, -1, -1)   # the coordinator has no transaction
        return PreparedTransaction(self.tid, self.acc.producer_id, self.acc.producer_epoch)

    async def abort(self, timeout: float | None) -> None:
        st = self.state
        st.begin_abort()
        deadline = self._deadline(timeout)
        err = st.dropped_batch_error()
        assert err is not None
        self._drop_queued(err)
        self._wake()
        await self._adds_done(deadline)
        self._drop_queued(err)
        remaining = deadline - asyncio.get_running_loop().time()
        await self._flush(max(0.0, remaining))    # only the batches in flight are left
        try:
            await self._end(False, deadline)
            if self.need_bump:
                await self._bump_epoch(deadline)
        except KafkaTimeoutError:
            raise                     # stays ABORTING: abort_transaction() may be called again
        except Exception as e:
            st.fatal(e)
            raise fenced(e) from None
        st.completed()

    async def abort_open(self, timeout: float | None) -> None:
        """On close: abort a transaction left open (as Kafka's close() does)."""
        if self.state.state in (IN_TRANSACTION, ABORTABLE_ERROR, ABORTING):
            try:
                await self.abort(timeout)
            except Exception as e:
                log.warning("aborting the open transaction on close failed: %r", e)

    async def close(self) -> None:
        if self._adder is not None and not self._adder.done():
            self._adder.cancel()
            await asyncio.wait([self._adder])


class ProducerTransactions:
    """The transactional methods of AsyncProducer (Kafka's Java client's, snake_case)."""

    _txn: TransactionManager | None
    _closed: bool

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionStateError("transactions need transactional.id")
        if self._closed:
            raise TransactionStateError("the producer is closed")
        return self._txn

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and epoch from its coordinator (fencing
        every earlier producer with the id; an open transaction of theirs is aborted).
        Once, before any transaction; `timeout` seconds (default max.block.ms), then
        KafkaTimeoutError (call it again to go on)."""
        await self._transactions().init(timeout)

    async def begin_transaction(self) -> None:
        """Start a transaction (local: the coordinator hears of it with the first partition
        or offsets added). TransactionStateError unless initialised and none is open."""
        self._transactions().begin()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any] | Iterable[Any],
                                          group_metadata: Any,
                                          timeout: float | None = None) -> None:
        """Commit a consumer's `offsets` ({TopicPartition: offset or OffsetAndMetadata}, or
        objects with topic/partition/offset; the offsets of the next records to read) with
        the transaction: AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator.
        `group_metadata`: the consumer's `group_metadata()` (or a group id string: no
        generation fencing then)."""
        await self._transactions().send_offsets(offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). Raises
        TransactionAbortableError if anything of it failed (call abort_transaction()),
        ProducerFencedError when fenced, KafkaTimeoutError after `timeout` seconds
        (default max.block.ms; call it again to go on)."""
        await self._transactions().commit(timeout)

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Deliver every record of the transaction and leave it open, as KIP-939's
        prepareTransaction: afterwards only commit_transaction() or abort_transaction(), and
        close() does not abort it. Another process ends it with
        `AdminClient.complete_transaction(prepared, commit)`; the coordinator aborts it when
        transaction.timeout.ms passes first. Raises as commit_transaction()."""
        return await self._transactions().prepare(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not sent yet fail with TransactionAbortedError,
        those in flight are waited for, then EndTxn(abort). KafkaTimeoutError after
        `timeout` seconds (default max.block.ms; call it again to go on)."""
        await self._transactions().abort(timeout)
