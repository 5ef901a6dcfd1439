"""v2 produce bodies without I/O: a request (already parsed JSON) becomes records of bytes,
and each record's outcome becomes Confluent's answer.

    records = parse_produce_request(body, "binary")     # RestError for a bad body
    ... send each record, collect RecordMetadata or the exception ...
    status, answer = produce_response(outcomes)

The request is `{"records": [{"key", "value", "partition"}], "key_schema", "key_schema_id",
"value_schema", "value_schema_id"}`, as Confluent's v2 ProduceRequest. v2 records carry no
headers and no timestamp: a record field other than key, value and partition is refused
400 as Confluent's Jackson mapping refuses an unrecognized field, and the timestamp is the
proxy's clock when it sends (CreateTime). Embedded formats:
- `binary`: key and value are base64 strings (400 "data=... is not a valid base64 string."),
- `json`: key and value are any JSON, stored as its compact text (a JSON string keeps its
  quotes, as Confluent's KafkaJsonSerializer writes it),
- `avro`, `protobuf`, `jsonschema`: need a Schema Registry, which strom does not have;
  answered as Confluent's proxy answers without one: 422/42206 when the request names a
  schema, else 422/42207.
A null or absent key or value is no key / a null value. Checks run in Confluent's order:
shape (400), an empty `records` (422), schemas (422), each record's data (400).
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from clients.aio.errors import KafkaClientError
from clients.protocol.errors import KafkaError
from clients.rest.bodies import V2_BINARY, V2_JSON
from clients.rest.errors import (KAFKA_AUTHENTICATION, KAFKA_AUTHORIZATION, KAFKA_ERROR,
                                 KAFKA_RETRIABLE_ERROR, RestError, bad_request, unprocessable)
from clients.types import RecordMetadata

__all__ = ["ProduceRecord", "EMBEDDED_FORMATS", "PRODUCE_TYPES", "parse_produce_request",
           "decode_base64", "encode_json", "record_error_code", "produce_response",
           "SCHEMA_REGISTRY_REQUIRED", "NO_SCHEMA_REGISTRY", "RECORDS_EMPTY"]

V2_AVRO = "application/vnd.kafka.avro.v2+json"
V2_PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
V2_JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"

# Content type -> embedded format; the first is what a request without Content-Type gets
# (binary is the type Confluent's produce routes weigh highest).
EMBEDDED_FORMATS: dict[str, str] = {V2_BINARY: "binary", V2_JSON: "json", V2_AVRO: "avro",
                                    V2_PROTOBUF: "protobuf", V2_JSONSCHEMA: "jsonschema"}
PRODUCE_TYPES = tuple(EMBEDDED_FORMATS)
_SCHEMA_FORMATS = frozenset({"avro", "protobuf", "jsonschema"})

# Confluent's codes and messages for a schema format on a proxy without Schema Registry.
SCHEMA_REGISTRY_REQUIRED = 42206
NO_SCHEMA_REGISTRY = 42207
_SCHEMA_REGISTRY_REQUIRED_MESSAGE = ("Payload error. Schema Registry must be configured when "
                                     "using schemas.")
_NO_SCHEMA_REGISTRY_MESSAGE = ("Error serializing message. Schema Registry not defined, no "
                               "Schema Registry client available to serialize message.")
RECORDS_EMPTY = "records may not be empty"      # Confluent's documented 422 message

_REQUEST_FIELDS = ("records", "key_schema_id", "key_schema", "value_schema_id", "value_schema")
_RECORD_FIELDS = ("partition", "key", "value")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*")
_SHOWN_DATA = 100       # characters of bad data quoted in a message (a 10 MB value is not)


@dataclass(frozen=True)
class ProduceRecord:
    """One record to send: serialized key and value (None: none), and its own partition
    (None: the route's, or the partitioner's)."""

    key: bytes | None
    value: bytes | None
    partition: int | None = None


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object" if isinstance(v, dict) else type(v).__name__


def _unrecognized(field: str, where: str, known: tuple[str, ...]) -> RestError:
    names = ", ".join(f'"{k}"' for k in known)
    return bad_request(f'Unrecognized field "{field}" ({where}), not marked as ignorable '
                       f"({len(known)} known properties: {names}])")


def _shown(data: Any) -> str:
    """`data` as JSON text for a message, as Jackson's JsonNode.toString() shows it, cut short."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _SHOWN_DATA else text[:_SHOWN_DATA] + "..."


def decode_base64(data: Any) -> bytes:
    """The bytes of a base64 string as Guava's BaseEncoding.base64() (Confluent's decoder)
    reads it: standard alphabet, trailing padding optional, nothing else allowed.
    400 "Bad Request: data=... is not (a valid) base64 string." otherwise."""
    if not isinstance(data, str):
        raise bad_request(f"Bad Request: data={_shown(data)} is not a base64 string.")
    text = data.rstrip("=")
    if len(text) % 4 == 1 or not _BASE64.fullmatch(text):
        raise bad_request(f"Bad Request: data={_shown(data)} is not a valid base64 string.")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise bad_request(f"Bad Request: data={_shown(data)} is not a valid base64 string.") from None


def encode_json(data: Any) -> bytes:
    """JSON data as Confluent's json embedded format stores it: compact UTF-8 JSON text.
    Text with a lone surrogate ("\\ud800" in the request) has no UTF-8 form: 400."""
    try:
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise bad_request("Bad Request: the JSON data holds a lone UTF-16 surrogate, "
                          "which is not Unicode text") from None


def _optional_int(v: Any, field: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad_request(f"Cannot deserialize value of type `int` from {_json_type(v)} "
                          f"value of field \"{field}\": an integer is required")
    return v


def _check_shape(body: Any) -> list[dict[str, Any]]:
    """The records of a body of the right shape; 400 as Jackson's mapping errors otherwise."""
    if not isinstance(body, dict):
        raise bad_request(f"Cannot deserialize a produce request from {_json_type(body)} "
                          f"value: a JSON object is required")
    for field in body:
        if field not in _REQUEST_FIELDS:
            raise _unrecognized(field, "produce request", _REQUEST_FIELDS)
    _optional_int(body.get("key_schema_id"), "key_schema_id")
    _optional_int(body.get("value_schema_id"), "value_schema_id")
    for field in ("key_schema", "value_schema"):
        v = body.get(field)
        if v is not None and not isinstance(v, str):
            raise bad_request(f"Cannot deserialize value of type `String` from {_json_type(v)} "
                              f"value of field \"{field}\": a string is required")
    records = body.get("records")
    if records is None:
        return []
    if not isinstance(records, list):
        raise bad_request(f"Cannot deserialize value of type `records` from {_json_type(records)} "
                          f"value: an array of records is required")
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise bad_request(f"Cannot deserialize record {i} from {_json_type(r)} value: "
                              f"a JSON object is required")
        for field in r:
            if field not in _RECORD_FIELDS:
                raise _unrecognized(field, f"record {i}", _RECORD_FIELDS)
        _optional_int(r.get("partition"), "partition")
    return records


def parse_produce_request(body: Any, embedded: str) -> list[ProduceRecord]:
    """The records of a v2 produce request in embedded format `embedded` (a value of
    EMBEDDED_FORMATS), serialized; RestError with Confluent's status and code otherwise."""
    records = _check_shape(body)
    if not records:
        raise unprocessable(RECORDS_EMPTY)
    if embedded in _SCHEMA_FORMATS:
        if any(body.get(f) is not None for f in _REQUEST_FIELDS[1:]):
            raise unprocessable(_SCHEMA_REGISTRY_REQUIRED_MESSAGE, SCHEMA_REGISTRY_REQUIRED)
        raise unprocessable(_NO_SCHEMA_REGISTRY_MESSAGE, NO_SCHEMA_REGISTRY)
    if embedded not in ("binary", "json"):
        raise ValueError(f"unknown embedded format {embedded!r}")
    serialize = decode_base64 if embedded == "binary" else encode_json
    out = []
    for r in records:
        key, value = r.get("key"), r.get("value")
        out.append(ProduceRecord(None if key is None else serialize(key),
                                 None if value is None else serialize(value),
                                 r.get("partition")))
    return out


def record_error_code(e: BaseException) -> int | None:
    """The code of a record that failed with `e`, as Confluent's produce action classifies
    producer errors: authentication 40101, authorization 40301, other retriable 50003, other
    Kafka errors 50002; None for an error that is not Kafka's (the request then fails)."""
    if isinstance(e, KafkaError):
        if e.name == "SASL_AUTHENTICATION_FAILED":
            return KAFKA_AUTHENTICATION
        if e.name.endswith("_AUTHORIZATION_FAILED"):
            return KAFKA_AUTHORIZATION
        return KAFKA_RETRIABLE_ERROR if e.retriable else KAFKA_ERROR
    if isinstance(e, KafkaClientError):
        return KAFKA_RETRIABLE_ERROR if e.retriable else KAFKA_ERROR
    return None


def _offset(outcome: RecordMetadata | BaseException) -> dict[str, Any]:
    if isinstance(outcome, BaseException):
        code = record_error_code(outcome)
        if code is None:
            # Confluent fails the whole request: some records may be written, but the
            # proxy itself broke while producing.
            raise RestError(500, 500, "Unexpected non-Kafka exception returned by Kafka")
        message = outcome.message if isinstance(outcome, KafkaError) else (
            str(outcome) or type(outcome).__name__)
        return {"partition": None, "offset": None, "error_code": code, "error": message}
    return {"partition": outcome.partition, "offset": outcome.offset,
            "error_code": None, "error": None}


def produce_response(outcomes: Sequence[RecordMetadata | BaseException]
                     ) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of Confluent's v2 produce answer: one offset per record in
    request order, a failed record in place with its code and message; 200 unless a record
    failed authentication (401) or authorization (403)."""
    offsets = [_offset(o) for o in outcomes]
    status = 200
    for o in offsets:
        if o["error_code"] == KAFKA_AUTHENTICATION:
            status = 401
            break
        if o["error_code"] == KAFKA_AUTHORIZATION:
            status = 403
            break
    return status, {"offsets": offsets, "key_schema_id": None, "value_schema_id": None}
