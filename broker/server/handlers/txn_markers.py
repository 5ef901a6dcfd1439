"""WriteTxnMarkers: the transaction coordinator's COMMIT/ABORT markers, appended by each
partition's leader as control batches (origin coordinator: no sequence checks; a marker of
an older coordinator epoch than the producer's last is refused with
TRANSACTION_COORDINATOR_FENCED). As Kafka, each marker is written with acks=all: the answer
comes once the high watermark covers it, or after request.timeout.ms."""
from __future__ import annotations

from typing import Any, Coroutine, Protocol

from clients.protocol.acl import AclOperation
from clients.protocol.errors import Code, KafkaError
from clients.protocol.records import ABORT, COMMIT, build_control_batch

from ...config import BrokerConfig
from ...group.coordinator import GroupCoordinator
from ...group.offsets import OFFSETS_TOPIC
from ...log import ORIGIN_COORDINATOR
from ...replication.replica_manager import ReplicaManager
from ...security.authorizer import Authorizer
from ..authz import cluster_authorized
from ..dispatch import RequestContext, handles
from .produce import after_replication


class TxnMarkerServices(Protocol):
    replicas: ReplicaManager
    config: BrokerConfig
    groups: GroupCoordinator
    authorizer: Authorizer


@handles("WriteTxnMarkers", (0, 1))
def write_txn_markers(services: TxnMarkerServices, request, ctx: RequestContext
                      ) -> dict | Coroutine[Any, Any, dict]:
    if not cluster_authorized(services, ctx, AclOperation.CLUSTER_ACTION):
        # Only brokers write markers. The response has no top-level error: every partition
        # carries it (Kafka's WriteTxnMarkersRequest.getErrorResponse).
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [
                {"partition_index": i, "error_code": Code.CLUSTER_AUTHORIZATION_FAILED}
                for i in t.partition_indexes]} for t in m.topics]} for m in request.markers]}
    replicas = services.replicas
    markers = []
    waits = []              # (partition entry, topic, partition, offset the HW must reach)
    for m in request.markers:
        control = COMMIT if m.transaction_result else ABORT
        topics = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                entry = {"partition_index": index, "error_code": 0}
                batch = build_control_batch(control, producer_id=m.producer_id,
                                            producer_epoch=m.producer_epoch,
                                            coordinator_epoch=m.coordinator_epoch)
                try:
                    info = replicas.append(t.name, index, batch, -1, ORIGIN_COORDINATOR)
                    waits.append((entry, t.name, index, info.last_offset + 1))
                    if t.name == OFFSETS_TOPIC:
                        # Transactional offset commits of this producer take effect now.
                        services.groups.complete_txn(index, m.producer_id, m.transaction_result)
                except KafkaError as e:
                    entry["error_code"] = e.code
                parts.append(entry)
            topics.append({"name": t.name, "partitions": parts})
        markers.append({"producer_id": m.producer_id, "topics": topics})
    response = {"markers": markers}
    if not waits:
        return response
    return after_replication(replicas, response, waits,
                              services.config.get("request.timeout.ms") / 1000.0)

