"""Confluent's v3 admin routes: clusters, brokers, topics and partitions here; topic configs
in `v3_admin_configs`, consumer groups and lags in `v3_admin_groups`.

Every answer is `application/json` with Confluent's entities (`KafkaCluster`,
`KafkaBroker`, `KafkaTopic`, `KafkaPartition` and their `...List` collections) and the error
bodies Confluent's resources give: a cluster id that is not this cluster's is 404, an
unknown topic 404/40403 with Kafka's message (the admin client's
UnknownTopicOrPartitionException through rest-utils' KafkaExceptionMapper), an existing one
400/40002, an unknown broker or partition JAX-RS's bare 404.
"""
from __future__ import annotations

from typing import Any

from aiohttp import web

from clients.aio.admin import BrokerInfo, TopicDescription
from clients.protocol.errors import KafkaError
from clients.rest.config import RestProxyConfig
from clients.rest.errors import KAFKA_BAD_REQUEST, RestError, bad_request
from clients.rest.kafka import ClientPool
from clients.rest.v3_admin_common import (CLUSTER_CANNOT, AdminCall, Links, begin, collection,
                                          json_body, kafka_error, not_found, resource_metadata)
from clients.rest.v3_admin_configs import TopicConfigRoutes
from clients.rest.v3_admin_groups import ConsumerGroupRoutes
from clients.types import NewTopic

__all__ = ["V3AdminResource"]

TOPIC = "/v3/clusters/{cluster_id}/topics/{topic_name}"


def cluster_data(links: Links, controller_id: int) -> dict[str, Any]:
    return {
        "kind": "KafkaCluster",
        "metadata": resource_metadata(links.url(), links.crn()),
        "cluster_id": links.cluster_id,
        "controller": links.related("brokers", controller_id) if controller_id >= 0 else None,
        "acls": links.related("acls"),
        "brokers": links.related("brokers"),
        "broker_configs": links.related("broker-configs"),
        "consumer_groups": links.related("consumer-groups"),
        "topics": links.related("topics"),
        "partition_reassignments": links.related("topics", "-", "partitions", "-", "reassignment"),
    }


def broker_data(links: Links, b: BrokerInfo) -> dict[str, Any]:
    return {
        "kind": "KafkaBroker",
        "metadata": resource_metadata(links.url("brokers", b.node_id),
                                      links.crn("broker", b.node_id)),
        "cluster_id": links.cluster_id,
        "broker_id": b.node_id,
        "host": b.host,
        "port": b.port,
        "rack": b.rack,
        "configs": links.related("brokers", b.node_id, "configs"),
        "partition_replicas": links.related("brokers", b.node_id, "partition-replicas"),
    }


def topic_data(links: Links, name: str, internal: bool, partitions: int,
               replication_factor: int) -> dict[str, Any]:
    return {
        "kind": "KafkaTopic",
        "metadata": resource_metadata(links.url("topics", name), links.crn("topic", name)),
        "cluster_id": links.cluster_id,
        "topic_name": name,
        "is_internal": internal,
        "replication_factor": replication_factor,
        "partitions_count": partitions,
        "partitions": links.related("topics", name, "partitions"),
        "configs": links.related("topics", name, "configs"),
        "partition_reassignments": links.related("topics", name, "partitions", "-", "reassignment"),
    }


def described_topic_data(links: Links, t: TopicDescription) -> dict[str, Any]:
    # Kafka's TopicDescription has no replication factor: Confluent takes partition 0's.
    replicas = len(t.partitions[0].replicas) if t.partitions else 0
    return topic_data(links, t.name, t.internal, len(t.partitions), replicas)


def partition_data(links: Links, topic: str, partition: int, leader: int) -> dict[str, Any]:
    here = ("topics", topic, "partitions", partition)
    return {
        "kind": "KafkaPartition",
        "metadata": resource_metadata(links.url(*here),
                                      links.crn("topic", topic, "partition", partition)),
        "cluster_id": links.cluster_id,
        "topic_name": topic,
        "partition_id": partition,
        "leader": links.related(*here, "replicas", leader) if leader >= 0 else None,
        "replicas": links.related(*here, "replicas"),
        "reassignment": links.related(*here, "reassignment"),
    }


def _int_param(request: web.Request, name: str) -> int:
    """An integer path parameter; anything else is 404, as JAX-RS answers a path it cannot
    convert."""
    try:
        return int(request.match_info[name])
    except ValueError:
        raise not_found() from None


class V3AdminResource:
    """The v3 admin routes, on the principal's admin client from `pool`."""

    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config
        self.topic_configs = TopicConfigRoutes(pool)
        self.groups = ConsumerGroupRoutes(pool)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v3/clusters", self.list_clusters),
            web.get("/v3/clusters/{cluster_id}", self.get_cluster),
            web.get("/v3/clusters/{cluster_id}/brokers", self.list_brokers),
            web.get("/v3/clusters/{cluster_id}/brokers/{broker_id}", self.get_broker),
            web.get("/v3/clusters/{cluster_id}/topics", self.list_topics),
            web.post("/v3/clusters/{cluster_id}/topics", self.create_topic),
            web.get(TOPIC, self.get_topic),
            web.delete(TOPIC, self.delete_topic),
            web.get(TOPIC + "/partitions", self.list_partitions),
            web.get(TOPIC + "/partitions/{partition_id}", self.get_partition),
            *self.topic_configs.routes(),
            *self.groups.routes(),
        ]

    async def close(self) -> None:
        await self.groups.close()

    # ------------------------------------------------------------------ clusters, brokers

    async def list_clusters(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, None)
        described = await call.clients.admin.describe_cluster()
        base = f"{call.links.base}/v3/clusters"
        return call.ok(collection("KafkaClusterList", base,
                                  [cluster_data(call.links, described.controller_id)]))

    async def get_cluster(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, None)
        described = await call.clients.admin.describe_cluster()
        return call.ok(cluster_data(call.links, described.controller_id))

    async def list_brokers(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        described = await call.clients.admin.describe_cluster()
        return call.ok(collection("KafkaBrokerList", call.links.url("brokers"),
                                  [broker_data(call.links, b) for b in described.brokers]))

    async def get_broker(self, request: web.Request) -> web.Response:
        broker_id = _int_param(request, "broker_id")
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        described = await call.clients.admin.describe_cluster()
        for b in described.brokers:
            if b.node_id == broker_id:
                return call.ok(broker_data(call.links, b))
        raise not_found()

    # ------------------------------------------------------------------ topics

    async def _describe(self, call: AdminCall, name: str) -> TopicDescription:
        try:
            return (await call.clients.admin.describe_topics([name]))[name]
        except KafkaError as e:
            raise kafka_error(e, f"topic {name}") from e

    async def list_topics(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        described = await call.clients.admin.describe_topics(None)     # internal ones left out
        data = [described_topic_data(call.links, described[n]) for n in sorted(described)]
        return call.ok(collection("KafkaTopicList", call.links.url("topics"), data))

    async def get_topic(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic = await self._describe(call, request.match_info["topic_name"])
        return call.ok(described_topic_data(call.links, topic))

    async def create_topic(self, request: web.Request) -> web.Response:
        """201 with the topic (as described once created; for `validate_only`, the counts
        asked for, or the broker's defaults) and its URL as Location."""
        new, validate_only = parse_create_topic(await json_body(request))
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        admin = call.clients.admin
        try:
            await admin.create_topics([new], validate_only=validate_only)
            if validate_only:
                partitions, replicas = await self._defaults(call, new)
                body = topic_data(call.links, new.name, False, partitions, replicas)
            else:
                body = described_topic_data(call.links, await self._describe(call, new.name))
        except KafkaError as e:
            raise kafka_error(e, f"topic {new.name}") from e
        return call.ok(body, 201, {"Location": body["metadata"]["self"]})

    async def _defaults(self, call: AdminCall, new: NewTopic) -> tuple[int, int]:
        """(partitions, replication factor) a topic created as `new` would get."""
        if new.replica_assignment:
            return len(new.replica_assignment), len(next(iter(new.replica_assignment.values())))
        if new.num_partitions >= 0 and new.replication_factor >= 0:
            return new.num_partitions, new.replication_factor
        described = await call.clients.admin.describe_cluster()
        node = (described.controller_id if described.controller_id >= 0
                else described.brokers[0].node_id)
        configs = await call.clients.admin.describe_configs(
            "broker", str(node), ["num.partitions", "default.replication.factor"])

        def default(key: str, fallback: int) -> int:
            entry = configs.get(key)
            return int(entry.value) if entry is not None and entry.value else fallback
        return (new.num_partitions if new.num_partitions >= 0 else default("num.partitions", 1),
                new.replication_factor if new.replication_factor >= 0
                else default("default.replication.factor", 1))

    async def delete_topic(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        name = request.match_info["topic_name"]
        try:
            await call.clients.admin.delete_topics([name])
        except KafkaError as e:
            raise kafka_error(e, f"topic {name}") from e
        return web.Response(status=204)

    # ------------------------------------------------------------------ partitions

    async def list_partitions(self, request: web.Request) -> web.Response:
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic = await self._describe(call, request.match_info["topic_name"])
        data = [partition_data(call.links, topic.name, p.partition, p.leader)
                for p in topic.partitions]
        return call.ok(collection("KafkaPartitionList",
                                  call.links.url("topics", topic.name, "partitions"), data))

    async def get_partition(self, request: web.Request) -> web.Response:
        partition = _int_param(request, "partition_id")
        call = await begin(self.pool, request, CLUSTER_CANNOT)
        topic = await self._describe(call, request.match_info["topic_name"])
        for p in topic.partitions:
            if p.partition == partition:
                return call.ok(partition_data(call.links, topic.name, p.partition, p.leader))
        raise not_found()


def _check_int(value: Any, key: str, bits: int) -> None:
    """An integer that fits the Java type of the field (Integer: 32 bits, Short: 16), else
    400 as Jackson's "Numeric value out of range" is."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"{key} must be an integer")
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise bad_request(f"Numeric value ({value}) of {key} out of range of a {bits}-bit integer")


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(f"{key} must be a list")
    return value


def parse_create_topic(body: Any) -> tuple[NewTopic, bool]:
    """CreateTopicRequest -> (NewTopic, validate_only). A wrong shape is 400 with the bare
    status as the code, as rest-utils answers a Jackson mapping error under v3."""
    if not isinstance(body, dict):
        raise bad_request("Cannot deserialize value of type `CreateTopicRequest` from a non-object")
    name = body.get("topic_name")
    if not isinstance(name, str):
        raise bad_request("Missing required properties: topicName" if name is None
                          else "topic_name must be a string")
    counts = {}
    for key, bits in (("partitions_count", 32), ("replication_factor", 16)):   # Integer, Short
        value = body.get(key)
        if value is not None:
            _check_int(value, key, bits)
        counts[key] = -1 if value is None else value
    configs: dict[str, str] = {}
    nulls: list[str] = []
    for entry in _list(body, "configs"):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise bad_request("configs must be a list of {\"name\": ..., \"value\": ...}")
        value = entry.get("value")
        if value is None:
            nulls.append(entry["name"])
        elif not isinstance(value, str):
            raise bad_request(f"configs: the value of {entry['name']} must be a string")
        else:
            configs[entry["name"]] = value
    if nulls:   # Kafka's controller refuses these (InvalidConfigurationException)
        raise RestError(400, KAFKA_BAD_REQUEST, "Null value not supported for topic configs: "
                        + ",".join(nulls))
    assignment: dict[int, list[int]] | None = None
    for entry in _list(body, "replicas_assignments"):
        ids = entry.get("broker_ids") if isinstance(entry, dict) else None
        pid = entry.get("partition_id") if isinstance(entry, dict) else None
        if (not isinstance(pid, int) or not isinstance(ids, list)
                or not all(isinstance(i, int) for i in ids)):
            raise bad_request("replicas_assignments must be a list of "
                              "{\"partition_id\": ..., \"broker_ids\": [...]}")
        _check_int(pid, "partition_id", 32)
        for i in ids:
            _check_int(i, "broker_ids", 32)
        assignment = assignment or {}
        assignment[pid] = ids
    validate_only = body.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be true or false")
    return NewTopic(name, counts["partitions_count"], counts["replication_factor"], configs,
                    assignment), validate_only
