"""The broker's side of SASL (sans-io): which mechanisms a listener offers, and one exchange
of tokens per connection, as Kafka's SaslServerAuthenticator drives PlainSaslServer and
ScramSaslServer.

    exchange = sasl.start("SASL_PLAINTEXT", "SCRAM-SHA-256")   # after SaslHandshake
    challenge = exchange.step(token)                            # each SaslAuthenticate
    if exchange.complete: principal = exchange.principal        # "User:alice"

PLAIN (RFC 4616) checks a password against the listener's JAAS users (`user_<name>="pw"`).
SCRAM-SHA-256/512 (RFC 5802, 7677) runs scramp's server against the credentials the
metadata store holds for the user (Kafka's /config/users/<user>).

A failure raises `SaslAuthenticationError` whose message is what Kafka tells the client:
its own text where Kafka's servers raise SaslAuthenticationException, and the generic
"Authentication failed during authentication due to invalid credentials with SASL mechanism
<m>" where they raise a SaslException (which must not reveal whether the user exists).
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from scramp import ScramException, ScramMechanism  # type: ignore[import-untyped]

from clients.jaas import JaasEntry, parse_jaas_config

from .scram import MECHANISMS as SCRAM_MECHANISMS, MIN_ITERATIONS, ScramCredential

__all__ = ["SaslAuthenticationError", "SaslExchange", "ListenerSasl", "SaslServer",
           "PlainExchange", "ScramExchange", "SUPPORTED_MECHANISMS", "plain_users_from_jaas",
           "client_credentials_from_jaas"]

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS: tuple[str, ...] = (PLAIN, *SCRAM_MECHANISMS)
_USER_PREFIX = "user_"


class SaslAuthenticationError(Exception):
    """The exchange failed; `message` is the text for SaslAuthenticate's error_message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def invalid_credentials(mechanism: str) -> SaslAuthenticationError:
    """Kafka's answer to a SaslException: says nothing of what was wrong."""
    return SaslAuthenticationError("Authentication failed during authentication due to invalid "
                                   f"credentials with SASL mechanism {mechanism}")


class SaslExchange(Protocol):
    """One connection's exchange of SASL tokens. Not thread-safe; one per connection."""

    mechanism: str

    @property
    def complete(self) -> bool:
        """True once the client is authenticated."""
        ...

    @property
    def principal(self) -> str:
        """"User:<name>" once complete."""
        ...

    def step(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; SaslAuthenticationError when the
        client is not who it says (the exchange is then over)."""
        ...


class PlainExchange:
    """SASL/PLAIN: one token `authzid NUL authcid NUL passwd`, checked against `users`
    (name -> password). Kafka's PlainSaslServer."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]):
        self._users = users
        self._user: str | None = None
        self._stepped = False

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def principal(self) -> str:
        if self._user is None:
            raise RuntimeError("SASL/PLAIN exchange has not completed")
        return f"User:{self._user}"

    def step(self, token: bytes) -> bytes:
        if self._stepped:           # PLAIN is one token: a second is never right
            raise invalid_credentials(PLAIN)
        self._stepped = True
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise invalid_credentials(PLAIN) from None
        # Kafka reads three fields, missing ones empty, anything after a third NUL ignored.
        parts = text.split("\0")
        authzid, username, password = (parts + ["", ""])[:3]
        if not username or not password:
            raise invalid_credentials(PLAIN)
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(password.encode("utf-8"),
                                                        expected.encode("utf-8")):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self._user = username
        return b""


class ScramExchange:
    """SASL/SCRAM-SHA-256 or -512: client-first -> server-first, client-final -> server-final,
    run by scramp's server. `credential(user)` is the user's stored credential for this
    mechanism, or None. Kafka's ScramSaslServer.

    scramp differs from Kafka in three corners, each failing authentication: a GS2
    authorization id (Kafka accepts one equal to the user name; clients send none), a
    stored salt shorter than 12 bytes, and user names that SASLprep changes or refuses."""

    def __init__(self, mechanism: str, credential: Callable[[str], ScramCredential | None]):
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._credential = credential
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._stage = 0          # 0: expect client-first, 1: client-final, 2: complete, -1: failed
        self._user: str | None = None

    def _accept_legacy_nonce(self, client_final: str) -> None:
        """librdkafka before 2.6.1 (Debian's kcat has 2.0.2) sends its own nonce twice in
        client-final (`r=<cnonce><cnonce><snonce>`); Kafka 3.x accepts a final nonce that
        ends with the server's (ScramSaslServer, CVE-2024-56128's fix). The proof is then
        checked by scramp over the message as sent, as Kafka checks it."""
        nonce = next((part[2:] for part in client_final.split(",") if part.startswith("r=")), None)
        expected = self._server.nonce       # a str, or scramp 1.5's Nonce (str() gives it)
        if nonce is not None and nonce != str(expected) and nonce.endswith(str(expected)):
            self._server.nonce = nonce if isinstance(expected, str) else type(expected)(nonce)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        cred = self._credential(user)
        if cred is None or cred.iterations < MIN_ITERATIONS:
            return None
        self._user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    @property
    def complete(self) -> bool:
        return self._stage == 2

    @property
    def principal(self) -> str:
        if self._stage != 2 or self._user is None:
            raise RuntimeError(f"SASL/{self.mechanism} exchange has not completed")
        return f"User:{self._user}"

    def step(self, token: bytes) -> bytes:
        if self._stage not in (0, 1):       # complete, or failed: nothing more to say
            raise invalid_credentials(self.mechanism)
        stage, self._stage = self._stage, -1      # failed unless it gets through
        try:
            message = bytes(token).decode("utf-8")
            if stage == 0:
                self._server.set_client_first(message)
                answer: str = self._server.get_server_first()
                self._stage = 1
            else:
                self._accept_legacy_nonce(message)
                self._server.set_client_final(message)
                answer = self._server.get_server_final()
                self._stage = 2
        except (ScramException, UnicodeDecodeError):
            raise invalid_credentials(self.mechanism) from None
        return answer.encode("utf-8")


@dataclass(frozen=True)
class ListenerSasl:
    """One listener's SASL settings: its enabled mechanisms (`sasl.enabled.mechanisms`, in
    order) and its PLAIN users (from `listener.name.<l>.plain.sasl.jaas.config`)."""

    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)


class SaslServer:
    """The broker's SASL mechanisms, per listener name. `credentials(user)` gives a user's
    SCRAM credentials (mechanism -> Kafka's credential string), read at each exchange so a
    change in the store holds for the next login (the broker passes
    store.user_scram_credentials)."""

    def __init__(self, listeners: Mapping[str, ListenerSasl],
                 credentials: Callable[[str], Mapping[str, str]]):
        for name, settings in listeners.items():
            for m in settings.mechanisms:
                if m not in SUPPORTED_MECHANISMS:
                    raise ValueError(f"listener {name}: SASL mechanism {m!r} is not supported "
                                     f"(strom supports {', '.join(SUPPORTED_MECHANISMS)})")
        self._listeners = dict(listeners)
        self._credentials = credentials

    def mechanisms(self, listener: str) -> list[str]:
        """The mechanisms `listener` offers; [] for a listener without SASL."""
        settings = self._listeners.get(listener)
        return list(settings.mechanisms) if settings is not None else []

    def start(self, listener: str, mechanism: str) -> SaslExchange:
        """A new exchange; ValueError if `listener` does not offer `mechanism`."""
        settings = self._listeners.get(listener)
        if settings is None or mechanism not in settings.mechanisms:
            raise ValueError(f"listener {listener} does not offer SASL mechanism {mechanism!r}")
        if mechanism == PLAIN:
            return PlainExchange(settings.plain_users)
        return ScramExchange(mechanism, lambda user: self._scram_credential(user, mechanism))

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._credentials(user).get(mechanism)
        return ScramCredential.parse(text) if text is not None else None


def plain_users_from_jaas(text: str) -> dict[str, str]:
    """The PLAIN users of a broker's JAAS entry: every `user_<name>="<password>"` option
    (Kafka's PlainServerCallbackHandler). ValueError for text that is not one JAAS entry."""
    entry = parse_jaas_config(text)
    return {key[len(_USER_PREFIX):]: value for key, value in entry.options.items()
            if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)}


def client_credentials_from_jaas(text: str) -> tuple[str, str]:
    """(username, password) of a PlainLoginModule or ScramLoginModule entry: who a client,
    or the broker towards other brokers, logs in as. ValueError naming what is missing."""
    entry: JaasEntry = parse_jaas_config(text)
    missing = [k for k in ("username", "password") if k not in entry.options]
    if missing:
        raise ValueError(f"JAAS config of {entry.login_module} has no "
                         f"{' or '.join(missing)} option")
    return entry.options["username"], entry.options["password"]
