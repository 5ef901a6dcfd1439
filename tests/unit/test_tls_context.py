"""A TLS listener's SSLContext from Kafka's ssl.* keys (broker/security/tls.py). Handshakes
run in memory (ssl.MemoryBIO), with certificates from trustme."""
from __future__ import annotations

import os
import ssl

import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from broker.security import tls
from broker.security.tls import server_ssl_context


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("broker.example", "localhost")


@pytest.fixture(scope="module")
def client_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("client.example", common_name="alice")


@pytest.fixture
def keystore(tmp_path, server_cert) -> str:
    path = tmp_path / "broker.pem"
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def truststore(tmp_path, ca) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def pem_store(keystore: str, **more: object) -> dict[str, object]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore, **more}


def client_context(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if cert is not None:
        cert.configure_cert(ctx)
    return ctx


def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext,
              hostname: str = "broker.example") -> tuple[ssl.SSLObject, ssl.SSLObject]:
    """(server, client) SSLObjects after a TLS handshake through memory; SSLError if the
    server refuses it."""
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, obj in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server judges the client's certificate after the client is done;
            # one more exchange of data lets a refusal surface on the server.
            client.write(b"ping")
            s_in.write(c_out.read())
            assert server.read(4) == b"ping"
            return server, client
    raise AssertionError("handshake did not finish")


# ------------------------------------------------------------------ key stores

def test_pem_keystore_file_serves_tls(ca, keystore):
    server, client = handshake(server_ssl_context(pem_store(keystore)), client_context(ca))
    assert client.version() == "TLSv1.3"
    assert server.getpeercert(binary_form=True) is None      # ssl.client.auth=none


def test_inline_key_and_chain_are_loaded_from_a_private_file_then_removed(
        ca, server_cert, monkeypatch):
    seen: list[tuple[str, int]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self, certfile, keyfile=None, password=None):
        seen.append((certfile, os.stat(certfile).st_mode & 0o777))
        return original(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    ctx = server_ssl_context({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": server_cert.private_key_pem.bytes().decode(),
        "ssl.keystore.certificate.chain": "".join(p.bytes().decode()
                                                  for p in server_cert.cert_chain_pems),
    })
    monkeypatch.undo()
    [(path, mode)] = seen
    assert mode == 0o600 and not os.path.exists(path)
    handshake(ctx, client_context(ca))


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12", None])
def test_only_pem_keystores(keystore, store_type):
    # An absent type is Kafka's default, JKS.
    with pytest.raises(ValueError, match=r"^ssl\.keystore\.type: .*PEM.*KIP-651"):
        server_ssl_context({"ssl.keystore.type": store_type, "ssl.keystore.location": keystore})


@pytest.mark.parametrize("settings, key", [
    ({}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/broker.pem"},
     "ssl.keystore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "x"}, "ssl.keystore.key"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "x"},
     "ssl.keystore.certificate.chain"),
])
def test_keystore_mistakes_name_the_key(settings, key):
    with pytest.raises(ValueError, match=rf"^{key.replace('.', '[.]')}: "):
        server_ssl_context(settings)


def test_keystore_password_is_refused_for_pem(keystore):
    with pytest.raises(ValueError, match=r"^ssl\.keystore\.password: .*ssl\.key\.password"):
        server_ssl_context(pem_store(keystore, **{"ssl.keystore.password": "secret"}))


def test_location_and_inline_key_together_are_refused(keystore, server_cert):
    with pytest.raises(ValueError, match=r"^ssl\.keystore\.key: .*both"):
        server_ssl_context(pem_store(keystore, **{
            "ssl.keystore.key": server_cert.private_key_pem.bytes().decode(),
            "ssl.keystore.certificate.chain": server_cert.cert_chain_pems[0].bytes().decode()}))


def test_not_a_pem_file(tmp_path):
    path = tmp_path / "broker.pem"
    path.write_text("hello\n")
    with pytest.raises(ValueError, match=r"^ssl\.keystore\.location: cannot load"):
        server_ssl_context(pem_store(str(path)))


@pytest.fixture
def encrypted_keystore(tmp_path, server_cert) -> str:
    key = serialization.load_pem_private_key(server_cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-secret"))
    path = tmp_path / "encrypted.pem"
    path.write_bytes(encrypted + b"".join(p.bytes() for p in server_cert.cert_chain_pems))
    return str(path)


def test_encrypted_key_with_its_password(ca, encrypted_keystore):
    ctx = server_ssl_context(pem_store(encrypted_keystore, **{"ssl.key.password": "key-secret"}))
    handshake(ctx, client_context(ca))


@pytest.mark.parametrize("password", ["wrong", None])
def test_encrypted_key_with_a_wrong_or_no_password_never_prompts(encrypted_keystore, password):
    with pytest.raises(ValueError, match=r"^ssl\.key\.password: "):
        server_ssl_context(pem_store(encrypted_keystore, **{"ssl.key.password": password}))


def test_errors_name_the_listener_key_that_set_the_value():
    with pytest.raises(ValueError, match=r"^listener\.name\.secure\.ssl\.keystore\.type: "):
        server_ssl_context({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x"},
                           {"ssl.keystore.type": "listener.name.secure.ssl.keystore.type"})


# ------------------------------------------------------------------ client certificates

@pytest.mark.parametrize("auth", ["required", "REQUIRED", "requested"])
def test_client_certificate_is_verified_against_the_truststore(ca, keystore, truststore,
                                                               client_cert, auth):
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.client.auth": auth, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": truststore}))
    server, _ = handshake(ctx, client_context(ca, client_cert))
    assert server.getpeercert(binary_form=True) is not None


def test_required_refuses_a_client_without_a_certificate(ca, keystore, truststore):
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": truststore}))
    with pytest.raises(ssl.SSLError):
        handshake(ctx, client_context(ca))


def test_requested_lets_a_client_without_a_certificate_in(ca, keystore, truststore):
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.client.auth": "requested", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": truststore}))
    server, _ = handshake(ctx, client_context(ca))
    assert server.getpeercert(binary_form=True) is None


def test_a_certificate_from_another_ca_is_refused(ca, keystore, truststore):
    stranger = trustme.CA().issue_cert("client.example", common_name="mallory")
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": truststore}))
    with pytest.raises(ssl.SSLError):
        handshake(ctx, client_context(ca, stranger))


def test_inline_trusted_certificates(ca, keystore, client_cert):
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": ca.cert_pem.bytes().decode()}))
    server, _ = handshake(ctx, client_context(ca, client_cert))
    assert server.getpeercert(binary_form=True) is not None


@pytest.mark.parametrize("more, key", [
    ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x"}, "ssl.truststore.type"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/x",
      "ssl.truststore.password": "p"}, "ssl.truststore.password"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/x",
      "ssl.truststore.certificates": "y"}, "ssl.truststore.certificates"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "not a certificate"},
     "ssl.truststore.certificates"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent/ca.pem"},
     "ssl.truststore.location"),
])
def test_truststore_mistakes_name_the_key(keystore, more, key):
    with pytest.raises(ValueError, match=rf"^{key.replace('.', '[.]')}: "):
        server_ssl_context(pem_store(keystore, **{"ssl.client.auth": "required", **more}))


def test_unknown_client_auth(keystore):
    with pytest.raises(ValueError, match=r"^ssl\.client\.auth: 'sometimes'"):
        server_ssl_context(pem_store(keystore, **{"ssl.client.auth": "sometimes"}))


# ------------------------------------------------------------------ protocols and ciphers

@pytest.mark.parametrize("settings, version", [
    ({"ssl.enabled.protocols": ["TLSv1.2"]}, "TLSv1.2"),
    ({"ssl.enabled.protocols": "TLSv1.2, TLSv1.3"}, "TLSv1.3"),
    ({"ssl.enabled.protocols": ["TLSv1.3"]}, "TLSv1.3"),
    ({"ssl.protocol": "TLSv1.2"}, "TLSv1.2"),
    ({"ssl.protocol": "TLS"}, "TLSv1.3"),
])
def test_protocol_versions(ca, keystore, settings, version):
    _, client = handshake(server_ssl_context(pem_store(keystore, **settings)), client_context(ca))
    assert client.version() == version


@pytest.mark.parametrize("settings, key", [
    ({"ssl.enabled.protocols": ["TLSv1.1", "TLSv1.2"]}, "ssl.enabled.protocols"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
])
def test_old_protocols_are_refused(keystore, settings, key):
    with pytest.raises(ValueError, match=rf"^{key.replace('.', '[.]')}: "):
        server_ssl_context(pem_store(keystore, **settings))


def test_tls12_only_context_refuses_a_tls13_only_client(ca, keystore):
    ctx = server_ssl_context(pem_store(keystore, **{"ssl.enabled.protocols": "TLSv1.2"}))
    client = client_context(ca)
    client.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises(ssl.SSLError):
        handshake(ctx, client)


@pytest.mark.parametrize("suite", ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                                   "ECDHE-ECDSA-CHACHA20-POLY1305"])
def test_cipher_suites_in_kafkas_or_openssls_names(ca, keystore, suite):
    ctx = server_ssl_context(pem_store(keystore, **{
        "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": [suite]}))
    _, client = handshake(ctx, client_context(ca))
    cipher = client.cipher()
    assert cipher is not None
    assert cipher[0] == tls.IANA_TO_OPENSSL.get(suite, suite)


def test_only_tls13_suites_means_tls13_only(ca, keystore):
    ctx = server_ssl_context(pem_store(keystore, **{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    _, client = handshake(ctx, client_context(ca))
    assert client.version() == "TLSv1.3"


def test_unknown_cipher_suite(keystore):
    with pytest.raises(ValueError, match=r"^ssl\.cipher\.suites: .*TLS_MADE_UP_SUITE"):
        server_ssl_context(pem_store(keystore, **{
            "ssl.cipher.suites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_MADE_UP_SUITE"]}))


def test_every_kafka_suite_name_is_known_to_openssl():
    for iana, openssl_name in tls.IANA_TO_OPENSSL.items():
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            probe.set_ciphers(openssl_name)
        except ssl.SSLError:
            pytest.fail(f"{iana} -> {openssl_name} is not an OpenSSL cipher here")


def test_key_of_another_certificate_is_refused(ca, server_cert):
    other = ca.issue_cert("other.example")
    with pytest.raises(ValueError, match=r"^ssl\.keystore\.key: cannot load .*KEY_VALUES_MISMATCH"):
        server_ssl_context({
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": other.private_key_pem.bytes().decode(),
            "ssl.keystore.certificate.chain": server_cert.cert_chain_pems[0].bytes().decode()})
