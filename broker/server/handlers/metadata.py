"""Metadata and DescribeCluster: who leads what, where the brokers are."""
from __future__ import annotations

import uuid

from typing import Protocol

from clients.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore, TopicMetadata

from ...config import BrokerConfig
from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ...topic_admin import TopicAdmin
from ..authz import authorized, authorized_names, authorized_operations, cluster_authorized
from ..dispatch import RequestContext, handles


class MetadataServices(Protocol):
    cluster_mode: bool
    config: BrokerConfig
    store: MetadataStore
    metadata: MetadataCache
    topic_admin: TopicAdmin
    authorizer: Authorizer

NO_OPERATIONS = -2147483648   # Kafka's "authorized operations not requested"
CONTROLLER_WAIT_S = 5.0       # at most this long for the first UpdateMetadata
ZERO_UUID = uuid.UUID(int=0)


def _brokers(services: MetadataServices, ctx: RequestContext) -> list[dict]:
    """The live brokers at their addresses on the listener the request came in on."""
    return [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in services.metadata.alive_brokers(ctx.conn.listener)]


def partition_entry(metadata: MetadataCache, meta: TopicMetadata, index: int) -> dict:
    """One partition as Metadata (and DescribeTopicPartitions) describe it: LEADER_NOT_AVAILABLE
    while it has no leader."""
    info = metadata.partition(meta.name, index)
    if info is None or info.leader < 0:
        return {"error_code": Code.LEADER_NOT_AVAILABLE, "partition_index": index,
                "leader_id": -1, "leader_epoch": info.leader_epoch if info else -1,
                "replica_nodes": meta.partitions[index], "isr_nodes": info.isr if info else [],
                "offline_replicas": info.offline if info else []}
    return {"error_code": 0, "partition_index": index, "leader_id": info.leader,
            "leader_epoch": info.leader_epoch, "replica_nodes": info.replicas,
            "isr_nodes": info.isr, "offline_replicas": info.offline}


def _partition_entries(services: MetadataServices, meta: TopicMetadata) -> list[dict]:
    return [partition_entry(services.metadata, meta, index) for index in sorted(meta.partitions)]


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


@handles("Metadata", (0, 13))
async def metadata(services: MetadataServices, request, ctx: RequestContext) -> dict:
    """Topics the principal may Describe (Kafka's handleTopicMetadataRequest): a request for
    every topic lists only those; a named one it may not describe is answered
    TOPIC_AUTHORIZATION_FAILED without saying whether it exists; auto-creation also needs
    Create on the cluster or on the topic."""
    v = ctx.version
    await _first_metadata(services)
    store = services.store
    # (entry, whether the principal may describe its topic: then its operations are told)
    listed: list[tuple[dict, bool]]
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    if request.topics is None or (v == 0 and not request.topics):
        catalog = store.topics()
        names = sorted(catalog)
        describable = authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        listed = [(_topic_entry(services, catalog[name]), True) for name in names if name in describable]
    else:
        listed = await _named_topics(services, request, ctx)
    if v >= 8 and request.include_topic_authorized_operations:
        for entry, told in listed:
            if told:
                entry["topic_authorized_operations"] = authorized_operations(
                    services, ctx, ResourceType.TOPIC, entry["name"])
    cluster_ops = NO_OPERATIONS
    if 8 <= v <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = _cluster_operations(services, ctx)
    return {
        "throttle_time_ms": 0,
        "brokers": _brokers(services, ctx),
        "cluster_id": store.cluster_id,
        "controller_id": services.metadata.controller_id,
        "topics": [entry for entry, _ in listed],
        "cluster_authorized_operations": cluster_ops,
        "error_code": 0,
    }


async def _named_topics(services: MetadataServices, request, ctx: RequestContext) -> list[tuple[dict, bool]]:
    """The entries of the topics a request names (by name, or by id from v12), in its
    order, each with whether the principal may describe that topic."""
    store = services.store
    v = ctx.version
    allow_create = (request.allow_auto_topic_creation if v >= 4 else True) and \
        services.config.get("auto.create.topics.enable")
    wanted: list[tuple[str | None, TopicMetadata | None, bool]] = []   # (name, topic, asked by id)
    listed: list[tuple[dict, bool]] = []
    for t in request.topics:
        if t.name is None and t.get("topic_id") and t.topic_id.int:
            meta = store.topic_by_id(t.topic_id)
            if meta is None:
                listed.append((_error_entry(Code.UNKNOWN_TOPIC_ID, None, t.topic_id), False))
                continue
            wanted.append((meta.name, meta, True))
        else:
            wanted.append((t.name, store.topic(t.name) if t.name is not None else None, False))
    describable = authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   (name for name, _, _ in wanted))
    may_create_any: bool | None = None      # Create on the cluster, asked once if needed
    for name, meta, by_id in wanted:
        if name is not None and name not in describable:
            # Asked by id, the id is told back (ids are not secret), never the name.
            listed.append((_error_entry(Code.TOPIC_AUTHORIZATION_FAILED, None if by_id else name,
                                        meta.topic_id if by_id and meta else ZERO_UUID), False))
            continue
        if meta is None and allow_create and name is not None:
            if may_create_any is None:
                may_create_any = cluster_authorized(services, ctx, AclOperation.CREATE)
            if not may_create_any and not authorized(services, ctx, AclOperation.CREATE,
                                                     ResourceType.TOPIC, name):
                listed.append((_error_entry(Code.TOPIC_AUTHORIZATION_FAILED, name), False))
                continue
            try:
                meta = await services.topic_admin.create(name)
            except KafkaError as e:
                if e.code != Code.TOPIC_ALREADY_EXISTS:
                    listed.append((_error_entry(e.code, name), True))
                    continue
                meta = store.topic(name)
        if meta is None:
            listed.append((_error_entry(Code.UNKNOWN_TOPIC_OR_PARTITION, name), name is not None))
            continue
        listed.append((_topic_entry(services, meta), True))
    return listed


def _error_entry(code: int, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> dict:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": [],
            "topic_authorized_operations": NO_OPERATIONS}


def _cluster_operations(services: MetadataServices, ctx: RequestContext) -> int:
    """What Kafka answers when a client asks for the cluster's authorized operations: none
    (0) without Describe on the cluster."""
    if not cluster_authorized(services, ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(services, ctx, ResourceType.CLUSTER, CLUSTER_NAME)


@handles("DescribeCluster", (0, 2))
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
        # ZooKeeper mode has no fenced brokers (KIP-1073): the registered ones are all live.
        "brokers": [{"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                     "is_fenced": False}
                    for b in services.metadata.alive_brokers(ctx.conn.listener)],
        "cluster_authorized_operations": (_cluster_operations(services, ctx)
                                          if request.include_cluster_authorized_operations
                                          else NO_OPERATIONS),
    }
