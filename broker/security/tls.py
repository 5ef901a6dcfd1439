"""A TLS listener's `ssl.SSLContext`, from Kafka's `ssl.*` keys (KIP-651's PEM key stores).

strom reads PEM only: `ssl.keystore.type=PEM` with either `ssl.keystore.location` (one file
holding the private key and the certificate chain) or the inline `ssl.keystore.key` and
`ssl.keystore.certificate.chain`; `ssl.key.password` decrypts an encrypted key. Trusted
certificates (for client certificates) come from `ssl.truststore.type=PEM` with
`ssl.truststore.location` or the inline `ssl.truststore.certificates`, else from the
system's store, as Kafka falls back on the JVM's. `ssl.client.auth` required / requested /
none, `ssl.enabled.protocols` (or `ssl.protocol`), TLSv1.2 and TLSv1.3, and
`ssl.cipher.suites` in Kafka's (IANA) names or OpenSSL's.

Every mistake is a ValueError naming the key, so the broker refuses to start with one line.
"""
from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from typing import Iterator, Mapping

__all__ = ["server_ssl_context", "TLS_VERSIONS", "IANA_TO_OPENSSL"]

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {"TLSv1.2": ssl.TLSVersion.TLSv1_2,
                                           "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                "none": ssl.CERT_NONE}
# TLS 1.3 suites: OpenSSL always offers its own; Python's ssl cannot narrow them.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})
# The TLS 1.2 suites Java names as IANA does, in OpenSSL's names (which set_ciphers takes).
IANA_TO_OPENSSL: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}


class _Settings:
    """The ssl.* values, unset ones (None, "", []) as None; errors name the key the user
    set (`names`: e.g. ssl.keystore.location -> listener.name.ssl.ssl.keystore.location)."""

    def __init__(self, values: Mapping[str, object], names: Mapping[str, str]):
        self._values = values
        self._names = names

    def text(self, key: str) -> str | None:
        v = self._values.get(key)
        if v is None:
            return None
        if isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v)
        s = str(v)
        return s if s.strip() else None

    def items(self, key: str) -> list[str]:
        v = self._values.get(key)
        if v is None:
            return []
        parts = v if isinstance(v, (list, tuple)) else str(v).split(",")
        return [str(p).strip() for p in parts if str(p).strip()]

    def error(self, key: str, message: str) -> ValueError:
        return ValueError(f"{self._names.get(key, key)}: {message}")


def server_ssl_context(settings: Mapping[str, object],
                       key_names: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The SSLContext a TLS listener serves with, from its `ssl.*` values (unset keys may be
    absent or None; lists as lists or comma-separated text). `key_names` maps a key to the
    name to give in errors (a `listener.name.<l>.` key that set it). ValueError naming the
    key for anything strom cannot serve as configured."""
    s = _Settings(settings, key_names or {})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, s)
    _load_key_store(ctx, s)
    verify = _client_auth(s)
    if verify != ssl.CERT_NONE:
        _load_trust_store(ctx, s)
    ctx.verify_mode = verify
    _set_ciphers(ctx, s)
    return ctx


def _require_pem(s: _Settings, type_key: str, what: str) -> None:
    # Kafka's default store type is JKS, so an absent type is JKS too.
    store_type = (s.text(type_key) or "JKS").strip()
    if store_type.upper() != "PEM":
        raise s.error(type_key, f"{store_type} {what}s are not supported: strom reads PEM only "
                                f"(KIP-651); set {type_key}=PEM and give PEM files or values")


def _load_key_store(ctx: ssl.SSLContext, s: _Settings) -> None:
    location = s.text("ssl.keystore.location")
    key = s.text("ssl.keystore.key")
    chain = s.text("ssl.keystore.certificate.chain")
    if key is None and chain is None and location is None:
        raise s.error("ssl.keystore.location", "a TLS listener needs its certificate and private "
                                               "key: set ssl.keystore.location (a PEM file) or "
                                               "ssl.keystore.key and ssl.keystore.certificate.chain")
    _require_pem(s, "ssl.keystore.type", "key store")
    if s.text("ssl.keystore.password") is not None:
        raise s.error("ssl.keystore.password", "a PEM key store has no password; only "
                                               "ssl.key.password (of an encrypted key) may be set")
    password = s.text("ssl.key.password")
    if key is not None or chain is not None:
        if key is None:
            raise s.error("ssl.keystore.certificate.chain",
                          "is set but ssl.keystore.key (the private key) is not")
        if chain is None:
            raise s.error("ssl.keystore.key", "is set but ssl.keystore.certificate.chain is not")
        if location is not None:
            raise s.error("ssl.keystore.key", "ssl.keystore.location and an inline key are both set")
        with _private_pem_file(key.strip() + "\n" + chain.strip() + "\n") as path:
            _load_cert_chain(ctx, s, path, password, "ssl.keystore.key", _encrypted(key))
        return
    assert location is not None
    try:
        with open(location, encoding="utf-8", errors="replace") as f:
            encrypted = _encrypted(f.read())
    except OSError as e:
        raise s.error("ssl.keystore.location", f"cannot read the key store: {e}") from None
    _load_cert_chain(ctx, s, location, password, "ssl.keystore.location", encrypted)


def _encrypted(pem: str) -> bool:
    """Whether a PEM private key is encrypted (PKCS#8, or OpenSSL's legacy header)."""
    return "BEGIN ENCRYPTED PRIVATE KEY" in pem or "Proc-Type: 4,ENCRYPTED" in pem


def _load_cert_chain(ctx: ssl.SSLContext, s: _Settings, path: str, password: str | None,
                     key: str, encrypted: bool) -> None:
    # A callable password: without one, OpenSSL would prompt on the terminal for an
    # encrypted key.
    def key_password() -> bytes:
        return password.encode("utf-8") if password is not None else b""
    try:
        ctx.load_cert_chain(path, password=key_password)
    except ssl.SSLError as e:
        if encrypted and e.reason != "KEY_VALUES_MISMATCH":
            raise s.error("ssl.key.password", "cannot decrypt the private key: the password is "
                                              + ("wrong" if password is not None else "not set")) \
                from None
        raise s.error(key, f"cannot load the private key and certificate chain: {e.reason or e}") \
            from None


def _load_trust_store(ctx: ssl.SSLContext, s: _Settings) -> None:
    location = s.text("ssl.truststore.location")
    certificates = s.text("ssl.truststore.certificates")
    if location is None and certificates is None:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    _require_pem(s, "ssl.truststore.type", "trust store")
    if s.text("ssl.truststore.password") is not None:
        raise s.error("ssl.truststore.password", "a PEM trust store has no password")
    if location is not None and certificates is not None:
        raise s.error("ssl.truststore.certificates",
                      "ssl.truststore.location and inline certificates are both set")
    try:
        if certificates is not None:
            ctx.load_verify_locations(cadata=certificates)
        else:
            ctx.load_verify_locations(cafile=location)
    except (ssl.SSLError, ValueError) as e:
        key = "ssl.truststore.certificates" if certificates is not None else "ssl.truststore.location"
        raise s.error(key, f"no PEM certificate could be loaded: {e}") from None
    except OSError as e:
        raise s.error("ssl.truststore.location", f"cannot read the trust store: {e}") from None


def _client_auth(s: _Settings) -> ssl.VerifyMode:
    value = (s.text("ssl.client.auth") or "none").strip().lower()
    try:
        return _CLIENT_AUTH[value]
    except KeyError:
        raise s.error("ssl.client.auth", f"{value!r} is not one of required, requested, none") \
            from None


def _set_versions(ctx: ssl.SSLContext, s: _Settings) -> None:
    enabled = s.items("ssl.enabled.protocols")
    if enabled:
        for name in enabled:
            if name not in TLS_VERSIONS:
                raise s.error("ssl.enabled.protocols", f"{name} is not served by strom "
                                                       f"(use {', '.join(TLS_VERSIONS)})")
        versions = sorted(TLS_VERSIONS[n] for n in enabled)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
        return
    protocol = (s.text("ssl.protocol") or "TLSv1.3").strip()
    if protocol in ("TLS", "TLSv1.3"):
        ctx.minimum_version, ctx.maximum_version = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
    elif protocol == "TLSv1.2":
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    else:
        raise s.error("ssl.protocol", f"{protocol} is not served by strom (use TLSv1.2 or TLSv1.3)")


def _set_ciphers(ctx: ssl.SSLContext, s: _Settings) -> None:
    suites = s.items("ssl.cipher.suites")
    if not suites:
        return
    tls12: list[str] = []
    for name in suites:
        if name in _TLS13_SUITES:
            continue
        openssl_name = IANA_TO_OPENSSL.get(name, name)
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            probe.set_ciphers(openssl_name)
        except ssl.SSLError:
            raise s.error("ssl.cipher.suites", f"unknown or unavailable cipher suite {name}") \
                from None
        tls12.append(openssl_name)
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    elif ctx.maximum_version == ssl.TLSVersion.TLSv1_2:
        raise s.error("ssl.cipher.suites", "lists only TLS 1.3 suites but TLS 1.3 is not enabled")
    else:
        # Only TLS 1.3 suites: TLS 1.2 would have none left, as in Java.
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3


@contextlib.contextmanager
def _private_pem_file(text: str) -> Iterator[str]:
    """A file only this user may read, holding `text`, removed on exit: Python's ssl loads
    keys from files only."""
    fd, path = tempfile.mkstemp(prefix="strom-key-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
