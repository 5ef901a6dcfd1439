"""Produce: append each partition's record set as opaque batches.

Every append runs before the handler returns (see network.py), so the batches of one
connection are appended in the order they were sent. With acks=all it returns a coroutine
that answers once the high watermark covers each partition's batch (or `timeout_ms` passes).

Metrics (Kafka's BrokerTopicMetrics): an appended partition adds the record count of its
batch headers to messages-in and the size of its record set as received to bytes-in; a
partition whose append fails counts as a failed produce request of its topic.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Coroutine, Protocol

from clients.protocol.errors import Code, KafkaError, UnsupportedForMessageFormatError

from ...metadata_cache import MetadataCache
from ...stats import BrokerTopicStats
from ...replication.replica_manager import ReplicaManager
from ..dispatch import RequestContext, handles


class ProduceServices(Protocol):
    replicas: ReplicaManager
    metadata: MetadataCache
    topic_stats: BrokerTopicStats

log = logging.getLogger(__name__)

# Kafka's ReplicaManager.processFailedRecord: a refusal that means a producer and this broker
# disagree (its sequence, its transaction) gets a line in the log, a fenced epoch an info
# line; routine ones (no such partition, not the leader, too few replicas) get none.
_LOGGED_ERRORS = {
    Code.OUT_OF_ORDER_SEQUENCE_NUMBER: logging.WARNING,
    Code.DUPLICATE_SEQUENCE_NUMBER: logging.WARNING,
    Code.INVALID_TXN_STATE: logging.WARNING,
    Code.INVALID_PRODUCER_EPOCH: logging.INFO,
}


@handles("Produce", (0, 10))
def produce(services: ProduceServices, request, ctx: RequestContext
            ) -> dict | None | Coroutine[Any, Any, dict]:
    acks = request.acks
    stats = services.topic_stats
    results = []
    waits = []          # (entry, topic, partition, offset the high watermark must reach)
    for topic in request.topic_data:
        parts = []
        for pd in topic.partition_data:
            entry = {"index": pd.index, "error_code": 0, "base_offset": -1,
                     "log_append_time_ms": -1, "log_start_offset": -1,
                     "record_errors": [], "error_message": None}
            try:
                if acks not in (-1, 0, 1):
                    entry["error_code"] = Code.INVALID_REQUIRED_ACKS
                elif pd.records is None or len(pd.records) == 0:
                    entry["error_code"] = Code.INVALID_RECORD if ctx.version >= 8 else Code.CORRUPT_MESSAGE
                else:
                    info = services.replicas.append(topic.name, pd.index, pd.records, acks)
                    stats.produced(topic.name, info.record_count, len(pd.records))
                    entry["base_offset"] = info.first_offset
                    entry["log_append_time_ms"] = info.log_append_time
                    entry["log_start_offset"] = info.log_start_offset
                    if acks == -1:
                        waits.append((entry, topic.name, pd.index, info.last_offset + 1))
            except UnsupportedForMessageFormatError as e:
                # Message formats v0/v1: Produce v3+ may only carry magic 2 (Kafka's
                # ProduceRequest.validateRecords -> INVALID_RECORD); older Produce versions get
                # UNSUPPORTED_VERSION, as Kafka 4 answers once v0/v1 formats are gone.
                entry["error_code"] = Code.INVALID_RECORD if ctx.version >= 3 else Code.UNSUPPORTED_VERSION
                entry["error_message"] = e.message
            except KafkaError as e:
                entry["error_code"] = e.code
                entry["error_message"] = e.message
                level = _LOGGED_ERRORS.get(e.code)
                if level is not None:
                    log.log(level, "Error processing append operation on partition %s-%d: %s: %s",
                            topic.name, pd.index, e.name, e.message)
            if entry["error_code"]:
                stats.produce_failed(topic.name,
                                     services.metadata.partition(topic.name, 0) is not None)
            parts.append(entry)
        results.append({"name": topic.name, "partition_responses": parts})
    if acks == 0:
        return None
    response = {"responses": results, "throttle_time_ms": 0}
    if waits:
        return after_replication(services.replicas, response, waits, max(request.timeout_ms, 0) / 1000.0)
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
