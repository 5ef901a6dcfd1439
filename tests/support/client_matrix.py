"""The security modes a real Kafka client can use against a secured strom broker, and each
client's own spelling of them (tests/integration/test_security_clients.py).

    login = Login(kit, "127.0.0.1:9094", MODES_BY_ID["sasl_ssl-scram512"])
    Producer(librdkafka_config(login))             # confluent-kafka; kcat takes it as -X k=v
    KafkaProducer(**kafka_python_config(login))
    AIOKafkaProducer(**aiokafka_config(login))
    kafkajs_config(login)                           # JSON for tests/js/security.js

Every mode logs in as one user ("alice" unless told): with a password over SASL, or with the
user's client certificate over SSL (the broker maps the certificate's DN to its CN).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiokafka.helpers import create_ssl_context

from tests.support.security import USERS, SecurityKit


@dataclass(frozen=True)
class Mode:
    """A listener's security protocol and, for SASL, the mechanism the client picks."""

    id: str
    protocol: str               # SASL_PLAINTEXT, SASL_SSL or SSL
    mechanism: str | None       # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; None over SSL

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def client_certificate(self) -> bool:
        return self.protocol == "SSL"


MODES = (
    Mode("sasl_plaintext-plain", "SASL_PLAINTEXT", "PLAIN"),
    Mode("sasl_plaintext-scram256", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
    Mode("sasl_plaintext-scram512", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    Mode("sasl_ssl-scram512", "SASL_SSL", "SCRAM-SHA-512"),
    Mode("ssl-client_cert", "SSL", None),
)
MODES_BY_ID = {m.id: m for m in MODES}


@dataclass(frozen=True)
class Login:
    """Where a client connects (`bootstrap`: the listener of `mode.protocol`) and as whom."""

    kit: SecurityKit
    bootstrap: str
    mode: Mode
    user: str = "alice"
    password: str | None = None     # None: the user's real password (security.USERS)

    @property
    def secret(self) -> str:
        return USERS[self.user] if self.password is None else self.password

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)


def librdkafka_config(login: Login) -> dict[str, str]:
    """librdkafka's keys (confluent-kafka, and kcat's -X)."""
    mode, kit = login.mode, login.kit
    conf = {"bootstrap.servers": login.bootstrap, "security.protocol": mode.protocol}
    if mode.mechanism is not None:
        conf.update({"sasl.mechanisms": mode.mechanism, "sasl.username": login.user,
                     "sasl.password": login.secret})
    if mode.tls:
        conf["ssl.ca.location"] = str(kit.ca_pem)
    if mode.client_certificate:
        conf.update({"ssl.certificate.location": str(kit.cert_pem(login.user)),
                     "ssl.key.location": str(kit.key_pem(login.user))})
    return conf


def _python_sasl(login: Login) -> dict[str, Any]:
    return {"sasl_mechanism": login.mode.mechanism, "sasl_plain_username": login.user,
            "sasl_plain_password": login.secret}


def kafka_python_config(login: Login) -> dict[str, Any]:
    """kafka-python's keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient)."""
    mode, kit = login.mode, login.kit
    conf: dict[str, Any] = {"bootstrap_servers": login.bootstrap,
                            "security_protocol": mode.protocol}
    if mode.sasl:
        conf.update(_python_sasl(login))
    if mode.tls:
        conf.update({"ssl_cafile": str(kit.ca_pem), "ssl_check_hostname": True})
    if mode.client_certificate:
        conf.update({"ssl_certfile": str(kit.cert_pem(login.user)),
                     "ssl_keyfile": str(kit.key_pem(login.user))})
    return conf


def aiokafka_config(login: Login) -> dict[str, Any]:
    """aiokafka's keyword arguments: TLS goes through one ssl.SSLContext."""
    mode, kit = login.mode, login.kit
    conf: dict[str, Any] = {"bootstrap_servers": login.bootstrap,
                            "security_protocol": mode.protocol}
    if mode.sasl:
        conf.update(_python_sasl(login))
    if mode.tls:
        cert = kit.cert_pem(login.user) if mode.client_certificate else None
        key = kit.key_pem(login.user) if mode.client_certificate else None
        conf["ssl_context"] = create_ssl_context(
            cafile=str(kit.ca_pem), certfile=None if cert is None else str(cert),
            keyfile=None if key is None else str(key))
    return conf


def kafkajs_config(login: Login) -> dict[str, Any]:
    """The connection part of tests/js/security.js's arguments (brokers, ssl, sasl)."""
    mode, kit = login.mode, login.kit
    conf: dict[str, Any] = {"brokers": [login.bootstrap]}
    if mode.mechanism is not None:
        conf["sasl"] = {"mechanism": mode.mechanism.lower(), "username": login.user,
                        "password": login.secret}
    if mode.tls:
        conf["ssl"] = {"ca": str(kit.ca_pem)}
    if mode.client_certificate:
        conf["ssl"].update({"cert": str(kit.cert_pem(login.user)),
                            "key": str(kit.key_pem(login.user))})
    return conf
