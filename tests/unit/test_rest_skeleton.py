"""The REST proxy's shared pieces without sockets: its config file (Confluent's keys and
prefixes, errors naming file, line and key), content negotiation as JAX-RS does it, the
mapping of Kafka errors onto Confluent's codes, and basic credentials becoming SASL PLAIN."""
from __future__ import annotations

import base64

import pytest
from aiohttp.test_utils import make_mocked_request

from clients.properties import ConfigError, parse_properties
from clients.protocol.errors import BY_NAME
from clients.aio.errors import KafkaConnectionError
from clients.rest.bodies import V2, V2_BINARY, V2_JSON, negotiate, parse_json, require_content_type
from clients.rest.config import RestProxyConfig, rest_config_from
from clients.rest.errors import RestError, from_kafka
from clients.rest.kafka import ANONYMOUS, ClientPool, Principal


def _config(text: str) -> RestProxyConfig:
    return rest_config_from(parse_properties(text, "kafka-rest.properties"), "kafka-rest.properties")


def test_defaults_and_prefixes() -> None:
    c = _config("bootstrap.servers=b1:9092\nclient.security.protocol=SSL\n"
                "producer.linger.ms=5\nproducer.security.protocol=PLAINTEXT\nconsumer.fetch.min.bytes=1\n")
    assert c.listeners == ["http://127.0.0.1:8082"]
    assert c.consumer_instance_timeout_ms == 300000 and c.consumer_request_timeout_ms == 1000
    assert c.client_config("producer") == {"bootstrap.servers": "b1:9092", "security.protocol": "PLAINTEXT",
                                           "linger.ms": "5"}
    assert c.client_config("consumer") == {"bootstrap.servers": "b1:9092", "security.protocol": "SSL",
                                           "fetch.min.bytes": "1"}
    assert c.client_config("admin") == {"bootstrap.servers": "b1:9092", "security.protocol": "SSL"}


@pytest.mark.parametrize("text, where", [
    ("listeners=http://127.0.0.1:0\nconsumer.request.timeout.ms=soon\n", "kafka-rest.properties:2: consumer.request.timeout.ms"),
    ("api.v2.enable=yes\n", "kafka-rest.properties:1: api.v2.enable"),
    ("authentication.method=KERBEROS\n", "kafka-rest.properties:1: authentication.method"),
    ("consumer.instance.timeout.ms=-1\n", "kafka-rest.properties:1: consumer.instance.timeout.ms"),
])
def test_bad_values_name_file_line_and_key(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as e:
        _config(text)
    assert str(e.value).startswith(where)


def _request(headers: dict[str, str]):
    return make_mocked_request("GET", "/x", headers=headers)


def test_negotiate_follows_accept_with_q_values_and_wildcards() -> None:
    offered = (V2_BINARY, V2_JSON)
    assert negotiate(_request({}), offered) == V2_BINARY
    assert negotiate(_request({"Accept": V2_JSON}), offered) == V2_JSON
    assert negotiate(_request({"Accept": f"{V2_BINARY};q=0.2, {V2_JSON}"}), offered) == V2_JSON
    assert negotiate(_request({"Accept": "application/*"}), offered) == V2_BINARY
    assert negotiate(_request({"Accept": "*/*"}), (V2,)) == V2
    with pytest.raises(RestError) as e:
        negotiate(_request({"Accept": "text/html"}), offered)
    assert (e.value.status, e.value.error_code) == (406, 406)


def test_require_content_type() -> None:
    assert require_content_type(_request({"Content-Type": V2_JSON + "; charset=utf-8"}), (V2_JSON,)) == V2_JSON
    assert require_content_type(_request({}), (V2_JSON, V2_BINARY)) == V2_JSON
    with pytest.raises(RestError) as e:
        require_content_type(_request({"Content-Type": "text/plain"}), (V2_JSON,))
    assert (e.value.status, e.value.error_code, e.value.message) == (415, 415, "HTTP 415 Unsupported Media Type")


@pytest.mark.parametrize("name, status, code", [
    ("SASL_AUTHENTICATION_FAILED", 401, 40101), ("TOPIC_AUTHORIZATION_FAILED", 403, 40301),
    ("UNKNOWN_TOPIC_OR_PARTITION", 404, 40403), ("BROKER_NOT_AVAILABLE", 503, 50302),
    ("TOPIC_ALREADY_EXISTS", 400, 40002), ("INVALID_CONFIG", 400, 40002),
    ("INVALID_TOPIC_EXCEPTION", 400, 40002),
    ("NOT_LEADER_OR_FOLLOWER", 500, 50003), ("MESSAGE_TOO_LARGE", 500, 50002)])
def test_kafka_errors_map_as_kafka_exception_mapper(name: str, status: int, code: int) -> None:
    e = from_kafka(BY_NAME[name]("the broker's words"))
    assert (e.status, e.error_code, e.message) == (status, code, "the broker's words")


def test_connection_errors_are_retriable_kafka_errors() -> None:
    e = from_kafka(KafkaConnectionError("gone"))
    assert (e.status, e.error_code) == (500, 50003)


def test_basic_credentials_become_sasl_plain() -> None:
    pool = ClientPool(_config("authentication.method=BASIC\nclient.security.protocol=SSL\n"))
    token = base64.b64encode(b"alice:s3cret:with:colons").decode()
    principal = pool.principal(_request({"Authorization": f"Basic {token}"}))
    assert principal == Principal("alice", "s3cret:with:colons")
    config = pool.consumer_config(principal)
    assert config["security.protocol"] == "SASL_SSL"
    assert (config["sasl.mechanism"], config["sasl.username"], config["sasl.password"]) == (
        "PLAIN", "alice", "s3cret:with:colons")
    for bad in ({}, {"Authorization": "Bearer x"}, {"Authorization": "Basic !!!"},
                {"Authorization": "Basic " + base64.b64encode(b"nocolon").decode()}):
        with pytest.raises(RestError) as e:
            pool.principal(_request(bad))
        assert (e.value.status, e.value.headers) == (401, {"WWW-Authenticate": 'Basic realm="KafkaRest"'})


def test_without_authentication_every_request_is_the_proxy() -> None:
    pool = ClientPool(_config("client.sasl.mechanism=PLAIN\n"))
    assert pool.principal(_request({"Authorization": "Basic " + base64.b64encode(b"a:b").decode()})) is ANONYMOUS
    assert pool.admin_config()["sasl.mechanism"] == "PLAIN"


@pytest.mark.parametrize("raw", [b"[" * 100000 + b"]" * 100000, b'{"a": NaN}', b'{"a": Infinity}',
                                 b'[-Infinity]', b"\xff\xfe{}"])
def test_bodies_jackson_refuses_are_400_not_500(raw: bytes) -> None:
    with pytest.raises(RestError) as e:
        parse_json(raw)
    assert (e.value.status, e.value.error_code) == (400, 400)


def test_parse_json_reads_what_jackson_reads() -> None:
    assert parse_json(b' {"a": [1, 2.5, "x", null, true]} ') == {"a": [1, 2.5, "x", None, True]}
