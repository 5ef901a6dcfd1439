"""SASL APIs: SaslHandshake picks the mechanism, SaslAuthenticate carries its tokens.

Declared from Kafka's message specs (clients/src/main/resources/common/message/*.json), up to
the versions Kafka 3.7 speaks. SaslHandshake v0 is followed by raw (unframed) SASL tokens on
the socket; v1 by SaslAuthenticate requests, so the tokens travel inside Kafka frames.
"""
from ..schema import Api, F

SaslHandshake = Api(
    key=17, name="SaslHandshake", valid=(0, 1), flexible=None,
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[]string", about="the mechanisms enabled in the server"),
    ],
)

SaslAuthenticate = Api(
    key=36, name="SaslAuthenticate", valid=(0, 2), flexible=2,
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", versions="1+", default=0,
          about="0: the session does not expire (KIP-368)"),
    ],
)

APIS: list[Api] = [SaslHandshake, SaslAuthenticate]
