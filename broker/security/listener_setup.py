"""What each listener needs to serve its security protocol, built from the broker's config:
the TLS context and client-certificate principal of SSL/SASL_SSL listeners, and the SASL
server of SASL_* listeners. Built before the broker starts, so a key store that cannot be
read stops it with one line naming the key (ConfigError)."""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from clients.aio.security import ClientSecurity
from clients.properties import ConfigError

from ..config import BrokerConfig
from .principal import SslPrincipalBuilder
from .sasl import ListenerSasl, SaslServer, plain_users_from_jaas
from .tls import server_ssl_context


@dataclass(frozen=True)
class ListenerTransport:
    ssl_context: ssl.SSLContext | None = None
    # SSL listeners: the principal of a client certificate (SASL_SSL ones take SASL's).
    ssl_principal: Callable[[bytes | None], str] | None = None


def listener_transports(config: BrokerConfig) -> dict[str, ListenerTransport]:
    """Listener name -> its TLS context and principal builder; ConfigError naming the key
    that is wrong."""
    where = str(config.path) if config.path is not None else "<config>"
    try:
        principals = SslPrincipalBuilder(config.get("ssl.principal.mapping.rules"))
    except ValueError as e:
        raise ConfigError(f"{config.where('ssl.principal.mapping.rules') or where}: "
                          f"ssl.principal.mapping.rules: {e}", "ssl.principal.mapping.rules") from None
    out: dict[str, ListenerTransport] = {}
    for name, sec in config.listener_security.items():
        if not sec.tls:
            out[name] = ListenerTransport()
            continue
        try:
            context = server_ssl_context(sec.ssl, sec.ssl_where)
        except ValueError as e:
            key = str(e).split(":", 1)[0]
            raise ConfigError(f"{where}: {e}", key) from None
        out[name] = ListenerTransport(context, principals if sec.protocol == "SSL" else None)
    return out


def sasl_server(config: BrokerConfig, credentials: Callable[[str], Mapping[str, str]]) -> SaslServer:
    """The SASL server of every SASL listener; `credentials(user)` gives the user's SCRAM
    credentials (the store's cache)."""
    listeners = {}
    for name, sec in config.listener_security.items():
        if sec.sasl:
            plain = plain_users_from_jaas(sec.jaas["PLAIN"]) if "PLAIN" in sec.sasl_mechanisms else {}
            listeners[name] = ListenerSasl(list(sec.sasl_mechanisms), plain)
    return SaslServer(listeners, credentials)


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the others (replication, the controller's requests,
    transaction markers): the inter-broker listener's protocol, its trust store (and key
    store, presented as the client certificate), and the SASL mechanism and credentials of
    sasl.mechanism.inter.broker.protocol. ConfigError naming the key when they do not make a
    client config."""
    sec = config.listener_security[config.inter_broker_listener_name]
    client: dict[str, Any] = {"security.protocol": sec.protocol}
    if sec.tls:
        for key in ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
                    "ssl.truststore.password", "ssl.keystore.type", "ssl.keystore.location",
                    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
                    "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols"):
            if sec.ssl.get(key) is not None:
                client[key] = sec.ssl[key]
    if config.inter_broker_credentials is not None:
        client["sasl.mechanism"] = config.inter_broker_sasl_mechanism
        client["sasl.username"], client["sasl.password"] = config.inter_broker_credentials
    try:
        return ClientSecurity.from_config(client)
    except ConfigError as e:
        raise ConfigError(f"{config.path or '<config>'}: inter-broker listener "
                          f"{sec.name}: {e}", e.key) from None
