"""Client configuration: Kafka's key names and defaults, also accepted as Python keywords.

`resolve("producer", {"bootstrap.servers": "h:9092"}, linger_ms=5)` returns a `ClientConfig`:
a dict keyed by Kafka's dotted names holding every known key of that client kind (defaults
filled in), values converted to their declared type. A keyword argument is the dotted name
with dots written as underscores (`linger_ms` -> `linger.ms`). Values may be strings as read
from a `.properties` file ("5", "true", "all"). An unknown key or a value of the wrong type
raises `ConfigError` naming the key (librdkafka's rule: a typo should not pass silently).

Only what strom's clients implement is declared; `ignored` keys (client.dns.lookup, ...) are
accepted so shared config files work, and have no effect.

Security keys (TLS and SASL) are common to every client kind: Kafka's names
(`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.*`,
`ssl.keystore.*`, `ssl.key.password`, `ssl.endpoint.identification.algorithm`,
`ssl.enabled.protocols`, `ssl.protocol`) and librdkafka's (`sasl.username`, `sasl.password`,
`sasl.mechanisms`, `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, their
`*.pem` inline forms, `enable.ssl.certificate.verification`), plus kafka-python's
`ssl.check.hostname`. `security_settings` checks them together (a SASL protocol needs
credentials and a mechanism strom speaks; stores are read as PEM only);
`clients.aio.security.ClientSecurity` turns them into what a connection uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from clients.jaas import parse_jaas_config
from clients.properties import ConfigError

__all__ = ["ClientConfig", "ConfigError", "Key", "resolve", "KEYS", "kwarg_to_key",
           "bootstrap_addresses", "acks_value", "security_settings", "SECURITY_KEYS",
           "SECURITY_PROTOCOLS", "SASL_MECHANISMS", "TLS_VERSIONS"]


@dataclass(frozen=True)
class Key:
    name: str
    type: str          # int, float, bool, str, list, object (any Python object, e.g. a callable)
    default: Any
    doc: str = ""


def _k(name: str, type_: str, default: Any, doc: str = "") -> Key:
    return Key(name, type_, default, doc)


_COMMON = [
    _k("bootstrap.servers", "list", [], "host:port pairs used to discover the cluster"),
    _k("client.id", "str", "strom", "sent with every request; shows in broker logs"),
    _k("request.timeout.ms", "int", 30000, "how long to wait for any one response"),
    _k("metadata.max.age.ms", "int", 300000, "refresh metadata at least this often"),
    _k("retry.backoff.ms", "int", 100, "wait before retrying a failed request"),
    _k("retry.backoff.max.ms", "int", 1000, "upper bound of the growing retry backoff"),
    _k("reconnect.backoff.ms", "int", 50, "first wait before reconnecting to a broker"),
    _k("reconnect.backoff.max.ms", "int", 1000, "upper bound of the reconnect backoff"),
    _k("socket.connection.setup.timeout.ms", "int", 10000, "how long a connect may take"),
    _k("connections.max.idle.ms", "int", 540000, "accepted for compatibility"),
]
_IGNORED = ["client.dns.lookup", "send.buffer.bytes", "receive.buffer.bytes",
            "socket.connection.setup.timeout.max.ms", "metrics.sample.window.ms",
            "metrics.num.samples", "metrics.recording.level", "client.rack"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TLS_VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")

_SECURITY = [
    _k("security.protocol", "str", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    _k("sasl.mechanism", "str", "GSSAPI", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's "
       "default GSSAPI, and OAUTHBEARER, are not spoken by strom's clients)"),
    _k("sasl.jaas.config", "str", None, "the login module with username=\"...\" "
       "password=\"...\" (PlainLoginModule or ScramLoginModule)"),
    _k("sasl.username", "str", None, "librdkafka's name: the SASL user (when no sasl.jaas.config)"),
    _k("sasl.password", "str", None, "librdkafka's name: the SASL password"),
    _k("ssl.truststore.location", "str", None, "PEM file of the CA certificates to trust"),
    _k("ssl.truststore.type", "str", "PEM", "PEM only (JKS and PKCS12 are not read)"),
    _k("ssl.truststore.certificates", "str", None, "the trusted CA certificates, inline PEM"),
    _k("ssl.truststore.password", "str", None, "not used: a PEM truststore has no password"),
    _k("ssl.keystore.location", "str", None, "PEM file with this client's private key and "
       "certificate chain (TLS client authentication)"),
    _k("ssl.keystore.type", "str", "PEM", "PEM only (JKS and PKCS12 are not read)"),
    _k("ssl.keystore.key", "str", None, "this client's private key, inline PEM"),
    _k("ssl.keystore.certificate.chain", "str", None, "this client's certificate chain, "
       "inline PEM"),
    _k("ssl.keystore.password", "str", None, "the private key's password when "
       "ssl.key.password is not set"),
    _k("ssl.key.password", "str", None, "the password of an encrypted private key"),
    _k("ssl.ca.location", "str", None, "librdkafka's name: CA certificates (PEM file or "
       "directory; 'probe': the system's)"),
    _k("ssl.ca.pem", "str", None, "librdkafka's name: CA certificates, inline PEM"),
    _k("ssl.certificate.location", "str", None, "librdkafka's name: client certificate PEM file"),
    _k("ssl.certificate.pem", "str", None, "librdkafka's name: client certificate, inline PEM"),
    _k("ssl.key.location", "str", None, "librdkafka's name: client private key PEM file"),
    _k("ssl.key.pem", "str", None, "librdkafka's name: client private key, inline PEM"),
    _k("ssl.endpoint.identification.algorithm", "str", "https", "https: check that the "
       "broker's certificate names the host connected to; empty (or none) turns it off"),
    _k("ssl.check.hostname", "bool", True, "false turns the host name check off too"),
    _k("enable.ssl.certificate.verification", "bool", True, "librdkafka's name: false "
       "accepts any broker certificate (tests only)"),
    _k("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions allowed"),
    _k("ssl.protocol", "str", "TLSv1.3", "the highest TLS version (TLS: no limit)"),
]
SECURITY_KEYS: dict[str, Key] = {k.name: k for k in _SECURITY}
_ALIASES = {"sasl.mechanisms": "sasl.mechanism"}   # librdkafka's original name

_PRODUCER = [
    _k("acks", "str", "all", "0, 1 or all (-1)"),
    _k("batch.size", "int", 16384, "bytes per partition batch before it is sent"),
    _k("linger.ms", "float", 5.0, "how long a batch waits for more records"),
    _k("buffer.memory", "int", 33554432, "bytes of records waiting to be sent"),
    _k("max.block.ms", "int", 60000, "how long send() blocks on metadata or buffer space"),
    _k("compression.type", "str", "none", "none, gzip, snappy, lz4 or zstd"),
    _k("compression.level", "int", None, "codec level (codec default when unset)"),
    _k("retries", "int", 2147483647, "how often a failed batch is resent"),
    _k("delivery.timeout.ms", "int", 120000, "upper bound from send() to success or failure"),
    _k("enable.idempotence", "bool", True, "InitProducerId + sequence numbers: no duplicates"),
    _k("max.in.flight.requests.per.connection", "int", 5, "unacknowledged requests per broker"),
    _k("max.request.size", "int", 1048576, "largest produce request (and record) in bytes"),
    _k("partitioner", "object", None, "callable(topic, key, key_bytes, value, value_bytes, "
       "cluster) -> partition; default murmur2 for keys, sticky for null keys"),
    _k("partitioner.ignore.keys", "bool", False, "sticky partitioning even for keyed records"),
    _k("key.serializer", "object", None, "Serializer (or callable) for keys"),
    _k("value.serializer", "object", None, "Serializer (or callable) for values"),
    _k("transactional.id", "str", None, "enables transactions (init_transactions(), "
       "begin/commit/abort_transaction()); needs enable.idempotence"),
    _k("transaction.timeout.ms", "int", 60000, "the coordinator aborts a transaction open "
       "longer than this (at most the broker's transaction.max.timeout.ms)"),
]

_CONSUMER = [
    _k("group.id", "str", None, "consumer group; required for subscribe() and commits"),
    _k("group.instance.id", "str", None, "static membership id"),
    _k("auto.offset.reset", "str", "latest", "earliest, latest or none"),
    _k("enable.auto.commit", "bool", True, "commit positions in the background"),
    _k("auto.commit.interval.ms", "int", 5000, "how often auto-commit runs"),
    _k("session.timeout.ms", "int", 45000, "how long the coordinator waits for heartbeats"),
    _k("heartbeat.interval.ms", "int", 3000, "how often heartbeats are sent"),
    _k("max.poll.interval.ms", "int", 300000, "longest gap between poll() calls"),
    _k("max.poll.records", "int", 500, "most records one poll() returns"),
    _k("fetch.min.bytes", "int", 1, "a fetch waits until this much data is there"),
    _k("fetch.max.bytes", "int", 52428800, "most bytes one fetch response carries"),
    _k("fetch.max.wait.ms", "int", 500, "longest a fetch waits for fetch.min.bytes"),
    _k("max.partition.fetch.bytes", "int", 1048576, "most bytes per partition per fetch"),
    _k("isolation.level", "str", "read_uncommitted", "read_uncommitted or read_committed"),
    _k("partition.assignment.strategy", "list", ["range", "cooperative-sticky"],
       "range, roundrobin, cooperative-sticky (first common one wins)"),
    _k("check.crcs", "bool", True, "verify batch CRCs on fetch"),
    _k("exclude.internal.topics", "bool", True, "regex subscriptions skip internal topics"),
    _k("allow.auto.create.topics", "bool", False, "subscribe() may auto-create topics"),
    _k("key.deserializer", "object", None, "Deserializer (or callable) for keys"),
    _k("value.deserializer", "object", None, "Deserializer (or callable) for values"),
]

_ADMIN = [
    _k("default.api.timeout.ms", "int", 60000, "how long an admin call may take in all"),
]

KEYS: dict[str, dict[str, Key]] = {
    "common": {k.name: k for k in _COMMON + _SECURITY},
    "producer": {k.name: k for k in _COMMON + _SECURITY + _PRODUCER},
    "consumer": {k.name: k for k in _COMMON + _SECURITY + _CONSUMER + _ADMIN},
    "admin": {k.name: k for k in _COMMON + _SECURITY + _ADMIN},
}


class ClientConfig(dict):
    """Resolved configuration: Kafka's dotted names -> typed values, every key present."""

    kind: str = ""

    def ms(self, key: str) -> float:
        """A `*.ms` value in seconds (None stays None)."""
        v = self[key]
        return None if v is None else v / 1000.0  # type: ignore[return-value]


def kwarg_to_key(name: str) -> str:
    """`linger_ms` -> `linger.ms`: Python keyword arguments name Kafka's dotted keys."""
    return name.replace("_", ".")


def _convert(key: Key, value: Any, where: str) -> Any:
    if value is None:
        return None
    t = key.type
    try:
        if t == "object":
            return value
        if t == "list":
            if isinstance(value, str):
                return [p.strip() for p in value.split(",") if p.strip()]
            return list(value)
        if t == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            raise ValueError("expected true or false")
        if t == "int":
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            return int(value)
        if t == "float":
            return float(value)
        return str(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}{key.name}: invalid value {value!r} ({e})", key.name) from None


_CHOICES: dict[str, tuple[str, ...]] = {
    "acks": ("0", "1", "-1", "all"),
    "compression.type": ("none", "gzip", "snappy", "lz4", "zstd"),
    "auto.offset.reset": ("earliest", "latest", "none", "smallest", "largest"),
    "isolation.level": ("read_uncommitted", "read_committed"),
}


def resolve(kind: str, config: Mapping[str, Any] | None = None, *, source: str = "",
            **kwargs: Any) -> ClientConfig:
    """Merge `config` (dotted keys) and `kwargs` (Python names; they win) over the defaults
    of `kind` ("producer", "consumer", "admin"). `source` (a file name) prefixes errors."""
    keys = KEYS[kind]
    where = f"{source}: " if source else ""
    given: dict[str, Any] = {}
    for name, value in (config or {}).items():
        given[_ALIASES.get(name, name)] = value
    for name, value in kwargs.items():
        name = kwarg_to_key(name)
        given[_ALIASES.get(name, name)] = value
    out = ClientConfig()
    out.kind = kind
    for default in keys.values():
        out[default.name] = (default.default if not isinstance(default.default, list)
                             else list(default.default))
    for name, value in given.items():
        if name in _IGNORED:
            continue
        key = keys.get(name)
        if key is None:
            raise ConfigError(f"{where}{name}: unknown {kind} configuration key", name)
        v = _convert(key, value, where)
        choices = _CHOICES.get(name)
        if choices is not None and v is not None and str(v).lower() not in choices:
            raise ConfigError(f"{where}{name}: invalid value {value!r} "
                              f"(one of {', '.join(choices)})", name)
        out[name] = v.lower() if choices and isinstance(v, str) else v
    if out.get("acks") == "-1":
        out["acks"] = "all"
    if out.get("auto.offset.reset") in ("smallest", "largest"):
        out["auto.offset.reset"] = {"smallest": "earliest", "largest": "latest"}[
            out["auto.offset.reset"]]
    if not out["bootstrap.servers"]:
        raise ConfigError(f"{where}bootstrap.servers: required (host:port[,host:port...])",
                          "bootstrap.servers")
    bootstrap_addresses(out["bootstrap.servers"])  # validate early
    security = security_settings(out, source=source)
    out["security.protocol"] = security["security.protocol"]
    out["sasl.mechanism"] = security["sasl.mechanism"]
    return out


def bootstrap_addresses(servers: list[str] | str) -> list[tuple[str, int]]:
    """`["h1:9092", "h2:9093"]` (or "h1:9092,h2:9093") -> [(host, port), ...]."""
    if isinstance(servers, str):
        servers = [s for s in servers.split(",") if s.strip()]
    out = []
    for s in servers:
        s = s.strip()
        if "://" in s:
            s = s.split("://", 1)[1]
        host, sep, port = s.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"bootstrap.servers: {s!r} is not host:port", "bootstrap.servers")
        out.append((host.strip("[]"), int(port)))
    return out


def acks_value(acks: str) -> int:
    """The wire value of an `acks` setting."""
    return -1 if acks in ("all", "-1") else int(acks)


# ---------------------------------------------------------------- security

_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="..." password="...";')
# The ways to give a client certificate; the keys of one way go together.
_CLIENT_CERT_SOURCES = (("ssl.keystore.location",),
                        ("ssl.keystore.key", "ssl.keystore.certificate.chain"),
                        ("ssl.certificate.location", "ssl.key.location"),
                        ("ssl.certificate.pem", "ssl.key.pem"))
_REQUIRES = (("ssl.keystore.key", "ssl.keystore.certificate.chain"),
             ("ssl.keystore.certificate.chain", "ssl.keystore.key"),
             ("ssl.key.location", "ssl.certificate.location"),
             ("ssl.key.pem", "ssl.certificate.pem"))


def _given(config: Mapping[str, Any], name: str) -> Any:
    value = config.get(name)
    if value is None:
        for alias, target in _ALIASES.items():
            if target == name and config.get(alias) is not None:
                return config[alias]
    return value


def security_settings(config: Mapping[str, Any], *, source: str = "") -> dict[str, Any]:
    """The security keys of `config` (a resolved `ClientConfig` or any mapping of Kafka's
    names, values typed or strings), typed, with defaults, checked together: Kafka's rules
    plus what strom's clients speak. `security.protocol` and `sasl.mechanism` come back in
    upper case; `sasl.username`/`sasl.password` hold the credentials whichever key gave them
    (`sasl.jaas.config` wins over librdkafka's `sasl.username`/`sasl.password`).
    Raises ConfigError naming the key."""
    where = f"{source}: " if source else ""
    out: dict[str, Any] = {}
    for key in _SECURITY:
        value = _convert(key, _given(config, key.name), where)
        if value is None or (isinstance(value, str) and not value.strip()
                             and key.name != "ssl.endpoint.identification.algorithm"):
            value = list(key.default) if isinstance(key.default, list) else key.default
        out[key.name] = value

    protocol = str(out["security.protocol"]).strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{where}security.protocol: invalid value {out['security.protocol']!r} "
                          f"(one of {', '.join(SECURITY_PROTOCOLS)})", "security.protocol")
    out["security.protocol"] = protocol
    out["sasl.mechanism"] = mechanism = str(out["sasl.mechanism"]).strip().upper()
    if protocol.startswith("SASL_"):
        _check_sasl(out, protocol, mechanism, where)
    if protocol in ("SSL", "SASL_SSL"):
        _check_ssl(out, where)
    return out


def _check_sasl(out: dict[str, Any], protocol: str, mechanism: str, where: str) -> None:
    if mechanism not in SASL_MECHANISMS:
        what = ("is not supported" if mechanism in ("GSSAPI", "OAUTHBEARER")
                else "is not a SASL mechanism strom knows")
        default = " (Kafka's default)" if mechanism == "GSSAPI" else ""
        raise ConfigError(f"{where}sasl.mechanism: {mechanism}{default} {what}: strom's clients "
                          f"speak PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", "sasl.mechanism")
    jaas = out["sasl.jaas.config"]
    if jaas:
        try:
            entry = parse_jaas_config(jaas)
        except ValueError as e:
            raise ConfigError(f"{where}sasl.jaas.config: {e}", "sasl.jaas.config") from None
        username, password = entry.options.get("username"), entry.options.get("password")
        if not username or password is None:
            raise ConfigError(f"{where}sasl.jaas.config: the login module needs username and "
                              f"password options ({_PLAIN_JAAS})", "sasl.jaas.config")
        out["sasl.username"], out["sasl.password"] = username, password
    elif not out["sasl.username"] or out["sasl.password"] is None:
        raise ConfigError(f"{where}sasl.jaas.config: security.protocol={protocol} needs "
                          f"credentials: set sasl.jaas.config ({_PLAIN_JAAS}) or sasl.username "
                          f"and sasl.password", "sasl.jaas.config")


def _check_ssl(out: dict[str, Any], where: str) -> None:
    for name in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = str(out[name]).strip().upper()
        if kind != "PEM":
            raise ConfigError(f"{where}{name}: {out[name]} stores are not read: strom reads PEM "
                              f"({name}=PEM; export the store to PEM with keytool or openssl)",
                              name)
        out[name] = kind
    if out["ssl.truststore.location"] and out["ssl.truststore.certificates"]:
        raise ConfigError(f"{where}ssl.truststore.certificates: cannot be set together with "
                          f"ssl.truststore.location", "ssl.truststore.certificates")
    given = [names for names in _CLIENT_CERT_SOURCES if any(out[n] for n in names)]
    if len(given) > 1:
        raise ConfigError(f"{where}{given[1][0]}: a client certificate is configured twice "
                          f"({given[0][0]} and {given[1][0]}); keep one", given[1][0])
    for key, needs in _REQUIRES:
        if out[key] and not out[needs]:
            raise ConfigError(f"{where}{needs}: required with {key}", needs)
    algorithm = str(out["ssl.endpoint.identification.algorithm"] or "").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise ConfigError(f"{where}ssl.endpoint.identification.algorithm: invalid value "
                          f"{algorithm!r} (https, or empty to turn the host name check off)",
                          "ssl.endpoint.identification.algorithm")
    out["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else ""
    versions = [_tls_version(v, "ssl.enabled.protocols", where)
                for v in out["ssl.enabled.protocols"]]
    if not versions:
        raise ConfigError(f"{where}ssl.enabled.protocols: empty", "ssl.enabled.protocols")
    out["ssl.enabled.protocols"] = versions
    protocol = str(out["ssl.protocol"]).strip()
    out["ssl.protocol"] = "TLS" if protocol.upper() == "TLS" else _tls_version(
        protocol, "ssl.protocol", where)


def _tls_version(text: str, key: str, where: str) -> str:
    for v in TLS_VERSIONS:
        if v.lower() == text.strip().lower():
            return v
    raise ConfigError(f"{where}{key}: {text!r} is not a TLS version "
                      f"(one of {', '.join(TLS_VERSIONS)})", key)
