"""Confluent's REST Proxy error answers: `{"error_code": <code>, "message": ...}` with an
HTTP status, and the mapping of Kafka errors onto them (rest-utils' KafkaExceptionMapper).

A code of five digits is the status times 100 plus a sub-code (40401: 404, "Topic not
found."); v3 answers many errors with the bare status as the code (404, 400), as
Confluent's v3 resources do. Handlers raise `RestError`; the server's middleware writes it.
"""
from __future__ import annotations

from clients.aio.errors import KafkaClientError
from clients.protocol.errors import KafkaError

__all__ = ["RestError", "from_kafka", "topic_not_found", "partition_not_found",
           "consumer_instance_not_found", "bad_request", "unprocessable",
           "TOPIC_NOT_FOUND", "PARTITION_NOT_FOUND", "CONSUMER_INSTANCE_NOT_FOUND",
           "LEADER_NOT_AVAILABLE", "CONSUMER_FORMAT_MISMATCH", "CONSUMER_ALREADY_SUBSCRIBED",
           "CONSUMER_ALREADY_EXISTS", "ILLEGAL_STATE", "KEY_SCHEMA_MISSING",
           "VALUE_SCHEMA_MISSING", "JSON_CONVERSION", "INVALID_CONSUMER_CONFIG",
           "INVALID_CONSUMER_CONFIG_CONSTRAINT", "KAFKA_BAD_REQUEST", "KAFKA_AUTHENTICATION",
           "KAFKA_AUTHORIZATION", "KAFKA_UNKNOWN_TOPIC_PARTITION", "KAFKA_ERROR",
           "KAFKA_RETRIABLE_ERROR", "BROKER_NOT_AVAILABLE"]

# Confluent's codes (kafka-rest's Errors, rest-utils' KafkaExceptionMapper).
INVALID_CONSUMER_CONFIG_CONSTRAINT = 40001
KAFKA_BAD_REQUEST = 40002
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
KAFKA_UNKNOWN_TOPIC_PARTITION = 40403
LEADER_NOT_AVAILABLE = 40404
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
JSON_CONVERSION = 42203
INVALID_CONSUMER_CONFIG = 42204
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003
BROKER_NOT_AVAILABLE = 50302


class RestError(Exception):
    """An error answer: HTTP `status`, Confluent's `error_code`, and the `message`."""

    def __init__(self, status: int, error_code: int, message: str,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.headers = headers      # extra answer headers (WWW-Authenticate on a 401)

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def topic_not_found() -> RestError:
    return RestError(404, TOPIC_NOT_FOUND, "Topic not found.")


def partition_not_found() -> RestError:
    return RestError(404, PARTITION_NOT_FOUND, "Partition not found.")


def consumer_instance_not_found() -> RestError:
    return RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


def bad_request(message: str) -> RestError:
    """400 with the bare status as the code (rest-utils' answer to unparseable JSON)."""
    return RestError(400, 400, message)


def unprocessable(message: str, code: int = 422) -> RestError:
    """422: the JSON parsed and has the right shape but a value breaks a rule (an empty
    record list, a schema format without a Schema Registry). A wrong shape and bad base64
    are 400, as rest-utils and kafka-rest answer them."""
    return RestError(422, code, message)


# Kafka's exception classes KafkaExceptionMapper answers with 400/40002, by wire name.
_BAD_REQUEST = frozenset({"INVALID_REPLICATION_FACTOR", "SECURITY_DISABLED", "UNSUPPORTED_VERSION",
                          "INVALID_PARTITIONS", "INVALID_REQUEST", "UNKNOWN_SERVER_ERROR",
                          "POLICY_VIOLATION", "TOPIC_ALREADY_EXISTS", "INVALID_CONFIG",
                          "INVALID_TOPIC_EXCEPTION"})
_AUTHORIZATION = frozenset({"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                            "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                            "DELEGATION_TOKEN_AUTHORIZATION_FAILED"})


def from_kafka(e: BaseException) -> RestError:
    """The answer rest-utils' KafkaExceptionMapper gives for a Kafka error: authentication
    401/40101, authorization 403/40301, unknown topic or partition 404/40403, broker not
    available 503/50302, the request errors 400/40002, any other retriable 500/50003 and the
    rest 500/50002. The message is the error's own."""
    if isinstance(e, KafkaError):
        name, message = e.name, e.message
        if name == "SASL_AUTHENTICATION_FAILED":
            return RestError(401, KAFKA_AUTHENTICATION, message)
        if name in _AUTHORIZATION:
            return RestError(403, KAFKA_AUTHORIZATION, message)
        if name == "UNKNOWN_TOPIC_OR_PARTITION":
            return RestError(404, KAFKA_UNKNOWN_TOPIC_PARTITION, message)
        if name == "BROKER_NOT_AVAILABLE":
            return RestError(503, BROKER_NOT_AVAILABLE, message)
        if name in _BAD_REQUEST:
            return RestError(400, KAFKA_BAD_REQUEST, message)
        if e.retriable:
            return RestError(500, KAFKA_RETRIABLE_ERROR, message)
        return RestError(500, KAFKA_ERROR, message)
    if isinstance(e, KafkaClientError):
        message = str(e) or type(e).__name__
        return RestError(500, KAFKA_RETRIABLE_ERROR if e.retriable else KAFKA_ERROR, message)
    return RestError(500, KAFKA_ERROR, str(e) or type(e).__name__)
