"""Each listener's security settings, resolved as Kafka resolves them (a key set as
``listener.name.<listener>.<key>`` wins over the broker-wide key), and the checks that make a
broker refuse to start rather than serve a listener less secure than its config says.

Refused, each with one line naming the key: a SASL mechanism strom does not implement
(GSSAPI, OAUTHBEARER), PLAIN without users, a TLS listener without a PEM key store, client
certificates required without a trust store, an inter-broker SASL listener without the
broker's own credentials, an authorizer other than Kafka's ACL authorizer, re-authentication.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from clients.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from clients.properties import ConfigError

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's class names of its ACL authorizer (ZooKeeper mode, and the KRaft one's name, which
# users' files carry over); strom's authorizer has their semantics.
ACL_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer",
                   "kafka.security.auth.SimpleAclAuthorizer",
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
            "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password",
            "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
            "ssl.truststore.certificates", "ssl.client.auth", "ssl.protocol",
            "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str                                   # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    sasl_mechanisms: tuple[str, ...] = ()           # SASL listeners only
    jaas: Mapping[str, str] = field(default_factory=dict)   # mechanism -> sasl.jaas.config
    ssl: Mapping[str, Any] = field(default_factory=dict)    # the ssl.* keys in force (TLS only)
    ssl_where: Mapping[str, str] = field(default_factory=dict)  # ssl.* key -> the key that set it

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


Fail = Callable[[str, str], ConfigError]     # (key, message) -> the error naming file:line


def resolve_listeners(values: Mapping[str, Any], per_listener: Mapping[str, Mapping[str, tuple[str, str]]],
                      protocols: Mapping[str, str], listener_names: list[str], parse: Callable[[str, str], Any],
                      fail: Fail) -> dict[str, ListenerSecurity]:
    """Every listener's settings, checked. `parse(key, raw)` types a listener's own value
    of a broker key."""
    out: dict[str, ListenerSecurity] = {}
    for name in listener_names:
        own = per_listener.get(name, {})
        prefix = f"listener.name.{name.lower()}."
        protocol = protocols[name]

        def value(key: str) -> tuple[Any, str]:
            if key in own:
                return parse(prefix + key, own[key][0]), prefix + key
            return values[key], key

        mechanisms: tuple[str, ...] = ()
        jaas: dict[str, str] = {k.split(".sasl.jaas.config")[0].upper(): v[0]
                                for k, v in own.items() if k.endswith(".sasl.jaas.config")}
        if protocol.startswith("SASL_"):
            mechs, mech_key = value("sasl.enabled.mechanisms")
            mechanisms = tuple(m.strip().upper() for m in mechs if m.strip())
            if not mechanisms:
                raise fail(mech_key, f"listener {name} is {protocol} but enables no SASL mechanism")
            for m in mechanisms:
                if m not in SASL_MECHANISMS:
                    raise fail(mech_key, f"{m} is not supported by strom (listener {name}); "
                                         f"use {', '.join(SASL_MECHANISMS)}")
            if "PLAIN" in mechanisms:
                _check_plain_users(jaas.get("PLAIN"), prefix + "plain.sasl.jaas.config", fail)
        ssl: dict[str, Any] = {}
        ssl_where: dict[str, str] = {}
        if protocol in ("SSL", "SASL_SSL"):
            for key in SSL_KEYS:
                ssl[key], ssl_where[key] = value(key)
            _check_tls(name, ssl, ssl_where, fail)
        out[name] = ListenerSecurity(name, protocol, mechanisms, jaas, ssl, ssl_where)
    return out


def _check_plain_users(text: str | None, key: str, fail: Fail) -> None:
    if text is None:
        raise fail(key, "PLAIN is enabled but this listener names no users (Kafka's JAAS syntax: "
                        f"{PLAIN_LOGIN_MODULE} required user_alice=\"alice-secret\";)")
    try:
        entry = parse_jaas_config(text)
    except ValueError as e:
        raise fail(key, str(e)) from None
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise fail(key, f"PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    if not any(k.startswith("user_") for k in entry.options):
        raise fail(key, "PLAIN is enabled but the JAAS config defines no user_<name> entry")


def _check_tls(name: str, ssl: Mapping[str, Any], where: Mapping[str, str], fail: Fail) -> None:
    inline = ssl["ssl.keystore.key"] is not None or ssl["ssl.keystore.certificate.chain"] is not None
    if ssl["ssl.keystore.location"] is None and not inline:
        raise fail(where["ssl.keystore.location"],
                   f"listener {name} is TLS but has no key store (a PEM file with the key and "
                   "certificate chain)")
    if str(ssl["ssl.keystore.type"]).upper() != "PEM":
        raise fail(where["ssl.keystore.type"],
                   f"{ssl['ssl.keystore.type']} key stores are not supported: strom reads PEM "
                   "(set ssl.keystore.type=PEM)")
    has_trust = ssl["ssl.truststore.location"] is not None \
        or ssl["ssl.truststore.certificates"] is not None
    if has_trust and str(ssl["ssl.truststore.type"]).upper() != "PEM":
        raise fail(where["ssl.truststore.type"],
                   f"{ssl['ssl.truststore.type']} trust stores are not supported: strom reads PEM "
                   "(set ssl.truststore.type=PEM)")
    if ssl["ssl.client.auth"] in ("required", "requested") and not has_trust:
        raise fail(where["ssl.client.auth"],
                   f"{ssl['ssl.client.auth']} client certificates need a trust store "
                   "(ssl.truststore.location)")


def inter_broker_credentials(listener: ListenerSecurity, mechanism: str, mechanism_key: str,
                             fail: Fail) -> tuple[str, str] | None:
    """The username and password this broker gives other brokers on a SASL inter-broker
    listener (the `username`/`password` of that mechanism's JAAS entry); None otherwise."""
    if not listener.sasl:
        return None
    if mechanism not in listener.sasl_mechanisms:
        raise fail(mechanism_key, f"{mechanism} is not enabled on the inter-broker listener "
                                  f"{listener.name} ({', '.join(listener.sasl_mechanisms)})")
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = listener.jaas.get(mechanism)
    if text is None:
        raise fail(key, f"the broker needs its own username and password for {mechanism} on the "
                        f"inter-broker listener {listener.name}")
    try:
        options = parse_jaas_config(text).options
    except ValueError as e:
        raise fail(key, str(e)) from None
    if "username" not in options or "password" not in options:
        raise fail(key, "username and password are needed: the broker authenticates with them "
                        "to the other brokers")
    return options["username"], options["password"]


def parse_super_users(text: str | None, fail: Fail) -> frozenset[str]:
    """'User:admin;User:broker' -> the principals."""
    out = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise fail("super.users", f"{item!r} is not a principal (expected User:<name>)")
        out.add(item)
    return frozenset(out)


# Kafka security settings strom does not implement, with why: set (to anything but off) they
# would promise a protection the broker does not give, so the broker refuses to start.
_UNENFORCED: tuple[tuple[str, str], ...] = (
    ("principal.builder.class", "custom principal builders are not supported "
                                "(ssl.principal.mapping.rules is)"),
    ("sasl.server.callback.handler.class", "custom SASL callback handlers are not supported"),
    ("sasl.jaas.config", "a broker reads JAAS per listener and mechanism: set "
                         "listener.name.<listener>.<mechanism>.sasl.jaas.config"),
    ("delegation.token.secret.key", "delegation tokens are not supported"),
    ("delegation.token.master.key", "delegation tokens are not supported"),
    ("zookeeper.set.acl", "ZooKeeper ACLs on the brokers' znodes are not supported"),
    ("zookeeper.ssl.client.enable", "TLS to ZooKeeper is not supported"),
    ("ssl.engine.factory.class", "custom SSL engine factories are not supported"),
    ("security.providers", "custom security providers are not supported"),
)
_OFF = ("", "false", "null", "none")


def refuse_unenforced(unknown: Mapping[str, str], fail: Fail) -> None:
    """ConfigError for the first Kafka security setting strom cannot enforce (`unknown`: the
    keys strom does not declare, as written)."""
    for key, message in _UNENFORCED:
        value = unknown.get(key)
        if value is not None and value.strip().lower() not in _OFF:
            raise fail(key, f"{message}; strom will not start with it set")
    for key in unknown:
        if key.startswith("listener.name.") and ".sasl." in key:
            raise fail(key, "not a per-listener SASL key strom reads (it reads "
                            "sasl.enabled.mechanisms and <mechanism>.sasl.jaas.config)")
