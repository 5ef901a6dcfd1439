"""How a client secures its connections: TLS and SASL, from Kafka's client keys.

`ClientSecurity.from_config(config)` reads the security keys of a client config (see
`clients.config.security_settings` for the keys and their rules) and returns what
`BrokerConnection.connect(..., security=)` uses: the protocol, a ready `ssl.SSLContext` for
SSL and SASL_SSL, and the SASL mechanism with its credentials for SASL_PLAINTEXT and
SASL_SSL. The context is built once per client and shared by its connections. Certificates
and keys are read as PEM (files, or inline PEM text); reading happens in `from_config`, so a
missing file or a wrong key password is a ConfigError naming the key at client creation.

`AuthenticationError` is what a failed authentication raises (the broker refused the
credentials, the mechanism is not enabled, or the broker's certificate did not verify). It is
final, as Kafka's AuthenticationException is: callers do not retry it as a lost connection.
"""
from __future__ import annotations

import os
import ssl
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clients.config import ConfigError, security_settings
from clients.protocol.errors import KafkaError, SaslAuthenticationFailedError

__all__ = ["ClientSecurity", "PLAINTEXT", "AuthenticationError", "SslAuthenticationError"]

if TYPE_CHECKING:
    _SaslFailed = KafkaError
else:  # the error table's class for SASL_AUTHENTICATION_FAILED (58), built at run time
    _SaslFailed = SaslAuthenticationFailedError


class AuthenticationError(_SaslFailed):
    """Authentication with a broker failed; the message says why (the broker's own message
    for refused credentials). Not retriable: a wrong password stays wrong. A subclass of the
    error table's SaslAuthenticationFailedError (code 58)."""

    retriable = False


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate did not verify (unknown CA, host
    name mismatch), the broker refused this client's certificate, or no TLS version is
    common (Kafka's SslAuthenticationException)."""

    name = "SSL_AUTHENTICATION_FAILED"


_TLS_VERSION = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class ClientSecurity:
    """The security of a client's connections. `PLAINTEXT` is the default (none)."""

    protocol: str = "PLAINTEXT"                 # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    ssl_context: ssl.SSLContext | None = None   # set for SSL and SASL_SSL
    check_hostname: bool = False                # the context checks the broker's host name
    sasl_mechanism: str | None = None           # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.uses_tls and self.ssl_context is None:
            raise ValueError(f"{self.protocol} needs an ssl_context")
        if self.uses_sasl and (not self.sasl_mechanism or not self.username
                               or self.password is None):
            raise ValueError(f"{self.protocol} needs a SASL mechanism, username and password")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "ClientSecurity":
        """The security a client config asks for (Kafka's key names; any other keys are
        ignored). Raises ConfigError naming the key when a setting is invalid, a file cannot
        be read, or a key or certificate is not PEM."""
        s = security_settings(config)
        protocol = s["security.protocol"]
        if protocol == "PLAINTEXT":
            return PLAINTEXT
        context = ssl_context(s) if protocol in ("SSL", "SASL_SSL") else None
        sasl = protocol.startswith("SASL_")
        return cls(protocol=protocol, ssl_context=context,
                   check_hostname=context is not None and context.check_hostname,
                   sasl_mechanism=s["sasl.mechanism"] if sasl else None,
                   username=s["sasl.username"] if sasl else None,
                   password=s["sasl.password"] if sasl else None)


PLAINTEXT = ClientSecurity()


# ---------------------------------------------------------------- the TLS context

def ssl_context(s: Mapping[str, Any]) -> ssl.SSLContext:
    """A client TLS context from checked settings (`security_settings`' output)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    verify = bool(s["enable.ssl.certificate.verification"])
    ctx.check_hostname = (verify and bool(s["ssl.check.hostname"])
                          and s["ssl.endpoint.identification.algorithm"] == "https")
    if not verify:
        ctx.verify_mode = ssl.CERT_NONE
    versions = sorted(_TLS_VERSION[v] for v in s["ssl.enabled.protocols"])
    highest = versions[-1]
    if s["ssl.protocol"] != "TLS":
        highest = min(highest, _TLS_VERSION[s["ssl.protocol"]])
    if versions[0] > highest:
        raise ConfigError(f"ssl.enabled.protocols: none of {', '.join(s['ssl.enabled.protocols'])}"
                          f" is at most ssl.protocol={s['ssl.protocol']}", "ssl.enabled.protocols")
    ctx.minimum_version, ctx.maximum_version = versions[0], highest
    _load_trust(ctx, s)
    _load_client_certificate(ctx, s)
    return ctx


def _load_trust(ctx: ssl.SSLContext, s: Mapping[str, Any]) -> None:
    loaded = False
    for key in ("ssl.truststore.location", "ssl.ca.location"):
        path = s[key]
        if not path:
            continue
        loaded = True
        if key == "ssl.ca.location" and path == "probe":
            ctx.load_default_certs()
        elif os.path.isdir(path):
            _loading(key, path, lambda: ctx.load_verify_locations(capath=path))
        else:
            _loading(key, path, lambda: ctx.load_verify_locations(cafile=path))
    for key in ("ssl.truststore.certificates", "ssl.ca.pem"):
        text = s[key]
        if text:
            loaded = True
            _loading(key, None, lambda: ctx.load_verify_locations(cadata=_pem_text(text)))
    if not loaded:
        ctx.load_default_certs()   # as Kafka uses the JVM's default truststore


def _load_client_certificate(ctx: ssl.SSLContext, s: Mapping[str, Any]) -> None:
    password = s["ssl.key.password"] or s["ssl.keystore.password"]
    # An encrypted key without a password must fail, never prompt on the terminal.
    secret: str | Callable[[], str] = password if password is not None else (lambda: "")
    if s["ssl.keystore.location"]:
        path = s["ssl.keystore.location"]
        _loading("ssl.keystore.location", path,
                 lambda: ctx.load_cert_chain(path, password=secret))
    elif s["ssl.certificate.location"]:
        cert, key = s["ssl.certificate.location"], s["ssl.key.location"]
        _loading("ssl.certificate.location" if not key else "ssl.key.location", key or cert,
                 lambda: ctx.load_cert_chain(cert, key or None, password=secret))
    elif s["ssl.keystore.key"]:
        _load_inline(ctx, "ssl.keystore.key", s["ssl.keystore.certificate.chain"],
                     s["ssl.keystore.key"], secret)
    elif s["ssl.certificate.pem"]:
        _load_inline(ctx, "ssl.key.pem" if s["ssl.key.pem"] else "ssl.certificate.pem",
                     s["ssl.certificate.pem"], s["ssl.key.pem"], secret)


def _load_inline(ctx: ssl.SSLContext, key_name: str, chain: str, key: str | None,
                 secret: str | Callable[[], str]) -> None:
    # OpenSSL loads a key only from a file: write both to a private directory, load, delete.
    with tempfile.TemporaryDirectory(prefix="strom-tls-") as tmp:
        cert_path = os.path.join(tmp, "chain.pem")
        key_path = os.path.join(tmp, "key.pem") if key else None
        for path, text in ((cert_path, chain), (key_path, key)):
            if path is not None and text is not None:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(_pem_text(text))
        _loading(key_name, None, lambda: ctx.load_cert_chain(cert_path, key_path, password=secret))


def _pem_text(text: str) -> str:
    # An inline PEM value in a .properties file is one line (continuation lines are joined
    # without breaks): put back the breaks OpenSSL wants, 64 base64 characters a line.
    text = text.strip()
    if "\n" in text:
        return text + "\n"
    out: list[str] = []
    rest = text
    while "-----BEGIN " in rest:
        _, _, rest = rest.partition("-----BEGIN ")
        label, _, rest = rest.partition("-----")
        body, _, rest = rest.partition(f"-----END {label}-----")
        b64 = "".join(body.split())
        out += [f"-----BEGIN {label}-----", *(b64[i:i + 64] for i in range(0, len(b64), 64)),
                f"-----END {label}-----"]
    return "\n".join(out) + "\n" if out else text


def _loading(key: str, path: str | None, load: Callable[[], None]) -> None:
    """Run `load`, turning its errors into a ConfigError naming `key`."""
    try:
        load()
    except FileNotFoundError:
        raise ConfigError(f"{key}: {path}: no such file", key) from None
    except ssl.SSLError as e:
        what = f"{path}: " if path else ""
        raise ConfigError(f"{key}: {what}not a usable PEM certificate or key, or a wrong "
                          f"ssl.key.password ({e.reason or e})", key) from None
    except OSError as e:
        raise ConfigError(f"{key}: cannot read {path}: {e.strerror or e}", key) from None
