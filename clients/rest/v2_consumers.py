"""v2's consumer instances, as Confluent's ConsumersResource and KafkaConsumerManager answer:

    POST   /consumers/{g}                              create: {"instance_id", "base_uri"}
    DELETE /consumers/{g}/instances/{i}                close and forget (204)
    POST   .../instances/{i}/subscription              {"topics"} or {"topic_pattern"} (204)
    GET    .../instances/{i}/subscription              {"topics": [...]}
    DELETE .../instances/{i}/subscription              unsubscribe (204)
    GET    .../instances/{i}/records                   [{"topic", "key", "value", "partition",
                                                        "offset"}]
    POST   .../instances/{i}/assignments               {"partitions"} (204)
    GET    .../instances/{i}/assignments               {"partitions": [{"topic", "partition"}]}
    POST   .../instances/{i}/positions                 seek: {"offsets"}, {"timestamps"} (204)
    POST   .../instances/{i}/positions/beginning|end   {"partitions"} (204)
    POST   .../instances/{i}/offsets                   commit the body's offsets (each + 1, as
                                                       Confluent) or, with no body, what was read
    GET    .../instances/{i}/offsets                   {"partitions"} in the body (as Confluent):
                                                       {"offsets": [{"topic", "partition",
                                                                     "offset", "metadata"}]}

Media types are Confluent's: the routes consume and produce application/vnd.kafka.v2+json and
the embedded v2 types (not application/json); records are read with the Accept type of the
instance's format (binary: base64 keys and values, json: the JSON they hold), any other
embedded type is 406/40601. An unknown or expired instance is 404/40403, a second instance
of the same name 409/40902, mixing subscribe, pattern and assign 409/40903 (what Confluent
answers the Java consumer's IllegalStateException with). Instances live in
`consumer_instances.ConsumerInstances`; with authentication on, an instance answers only the
principal that created it (404/40403 to anyone else).

Numbers have the ranges of Confluent's Java fields: a partition, consumer.request.timeout.ms
and fetch.min.bytes are ints, an offset a long; a number outside is 400/400 with Jackson's
words ("Numeric value (N) out of range of int (-2147483648 - 2147483647)"), as Jackson's
mapping error reaches Confluent's clients, before any rule of the value is checked.
"""
from __future__ import annotations

import base64
import contextlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import web

from clients.aio.consumer import AsyncConsumer
from clients.properties import ConfigError
from clients.rest.bodies import (V2, V2_BINARY, V2_JSON, json_response, negotiate, read_json,
                                 require_content_type)
from clients.rest.config import RestProxyConfig
from clients.rest.consumer_instances import (ASSIGNED, PATTERN, TOPICS, UNSUBSCRIBED,
                                             ConsumerInstance, ConsumerInstances,
                                             InstanceSettings, Render, illegal_state)
from clients.rest.errors import (CONSUMER_FORMAT_MISMATCH, INVALID_CONSUMER_CONFIG,
                                 INVALID_CONSUMER_CONFIG_CONSTRAINT, RestError,
                                 bad_request, partition_not_found, unprocessable)
from clients.rest.kafka import ClientPool
from clients.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

__all__ = ["V2ConsumersResource", "CreateRequest", "parse_create"]

V2_AVRO = "application/vnd.kafka.avro.v2+json"
V2_JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
V2_PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
# ConsumersResource's @Consumes and @Produces: v2 and every embedded v2 type; answers prefer
# plain v2 (its qs 0.9 against the embedded types' 0.1).
CONSUMES = (V2, V2_BINARY, V2_JSON, V2_AVRO, V2_JSONSCHEMA, V2_PROTOBUF)
PRODUCES = CONSUMES
# The records route: the embedded format each Accept type reads (binary is the default).
RECORD_FORMATS = {V2_BINARY: "binary", V2: "binary", V2_JSON: "json", V2_AVRO: "avro",
                  V2_JSONSCHEMA: "jsonschema", V2_PROTOBUF: "protobuf"}
FORMATS = ("binary", "json")
SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")
FETCH_MIN_BYTES_MAX = 10_000_000        # KafkaRestConfig's range for fetch.min.bytes: -1..this
# Java's int and long, the types of Confluent's fields: (name, least, greatest).
INT = ("int", -2**31, 2**31 - 1)
LONG = ("long", -2**63, 2**63 - 1)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DECIMAL = re.compile(r"\s*[-+]?[0-9]+\s*")     # a string Jackson reads as an int

FORMAT_MISMATCH = ("The requested embedded data format does not match the deserializer for "
                   "this consumer instance")
MUTUALLY_EXCLUSIVE = "Subscription to topics, partitions and pattern are mutually exclusive"

INSTANCE = "/consumers/{group}/instances/{instance}"


# ---------------------------------------------------------------------------- request bodies
#
# As Confluent's proxy answers a body: a value of the wrong JSON type is 400 with code 400
# (Jackson's mapping error), a missing value or one that breaks a rule 422.

def _wrong_type(where: str, wanted: str, value: Any) -> RestError:
    return bad_request(f"{where}: expected {wanted}, not {json.dumps(value)}")


def _java(value: int, java_type: tuple[str, int, int], where: str) -> int:
    """`value`, when the Java type holds it; 400/400 in Jackson's words otherwise."""
    name, least, greatest = java_type
    if not least <= value <= greatest:
        raise bad_request(f"{where}: Numeric value ({value}) out of range of {name} "
                          f"({least} - {greatest})")
    return value


def _text(body: dict[str, Any], key: str) -> str | None:
    """A string field; numbers and booleans become their text, as Jackson coerces them."""
    v = body.get(key)
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    raise _wrong_type(key, "a string", v)


def _integer(body: dict[str, Any], *keys: str) -> int | None:
    """A Java int field under the first of `keys` present (Jackson's aliases)."""
    for key in keys:
        v = body.get(key)
        if v is None:
            continue
        if isinstance(v, str) and DECIMAL.fullmatch(v):
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return _java(v, INT, key)
        raise _wrong_type(key, "an integer", v)
    return None


@dataclass(frozen=True)
class CreateRequest:
    """POST /consumers/{group}'s body (Confluent's CreateConsumerInstanceRequest)."""

    name: str | None = None
    format: str = "binary"
    auto_offset_reset: str | None = None
    auto_commit_enable: str | None = None
    response_min_bytes: int | None = None     # "fetch.min.bytes": the proxy's, not Kafka's
    request_timeout_ms: int | None = None     # "consumer.request.timeout.ms"


def parse_create(body: Any) -> CreateRequest:
    """The create request from its JSON (None: every default)."""
    if body is None:
        return CreateRequest()
    if not isinstance(body, dict):
        raise _wrong_type("body", "a JSON object", body)
    name = _text(body, "id") or _text(body, "name")     # the deprecated "id" wins, as in Confluent
    if name is not None and not name:
        raise unprocessable("name: may not be empty")
    fmt = (_text(body, "format") or "binary").lower()
    if fmt not in FORMATS + SCHEMA_FORMATS:
        raise unprocessable("Invalid format type.")
    if fmt in SCHEMA_FORMATS:
        raise unprocessable(f"Invalid consumer configuration: the {fmt} format needs a Schema "
                            "Registry, which strom's REST proxy does not have",
                            INVALID_CONSUMER_CONFIG)
    # Both ints are read before either is checked, as Jackson maps every field first.
    min_bytes = _integer(body, "fetch.min.bytes", "responseMinBytes")
    request_timeout_ms = _integer(body, "consumer.request.timeout.ms", "requestWaitMs")
    if min_bytes is not None and not -1 <= min_bytes <= FETCH_MIN_BYTES_MAX:
        limit = "at least -1" if min_bytes < -1 else f"no more than {FETCH_MIN_BYTES_MAX}"
        raise unprocessable("Invalid consumer configuration. It does not abide by the "
                            f"constraints: Invalid value {min_bytes} for configuration "
                            f"fetch.min.bytes: Value must be {limit}",
                            INVALID_CONSUMER_CONFIG_CONSTRAINT)
    return CreateRequest(name=name, format=fmt,
                         auto_offset_reset=_text(body, "auto.offset.reset"),
                         auto_commit_enable=_text(body, "auto.commit.enable"),
                         response_min_bytes=min_bytes,
                         request_timeout_ms=request_timeout_ms)


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        raise unprocessable("The request body may not be empty")
    if not isinstance(body, dict):
        raise _wrong_type("body", "a JSON object", body)
    return body


def _list(body: dict[str, Any], key: str) -> list[Any]:
    items = body.get(key)
    if items is None:
        raise unprocessable(f"{key}: may not be null")
    if not isinstance(items, list):
        raise _wrong_type(key, "a list", items)
    return items


def _number(item: dict[str, Any], key: str, where: str, java_type: tuple[str, int, int]) -> int:
    """A required integer >= 0 of a list item, in the range of `java_type` (INT, LONG)."""
    v = item.get(key)
    if v is None:
        raise unprocessable(f"{where}.{key}: may not be null")
    if not isinstance(v, int) or isinstance(v, bool):
        raise _wrong_type(f"{where}.{key}", "an integer", v)
    _java(v, java_type, f"{where}.{key}")
    if v < 0:
        raise unprocessable(f"{where}.{key}: must be greater than or equal to 0")
    return v


def _topic_partition(item: Any, where: str) -> TopicPartition:
    if not isinstance(item, dict):
        raise _wrong_type(where, "an object with topic and partition", item)
    topic = item.get("topic")
    if topic is not None and not isinstance(topic, str):
        raise _wrong_type(f"{where}.topic", "a string", topic)
    if not topic:
        raise unprocessable(f"{where}.topic: may not be empty")
    return TopicPartition(topic, _number(item, "partition", where, INT))


def _partitions(body: dict[str, Any]) -> list[TopicPartition]:
    return [_topic_partition(p, f"partitions[{i}]")
            for i, p in enumerate(_list(body, "partitions"))]


def _offsets(body: dict[str, Any]) -> list[tuple[TopicPartition, int, str | None]]:
    """[(tp, offset, metadata)] of "offsets": [{"topic", "partition", "offset", "metadata"}]."""
    out = []
    for i, item in enumerate(_list(body, "offsets")):
        where = f"offsets[{i}]"
        tp = _topic_partition(item, where)
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, str):
            raise _wrong_type(f"{where}.metadata", "a string", metadata)
        out.append((tp, _number(item, "offset", where, LONG), metadata))
    return out


def _timestamps(body: dict[str, Any]) -> dict[TopicPartition, int]:
    """{tp: epoch ms} of "timestamps": [{"topic", "partition", "timestamp": ISO-8601}]; a
    time before 1970 is negative (the floor of its milliseconds: -1 for 1 µs before)."""
    if body.get("timestamps") is None:
        return {}
    out = {}
    for i, item in enumerate(_list(body, "timestamps")):
        where = f"timestamps[{i}]"
        tp = _topic_partition(item, where)
        stamp = item.get("timestamp")
        if stamp is None:
            raise unprocessable(f"{where}.timestamp: may not be null")
        try:
            when = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        except ValueError:
            when = None
        if when is None:
            raise _wrong_type(f"{where}.timestamp", "an ISO-8601 instant", stamp)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        out[tp] = (when - EPOCH) // timedelta(milliseconds=1)
    return out


# ---------------------------------------------------------------------------- records

def _binary(record: ConsumerRecord) -> tuple[dict[str, Any], int]:
    key, value = record.key, record.value
    assert key is None or isinstance(key, bytes)
    assert value is None or isinstance(value, bytes)
    return ({"topic": record.topic,
             "key": None if key is None else base64.b64encode(key).decode(),
             "value": None if value is None else base64.b64encode(value).decode(),
             "partition": record.partition, "offset": record.offset},
            len(key or b"") + len(value or b""))


def _json(record: ConsumerRecord) -> tuple[dict[str, Any], int]:
    """ValueError (JSONDecodeError, UnicodeDecodeError) for a key or value that is not JSON."""
    key, value = record.key, record.value
    assert key is None or isinstance(key, bytes)
    assert value is None or isinstance(value, bytes)
    return ({"topic": record.topic,
             "key": None if key is None else json.loads(key),
             "value": None if value is None else json.loads(value),
             "partition": record.partition, "offset": record.offset},
            len(key or b"") + len(value or b""))


RENDERERS: dict[str, Render] = {"binary": _binary, "json": _json}


def _query_int(request: web.Request, name: str) -> int:
    """A numeric query parameter (-1 when absent); one that is not a number is 404, as
    JAX-RS answers a @QueryParam it cannot convert."""
    raw = request.query.get(name)
    if raw is None:
        return -1
    try:
        return int(raw)
    except ValueError:
        raise RestError(404, 404, "HTTP 404 Not Found") from None


# ---------------------------------------------------------------------------- the resource

class V2ConsumersResource:
    """The routes above over one `ConsumerInstances`; `close()` closes every instance."""

    def __init__(self, pool: ClientPool, config: RestProxyConfig):
        self.pool = pool
        self.config = config
        self.instances = ConsumerInstances(config.consumer_instance_timeout_ms)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/consumers/{group}", self.create),
            web.delete(INSTANCE, self.delete),
            web.post(INSTANCE + "/subscription", self.subscribe),
            web.get(INSTANCE + "/subscription", self.subscription),
            web.delete(INSTANCE + "/subscription", self.unsubscribe),
            # No HEAD: it would read records and throw them away.
            web.get(INSTANCE + "/records", self.records, allow_head=False),
            web.post(INSTANCE + "/assignments", self.assign),
            web.get(INSTANCE + "/assignments", self.assignment),
            web.post(INSTANCE + "/positions", self.seek),
            web.post(INSTANCE + "/positions/beginning", self.seek_to_beginning),
            web.post(INSTANCE + "/positions/end", self.seek_to_end),
            web.post(INSTANCE + "/offsets", self.commit),
            web.get(INSTANCE + "/offsets", self.committed),
        ]

    async def close(self) -> None:
        await self.instances.close()

    # ------------------------------------------------------------ helpers

    def _start(self, request: web.Request) -> str:
        """Checks every route makes before reading the body: 401 without credentials when
        authentication is on, 415, 406. The answer's media type."""
        self.pool.principal(request)
        require_content_type(request, CONSUMES)
        return negotiate(request, PRODUCES)

    def _use(self, request: web.Request
             ) -> contextlib.AbstractAsyncContextManager[ConsumerInstance]:
        """The instance the path names, for the request's principal only."""
        return self.instances.use(request.match_info["group"], request.match_info["instance"],
                                  self.pool.principal(request))

    @staticmethod
    async def _require_assigned(instance: ConsumerInstance, tps: list[TopicPartition]) -> None:
        assigned = await instance.consumer.assignment()
        for tp in tps:
            if tp not in assigned:
                raise illegal_state(f"No current assignment for partition {tp}")

    @staticmethod
    def _no_content() -> web.Response:
        return web.Response(status=204)

    # ------------------------------------------------------------ create and delete

    async def create(self, request: web.Request) -> web.Response:
        answer_type = self._start(request)
        spec = parse_create(await read_json(request, allow_empty=True))
        principal = self.pool.principal(request)
        group = request.match_info["group"]
        name = spec.name
        if name is None:
            server = f"{self.config.id}-" if self.config.id else ""
            name = f"rest-consumer-{server}{uuid.uuid4()}"
        self.instances.check_free(group, name)
        config = self.pool.consumer_config(principal)
        config["group.id"] = group
        if spec.auto_commit_enable is not None:
            config["enable.auto.commit"] = spec.auto_commit_enable
        if spec.auto_offset_reset is not None:
            config["auto.offset.reset"] = spec.auto_offset_reset
        try:
            consumer = AsyncConsumer(config=config)
        except ConfigError as e:
            raise unprocessable(f"Invalid consumer configuration: {e}",
                                INVALID_CONSUMER_CONFIG) from None
        timeout_ms = spec.request_timeout_ms
        if timeout_ms is None:
            timeout_ms = self.config.consumer_request_timeout_ms
        min_bytes = spec.response_min_bytes
        settings = InstanceSettings(format=spec.format, request_timeout_ms=max(0, timeout_ms),
                                    response_min_bytes=-1 if min_bytes is None else min_bytes)
        self.instances.add(ConsumerInstance(group, name, consumer, settings,
                                            self.instances.clock(), principal))
        base_uri = request.url.with_path(f"/consumers/{group}/instances/{name}").with_query(None)
        return json_response({"instance_id": name, "base_uri": str(base_uri)},
                             content_type=answer_type)

    async def delete(self, request: web.Request) -> web.Response:
        self._start(request)
        await self.instances.delete(request.match_info["group"], request.match_info["instance"],
                                    self.pool.principal(request))
        return self._no_content()

    # ------------------------------------------------------------ subscription

    async def subscribe(self, request: web.Request) -> web.Response:
        self._start(request)
        body = _object(await read_json(request, allow_empty=True))
        topics, pattern = body.get("topics"), body.get("topic_pattern")
        if topics is not None:
            if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
                raise _wrong_type("topics", "a list of topic names", topics)
            if not all(topics):
                raise unprocessable("topics: a topic name may not be empty")
        elif pattern is not None:
            if not isinstance(pattern, str):
                raise _wrong_type("topic_pattern", "a regular expression", pattern)
            try:
                re.compile(pattern)
            except re.error as e:
                raise unprocessable(f"topic_pattern: not a regular expression: {e}") from None
        async with self._use(request) as instance:
            if topics is not None:
                if not topics:              # Java's subscribe([]) is unsubscribe()
                    await instance.consumer.unsubscribe()
                    instance.mode = UNSUBSCRIBED
                    return self._no_content()
                if instance.mode in (PATTERN, ASSIGNED):
                    raise illegal_state(MUTUALLY_EXCLUSIVE)
                await instance.consumer.subscribe(topics=topics)
                instance.mode = TOPICS
            elif pattern is not None:
                if instance.mode in (TOPICS, ASSIGNED):
                    raise illegal_state(MUTUALLY_EXCLUSIVE)
                await instance.consumer.subscribe(pattern=pattern)
                instance.mode = PATTERN
        return self._no_content()

    async def subscription(self, request: web.Request) -> web.Response:
        answer_type = self._start(request)
        async with self._use(request) as instance:
            topics = sorted(await instance.consumer.subscription())
        return json_response({"topics": topics}, content_type=answer_type)

    async def unsubscribe(self, request: web.Request) -> web.Response:
        self._start(request)
        async with self._use(request) as instance:
            await instance.consumer.unsubscribe()
            instance.mode = UNSUBSCRIBED
        return self._no_content()

    # ------------------------------------------------------------ assignment

    async def assign(self, request: web.Request) -> web.Response:
        self._start(request)
        tps = _partitions(_object(await read_json(request, allow_empty=True)))
        async with self._use(request) as instance:
            if not tps:                     # Java's assign([]) is unsubscribe()
                await instance.consumer.unsubscribe()
                instance.mode = UNSUBSCRIBED
                return self._no_content()
            if instance.mode in (TOPICS, PATTERN):
                raise illegal_state(MUTUALLY_EXCLUSIVE)
            await instance.consumer.assign(tps)
            instance.mode = ASSIGNED
        return self._no_content()

    async def assignment(self, request: web.Request) -> web.Response:
        answer_type = self._start(request)
        async with self._use(request) as instance:
            tps = sorted(await instance.consumer.assignment())
        return json_response({"partitions": [{"topic": t, "partition": p} for t, p in tps]},
                             content_type=answer_type)

    # ------------------------------------------------------------ positions

    async def seek(self, request: web.Request) -> web.Response:
        self._start(request)
        body = _object(await read_json(request, allow_empty=True))
        offsets = _offsets(body) if body.get("offsets") is not None else []
        stamps = _timestamps(body)
        if not offsets and not stamps and "offsets" not in body and "timestamps" not in body:
            raise unprocessable("offsets: may not be null")
        async with self._use(request) as instance:
            consumer = instance.consumer
            await self._require_assigned(instance, [tp for tp, _, _ in offsets] + list(stamps))
            for tp, offset, _ in offsets:
                await consumer.seek(tp, offset)
            # A time before 1970 is before every record (Kafka's timestamps are >= 0).
            before_all = [tp for tp, ms in stamps.items() if ms < 0]
            if before_all:
                await consumer.seek_to_beginning(*before_all)
            later = {tp: ms for tp, ms in stamps.items() if ms >= 0}
            if later:
                found = await consumer.offsets_for_times(later)
                for tp, hit in found.items():
                    if hit is not None:
                        await consumer.seek(tp, hit.offset)
                    else:                   # no record that late: the next one written
                        await consumer.seek_to_end(tp)
        return self._no_content()

    async def _seek_to(self, request: web.Request, end: bool) -> web.Response:
        self._start(request)
        tps = _partitions(_object(await read_json(request, allow_empty=True)))
        async with self._use(request) as instance:
            await self._require_assigned(instance, tps)
            if end:
                await instance.consumer.seek_to_end(*tps)
            else:
                await instance.consumer.seek_to_beginning(*tps)
        return self._no_content()

    async def seek_to_beginning(self, request: web.Request) -> web.Response:
        return await self._seek_to(request, end=False)

    async def seek_to_end(self, request: web.Request) -> web.Response:
        return await self._seek_to(request, end=True)

    # ------------------------------------------------------------ offsets

    async def commit(self, request: web.Request) -> web.Response:
        """An empty body commits the positions (what the client was given); offsets in the
        body are committed + 1 (the client names the last record it processed), with their
        metadata. Answers 200 and an empty list, as Confluent's CommitOffsetsResponse."""
        answer_type = self._start(request)
        body = await read_json(request, allow_empty=True)
        chosen = None
        if body is not None:
            chosen = {}
            for i, (tp, offset, metadata) in enumerate(_offsets(_object(body))):
                if offset == LONG[2]:
                    raise bad_request(f"offsets[{i}].offset: {offset} is the largest offset "
                                      "there is; a commit stores the offset after the one "
                                      "named, and there is none")
                chosen[tp] = OffsetAndMetadata(offset + 1, metadata or "")
        wait = request.query.get("async", "false").lower() != "true"
        async with self._use(request) as instance:
            if wait:
                await instance.consumer.commit(chosen)
            else:
                await instance.consumer.commit_async(chosen)
        return json_response([], content_type=answer_type)

    async def committed(self, request: web.Request) -> web.Response:
        """GET with a body, as Confluent's: no body is 404/40402, as there."""
        answer_type = self._start(request)
        body = await read_json(request, allow_empty=True)
        if body is None:
            raise partition_not_found()
        tps = _partitions(_object(body))
        async with self._use(request) as instance:
            found = await instance.consumer.committed(tps)
        offsets = [{"topic": tp.topic, "partition": tp.partition, "offset": om.offset,
                    "metadata": om.metadata}
                   for tp in dict.fromkeys(tps) if (om := found.get(tp)) is not None]
        return json_response({"offsets": offsets}, content_type=answer_type)

    # ------------------------------------------------------------ records

    async def records(self, request: web.Request) -> web.Response:
        """Records as the instance's format renders them; the Accept type must name that
        format (406/40601 otherwise). `timeout` (ms) is capped by the instance's
        consumer.request.timeout.ms and defaults to it; `max_bytes` by
        consumer.request.max.bytes."""
        self.pool.principal(request)
        require_content_type(request, CONSUMES)
        answer_type = negotiate(request, tuple(RECORD_FORMATS))
        timeout_ms, max_bytes = _query_int(request, "timeout"), _query_int(request, "max_bytes")
        async with self._use(request) as instance:
            if RECORD_FORMATS[answer_type] != instance.settings.format:
                raise RestError(406, CONSUMER_FORMAT_MISMATCH, FORMAT_MISMATCH)
            limit = instance.settings.request_timeout_ms
            wait_ms = limit if timeout_ms <= 0 else min(timeout_ms, limit)
            cap = self.config.consumer_request_max_bytes
            records = await instance.read(wait_ms / 1000.0,
                                          cap if max_bytes <= 0 else min(max_bytes, cap),
                                          RENDERERS[instance.settings.format])
        return json_response(records, content_type=answer_type)
