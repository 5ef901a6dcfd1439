"""v2's topic metadata and produce routes, as Confluent's TopicsResource, PartitionsResource,
BrokersResource, ProduceToTopicAction and ProduceToPartitionAction answer them:

    GET  /topics                                   ["t1", "t2"] (internal topics left out)
    GET  /topics/{t}                               {"name", "configs", "partitions"}
    POST /topics/{t}                               produce; {"offsets", "key_schema_id", ...}
    GET  /topics/{t}/partitions                    [{"partition", "leader", "replicas"}]
    GET  /topics/{t}/partitions/{p}                {"partition", "leader", "replicas"}
    GET  /topics/{t}/partitions/{p}/offsets        {"beginning_offset", "end_offset"}
    POST /topics/{t}/partitions/{p}                produce to one partition
    GET  /brokers                                  {"brokers": [ids]}

An unknown topic is 404/40401, an unknown partition 404/40402, a partition that is not an
integer 404 (JAX-RS cannot bind it). Produce bodies are read and answered by
`v2_produce_codec`. The topic (and any partition named) is checked before anything is
sent: a missing topic is created when the brokers auto-create topics (as producing through
Confluent's proxy makes Kafka do), else 404 at once rather than after max.block.ms. Every
record of a request is handed to the producer before any is awaited, so they share batches.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from clients.aio.admin import PartitionDescription, TopicDescription
from clients.protocol.errors import KafkaError
from clients.rest.bodies import (V2_METADATA_TYPES, json_response, negotiate, read_json,
                                 require_content_type)
from clients.rest.config import RestProxyConfig
from clients.rest.errors import (KAFKA_BAD_REQUEST, TOPIC_NOT_FOUND, RestError, from_kafka,
                                 partition_not_found, topic_not_found)
from clients.rest.kafka import ClientPool, KafkaClients
from clients.rest.v2_produce_codec import (EMBEDDED_FORMATS, PRODUCE_TYPES, ProduceRecord,
                                           parse_produce_request, produce_response)
from clients.types import RecordMetadata, TopicPartition

__all__ = ["V2TopicsResource", "partition_body", "topic_body"]

log = logging.getLogger("strom.rest.v2")


def partition_body(p: PartitionDescription) -> dict[str, Any]:
    """A partition as v2's GetPartitionResponse: leader -1 when it has none."""
    isr = set(p.isr)
    return {"partition": p.partition, "leader": p.leader,
            "replicas": [{"broker": b, "leader": b == p.leader, "in_sync": b in isr}
                         for b in p.replicas]}


def topic_body(t: TopicDescription, configs: dict[str, str | None]) -> dict[str, Any]:
    """A topic as v2's GetTopicResponse: every config of the topic by name (a sensitive
    value is null), the partitions in order."""
    return {"name": t.name, "configs": dict(sorted(configs.items())),
            "partitions": [partition_body(p) for p in t.partitions]}


def _partition_id(request: web.Request) -> int:
    """The {partition} of the path; not an integer is 404, as JAX-RS answers a path
    parameter it cannot convert."""
    try:
        return int(request.match_info["partition"])
    except ValueError:
        raise web.HTTPNotFound() from None


class V2TopicsResource:
    """The routes above. The clients are the pool's; the only state kept is the brokers'
    auto.create.topics.enable once read. Requests may run concurrently."""

    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config
        self._auto_create: bool | None = None

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/topics", self.list_topics),
            web.get("/topics/{topic}", self.get_topic),
            web.post("/topics/{topic}", self.produce_to_topic),
            web.get("/topics/{topic}/partitions", self.list_partitions),
            web.get("/topics/{topic}/partitions/{partition}", self.get_partition),
            web.post("/topics/{topic}/partitions/{partition}", self.produce_to_partition),
            web.get("/topics/{topic}/partitions/{partition}/offsets", self.get_offsets),
            web.get("/brokers", self.list_brokers),
        ]

    async def close(self) -> None:
        pass

    # ------------------------------------------------------------------ metadata

    async def _describe(self, clients: KafkaClients, topic: str) -> TopicDescription:
        """The topic's description; 404/40401 when it does not exist."""
        try:
            return (await clients.admin.describe_topics([topic]))[topic]
        except KafkaError as e:
            if e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                raise topic_not_found() from None
            if e.name == "INVALID_TOPIC_EXCEPTION":      # KafkaExceptionMapper: 400/40002
                raise RestError(400, KAFKA_BAD_REQUEST, e.message) from None
            raise from_kafka(e) from e

    @staticmethod
    def _partition(t: TopicDescription, partition: int) -> PartitionDescription:
        for p in t.partitions:
            if p.partition == partition:
                return p
        raise partition_not_found()

    async def list_topics(self, request: web.Request) -> web.Response:
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        return json_response(await clients.admin.list_topics(), content_type=produced)

    async def get_topic(self, request: web.Request) -> web.Response:
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        name = request.match_info["topic"]
        topic = await self._describe(clients, name)
        entries = await clients.admin.describe_configs("topic", name)
        configs = {k: e.value for k, e in entries.items()}
        return json_response(topic_body(topic, configs), content_type=produced)

    async def list_partitions(self, request: web.Request) -> web.Response:
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        topic = await self._describe(clients, request.match_info["topic"])
        return json_response([partition_body(p) for p in topic.partitions], content_type=produced)

    async def get_partition(self, request: web.Request) -> web.Response:
        partition = _partition_id(request)
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        topic = await self._describe(clients, request.match_info["topic"])
        return json_response(partition_body(self._partition(topic, partition)),
                             content_type=produced)

    async def get_offsets(self, request: web.Request) -> web.Response:
        partition = _partition_id(request)
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        topic = await self._describe(clients, request.match_info["topic"])
        self._partition(topic, partition)
        tp = TopicPartition(topic.name, partition)
        first, end = await asyncio.gather(clients.admin.list_offsets({tp: "earliest"}),
                                          clients.admin.list_offsets({tp: "latest"}))
        return json_response({"beginning_offset": first[tp].offset, "end_offset": end[tp].offset},
                             content_type=produced)

    async def list_brokers(self, request: web.Request) -> web.Response:
        produced = negotiate(request, V2_METADATA_TYPES)
        clients = await self.pool.for_request(request)
        cluster = await clients.admin.describe_cluster()
        return json_response({"brokers": [b.node_id for b in cluster.brokers]},
                             content_type=produced)

    # ------------------------------------------------------------------ produce

    async def produce_to_topic(self, request: web.Request) -> web.Response:
        return await self._produce(request, None)

    async def produce_to_partition(self, request: web.Request) -> web.Response:
        return await self._produce(request, _partition_id(request))

    async def _produce(self, request: web.Request, partition: int | None) -> web.Response:
        self.pool.principal(request)        # 401 comes before anything about the body
        embedded = EMBEDDED_FORMATS[require_content_type(request, PRODUCE_TYPES)]
        produced = negotiate(request, V2_METADATA_TYPES)
        records = parse_produce_request(await read_json(request), embedded)
        clients = await self.pool.for_request(request)
        topic = request.match_info["topic"]
        known = await self._partitions_for_produce(clients, topic)
        # A record's own partition wins over the route's, as in Confluent's produce action.
        chosen = [partition if r.partition is None else r.partition for r in records]
        if any(p is not None and p not in known for p in chosen):
            raise partition_not_found()
        outcomes = await self._send_all(clients, topic, records, chosen)
        status, body = produce_response(outcomes)
        return json_response(body, status=status, content_type=produced)

    async def _partitions_for_produce(self, clients: KafkaClients, topic: str) -> set[int]:
        """The partition ids of the topic produced to. A topic that does not exist is
        created when the broker's auto.create.topics.enable is on, as the Java producer
        behind Confluent's proxy makes Kafka create it (the producer's metadata request
        asks for it); else 404/40401 at once instead of after max.block.ms."""
        try:
            return {p.partition for p in (await self._describe(clients, topic)).partitions}
        except RestError as e:
            if e.error_code != TOPIC_NOT_FOUND or not await self._broker_auto_creates(clients):
                raise
        try:
            return set(await clients.producer.partitions_for(topic))
        except KafkaError as e:
            if e.name == "UNKNOWN_TOPIC_OR_PARTITION":
                raise topic_not_found() from None
            raise from_kafka(e) from e

    async def _broker_auto_creates(self, clients: KafkaClients) -> bool:
        """The brokers' auto.create.topics.enable (read-only in a running broker, so read
        once); False when it cannot be read (the request then answers 404)."""
        if self._auto_create is None:
            try:
                cluster = await clients.admin.describe_cluster()
                entries = await clients.admin.describe_configs(
                    "broker", str(cluster.brokers[0].node_id), ["auto.create.topics.enable"])
            except Exception:
                log.debug("cannot read auto.create.topics.enable", exc_info=True)
                return False
            entry = entries.get("auto.create.topics.enable")
            self._auto_create = entry is not None and (entry.value or "").lower() == "true"
        return self._auto_create

    @staticmethod
    async def _send_all(clients: KafkaClients, topic: str, records: list[ProduceRecord],
                        partitions: list[int | None]) -> list[RecordMetadata | BaseException]:
        """Each record's metadata or error, in order: all are handed to the producer before
        any delivery is awaited. A record the producer refuses at once (too large, no
        buffer memory in time) fails in place; the others still go."""
        pending: list[asyncio.Future[RecordMetadata] | BaseException] = []
        for r, p in zip(records, partitions):
            try:
                pending.append(await clients.producer.send(topic, value=r.value, key=r.key,
                                                           partition=p))
            except Exception as e:
                pending.append(e)
        outcomes: list[RecordMetadata | BaseException] = []
        for f in pending:
            if isinstance(f, BaseException):
                outcomes.append(f)
                continue
            try:
                outcomes.append(await f)
            except Exception as e:
                outcomes.append(e)
        return outcomes
