"""SASL on the wire, as Kafka's SaslServerAuthenticator answers it: the handshake, tokens in
SaslAuthenticate (v1 handshake) or bare frames (v0), what a connection may send before it is
authenticated, and a failed authentication answered, then closed."""
from __future__ import annotations

import struct
import time

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.security import plain_jaas
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-wire"), overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas()})
    b.start()
    yield b
    b.stop()


def _client(broker) -> WireClient:
    return WireClient("127.0.0.1", broker.port)


def _closed(c: WireClient) -> bool:
    c.sock.settimeout(5)
    try:
        return c.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _metadata_works(c: WireClient) -> bool:
    r = c.request("Metadata", 9, {"topics": [], "allow_auto_topic_creation": False})
    return [b.port for b in r.brokers] != []


def test_handshake_v1_then_authenticate_gives_a_usable_connection(broker):
    with _client(broker) as c:
        assert c.request("ApiVersions", 3, {"client_software_name": "t",
                                            "client_software_version": "1"}).error_code == 0
        hs = c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})
        assert hs.error_code == 0 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256"}
        auth = c.request("SaslAuthenticate", 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert auth.error_code == 0 and auth.session_lifetime_ms == 0
        assert _metadata_works(c)


def test_handshake_v0_then_bare_tokens(broker):
    with _client(broker) as c:
        assert c.request("SaslHandshake", 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0alice-secret"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.read_frame() == b""          # PLAIN's server answer: an empty token
        assert _metadata_works(c)


def test_a_bare_token_with_a_wrong_password_closes_the_connection(broker):
    with _client(broker) as c:
        assert c.request("SaslHandshake", 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0nope"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert _closed(c)


def test_a_wrong_password_is_answered_with_kafkas_error_then_closed(broker):
    with _client(broker) as c:
        assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"}).error_code == 0
        auth = c.request("SaslAuthenticate", 1, {"auth_bytes": b"\0alice\0wrong"})
        answered = time.monotonic()
        assert auth.error_code == 58            # SASL_AUTHENTICATION_FAILED
        assert auth.error_message == "Authentication failed: Invalid username or password"
        assert _closed(c)
        # connection.failed.authentication.delay.ms (100): the client reads the answer first
        assert time.monotonic() - answered >= 0.08


def test_an_unknown_mechanism_gets_the_enabled_list(broker):
    with _client(broker) as c:
        hs = c.request("SaslHandshake", 1, {"mechanism": "GSSAPI"})
        assert hs.error_code == 33 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256"}
        assert _closed(c)


@pytest.mark.parametrize("api_name, version, body", [
    ("Metadata", 9, {"topics": [], "allow_auto_topic_creation": False}),
    ("Produce", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []}),
])
def test_other_requests_before_authentication_close_the_connection(broker, api_name, version, body):
    with _client(broker) as c:
        c.send_raw(c.encode(api_name, version, body))
        assert _closed(c)


def test_a_large_frame_before_authentication_closes_the_connection(broker):
    with _client(broker) as c:
        c.send_raw(struct.pack(">i", 600 * 1024) + b"\0\x11\0\x01")   # over 512 KiB
        assert _closed(c)
    with _client(broker) as c:          # the broker still serves others
        assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"}).error_code == 0
