"""The clients' security keys (clients.config.security_settings, ClientSecurity.from_config)
and TLS on a real loopback socket: BrokerConnection against an in-process asyncio TLS server
that answers ApiVersions, with certificates from trustme."""
from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path
from typing import Any, Awaitable, Callable, Self

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from clients.aio.connection import BrokerConnection
from clients.aio.errors import KafkaConnectionError
from clients.aio.security import (PLAINTEXT, AuthenticationError, ClientSecurity,
                                  SslAuthenticationError)
from clients.cli import common
from clients.cli import console_producer
from clients.config import KEYS, ConfigError, resolve, security_settings
from clients.protocol.errors import SaslAuthenticationFailedError
from clients.protocol.headers import decode_request_header, encode_response_header, peek_api
from clients.protocol.messages import api
from clients.protocol.types import Reader, Writer

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"
BOOT = {"bootstrap.servers": "h:9092"}


# ---------------------------------------------------------------- keys and their rules

def test_security_keys_are_common_to_every_client_kind():
    for kind in ("producer", "consumer", "admin", "common"):
        for key in ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username",
                    "ssl.truststore.location", "ssl.keystore.location", "ssl.key.password",
                    "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols",
                    "ssl.ca.location", "enable.ssl.certificate.verification"):
            assert key in KEYS[kind], (kind, key)
    cfg = resolve("consumer", {**BOOT, "security.protocol": "sasl_ssl",
                               "sasl.mechanisms": "scram-sha-256",     # librdkafka's name
                               "sasl.username": "alice", "sasl.password": "pw"})
    assert (cfg["security.protocol"], cfg["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-256")
    assert resolve("admin", BOOT)["security.protocol"] == "PLAINTEXT"
    assert resolve("admin", BOOT)["sasl.mechanism"] == "GSSAPI"            # Kafka's default
    # Python keywords name the same keys.
    cfg = resolve("producer", BOOT, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                  sasl_username="u", sasl_password="p")
    assert cfg["security.protocol"] == "SASL_PLAINTEXT"


def test_an_unknown_protocol_or_mechanism_is_refused():
    with pytest.raises(ConfigError, match="security.protocol: invalid value 'TLS'") as e:
        resolve("admin", {**BOOT, "security.protocol": "TLS"})
    assert e.value.key == "security.protocol"
    for mechanism in ("GSSAPI", "OAUTHBEARER"):
        with pytest.raises(ConfigError, match=f"sasl.mechanism: {mechanism}.* is not supported: "
                                              "strom's clients speak PLAIN, SCRAM-SHA-256 "
                                              "and SCRAM-SHA-512"):
            resolve("producer", {**BOOT, "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": mechanism, "sasl.username": "u",
                                 "sasl.password": "p"})
    # The default GSSAPI says it is Kafka's default: the user forgot sasl.mechanism.
    with pytest.raises(ConfigError, match=r"GSSAPI \(Kafka's default\)"):
        resolve("producer", {**BOOT, "security.protocol": "SASL_SSL", "sasl.username": "u",
                             "sasl.password": "p"})
    with pytest.raises(ConfigError, match="SCRAM-SHA-1 is not a SASL mechanism"):
        resolve("producer", {**BOOT, "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-1", "sasl.username": "u",
                             "sasl.password": "p"})
    # Without SASL the mechanism does not matter (Kafka's default stays harmless).
    assert resolve("admin", {**BOOT, "security.protocol": "SSL"})["sasl.mechanism"] == "GSSAPI"


def test_sasl_needs_credentials_and_names_sasl_jaas_config():
    with pytest.raises(ConfigError, match="sasl.jaas.config: security.protocol=SASL_PLAINTEXT "
                                          "needs credentials") as e:
        resolve("admin", {**BOOT, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "PLAIN"})
    assert e.value.key == "sasl.jaas.config"
    with pytest.raises(ConfigError, match="sasl.jaas.config"):
        resolve("admin", {**BOOT, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "PLAIN", "sasl.username": "only-a-name"})


def test_credentials_from_jaas_config_or_librdkafka_keys():
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            'username="alice" password="al\\"ice-secret";')
    sec = ClientSecurity.from_config({"security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas})
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", 'al"ice-secret')
    assert sec.ssl_context is None and sec.uses_sasl and not sec.uses_tls
    assert "ice-secret" not in repr(sec)
    # sasl.jaas.config wins over librdkafka's keys.
    s = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.jaas.config": jaas, "sasl.username": "bob",
                           "sasl.password": "x"})
    assert (s["sasl.username"], s["sasl.password"]) == ("alice", 'al"ice-secret')
    sec = ClientSecurity.from_config({"security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanisms": "PLAIN", "sasl.username": "bob",
                                      "sasl.password": "bob-pw"})
    assert (sec.username, sec.password) == ("bob", "bob-pw")


def test_a_bad_jaas_config_is_a_config_error():
    base = {**BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    with pytest.raises(ConfigError, match="sasl.jaas.config: JAAS config must end with ';'"):
        resolve("admin", {**base, "sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          'username="a" password="b"'})
    with pytest.raises(ConfigError, match="needs username and password options"):
        resolve("admin", {**base, "sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          'username="a";'})


def test_plaintext_is_the_default_and_ignores_ssl_keys():
    assert ClientSecurity.from_config(BOOT) is PLAINTEXT
    assert ClientSecurity.from_config(resolve("admin", BOOT)) is PLAINTEXT
    # Kafka ignores ssl.* on a PLAINTEXT client; so does strom (even a JKS store).
    assert ClientSecurity.from_config({"ssl.truststore.type": "JKS",
                                       "ssl.truststore.location": "/nowhere"}) is PLAINTEXT
    assert PLAINTEXT.protocol == "PLAINTEXT" and PLAINTEXT.ssl_context is None
    with pytest.raises(ValueError):
        ClientSecurity(protocol="SSL")          # TLS without a context cannot be built


def test_jks_and_pkcs12_stores_are_refused_saying_strom_reads_pem():
    for key, kind in (("ssl.truststore.type", "JKS"), ("ssl.keystore.type", "PKCS12")):
        with pytest.raises(ConfigError, match=f"{key}: {kind} stores are not read: strom reads "
                                              "PEM") as e:
            resolve("producer", {**BOOT, "security.protocol": "SSL", key: kind})
        assert e.value.key == key


def test_conflicting_or_incomplete_tls_settings(tmp_path: Path):
    ssl_cfg = {"security.protocol": "SSL"}
    cases = [
        ({"ssl.truststore.location": "a.pem", "ssl.truststore.certificates": "x"},
         "ssl.truststore.certificates: cannot be set together with ssl.truststore.location"),
        ({"ssl.keystore.location": "k.pem", "ssl.keystore.key": "x",
          "ssl.keystore.certificate.chain": "y"}, "configured twice"),
        ({"ssl.keystore.location": "k.pem", "ssl.certificate.location": "c.pem"},
         "configured twice"),
        ({"ssl.keystore.key": "x"}, "ssl.keystore.certificate.chain: required with "
                                    "ssl.keystore.key"),
        ({"ssl.key.location": "k.pem"}, "ssl.certificate.location: required with "
                                        "ssl.key.location"),
        ({"ssl.endpoint.identification.algorithm": "http"}, "ssl.endpoint.identification"),
        ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "'SSLv3' is not a TLS version"),
        ({"ssl.protocol": "TLSv9"}, "ssl.protocol: 'TLSv9'"),
        ({"ssl.truststore.location": str(tmp_path / "missing.pem")},
         "ssl.truststore.location: .*missing.pem: no such file"),
        ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"},
         "ssl.enabled.protocols: none of TLSv1.3 is at most ssl.protocol=TLSv1.2"),
    ]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            ClientSecurity.from_config({**ssl_cfg, **extra})
    not_pem = tmp_path / "store.jks"
    not_pem.write_bytes(b"\xfe\xed\xfe\xed binary keystore")
    with pytest.raises(ConfigError, match="ssl.truststore.location: .*store.jks: not a usable "
                                          "PEM"):
        ClientSecurity.from_config({**ssl_cfg, "ssl.truststore.location": str(not_pem)})
    with pytest.raises(ConfigError, match="ssl.keystore.location: .*store.jks: not a usable PEM"):
        ClientSecurity.from_config({**ssl_cfg, "ssl.keystore.location": str(not_pem)})


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _encrypted_key_pem(leaf: trustme.LeafCert, password: bytes) -> str:
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password)).decode()


def test_the_tls_context_follows_the_settings(ca: trustme.CA, tmp_path: Path):
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    sec = ClientSecurity.from_config({"security.protocol": "SSL",
                                      "ssl.truststore.location": str(ca_file)})
    ctx = sec.ssl_context
    assert ctx is not None and sec.uses_tls and not sec.uses_sasl
    assert ctx.check_hostname and sec.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2,
                                                          ssl.TLSVersion.TLSv1_3)
    assert len(ctx.get_ca_certs()) == 1
    for off in ({"ssl.endpoint.identification.algorithm": ""},
                {"ssl.endpoint.identification.algorithm": "none"},
                {"ssl.check.hostname": "false"}):
        sec = ClientSecurity.from_config({"security.protocol": "SSL",
                                          "ssl.truststore.location": str(ca_file), **off})
        assert sec.ssl_context is not None and not sec.ssl_context.check_hostname, off
        assert not sec.check_hostname
        assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED
    sec = ClientSecurity.from_config({"security.protocol": "SSL",
                                      "enable.ssl.certificate.verification": "false"})
    assert sec.ssl_context is not None and sec.ssl_context.verify_mode == ssl.CERT_NONE
    sec = ClientSecurity.from_config({"security.protocol": "SSL", "ssl.protocol": "TLSv1.2",
                                      "ssl.truststore.location": str(ca_file)})
    assert sec.ssl_context is not None
    assert sec.ssl_context.maximum_version == ssl.TLSVersion.TLSv1_2
    # librdkafka's names, and a directory of CA files.
    sec = ClientSecurity.from_config({"security.protocol": "SSL",
                                      "ssl.ca.location": str(ca_file)})
    assert sec.ssl_context is not None and len(sec.ssl_context.get_ca_certs()) == 1


def test_inline_pem_as_a_properties_file_gives_it(ca: trustme.CA, tmp_path: Path):
    """Kafka's KIP-651 inline values, written with line continuations in a .properties file
    (read back as one line), and an encrypted key with ssl.key.password."""
    leaf = ca.issue_cert("client.example")

    def one_line(pem: str) -> str:
        return " \\\n    ".join(pem.strip().splitlines())

    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.certificates={one_line(ca.cert_pem.bytes().decode())}",
        f"ssl.keystore.key={one_line(_encrypted_key_pem(leaf, b'key-pw'))}",
        "ssl.keystore.certificate.chain=" + one_line(
            "".join(p.bytes().decode() for p in leaf.cert_chain_pems)),
        "ssl.key.password=key-pw",
    ]) + "\n")
    cfg = resolve("producer", {**common.read_config_file(str(props)), **BOOT})
    assert "\n" not in cfg["ssl.truststore.certificates"]
    sec = ClientSecurity.from_config(cfg)
    assert sec.ssl_context is not None and len(sec.ssl_context.get_ca_certs()) == 1
    # The wrong key password is a ConfigError naming the key, never a terminal prompt.
    bad = {**cfg, "ssl.key.password": "nope"}
    with pytest.raises(ConfigError, match="ssl.keystore.key: .*wrong ssl.key.password"):
        ClientSecurity.from_config(bad)
    del bad["ssl.key.password"]
    with pytest.raises(ConfigError, match="ssl.keystore.key"):
        ClientSecurity.from_config(bad)


def test_cli_config_files_carry_security_keys_to_the_client(tmp_path: Path):
    f = tmp_path / "client.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                 "required username=\"alice\" password=\"alice-secret\";\n")
    ns = console_producer.build_parser().parse_args(
        ["--bootstrap-server", "h:9", "--topic", "t", "--producer.config", str(f)])
    cfg = resolve("producer", common.client_config(ns, "producer",
                                                   console_producer.producer_overrides(ns)))
    sec = ClientSecurity.from_config(cfg)
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret")
    help_text = console_producer.build_parser().format_help()
    assert "security.protocol" in " ".join(help_text.split())


def test_authentication_errors_are_final_kafka_errors():
    e = AuthenticationError("Authentication failed: Invalid username or password")
    assert isinstance(e, SaslAuthenticationFailedError) and e.code == 58 and not e.retriable
    assert not isinstance(e, ConnectionError)
    t = SslAuthenticationError("certificate verify failed")
    assert isinstance(t, AuthenticationError) and t.name == "SSL_AUTHENTICATION_FAILED"


# ---------------------------------------------------------------- a broker that speaks TLS

Handler = Callable[[int, int, int, Any], Awaitable["bytes | None"]]


def response(api_name: str, version: int, cid: int, body: Any) -> bytes:
    a = api(api_name)
    w = Writer()
    encode_response_header(w, cid, a.response_header_version(version))
    a.encode_response(body, version, w)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


API_KEYS = [{"api_key": 18, "min_version": 0, "max_version": 3},
            {"api_key": 3, "min_version": 0, "max_version": 12},
            {"api_key": 17, "min_version": 0, "max_version": 1},
            {"api_key": 36, "min_version": 0, "max_version": 2}]


def api_versions(version: int, cid: int, api_keys: list[dict[str, int]] = API_KEYS) -> bytes:
    return response("ApiVersions", version, cid, {"error_code": 0, "api_keys": api_keys})


class FakeBroker:
    """An asyncio server speaking Kafka frames (optionally over TLS): each request goes to
    `handler(api_key, version, correlation_id, body)`, ApiVersions is answered unless the
    handler answers it. Records each request's (key, version) and each TLS peer's
    certificate."""

    def __init__(self, handler: Handler | None = None, tls: ssl.SSLContext | None = None,
                 api_keys: list[dict[str, int]] = API_KEYS):
        self.handler = handler
        self.tls = tls
        self.api_keys = api_keys
        self.seen: list[tuple[int, int]] = []
        self.peer_certs: list[Any] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Self:
        self.server = await asyncio.start_server(self._serve, HOST, 0, ssl=self.tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.peer_certs.append(writer.get_extra_info("peercert"))
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                data = await reader.readexactly(size)
                key, version, cid = peek_api(data)
                self.seen.append((key, version))
                a = api(key)
                r = Reader(data)
                decode_request_header(r, a.request_header_version(version))
                body = a.decode_request(r, version)
                out = await self.handler(key, version, cid, body) if self.handler else None
                if out is None and key == 18:
                    out = api_versions(version, cid, self.api_keys)
                if out is None:
                    break
                writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


def server_context(ca: trustme.CA, *names: str, client_ca: trustme.CA | None = None
                   ) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(ctx)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(ctx)
    return ctx


def tls_security(ca: trustme.CA, tmp_path: Path, **extra: str) -> ClientSecurity:
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return ClientSecurity.from_config({"security.protocol": "SSL",
                                       "ssl.truststore.location": str(ca_file), **extra})


def test_tls_round_trip_with_the_host_name_checked(ca: trustme.CA, tmp_path: Path):
    async def main() -> None:
        async with FakeBroker(tls=server_context(ca, "localhost", HOST)) as broker:
            for host in ("localhost", HOST):
                conn = await BrokerConnection.connect(host, broker.port, timeout=5,
                                                      security=tls_security(ca, tmp_path))
                async with conn:
                    assert conn.version_for("Metadata") == 12
                    resp = await conn.request("ApiVersions", {}, version=3)
                    assert resp.error_code == 0
            assert broker.seen == [(18, 4), (18, 3)] * 2    # the handshake at v4, then ours
    asyncio.run(main())


def test_a_certificate_for_another_host_fails_unless_the_check_is_off(ca: trustme.CA,
                                                                        tmp_path: Path):
    async def main() -> None:
        async with FakeBroker(tls=server_context(ca, "broker.example")) as broker:
            with pytest.raises(SslAuthenticationError, match="mismatch, certificate is not valid for .127.0.0.1."):
                await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                               security=tls_security(ca, tmp_path))
            off = tls_security(ca, tmp_path, **{"ssl.endpoint.identification.algorithm": ""})
            async with await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                                      security=off) as conn:
                assert conn.version_for("ApiVersions") == 3
            # An unknown CA fails whatever the host name check says.
            other = tls_security(trustme.CA(), tmp_path,
                                 **{"ssl.endpoint.identification.algorithm": ""})
            with pytest.raises(SslAuthenticationError, match="certificate verify failed|"
                                                             "unable to get local issuer"):
                await BrokerConnection.connect(HOST, broker.port, timeout=5, security=other)
    asyncio.run(main())


def test_the_client_certificate_is_sent_when_configured(ca: trustme.CA, tmp_path: Path):
    client_ca = trustme.CA()
    leaf = client_ca.issue_cert("alice@example.com", common_name="alice")
    key_file, chain_file = tmp_path / "alice.key", tmp_path / "alice.pem"
    leaf.private_key_pem.write_to_path(str(key_file))
    with open(chain_file, "wb") as f:
        for blob in leaf.cert_chain_pems:
            f.write(blob.bytes())
    keystore = tmp_path / "alice-keystore.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(keystore))

    async def main() -> None:
        tls = server_context(ca, HOST, client_ca=client_ca)
        async with FakeBroker(tls=tls) as broker:
            for extra in ({"ssl.keystore.location": str(keystore)},
                          {"ssl.certificate.location": str(chain_file),
                           "ssl.key.location": str(key_file)}):
                sec = tls_security(ca, tmp_path, **extra)
                async with await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                                          security=sec):
                    pass
                subject = dict(x[0] for x in broker.peer_certs[-1]["subject"])
                assert subject["commonName"] == "alice"
            # Without one the broker closes the session after the handshake, sending no
            # alert (asyncio servers do not): retriable, the message names the likely cause.
            with pytest.raises(KafkaConnectionError,
                               match="right after the TLS handshake .*ssl.keystore.location"):
                await BrokerConnection.connect(HOST, broker.port, timeout=5,
                                               security=tls_security(ca, tmp_path))
    asyncio.run(main())


def test_tls_to_a_server_that_drops_the_handshake_is_a_connection_error(ca: trustme.CA,
                                                                          tmp_path: Path):
    """A plaintext port that closes on a TLS hello (a restarting broker looks the same):
    retriable, not an authentication failure."""
    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(10)
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(drop, HOST, 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            with pytest.raises(KafkaConnectionError) as e:
                await BrokerConnection.connect(HOST, port, timeout=5,
                                               security=tls_security(ca, tmp_path))
            assert not isinstance(e.value, AuthenticationError)
    asyncio.run(main())


def test_a_plaintext_client_at_a_tls_listener_is_told_what_it_may_be(ca: trustme.CA):
    async def main() -> None:
        async with FakeBroker(tls=server_context(ca, "localhost", HOST)) as broker:
            with pytest.raises(KafkaConnectionError, match="a TLS listener\\? see security.protocol"):
                await BrokerConnection.connect(HOST, broker.port, timeout=5)
    asyncio.run(main())
