"""The transaction coordinator's APIs (KIP-98): AddPartitionsToTxn (v0-3 from producers; v4+
batched, with the verify-only form partition leaders use, KIP-890, and v5's add for
transaction version 2), AddOffsetsToTxn, EndTxn (v5: transaction version 2, the epoch bumped
at every end), DescribeTransactions, ListTransactions, and the partition leaders'
DescribeProducers.
InitProducerId with a transactional id is in
producer_id.py; the markers they lead to in txn_markers.py.

Authorization as Kafka's: a producer needs Write on its transactional id (and on each topic
it adds; AddOffsetsToTxn: Read on the group); the broker-to-broker forms (AddPartitionsToTxn
v4+) ClusterAction; describing and listing transactions Describe on each transactional id
(the topics of a described transaction are those the principal may Describe);
DescribeProducers Read on the topic."""
from __future__ import annotations

from typing import Any, Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code

from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...replication.replica_manager import ReplicaManager
from ...security.authorizer import Authorizer
from ...txn.coordinator import TransactionCoordinator
from ...txn.metadata import TxnState
from ...txn.state_manager import TXN_TOPIC
from ..authz import authorized, authorized_names, require_cluster
from ..dispatch import RequestContext, handles


class TxnServices(Protocol):
    txn: TransactionCoordinator
    groups: GroupCoordinator
    authorizer: Authorizer


class ProducerStateServices(Protocol):
    replicas: ReplicaManager
    authorizer: Authorizer


def _may_write_txn(services: TxnServices, ctx: RequestContext, transactional_id: str) -> bool:
    return authorized(services, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _topic_results(topics: Any, codes: dict[tuple[str, int], int]) -> list[dict]:
    return [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": codes[(t.name, p)]} for p in t.partitions]}
        for t in topics]


@handles("AddPartitionsToTxn", (0, 5))
async def add_partitions_to_txn(services: TxnServices, request, ctx: RequestContext) -> dict:
    txn = services.txn
    if ctx.version <= 3:
        parts = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        codes = _refused_partitions(services, ctx, request.v3_and_below_transactional_id, parts)
        if codes is None:
            code = await txn.add_partitions(request.v3_and_below_transactional_id,
                                            request.v3_and_below_producer_id,
                                            request.v3_and_below_producer_epoch, parts)
            codes = {tp: code for tp in parts}
        return {"throttle_time_ms": 0,
                "results_by_topic_v3_and_below": _topic_results(request.v3_and_below_topics, codes)}
    # v4+ come from partition leaders (KIP-890), never from clients.
    require_cluster(services, ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for tx in request.transactions:
        parts = [(t.name, p) for t in tx.topics for p in t.partitions]
        if tx.verify_only:
            codes = txn.verify(tx.transactional_id, tx.producer_id, tx.producer_epoch, parts)
        else:
            # A leader's add for a Produce v12+ / TxnOffsetCommit v5+ (transaction version 2).
            code = await txn.add_partitions(tx.transactional_id, tx.producer_id, tx.producer_epoch,
                                            parts, 2 if ctx.version >= 5 else 0)
            codes = {tp: code for tp in parts}
        results.append({"transactional_id": tx.transactional_id,
                        "topic_results": _topic_results(tx.topics, codes)})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


def _refused_partitions(services: TxnServices, ctx: RequestContext, transactional_id: str,
                        parts: list[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
    """A client's AddPartitionsToTxn as Kafka authorizes it: None when it may go on, else
    every partition's code: all TRANSACTIONAL_ID_AUTHORIZATION_FAILED without Write on the
    transactional id; else TOPIC_AUTHORIZATION_FAILED on the topics it may not Write (the
    internal topics among them) and OPERATION_NOT_ATTEMPTED on the others."""
    if not services.authorizer.enabled:
        return None
    if not _may_write_txn(services, ctx, transactional_id):
        return dict.fromkeys(parts, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authorized_names(services, ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                {t for t, _ in parts if t not in (OFFSETS_TOPIC, TXN_TOPIC)})
    if all(t in writable for t, _ in parts):
        return None
    return {tp: Code.OPERATION_NOT_ATTEMPTED if tp[0] in writable else Code.TOPIC_AUTHORIZATION_FAILED
            for tp in parts}


@handles("AddOffsetsToTxn", (0, 4))
async def add_offsets_to_txn(services: TxnServices, request, ctx: RequestContext) -> dict:
    if not _may_write_txn(services, ctx, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorized(services, ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": Code.GROUP_AUTHORIZATION_FAILED}
    if not request.group_id:
        return {"throttle_time_ms": 0, "error_code": Code.INVALID_GROUP_ID}
    offsets_partition = services.groups.partition_for(request.group_id)
    code = await services.txn.add_partitions(request.transactional_id, request.producer_id,
                                             request.producer_epoch, [(OFFSETS_TOPIC, offsets_partition)])
    return {"throttle_time_ms": 0, "error_code": code}


@handles("EndTxn", (0, 5))
async def end_txn(services: TxnServices, request, ctx: RequestContext) -> dict:
    if not _may_write_txn(services, ctx, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if ctx.version >= 5:
        code, pid, epoch = await services.txn.end_txn_v2(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed)
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid,
                "producer_epoch": epoch}
    code = await services.txn.end_txn(request.transactional_id, request.producer_id,
                                      request.producer_epoch, request.committed)
    return {"throttle_time_ms": 0, "error_code": code}


@handles("DescribeTransactions", (0, 0))
def describe_transactions(services: TxnServices, request, ctx: RequestContext) -> dict:
    state = services.txn.state
    out = []
    for tid in request.transactional_ids:
        if not authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            out.append(_no_transaction(Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, tid))
            continue
        code = state.check(tid)
        meta = state.get(tid) if code == 0 else None
        if code == 0 and (meta is None or meta.state == TxnState.DEAD):
            code = Code.TRANSACTIONAL_ID_NOT_FOUND
        if meta is None or code:
            out.append(_no_transaction(code, tid))
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(meta.partitions):
            by_topic.setdefault(t, []).append(p)
        # Only the topics the principal may Describe are told.
        describable = authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
        out.append({"error_code": 0, "transactional_id": tid,
                    "transaction_state": meta.state.kafka_name,
                    "transaction_timeout_ms": meta.txn_timeout_ms,
                    "transaction_start_time_ms": meta.txn_start_ms,
                    "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()
                               if t in describable]})
    return {"throttle_time_ms": 0, "transaction_states": out}


def _no_transaction(code: int, transactional_id: str) -> dict:
    return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
            "producer_id": -1, "producer_epoch": -1, "topics": []}


_STATES_BY_NAME = {s.kafka_name: s for s in TxnState}


@handles("ListTransactions", (0, 1))
def list_transactions(services: TxnServices, request, ctx: RequestContext) -> dict:
    unknown = [s for s in request.state_filters if s not in _STATES_BY_NAME]
    states = {_STATES_BY_NAME[s] for s in request.state_filters if s in _STATES_BY_NAME}
    pids = set(request.producer_id_filters)
    min_duration = request.duration_filter if ctx.version >= 1 else -1
    now = services.txn.wall_ms()
    out = []
    for meta in services.txn.state.transactions.values():
        if meta.state == TxnState.DEAD or (request.state_filters and meta.state not in states):
            continue
        if pids and meta.producer_id not in pids:
            continue
        if min_duration >= 0 and (meta.state != TxnState.ONGOING or meta.txn_start_ms < 0
                                  or now - meta.txn_start_ms < min_duration):
            continue
        if not authorized(services, ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                          meta.transactional_id):
            continue
        out.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                    "transaction_state": meta.state.kafka_name})
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": out}


@handles("DescribeProducers", (0, 0))
def describe_producers(services: ProducerStateServices, request, ctx: RequestContext) -> dict:
    """The producers a partition leader knows (Kafka's DescribeProducers, KIP-664): what
    `kafka-transactions.sh describe-producers` and `find-hanging` read."""
    readable = authorized_names(services, ctx, AclOperation.READ, ResourceType.TOPIC,
                                {t.name for t in request.topics})
    topics = []
    for t in request.topics:
        parts = []
        if t.name not in readable:
            parts = [{"partition_index": index, "error_code": Code.TOPIC_AUTHORIZATION_FAILED,
                      "error_message": None, "active_producers": []} for index in t.partition_indexes]
            topics.append({"name": t.name, "partitions": parts})
            continue
        for index in t.partition_indexes:
            p = services.replicas.maybe_get(t.name, index)
            if p is None or not p.is_leader:
                code = Code.NOT_LEADER_OR_FOLLOWER if p is not None else Code.UNKNOWN_TOPIC_OR_PARTITION
                parts.append({"partition_index": index, "error_code": code, "error_message": None,
                              "active_producers": []})
                continue
            producers = p.log.producers.producers.values()
            parts.append({"partition_index": index, "error_code": 0, "error_message": None,
                          "active_producers": [
                              {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                               "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                               "coordinator_epoch": e.coordinator_epoch,
                               "current_txn_start_offset": (-1 if e.current_txn_first_offset is None
                                                            else e.current_txn_first_offset)}
                              for e in producers]})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
