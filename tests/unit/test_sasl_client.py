"""The clients' SASL: the mechanisms sans-io against scramp's server side, then the whole
exchange of BrokerConnection.connect (ApiVersions, SaslHandshake v1, SaslAuthenticate) against
an in-process broker, and what a refusal does to the pool and the client (final, prompt)."""
from __future__ import annotations

import asyncio
import base64
import ssl
import time
from pathlib import Path
from typing import Any

import pytest
import scramp  # type: ignore[import-untyped, unused-ignore]
import trustme

from clients.aio.client import KafkaClient
from clients.aio.connection import BrokerConnection
from clients.aio.pool import ConnectionPool
from clients.aio.sasl_client import PlainClient, ScramClient, mechanism_client
from clients.aio.security import AuthenticationError, ClientSecurity
from clients.config import resolve
from clients.protocol.errors import Code
from clients.aio.errors import KafkaConnectionError
from tests.unit.test_client_security_config import (API_KEYS, HOST, FakeBroker, response,
                                                    server_context)

pytestmark = pytest.mark.timeout(60)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


def scram_server(mechanism: str, users: dict[str, str] = USERS) -> Any:
    """scramp's server side with Kafka's minimum of 4096 iterations."""
    m = scramp.ScramMechanism(mechanism)
    creds = {u: m.make_auth_info(p, iteration_count=4096) for u, p in users.items()}

    def auth_fn(username: str) -> tuple[bytes, bytes, bytes, int]:
        if username not in creds:
            raise scramp.ScramException("unknown user", scramp.ServerError.UNKNOWN_USER)
        return creds[username]
    return m.make_server(auth_fn)


def exchange(client: Any, server: Any) -> None:
    """Drive a SCRAM exchange between our client and scramp's server, in memory."""
    server.set_client_first(client.first_token().decode())
    client_final = client.respond(server.get_server_first().encode())
    assert client_final is not None
    try:
        server.set_client_final(client_final.decode())
    except scramp.ScramException:
        pass                                    # the server answers "e=..." below
    assert client.respond(server.get_server_final().encode()) is None


# ---------------------------------------------------------------- mechanisms, sans-io

def test_plain_token_is_kafkas():
    c = PlainClient("alice", "alice-secret")
    assert c.first_token() == b"\0alice\0alice-secret"
    assert c.respond(b"") is None
    assert PlainClient("a", "b", authzid="a").first_token() == b"a\0a\0b"
    with pytest.raises(ValueError):
        PlainClient("a\0b", "c")
    assert isinstance(mechanism_client("PLAIN", "u", "p"), PlainClient)
    with pytest.raises(ValueError, match="GSSAPI"):
        mechanism_client("GSSAPI", "u", "p")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_scramps_server(mechanism: str):
    client = mechanism_client(mechanism, "alice", "alice-secret")
    assert isinstance(client, ScramClient) and client.mechanism == mechanism
    first = client.first_token()
    assert first.startswith(b"n,,n=alice,r=")          # no channel binding, as Kafka's
    server = scram_server(mechanism)
    server.set_client_first(first.decode())
    final = client.respond(server.get_server_first().encode())
    assert final is not None and final.startswith(b"c=biws,r=")
    server.set_client_final(final.decode())               # raises if the proof is wrong
    assert client.respond(server.get_server_final().encode()) is None
    with pytest.raises(AuthenticationError, match="unexpected token"):
        client.respond(b"more")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_is_refused_by_the_server(mechanism: str):
    with pytest.raises(AuthenticationError, match="server returned an error"):
        exchange(mechanism_client(mechanism, "alice", "wrong"), scram_server(mechanism))


def test_scram_client_checks_the_server():
    """A server that does not know the password cannot forge the final signature; a
    server nonce that does not extend ours is refused too."""
    client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", nonce="abc")
    client.first_token()
    salt = base64.b64encode(b"0123456789abcdef").decode()
    client.respond(f"r=abcSERVER,s={salt},i=4096".encode())
    forged = base64.b64encode(b"x" * 32).decode()
    with pytest.raises(AuthenticationError, match="signature doesn't match"):
        client.respond(f"v={forged}".encode())

    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret", nonce="abc")
    client.first_token()
    with pytest.raises(AuthenticationError, match="nonce"):
        client.respond(f"r=zzzSERVER,s={salt},i=4096".encode())
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    client.first_token()
    with pytest.raises(AuthenticationError, match="not UTF-8"):
        client.respond(b"\xff\xfe")


def test_scram_user_names_are_escaped_as_rfc5802_says():
    first = ScramClient("SCRAM-SHA-256", "a=b,c", "pw", nonce="n").first_token()
    assert first == b"n,,n=a=3Db=2Cc,r=n"


# ---------------------------------------------------------------- the exchange on a connection

class SaslBroker(FakeBroker):
    """A broker whose listener takes SASL: `mechanisms` enabled, PLAIN against USERS and
    SCRAM through scramp; Metadata (after authentication) names only itself. Records the
    mechanisms asked for, and answers `session_lifetime_ms` on success."""

    def __init__(self, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                 tls: ssl.SSLContext | None = None, session_lifetime_ms: int = 0):
        super().__init__(self.handle, tls)
        self.mechanisms = mechanisms
        self.session_lifetime_ms = session_lifetime_ms
        self.asked: list[str] = []
        self.authenticated = 0
        self._chosen: str | None = None
        self._scram: Any = None

    async def handle(self, key: int, version: int, cid: int, body: Any) -> bytes | None:
        if key == 17:                                  # SaslHandshake
            self.asked.append(body.mechanism)
            ok = body.mechanism in self.mechanisms
            self._chosen = body.mechanism if ok else None
            self._scram = scram_server(body.mechanism) if ok and "SCRAM" in body.mechanism else None
            return response("SaslHandshake", version, cid, {
                "error_code": 0 if ok else Code.UNSUPPORTED_SASL_MECHANISM,
                "mechanisms": list(self.mechanisms)})
        if key == 36:                                  # SaslAuthenticate
            return self._authenticate(version, cid, bytes(body.auth_bytes))
        if key == 3:
            return response("Metadata", version, cid, {
                "brokers": [{"node_id": 0, "host": HOST, "port": self.port}], "topics": [],
                "controller_id": 0, "cluster_id": "sasl-test"})
        return None

    def _authenticate(self, version: int, cid: int, token: bytes) -> bytes:
        def answer(auth_bytes: bytes = b"", error: str | None = None, done: bool = False) -> bytes:
            if done:
                self.authenticated += 1
            return response("SaslAuthenticate", version, cid, {
                "error_code": Code.SASL_AUTHENTICATION_FAILED if error else 0,
                "error_message": error, "auth_bytes": auth_bytes,
                "session_lifetime_ms": self.session_lifetime_ms if done else 0})
        if self._chosen == "PLAIN":
            _, user, password = token.decode().split("\0")
            if USERS.get(user) != password:
                return answer(error="Authentication failed: Invalid username or password")
            return answer(done=True)
        server = self._scram
        try:
            if server.stage is None:
                server.set_client_first(token.decode())
                return answer(server.get_server_first().encode())
            server.set_client_final(token.decode())
            return answer(server.get_server_final().encode(), done=True)
        except scramp.ScramException:
            return answer(error="Authentication failed during authentication due to invalid "
                                f"credentials with SASL mechanism {self._chosen}")


def sasl(mechanism: str, user: str = "alice", password: str | None = None,
         protocol: str = "SASL_PLAINTEXT", **extra: str) -> ClientSecurity:
    password = USERS.get(user, "") if password is None else password
    return ClientSecurity.from_config({
        "security.protocol": protocol, "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule '
                            f'required username="{user}" password="{password}";', **extra})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_connect_authenticates_then_requests_flow(mechanism: str):
    async def main() -> None:
        async with SaslBroker() as broker:
            async with await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                                      security=sasl(mechanism)) as conn:
                resp = await conn.request("Metadata", {"topics": []})
                assert resp.cluster_id == "sasl-test"
                assert conn.reauthenticate_at is None     # no session lifetime granted
            assert broker.asked == [mechanism] and broker.authenticated == 1
            rounds = 1 if mechanism == "PLAIN" else 2
            assert broker.seen == [(18, 4), (17, 1)] + [(36, 2)] * rounds + [(3, 12)]
    asyncio.run(main())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_raises_the_brokers_message(mechanism: str):
    async def main() -> None:
        async with SaslBroker() as broker:
            with pytest.raises(AuthenticationError, match="Authentication failed") as e:
                await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                               security=sasl(mechanism, password="wrong"))
            assert not e.value.retriable and e.value.code == Code.SASL_AUTHENTICATION_FAILED
            assert broker.authenticated == 0
    asyncio.run(main())


def test_a_mechanism_the_broker_does_not_enable():
    async def main() -> None:
        async with SaslBroker(mechanisms=("SCRAM-SHA-512",)) as broker:
            with pytest.raises(AuthenticationError, match="SASL mechanism PLAIN is not enabled "
                                                          r"on 127.0.0.1:\d+; it offers "
                                                          "SCRAM-SHA-512"):
                await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                               security=sasl("PLAIN"))
    asyncio.run(main())


def test_a_listener_without_sasl():
    """A PLAINTEXT listener does not advertise SaslHandshake: say so instead of hanging."""
    no_sasl = [k for k in API_KEYS if k["api_key"] not in (17, 36)]

    async def main() -> None:
        async with FakeBroker(api_keys=no_sasl) as broker:
            with pytest.raises(AuthenticationError, match="offers no SaslHandshake v1.*is its "
                                                          "listener SASL_PLAINTEXT"):
                await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                               security=sasl("PLAIN"))
    asyncio.run(main())


def test_sasl_is_bounded_by_the_connect_timeout():
    async def silent(key: int, version: int, cid: int, body: Any) -> bytes | None:
        if key == 17:
            await asyncio.sleep(30)
        return None

    async def main() -> None:
        async with FakeBroker(silent) as broker:
            t0 = time.monotonic()
            with pytest.raises(KafkaConnectionError, match="did not complete SASL PLAIN "
                                                           "authentication within 0.5s"):
                await BrokerConnection.connect(HOST, broker.port, timeout=0.5,
                                               security=sasl("PLAIN"))
            assert time.monotonic() - t0 < 2
    asyncio.run(main())


def test_sasl_over_tls(tmp_path: Path):
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))

    async def main() -> None:
        async with SaslBroker(tls=server_context(ca, HOST)) as broker:
            sec = sasl("SCRAM-SHA-512", protocol="SASL_SSL",
                       **{"ssl.truststore.location": str(ca_file)})
            assert sec.uses_tls and sec.uses_sasl
            async with await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                                      security=sec) as conn:
                assert (await conn.request("Metadata", {"topics": []})).cluster_id == "sasl-test"
            assert broker.authenticated == 1
    asyncio.run(main())


# ---------------------------------------------------------------- refusals are final

def test_the_client_fails_fast_on_a_wrong_password():
    """KafkaClient.start (what every producer, consumer and admin call starts with) raises
    the AuthenticationError within a second, not after request.timeout.ms of retries."""
    async def main() -> None:
        async with SaslBroker() as broker:
            config = resolve("admin", {
                "bootstrap.servers": f"{HOST}:{broker.port}", "request.timeout.ms": 30000,
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice", "sasl.password": "wrong"})
            client = KafkaClient(config)
            t0 = time.monotonic()
            try:
                with pytest.raises(AuthenticationError, match="invalid credentials"):
                    await client.start()
                assert time.monotonic() - t0 < 1.0
                assert isinstance(client.pool.authentication_error, AuthenticationError)
                with pytest.raises(AuthenticationError, match="invalid credentials"):
                    client.raise_authentication_error()
                # The pool paces further attempts like failed connects, and they fail alike.
                assert client.pool.backoff_remaining((HOST, broker.port)) > 0
                with pytest.raises(AuthenticationError):
                    await client.request_any("Metadata", {"topics": []})
            finally:
                await client.close()

            good = KafkaClient(resolve("admin", {**config, "sasl.password": "alice-secret"}))
            try:
                await good.start()
                assert good.cluster.cluster_id == "sasl-test"
                assert good.pool.authentication_error is None
                good.raise_authentication_error()          # nothing to raise
            finally:
                await good.close()
    asyncio.run(main())


def test_a_session_with_a_lifetime_is_replaced_before_it_ends():
    """KIP-368: the broker grants the session 1 s; the pool opens (and authenticates) a
    new connection at 85-95% of it, and closes the old one once it is idle."""
    async def main() -> None:
        async with SaslBroker(session_lifetime_ms=1000) as broker:
            pool = ConnectionPool(security=sasl("SCRAM-SHA-256"), connect_timeout=5)
            try:
                first = await pool.get((HOST, broker.port))
                loop = asyncio.get_running_loop()
                assert first.reauthenticate_at is not None
                assert 0.8 <= first.reauthenticate_at - loop.time() <= 0.95
                assert await pool.get((HOST, broker.port)) is first
                await asyncio.sleep(first.reauthenticate_at - loop.time() + 0.01)
                second = await pool.get((HOST, broker.port))
                assert second is not first and broker.authenticated == 2
                await asyncio.sleep(0.05)
                assert first.closed and not second.closed
            finally:
                await pool.close_all()
    asyncio.run(main())
