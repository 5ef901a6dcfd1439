"""CreateTopics, DeleteTopics, CreatePartitions."""
from __future__ import annotations

import uuid

from typing import Protocol

from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore

from ...config import BrokerConfig
from ...topic_admin import TopicAdmin
from ..dispatch import RequestContext, handles
from .configs import topic_config_entries


class TopicServices(Protocol):
    config: BrokerConfig
    store: MetadataStore
    topic_admin: TopicAdmin


@handles("CreateTopics", (0, 7))
async def create_topics(services: TopicServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    validate_only = request.validate_only if v >= 1 else False
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
        try:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            configs = {c.name: c.value for c in t.configs}
            meta = await services.topic_admin.create(t.name, t.num_partitions, t.replication_factor,
                                                   assignments, configs, validate_only)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        else:
            entry["topic_id"] = meta.topic_id
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
    out = []
    for name, topic_id in wanted:
        entry = {"name": name, "topic_id": topic_id or uuid.UUID(int=0), "error_code": 0, "error_message": None}
        try:
            if name is None and topic_id is not None:
                meta = services.store.topic_by_id(topic_id)
                if meta is None:
                    entry["error_code"] = Code.UNKNOWN_TOPIC_ID
                    out.append(entry)
                    continue
                name = entry["name"] = meta.name
            meta = await services.topic_admin.delete(name)
            entry["topic_id"] = meta.topic_id
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "responses": out}


@handles("CreatePartitions", (0, 3))
async def create_partitions(services: TopicServices, request, ctx: RequestContext) -> dict:
    out = []
    for t in request.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            await services.topic_admin.add_partitions(t.name, t.count, assignments, request.validate_only)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "results": out}
