"""SaslHandshake and SaslAuthenticate: how a connection on a SASL listener says who it is
(Kafka's SaslServerAuthenticator, and KafkaApis once the connection is authenticated).

SaslHandshake picks a mechanism the listener enables and starts the exchange
(`conn.sasl`); each SaslAuthenticate carries the client's next token and answers the
server's. When the exchange completes the connection takes its principal and is
authenticated. A failed exchange, an unsupported mechanism, or a request out of order is
answered and then the connection is closed (`conn.state["close_after_answer"]`), as Kafka
does. Once authenticated (and on listeners without SASL) both APIs answer ILLEGAL_SASL_STATE
and the connection stays.

SaslHandshake v0 means the tokens follow as bare size-prefixed frames rather than in
SaslAuthenticate requests: the handler marks `conn.state["sasl_raw_tokens"]` and the network
layer feeds those frames to `authenticate_token`.
"""
from __future__ import annotations

from typing import Any, Protocol

from clients.protocol.errors import Code

from ...security.sasl import SaslAuthenticationError, SaslServer
from ..dispatch import RequestContext, handles
from ..network import ConnectionInfo


class SaslServices(Protocol):
    sasl: SaslServer


CLOSE_AFTER_ANSWER = "close_after_answer"
RAW_TOKENS = "sasl_raw_tokens"
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


@handles("SaslHandshake", (0, 1))
def sasl_handshake(services: SaslServices, request: Any, ctx: RequestContext) -> dict:
    conn = ctx.conn
    if conn.authenticated:
        # KafkaApis: a handshake on an authenticated (or non-SASL) connection.
        return {"error_code": Code.ILLEGAL_SASL_STATE, "mechanisms": []}
    enabled = services.sasl.mechanisms(conn.listener)
    if conn.sasl is not None:
        # SaslServerAuthenticator: only SaslAuthenticate may follow a handshake.
        conn.state[CLOSE_AFTER_ANSWER] = True
        return {"error_code": Code.ILLEGAL_SASL_STATE, "mechanisms": enabled}
    if request.mechanism not in enabled:
        conn.state[CLOSE_AFTER_ANSWER] = True
        return {"error_code": Code.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
    conn.sasl = services.sasl.start(conn.listener, request.mechanism)
    if ctx.version == 0:
        conn.state[RAW_TOKENS] = True
    return {"error_code": Code.NONE, "mechanisms": enabled}


@handles("SaslAuthenticate", (0, 2))
def sasl_authenticate(services: SaslServices, request: Any, ctx: RequestContext) -> dict:
    conn = ctx.conn
    if conn.authenticated:
        return _answer(Code.ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION)
    if conn.sasl is None:
        conn.state[CLOSE_AFTER_ANSWER] = True
        return _answer(Code.ILLEGAL_SASL_STATE,
                       "Unexpected SaslAuthenticate request before SaslHandshake")
    try:
        challenge = authenticate_token(conn, bytes(request.auth_bytes))
    except SaslAuthenticationError as e:
        return _answer(Code.SASL_AUTHENTICATION_FAILED, e.message)
    return _answer(Code.NONE, None, challenge)


def authenticate_token(conn: ConnectionInfo, token: bytes) -> bytes:
    """Step the connection's exchange with the client's `token` and give the server's
    answer. On completion the connection takes the principal and is authenticated; on
    SaslAuthenticationError it is marked to close once answered."""
    exchange = conn.sasl
    if exchange is None:
        raise RuntimeError("no SASL exchange in progress")
    try:
        challenge = exchange.step(token)
    except SaslAuthenticationError:
        conn.sasl = None
        conn.state[CLOSE_AFTER_ANSWER] = True
        raise
    if exchange.complete:
        conn.principal = exchange.principal
        conn.authenticated = True
        conn.sasl = None
        conn.state.pop(RAW_TOKENS, None)
    return challenge


def _answer(code: int, message: str | None, auth_bytes: bytes = b"") -> dict:
    # session_lifetime_ms 0: the session does not expire (no KIP-368 re-authentication).
    return {"error_code": code, "error_message": message, "auth_bytes": auth_bytes,
            "session_lifetime_ms": 0}
