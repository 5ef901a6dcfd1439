"""Confluent's v3 topic config routes: list, get, update (PUT), reset (DELETE) and the
batch `configs:alter`, on IncrementalAlterConfigs (`AsyncAdminClient.alter_configs`).

As in Confluent's TopicConfigManager, a write first reads the topic's configs and refuses a
name the topic does not have (404, "Config X cannot be found for TOPIC t in cluster c."),
then alters only the keys named; a batch goes to the broker as one request.

Two gaps, both from what strom's admin client offers: `synonyms` lists only the config
itself at its own source (the client does not ask the broker for synonyms), and a batch
with `validate_only` is checked here (names, operations, values present) but not by the
broker, which the client cannot ask to validate without applying.
"""
from __future__ import annotations

from typing import Any

from aiohttp import web

from clients.aio.admin import ConfigEntry
from clients.protocol.errors import KafkaError
from clients.rest.errors import KAFKA_BAD_REQUEST, RestError, bad_request
from clients.rest.kafka import ClientPool
from clients.rest.v3_admin_common import (CLUSTER_CANNOT, AdminCall, Links, begin, collection,
                                          json_body, kafka_error, not_found, resource_metadata)

__all__ = ["TopicConfigRoutes", "topic_config_data"]

CONFIGS = "/v3/clusters/{cluster_id}/topics/{topic_name}/configs"
_OPERATIONS = ("SET", "DELETE")


def topic_config_data(links: Links, topic: str, c: ConfigEntry) -> dict[str, Any]:
    return {
        "kind": "KafkaTopicConfig",
        "metadata": resource_metadata(links.url("topics", topic, "configs", c.name),
                                      links.crn("topic", topic, "config", c.name)),
        "cluster_id": links.cluster_id,
        "topic_name": topic,
        "name": c.name,
        "value": c.value,
        "is_default": c.is_default,
        "is_read_only": c.read_only,
        "is_sensitive": c.sensitive,
        "source": c.source,
        "synonyms": [{"name": c.name, "value": c.value, "source": c.source}],
    }


def _null_values(names: list[str]) -> RestError:
    # The broker's InvalidRequestException for a SET without a value, through KafkaExceptionMapper.
    return RestError(400, KAFKA_BAD_REQUEST, "Null value not supported for : " + ", ".join(names))


class TopicConfigRoutes:
    def __init__(self, pool: ClientPool):
        self.pool = pool

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(CONFIGS, self.list_configs),
            web.get(CONFIGS + "/{name}", self.get_config),
            web.put(CONFIGS + "/{name}", self.update_config),
            web.delete(CONFIGS + "/{name}", self.reset_config),
            web.post(CONFIGS + ":alter", self.alter_configs),
        ]

    async def _configs(self, call: AdminCall, topic: str) -> dict[str, ConfigEntry]:
        try:
            return await call.clients.admin.describe_configs("topic", topic)
        except KafkaError as e:
            raise kafka_error(e, f"topic {topic}") from e

    async def _existing(self, call: AdminCall, topic: str, names: list[str]) -> None:
        """404 naming the first of `names` the topic has no config of."""
        known = await self._configs(call, topic)
        for name in names:
            if name not in known:
                raise not_found(f"Config {name} cannot be found for TOPIC {topic} "
                                f"in cluster {call.cluster_id}.")

    async def _alter(self, call: AdminCall, topic: str, values: dict[str, str],
                     delete: list[str]) -> None:
        try:
            await call.clients.admin.alter_configs("topic", topic, set=values, delete=delete)
        except KafkaError as e:
            raise kafka_error(e, f"topic {topic}") from e

    async def list_configs(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic = request.match_info["topic_name"]
        configs = await self._configs(call, topic)
        data = [topic_config_data(call.links, topic, configs[n]) for n in sorted(configs)]
        return call.ok(collection("KafkaTopicConfigList",
                                  call.links.url("topics", topic, "configs"), data))

    async def get_config(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic, name = request.match_info["topic_name"], request.match_info["name"]
        entry = (await self._configs(call, topic)).get(name)
        if entry is None:
            raise not_found()
        return call.ok(topic_config_data(call.links, topic, entry))

    async def update_config(self, request: web.Request) -> web.Response:
        """PUT {"value": ...}: set one config; 204."""
        body = await json_body(request)
        if not isinstance(body, dict):
            raise bad_request("Cannot deserialize value of type `UpdateConfigRequest` "
                              "from a non-object")
        value = body.get("value")
        if value is not None and not isinstance(value, str):
            raise bad_request("value must be a string or null")
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic, name = request.match_info["topic_name"], request.match_info["name"]
        await self._existing(call, topic, [name])
        if value is None:
            raise _null_values([name])
        await self._alter(call, topic, {name: value}, [])
        return web.Response(status=204)

    async def reset_config(self, request: web.Request) -> web.Response:
        """DELETE: return one config to its default; 204."""
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic, name = request.match_info["topic_name"], request.match_info["name"]
        await self._existing(call, topic, [name])
        await self._alter(call, topic, {}, [name])
        return web.Response(status=204)

    async def alter_configs(self, request: web.Request) -> web.Response:
        """POST configs:alter {"data": [{"name", "value", "operation": SET|DELETE}],
        "validate_only"}: every change in one IncrementalAlterConfigs; 204."""
        changes, validate_only = parse_alter_batch(await json_body(request))
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic = request.match_info["topic_name"]
        await self._existing(call, topic, [name for name, _, _ in changes])
        names = [name for name, _, _ in changes]
        if len(set(names)) != len(names):
            raise RestError(400, KAFKA_BAD_REQUEST, "Error due to duplicate config keys")
        nulls = [name for name, op, value in changes if op == "SET" and value is None]
        if nulls:
            raise _null_values(nulls)
        if validate_only:
            return web.Response(status=204)
        values = {name: value for name, op, value in changes if op == "SET" and value is not None}
        await self._alter(call, topic, values, [name for name, op, _ in changes if op == "DELETE"])
        return web.Response(status=204)


def parse_alter_batch(body: Any) -> tuple[list[tuple[str, str, str | None]], bool]:
    """AlterConfigBatchRequestData -> ([(name, SET|DELETE, value)], validate_only); a wrong
    shape is 400/400 (a Jackson mapping error). An absent operation is SET, as Confluent's."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise bad_request("Missing required properties: data")
    changes = []
    for entry in body["data"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise bad_request("data must be a list of "
                              "{\"name\": ..., \"value\": ..., \"operation\": ...}")
        op = entry.get("operation") or "SET"
        if op not in _OPERATIONS:
            raise bad_request(f"Cannot deserialize value of type `AlterOperation` from String "
                              f"\"{op}\": not one of the values accepted for Enum class: "
                              f"[SET, DELETE]")
        value = entry.get("value")
        if value is not None and not isinstance(value, str):
            raise bad_request(f"the value of {entry['name']} must be a string or null")
        changes.append((entry["name"], op, value))
    validate_only = body.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be true or false")
    return changes, validate_only
