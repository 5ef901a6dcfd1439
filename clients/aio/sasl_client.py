"""The client side of SASL mechanisms, sans-io: tokens in, tokens out.

A `SaslMechanismClient` makes the first token (`first_token()`), then answers each token the
broker sends back (`respond(challenge)`) until it returns None: the exchange is complete and
the broker proved itself where the mechanism allows it (SCRAM's server signature). Kafka
carries the tokens in SaslAuthenticate requests (`BrokerConnection` does the I/O).

- PLAIN (RFC 4616): one token, `authzid NUL username NUL password`, with an empty authzid as
  Kafka's clients send it; the broker's answer is empty.
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, 7677): client-first, server-first, client-final,
  server-final, computed by the `scramp` package (never by hand here).

A malformed or wrong answer from the broker raises `AuthenticationError`.
"""
from __future__ import annotations

from typing import Any, Protocol

import scramp  # type: ignore[import-untyped, unused-ignore]

from .security import AuthenticationError

__all__ = ["SaslMechanismClient", "PlainClient", "ScramClient", "mechanism_client"]


class SaslMechanismClient(Protocol):
    mechanism: str

    def first_token(self) -> bytes:
        """The token that opens the exchange."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The answer to the broker's token; None when the exchange is complete."""
        ...


class PlainClient:
    """SASL PLAIN: the credentials in one token."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = ""):
        if "\0" in username or "\0" in password or "\0" in authzid:
            raise ValueError("PLAIN credentials cannot contain NUL")
        self._token = f"{authzid}\0{username}\0{password}".encode()
        self._sent = False

    def first_token(self) -> bytes:
        self._sent = True
        return self._token

    def respond(self, challenge: bytes) -> bytes | None:
        if not self._sent:
            raise AuthenticationError("PLAIN: the broker answered before the client spoke")
        return None


class ScramClient:
    """SASL SCRAM-SHA-256 or SCRAM-SHA-512 over scramp's client. `nonce` is for tests."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None):
        self.mechanism = mechanism
        try:
            self._scram: Any = scramp.ScramClient([mechanism], username, password,
                                                  c_nonce=nonce)
        except scramp.ScramException as e:   # a user name SASLprep refuses, ...
            raise AuthenticationError(f"{mechanism}: {e}") from None
        self._step = 0

    def first_token(self) -> bytes:
        self._step = 1
        return str(self._scram.get_client_first()).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        step, self._step = self._step, self._step + 1
        try:
            text = challenge.decode()
            if step == 1:
                self._scram.set_server_first(text)
                return str(self._scram.get_client_final()).encode()
            if step == 2:
                self._scram.set_server_final(text)   # checks the server's signature
                return None
        except UnicodeDecodeError:
            raise AuthenticationError(f"{self.mechanism}: the broker's answer is not "
                                      f"UTF-8") from None
        except scramp.ScramException as e:
            raise AuthenticationError(f"{self.mechanism}: {e}") from None
        raise AuthenticationError(f"{self.mechanism}: unexpected token after the exchange "
                                  f"completed")


def mechanism_client(mechanism: str, username: str, password: str) -> SaslMechanismClient:
    """The client of `mechanism` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) for these credentials."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramClient(mechanism, username, password)
    raise ValueError(f"SASL mechanism {mechanism} is not spoken by strom's clients")
