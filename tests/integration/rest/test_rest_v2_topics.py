"""v2's topic metadata and produce routes, walked with the curl scripts in curl/ against a
real proxy and broker, each answer checked field by field against what Confluent's REST
Proxy documents; records produced over REST (binary and JSON, with and without keys, to a
topic and to a partition) are read back with confluent-kafka; every bad request gets
Confluent's status and code, and a good request right after it still works.

v2 records carry key, value and partition only (Confluent's v2 has no headers and no
timestamp field): the timestamp checked is the CreateTime the proxy's producer gives.
"""
from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.rest_proxy import RestProxyProcess

CURL = Path(__file__).parent / "curl"
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
META_TOPIC, PRODUCE_TOPIC, ERRORS_TOPIC = "v2-meta", "v2-produce", "v2-errors"
REPLICA = [{"broker": 0, "leader": True, "in_sync": True}]       # one broker, id 0


def _parse(out: bytes) -> tuple[int, dict[str, str], Any]:
    """(status, lower-cased headers, JSON body) of `curl -i` output (interim 100s skipped)."""
    while out.startswith(b"HTTP/1.1 100"):
        out = out.split(b"\r\n\r\n", 1)[1]
    head, _, payload = out.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    return int(status_line.split()[1]), headers, json.loads(payload) if payload.strip() else None


def script(name: str, *args: str) -> tuple[int, dict[str, str], Any]:
    """Run curl/<name>.sh with `args` (the proxy URL first), as a user runs it."""
    out = subprocess.run([str(CURL / f"{name}.sh"), *args], capture_output=True, timeout=60,
                         check=True).stdout
    return _parse(out)


def curl(method: str, url: str, body: str | None = None, *, content_type: str | None = None,
         accept: str = V2) -> tuple[int, dict[str, str], Any]:
    """One request made with curl, for the bad requests no script makes."""
    args = ["curl", "-s", "-i", "-X", method, "-H", f"Accept: {accept}"]
    if body is not None:
        args += ["-H", f"Content-Type: {content_type}" if content_type else "Content-Type:",
                 "--data-binary", body]
    return _parse(subprocess.run([*args, url], capture_output=True, timeout=60, check=True).stdout)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ok_produce(url: str, topic: str = ERRORS_TOPIC) -> None:
    """A good request after a bad one: the proxy still serves."""
    status, _, body = script("v2_produce_binary", url, topic,
                             json.dumps({"records": [{"value": b64(b"still fine")}]}))
    assert status == 200 and body["offsets"][0]["error_code"] is None, body


@pytest.fixture(scope="module")
def topics(rest_env) -> Iterator[None]:
    admin = AdminClient({"bootstrap.servers": rest_env.bootstrap})
    futures = admin.create_topics([NewTopic(META_TOPIC, 3, 1, config={"retention.ms": "1234567"}),
                                   NewTopic(PRODUCE_TOPIC, 3, 1), NewTopic(ERRORS_TOPIC, 2, 1)])
    for f in futures.values():
        f.result(timeout=30)
    yield


# ---------------------------------------------------------------------------- metadata

def test_topic_partition_and_broker_metadata(rest_env, topics) -> None:
    url = rest_env.url
    status, headers, body = script("v2_topics_list", url)
    assert (status, headers["content-type"]) == (200, V2)
    assert {META_TOPIC, PRODUCE_TOPIC, ERRORS_TOPIC} <= set(body)
    assert body == sorted(body) and not any(t.startswith("__") for t in body)

    status, headers, body = script("v2_topics_get", url, META_TOPIC)
    assert (status, headers["content-type"]) == (200, V2)
    assert list(body) == ["name", "configs", "partitions"]
    assert body["name"] == META_TOPIC
    assert body["configs"]["retention.ms"] == "1234567"               # the override
    assert body["configs"]["cleanup.policy"] == "delete"              # and the defaults
    assert all(isinstance(v, str) for v in body["configs"].values())
    assert body["partitions"] == [{"partition": p, "leader": 0, "replicas": REPLICA}
                                  for p in range(3)]

    status, _, body = script("v2_topics_partitions", url, META_TOPIC)
    assert status == 200
    assert body == [{"partition": p, "leader": 0, "replicas": REPLICA} for p in range(3)]
    status, _, body = script("v2_topics_partition", url, META_TOPIC, "2")
    assert (status, body) == (200, {"partition": 2, "leader": 0, "replicas": REPLICA})
    status, _, body = script("v2_topics_partition_offsets", url, META_TOPIC, "1")
    assert (status, body) == (200, {"beginning_offset": 0, "end_offset": 0})
    status, headers, body = script("v2_brokers_list", url)
    assert (status, headers["content-type"], body) == (200, V2, {"brokers": [0]})


def test_metadata_errors_and_the_proxy_serving_after_each(rest_env, topics) -> None:
    url = rest_env.url
    not_found = {"error_code": 40401, "message": "Topic not found."}
    for path in ("/topics/no-such-topic", "/topics/no-such-topic/partitions",
                 "/topics/no-such-topic/partitions/0", "/topics/no-such-topic/partitions/0/offsets"):
        status, headers, body = curl("GET", url + path)
        assert (status, headers["content-type"], body) == (404, V2, not_found), path
        assert script("v2_topics_partition", url, META_TOPIC, "0")[0] == 200
    for script_name in ("v2_topics_partition", "v2_topics_partition_offsets"):
        status, _, body = script(script_name, url, META_TOPIC, "3")
        assert (status, body) == (404, {"error_code": 40402, "message": "Partition not found."})
        assert script("v2_topics_get", url, META_TOPIC)[0] == 200
    status, _, body = script("v2_topics_partition", url, META_TOPIC, "one")
    assert (status, body) == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    status, _, body = curl("GET", f"{url}/topics", accept="text/html")
    assert (status, body) == (406, {"error_code": 406, "message": "HTTP 406 Not Acceptable"})
    # The less specific types v2 accepts answer in the type asked for.
    status, headers, body = curl("GET", f"{url}/brokers", accept="application/json")
    assert (status, headers["content-type"], body) == (200, "application/json", {"brokers": [0]})


# ---------------------------------------------------------------------------- produce

def _read_back(bootstrap: str, topic: str, count: int) -> dict[tuple[int, int], Any]:
    """(partition, offset) -> message of the first `count` records of the topic's three
    partitions, read with confluent-kafka (which then commits, so that the group's internal
    topic exists)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "v2-readback",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: dict[tuple[Any, Any], Any] = {}
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=100, timeout=0.5):
                assert m.error() is None, m.error()
                got[(m.partition(), m.offset())] = m
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert len(got) == count, f"read {len(got)} of {count}"
    return got


def _offsets(answer: tuple[int, dict[str, str], Any]) -> list[tuple[int, int]]:
    status, headers, body = answer
    assert (status, headers["content-type"]) == (200, V2), body
    assert list(body) == ["offsets", "key_schema_id", "value_schema_id"]
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    out = []
    for o in body["offsets"]:
        assert list(o) == ["partition", "offset", "error_code", "error"]
        assert o["error_code"] is None and o["error"] is None, o
        assert isinstance(o["partition"], int) and isinstance(o["offset"], int)
        out.append((o["partition"], o["offset"]))
    return out


def test_records_produced_over_rest_are_read_by_confluent_kafka(rest_env, topics) -> None:
    url = rest_env.url
    sent: list[tuple[tuple[int, int], bytes | None, bytes | None]] = []   # where, key, value
    before = int(time.time() * 1000)

    binary = [{"key": b64(b"k1"), "value": b64(b"\x00binary\xff")},
              {"key": b64(b"k1"), "value": b64(b"same key")},
              {"value": b64(b"no key")},
              {"value": b64(b"to partition 2"), "partition": 2},
              {"key": b64(b"k-null-value")}]
    where = _offsets(script("v2_produce_binary", url, PRODUCE_TOPIC, json.dumps({"records": binary})))
    assert where[0][0] == where[1][0]                   # one key, one partition
    assert where[3][0] == 2
    sent += zip(where, [b"k1", b"k1", None, None, b"k-null-value"],
                [b"\x00binary\xff", b"same key", b"no key", b"to partition 2", None])

    records = [{"key": "somekey", "value": {"foo": "bär"}}, {"value": ["foo", "bar"], "partition": 1},
               {"value": 53.5}, {"key": {"id": 7}, "value": None}]
    where = _offsets(script("v2_produce_json", url, PRODUCE_TOPIC, json.dumps({"records": records})))
    assert where[1][0] == 1
    sent += zip(where, [b'"somekey"', None, None, b'{"id":7}'],
                ['{"foo":"bär"}'.encode(), b'["foo","bar"]', b"53.5", None])

    where = _offsets(script("v2_produce_partition_binary", url, PRODUCE_TOPIC, "0", json.dumps(
        {"records": [{"key": b64(b"pk"), "value": b64(b"p0 binary")}, {"value": b64(b"p0 again")}]})))
    assert [p for p, _ in where] == [0, 0] and where[1][1] == where[0][1] + 1
    sent += zip(where, [b"pk", None], [b"p0 binary", b"p0 again"])

    where = _offsets(script("v2_produce_partition_json", url, PRODUCE_TOPIC, "1", json.dumps(
        {"records": [{"key": "jk", "value": {"n": 1}}, {"value": "text"}]})))
    assert [p for p, _ in where] == [1, 1]
    sent += zip(where, [b'"jk"', None], [b'{"n":1}', b'"text"'])
    after = int(time.time() * 1000)

    assert len({w for w, _, _ in sent}) == len(sent)     # every record has its own offset
    got = _read_back(rest_env.bootstrap, PRODUCE_TOPIC, len(sent))
    for (partition, offset), key, value in sent:
        m = got[(partition, offset)]
        assert (m.partition(), m.key(), m.value()) == (partition, key, value), (partition, offset)
        assert m.headers() is None
        kind, ts = m.timestamp()
        assert kind == TIMESTAMP_CREATE_TIME and before <= ts <= after, (kind, ts, before, after)

    status, _, body = script("v2_topics_partition_offsets", url, PRODUCE_TOPIC, "0")
    assert (status, body["beginning_offset"]) == (200, 0)
    assert body["end_offset"] == 1 + max(o for (p, o), _, _ in sent if p == 0)

    # The group's commit made __consumer_offsets: described, but not listed (internal).
    status, _, body = script("v2_topics_get", url, "__consumer_offsets")
    assert status == 200 and body["name"] == "__consumer_offsets" and body["partitions"]
    status, _, body = script("v2_topics_list", url)
    assert status == 200 and PRODUCE_TOPIC in body and "__consumer_offsets" not in body


# ---------------------------------------------------------------------------- errors

def test_bad_produce_requests_get_confluents_codes(rest_env, topics, tmp_path) -> None:
    url = rest_env.url
    topic_url = f"{url}/topics/{ERRORS_TOPIC}"
    good = json.dumps({"records": [{"value": b64(b"x")}]})
    refused = [
        # (content type, body, status, code, message or None to skip)
        ("application/json", good, 415, 415, "HTTP 415 Unsupported Media Type"),
        (V2, good, 415, 415, "HTTP 415 Unsupported Media Type"),
        ("text/plain", good, 415, 415, "HTTP 415 Unsupported Media Type"),
        (BINARY, '{"records": [{"value": ', 400, 400, None),
        (BINARY, json.dumps({"records": [{"value": "not base64!"}]}), 400, 400,
         'Bad Request: data="not base64!" is not a valid base64 string.'),
        (BINARY, json.dumps({"records": [{"value": 12}]}), 400, 400,
         "Bad Request: data=12 is not a base64 string."),
        (BINARY, json.dumps({"records": []}), 422, 422, "records may not be empty"),
        (JSON_V2, json.dumps({"records": [{"value": 1, "headers": [{"h": "v"}]}]}), 400, 400,
         'Unrecognized field "headers" (record 0), not marked as ignorable '
         '(3 known properties: "partition", "key", "value"])'),
        (JSON_V2, json.dumps({"records": [{"value": 1, "partition": "x"}]}), 400, 400, None),
    ]
    for embedded in ("avro", "protobuf", "jsonschema"):
        content_type = f"application/vnd.kafka.{embedded}.v2+json"
        refused.append((content_type, json.dumps({"records": [{"value": 1}]}), 422, 42207,
                        "Error serializing message. Schema Registry not defined, no Schema "
                        "Registry client available to serialize message."))
        refused.append((content_type, json.dumps({"value_schema": '"int"', "records": [{"value": 1}]}),
                        422, 42206, "Payload error. Schema Registry must be configured when using "
                                    "schemas."))
    for content_type, body, status, code, message in refused:
        got_status, headers, got = curl("POST", topic_url, body, content_type=content_type)
        assert (got_status, headers["content-type"], got["error_code"]) == (status, V2, code), (
            content_type, body, got)
        if message is not None:
            assert got["message"] == message
        ok_produce(url)

    # No Content-Type: binary, as Confluent's highest-weighted produce type.
    status, _, body = curl("POST", topic_url, good)
    assert status == 200 and body["offsets"][0]["error_code"] is None
    status, _, body = curl("POST", topic_url, good, content_type=BINARY, accept="text/html")
    assert (status, body["error_code"]) == (406, 406)

    partition_not_found = {"error_code": 40402, "message": "Partition not found."}
    status, _, body = script("v2_produce_partition_binary", url, ERRORS_TOPIC, "2", good)
    assert (status, body) == (404, partition_not_found)
    status, _, body = script("v2_produce_binary", url, ERRORS_TOPIC,
                             json.dumps({"records": [{"value": "AA==", "partition": 5}]}))
    assert (status, body) == (404, partition_not_found)
    status, _, body = script("v2_produce_partition_binary", url, ERRORS_TOPIC, "zero", good)
    assert (status, body["error_code"]) == (404, 404)
    ok_produce(url)

    # A 10 MB body whose first value is far above max.request.size: that record fails in
    # place with Kafka's error (50002), the next one is written, the answer is 200.
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"records": [{"value": b64(b"x" * (7_500_000))},
                                           {"value": b64(b"after the big one")}]}))
    assert big.stat().st_size > 10_000_000
    status, _, body = script("v2_produce_binary", url, ERRORS_TOPIC, f"@{big}")
    assert status == 200
    failed, written = body["offsets"]
    assert (failed["partition"], failed["offset"], failed["error_code"]) == (None, None, 50002)
    assert "max.request.size" in failed["error"]
    assert written["error_code"] is None and isinstance(written["offset"], int)
    ok_produce(url)


def test_unknown_topic_is_created_when_the_broker_auto_creates(rest_env, topics) -> None:
    """Confluent's proxy produces through Kafka's producer, whose metadata request creates a
    missing topic when the broker's auto.create.topics.enable is on (its default)."""
    url = rest_env.url
    status, _, body = script("v2_topics_get", url, "v2-auto-created")
    assert (status, body["error_code"]) == (404, 40401)
    where = _offsets(script("v2_produce_json", url, "v2-auto-created",
                            json.dumps({"records": [{"value": {"first": True}}]})))
    assert where[0][1] == 0
    status, _, body = script("v2_topics_get", url, "v2-auto-created")
    assert status == 200 and len(body["partitions"]) == 3       # num.partitions


def test_unknown_topic_is_404_when_the_broker_does_not_auto_create(tmp_path) -> None:
    broker = BrokerProcess(tmp_path / "broker", overrides={"auto.create.topics.enable": "false"})
    broker.start()
    proxy = RestProxyProcess(tmp_path / "proxy", broker.bootstrap)
    try:
        proxy.start()
        started = time.monotonic()
        status, headers, body = script("v2_produce_binary", proxy.url, "nowhere",
                                       json.dumps({"records": [{"value": "AA=="}]}))
        assert (status, headers["content-type"], body) == (
            404, V2, {"error_code": 40401, "message": "Topic not found."})
        assert time.monotonic() - started < 10          # not after max.block.ms
        status, _, body = script("v2_produce_partition_json", proxy.url, "nowhere", "0",
                                 json.dumps({"records": [{"value": 1}]}))
        assert (status, body["error_code"]) == (404, 40401)
        status, _, body = script("v2_topics_list", proxy.url)
        assert (status, body) == (200, [])
    finally:
        proxy.stop()
        broker.stop()
