"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Topic configs are stored as per-topic overrides in the coordinator; every other value comes
from the broker's config with Kafka's synonyms and sources (broker/config).

Broker resources, as Kafka in ZooKeeper mode: "" is the cluster-wide default entity, a
broker id is that broker (which must be the one answering: clients send it there). Altering
them stores dynamic configs with the coordinator (/config/brokers/<default> or /<id>), and
every broker puts them in force (broker.dynamic_configs). strom applies the keys
that are topic defaults (config.DYNAMIC_APPLIED) and refuses the others. Describing ""
lists the dynamic defaults only, as Kafka does.
"""
from __future__ import annotations

from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError, for_code

from typing import Protocol

from zkcoord.store import MetadataStore, TopicMetadata

from ...config import BROKER_CONFIG, CONFIG_SOURCE_IDS, TOPIC_CONFIG, BrokerConfig, ConfigEntry, ConfigError
from ...dynamic_configs import DynamicBrokerConfigs
from ...security.authorizer import Authorizer
from ...topic_admin import TopicAdmin
from ..authz import authorized, cluster_authorized
from ..dispatch import RequestContext, handles


class ConfigServices(Protocol):
    broker_id: int
    config: BrokerConfig
    store: MetadataStore
    topic_admin: TopicAdmin
    dynamic_configs: DynamicBrokerConfigs
    authorizer: Authorizer

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _refusal(services: ConfigServices, ctx: RequestContext, operation: AclOperation, res) -> KafkaError | None:
    """Kafka's check of a config resource: `operation` (DescribeConfigs or AlterConfigs) on
    the cluster for a broker or broker logger, on the topic for a topic; other types are
    left to the handler's own answer."""
    if res.resource_type in (BROKER, BROKER_LOGGER):
        if not cluster_authorized(services, ctx, operation):
            return _error(Code.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    elif res.resource_type == TOPIC:
        if not authorized(services, ctx, operation, ResourceType.TOPIC, res.resource_name):
            return _error(Code.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    return None


def _entry(e: ConfigEntry, version: int, include_synonyms: bool, include_docs: bool) -> dict:
    return {
        "name": e.name, "value": e.value, "read_only": e.read_only,
        "is_default": e.source == "DEFAULT_CONFIG", "config_source": e.source_id,
        "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": _source_id(s.source)}
                     for s in e.synonyms] if include_synonyms else [],
        "config_type": e.type_id, "documentation": e.doc if include_docs else None,
    }


def _source_id(source: str) -> int:
    return CONFIG_SOURCE_IDS[source]


def topic_config_entries(config: BrokerConfig, overrides: dict[str, str], include_synonyms: bool,
                         version: int = 4, include_docs: bool = False) -> list[dict]:
    return [_entry(e, version, include_synonyms, include_docs)
            for e in config.describe_topic_all(overrides)]


@handles("DescribeConfigs", (0, 4))
def describe_configs(services: ConfigServices, request, ctx: RequestContext) -> dict:
    v = ctx.version
    synonyms = request.include_synonyms if v >= 1 else False
    docs = request.include_documentation if v >= 3 else False
    results = []
    for res in request.resources:
        out = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
               "resource_name": res.resource_name, "configs": []}
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            refusal = _refusal(services, ctx, AclOperation.DESCRIBE_CONFIGS, res)
            if refusal is not None:
                raise refusal
            if res.resource_type == TOPIC:
                meta = services.store.topic(res.resource_name)
                if meta is None:
                    raise _error(Code.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic '{res.resource_name}' does not exist.")
                entries = services.config.describe_topic_all(meta.configs)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(services.broker_id)):
                    raise _error(Code.INVALID_REQUEST,
                                 f"Unexpected broker id, expected {services.broker_id} or empty string, "
                                 f"but received {res.resource_name}")
                entries = (services.config.describe_all() if res.resource_name
                           else services.config.describe_dynamic_defaults())
            elif res.resource_type == BROKER_LOGGER:
                entries = []
            else:
                raise _error(Code.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            out["configs"] = [_entry(e, v, synonyms, docs) for e in entries
                              if keys is None or e.name in keys]
        except KafkaError as e:
            out.update(error_code=e.code, error_message=e.message)
        results.append(out)
    return {"throttle_time_ms": 0, "results": results}


def _error(code: int, message: str) -> KafkaError:
    return for_code(code)(message)


def _alter_topic_check(services: ConfigServices, res) -> TopicMetadata:
    if res.resource_type != TOPIC:
        raise _error(Code.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
    meta = services.store.topic(res.resource_name)
    if meta is None:
        raise _error(Code.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{res.resource_name}' does not exist.")
    return meta


def _broker_entity(services: ConfigServices, res) -> int | None:
    """None for the cluster-wide default entity, else this broker's id (Kafka's getBrokerId)."""
    if res.resource_name == "":
        return None
    if res.resource_name != str(services.broker_id):
        raise _error(Code.INVALID_REQUEST, f"Unexpected broker id, expected {services.broker_id}, "
                                           f"but received {res.resource_name}")
    return services.broker_id


async def _alter_broker(services: ConfigServices, res, new_configs, validate_only: bool) -> None:
    entity = _broker_entity(services, res)
    # As Kafka (fetchEntityConfig): what is stored now, not the watch's cache.
    configs = new_configs(await services.store.fetch_broker_configs(entity))
    try:
        services.dynamic_configs.check(entity, configs)
    except ConfigError as e:
        # Kafka (ZooKeeper mode) answers every invalid broker config with INVALID_REQUEST.
        name = "" if entity is None else str(entity)
        raise _error(Code.INVALID_REQUEST, f"Invalid config value for resource "
                                           f"ConfigResource(type=BROKER, name='{name}'): {e}") from None
    if validate_only:
        return
    await services.store.set_broker_configs(entity, configs)
    services.dynamic_configs.load()


async def _alter_each(services: ConfigServices, request, ctx: RequestContext, new_configs) -> dict:
    """Apply `new_configs(resource, current) -> dict` to each resource the principal may
    AlterConfigs; one result each."""
    out = []
    for res in request.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": res.resource_type,
                 "resource_name": res.resource_name}
        try:
            refusal = _refusal(services, ctx, AclOperation.ALTER_CONFIGS, res)
            if refusal is not None:
                raise refusal
            if res.resource_type == BROKER:
                await _alter_broker(services, res, lambda cur: new_configs(res, cur, BROKER_CONFIG),
                                    request.validate_only)
            else:
                current = _alter_topic_check(services, res).configs
                await services.topic_admin.set_configs(
                    res.resource_name, new_configs(res, current, TOPIC_CONFIG), request.validate_only)
        except KafkaError as e:
            entry.update(error_code=e.code, error_message=e.message)
        out.append(entry)
    return {"throttle_time_ms": 0, "responses": out}


@handles("AlterConfigs", (0, 2))
async def alter_configs(services: ConfigServices, request, ctx: RequestContext) -> dict:
    # AlterConfigs replaces the whole set of overrides.
    # Entries without a value are dropped, as Kafka's ZkAdminManager.alterConfigs does.
    return await _alter_each(services, request, ctx, lambda res, current, table: {
        c.name: c.value for c in res.configs if c.value is not None})


def _apply_ops(current: dict[str, str], ops, table) -> dict[str, str]:
    configs = dict(current)
    for op in ops:
        spec = table.get(op.name)
        if op.config_operation == SET:
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if spec is None or spec.type != "list":
                raise _error(Code.INVALID_CONFIG,
                             f"Config value append is not allowed for config key: {op.name}")
            base = configs.get(op.name)
            if base is None:
                base = spec.default_string() or ""
            items = [x.strip() for x in base.split(",") if x.strip()]
            new = [x.strip() for x in (op.value or "").split(",") if x.strip()]
            if op.config_operation == APPEND:
                items += [x for x in new if x not in items]
            else:
                items = [x for x in items if x not in new]
            configs[op.name] = ",".join(items)
        else:
            raise _error(Code.INVALID_REQUEST, f"Unknown config operation {op.config_operation}")
    return configs


@handles("IncrementalAlterConfigs", (0, 1))
async def incremental_alter_configs(services: ConfigServices, request, ctx: RequestContext) -> dict:
    return await _alter_each(
        services, request, ctx, lambda res, current, table: _apply_ops(current, res.configs, table))
