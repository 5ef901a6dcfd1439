"""Produce: append each partition's record set as opaque batches.

Every append runs before the handler returns (see network.py), so the batches of one
connection are appended in the order they were sent; the one exception is a producer's
first transactional batch of a transaction in a partition, which waits until the
transaction coordinator confirms the partition is in that transaction (KIP-890 part 1,
txn/verifier.py), with that producer's later batches there queued behind it. With acks=all it returns a coroutine
that answers once the high watermark covers each partition's batch (or `timeout_ms` passes).

Metrics (Kafka's BrokerTopicMetrics): an appended partition adds the record count of its
batch headers to messages-in and the size of its record set as received to bytes-in; a
partition whose append fails counts as a failed produce request of its topic.
"""
from __future__ import annotations

import asyncio
import logging
from typing import AbstractSet, Any, Coroutine, Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, HEADER_SIZE, MAGIC_OFFSET, TRANSACTIONAL,
                                           read_header)
from clients.protocol.errors import Code, KafkaError, UnsupportedForMessageFormatError, for_code

from ...config import BrokerConfig
from ...log.validation import RecordValidationError
from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ...stats import BrokerTopicStats
from ...replication.replica_manager import ReplicaManager
from ...txn.verifier import TxnVerifier
from ..authz import authorized, authorized_names
from ..dispatch import RequestContext, handles


class ProduceServices(Protocol):
    replicas: ReplicaManager
    metadata: MetadataCache
    topic_stats: BrokerTopicStats
    config: BrokerConfig
    txn_verifier: TxnVerifier
    authorizer: Authorizer

log = logging.getLogger(__name__)

_NOTHING: frozenset[str] = frozenset()

# Kafka's ReplicaManager.processFailedRecord: a refusal that means a producer and this broker
# disagree (its sequence, its transaction) gets a line in the log, a fenced epoch an info
# line; routine ones (no such partition, not the leader, too few replicas) get none.
_LOGGED_ERRORS = {
    Code.OUT_OF_ORDER_SEQUENCE_NUMBER: logging.WARNING,
    Code.DUPLICATE_SEQUENCE_NUMBER: logging.WARNING,
    Code.INVALID_TXN_STATE: logging.WARNING,
    Code.INVALID_PRODUCER_EPOCH: logging.INFO,
}


@handles("Produce", (0, 12))
def produce(services: ProduceServices, request, ctx: RequestContext
            ) -> dict | None | Coroutine[Any, Any, dict | None]:
    acks = request.acks
    results = []
    waits: list = []    # (entry, topic, partition, offset the high watermark must reach)
    deferred: list = []  # (entry, topic, partition, records, producer id, epoch, turn, done)
    # Produce v12+ (transaction version 2) comes without AddPartitionsToTxn: the leader adds
    # the partition to the transaction, whatever the verification setting.
    add = ctx.version >= 12
    verifier = services.txn_verifier if add or services.config.get(
        "transaction.partition.verification.enable") else None
    denied: AbstractSet[str] = _NOTHING     # the topics the principal may not Write to
    if services.authorizer.enabled:
        if not _may_write_its_transactions(services, request, ctx):
            return None if acks == 0 else _refused_whole(request, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        names = {t.name for t in request.topic_data}
        denied = names - authorized_names(services, ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    for topic in request.topic_data:
        parts = []
        refused = topic.name in denied
        for pd in topic.partition_data:
            entry = {"index": pd.index, "error_code": 0, "base_offset": -1,
                     "log_append_time_ms": -1, "log_start_offset": -1,
                     "record_errors": [], "error_message": None}
            parts.append(entry)
            records = pd.records
            if refused:
                entry["error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
                continue
            if acks not in (-1, 0, 1):
                entry["error_code"] = Code.INVALID_REQUIRED_ACKS
            elif records is None or len(records) == 0:
                entry["error_code"] = Code.INVALID_RECORD if ctx.version >= 8 else Code.CORRUPT_MESSAGE
            elif verifier is not None and len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] == 2 \
                    and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL \
                    and _needs_verification(services, verifier, topic.name, pd.index, records):
                h = read_header(records)
                turn = verifier.waiting(topic.name, pd.index, h.producer_id)
                done = verifier.enqueue(topic.name, pd.index, h.producer_id)
                deferred.append((entry, topic.name, pd.index, records, h.producer_id, h.producer_epoch,
                                 turn, done))
                continue
            else:
                _append(services, topic.name, pd.index, records, acks, entry, waits, ctx.version)
            if entry["error_code"]:
                _failed(services, topic.name)
        results.append({"name": topic.name, "partition_responses": parts})
    response = {"responses": results, "throttle_time_ms": 0}
    timeout_s = max(request.timeout_ms, 0) / 1000.0
    if deferred:
        assert verifier is not None
        return _verify_then_append(services, verifier, request.transactional_id, acks, response,
                                   waits, deferred, timeout_s, ctx.version, add)
    if acks == 0:
        return None
    if waits:
        return after_replication(services.replicas, response, waits, timeout_s)
    return response


def _may_write_its_transactions(services: ProduceServices, request, ctx: RequestContext) -> bool:
    """False when the request carries transactional batches and its principal may not Write
    as its transactional id (Kafka then refuses every partition of the request)."""
    if not _has_transactional_records(request):
        return True
    return request.transactional_id is not None and authorized(
        services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)


def _has_transactional_records(request) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: a partition's first batch is transactional."""
    for topic in request.topic_data:
        for pd in topic.partition_data:
            records = pd.records
            if records is not None and len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] == 2 \
                    and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL:
                return True
    return False


def _refused_whole(request, code: int) -> dict:
    """Every partition of the request answered with `code`, nothing appended."""
    return {"throttle_time_ms": 0, "responses": [
        {"name": t.name, "partition_responses": [
            {"index": pd.index, "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1, "record_errors": [], "error_message": None}
            for pd in t.partition_data]}
        for t in request.topic_data]}


def _append(services: ProduceServices, topic: str, index: int, records: Any, acks: int, entry: dict,
            waits: list, version: int) -> None:
    """Append one partition's record set, filling its response entry."""
    try:
        info = services.replicas.append(topic, index, records, acks)
        services.topic_stats.produced(topic, info.record_count, len(records))
        entry["base_offset"] = info.first_offset
        entry["log_append_time_ms"] = info.log_append_time
        entry["log_start_offset"] = info.log_start_offset
        if acks == -1:
            waits.append((entry, topic, index, info.last_offset + 1))
    except UnsupportedForMessageFormatError as e:
        # Message formats v0/v1: Produce v3+ may only carry magic 2 (Kafka's
        # ProduceRequest.validateRecords -> INVALID_RECORD); older Produce versions get
        # UNSUPPORTED_VERSION, as Kafka 4 answers once v0/v1 formats are gone.
        entry["error_code"] = Code.INVALID_RECORD if version >= 3 else Code.UNSUPPORTED_VERSION
        entry["error_message"] = e.message
    except KafkaError as e:
        entry["error_code"] = e.code
        entry["error_message"] = e.message
        if isinstance(e, RecordValidationError):
            entry["record_errors"] = [{"batch_index": i, "batch_index_error_message": m}
                                      for i, m in e.record_errors]
        level = _LOGGED_ERRORS.get(e.code)
        if level is not None:
            log.log(level, "Error processing append operation on partition %s-%d: %s: %s",
                    topic, index, e.name, e.message)


def _failed(services: ProduceServices, topic: str) -> None:
    services.topic_stats.produce_failed(topic, services.metadata.partition(topic, 0) is not None)


def _needs_verification(services: ProduceServices, verifier: TxnVerifier, topic: str, index: int,
                        records: Any) -> bool:
    """A transactional batch whose transaction this leader has not seen open here yet (or
    one queued behind such a batch). Anything this broker does not lead is refused by the
    append itself."""
    p = services.replicas.maybe_get(topic, index)
    if p is None or not p.is_leader:
        return False
    h = read_header(records)
    if verifier.waiting(topic, index, h.producer_id) is not None:
        return True
    return _transaction_unseen(services, topic, index, h.producer_id, h.producer_epoch)


def _transaction_unseen(services: ProduceServices, topic: str, index: int, producer_id: int,
                        producer_epoch: int) -> bool:
    """The partition has no transaction of this producer open at this epoch."""
    p = services.replicas.maybe_get(topic, index)
    if p is None:
        return True
    state = p.log.producers.last_entry(producer_id)
    return state is None or state.current_txn_first_offset is None or state.producer_epoch != producer_epoch


async def _verify_then_append(services: ProduceServices, verifier: TxnVerifier, transactional_id: str | None,
                              acks: int, response: dict, waits: list, deferred: list, timeout_s: float,
                              version: int, add: bool = False) -> dict | None:
    """KIP-890 part 1: ask the coordinator, then append what it confirmed, in arrival order
    behind earlier deferred appends of the same producer and partition."""
    try:
        for *_, turn, _ in deferred:
            if turn is not None:
                await turn
        by_producer: dict[tuple[int, int], list] = {}
        for d in deferred:
            by_producer.setdefault((d[4], d[5]), []).append(d)
        for (pid, epoch), items in by_producer.items():
            # An append queued behind another may find the transaction open by now.
            ask = [(t, i) for _, t, i, *_ in items if _transaction_unseen(services, t, i, pid, epoch)]
            codes = dict.fromkeys(((t, i) for _, t, i, *_ in items), 0)
            if ask:
                codes.update(await verifier.verify(transactional_id, pid, epoch, ask, add))
            for entry, topic, index, records, *_ in items:
                code = codes.get((topic, index), Code.INVALID_TXN_STATE)
                if code:
                    entry["error_code"] = code
                    log.info("refused a transactional append of producer %d epoch %d to %s-%d: %s",
                             pid, epoch, topic, index, for_code(code).name)
                else:
                    _append(services, topic, index, records, acks, entry, waits, version)
                if entry["error_code"]:
                    _failed(services, topic)
    finally:
        for *_, done in deferred:
            if not done.done():
                done.set_result(None)
    if acks == 0:
        return None
    if waits:
        return await after_replication(services.replicas, response, waits, timeout_s)
    return response


async def after_replication(replicas: ReplicaManager, response: dict, waits: list,
                             timeout_s: float) -> dict:
    """acks=all: `response` once the high watermark covers every appended batch of `waits`
    ((partition entry, topic, partition, end offset)), each entry's error_code set (time up:
    REQUEST_TIMED_OUT; too few replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    codes = await asyncio.gather(*(replicas.wait_replicated(t, p, off, timeout_s) for _, t, p, off in waits))
    for (entry, _, _, _), code in zip(waits, codes):
        entry["error_code"] = code
    return response
