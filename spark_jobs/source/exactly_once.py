"""The sink's exactly-once mode (`exactlyOnce=true`, streaming writes): a two-phase commit
over Kafka transactions.

Phase 1, on each task: its rows go out in one transaction of the task's own transactional id
`<transactionalIdPrefix><query id>-<batch id>-<partition>`, delivered with acks=all and left
open (`Producer.prepare_transaction()`); the task's commit message carries the transactional
id, producer id and epoch. Phase 2, on the driver (`commit(messages, batchId)`): EndTxn(commit)
for each (`AdminClient.complete_transaction`). read_committed consumers of the output see a
micro-batch only once the driver has committed it; an aborted batch never.

Why each record lands once when the driver dies. After a restart Spark runs a batch again
unless its commit-log entry was written, which happens after `commit()` returned; the re-run
reads the same offsets (the offset log), so task p of the re-run writes what task p wrote
before (Spark promises exactly-once only for deterministic queries). Before writing, a task
looks up its transactional id, which names (query, batch, partition):
  - committed (CompleteCommit, PrepareCommit): an earlier run's driver got that far; the
    task writes nothing;
  - open (Ongoing): the task aborts it with its producer id and epoch. The coordinator orders
    that abort against a commit the dead driver may still have had in flight: if the commit
    came first, the abort fails (INVALID_TXN_STATE) and the next look finds it committed;
  - anything else (aborted, never used): the task writes; init_transactions() fences every
    older producer of the id, so a late EndTxn of theirs cannot touch the new transaction.
A commit the driver cannot make (the transaction timed out, or a newer attempt aborted it)
fails the query; the restart's re-run writes again what is not committed.

A prepared transaction stays open until the driver ends it or `transaction.timeout.ms`
passes (the coordinator then aborts it): the sink sets that to 15 minutes, the broker's
default `transaction.max.timeout.ms`, unless `kafka.transaction.timeout.ms` says otherwise.
Until then it holds back read_committed consumers of its partitions (the last stable offset).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from clients import AdminClient, Producer
from clients.config import KEYS
from clients.protocol.errors import BY_NAME
from clients.types import PreparedTransaction

from .options import SinkOptions
from .writer import DeliveryErrors, producer_config, send_rows

__all__ = ["ExactlyOnceStreamWriter", "PreparedMessage", "TaskIds", "transactional_id",
           "write_prepared", "commit_prepared", "end_prepared", "committed_before"]

log = logging.getLogger("strom.spark.sink")

# Spark's local properties that a streaming task carries (StreamExecution.QUERY_ID_KEY,
# MicroBatchExecution.BATCH_ID_KEY).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

_COMMITTED = ("CompleteCommit", "PrepareCommit")
# EndTxn(abort) of an open transaction lost a race: it ended, or a newer producer has the id.
_ENDED_MEANWHILE = tuple(BY_NAME[n] for n in ("INVALID_TXN_STATE", "PRODUCER_FENCED",
                                               "INVALID_PRODUCER_EPOCH",
                                               "CONCURRENT_TRANSACTIONS"))
_LOOKS = 20


class TaskIds(NamedTuple):
    query_id: str
    batch_id: int
    partition: int


@dataclass
class PreparedMessage(WriterCommitMessage):
    records: int
    prepared: PreparedTransaction | None    # None: an earlier run committed this task's rows


def task_ids() -> TaskIds:
    """Who this task is, from Spark's TaskContext (only a streaming write has a batch id)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    query = tc.getLocalProperty(QUERY_ID_PROPERTY) if tc is not None else None
    batch = tc.getLocalProperty(BATCH_ID_PROPERTY) if tc is not None else None
    if tc is None or query is None or batch is None:
        raise RuntimeError("exactlyOnce: not in a micro-batch task of a streaming query "
                           "(continuous processing is not supported)")
    return TaskIds(query, int(batch), tc.partitionId())


def transactional_id(prefix: str, ids: TaskIds) -> str:
    return f"{prefix}{ids.query_id}-{ids.batch_id}-{ids.partition}"


def _admin(opts: SinkOptions) -> AdminClient:
    # The common kafka.* options (security among them) reach the admin client too.
    common = {k: v for k, v in opts.client_config.items() if k in KEYS["common"]}
    return AdminClient({**common, "bootstrap.servers": opts.bootstrap, "client.id": "strom-spark-sink"})


def committed_before(admin: AdminClient, tid: str) -> bool:
    """Did an earlier run commit the transaction of `tid`? One it left open is aborted."""
    for _ in range(_LOOKS):
        found = admin.describe_transactions([tid]).get(tid)
        if found is None or found.state not in ("Ongoing",) + _COMMITTED:
            return False
        if found.state in _COMMITTED:
            return True
        try:
            admin.complete_transaction(
                PreparedTransaction(tid, found.producer_id, found.producer_epoch), commit=False)
        except _ENDED_MEANWHILE:
            continue                    # it ended another way meanwhile: look again
        log.info("%s: aborted the transaction an earlier attempt left open", tid)
        return False
    raise RuntimeError(f"exactlyOnce: the transaction of {tid!r} kept changing under this task")


def write_prepared(opts: SinkOptions, batches: Iterator[pa.RecordBatch],
                   ids: TaskIds) -> PreparedMessage:
    """Phase 1 for one task: see the module docstring."""
    tid = transactional_id(opts.transactional_id_prefix, ids)
    with _admin(opts) as admin:
        if committed_before(admin, tid):
            log.info("%s: committed by an earlier run of batch %d; not written again", tid,
                     ids.batch_id)
            for _ in batches:       # Spark streams the rows in regardless: take them all
                pass
            return PreparedMessage(0, None)
    delivered = DeliveryErrors()
    producer = Producer(producer_config(opts, **{"transactional.id": tid}))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        sent = send_rows(producer, opts, batches, delivered)
        delivered.raise_first()
        prepared = producer.prepare_transaction()
        delivered.raise_first()
    finally:
        producer.close()           # aborts the transaction unless it was prepared
    return PreparedMessage(sent, prepared)


def _prepared(messages: list) -> list[PreparedTransaction]:
    return [m.prepared for m in messages
            if isinstance(m, PreparedMessage) and m.prepared is not None and not m.prepared.empty]


def end_prepared(opts: SinkOptions, messages: list, batch_id: int, commit: bool) -> None:
    """Phase 2 on the driver: commit every task's transaction of the batch (raises when one
    cannot be), or, for a failed batch, abort them (best effort: the rest times out)."""
    with _admin(opts) as admin:
        for p in _prepared(messages):
            try:
                admin.complete_transaction(p, commit=commit)
            except Exception as e:
                if not commit:
                    log.warning("batch %d: aborting %s failed: %r", batch_id,
                                p.transactional_id, e)
                    continue
                raise RuntimeError(
                    f"exactlyOnce: batch {batch_id}: cannot commit the transaction of "
                    f"{p.transactional_id!r} ({e!r}); restart the query: the batch runs again "
                    f"and writes what is not committed") from e


def commit_prepared(opts: SinkOptions, messages: list, batch_id: int) -> None:
    end_prepared(opts, messages, batch_id, commit=True)


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PreparedMessage:
        return write_prepared(self.opts, iterator, task_ids())

    def commit(self, messages: list, batchId: int) -> None:
        commit_prepared(self.opts, messages, batchId)

    def abort(self, messages: list, batchId: int) -> None:
        end_prepared(self.opts, messages, batchId, commit=False)
