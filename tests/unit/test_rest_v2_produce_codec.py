"""v2 produce bodies without sockets: each embedded format's serialization, every refusal
with Confluent's status, code and message, and the answer built from records' outcomes."""
from __future__ import annotations

import base64

import pytest

from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError
from clients.protocol.errors import BY_NAME
from clients.rest.errors import RestError
from clients.rest.v2_produce_codec import (EMBEDDED_FORMATS, PRODUCE_TYPES, ProduceRecord,
                                           decode_base64, encode_json, parse_produce_request,
                                           produce_response, record_error_code)
from clients.types import RecordMetadata


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _refused(body: object, embedded: str = "binary") -> tuple[int, int, str]:
    with pytest.raises(RestError) as e:
        parse_produce_request(body, embedded)
    return e.value.status, e.value.error_code, e.value.message


def test_binary_records_decode_base64_keys_values_and_partitions() -> None:
    body = {"records": [{"key": _b64(b"k\x00\xff"), "value": _b64(b"v" * 10)},
                        {"value": "", "partition": 2},
                        {"key": None, "value": None}]}
    assert parse_produce_request(body, "binary") == [
        ProduceRecord(b"k\x00\xff", b"v" * 10, None), ProduceRecord(None, b"", 2),
        ProduceRecord(None, None, None)]


def test_json_records_keep_json_text_compact_and_utf8() -> None:
    body = {"records": [{"key": "somekey", "value": {"foo": "bär", "n": [1, 2.5, None]}},
                        {"value": 53.5, "partition": 1}, {"value": None}, {"key": False}]}
    assert parse_produce_request(body, "json") == [
        ProduceRecord(b'"somekey"', '{"foo":"bär","n":[1,2.5,null]}'.encode(), None),
        ProduceRecord(None, b"53.5", 1), ProduceRecord(None, None, None),
        ProduceRecord(b"false", None, None)]
    assert encode_json("x") == b'"x"'


def test_schema_fields_are_accepted_and_ignored_by_binary_and_json() -> None:
    body = {"records": [{"value": _b64(b"x")}], "key_schema": None, "value_schema_id": 3}
    assert parse_produce_request(body, "binary") == [ProduceRecord(None, b"x")]


@pytest.mark.parametrize("text, data", [
    ("a2V5", b"key"), ("a2Fma2E=", b"kafka"), ("a2Fma2E", b"kafka"), ("", b""),
    ("/+/+", b"\xff\xef\xfe")])
def test_base64_as_guava_reads_it(text: str, data: bytes) -> None:
    assert decode_base64(text) == data


@pytest.mark.parametrize("data, message", [
    ("not base64!", 'Bad Request: data="not base64!" is not a valid base64 string.'),
    ("abcde", 'Bad Request: data="abcde" is not a valid base64 string.'),
    ("a2V5\n", 'Bad Request: data="a2V5\\n" is not a valid base64 string.'),
    ("a-_b", 'Bad Request: data="a-_b" is not a valid base64 string.'),
    (123, "Bad Request: data=123 is not a base64 string."),
    ({"a": 1}, 'Bad Request: data={"a":1} is not a base64 string.'),
])
def test_bad_base64_is_400_with_confluents_message(data: object, message: str) -> None:
    assert _refused({"records": [{"value": _b64(b"ok")}, {"key": data, "value": "AA=="}]}) == (
        400, 400, message)


def test_a_long_bad_value_is_quoted_short() -> None:
    status, code, message = _refused({"records": [{"value": "!" * 10_000_000}]})
    assert (status, code) == (400, 400)
    assert len(message) < 200 and message.endswith('... is not a valid base64 string.')


@pytest.mark.parametrize("body", [{}, {"records": []}, {"records": None}])
def test_no_records_is_422(body: object) -> None:
    assert _refused(body) == (422, 422, "records may not be empty")
    assert _refused(body, "avro") == (422, 422, "records may not be empty")


@pytest.mark.parametrize("body, fragment", [
    ([], "from array value"),
    ("records", "from string value"),
    ({"records": {"value": "AA=="}}, "an array of records is required"),
    ({"records": ["AA=="]}, "record 0 from string value"),
    ({"records": [{"value": "AA==", "partition": "1"}]}, 'field "partition"'),
    ({"records": [{"value": "AA==", "partition": 1.5}]}, 'field "partition"'),
    ({"records": [{"value": "AA==", "partition": True}]}, 'field "partition"'),
    ({"records": [{"value": "AA=="}], "key_schema_id": "x"}, 'field "key_schema_id"'),
    ({"records": [{"value": "AA=="}], "value_schema": {}}, 'field "value_schema"'),
])
def test_wrong_shapes_are_400(body: object, fragment: str) -> None:
    status, code, message = _refused(body)
    assert (status, code) == (400, 400)
    assert fragment in message


def test_v2_records_carry_no_headers_or_timestamp() -> None:
    for field in ("headers", "timestamp"):
        status, code, message = _refused({"records": [{"value": "AA==", field: []}]})
        assert (status, code) == (400, 400)
        assert message == (f'Unrecognized field "{field}" (record 0), not marked as ignorable '
                           '(3 known properties: "partition", "key", "value"])')
    assert _refused({"records": [{"value": "AA=="}], "extra": 1})[2].startswith(
        'Unrecognized field "extra" (produce request)')


@pytest.mark.parametrize("embedded", ["avro", "protobuf", "jsonschema"])
def test_schema_formats_without_schema_registry(embedded: str) -> None:
    assert _refused({"records": [{"value": 1}]}, embedded) == (
        422, 42207, "Error serializing message. Schema Registry not defined, no Schema Registry "
                    "client available to serialize message.")
    for field, value in (("value_schema", '{"type":"int"}'), ("key_schema_id", 1)):
        assert _refused({"records": [{"value": 1}], field: value}, embedded) == (
            422, 42206, "Payload error. Schema Registry must be configured when using schemas.")


def test_content_types_name_the_embedded_format_binary_first() -> None:
    assert PRODUCE_TYPES[0] == "application/vnd.kafka.binary.v2+json"
    assert EMBEDDED_FORMATS["application/vnd.kafka.json.v2+json"] == "json"
    assert EMBEDDED_FORMATS["application/vnd.kafka.avro.v2+json"] == "avro"


def test_error_codes_of_producer_errors() -> None:
    assert record_error_code(BY_NAME["MESSAGE_TOO_LARGE"]("big")) == 50002
    assert record_error_code(BY_NAME["NOT_LEADER_OR_FOLLOWER"]("moved")) == 50003
    assert record_error_code(BY_NAME["TOPIC_AUTHORIZATION_FAILED"]("no")) == 40301
    assert record_error_code(BY_NAME["SASL_AUTHENTICATION_FAILED"]("who")) == 40101
    assert record_error_code(KafkaTimeoutError("slow")) == 50003
    assert record_error_code(KafkaConnectionError("gone")) == 50003
    assert record_error_code(TypeError("bug")) is None


def test_answer_keeps_failed_records_in_place() -> None:
    ok = RecordMetadata("t", 1, 41, 1_700_000_000_000)
    status, body = produce_response([ok, BY_NAME["MESSAGE_TOO_LARGE"]("too big"),
                                     KafkaTimeoutError("no metadata")])
    assert status == 200
    assert body == {"offsets": [
        {"partition": 1, "offset": 41, "error_code": None, "error": None},
        {"partition": None, "offset": None, "error_code": 50002, "error": "too big"},
        {"partition": None, "offset": None, "error_code": 50003, "error": "no metadata"}],
        "key_schema_id": None, "value_schema_id": None}
    assert list(body) == ["offsets", "key_schema_id", "value_schema_id"]


def test_authorization_and_authentication_set_the_status() -> None:
    ok = RecordMetadata("t", 0, 0, 0)
    assert produce_response([ok, BY_NAME["TOPIC_AUTHORIZATION_FAILED"]("no")])[0] == 403
    assert produce_response([BY_NAME["SASL_AUTHENTICATION_FAILED"]("who"), ok])[0] == 401


def test_a_non_kafka_error_fails_the_request() -> None:
    with pytest.raises(RestError) as e:
        produce_response([RecordMetadata("t", 0, 0, 0), TypeError("bug")])
    assert (e.value.status, e.value.error_code, e.value.message) == (
        500, 500, "Unexpected non-Kafka exception returned by Kafka")


def test_a_json_value_that_is_not_unicode_is_400_not_500() -> None:
    """A lone surrogate ("\\ud800" in the JSON text) cannot be written as UTF-8: the
    client's error, answered 400, never an exception out of the handler."""
    with pytest.raises(RestError) as e:
        parse_produce_request({"records": [{"value": {"a": "\ud800"}}]}, "json")
    assert (e.value.status, e.value.error_code) == (400, 400)
