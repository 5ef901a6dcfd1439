"""v3's produce route, POST /v3/clusters/{cluster_id}/topics/{topic_name}/records, against a
live proxy and broker: records of each embedded type (BINARY, JSON, STRING) with headers,
partition and timestamp are read back by confluent-kafka exactly as sent; streaming mode
answers thousands of records on one connection in order, reports flowing while the client
is still writing, a bad record reported in its place; the curl scripts are walked; every
error answer is Confluent's, and the proxy goes on serving after each (records Kafka cannot
hold, such as a timestamp past 2^63-1 ms, never reach the principal's producer); a stream
whose client stopped reading is dropped a few seconds after its time limit.
"""
from __future__ import annotations

import asyncio
import base64
import json
import select
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import aiohttp
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition

from clients.admin import AdminClient, NewTopic
from tests.support.rest_proxy import RestProxyProcess

CURL_DIR = Path(__file__).parent / "curl"
TOPIC = "v3-records"            # 3 partitions, each test writes partitions of its own
STREAM_TOPIC = "v3-records-stream"
CURL_TOPIC = "v3-records-curl"
ERRORS_TOPIC = "v3-records-errors"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


@pytest.fixture(scope="module")
def env(rest_env: Any) -> Any:
    with AdminClient({"bootstrap.servers": rest_env.bootstrap}) as admin:
        admin.create_topics([NewTopic(t, 3, 1) for t in (TOPIC, STREAM_TOPIC, CURL_TOPIC, ERRORS_TOPIC)])
        rest_env.cluster_id = admin.describe_cluster().cluster_id
    assert rest_env.cluster_id
    return rest_env


def records_url(env: Any, topic: str) -> str:
    return f"{env.url}/v3/clusters/{env.cluster_id}/topics/{topic}/records"


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
    """(status, raw body) of one POST with a Content-Length body."""
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post_json(url: str, record: Any) -> tuple[int, Any]:
    status, raw = post(url, json.dumps(record).encode())
    assert raw.endswith(b"\r\n"), raw      # each report ends as Confluent's chunked output writes it
    return status, json.loads(raw)


def read_back(bootstrap: str, topic: str, partition: int, offset: int, count: int) -> list[Any]:
    """`count` messages of one partition from `offset`, read by librdkafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "v3-records-check",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        out: list[Any] = []
        for _ in range(200):
            for m in c.consume(count - len(out), timeout=0.5):
                assert m.error() is None, m.error()
                out.append(m)
            if len(out) >= count:
                return out
        raise AssertionError(f"read {len(out)} of {count} records from {topic}-{partition}")
    finally:
        c.close()


def delivered(env: Any, topic: str, partition: int, offset: int, timestamp: str,
              key: tuple[str, int] | None, value: tuple[str, int] | None) -> dict[str, Any]:
    """A delivery report as Confluent's ProduceResponse writes it."""
    report: dict[str, Any] = {"error_code": 200, "cluster_id": env.cluster_id, "topic_name": topic,
                              "partition_id": partition, "offset": offset, "timestamp": timestamp}
    if key is not None:
        report["key"] = {"type": key[0], "size": key[1]}
    if value is not None:
        report["value"] = {"type": value[0], "size": value[1]}
    return report


# ---------------------------------------------------------------------------- each type

def test_each_type_reaches_confluent_kafka_intact(env: Any) -> None:
    url = records_url(env, TOPIC)
    json_value = '{"a":[1,2.5,"é"],"b":null}'.encode()
    cases = [
        # (request, key bytes, value bytes, headers read back, partition, timestamp ms, report timestamp)
        ({"partition_id": 1, "headers": [{"name": "h1", "value": b64("v1")}, {"name": "h-null", "value": None}],
          "key": {"type": "BINARY", "data": b64(b"\x00\xffkey")},
          "value": {"type": "BINARY", "data": b64(b"\x01value\x00")},
          "timestamp": "2021-02-05T19:14:42.123Z"},
         b"\x00\xffkey", b"\x01value\x00", [("h1", b"v1"), ("h-null", None)], 1, 1612552482123,
         "2021-02-05T19:14:42.123Z"),
        ({"partition_id": 2, "headers": [{"name": "json", "value": b64("j")}],
          "key": {"type": "JSON", "data": {"id": 7}},
          "value": {"type": "JSON", "data": {"a": [1, 2.5, "é"], "b": None}},
          "timestamp": "2022-03-04T05:06:07Z"},
         b'{"id":7}', json_value, [("json", b"j")], 2, 1646370367000, "2022-03-04T05:06:07Z"),
        ({"partition_id": 0, "headers": [{"name": "s", "value": b64("x")}, {"name": "t", "value": b64("y")}],
          "key": {"type": "STRING", "data": "clé"}, "value": {"type": "STRING", "data": "hello, wörld"},
          "timestamp": 1700000000.5},
         "clé".encode(), "hello, wörld".encode(), [("s", b"x"), ("t", b"y")], 0, 1700000000500,
         "2023-11-14T22:13:20.500Z"),
    ]
    for request, key, value, headers, partition, ts_ms, ts_text in cases:
        status, report = post_json(url, request)
        assert status == 200, report
        kind_k, kind_v = request["key"]["type"], request["value"]["type"]
        assert report == delivered(env, TOPIC, partition, 0, ts_text, (kind_k, len(key)), (kind_v, len(value)))
        [m] = read_back(env.bootstrap, TOPIC, partition, 0, 1)
        assert (m.key(), m.value(), m.headers(), m.partition(), m.offset()) == (key, value, headers, partition, 0)
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, ts_ms)

    # No key at all, and a value whose data is null: a null key and value; the report
    # leaves the key out and gives the value's size as -1 (Kafka's serializedValueSize).
    status, report = post_json(url, {"partition_id": 0, "value": {"type": "BINARY", "data": None},
                                     "timestamp": "2021-02-05T19:14:42Z"})
    assert status == 200, report
    assert report == delivered(env, TOPIC, 0, 1, "2021-02-05T19:14:42Z", None, ("BINARY", -1))
    [m] = read_back(env.bootstrap, TOPIC, 0, 1, 1)
    assert (m.key(), m.value(), m.headers()) == (None, None, None)

    # No partition and no timestamp: the producer's partitioner places it (the key's hash),
    # and the proxy stamps the time; the report says where and when.
    status, report = post_json(url, {"key": {"type": "STRING", "data": "k"}, "value": {"type": "STRING", "data": "v"}})
    assert status == 200, report
    [m] = read_back(env.bootstrap, TOPIC, report["partition_id"], report["offset"], 1)
    assert (m.key(), m.value()) == (b"k", b"v")
    assert report["timestamp"].endswith("Z") and m.timestamp()[0] == TIMESTAMP_CREATE_TIME


# ---------------------------------------------------------------------------- streaming

def test_streaming_many_records_on_one_connection(env: Any) -> None:
    count, bad = 3000, 1500
    records = [{"partition_id": 0, "value": {"type": "STRING", "data": f"r{i}"}} for i in range(count)]
    records[bad] = {"partition_id": 0, "value": {"type": "BINARY", "data": "not base64!"}}
    reports = asyncio.run(_stream(records_url(env, STREAM_TOPIC), records, first=100))
    assert len(reports) == count
    assert reports[bad] == {"error_code": 400,
                            "message": 'Bad Request: data="not base64!" is not a valid base64 string.'}
    good = reports[:bad] + reports[bad + 1:]
    assert all(r["error_code"] == 200 and r["partition_id"] == 0 for r in good), good[:3]
    base = good[0]["offset"]
    assert [r["offset"] for r in good] == list(range(base, base + count - 1))
    assert {r["topic_name"] for r in good} == {STREAM_TOPIC}
    assert all(r["value"] == {"type": "STRING", "size": len(f"r{i}")} for i, r in enumerate(reports) if i != bad)
    values = [m.value().decode() for m in read_back(env.bootstrap, STREAM_TOPIC, 0, base, count - 1)]
    assert values == [f"r{i}" for i in range(count) if i != bad]


async def _stream(url: str, records: list[Any], first: int) -> list[Any]:
    """Write `records` concatenated into one chunked request: the first `first` of them,
    then (once their reports came back, while the request is still open) the rest.
    Returns the reports in the order read."""
    reports: list[Any] = []
    first_answered = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield "".join(json.dumps(r) for r in records[:first]).encode()
        await asyncio.wait_for(first_answered.wait(), 30)
        for i in range(first, len(records), 250):
            yield "\n".join(json.dumps(r) for r in records[i:i + 250]).encode() + b"\n"

    decoder = json.JSONDecoder()
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body(), headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("application/json")
            assert resp.headers["Transfer-Encoding"] == "chunked"
            buf = ""
            async for data in resp.content.iter_any():
                buf += data.decode()
                pos = 0
                while True:
                    rest = buf[pos:].lstrip()
                    if not rest:
                        pos = len(buf)
                        break
                    start = len(buf) - len(rest)
                    try:
                        report, pos = decoder.raw_decode(buf, start)
                    except ValueError:
                        pos = start
                        break
                    reports.append(report)
                    assert buf[pos:pos + 2] in ("\r\n", "\r", ""), buf[pos:pos + 10]
                buf = buf[pos:]
                if len(reports) >= first:
                    first_answered.set()
    return reports


def test_streaming_body_that_stops_being_json(env: Any) -> None:
    """Text that is not JSON ends the stream with a 400 report after the records before it;
    the record after it is never produced."""
    body = (b'{"partition_id":1,"value":{"type":"STRING","data":"before"}}\n'
            b'{"partition_id":1,"value": nope}\n'
            b'{"partition_id":1,"value":{"type":"STRING","data":"after"}}\n')

    async def run() -> tuple[int, str]:
        async def chunks() -> AsyncIterator[bytes]:
            yield body
        async with aiohttp.ClientSession() as session:
            async with session.post(records_url(env, STREAM_TOPIC), data=chunks(),
                                    headers={"Content-Type": "application/json"}) as resp:
                return resp.status, await resp.text()

    status, text = asyncio.run(run())
    assert status == 200
    first, second = [json.loads(line) for line in text.split("\r\n") if line]
    assert first["error_code"] == 200 and first["partition_id"] == 1
    assert second == {"error_code": 400,
                      "message": "Bad Request: Error processing message: Expecting value at character 88"}
    [m] = read_back(env.bootstrap, STREAM_TOPIC, 1, first["offset"], 1)
    assert m.value() == b"before"


STREAM_LIMIT_S = 1.5


@pytest.fixture(scope="module")
def short_streams(env: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestProxyProcess]:
    """A proxy of its own whose streams may stay open STREAM_LIMIT_S."""
    proxy = RestProxyProcess(tmp_path_factory.mktemp("short-streams"), env.bootstrap,
                             {"streaming.connection.max.duration.ms": str(int(STREAM_LIMIT_S * 1000))})
    proxy.start()
    yield proxy
    proxy.stop()


def test_a_stream_open_too_long_is_ended_with_408(env: Any, short_streams: RestProxyProcess) -> None:
    """streaming.connection.max.duration.ms: past it, the records already written are
    reported, then Confluent's 408 report, and the answer ends while the client is still
    connected."""
    url = f"{short_streams.url}/v3/clusters/{env.cluster_id}/topics/{STREAM_TOPIC}/records"
    records = [{"partition_id": 2, "value": {"type": "STRING", "data": f"t{i}"}} for i in range(5)]

    async def run() -> tuple[int, str]:
        done = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield "".join(json.dumps(r) for r in records).encode()
            await asyncio.wait_for(done.wait(), 30)       # keep the request open

        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=body(), headers={"Content-Type": "application/json"}) as resp:
                text = await asyncio.wait_for(resp.text(), 20)
                done.set()
                return resp.status, text

    status, text = asyncio.run(run())
    assert status == 200
    reports = [json.loads(line) for line in text.split("\r\n") if line]
    assert [r["error_code"] for r in reports] == [200] * 5 + [408]
    assert reports[-1] == {"error_code": 408,
                           "message": "Streaming connection open for longer than allowed: Connection will be closed."}
    base = reports[0]["offset"]
    assert [r["offset"] for r in reports[:5]] == list(range(base, base + 5))


def test_a_stream_whose_client_stopped_reading_is_closed_after_the_limit(
        env: Any, short_streams: RestProxyProcess) -> None:
    """A client that writes records and never reads its reports: once the time limit has
    passed and the reports cannot be written, the proxy drops the connection a few seconds
    later (it used to wait in the write for good, holding the connection and its records)."""
    host, port = short_streams.url.removeprefix("http://").split(":")
    path = f"/v3/clusters/{env.cluster_id}/topics/{STREAM_TOPIC}/records"
    # Records refused at once (a record is an object, not 1), each a report of ~95 bytes:
    # ~9.5 MB of them, more than the socket buffers (up to 4 MB each way) take, so the
    # proxy's writer waits for the client; from a 200 KB body, which they take whole.
    records = b"1 " * 100_000
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)     # its reports soon fill it
    try:
        sock.settimeout(10)
        sock.connect((host, int(port)))
        started = time.monotonic()
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
                     + b"%x\r\n%s\r\n" % (len(records), records))
        # The request stays open and nothing is read: wait for the proxy to reset it.
        poller = select.poll()
        poller.register(sock, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
        events = poller.poll(1000 * (STREAM_LIMIT_S + 15))
        closed_after = time.monotonic() - started
    finally:
        sock.close()
    assert events and events[0][1] & (select.POLLERR | select.POLLHUP), (
        f"the proxy still holds the connection 15 s after the stream's limit: {events}")
    assert STREAM_LIMIT_S < closed_after < STREAM_LIMIT_S + 10, closed_after
    # ... and it goes on serving.
    status, raw = post(f"{short_streams.url}{path}", json.dumps(GOOD).encode())
    assert status == 200 and json.loads(raw)["error_code"] == 200, raw


# ---------------------------------------------------------------------------- curl

def curl_script(name: str, *args: str) -> tuple[int, dict[str, str], str]:
    """(status, headers lower-cased, body) of one of the curl scripts, which print with -i."""
    out = subprocess.run([str(CURL_DIR / name), *args], capture_output=True, timeout=60, check=True).stdout
    while out.startswith(b"HTTP/1.1 100"):          # curl's Expect: 100-continue, for chunked uploads
        out = out.partition(b"\r\n\r\n")[2]
    head, _, payload = out.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, payload.decode()


def test_curl_scripts(env: Any) -> None:
    status, headers, body = curl_script("v3_produce_records.sh", env.url, env.cluster_id, CURL_TOPIC)
    assert status == 200 and headers["content-type"].startswith("application/json"), body
    assert json.loads(body) == delivered(env, CURL_TOPIC, 0, 0, "2021-02-05T19:14:42.123Z",
                                         ("BINARY", 5), ("JSON", len(b'{"n":1,"s":"one"}')))
    [m] = read_back(env.bootstrap, CURL_TOPIC, 0, 0, 1)
    assert (m.key(), m.value(), m.headers()) == (b"key-1", b'{"n":1,"s":"one"}', [("trace", b"abc123")])

    status, headers, body = curl_script("v3_produce_records_streaming.sh", env.url, env.cluster_id, CURL_TOPIC)
    assert status == 200 and headers["transfer-encoding"] == "chunked", body
    reports = [json.loads(line) for line in body.split("\r\n") if line]
    assert [(r["error_code"], r["partition_id"], r["offset"], r["value"]) for r in reports] == [
        (200, 0, n, {"type": "STRING", "size": 8}) for n in (1, 2, 3)]
    assert [m.value() for m in read_back(env.bootstrap, CURL_TOPIC, 0, 1, 3)] == [
        b"record 1", b"record 2", b"record 3"]

    # Two records concatenated in one body with a length: 200, a report each.
    two = ('{"partition_id":2,"value":{"type":"STRING","data":"a"}}'
           '{"partition_id":2,"value":{"type":"BINARY","data":"%%%"}}')
    status, _, body = curl_script("v3_produce_records.sh", env.url, env.cluster_id, CURL_TOPIC, two)
    assert status == 200
    first, second = [json.loads(line) for line in body.split("\r\n") if line]
    assert (first["error_code"], first["partition_id"], first["offset"]) == (200, 2, 0)
    assert second == {"error_code": 400, "message": 'Bad Request: data="%%%" is not a valid base64 string.'}


# ---------------------------------------------------------------------------- errors

GOOD = {"partition_id": 0, "value": {"type": "STRING", "data": "still serving"}}

ERROR_CASES = [
    # (name, path topic, body, content type, status, expected body; a str is a message prefix)
    ("wrong content type", ERRORS_TOPIC, json.dumps(GOOD).encode(), "text/plain", 415,
     {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"}),
    ("malformed JSON", ERRORS_TOPIC, b'{"value": {"type": "STRING", "data": "x"', "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Error processing message: Expecting ',' delimiter at character 40"}),
    ("base64 that does not decode", ERRORS_TOPIC,
     json.dumps({"value": {"type": "BINARY", "data": "fooba"}}).encode(), "application/json", 400,
     {"error_code": 400, "message": 'Bad Request: data="fooba" is not a valid base64 string.'}),
    ("unknown topic", "no-such-topic", json.dumps(GOOD).encode(), "application/json", 404,
     {"error_code": 40403, "message": "This server does not host this topic-partition."}),
    ("unknown partition", ERRORS_TOPIC,
     json.dumps({"partition_id": 7, "value": {"type": "STRING", "data": "x"}}).encode(), "application/json", 404,
     {"error_code": 40403, "message": "partition 7 of topic v3-records-errors does not exist (3 partitions)"}),
    ("negative partition", ERRORS_TOPIC,
     json.dumps({"partition_id": -1, "value": {"type": "STRING", "data": "x"}}).encode(), "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Invalid partition: -1. Partition number should always be "
                                    "non-negative or null."}),
    ("type omitted: a schema is needed", ERRORS_TOPIC, json.dumps({"value": {"data": "x"}}).encode(),
     "application/json", 422,
     {"error_code": 42206, "message": "Payload error. Schema Registry must be configured when using schemas."}),
    ("a schema type", ERRORS_TOPIC,
     json.dumps({"value": {"type": "AVRO", "schema": '"string"', "data": "x"}}).encode(), "application/json", 422,
     {"error_code": 42206, "message": "Payload error. Schema Registry must be configured when using schemas."}),
    ("empty body", ERRORS_TOPIC, b"", "application/json", 422,
     {"error_code": 42206, "message": "Payload error. Null input provided. Data is required."}),
    ("a 10 MB record", ERRORS_TOPIC,
     json.dumps({"value": {"type": "BINARY", "data": b64(b"x" * (10 * 1024 * 1024))}}).encode(),
     "application/json", 413, "a record of about 10485"),
    # A timestamp no Kafka record can hold: before, it reached the principal's producer and
    # stopped it for good (every later request hung).
    ("a timestamp past an Instant", ERRORS_TOPIC,
     b'{"partition_id":0,"timestamp":99999999999999999999,"value":{"type":"STRING","data":"x"}}',
     "application/json", 400,
     {"error_code": 400, "message": "Bad Request: timestamp=99999999999999999999 is not a valid instant: "
                                    "Instant exceeds minimum or maximum instant"}),
    ("a timestamp past Kafka's Long", ERRORS_TOPIC,
     b'{"partition_id":0,"timestamp":9223372036854776,"value":{"type":"STRING","data":"x"}}',
     "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Invalid timestamp: 9223372036854776000. Timestamp should be "
                                    "at most 9223372036854775807 (milliseconds since the epoch)."}),
    ("a timestamp of 1e400", ERRORS_TOPIC,
     b'{"partition_id":0,"timestamp":1e400,"value":{"type":"STRING","data":"x"}}', "application/json", 400,
     {"error_code": 400, "message": "Bad Request: timestamp=Infinity is not a valid instant: "
                                    "Instant exceeds minimum or maximum instant"}),
    ("a timestamp of 5000 digits", ERRORS_TOPIC,
     b'{"partition_id":0,"timestamp":' + b"9" * 5000 + b"}", "application/json", 400,
     "Bad Request: Error processing message: Exceeds the limit (4300 digits) for integer string conversion"),
    # NaN and Infinity are not JSON (Jackson refuses them): before, NaN went into Kafka as
    # JSON data that no JSON parser reads, and a NaN timestamp was a 500.
    ("a NaN timestamp", ERRORS_TOPIC,
     b'{"partition_id":0,"timestamp":NaN,"value":{"type":"STRING","data":"x"}}', "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Error processing message: Non-standard token 'NaN' "
                                    "in the value at character 0"}),
    ("NaN in JSON data", ERRORS_TOPIC,
     b'{"partition_id":0,"value":{"type":"JSON","data":{"x":[NaN]}}}', "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Error processing message: Non-standard token 'NaN' "
                                    "in the value at character 0"}),
    ("1e400 in JSON data", ERRORS_TOPIC,
     b'{"partition_id":0,"value":{"type":"JSON","data":{"x":-1e400}}}', "application/json", 400,
     {"error_code": 400, "message": 'Bad Request: data={"x":-Infinity} cannot be written as JSON: '
                                    "Out of range float values are not JSON compliant"}),
    # Text that is not Unicode: before, a 500 and a stack trace in the log per record.
    ("a lone surrogate in STRING data", ERRORS_TOPIC,
     b'{"partition_id":0,"value":{"type":"STRING","data":"a\\ud800"}}', "application/json", 400,
     {"error_code": 400, "message": 'Bad Request: data="a\\ud800" is not Unicode text: it holds a lone '
                                    "surrogate."}),
    ("a lone surrogate in a header name", ERRORS_TOPIC,
     b'{"partition_id":0,"headers":[{"name":"\\udc00","value":null}],"value":{"type":"STRING","data":"x"}}',
     "application/json", 400,
     {"error_code": 400, "message": 'Bad Request: header name "\\udc00" is not Unicode text: it holds a '
                                    "lone surrogate."}),
    # Nesting deeper than Python's json reads: before, a 500.
    ("JSON nested 100000 deep", ERRORS_TOPIC, b"[" * 100_000 + b"]" * 100_000, "application/json", 400,
     {"error_code": 400, "message": "Bad Request: Error processing message: the JSON text is nested too "
                                    "deeply at character 0"}),
]


@pytest.mark.parametrize("name, topic, body, content_type, status, expected", ERROR_CASES,
                         ids=[c[0] for c in ERROR_CASES])
def test_error_answers_then_serving_goes_on(env: Any, name: str, topic: str, body: bytes, content_type: str,
                                           status: int, expected: Any) -> None:
    got_status, raw = post(records_url(env, topic), body, content_type)
    answer = json.loads(raw)
    assert got_status == status, answer
    if isinstance(expected, str):
        assert answer["error_code"] == status and answer["message"].startswith(expected), answer
    else:
        assert answer == expected
    ok_status, report = post_json(records_url(env, ERRORS_TOPIC), GOOD)
    assert ok_status == 200 and report["error_code"] == 200, report


def test_bad_records_in_a_stream_are_reported_in_place_and_not_logged(env: Any) -> None:
    """In one stream: records the producer must never see (a timestamp past an Instant,
    text with a lone surrogate) get their 400 in place and the records after them are
    produced; JSON nested too deep for the reader ends the body with a 400 report (before:
    the stream ended with no report and the records after it silently never produced).
    None of it is a stack trace in the proxy's log."""
    def rec(data: str, **extra: Any) -> bytes:
        return json.dumps({"partition_id": 1, "value": {"type": "STRING", "data": data}, **extra}).encode()

    pieces = [rec("s1"), rec("s2", timestamp=99999999999999999999), rec("s3"),
              b'{"partition_id":1,"value":{"type":"STRING","data":"\\ud800"}}', rec("s4"),
              b"[" * 100_000 + b"]" * 100_000, rec("s5")]

    async def run() -> tuple[int, str]:
        async def chunks() -> AsyncIterator[bytes]:
            for p in pieces:
                for i in range(0, len(p), 16384):
                    yield p[i:i + 16384]
                    await asyncio.sleep(0)
        async with aiohttp.ClientSession() as session:
            async with session.post(records_url(env, STREAM_TOPIC), data=chunks(),
                                    headers={"Content-Type": "application/json"}) as resp:
                return resp.status, await asyncio.wait_for(resp.text(), 30)

    status, text = asyncio.run(run())
    assert status == 200
    reports = [json.loads(line) for line in text.split("\r\n") if line]
    assert [r["error_code"] for r in reports] == [200, 400, 200, 400, 200, 400], reports
    assert reports[1] == {"error_code": 400, "message": "Bad Request: timestamp=99999999999999999999 is not a "
                                                        "valid instant: Instant exceeds minimum or maximum instant"}
    assert reports[3] == {"error_code": 400, "message": 'Bad Request: data="\\ud800" is not Unicode text: it '
                                                        "holds a lone surrogate."}
    assert reports[5]["message"].startswith("Bad Request: Error processing message: the JSON text is nested "
                                            "too deeply at character ")
    good = [reports[i] for i in (0, 2, 4)]
    assert [r["offset"] for r in good] == [good[0]["offset"] + i for i in range(3)]
    assert [m.value() for m in read_back(env.bootstrap, STREAM_TOPIC, 1, good[0]["offset"], 3)] == [
        b"s1", b"s3", b"s4"]
    assert "Traceback" not in env.proxy.output(), env.proxy.output()[-3000:]
