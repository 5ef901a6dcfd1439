"""v2 consumer instances (clients/rest/v2_consumers.py) against one real broker and proxy
(the proxy forgets instances idle for 3 s): every route walked by its curl script under
tests/integration/rest/curl/, each answer checked against the body Confluent documents;
records confluent-kafka produced read over REST in the binary and json formats by an
instance that commits and is deleted, and a new instance of the group resuming after the
commit (none read twice, none skipped, with responses cut small by max_bytes); expiry;
and Confluent's error codes, each followed by a request that still works."""
from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Sequence

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.curl_answer import Answer

pytestmark = pytest.mark.integration

CURL = Path(__file__).resolve().parent / "curl"
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON_TYPE = "application/vnd.kafka.json.v2+json"
NOT_FOUND = {"error_code": 40403, "message": "Consumer instance not found."}
EXCLUSIVE = {"error_code": 40903, "message": "Illegal state: Subscription to topics, partitions "
                                              "and pattern are mutually exclusive"}


def script(name: str, *args: str) -> Answer:
    """Run tests/integration/rest/curl/<name>.sh with `args`, as a user would."""
    out = subprocess.run([str(CURL / f"{name}.sh"), *args], capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    return Answer(out.stdout)


def curl(method: str, url: str, *, data: str | None = None, content_type: str | None = V2,
         accept: str | None = V2) -> Answer:
    """A request the scripts do not make (error cases)."""
    args = ["curl", "-s", "-i", "-X", method]
    if content_type:
        args += ["-H", f"Content-Type: {content_type}"]
    if accept:
        args += ["-H", f"Accept: {accept}"]
    if data is not None:
        args += ["--data-binary", data]
    out = subprocess.run([*args, url], capture_output=True, timeout=30, check=True)
    return Answer(out.stdout)


def no_content(a: Answer) -> None:
    assert (a.status, a.text) == (204, ""), a


def ok(a: Answer, body: Any, content_type: str = V2) -> None:
    assert (a.status, a.content_type, a.body) == (200, content_type, body), a


def error(a: Answer, status: int, body: dict[str, Any]) -> None:
    assert (a.status, a.content_type, a.body) == (status, V2, body), a


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def produce(bootstrap: str, topic: str,
            records: Sequence[tuple[int, bytes | None, bytes]]) -> None:
    """(partition, key, value) records, written by confluent-kafka."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, key, value in records:
        p.produce(topic, key=key, value=value, partition=partition)
    assert p.flush(15) == 0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def read_until(env: Any, group: str, instance: str, count: int, *, accept: str = BINARY,
               query: str = "timeout=500", deadline_s: float = 20.0) -> list[dict[str, Any]]:
    """Records read by repeated GETs until `count` arrived (a new member first joins)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < deadline:
        a = script("v2_consumer_records", env.url, group, instance, accept, query)
        assert (a.status, a.content_type) == (200, accept), a
        got += a.body
    assert len(got) == count, got
    return got


def tp(topic: str, partition: int) -> dict[str, Any]:
    return {"topic": topic, "partition": partition}


# ---------------------------------------------------------------------------- the walk

def test_every_route_by_its_curl_script(rest_env: Any) -> None:
    url, topic, group, name = rest_env.url, "walk", "walk-group", "walker"
    create_topic(rest_env.bootstrap, topic)
    produce(rest_env.bootstrap, topic, [(p, f"k{p}{i}".encode(), f"v{p}{i}".encode())
                                        for p in range(3) for i in range(2)])
    everything = json.dumps({"partitions": [tp(topic, p) for p in range(3)]})

    # create: {"instance_id", "base_uri"}
    body = json.dumps({"name": name, "format": "binary", "auto.offset.reset": "earliest",
                       "auto.commit.enable": "false", "fetch.min.bytes": 1})
    ok(script("v2_consumer_create", url, group, body),
       {"instance_id": name, "base_uri": f"{url}/consumers/{group}/instances/{name}"})

    # subscribe, subscription
    no_content(script("v2_consumer_subscribe", url, group, name, json.dumps({"topics": [topic]})))
    ok(script("v2_consumer_subscription", url, group, name), {"topics": [topic]})

    # records: every field of every record (binary: base64 key and value)
    got = read_until(rest_env, group, name, 6)
    assert sorted(got, key=lambda r: (r["partition"], r["offset"])) == [
        {"topic": topic, "key": b64(f"k{p}{i}".encode()), "value": b64(f"v{p}{i}".encode()),
         "partition": p, "offset": i} for p in range(3) for i in range(2)]
    assert all(list(r) == ["topic", "key", "value", "partition", "offset"] for r in got)

    # assignments of a subscribed instance: what the group gave it
    ok(script("v2_consumer_assignments", url, group, name),
       {"partitions": [tp(topic, p) for p in range(3)]})

    # commit given offsets (the last record processed: offset + 1 is committed), committed
    ok(script("v2_consumer_commit", url, group, name, json.dumps(
        {"offsets": [{"topic": topic, "partition": 0, "offset": 0, "metadata": "half"}]})), [])
    ok(script("v2_consumer_committed", url, group, name, json.dumps(
        {"partitions": [tp(topic, 0), tp(topic, 1)]})),
       {"offsets": [{"topic": topic, "partition": 0, "offset": 1, "metadata": "half"}]})
    # commit with no body: everything read so far
    ok(script("v2_consumer_commit", url, group, name), [])
    ok(script("v2_consumer_committed", url, group, name, everything),
       {"offsets": [{"topic": topic, "partition": p, "offset": 2, "metadata": ""}
                    for p in range(3)]})

    # positions: by offset, by time, to the beginning, to the end
    no_content(script("v2_consumer_seek", url, group, name, json.dumps(
        {"offsets": [{"topic": topic, "partition": 1, "offset": 1}]})))
    ok(script("v2_consumer_records", url, group, name), [
        {"topic": topic, "key": b64(b"k11"), "value": b64(b"v11"), "partition": 1, "offset": 1}],
       BINARY)
    no_content(script("v2_consumer_seek", url, group, name, json.dumps(
        {"timestamps": [{"topic": topic, "partition": 0, "timestamp": "2000-01-01T00:00:00Z"}]})))
    assert [(r["partition"], r["offset"]) for r in read_until(rest_env, group, name, 2)] == [
        (0, 0), (0, 1)]
    no_content(script("v2_consumer_seek_beginning", url, group, name,
                      json.dumps({"partitions": [tp(topic, 2)]})))
    assert [(r["partition"], r["offset"]) for r in read_until(rest_env, group, name, 2)] == [
        (2, 0), (2, 1)]
    no_content(script("v2_consumer_seek_beginning", url, group, name, everything))
    no_content(script("v2_consumer_seek_end", url, group, name, everything))
    ok(script("v2_consumer_records", url, group, name, BINARY, "timeout=300"), [], BINARY)

    # seeking a partition the instance does not have is Confluent's illegal state
    error(script("v2_consumer_seek", url, group, name, json.dumps(
        {"offsets": [{"topic": topic, "partition": 7, "offset": 0}]})), 409,
        {"error_code": 40903,
         "message": f"Illegal state: No current assignment for partition {topic}-7"})

    # subscribe and assign are mutually exclusive
    error(script("v2_consumer_assign", url, group, name, everything), 409, EXCLUSIVE)

    # unsubscribe: no topics, no partitions
    no_content(script("v2_consumer_unsubscribe", url, group, name))
    ok(script("v2_consumer_subscription", url, group, name), {"topics": []})
    ok(script("v2_consumer_assignments", url, group, name), {"partitions": []})

    # assign by hand: starts at the group's committed offset (2), so only the new record
    no_content(script("v2_consumer_assign", url, group, name, json.dumps(
        {"partitions": [tp(topic, 0)]})))
    ok(script("v2_consumer_assignments", url, group, name), {"partitions": [tp(topic, 0)]})
    ok(script("v2_consumer_subscription", url, group, name), {"topics": []})
    produce(rest_env.bootstrap, topic, [(0, None, b"late")])
    assert read_until(rest_env, group, name, 1) == [
        {"topic": topic, "key": None, "value": b64(b"late"), "partition": 0, "offset": 2}]
    error(script("v2_consumer_subscribe", url, group, name, json.dumps({"topics": [topic]})),
          409, EXCLUSIVE)

    # delete: gone afterwards
    no_content(script("v2_consumer_delete", url, group, name))
    error(script("v2_consumer_subscription", url, group, name), 404, NOT_FOUND)
    error(script("v2_consumer_delete", url, group, name), 404, NOT_FOUND)


def test_pattern_subscription_and_defaults(rest_env: Any) -> None:
    """No body: a generated name, binary; a pattern subscription lists the topics it matched,
    and cannot be replaced by a topic list without an unsubscribe."""
    url, group = rest_env.url, "pattern-group"
    for t in ("pat-a", "pat-b", "other-c"):
        create_topic(rest_env.bootstrap, t, 1)
    a = curl("POST", f"{url}/consumers/{group}")
    assert (a.status, a.content_type, sorted(a.body)) == (200, V2, ["base_uri", "instance_id"]), a
    name = a.body["instance_id"]
    assert name.startswith("rest-consumer-") and len(name) == len("rest-consumer-") + 36
    assert a.body["base_uri"] == f"{url}/consumers/{group}/instances/{name}"
    no_content(script("v2_consumer_subscribe", url, group, name,
                      json.dumps({"topic_pattern": "pat-.*"})))
    ok(script("v2_consumer_subscription", url, group, name), {"topics": ["pat-a", "pat-b"]})
    error(script("v2_consumer_subscribe", url, group, name, json.dumps({"topics": ["pat-a"]})),
          409, EXCLUSIVE)
    no_content(script("v2_consumer_unsubscribe", url, group, name))
    no_content(script("v2_consumer_subscribe", url, group, name, json.dumps({"topics": ["pat-a"]})))
    ok(script("v2_consumer_subscription", url, group, name), {"topics": ["pat-a"]})
    no_content(script("v2_consumer_delete", url, group, name))


# ---------------------------------------------------------------------------- resume after commit

def resume_records(fmt: str) -> list[tuple[int, bytes, bytes]]:
    """40 keyed records over 3 partitions, each under 60 bytes of key and value."""
    if fmt == "json":
        return [(i % 3, json.dumps({"id": i}).encode(),
                 json.dumps({"n": i, "s": "x" * (i % 10)}).encode()) for i in range(40)]
    return [(i % 3, f"key-{i}".encode(), bytes([i]) * (i + 1)) for i in range(40)]


def as_sent(r: dict[str, Any], fmt: str) -> tuple[int, int, bytes, bytes]:
    """A record read over REST as (partition, offset, key bytes, value bytes)."""
    if fmt == "json":
        return (r["partition"], r["offset"], json.dumps(r["key"]).encode(),
                json.dumps(r["value"]).encode())
    return r["partition"], r["offset"], base64.b64decode(r["key"]), base64.b64decode(r["value"])


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_new_instance_resumes_after_the_commit(rest_env: Any, fmt: str) -> None:
    """confluent-kafka writes 40 keyed records; one instance reads part of them in answers
    of under 60 bytes (max_bytes), commits (binary: an empty body, json: the offsets it
    read) and is deleted; a new instance of the group reads the rest: together, every record
    exactly once, key and value intact."""
    url, topic, group = rest_env.url, f"resume-{fmt}", f"resume-{fmt}-group"
    create_topic(rest_env.bootstrap, topic)
    records = resume_records(fmt)
    produce(rest_env.bootstrap, topic, records)
    offsets = [0, 0, 0]
    want = set()
    for partition, key, value in records:
        want.add((partition, offsets[partition], key, value))
        offsets[partition] += 1
    accept = JSON_TYPE if fmt == "json" else BINARY
    settings = {"format": fmt, "auto.offset.reset": "earliest", "auto.commit.enable": "false",
                "fetch.min.bytes": 1}
    subscribe = json.dumps({"topics": [topic]})

    ok(script("v2_consumer_create", url, group, json.dumps({"name": "first", **settings})),
       {"instance_id": "first", "base_uri": f"{url}/consumers/{group}/instances/first"})
    no_content(script("v2_consumer_subscribe", url, group, "first", subscribe))
    first: list[tuple[int, int, bytes, bytes]] = []
    deadline = time.monotonic() + 20
    while len(first) < 15 and time.monotonic() < deadline:
        a = script("v2_consumer_records", url, group, "first", accept, "timeout=500&max_bytes=60")
        assert (a.status, a.content_type) == (200, accept), a
        assert all(r["topic"] == topic for r in a.body)
        got = [as_sent(r, fmt) for r in a.body]
        assert sum(len(key) + len(value) for _, _, key, value in got) < 60, got
        first += got
    assert len(first) >= 15
    if fmt == "json":
        last: dict[int, int] = {}
        for partition, offset, _, _ in first:
            last[partition] = max(last.get(partition, -1), offset)
        commit = {"offsets": [{"topic": topic, "partition": p, "offset": o}
                              for p, o in last.items()]}
        ok(script("v2_consumer_commit", url, group, "first", json.dumps(commit)), [])
    else:
        ok(script("v2_consumer_commit", url, group, "first"), [])
    no_content(script("v2_consumer_delete", url, group, "first"))

    ok(script("v2_consumer_create", url, group, json.dumps({"name": "second", **settings})),
       {"instance_id": "second", "base_uri": f"{url}/consumers/{group}/instances/second"})
    no_content(script("v2_consumer_subscribe", url, group, "second", subscribe))
    second = [as_sent(r, fmt)
              for r in read_until(rest_env, group, "second", 40 - len(first), accept=accept)]
    # Nothing more comes: every record was read once.
    ok(script("v2_consumer_records", url, group, "second", accept, "timeout=300"), [], accept)
    assert len(first + second) == len(set(first + second)) == 40
    assert set(first + second) == want
    no_content(script("v2_consumer_delete", url, group, "second"))


# ---------------------------------------------------------------------------- errors

def test_errors_answer_confluent_codes_and_the_proxy_keeps_serving(rest_env: Any) -> None:
    url, group = rest_env.url, "errors-group"
    base = f"{url}/consumers/{group}/instances"
    ok(script("v2_consumer_create", url, group, json.dumps({"name": "bin"})),
       {"instance_id": "bin", "base_uri": f"{base}/bin"})

    def still_serving() -> None:
        ok(script("v2_consumer_subscription", url, group, "bin"), {"topics": []})

    # a second instance of the name
    error(script("v2_consumer_create", url, group, json.dumps({"name": "bin"})), 409,
          {"error_code": 40902, "message": "Consumer with specified consumer ID already exists "
                                           "in the specified consumer group."})
    still_serving()
    # unknown instance, on every kind of route
    for route in ("subscription", "assignments", "records"):
        error(curl("GET", f"{base}/nobody/{route}", accept=None), 404, NOT_FOUND)
    error(curl("POST", f"{base}/nobody/offsets"), 404, NOT_FOUND)
    error(script("v2_consumer_delete", url, group, "nobody"), 404, NOT_FOUND)
    still_serving()
    # Accept of another embedded format than the instance's, and of no type the route makes
    error(script("v2_consumer_records", url, group, "bin", JSON_TYPE), 406,
          {"error_code": 40601, "message": "The requested embedded data format does not match "
                                           "the deserializer for this consumer instance"})
    error(curl("GET", f"{base}/bin/records", accept="application/vnd.kafka.avro.v2+json"), 406,
          {"error_code": 40601, "message": "The requested embedded data format does not match "
                                           "the deserializer for this consumer instance"})
    error(curl("GET", f"{base}/bin/records", accept="text/html"), 406,
          {"error_code": 406, "message": "HTTP 406 Not Acceptable"})
    ok(script("v2_consumer_records", url, group, "bin", V2, "timeout=100"), [])
    # malformed JSON
    a = curl("POST", f"{base}/bin/subscription", data='{"topics": [')
    assert (a.status, a.content_type, a.body["error_code"]) == (400, V2, 400), a
    a = curl("POST", f"{url}/consumers/{group}", data="{name:")
    assert (a.status, a.body["error_code"]) == (400, 400), a
    still_serving()
    # a body of the wrong type
    unsupported = {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"}
    error(curl("POST", f"{base}/bin/subscription", data='{"topics": ["a"]}',
               content_type="text/plain"), 415, unsupported)
    error(curl("POST", f"{url}/consumers/{group}", data="{}", content_type="text/plain"),
          415, unsupported)
    still_serving()
    # well-formed JSON of the wrong shape: 400 (Jackson's mapping error); a value missing: 422
    for route, data in (("assignments", '{"partitions": "all"}'),
                        ("subscription", '{"topics": "walk"}'),
                        ("positions",
                         '{"offsets": [{"topic": "t", "partition": 0, "offset": "x"}]}')):
        a = curl("POST", f"{base}/bin/{route}", data=data)
        assert (a.status, a.body["error_code"]) == (400, 400), a
    a = curl("POST", f"{base}/bin/assignments", data='{"partitions": [{"topic": "t"}]}')
    assert (a.status, a.body) == (422, {"error_code": 422,
                                        "message": "partitions[0].partition: may not be null"}), a
    error(curl("POST", f"{url}/consumers/{group}", data='{"format": "xml"}'), 422,
          {"error_code": 422, "message": "Invalid format type."})
    # invalid consumer config: 42204 (the consumer's own check), 40001 (the proxy's range)
    a = curl("POST", f"{url}/consumers/{group}", data='{"auto.offset.reset": "sideways"}')
    assert (a.status, a.body["error_code"]) == (422, 42204), a
    assert a.body["message"].startswith("Invalid consumer configuration: auto.offset.reset")
    a = curl("POST", f"{url}/consumers/{group}", data='{"auto.commit.enable": "perhaps"}')
    assert (a.status, a.body["error_code"]) == (422, 42204), a
    error(curl("POST", f"{url}/consumers/{group}", data='{"fetch.min.bytes": 10000001}'), 422,
          {"error_code": 40001, "message": "Invalid consumer configuration. It does not abide by "
           "the constraints: Invalid value 10000001 for configuration fetch.min.bytes: Value must "
           "be no more than 10000000"})
    # GET .../offsets without its body: Confluent's partition not found
    error(curl("GET", f"{base}/bin/offsets"), 404,
          {"error_code": 40402, "message": "Partition not found."})
    # a failed create kept no name: it can be created now
    ok(script("v2_consumer_create", url, group, json.dumps({"name": "json", "format": "json"})),
       {"instance_id": "json", "base_uri": f"{base}/json"})
    still_serving()
    for name in ("bin", "json"):
        no_content(script("v2_consumer_delete", url, group, name))


def test_record_that_is_not_json_and_partition_that_does_not_exist(rest_env: Any) -> None:
    """A json instance answers the records before one that is not JSON, then 500/50002 for
    it (every time, as Confluent, until a seek passes it); a read of a partition that does
    not exist answers [] by its timeout instead of waiting for the partition."""
    url, topic, group = rest_env.url, "not-json", "not-json-group"
    create_topic(rest_env.bootstrap, topic, 1)
    produce(rest_env.bootstrap, topic, [(0, None, b'{"ok": 1}'), (0, b"k", b"{oops"),
                                        (0, None, b"[2]")])
    script("v2_consumer_create", url, group, json.dumps(
        {"name": "j", "format": "json", "auto.offset.reset": "earliest", "fetch.min.bytes": 1}))
    no_content(script("v2_consumer_assign", url, group, "j",
                      json.dumps({"partitions": [tp(topic, 0)]})))
    assert read_until(rest_env, group, "j", 1, accept=JSON_TYPE) == [
        {"topic": topic, "key": None, "value": {"ok": 1}, "partition": 0, "offset": 0}]
    for _ in range(2):
        a = script("v2_consumer_records", url, group, "j", JSON_TYPE)
        assert (a.status, a.body["error_code"]) == (500, 50002), a
        assert a.body["message"].startswith(f"Kafka error: the record at offset 1 of {topic}-0 "
                                            "cannot be read as json")
    no_content(script("v2_consumer_seek", url, group, "j", json.dumps(
        {"offsets": [{"topic": topic, "partition": 0, "offset": 2}]})))
    ok(script("v2_consumer_records", url, group, "j", JSON_TYPE),
       [{"topic": topic, "key": None, "value": [2], "partition": 0, "offset": 2}], JSON_TYPE)

    no_content(script("v2_consumer_assign", url, group, "j", json.dumps(
        {"partitions": [tp("no-such-topic", 0)]})))
    started = time.monotonic()
    ok(script("v2_consumer_records", url, group, "j", JSON_TYPE, "timeout=300"), [], JSON_TYPE)
    assert time.monotonic() - started < 5
    no_content(script("v2_consumer_delete", url, group, "j"))


def test_idle_instance_expires_and_leaves_its_group(rest_env: Any) -> None:
    """Idle > 3 s (consumer.instance.timeout.ms=3000): 404/40403 and its consumer closed (the
    group has no member left); an instance used every second meanwhile stays."""
    url, topic, group = rest_env.url, "expiry", "expiry-group"
    create_topic(rest_env.bootstrap, topic, 1)
    produce(rest_env.bootstrap, topic, [(0, b"k", b"v")])
    for name in ("idle", "kept"):
        script("v2_consumer_create", url, group, json.dumps(
            {"name": name, "auto.offset.reset": "earliest", "fetch.min.bytes": 1}))
    no_content(script("v2_consumer_subscribe", url, group, "idle", json.dumps({"topics": [topic]})))
    read_until(rest_env, group, "idle", 1)          # a member of the group now
    admin = AdminClient({"bootstrap.servers": rest_env.bootstrap})

    def members() -> int:
        described = admin.describe_consumer_groups([group])[group].result(10)
        return len(described.members)
    assert members() == 1
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 3.6:
        ok(script("v2_consumer_subscription", url, group, "kept"), {"topics": []})
        time.sleep(0.5)
    error(script("v2_consumer_records", url, group, "idle"), 404, NOT_FOUND)
    error(script("v2_consumer_subscription", url, group, "idle"), 404, NOT_FOUND)
    deadline = time.monotonic() + 10
    while members() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert members() == 0
    ok(script("v2_consumer_subscription", url, group, "kept"), {"topics": []})
    no_content(script("v2_consumer_delete", url, group, "kept"))


# ---------------------------------------------------------------------------- Java's ranges

INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1


def out_of_range(where: str, value: int, kind: str) -> dict[str, Any]:
    """400/400 as Jackson words a number its int or long field cannot hold."""
    bits = 31 if kind == "int" else 63
    return {"error_code": 400, "message": f"{where}: Numeric value ({value}) out of range of "
                                          f"{kind} ({-2**bits} - {2**bits - 1})"}


def test_numbers_java_cannot_hold_are_400_and_times_before_1970_seek_to_the_beginning(
        rest_env: Any) -> None:
    """A partition is a Java int, an offset a long, consumer.request.timeout.ms and
    fetch.min.bytes ints: a number outside is 400/400 (Jackson's mapping error) and changes
    nothing; a commit of the largest long is 400 too (the offset committed is one more).
    The limits themselves are taken, and the instance keeps reading. A seek to a time
    before 1970 is before every record: the partition's beginning."""
    url, topic, group = rest_env.url, "ranges", "ranges-group"
    base = f"{url}/consumers/{group}/instances"
    create_topic(rest_env.bootstrap, topic, 1)
    produce(rest_env.bootstrap, topic, [(0, None, b"a"), (0, None, b"b")])
    for key in ("consumer.request.timeout.ms", "fetch.min.bytes"):
        for value in (INT_MAX + 1, -INT_MAX - 2, 10**30):
            error(curl("POST", f"{url}/consumers/{group}", data=json.dumps({key: value})), 400,
                  out_of_range(key, value, "int"))
    error(curl("POST", f"{url}/consumers/{group}",
               data='{"consumer.request.timeout.ms": "2147483648"}'), 400,
          out_of_range("consumer.request.timeout.ms", INT_MAX + 1, "int"))
    for data in ('{"consumer.request.timeout.ms": 1' + "0" * 400 + "}",
                 '{"fetch.min.bytes": "--5"}', '{"fetch.min.bytes": "\u00b2"}'):
        a = curl("POST", f"{url}/consumers/{group}", data=data)
        assert (a.status, a.body["error_code"]) == (400, 400), a
    ok(script("v2_consumer_create", url, group, json.dumps(
        {"name": "r", "auto.offset.reset": "earliest", "fetch.min.bytes": 1,
         "consumer.request.timeout.ms": INT_MAX})),
       {"instance_id": "r", "base_uri": f"{base}/r"})

    for partition in (INT_MAX + 1, 2**40):
        error(script("v2_consumer_assign", url, group, "r", json.dumps(
            {"partitions": [tp(topic, partition)]})), 400,
            out_of_range("partitions[0].partition", partition, "int"))
    ok(script("v2_consumer_assignments", url, group, "r"), {"partitions": []})
    no_content(script("v2_consumer_assign", url, group, "r", json.dumps(
        {"partitions": [tp(topic, INT_MAX)]})))     # the greatest int: a partition not there
    ok(script("v2_consumer_records", url, group, "r", BINARY, "timeout=100"), [], BINARY)
    no_content(script("v2_consumer_assign", url, group, "r", json.dumps(
        {"partitions": [tp(topic, 0)]})))
    assert [r["offset"] for r in read_until(rest_env, group, "r", 2)] == [0, 1]

    for offset in (LONG_MAX + 1, 2**70):
        error(script("v2_consumer_seek", url, group, "r", json.dumps(
            {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]})), 400,
            out_of_range("offsets[0].offset", offset, "long"))
        error(script("v2_consumer_commit", url, group, "r", json.dumps(
            {"offsets": [{"topic": topic, "partition": 0, "offset": offset}]})), 400,
            out_of_range("offsets[0].offset", offset, "long"))
    error(script("v2_consumer_commit", url, group, "r", json.dumps(
        {"offsets": [{"topic": topic, "partition": 0, "offset": LONG_MAX}]})), 400,
        {"error_code": 400, "message": f"offsets[0].offset: {LONG_MAX} is the largest offset "
                                       "there is; a commit stores the offset after the one "
                                       "named, and there is none"})
    ok(script("v2_consumer_committed", url, group, "r", json.dumps(
        {"partitions": [tp(topic, 0)]})), {"offsets": []})
    ok(script("v2_consumer_commit", url, group, "r", json.dumps(
        {"offsets": [{"topic": topic, "partition": 0, "offset": LONG_MAX - 1}]})), [])
    ok(script("v2_consumer_committed", url, group, "r", json.dumps(
        {"partitions": [tp(topic, 0)]})),
       {"offsets": [{"topic": topic, "partition": 0, "offset": LONG_MAX, "metadata": ""}]})

    # positions: nothing left to read; a time before 1970 goes back to the first record
    ok(script("v2_consumer_records", url, group, "r", BINARY, "timeout=100"), [], BINARY)
    for stamp in ("1969-12-31T23:59:59.999Z", "0001-01-01T00:00:00+01:00"):
        no_content(script("v2_consumer_seek", url, group, "r", json.dumps(
            {"timestamps": [{"topic": topic, "partition": 0, "timestamp": stamp}]})))
        assert [r["offset"] for r in read_until(rest_env, group, "r", 2)] == [0, 1]
    # the largest long is a position: out of the log's range, so auto.offset.reset applies
    no_content(script("v2_consumer_seek", url, group, "r", json.dumps(
        {"offsets": [{"topic": topic, "partition": 0, "offset": LONG_MAX}]})))
    assert [r["offset"] for r in read_until(rest_env, group, "r", 2)] == [0, 1]
    no_content(script("v2_consumer_delete", url, group, "r"))
