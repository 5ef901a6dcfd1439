"""CreateTopics, DeleteTopics, CreatePartitions.

Authorization as Kafka's: creating needs Create on the cluster or on the topic (and its
configs are told only with DescribeConfigs on it), deleting Delete on the topic (by id,
also Describe, or the name stays untold), adding partitions Alter on the topic."""
from __future__ import annotations

import uuid

from typing import Protocol

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore

from ...config import BrokerConfig
from ...security.authorizer import Authorizer
from ...topic_admin import TopicAdmin
from ..authz import authorized_names, cluster_authorized
from ..dispatch import RequestContext, handles
from .configs import topic_config_entries


class TopicServices(Protocol):
    config: BrokerConfig
    store: MetadataStore
    topic_admin: TopicAdmin
    authorizer: Authorizer


def _allowed(services: TopicServices, ctx: RequestContext, operation: AclOperation, names) -> set[str]:
    return authorized_names(services, ctx, operation, ResourceType.TOPIC, names)


@handles("CreateTopics", (0, 7))
async def create_topics(services: TopicServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    validate_only = request.validate_only if v >= 1 else False
    names = {t.name for t in request.topics}
    creatable = (names if cluster_authorized(services, ctx, AclOperation.CREATE)
                 else _allowed(services, ctx, AclOperation.CREATE, names))
    configs_told = _allowed(services, ctx, AclOperation.DESCRIBE_CONFIGS, names)
    results = []
    seen: set[str] = set()
    for t in request.topics:
        entry = {"name": t.name, "topic_id": uuid.UUID(int=0), "error_code": 0, "error_message": None,
                 "num_partitions": -1, "replication_factor": -1, "configs": None}
        if t.name in seen:
            entry.update(error_code=Code.INVALID_REQUEST, error_message="Duplicate topic in request.")
            results.append(entry)
            continue
        seen.add(t.name)
        if t.name not in creatable:
            entry.update(error_code=Code.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
            if t.name not in configs_told:
                entry["topic_config_error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
            results.append(entry)
            continue
        try:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            configs = {c.name: c.value for c in t.configs}
            meta = await services.topic_admin.create(t.name, t.num_partitions, t.replication_factor,
                                                   assignments, configs, validate_only)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        else:
            entry["topic_id"] = meta.topic_id
            if t.name not in configs_told:
                # Created, but what it was created with is not told (Kafka: DescribeConfigs).
                entry["topic_config_error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
                results.append(entry)
                continue
            entry["num_partitions"] = len(meta.partitions)
            entry["replication_factor"] = len(next(iter(meta.partitions.values())))
            entry["configs"] = [
                {"name": c["name"], "value": c["value"], "read_only": c["read_only"],
                 "config_source": c["config_source"], "is_sensitive": c["is_sensitive"]}
                for c in topic_config_entries(services.config, meta.configs, include_synonyms=False)
            ]
        results.append(entry)
    return {"throttle_time_ms": 0, "topics": results}


@handles("DeleteTopics", (0, 6))
async def delete_topics(services: TopicServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    if v >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    # (name, asked by id, response entry); a topic id unknown here has no name.
    resolved: list[tuple[str | None, bool, dict]] = []
    for name, topic_id in wanted:
        entry = {"name": name, "topic_id": topic_id or uuid.UUID(int=0), "error_code": 0, "error_message": None}
        by_id = name is None and topic_id is not None
        if by_id:
            meta = services.store.topic_by_id(topic_id)
            name = entry["name"] = meta.name if meta is not None else None
        resolved.append((name, by_id, entry))
    names = {name for name, _, _ in resolved if name is not None}
    describable = _allowed(services, ctx, AclOperation.DESCRIBE, names)
    deletable = _allowed(services, ctx, AclOperation.DELETE, names)
    out = []
    for name, by_id, entry in resolved:
        out.append(entry)
        if name is None:
            entry["error_code"] = Code.UNKNOWN_TOPIC_ID if by_id else Code.UNKNOWN_TOPIC_OR_PARTITION
        elif by_id and name not in describable:
            # The id is not secret, the name is: not told without Describe.
            entry.update(name=None, error_code=Code.TOPIC_AUTHORIZATION_FAILED)
        elif name not in deletable:
            entry["error_code"] = Code.TOPIC_AUTHORIZATION_FAILED
        else:
            try:
                meta = await services.topic_admin.delete(name)
                entry["topic_id"] = meta.topic_id
            except KafkaError as e:
                entry.update(error_code=e.code, error_message=e.message)
    return {"throttle_time_ms": 0, "responses": out}


@handles("CreatePartitions", (0, 3))
async def create_partitions(services: TopicServices, request, ctx: RequestContext) -> dict:
    alterable = _allowed(services, ctx, AclOperation.ALTER, {t.name for t in request.topics})
    out = []
    for t in request.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        if t.name not in alterable:
            entry.update(error_code=Code.TOPIC_AUTHORIZATION_FAILED,
                         error_message="The topic authorization is failed.")
            out.append(entry)
            continue
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            await services.topic_admin.add_partitions(t.name, t.count, assignments, request.validate_only)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "results": out}
