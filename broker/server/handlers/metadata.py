"""Metadata and DescribeCluster: who leads what, where the brokers are."""
from __future__ import annotations

import uuid

from typing import Protocol

from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore

from ...config import BrokerConfig
from ...metadata_cache import MetadataCache
from ...topic_admin import TopicAdmin
from ..dispatch import RequestContext, handles


class MetadataServices(Protocol):
    cluster_mode: bool
    config: BrokerConfig
    store: MetadataStore
    metadata: MetadataCache
    topic_admin: TopicAdmin

NO_OPERATIONS = -2147483648   # Kafka's "authorized operations not requested"
CONTROLLER_WAIT_S = 5.0       # at most this long for the first UpdateMetadata


def _brokers(services: MetadataServices) -> list[dict]:
    return [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in services.metadata.alive_brokers()]


def _partition_entries(services: MetadataServices, meta) -> list[dict]:
    out = []
    for index in sorted(meta.partitions):
        info = services.metadata.partition(meta.name, index)
        if info is None or info.leader < 0:
            out.append({"error_code": Code.LEADER_NOT_AVAILABLE, "partition_index": index,
                        "leader_id": -1, "leader_epoch": info.leader_epoch if info else -1,
                        "replica_nodes": meta.partitions[index], "isr_nodes": info.isr if info else [],
                        "offline_replicas": info.offline if info else []})
            continue
        out.append({"error_code": 0, "partition_index": index, "leader_id": info.leader,
                    "leader_epoch": info.leader_epoch, "replica_nodes": info.replicas,
                    "isr_nodes": info.isr, "offline_replicas": info.offline})
    return out


def _topic_entry(services: MetadataServices, meta) -> dict:
    return {"error_code": 0, "name": meta.name, "topic_id": meta.topic_id,
            "is_internal": meta.is_internal, "partitions": _partition_entries(services, meta),
            "topic_authorized_operations": NO_OPERATIONS}


async def _first_metadata(services: MetadataServices) -> None:
    """Just started, no controller has told this broker about the cluster yet: an answer now
    would name no controller and no other broker, and librdkafka's AdminClient then waits out
    its whole timeout before it sends a CreateTopics. Wait for the first UpdateMetadata
    (bounded), as Kafka's brokers serve clients only once they have the cluster's metadata."""
    if services.cluster_mode and services.metadata.controller_id < 0:
        await services.metadata.wait_for_controller(CONTROLLER_WAIT_S)


@handles("Metadata", (0, 12))
async def metadata(services: MetadataServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    await _first_metadata(services)
    coordinator = services.store
    topics = []
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    if request.topics is None or (v == 0 and not request.topics):
        for name in sorted(coordinator.topics()):
            topics.append(_topic_entry(services, coordinator.topics()[name]))
    else:
        allow_create = (request.allow_auto_topic_creation if v >= 4 else True) and \
            services.config.get("auto.create.topics.enable")
        for t in request.topics:
            name = t.name
            meta = None
            if name is None and t.get("topic_id") and t.topic_id.int:
                meta = coordinator.topic_by_id(t.topic_id)
                if meta is None:
                    topics.append({"error_code": Code.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": t.topic_id, "partitions": []})
                    continue
            else:
                meta = coordinator.topic(name)
            if meta is None and allow_create:
                try:
                    meta = await services.topic_admin.create(name)
                except KafkaError as e:
                    if e.code != Code.TOPIC_ALREADY_EXISTS:
                        topics.append({"error_code": e.code, "name": name,
                                       "topic_id": uuid.UUID(int=0), "partitions": []})
                        continue
                    meta = coordinator.topic(name)
            if meta is None:
                topics.append({"error_code": Code.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                               "topic_id": uuid.UUID(int=0), "partitions": []})
                continue
            topics.append(_topic_entry(services, meta))
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(services),
        "cluster_id": coordinator.cluster_id,
        "controller_id": services.metadata.controller_id,
        "topics": topics,
        "cluster_authorized_operations": NO_OPERATIONS,
    }


@handles("DescribeCluster", (0, 1))
async def describe_cluster(services: MetadataServices, request, ctx: RequestContext) -> dict:
    await _first_metadata(services)
    if ctx.version >= 1 and request.endpoint_type not in (1,):
        # Only brokers (endpoint type 1) are served by a broker listener.
        return {"error_code": Code.UNSUPPORTED_ENDPOINT_TYPE, "endpoint_type": request.endpoint_type,
                "error_message": "Only brokers are served here", "cluster_id": services.store.cluster_id,
                "controller_id": -1, "brokers": []}
    return {
        "throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
        "cluster_id": services.store.cluster_id,
        "controller_id": services.metadata.controller_id,
        "brokers": [{"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in services.metadata.alive_brokers()],
        "cluster_authorized_operations": NO_OPERATIONS,
    }
