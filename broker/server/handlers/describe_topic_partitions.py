"""DescribeTopicPartitions (KIP-966): topics as Metadata describes them, a page of partitions at
a time, with a cursor to the next page. Kafka 3.8+ clients' describeTopics sends it.

As Kafka's DescribeTopicPartitionsRequestHandler: topics are answered in name order from the
cursor on; a page holds at most `response_partition_limit` partitions (capped by Kafka's
max.request.partition.size.limit, 2000), and `next_cursor` names the first partition left
out. Asking for every topic (an empty list) lists only those the principal may Describe and
skips topics that vanished; a named topic it may not Describe is TOPIC_AUTHORIZATION_FAILED
without a topic id. Eligible leader replicas are KRaft's (KIP-966's ELR): a ZooKeeper-mode
cluster has none, so those lists are null, as Kafka sends them when ELR is off.
"""
from __future__ import annotations

import uuid
from typing import Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore, TopicMetadata

from ...metadata_cache import MetadataCache
from ...security.authorizer import Authorizer
from ...topic_admin import validate_topic_name
from ..authz import authorized_names, authorized_operations
from ..dispatch import RequestContext, handles
from .metadata import partition_entry

# Kafka's max.request.partition.size.limit (a broker config strom does not declare).
MAX_PARTITIONS_PER_PAGE = 2000
ZERO_UUID = uuid.UUID(int=0)


class DescribeTopicPartitionsServices(Protocol):
    store: MetadataStore
    metadata: MetadataCache
    authorizer: Authorizer


class _InvalidRequest(Exception):
    pass


@handles("DescribeTopicPartitions", (0, 0))
def describe_topic_partitions(services: DescribeTopicPartitionsServices, request,
                              ctx: RequestContext) -> dict:
    try:
        return _describe(services, request, ctx)
    except _InvalidRequest as e:
        # The API has no top-level error: Kafka answers each named topic with the error.
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            {"error_code": Code.INVALID_REQUEST, "name": t.name, "topic_id": ZERO_UUID,
             "is_internal": False, "partitions": []} for t in request.topics]}


def _describe(services: DescribeTopicPartitionsServices, request, ctx: RequestContext) -> dict:
    every_topic = not request.topics
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    asked = services.store.topics() if every_topic else {t.name for t in request.topics}
    names = sorted(n for n in asked if n >= start_topic)
    if cursor is not None and not every_topic and cursor.topic_name not in names:
        raise _InvalidRequest("DescribeTopicPartitionsRequest topic list should contain the "
                              f"cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        raise _InvalidRequest("DescribeTopicPartitionsRequest cursor partition must be valid")
    describable = authorized_names(services, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    refused: list[dict] = [] if every_topic else [
        {"error_code": Code.TOPIC_AUTHORIZATION_FAILED, "name": n, "topic_id": ZERO_UUID,
         "is_internal": False, "partitions": []} for n in names if n not in describable]
    room = max(min(MAX_PARTITIONS_PER_PAGE, request.response_partition_limit), 1)
    topics: list[dict] = []
    next_cursor = None
    for name in (n for n in names if n in describable):
        if room == 0:       # the page is full: the next page starts at this topic
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        meta = services.store.topic(name)
        if meta is None:
            if not every_topic:
                topics.append(_missing_topic(name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = sorted(i for i in meta.partitions if i >= first)
        page, rest = indexes[:room], indexes[room:]
        topics.append(_topic(services, ctx, meta, page))
        if rest:
            next_cursor = {"topic_name": name, "partition_index": rest[0]}
            break
        room -= len(page)
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}


def _topic(services: DescribeTopicPartitionsServices, ctx: RequestContext, meta: TopicMetadata,
           indexes: list[int]) -> dict:
    return {"error_code": 0, "name": meta.name, "topic_id": meta.topic_id,
            "is_internal": meta.is_internal,
            "partitions": [partition_entry(services.metadata, meta, i) for i in indexes],
            "topic_authorized_operations": authorized_operations(
                services, ctx, ResourceType.TOPIC, meta.name)}


def _missing_topic(name: str) -> dict:
    try:
        validate_topic_name(name)
        code = Code.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError:
        code = Code.INVALID_TOPIC_EXCEPTION
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False,
            "partitions": []}
