"""v3 produce's JSON <-> Kafka record conversion, as Confluent's REST Proxy does it.
Sans-io: the route (clients/rest/v3_records.py) moves the bytes and the producer calls.

A record in a request (Confluent's ProduceRequest):

    {"partition_id": 1, "timestamp": "2021-02-05T19:14:42Z",
     "headers": [{"name": "h", "value": "<base64 or null>"}],
     "key": {"type": "BINARY", "data": "<base64>"}, "value": {"type": "JSON", "data": {...}}}

every field optional. `type` BINARY takes base64 (Guava's decoder: padding optional),
JSON any JSON value (its compact text is the bytes), STRING a string (UTF-8). A `data` of
null, or no `data`, is a null key or value, as is a missing or null `key`/`value`. Without
a `type` (or with AVRO, JSONSCHEMA, PROTOBUF) Confluent asks Schema Registry for a schema;
strom has none, so that is Confluent's answer without one: 422, code 42206. A `timestamp`
is ISO-8601 (no zone: UTC) or a number of seconds since the epoch (Jackson's Instant).

Each record gets a delivery report in the answer, followed by CRLF as Confluent's chunked
output writes it: `{"error_code": 200, "cluster_id", "topic_name", "partition_id",
"offset", "timestamp", "key": {"type", "size"}, "value": {...}}` (key/value only when the
request had them; size -1 for null data), or `{"error_code": ..., "message": ...}`.
"""
from __future__ import annotations

import binascii
import json
import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from clients.aio.errors import KafkaClientError
from clients.protocol.errors import KafkaError
from clients.rest.errors import RestError, bad_request, from_kafka
from clients.types import RecordMetadata

__all__ = ["ProduceRecord", "parse_record", "ReportRenderer", "error_report", "error_for",
           "decode_base64", "parse_timestamp", "format_timestamp", "TOPIC_NOT_FOUND_MESSAGE",
           "INVALID_PAYLOAD", "SCHEMA_REGISTRY_MISSING", "EMPTY_BODY", "MAX_TIMESTAMP_MS"]

EMBEDDED_TYPES = ("BINARY", "JSON", "STRING")
SCHEMA_TYPES = ("AVRO", "JSONSCHEMA", "PROTOBUF")
# The fields naming a schema, with the name Confluent's check gives them.
_SCHEMA_FIELDS = (("subject", "subject"), ("subject_name_strategy", "subject_strategy"),
                  ("schema_id", "schema_id"), ("schema_version", "schema_version"),
                  ("schema", "schema"))

INVALID_PAYLOAD = 42206          # Confluent's Errors.invalidPayloadException
SCHEMA_REGISTRY_MISSING = "Payload error. Schema Registry must be configured when using schemas."
EMPTY_BODY = "Payload error. Null input provided. Data is required."
# Kafka's UnknownTopicOrPartitionException, as the producer reports a topic it cannot find.
TOPIC_NOT_FOUND_MESSAGE = "This server does not host this topic-partition."

_SHOWN = 120                     # characters of a bad value an error message repeats


class ProduceRecord(NamedTuple):
    """One record to produce; `key_type`/`value_type` is the embedded format the request
    named (None: no key/value object, and the report leaves it out)."""

    partition: int | None
    headers: list[tuple[str, bytes | None]] | None
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    key_type: str | None
    value_type: str | None


def _show(data: Any) -> str:
    """`data` as Jackson prints a JsonNode (compact JSON), cut short when long; text that
    is not Unicode (a lone surrogate) escaped, so that the message can be written."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if not text.isascii() and not _is_unicode(text):
        text = json.dumps(data, separators=(",", ":"))
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _is_unicode(text: str) -> bool:
    """False for a str holding a lone surrogate (JSON's "\ud800" reads as one), which
    has no UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_unicode(what: str) -> RestError:
    return bad_request(f"Bad Request: {what} is not Unicode text: it holds a lone surrogate.")


def parse_record(obj: Any) -> ProduceRecord:
    """The record a request's JSON value asks for; RestError (400, or 422/42206 for a
    schema) when it cannot be produced. The per-record path: keep it lean."""
    if type(obj) is not dict:
        raise bad_request(f"Bad Request: Error processing JSON: a record is a JSON object, "
                          f"not {_show(obj)}")
    get = obj.get
    partition = get("partition_id")
    if partition is not None and (type(partition) is not int or partition < 0):
        if type(partition) is int:
            raise bad_request(f"Bad Request: Invalid partition: {partition}. Partition number "
                              "should always be non-negative or null.")
        raise bad_request(f"Bad Request: partition_id={_show(partition)} is not an integer.")
    headers = get("headers")
    key = get("key")
    key_type, key = (None, None) if key is None else _embedded(key, "key")
    value = get("value")
    value_type, value = (None, None) if value is None else _embedded(value, "value")
    timestamp = get("timestamp")
    return ProduceRecord(partition, _headers(headers) if headers else None, key, value,
                         None if timestamp is None else parse_timestamp(timestamp),
                         key_type, value_type)


def _embedded(part: Any, which: str) -> tuple[str | None, bytes | None]:
    """(type, bytes) of a key or value object (not None)."""
    if type(part) is not dict:
        raise bad_request(f"Bad Request: {which}={_show(part)} is not a JSON object.")
    kind = part.get("type")
    data = part.get("data")
    fields = len(part)
    if fields > 2 or (fields == 2 and data is None and "data" not in part):
        _check_schema_fields(part, kind)
    if kind == "BINARY":
        if data is None:
            return kind, None
        if type(data) is not str:
            raise bad_request(f"Bad Request: data={_show(data)} is not a base64 string.")
        decoded = decode_base64(data)
        if decoded is None:
            raise bad_request(f"Bad Request: data={_show(data)} is not a valid base64 string.")
        return kind, decoded
    if kind == "STRING":
        if data is None:
            return kind, None
        if type(data) is not str:
            raise bad_request(f"Bad Request: data={_show(data)} is not a string.")
        try:
            return kind, data.encode("utf-8")
        except UnicodeEncodeError:
            raise _not_unicode(f"data={_show(data)}") from None
    if kind == "JSON":
        if data is None:
            return kind, None
        try:    # NaN and infinities (1e400 reads as one) have no JSON text: refused
            text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except ValueError as e:
            raise bad_request(f"Bad Request: data={_show(data)} cannot be written as JSON: "
                              f"{e}") from None
        try:
            return kind, text.encode("utf-8")
        except UnicodeEncodeError:
            raise _not_unicode(f"data={_show(data)}") from None
    if kind is None or kind in SCHEMA_TYPES:
        raise RestError(422, INVALID_PAYLOAD, SCHEMA_REGISTRY_MISSING)
    raise bad_request(f"Bad Request: type={_show(kind)} is not one of "
                      f"{', '.join(EMBEDDED_TYPES + SCHEMA_TYPES)}.")


def _check_schema_fields(part: dict[str, Any], kind: Any) -> None:
    """Confluent's rule: a schema's fields go with a schema type (or none), never with
    BINARY, JSON or STRING."""
    if kind not in EMBEDDED_TYPES:
        return
    for field, label in _SCHEMA_FIELDS:
        if part.get(field) is not None:
            raise bad_request(f"Bad Request: 'type={kind}' cannot be used with '{label}'.")


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if type(headers) is not list:
        raise bad_request(f"Bad Request: headers={_show(headers)} is not a JSON array.")
    out: list[tuple[str, bytes | None]] = []
    for h in headers:
        name = h.get("name") if type(h) is dict else None
        if type(name) is not str:
            raise bad_request(f"Bad Request: header {_show(h)} has no string 'name'.")
        if not name.isascii() and not _is_unicode(name):
            raise _not_unicode(f"header name {_show(name)}")
        value = h.get("value")
        if value is None:
            out.append((name, None))
            continue
        decoded = decode_base64(value) if type(value) is str else None
        if decoded is None:
            raise bad_request(f"Bad Request: value={_show(value)} of header '{name}' is not "
                              "a valid base64 string.")
        out.append((name, decoded))
    if len(out) > 2 and len({n for n, _ in out}) < len(out):
        # Confluent collects headers into a Guava multimap, which hands them to the
        # producer grouped by name (in order of each name's first use).
        first = {n: i for i, (n, _) in reversed(list(enumerate(out)))}
        out.sort(key=lambda h: first[h[0]])
    return out


_BASE64_ALPHABET = re.compile(r"[A-Za-z0-9+/]*")


def decode_base64(text: str) -> bytes | None:
    """Standard base64 as Guava's BaseEncoding.base64() decodes it (padding optional, no
    whitespace, nothing outside the alphabet); None when it is not base64."""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except ValueError:      # binascii.Error, and non-ASCII text
        pass
    bare = text.rstrip("=")
    if len(bare) % 4 == 1 or not _BASE64_ALPHABET.fullmatch(bare):
        return None
    return binascii.a2b_base64(bare + "=" * (-len(bare) % 4), strict_mode=True)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
# The seconds of Java's Instant.MIN and Instant.MAX (years -1000000000 and 1000000000).
_INSTANT_SECONDS = (-31557014167219200, 31556889864403199)
MAX_TIMESTAMP_MS = 2**63 - 1    # Kafka's timestamp is a Long


def parse_timestamp(value: Any) -> int:
    """Milliseconds since the epoch of a request's `timestamp`: an ISO-8601 date-time (no
    zone: UTC) or a number of seconds, as Jackson reads an Instant. 400 otherwise: for
    seconds past what an Instant holds (Jackson's answer), a time before the epoch (Kafka
    refuses negative timestamps) or past 2^63-1 ms (Kafka's Long)."""
    if type(value) is str:
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise bad_request(f"Bad Request: timestamp={_show(value)} is not an ISO-8601 "
                              "date-time.") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        ms = (when - _EPOCH) // _MS
    elif type(value) in (int, float):
        # `not <=` is also true for NaN
        if not _INSTANT_SECONDS[0] <= value <= _INSTANT_SECONDS[1]:
            raise bad_request(f"Bad Request: timestamp={_show(value)} is not a valid instant: "
                              "Instant exceeds minimum or maximum instant")
        ms = value * 1000 if type(value) is int else round(value * 1000)
    else:
        raise bad_request(f"Bad Request: timestamp={_show(value)} is not an ISO-8601 date-time.")
    if ms < 0:
        raise bad_request(f"Bad Request: Invalid timestamp: {ms}. Timestamp should always be "
                          "non-negative or null.")
    if ms > MAX_TIMESTAMP_MS:
        raise bad_request(f"Bad Request: Invalid timestamp: {ms}. Timestamp should be at most "
                          f"{MAX_TIMESTAMP_MS} (milliseconds since the epoch).")
    return ms


_second: tuple[int, str] = (-1, "")     # the last second formatted, and its text


def format_timestamp(ms: int) -> str:
    """Milliseconds since the epoch as Java's Instant prints them (ISO_INSTANT):
    2021-02-05T19:14:42Z, or with .SSS when the milliseconds are not zero."""
    global _second
    seconds, millis = divmod(ms, 1000)
    cached_second, text = _second
    if seconds != cached_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second = (seconds, text)
    return f"{text}Z" if millis == 0 else f"{text}.{millis:03d}Z"


class ReportRenderer:
    """Delivery reports of one topic's records; the JSON text is written directly (a
    report per record is the route's hot path), each with its trailing CRLF."""

    def __init__(self, cluster_id: str, topic: str):
        self._head = (f'{{"error_code":200,"cluster_id":{json.dumps(cluster_id)},'
                      f'"topic_name":{json.dumps(topic)},"partition_id":')

    def delivered(self, md: RecordMetadata, key_type: str | None, value_type: str | None) -> str:
        text = f'{self._head}{md.partition},"offset":{md.offset}'
        if md.timestamp >= 0:
            text += f',"timestamp":"{format_timestamp(md.timestamp)}"'
        if key_type is not None:
            text += f',"key":{{"type":"{key_type}","size":{md.serialized_key_size}}}'
        if value_type is not None:
            text += f',"value":{{"type":"{value_type}","size":{md.serialized_value_size}}}'
        return text + "}\r\n"


def error_report(error: RestError) -> str:
    body = {"error_code": error.error_code, "message": error.message}
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    if not text.isascii() and not _is_unicode(text):
        text = json.dumps(body, separators=(",", ":"))     # escaped: it has UTF-8
    return text + "\r\n"


def error_for(exc: BaseException) -> RestError:
    """The report of a record the producer refused or failed to deliver: a record over
    max.request.size (or the broker's message.max.bytes) is 413, as Confluent Cloud
    documents for this route; the rest as rest-utils' KafkaExceptionMapper maps them."""
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, KafkaError) and exc.name in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"):
        return RestError(413, 413, exc.message)
    if isinstance(exc, (KafkaError, KafkaClientError)):
        return from_kafka(exc)
    return RestError(500, 500, "Internal Server Error")
