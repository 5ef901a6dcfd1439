"""v3 produce's conversion of JSON records to Kafka records and of delivery outcomes to
Confluent's reports (clients/rest/records_codec.py), the incremental reader of a
concatenated-JSON body (clients/rest/json_stream.py; more in test_rest_json_stream.py), and
how the route logs an unexpected error (clients/rest/v3_records.py), without sockets."""
from __future__ import annotations

import json
import logging

import pytest

from clients.protocol.errors import BY_NAME
from clients.aio.errors import KafkaTimeoutError
from clients.rest.errors import RestError
from clients.rest.json_stream import JsonStreamReader
from clients.rest.records_codec import (ProduceRecord, ReportRenderer, decode_base64, error_for,
                                        error_report, format_timestamp, parse_record,
                                        parse_timestamp)
from clients.rest.v3_records import RareLog
from clients.types import RecordMetadata


# ---------------------------------------------------------------------------- records

def test_each_embedded_type() -> None:
    r = parse_record({"partition_id": 2, "timestamp": "2021-02-05T19:14:42.123Z",
                      "headers": [{"name": "a", "value": "eHk="}, {"name": "b", "value": None}, {"name": "c"}],
                      "key": {"type": "BINARY", "data": "AP8="},
                      "value": {"type": "JSON", "data": {"x": [1, "é", None]}}})
    assert r == ProduceRecord(2, [("a", b"xy"), ("b", None), ("c", None)], b"\x00\xff",
                              '{"x":[1,"é",null]}'.encode(), 1612552482123, "BINARY", "JSON")
    r = parse_record({"key": {"type": "STRING", "data": "clé"}, "value": {"type": "JSON", "data": "text"}})
    assert r == ProduceRecord(None, None, "clé".encode(), b'"text"', None, "STRING", "JSON")


def test_absent_and_null_data() -> None:
    assert parse_record({}) == ProduceRecord(None, None, None, None, None, None, None)
    assert parse_record({"key": None, "value": {"type": "JSON", "data": None}}) == ProduceRecord(
        None, None, None, None, None, None, "JSON")
    assert parse_record({"value": {"type": "BINARY"}}).value_type == "BINARY"
    assert parse_record({"value": {"type": "STRING", "data": ""}}).value == b""


def _error(obj: object) -> RestError:
    with pytest.raises(RestError) as e:
        parse_record(obj)
    return e.value


@pytest.mark.parametrize("obj, status, code, message", [
    ({"value": {"type": "BINARY", "data": "fooba"}}, 400, 400,
     'Bad Request: data="fooba" is not a valid base64 string.'),
    ({"value": {"type": "BINARY", "data": 1}}, 400, 400, "Bad Request: data=1 is not a base64 string."),
    ({"value": {"type": "STRING", "data": {"a": 1}}}, 400, 400, 'Bad Request: data={"a":1} is not a string.'),
    ({"value": {"data": "x"}}, 422, 42206, "Payload error. Schema Registry must be configured when using schemas."),
    ({"key": {}}, 422, 42206, "Payload error. Schema Registry must be configured when using schemas."),
    ({"value": {"type": "PROTOBUF", "schema_id": 3, "data": {}}}, 422, 42206,
     "Payload error. Schema Registry must be configured when using schemas."),
    ({"value": {"type": "BINARY", "schema_id": 3, "data": "AA=="}}, 400, 400,
     "Bad Request: 'type=BINARY' cannot be used with 'schema_id'."),
    ({"value": {"type": "JSON", "subject_name_strategy": "TOPIC_NAME"}}, 400, 400,
     "Bad Request: 'type=JSON' cannot be used with 'subject_strategy'."),
    ({"value": {"type": "binary", "data": "AA=="}}, 400, 400,
     'Bad Request: type="binary" is not one of BINARY, JSON, STRING, AVRO, JSONSCHEMA, PROTOBUF.'),
    ({"value": "AA=="}, 400, 400, 'Bad Request: value="AA==" is not a JSON object.'),
    ({"partition_id": -1}, 400, 400,
     "Bad Request: Invalid partition: -1. Partition number should always be non-negative or null."),
    ({"partition_id": "1"}, 400, 400, 'Bad Request: partition_id="1" is not an integer.'),
    ({"partition_id": True}, 400, 400, "Bad Request: partition_id=true is not an integer."),
    ({"headers": {"a": "b"}}, 400, 400, 'Bad Request: headers={"a":"b"} is not a JSON array.'),
    ({"headers": [{"value": "AA=="}]}, 400, 400,
     "Bad Request: header {\"value\":\"AA==\"} has no string 'name'."),
    ({"headers": [{"name": "h", "value": "@@"}]}, 400, 400,
     "Bad Request: value=\"@@\" of header 'h' is not a valid base64 string."),
    ({"timestamp": "yesterday"}, 400, 400, 'Bad Request: timestamp="yesterday" is not an ISO-8601 date-time.'),
    ({"timestamp": -1}, 400, 400,
     "Bad Request: Invalid timestamp: -1000. Timestamp should always be non-negative or null."),
    ([{"value": None}], 400, 400,
     'Bad Request: Error processing JSON: a record is a JSON object, not [{"value":null}]'),
    # Past what Java's Instant holds (Jackson's answer), or past Kafka's Long of milliseconds:
    # before, such a record reached the producer and its batch stopped the sender for good.
    ({"timestamp": 99999999999999999999}, 400, 400,
     "Bad Request: timestamp=99999999999999999999 is not a valid instant: Instant exceeds "
     "minimum or maximum instant"),
    ({"timestamp": 31556889864403200}, 400, 400,
     "Bad Request: timestamp=31556889864403200 is not a valid instant: Instant exceeds "
     "minimum or maximum instant"),
    ({"timestamp": 9223372036854776}, 400, 400,
     "Bad Request: Invalid timestamp: 9223372036854776000. Timestamp should be at most "
     "9223372036854775807 (milliseconds since the epoch)."),
    ({"timestamp": 9223372036854775.808}, 400, 400,
     "Bad Request: Invalid timestamp: 9223372036854775808. Timestamp should be at most "
     "9223372036854775807 (milliseconds since the epoch)."),
    ({"timestamp": float("inf")}, 400, 400,
     "Bad Request: timestamp=Infinity is not a valid instant: Instant exceeds minimum or maximum instant"),
    ({"timestamp": float("-inf")}, 400, 400,
     "Bad Request: timestamp=-Infinity is not a valid instant: Instant exceeds minimum or maximum instant"),
    ({"timestamp": float("nan")}, 400, 400,
     "Bad Request: timestamp=NaN is not a valid instant: Instant exceeds minimum or maximum instant"),
    # A number JSON cannot hold (1e400 reads as infinity), and text that is not Unicode
    # (a lone surrogate, "\ud800" in JSON): 400, not a failure to encode later.
    ({"value": {"type": "JSON", "data": {"n": [float("inf")]}}}, 400, 400,
     'Bad Request: data={"n":[Infinity]} cannot be written as JSON: Out of range float values are '
     'not JSON compliant'),
    ({"value": {"type": "JSON", "data": float("nan")}}, 400, 400,
     "Bad Request: data=NaN cannot be written as JSON: Out of range float values are not JSON compliant"),
    ({"value": {"type": "STRING", "data": "a\ud800b"}}, 400, 400,
     'Bad Request: data="a\\ud800b" is not Unicode text: it holds a lone surrogate.'),
    ({"key": {"type": "JSON", "data": ["\udfff"]}}, 400, 400,
     'Bad Request: data=["\\udfff"] is not Unicode text: it holds a lone surrogate.'),
    ({"headers": [{"name": "h\ud800", "value": None}]}, 400, 400,
     'Bad Request: header name "h\\ud800" is not Unicode text: it holds a lone surrogate.'),
])
def test_refused_records(obj: object, status: int, code: int, message: str) -> None:
    e = _error(obj)
    assert (e.status, e.error_code, e.message) == (status, code, message)


def test_a_long_bad_value_is_shown_cut_short() -> None:
    message = _error({"value": {"type": "BINARY", "data": "@" * 10_000}}).message
    assert message == f'Bad Request: data="{"@" * 119}... is not a valid base64 string.'


def test_headers_of_one_name_are_grouped_as_confluent_does() -> None:
    r = parse_record({"headers": [{"name": "a", "value": "MQ=="}, {"name": "b", "value": "Mg=="},
                                  {"name": "a", "value": "Mw=="}]})
    assert r.headers == [("a", b"1"), ("a", b"3"), ("b", b"2")]


@pytest.mark.parametrize("text, data", [
    ("", b""), ("Zm9vYmFy", b"foobar"), ("Zm9vYg==", b"foob"), ("Zm9vYg", b"foob"), ("Zm9vYmE", b"fooba"),
    ("Zm9vYg===", b"foob"), ("+/8=", b"\xfb\xff"),
])
def test_base64_as_guava_decodes_it(text: str, data: bytes) -> None:
    assert decode_base64(text) == data


@pytest.mark.parametrize("text", ["Zm9vY", "Zm9v YmFy", "Zm9v\nYmFy", "Zm9v_-", "=Zm9v", "Zm=9v", "é"])
def test_not_base64(text: str) -> None:
    assert decode_base64(text) is None


@pytest.mark.parametrize("value, ms", [
    ("2021-02-05T19:14:42Z", 1612552482000), ("2021-02-05T19:14:42.123Z", 1612552482123),
    ("2021-02-05T20:14:42.5+01:00", 1612552482500), ("2021-02-05T19:14:42", 1612552482000),
    ("1970-01-01T00:00:00Z", 0), (1612552482, 1612552482000), (1612552482.25, 1612552482250),
])
def test_timestamps_read_as_jackson_reads_an_instant(value: object, ms: int) -> None:
    assert parse_timestamp(value) == ms


@pytest.mark.parametrize("ms, text", [
    (1612552482000, "2021-02-05T19:14:42Z"), (1612552482123, "2021-02-05T19:14:42.123Z"),
    (1612552482120, "2021-02-05T19:14:42.120Z"), (1612552482001, "2021-02-05T19:14:42.001Z"),
    (0, "1970-01-01T00:00:00Z"), (1612552483000, "2021-02-05T19:14:43Z"),
])
def test_timestamps_written_as_java_prints_an_instant(ms: int, text: str) -> None:
    assert format_timestamp(ms) == text


# ---------------------------------------------------------------------------- reports

def test_delivery_reports() -> None:
    r = ReportRenderer("c-1", 'odd"topic')
    md = RecordMetadata('odd"topic', 2, 41, 1612552482123, 5, -1)
    text = r.delivered(md, "BINARY", "JSON")
    assert text.endswith("}\r\n")
    assert list(json.loads(text).items()) == [
        ("error_code", 200), ("cluster_id", "c-1"), ("topic_name", 'odd"topic'), ("partition_id", 2),
        ("offset", 41), ("timestamp", "2021-02-05T19:14:42.123Z"),
        ("key", {"type": "BINARY", "size": 5}), ("value", {"type": "JSON", "size": -1})]
    assert json.loads(r.delivered(md, None, None)) == {
        "error_code": 200, "cluster_id": "c-1", "topic_name": 'odd"topic', "partition_id": 2, "offset": 41,
        "timestamp": "2021-02-05T19:14:42.123Z"}
    assert error_report(RestError(400, 400, "Bad Request: é")) == (
        '{"error_code":400,"message":"Bad Request: é"}\r\n')
    # A message quoting text that is not Unicode is still written (escaped).
    text = error_report(RestError(400, 400, "Bad Request: é \ud800"))
    assert text == '{"error_code":400,"message":"Bad Request: \\u00e9 \\ud800"}\r\n'
    text.encode()


def test_producer_errors_as_reports() -> None:
    too_large = error_for(BY_NAME["MESSAGE_TOO_LARGE"]("a record of about 10485843 bytes is larger"))
    assert (too_large.status, too_large.error_code) == (413, 413)
    unknown = error_for(BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]("partition 7 of topic t does not exist"))
    assert (unknown.status, unknown.error_code, unknown.message) == (
        404, 40403, "partition 7 of topic t does not exist")
    timeout = error_for(KafkaTimeoutError("no buffer space"))
    assert (timeout.status, timeout.error_code) == (500, 50003)
    assert error_for(RuntimeError("bug")).error_code == 500


# ---------------------------------------------------------------------------- the body

BODY = ('{"a":1} {"b":"x\\u00e9y"}\n[1,2]  12 "s" {"c":{"d":[true,false,null]}} 3.5e2 -7 "é"'
        '{"long":"' + "z" * 300 + '"}').encode()
VALUES = [{"a": 1}, {"b": "xéy"}, [1, 2], 12, "s", {"c": {"d": [True, False, None]}}, 350.0, -7, "é",
          {"long": "z" * 300}]


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 13, 64, len(BODY)])
def test_values_split_anywhere_come_out_whole(step: int) -> None:
    reader = JsonStreamReader(1000)
    out = []
    for i in range(0, len(BODY), step):
        out += reader.feed(BODY[i:i + step])
    out += reader.finish()
    assert out == VALUES and reader.error is None


def test_text_that_is_not_json_ends_the_body_after_the_values_before_it() -> None:
    reader = JsonStreamReader(1000)
    assert reader.feed(b'{"a":1} {"b": nope} {"c":2}') == [{"a": 1}]
    assert str(reader.error) == "Expecting value at character 14"
    assert reader.feed(b'{"d":3}') == [] and reader.finish() == []


def test_an_unfinished_value_is_an_error_only_at_the_end() -> None:
    reader = JsonStreamReader(1000)
    assert reader.feed(b'{"a":1} {"b": ') == [{"a": 1}] and reader.error is None
    assert reader.finish() == [] and str(reader.error) == "Expecting value at character 14"
    reader = JsonStreamReader(1000)
    assert reader.feed(b'{"a": "unterminated') == [] and reader.error is None
    assert reader.finish() == [] and str(reader.error).startswith("Unterminated string starting at")


def test_bytes_that_are_not_utf8() -> None:
    reader = JsonStreamReader(1000)
    assert reader.feed(b'{"a":1}\xff{"b":2}') == [{"a": 1}]
    assert str(reader.error) == "the body is not UTF-8: invalid start byte at byte 7"
    reader = JsonStreamReader(1000)
    assert reader.feed('{"é":1}'.encode()[:3]) == [] and reader.error is None   # half a character
    assert reader.feed('{"é":1}'.encode()[3:]) == [{"é": 1}]


def test_a_value_over_the_limit() -> None:
    reader = JsonStreamReader(100)
    assert reader.feed(b'{"a":1}{"b":"' + b"x" * 50) == [{"a": 1}]
    assert reader.error is None
    assert reader.feed(b"x" * 60) == [] and reader.error is not None and reader.error.too_large
    assert str(reader.error) == "a record's JSON text is over 100 characters"


def test_a_large_value_in_many_chunks_is_not_parsed_once_per_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    import clients.rest.json_stream as js
    calls = []
    real = js._raw_decode

    def counting(text: str, pos: int) -> tuple[object, int]:
        calls.append(len(text))
        return real(text, pos)
    monkeypatch.setattr(js, "_raw_decode", counting)
    reader = JsonStreamReader(10 * 1024 * 1024)
    payload = b"A" * (4 * 1024 * 1024)
    chunks = [b'{"value":{"type":"BINARY","data":"']
    chunks += [payload[i:i + 16384] for i in range(0, len(payload), 16384)]
    out = []
    for c in chunks:
        out += reader.feed(c)
    out += reader.feed(b'"}}')
    assert out == [{"value": {"type": "BINARY", "data": payload.decode()}}]
    assert len(calls) < 10, len(calls)      # 257 chunks


# ---------------------------------------------------------------------------- logging

def test_unexpected_errors_are_logged_once_an_interval_not_once_a_record(caplog: pytest.LogCaptureFixture) -> None:
    # A request of many records that each hit the same bug: one stack trace, not one each.
    now = [100.0]
    rare = RareLog(logging.getLogger("test.rare"), 60.0, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, "test.rare"):
        for i in range(1000):
            try:
                raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, f"record {i}")
            except UnicodeEncodeError as e:
                rare.exception("producing a record to t failed", e)
        now[0] += 60.0
        rare.exception("producing a record to t failed", RuntimeError("later"))
    assert [(r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("producing a record to t failed", True),
        ("producing a record to t failed (and 999 more unexpected errors since the last one logged)", True)]
    assert "record 0" in caplog.text and "later" in caplog.text
