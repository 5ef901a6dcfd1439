"""The broker's SASL (broker/security/sasl.py and the SaslHandshake / SaslAuthenticate
handlers), sans-io: PLAIN tokens built by hand, SCRAM driven by scramp's client."""
from __future__ import annotations

import pytest
from scramp import ScramClient  # type: ignore[import-untyped]

from broker.security.sasl import (ListenerSasl, SaslAuthenticationError, SaslServer,
                                  client_credentials_from_jaas, plain_users_from_jaas)
from broker.security.scram import ScramCredential
from broker.server.dispatch import RequestContext
from broker.server.handlers.sasl import authenticate_token, sasl_authenticate, sasl_handshake
from broker.server.network import ConnectionInfo
from clients.protocol.errors import Code
from clients.protocol.headers import RequestHeader
from clients.protocol.messages import API_BY_NAME

SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials with "
                "SASL mechanism {}")
PLAIN_FAILED = "Authentication failed: Invalid username or password"

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


class Users:
    """user -> {mechanism: Kafka's credential string}, as the metadata store keeps them."""

    def __init__(self) -> None:
        self.scram: dict[str, dict[str, str]] = {}

    def add(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
            iterations: int = 4096) -> None:
        cred = ScramCredential.from_password(mechanism, password, iterations)
        self.scram.setdefault(user, {})[mechanism] = cred.format()

    def __call__(self, user: str) -> dict[str, str]:
        return dict(self.scram.get(user, {}))


def server(users: Users | None = None) -> SaslServer:
    return SaslServer({
        "SASL_PLAINTEXT": ListenerSasl(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                                       plain_users_from_jaas(JAAS)),
        "SCRAM_ONLY": ListenerSasl(["SCRAM-SHA-512"]),
    }, users if users is not None else Users())


def scram_login(sasl: SaslServer, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                listener: str = "SASL_PLAINTEXT"):
    """Runs a whole SCRAM exchange; returns the exchange (the client checked the server)."""
    client = ScramClient([mechanism], user, password)
    exchange = sasl.start(listener, mechanism)
    server_first = exchange.step(client.get_client_first().encode())
    assert not exchange.complete
    client.set_server_first(server_first.decode())
    server_final = exchange.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())     # raises unless the server knew the key
    return exchange


# ------------------------------------------------------------------ PLAIN

def test_plain_authenticates_a_jaas_user():
    exchange = server().start("SASL_PLAINTEXT", "PLAIN")
    assert exchange.step(b"\0alice\0alice-secret") == b""
    assert exchange.complete and exchange.principal == "User:alice"


def test_plain_accepts_an_authzid_equal_to_the_user_only():
    ok = server().start("SASL_PLAINTEXT", "PLAIN")
    ok.step(b"alice\0alice\0alice-secret")
    assert ok.principal == "User:alice"
    other = server().start("SASL_PLAINTEXT", "PLAIN")
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        other.step(b"admin\0alice\0alice-secret")
    assert not other.complete


@pytest.mark.parametrize("token", [b"\0alice\0wrong", b"\0mallory\0alice-secret",
                                   b"\0alice\0alice-secret-and-more"])
def test_plain_wrong_password_or_user(token):
    exchange = server().start("SASL_PLAINTEXT", "PLAIN")
    with pytest.raises(SaslAuthenticationError) as e:
        exchange.step(token)
    assert e.value.message == PLAIN_FAILED
    assert not exchange.complete
    with pytest.raises(SaslAuthenticationError):     # no second try on the same exchange
        exchange.step(b"\0alice\0alice-secret")


@pytest.mark.parametrize("token", [b"alice-secret", b"\0alice", b"\0\0alice-secret",
                                   b"\0alice\0", b"\0alice\0\xff\xfe"])
def test_plain_malformed_tokens_get_kafkas_generic_answer(token):
    with pytest.raises(SaslAuthenticationError) as e:
        server().start("SASL_PLAINTEXT", "PLAIN").step(token)
    assert e.value.message == SCRAM_FAILED.format("PLAIN")


def test_plain_ignores_what_follows_a_third_nul_as_kafka_does():
    exchange = server().start("SASL_PLAINTEXT", "PLAIN")
    exchange.step(b"\0alice\0alice-secret\0trailing")
    assert exchange.principal == "User:alice"


# ------------------------------------------------------------------ SCRAM

@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_a_stored_user(mechanism):
    users = Users()
    users.add("alice", "alice-secret", mechanism, iterations=8192)
    exchange = scram_login(server(users), "alice", "alice-secret", mechanism)
    assert exchange.complete and exchange.principal == "User:alice"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_fails_at_the_final_message(mechanism):
    users = Users()
    users.add("alice", "alice-secret", mechanism)
    sasl = server(users)
    client = ScramClient([mechanism], "alice", "not-her-password")
    exchange = sasl.start("SASL_PLAINTEXT", mechanism)
    client.set_server_first(exchange.step(client.get_client_first().encode()).decode())
    with pytest.raises(SaslAuthenticationError) as e:
        exchange.step(client.get_client_final().encode())
    assert e.value.message == SCRAM_FAILED.format(mechanism)
    assert not exchange.complete


def test_scram_unknown_user_fails_at_once_with_the_same_words():
    # Kafka does not say whether the user exists.
    exchange = server().start("SASL_PLAINTEXT", "SCRAM-SHA-256")
    client = ScramClient(["SCRAM-SHA-256"], "nobody", "pw")
    with pytest.raises(SaslAuthenticationError) as e:
        exchange.step(client.get_client_first().encode())
    assert e.value.message == SCRAM_FAILED.format("SCRAM-SHA-256")


def test_scram_needs_a_credential_of_the_mechanism_asked_for():
    users = Users()
    users.add("alice", "alice-secret", "SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-512"):
        scram_login(server(users), "alice", "alice-secret", "SCRAM-SHA-512")


def test_scram_reads_the_credentials_at_each_login():
    users = Users()
    users.add("alice", "old")
    sasl = server(users)
    scram_login(sasl, "alice", "old")
    users.add("alice", "new")
    with pytest.raises(SaslAuthenticationError):
        scram_login(sasl, "alice", "old")
    assert scram_login(sasl, "alice", "new").principal == "User:alice"
    del users.scram["alice"]
    with pytest.raises(SaslAuthenticationError):
        scram_login(sasl, "alice", "new")


def test_scram_user_names_with_comma_and_equals_are_unescaped():
    users = Users()
    users.add("CN=alice,O=org", "pw")
    assert scram_login(server(users), "CN=alice,O=org", "pw").principal == "User:CN=alice,O=org"


def test_scram_refuses_a_stored_credential_below_kafkas_minimum_iterations():
    users = Users()
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    users.scram["alice"] = {"SCRAM-SHA-256": ScramCredential(
        cred.salt, cred.stored_key, cred.server_key, 1000).format()}
    with pytest.raises(SaslAuthenticationError):
        scram_login(server(users), "alice", "pw")


def test_scram_unreadable_stored_credential_fails_the_login_only():
    users = Users()
    users.scram["alice"] = {"SCRAM-SHA-256": "salt=garbage"}
    with pytest.raises(SaslAuthenticationError) as e:
        scram_login(server(users), "alice", "pw")
    assert "garbage" not in e.value.message


@pytest.mark.parametrize("first", [b"\xff\xfe", b"hello", b"n,,n=alice"])
def test_scram_malformed_client_first(first):
    users = Users()
    users.add("alice", "pw")
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        server(users).start("SASL_PLAINTEXT", "SCRAM-SHA-256").step(first)


def test_scram_exchange_is_over_after_the_final_message():
    users = Users()
    users.add("alice", "pw")
    exchange = scram_login(server(users), "alice", "pw")
    with pytest.raises(SaslAuthenticationError):
        exchange.step(b"n,,n=alice,r=abc")
    assert exchange.principal == "User:alice"


# ------------------------------------------------------------------ the server and JAAS

def test_mechanisms_per_listener():
    sasl = server()
    assert sasl.mechanisms("SASL_PLAINTEXT") == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert sasl.mechanisms("SCRAM_ONLY") == ["SCRAM-SHA-512"]
    assert sasl.mechanisms("PLAINTEXT") == []
    with pytest.raises(ValueError, match="does not offer"):
        sasl.start("SCRAM_ONLY", "PLAIN")
    with pytest.raises(ValueError, match="does not offer"):
        sasl.start("PLAINTEXT", "PLAIN")


def test_unsupported_mechanisms_are_refused_when_built():
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslServer({"SASL_SSL": ListenerSasl(["GSSAPI"])}, Users())


def test_plain_users_from_jaas():
    assert plain_users_from_jaas(JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(ValueError):
        plain_users_from_jaas("not jaas")


def test_client_credentials_from_jaas():
    assert client_credentials_from_jaas(JAAS) == ("admin", "admin-secret")
    scram = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
             'username="bob" password="b\\"ob";')
    assert client_credentials_from_jaas(scram) == ("bob", 'b"ob')
    with pytest.raises(ValueError, match="password"):
        client_credentials_from_jaas('x.Y required username="bob";')


# ------------------------------------------------------------------ the handlers

class Services:
    def __init__(self, sasl: SaslServer):
        self.sasl = sasl


def call(handler, services, conn: ConnectionInfo, api_name: str, body: dict, version: int):
    """The handler's answer to `body`, decoded from and encoded to the wire."""
    api = API_BY_NAME[api_name]
    request = api.decode_request(api.encode_request(body, version).getvalue(), version)
    ctx = RequestContext(RequestHeader(api.key, version, 1, "test"), conn, api)
    response = handler(services, request, ctx)
    return api.decode_response(api.encode_response(response, version).getvalue(), version)


def handshake(services, conn, mechanism: str, version: int = 1):
    return call(sasl_handshake, services, conn, "SaslHandshake", {"mechanism": mechanism}, version)


def authenticate(services, conn, token: bytes, version: int = 2):
    return call(sasl_authenticate, services, conn, "SaslAuthenticate", {"auth_bytes": token},
                version)


def sasl_conn(listener: str = "SASL_PLAINTEXT") -> ConnectionInfo:
    return ConnectionInfo(("10.1.2.3", 40000), listener, "SASL_PLAINTEXT")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_login_through_the_handlers(version):
    services, conn = Services(server()), sasl_conn()
    assert not conn.authenticated and conn.principal == "User:ANONYMOUS"
    r = handshake(services, conn, "PLAIN")
    assert r.error_code == 0 and r.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    r = authenticate(services, conn, b"\0alice\0alice-secret", version)
    assert r.error_code == 0 and r.error_message is None and bytes(r.auth_bytes) == b""
    if version >= 1:
        assert r.session_lifetime_ms == 0
    assert conn.authenticated and conn.principal == "User:alice" and conn.sasl is None
    assert not conn.state.get("close_after_answer")


def test_scram_login_through_the_handlers():
    users = Users()
    users.add("bob", "bob-secret", "SCRAM-SHA-512")
    services, conn = Services(server(users)), sasl_conn("SCRAM_ONLY")
    assert handshake(services, conn, "SCRAM-SHA-512").error_code == 0
    client = ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    r = authenticate(services, conn, client.get_client_first().encode())
    assert r.error_code == 0 and not conn.authenticated
    client.set_server_first(bytes(r.auth_bytes).decode())
    r = authenticate(services, conn, client.get_client_final().encode())
    assert r.error_code == 0
    client.set_server_final(bytes(r.auth_bytes).decode())
    assert conn.authenticated and conn.principal == "User:bob"


def test_failed_login_is_answered_then_closed():
    services, conn = Services(server()), sasl_conn()
    handshake(services, conn, "PLAIN")
    r = authenticate(services, conn, b"\0alice\0guess")
    assert r.error_code == Code.SASL_AUTHENTICATION_FAILED and r.error_message == PLAIN_FAILED
    assert conn.state["close_after_answer"] is True
    assert not conn.authenticated and conn.principal == "User:ANONYMOUS"


def test_scram_failure_through_the_handlers_names_the_mechanism():
    services, conn = Services(server()), sasl_conn()
    handshake(services, conn, "SCRAM-SHA-256")
    client = ScramClient(["SCRAM-SHA-256"], "ghost", "pw")
    r = authenticate(services, conn, client.get_client_first().encode())
    assert r.error_code == Code.SASL_AUTHENTICATION_FAILED
    assert r.error_message == SCRAM_FAILED.format("SCRAM-SHA-256")
    assert conn.state["close_after_answer"] is True


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes():
    services, conn = Services(server()), sasl_conn("SCRAM_ONLY")
    r = handshake(services, conn, "PLAIN")
    assert r.error_code == Code.UNSUPPORTED_SASL_MECHANISM and r.mechanisms == ["SCRAM-SHA-512"]
    assert conn.state["close_after_answer"] is True and conn.sasl is None


def test_mechanism_names_are_case_sensitive_as_in_kafka():
    services, conn = Services(server()), sasl_conn()
    assert handshake(services, conn, "plain").error_code == Code.UNSUPPORTED_SASL_MECHANISM


def test_after_authentication_both_apis_are_illegal_but_the_connection_stays():
    services, conn = Services(server()), sasl_conn()
    handshake(services, conn, "PLAIN")
    authenticate(services, conn, b"\0alice\0alice-secret")
    r = handshake(services, conn, "PLAIN")
    assert r.error_code == Code.ILLEGAL_SASL_STATE and r.mechanisms == []
    r = authenticate(services, conn, b"\0admin\0admin-secret")
    assert r.error_code == Code.ILLEGAL_SASL_STATE
    assert r.error_message == "SaslAuthenticate request received after successful authentication"
    assert conn.principal == "User:alice" and not conn.state.get("close_after_answer")


def test_handshake_on_a_listener_without_sasl_is_illegal():
    services = Services(server())
    conn = ConnectionInfo(("10.1.2.3", 40000), "PLAINTEXT", "PLAINTEXT")
    assert handshake(services, conn, "PLAIN").error_code == Code.ILLEGAL_SASL_STATE
    assert conn.principal == "User:ANONYMOUS" and not conn.state.get("close_after_answer")


def test_out_of_order_requests_are_answered_then_closed():
    services, conn = Services(server()), sasl_conn()
    r = authenticate(services, conn, b"\0alice\0alice-secret")
    assert r.error_code == Code.ILLEGAL_SASL_STATE and conn.state["close_after_answer"]
    assert not conn.authenticated

    services, conn = Services(server()), sasl_conn()
    handshake(services, conn, "PLAIN")
    assert handshake(services, conn, "PLAIN").error_code == Code.ILLEGAL_SASL_STATE
    assert conn.state["close_after_answer"] is True


def test_handshake_v0_marks_raw_tokens_until_authenticated():
    services, conn = Services(server()), sasl_conn()
    assert handshake(services, conn, "PLAIN", version=0).error_code == 0
    assert conn.state["sasl_raw_tokens"] is True
    assert authenticate_token(conn, b"\0admin\0admin-secret") == b""
    assert conn.authenticated and conn.principal == "User:admin"
    assert "sasl_raw_tokens" not in conn.state


def test_raw_token_failure_marks_the_connection_to_close():
    services, conn = Services(server()), sasl_conn()
    handshake(services, conn, "PLAIN", version=0)
    with pytest.raises(SaslAuthenticationError):
        authenticate_token(conn, b"\0admin\0nope")
    assert conn.state["close_after_answer"] is True and conn.sasl is None


# ------------------------------------------------------------------ librdkafka < 2.6.1

def _login_with_final_nonce(users: Users, rewrite) -> bytes:
    """A SCRAM login whose client-final nonce is `rewrite(client nonce, combined nonce)`,
    with the proof computed over the message as sent (what librdkafka before 2.6.1 does)."""
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    exchange = server(users).start("SASL_PLAINTEXT", "SCRAM-SHA-256")
    server_first = exchange.step(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    combined = client.nonce
    client.nonce = type(combined)(rewrite(str(client.c_nonce), str(combined)))
    server_final = exchange.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())
    assert exchange.complete and exchange.principal == "User:alice"
    return server_final


def test_scram_accepts_the_client_nonce_sent_twice_as_old_librdkafka_does():
    users = Users()
    users.add("alice", "alice-secret")
    assert _login_with_final_nonce(users, lambda c, combined: c + combined).startswith(b"v=")


def test_scram_still_refuses_a_final_nonce_that_does_not_end_with_the_servers():
    users = Users()
    users.add("alice", "alice-secret")
    with pytest.raises(SaslAuthenticationError):
        _login_with_final_nonce(users, lambda c, combined: combined + "x")
