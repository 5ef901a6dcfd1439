"""Typed broker configuration from a Java-style ``.properties`` file, with Kafka's names and defaults.

Contract
--------
* ``BrokerConfig.load(path, overrides)`` reads the file the way ``java.util.Properties`` does
  (``#``/``!`` comments, ``=``/``:``/whitespace separators, backslash line continuations,
  ``\\t \\n \\r \\f \\\\ \\uXXXX`` escapes), then types and validates every known key against the
  declarative table ``BROKER_CONFIGS``. ``overrides`` (``--override k=v``) win over the file and,
  as in Kafka, count as static broker config.
* Unknown keys are logged as a WARNING naming the key and the file; they are never an error.
  Known keys that strom accepts but does not act on (thread counts) are logged at INFO.
* A bad value raises ``ConfigError`` whose message names the file, the line and the key:
  ``config/server.properties:12: num.partitions: 'abc' is not an integer``. Every bad line is
  reported at once (one per message line); ``ConfigError.key`` is the first bad key.
* Defaults, ranges, synonyms and update modes are Kafka's (3.x ZooKeeper mode, plus the
  3.6+ ``message.timestamp.before/after.max.ms``). ``TOPIC_CONFIGS`` declares every topic config
  with the broker keys that supply its default ("synonyms", in Kafka's order of precedence),
  which is what DescribeConfigs reports.

strom-specific choices (documented, deliberate)
-----------------------------------------------
* Relative paths in ``log.dirs``/``log.dir`` are resolved against the current working directory
  *at load time*; ``cfg.log_dirs`` holds absolute paths (``cfg.get("log.dirs")`` the raw list).
* A listener with an empty host (``PLAINTEXT://:9092``) binds ``0.0.0.0`` and is advertised as
  ``127.0.0.1`` (Kafka would advertise the canonical host name; strom is loopback-first).
  Advertising ``0.0.0.0``/``::`` is refused as Kafka refuses it: set ``advertised.listeners``.
  Port 0 binds an ephemeral port; the server must advertise the port it actually bound.
* ``broker.id`` -1 (the default) means 0 when standalone (no ``zookeeper.connect``); with
  ZooKeeper it stays -1 for the coordinator to generate (Kafka's broker.id.generation.enable).

A ``BrokerConfig`` changes only through ``set_dynamic`` (dynamic broker configs), on the
broker's event loop; read it there. Everything else treats it as read-only.
"""
from __future__ import annotations

import logging
import math
import os
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from clients.properties import ConfigError, Property, parse_properties, read_properties  # noqa: F401

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# DescribeConfigs wire ids (Kafka's ConfigSource and ConfigType enums).
CONFIG_SOURCE_IDS = {
    "UNKNOWN": 0, "TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3, "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6, "CLIENT_METRICS_CONFIG": 7, "GROUP_CONFIG": 8,
}
CONFIG_TYPE_IDS = {
    "UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
    "LIST": 7, "CLASS": 8, "PASSWORD": 9,
}
STATIC = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
TOPIC = "TOPIC_CONFIG"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")



# --------------------------------------------------------------------------------------------
# Types, validators and the declaration of a config key
# --------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_BOUNDS = {"short": (-2**15, 2**15 - 1), "int": (-2**31, INT_MAX), "long": (-2**63, LONG_MAX)}


def _parse_typed(type_: str, raw: str) -> Any:
    """Raw string -> typed value, or ValueError with the reason (not naming key or file)."""
    s = raw.strip()
    if type_ in _BOUNDS:
        if not _INT_RE.match(s):
            raise ValueError(f"{s!r} is not an integer")
        v = int(s)
        lo, hi = _BOUNDS[type_]
        if not lo <= v <= hi:
            raise ValueError(f"{s} is out of range for a {type_} ({lo}..{hi})")
        return v
    if type_ == "bool":
        if s.lower() not in ("true", "false"):
            raise ValueError(f"{s!r} is not a boolean (expected true or false)")
        return s.lower() == "true"
    if type_ == "double":
        try:
            if "_" in s:
                raise ValueError
            return float(s)
        except ValueError:
            raise ValueError(f"{s!r} is not a number") from None
    if type_ == "list":
        return [p.strip() for p in s.split(",") if p.strip()]
    return s  # string, password, class


def _java_double(d: float) -> str:
    """Double.toString: plain between 1e-3 and 1e7, else d.dddE[-]n."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    if 1e-3 <= abs(d) < 1e7:
        return repr(d)
    t = Decimal(repr(d)).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    exp = int(t.exponent) + len(digits) - 1
    return f"{'-' if t.sign else ''}{digits[0]}.{digits[1:] or '0'}E{exp}"


def to_config_string(type_: str, value: Any) -> str | None:
    """A typed value as Kafka prints it (ConfigDef.convertToString); None stays None."""
    if value is None:
        return None
    if type_ == "bool":
        return "true" if value else "false"
    if type_ == "list":
        return ",".join(value)
    if type_ == "double":
        return _java_double(float(value))
    return str(value)


class Range:
    """Numeric bounds, inclusive; printed as Kafka prints them ("[1,...]", "[0,...,1]")."""

    def __init__(self, min: float | None = None, max: float | None = None):
        self.min, self.max = min, max

    def __call__(self, v: Any) -> str | None:
        if v is None:
            return None
        if self.min is not None and v < self.min:
            if self.max is None:
                return f"{v} is out of range: must be at least {self.min}"
            return f"{v} is out of range: must be between {self.min} and {self.max}"
        if self.max is not None and v > self.max:
            if self.min is None:
                return f"{v} is out of range: must be at most {self.max}"
            return f"{v} is out of range: must be between {self.min} and {self.max}"
        return None

    def __str__(self) -> str:
        if self.max is None:
            return f"[{self.min},...]"
        if self.min is None:
            return f"[...,{self.max}]"
        return f"[{self.min},...,{self.max}]"


class OneOf:
    """A string from a fixed set (case-sensitive, as Kafka's ValidString)."""

    def __init__(self, *values: str):
        self.values = values

    def __call__(self, v: Any) -> str | None:
        if v is None or v in self.values:
            return None
        return f"{v!r} is not one of {', '.join(self.values)}"

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


class ListOf(OneOf):
    """A list whose every item comes from a fixed set (Kafka's ValidList.in)."""

    def __call__(self, v: Any) -> str | None:
        for item in v or ():
            if item not in self.values:
                return f"{item!r} is not one of {', '.join(self.values)}"
        return None


class _Custom:
    def __init__(self, check: Callable[[Any], str | None], text: str):
        self.check, self.text = check, text

    def __call__(self, v: Any) -> str | None:
        return None if v is None else self.check(v)

    def __str__(self) -> str:
        return self.text


Validator = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class ConfigKey:
    """One declared config: the facts DescribeConfigs and the docs need.

    ``type``: int, short, long, bool, string, list, double, password or class.
    ``default``: the typed default; None is Kafka's null (unset, often meaning "derived").
    ``update_mode`` (broker keys): "read-only", "per-broker" or "cluster-wide", as Kafka's docs.
    ``synonyms`` (topic keys): broker keys that supply the default, in Kafka's precedence.
    ``note``: what strom does differently, if anything.
    """

    name: str
    type: str
    default: Any
    doc: str
    importance: str = "medium"
    validator: Validator | None = None
    update_mode: str = "read-only"
    synonyms: tuple[str, ...] = ()
    note: str = ""

    @property
    def is_sensitive(self) -> bool:
        return self.type == "password"

    @property
    def read_only(self) -> bool:
        return self.update_mode == "read-only"

    @property
    def kafka_type(self) -> str:
        return {"bool": "BOOLEAN", "int": "INT", "short": "SHORT", "long": "LONG",
                "string": "STRING", "list": "LIST", "double": "DOUBLE",
                "password": "PASSWORD", "class": "CLASS"}[self.type]

    def parse(self, raw: str) -> Any:
        """Typed and validated value of ``raw``; ValueError with the reason otherwise."""
        v = _parse_typed(self.type, raw)
        if self.validator is not None:
            err = self.validator(v)
            if err:
                raise ValueError(err)
        return v

    def default_string(self) -> str | None:
        return to_config_string(self.type, self.default)


# --------------------------------------------------------------------------------------------
# Listeners
# --------------------------------------------------------------------------------------------

class Listener(NamedTuple):
    """One endpoint: ``name`` upper-cased (Kafka normalises listener names), ``host`` without
    IPv6 brackets."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


_LISTENER_RE = re.compile(
    r"(?P<name>[A-Za-z0-9_\-]+)://(?:\[(?P<v6>[0-9A-Za-z:.%]*)\]|(?P<host>[0-9A-Za-z\-._]*))"
    r":(?P<port>[0-9]+)\Z")


def parse_listeners(value: str | list[str]) -> list[Listener]:
    """'PLAINTEXT://:9092,INTERNAL://[::1]:9093' -> Listeners (hosts as written, '' kept)."""
    items = value if isinstance(value, list) else [p.strip() for p in value.split(",") if p.strip()]
    out: list[Listener] = []
    for item in items:
        m = _LISTENER_RE.match(item)
        if not m:
            raise ValueError(f"{item!r} is not a valid listener (expected NAME://host:port)")
        port = int(m["port"])
        if port > 65535:
            raise ValueError(f"{item!r}: port {port} is out of range (0..65535)")
        out.append(Listener(m["name"].upper(), m["v6"] if m["v6"] is not None else m["host"], port))
    names = [listener.name for listener in out]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError(f"each listener must have a different name; repeated: {', '.join(dups)}")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (p.strip() for p in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not a listener mapping (expected NAME:PROTOCOL)")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"{item!r}: {proto!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def _check(parse: Callable[[Any], Any]) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        try:
            parse(v)
        except ValueError as e:
            return str(e)
        return None
    return check


def _check_throttled(v: list[str]) -> str | None:
    if v == ["*"]:
        return None
    for item in v:
        if not re.fullmatch(r"[0-9]+:[0-9]+", item):
            return f"{item!r} is not PARTITION:BROKER (or the list is not a single '*')"
    return None


_LISTENERS = _Custom(_check(parse_listeners), "NAME://host:port[,...]")
_PROTOCOL_MAP = _Custom(_check(parse_protocol_map), "NAME:PROTOCOL[,...]")
_COMPRESSION = OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_CLEANUP = ListOf("compact", "delete")
_TIMESTAMP_TYPE = OneOf("CreateTime", "LogAppendTime")

# --------------------------------------------------------------------------------------------
# The broker's configs (Kafka's KafkaConfig, ZooKeeper mode)
# --------------------------------------------------------------------------------------------

_IGNORED_THREADS = "accepted for compatibility and ignored: strom serves from one asyncio loop"

RO, PB, CW = "read-only", "per-broker", "cluster-wide"


def _b(name: str, type_: str, default: Any, importance: str, mode: str, doc: str,
       validator: Validator | None = None, note: str = "") -> ConfigKey:
    return ConfigKey(name, type_, default, doc, importance, validator, mode, (), note)


BROKER_CONFIGS: tuple[ConfigKey, ...] = (
    # ZooKeeper
    _b("zookeeper.connect", "string", None, "high", RO,
       "ZooKeeper connection string host:port[,host:port...][/chroot]. Unset: strom runs "
       "standalone and keeps cluster metadata under log.dirs."),
    _b("zookeeper.session.timeout.ms", "int", 18000, "high", RO, "ZooKeeper session timeout."),
    _b("zookeeper.connection.timeout.ms", "int", None, "high", RO,
       "Max time to wait for a ZooKeeper connection; unset: zookeeper.session.timeout.ms."),
    _b("zookeeper.max.in.flight.requests", "int", 10, "high", RO,
       "Max unacknowledged requests the ZooKeeper client sends before blocking.", Range(1)),
    # General
    _b("broker.id", "int", -1, "high", RO,
       "The broker id. -1: 0 when standalone; generated by the coordinator with ZooKeeper."),
    _b("broker.id.generation.enable", "bool", True, "medium", RO,
       "Generate a broker id when broker.id is -1 (ZooKeeper mode)."),
    _b("reserved.broker.max.id", "int", 1000, "medium", RO,
       "Max configurable broker id; generated ids start above it.", Range(0)),
    _b("broker.rack", "string", None, "medium", RO,
       "Rack of the broker, for rack-aware replica assignment."),
    _b("message.max.bytes", "int", 1048588, "high", CW,
       "Largest record batch size the broker accepts (after compression). "
       "Per topic: max.message.bytes.", Range(0)),
    _b("num.network.threads", "int", 3, "high", CW, "Kafka's network thread count.",
       Range(1), _IGNORED_THREADS),
    _b("num.io.threads", "int", 8, "high", CW, "Kafka's request handler thread count.",
       Range(1), _IGNORED_THREADS),
    _b("background.threads", "int", 10, "high", CW, "Kafka's background thread count.",
       Range(1), _IGNORED_THREADS),
    _b("num.recovery.threads.per.data.dir", "int", 1, "high", CW,
       "Kafka's log recovery thread count per data dir.", Range(1), _IGNORED_THREADS),
    _b("num.replica.fetchers", "int", 1, "high", CW,
       "Fetcher loops per source broker.", Range(1)),
    _b("queued.max.requests", "int", 500, "high", RO,
       "Requests a connection may have queued before the broker stops reading it.", Range(1)),
    _b("request.timeout.ms", "int", 30000, "high", RO,
       "Timeout of requests the broker sends (e.g. controller to broker)."),
    _b("delete.topic.enable", "bool", True, "high", RO,
       "Allow DeleteTopics; false rejects deletions."),
    _b("auto.create.topics.enable", "bool", True, "high", RO,
       "Create a topic with num.partitions partitions when Metadata asks for an unknown one."),
    _b("compression.type", "string", "producer", "high", CW,
       "Final compression of a topic's batches: 'producer' keeps the producer's codec.",
       _COMPRESSION),
    _b("controlled.shutdown.enable", "bool", True, "medium", RO,
       "Move leadership away before shutting down."),
    _b("auto.leader.rebalance.enable", "bool", True, "high", RO,
       "Periodically move leadership back to preferred replicas."),
    _b("leader.imbalance.check.interval.seconds", "long", 300, "high", RO,
       "Period of the preferred-leader check.", Range(1)),
    _b("leader.imbalance.per.broker.percentage", "int", 10, "high", RO,
       "Leader imbalance (percent) allowed per broker before a rebalance."),
    _b("authorizer.class.name", "string", "", "low", RO,
       "Authorizer to use; empty: everything is allowed."),
    # Socket server
    _b("listeners", "string", "PLAINTEXT://:9092", "high", PB,
       "Comma-separated NAME://host:port to bind; an empty host binds 0.0.0.0.", _LISTENERS),
    _b("advertised.listeners", "string", None, "high", PB,
       "Endpoints returned to clients in Metadata; unset: listeners, with an empty host "
       "advertised as 127.0.0.1.", _LISTENERS),
    _b("listener.security.protocol.map", "string",
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", "low", PB,
       "Security protocol of each listener name.", _PROTOCOL_MAP),
    _b("inter.broker.listener.name", "string", None, "medium", RO,
       "Listener brokers use to talk to each other; unset: the one named after "
       "security.inter.broker.protocol."),
    _b("security.inter.broker.protocol", "string", "PLAINTEXT", "medium", RO,
       "Security protocol between brokers.", OneOf(*SECURITY_PROTOCOLS)),
    _b("socket.send.buffer.bytes", "int", 102400, "high", RO,
       "SO_SNDBUF of broker sockets; -1: the OS default."),
    _b("socket.receive.buffer.bytes", "int", 102400, "high", RO,
       "SO_RCVBUF of broker sockets; -1: the OS default."),
    _b("socket.request.max.bytes", "int", 104857600, "high", RO,
       "Largest request (frame) the broker accepts.", Range(1)),
    _b("socket.listen.backlog.size", "int", 50, "medium", RO,
       "Listen backlog of each listener socket.", Range(1)),
    _b("max.connections", "int", INT_MAX, "medium", CW,
       "Max connections the broker accepts.", Range(0)),
    _b("max.connections.per.ip", "int", INT_MAX, "medium", CW,
       "Max connections from one IP address.", Range(0)),
    _b("connections.max.idle.ms", "long", 600000, "medium", RO,
       "Close connections idle longer than this."),
    _b("fetch.max.bytes", "int", 57671680, "medium", RO,
       "Max bytes returned for one fetch request.", Range(1024)),
    # Log basics
    _b("num.partitions", "int", 1, "medium", RO,
       "Partitions of an auto-created topic (and of CreateTopics with -1).", Range(1)),
    _b("log.dir", "list", ["/tmp/kafka-logs"], "high", RO,
       "Directory of the log data; used when log.dirs is not set. Relative: to the cwd."),
    _b("log.dirs", "list", None, "high", RO,
       "Comma-separated log data directories; unset: log.dir. Relative: to the cwd."),
    _b("log.segment.bytes", "int", 1073741824, "high", CW,
       "Max size of one segment file.", Range(14)),
    _b("log.roll.ms", "long", None, "high", CW,
       "Max age of the active segment before a roll; unset: log.roll.hours."),
    _b("log.roll.hours", "int", 168, "high", RO,
       "Max age of the active segment in hours, secondary to log.roll.ms.", Range(1)),
    _b("log.roll.jitter.ms", "long", None, "high", CW,
       "Max jitter subtracted from the roll time; unset: log.roll.jitter.hours."),
    _b("log.roll.jitter.hours", "int", 0, "high", RO,
       "Max roll jitter in hours, secondary to log.roll.jitter.ms.", Range(0)),
    _b("log.retention.ms", "long", None, "high", CW,
       "Time to keep a segment; -1: no limit; unset: log.retention.minutes."),
    _b("log.retention.minutes", "int", None, "high", RO,
       "Retention in minutes, secondary to log.retention.ms; unset: log.retention.hours."),
    _b("log.retention.hours", "int", 168, "high", RO,
       "Retention in hours, tertiary to log.retention.ms."),
    _b("log.retention.bytes", "long", -1, "high", CW,
       "Max size of a partition's log before old segments are deleted; -1: no limit."),
    _b("log.retention.check.interval.ms", "long", 300000, "medium", RO,
       "Period of the retention check.", Range(1)),
    _b("log.cleanup.policy", "list", ["delete"], "medium", CW,
       "Default cleanup policy: delete, compact, or both.", _CLEANUP),
    _b("log.index.size.max.bytes", "int", 10485760, "medium", CW,
       "Max size of an offset index file.", Range(4)),
    _b("log.index.interval.bytes", "int", 4096, "medium", CW,
       "Bytes of log between two offset index entries.", Range(0)),
    _b("log.flush.interval.messages", "long", LONG_MAX, "high", CW,
       "Messages appended to a partition before it is fsynced.", Range(1)),
    _b("log.flush.interval.ms", "long", None, "high", CW,
       "Max time data stays unflushed; unset: log.flush.scheduler.interval.ms."),
    _b("log.flush.scheduler.interval.ms", "long", LONG_MAX, "high", RO,
       "Period of the check for logs to flush."),
    _b("log.flush.offset.checkpoint.interval.ms", "int", 60000, "high", RO,
       "Period of writing the recovery-point checkpoint.", Range(0)),
    _b("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "high", RO,
       "Period of writing the log-start-offset checkpoint.", Range(0)),
    _b("log.segment.delete.delay.ms", "long", 60000, "high", CW,
       "Wait before a deleted segment's files are removed.", Range(0)),
    _b("log.preallocate", "bool", False, "medium", CW, "Preallocate new segment files."),
    _b("log.message.timestamp.type", "string", "CreateTime", "medium", CW,
       "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's.",
       _TIMESTAMP_TYPE),
    _b("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "medium", CW,
       "Max difference between a CreateTime timestamp and the broker's clock (deprecated "
       "in Kafka 3.6 for the before/after pair).", Range(0)),
    _b("log.message.timestamp.before.max.ms", "long", LONG_MAX, "medium", CW,
       "Max age of a CreateTime timestamp relative to the broker's clock.", Range(0)),
    _b("log.message.timestamp.after.max.ms", "long", LONG_MAX, "medium", CW,
       "Max lead of a CreateTime timestamp over the broker's clock.", Range(0)),
    _b("log.message.downconversion.enable", "bool", True, "low", CW,
       "Allow down-conversion for old fetch versions.", None,
       "strom stores RecordBatch v2 only and never down-converts"),
    _b("log.local.retention.ms", "long", -2, "medium", CW,
       "Local retention with tiered storage; -2: log.retention.ms.", Range(-2)),
    _b("log.local.retention.bytes", "long", -2, "medium", CW,
       "Local retention bytes with tiered storage; -2: log.retention.bytes.", Range(-2)),
    _b("min.insync.replicas", "int", 1, "high", CW,
       "With acks=all, replicas that must be in sync for a write to succeed.", Range(1)),
    # Log cleaner
    _b("log.cleaner.enable", "bool", True, "medium", RO, "Run the log cleaner (compaction)."),
    _b("log.cleaner.threads", "int", 1, "medium", CW, "Log cleaner threads.", Range(0)),
    _b("log.cleaner.backoff.ms", "long", 15000, "medium", CW,
       "Sleep of the cleaner when there is nothing to clean.", Range(0)),
    _b("log.cleaner.dedupe.buffer.size", "long", 134217728, "medium", CW,
       "Memory for deduplication across all cleaner threads."),
    _b("log.cleaner.delete.retention.ms", "long", 86400000, "medium", CW,
       "How long tombstones are kept in compacted topics.", Range(0)),
    _b("log.cleaner.min.cleanable.ratio", "double", 0.5, "medium", CW,
       "Min dirty/total ratio for a log to be cleaned.", Range(0, 1)),
    _b("log.cleaner.min.compaction.lag.ms", "long", 0, "medium", CW,
       "Min age of a message before it may be compacted.", Range(0)),
    _b("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "medium", CW,
       "Max time a message stays ineligible for compaction.", Range(1)),
    # Replication
    _b("default.replication.factor", "int", 1, "medium", RO,
       "Replication factor of auto-created topics (and of CreateTopics with -1)."),
    _b("unclean.leader.election.enable", "bool", False, "high", CW,
       "Allow an out-of-sync replica to become leader (data loss)."),
    _b("replica.lag.time.max.ms", "long", 30000, "high", RO,
       "A follower that has not caught up for this long leaves the ISR."),
    _b("replica.socket.timeout.ms", "int", 30000, "high", RO,
       "Socket timeout of follower fetch requests."),
    _b("replica.fetch.max.bytes", "int", 1048576, "medium", RO,
       "Bytes per partition a follower fetch asks for.", Range(0)),
    _b("replica.fetch.wait.max.ms", "int", 500, "high", RO,
       "Max wait of a follower fetch; must be below replica.lag.time.max.ms."),
    _b("replica.fetch.min.bytes", "int", 1, "high", RO, "Min bytes of a follower fetch response."),
    _b("replica.fetch.response.max.bytes", "int", 10485760, "medium", RO,
       "Max bytes of a whole follower fetch response.", Range(0)),
    _b("replica.fetch.backoff.ms", "int", 1000, "medium", RO,
       "Sleep after a follower fetch error.", Range(0)),
    _b("max.incremental.fetch.session.cache.slots", "int", 1000, "medium", RO,
       "Incremental fetch sessions (KIP-227) kept at most.", Range(0)),
    _b("min.incremental.fetch.session.eviction.ms", "int", 120000, "medium", RO,
       "A session unused this long may be evicted for a new one.", Range(0)),
    _b("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "high", RO,
       "Period of writing the high-watermark checkpoint."),
    _b("controller.socket.timeout.ms", "int", 30000, "medium", RO,
       "Socket timeout of controller-to-broker requests."),
    # Group coordinator
    _b("group.min.session.timeout.ms", "int", 6000, "medium", RO,
       "Min session timeout a consumer may ask for."),
    _b("group.max.session.timeout.ms", "int", 1800000, "medium", RO,
       "Max session timeout a consumer may ask for."),
    _b("group.initial.rebalance.delay.ms", "int", 3000, "medium", RO,
       "Wait for more members before the first rebalance of an empty group."),
    _b("group.max.size", "int", INT_MAX, "medium", RO, "Max members of a group.", Range(1)),
    _b("offsets.topic.num.partitions", "int", 50, "high", RO,
       "Partitions of __consumer_offsets (do not change after deployment).", Range(1)),
    _b("offsets.topic.replication.factor", "short", 3, "high", RO,
       "Replication factor of __consumer_offsets; creation fails until enough brokers are up.",
       Range(1)),
    _b("offsets.topic.segment.bytes", "int", 104857600, "high", RO,
       "Segment size of __consumer_offsets.", Range(1)),
    _b("offsets.retention.minutes", "int", 10080, "high", RO,
       "Committed offsets of an empty group are kept this long.", Range(1)),
    _b("offsets.retention.check.interval.ms", "long", 600000, "high", RO,
       "Period of the stale-offset check.", Range(1)),
    _b("offsets.commit.timeout.ms", "int", 5000, "high", RO,
       "Wait for an offset commit to be replicated.", Range(1)),
    _b("offset.metadata.max.bytes", "int", 4096, "high", RO,
       "Max size of the metadata string of a committed offset."),
    # Transactions and idempotence
    _b("transactional.id.expiration.ms", "int", 604800000, "high", RO,
       "A transactional id without updates for this long expires.", Range(1)),
    _b("transaction.max.timeout.ms", "int", 900000, "high", RO,
       "Max transaction timeout a producer may ask for.", Range(1)),
    _b("transaction.state.log.num.partitions", "int", 50, "high", RO,
       "Partitions of __transaction_state.", Range(1)),
    _b("transaction.state.log.replication.factor", "short", 3, "high", RO,
       "Replication factor of __transaction_state.", Range(1)),
    _b("transaction.state.log.min.isr", "int", 2, "high", RO,
       "min.insync.replicas of __transaction_state.", Range(1)),
    _b("transaction.state.log.segment.bytes", "int", 104857600, "high", RO,
       "Segment size of __transaction_state.", Range(1)),
    _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "low", RO,
       "Period of aborting timed-out transactions.", Range(1)),
    _b("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "low", RO,
       "Period of removing expired transactional ids.", Range(1)),
    _b("producer.id.expiration.ms", "int", 86400000, "low", CW,
       "A producer id idle this long is forgotten by partition leaders.", Range(1)),
    # Security
    _b("sasl.enabled.mechanisms", "list", ["GSSAPI"], "medium", PB,
       "SASL mechanisms the broker offers.", None,
       "strom plans PLAIN and SCRAM-SHA-256/512; GSSAPI is not implemented"),
    _b("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "medium", PB,
       "SASL mechanism between brokers."),
    _b("ssl.keystore.location", "string", None, "high", PB, "Key store file."),
    _b("ssl.keystore.password", "password", None, "high", PB, "Key store password."),
    _b("ssl.key.password", "password", None, "high", PB, "Private key password."),
    _b("ssl.truststore.location", "string", None, "high", PB, "Trust store file."),
    _b("ssl.truststore.password", "password", None, "high", PB, "Trust store password."),
    _b("ssl.client.auth", "string", "none", "medium", PB,
       "Client certificate authentication.", OneOf("required", "requested", "none")),
    # Metrics (Kafka's JMX port is an environment variable; strom serves Prometheus itself)
    _b("metrics.port", "int", -1, "medium", RO,
       "Port of the HTTP endpoint serving /metrics (Prometheus text) and /metrics.json, on the "
       "host of the first listener; -1: off, 0: an ephemeral port.", Range(-1, 65535)),
    _b("strom.metrics.port", "int", -1, "low", RO,
       "Deprecated alias of metrics.port (used when metrics.port is not set).", Range(-1, 65535),
       "deprecated: use metrics.port"),
)

BROKER_CONFIG: dict[str, ConfigKey] = {k.name: k for k in BROKER_CONFIGS}

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: keys that are one setting in several units.
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_SYNONYM_SCALE = {"log.roll.hours": 3600000, "log.roll.jitter.hours": 3600000,
                  "log.retention.minutes": 60000, "log.retention.hours": 3600000}


def broker_synonyms(name: str) -> list[str]:
    """Broker keys that configure the same thing as ``name``, in Kafka's precedence."""
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return list(group)
    return [name]


# --------------------------------------------------------------------------------------------
# Topic configs (Kafka's LogConfig) and the broker keys that supply their defaults
# --------------------------------------------------------------------------------------------

def _t(name: str, type_: str, default: Any, synonyms: tuple[str, ...], doc: str,
       validator: Validator | None = None, note: str = "") -> ConfigKey:
    return ConfigKey(name, type_, default, doc, "medium", validator, "read-only", synonyms, note)


_THROTTLED = _Custom(_check_throttled, "[PARTITION:BROKER,...] or *")

TOPIC_CONFIGS: tuple[ConfigKey, ...] = (
    _t("cleanup.policy", "list", ["delete"], ("log.cleanup.policy",),
       "delete, compact, or both.", _CLEANUP),
    _t("compression.type", "string", "producer", ("compression.type",),
       "Final compression of the topic's batches; 'producer' keeps the producer's codec.",
       _COMPRESSION),
    _t("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",),
       "How long tombstones stay in a compacted topic.", Range(0)),
    _t("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",),
       "Wait before a deleted segment's files are removed.", Range(0)),
    _t("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",),
       "Messages appended before an fsync.", Range(1)),
    _t("flush.ms", "long", LONG_MAX, ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
       "Max time data stays unflushed.", Range(0)),
    _t("follower.replication.throttled.replicas", "list", [], (),
       "Replicas throttled on the follower side.", _THROTTLED),
    _t("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",),
       "Bytes of log between two offset index entries.", Range(0)),
    _t("leader.replication.throttled.replicas", "list", [], (),
       "Replicas throttled on the leader side.", _THROTTLED),
    _t("local.retention.bytes", "long", -2, ("log.local.retention.bytes",),
       "Local retention bytes with tiered storage; -2: retention.bytes.", Range(-2)),
    _t("local.retention.ms", "long", -2, ("log.local.retention.ms",),
       "Local retention with tiered storage; -2: retention.ms.", Range(-2)),
    _t("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",),
       "Max time a message stays ineligible for compaction.", Range(1)),
    _t("max.message.bytes", "int", 1048588, ("message.max.bytes",),
       "Largest record batch the topic accepts (after compression).", Range(0)),
    _t("message.downconversion.enable", "bool", True, ("log.message.downconversion.enable",),
       "Allow down-conversion for old fetch versions.", None,
       "strom stores RecordBatch v2 only and never down-converts"),
    _t("message.timestamp.after.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.after.max.ms",),
       "Max lead of a CreateTime timestamp over the broker's clock.", Range(0)),
    _t("message.timestamp.before.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.before.max.ms",),
       "Max age of a CreateTime timestamp relative to the broker's clock.", Range(0)),
    _t("message.timestamp.difference.max.ms", "long", LONG_MAX,
       ("log.message.timestamp.difference.max.ms",),
       "Max difference between a CreateTime timestamp and the broker's clock (deprecated).",
       Range(0)),
    _t("message.timestamp.type", "string", "CreateTime", ("log.message.timestamp.type",),
       "CreateTime or LogAppendTime.", _TIMESTAMP_TYPE),
    _t("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",),
       "Min dirty/total ratio for the log to be cleaned.", Range(0, 1)),
    _t("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",),
       "Min age of a message before it may be compacted.", Range(0)),
    _t("min.insync.replicas", "int", 1, ("min.insync.replicas",),
       "With acks=all, replicas that must be in sync for a write to succeed.", Range(1)),
    _t("preallocate", "bool", False, ("log.preallocate",), "Preallocate new segment files."),
    _t("remote.storage.enable", "bool", False, (), "Tiered storage for the topic.", None,
       "tiered storage is not implemented by strom"),
    _t("retention.bytes", "long", -1, ("log.retention.bytes",),
       "Max size of a partition's log before old segments are deleted; -1: no limit."),
    _t("retention.ms", "long", 604800000,
       ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
       "Time to keep a segment; -1: no limit.", Range(-1)),
    _t("segment.bytes", "int", 1073741824, ("log.segment.bytes",),
       "Max size of one segment file.", Range(14)),
    _t("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",),
       "Max size of an offset index file.", Range(4)),
    _t("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"),
       "Max jitter subtracted from segment.ms.", Range(0)),
    _t("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"),
       "Max age of the active segment before a roll.", Range(1)),
    _t("unclean.leader.election.enable", "bool", False, ("unclean.leader.election.enable",),
       "Allow an out-of-sync replica to become leader (data loss)."),
)

TOPIC_CONFIG: dict[str, ConfigKey] = {k.name: k for k in TOPIC_CONFIGS}

# Broker keys strom applies while running (AlterConfigs on a BROKER resource): the ones
# Kafka lets you change dynamically that supply topic defaults. Every topic without its own
# value, and every log on the broker, takes the new default at once.
DYNAMIC_APPLIED: frozenset[str] = frozenset(
    s for k in TOPIC_CONFIGS for s in k.synonyms if not BROKER_CONFIG[s].read_only)


# --------------------------------------------------------------------------------------------
# DescribeConfigs-shaped answers
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry; ``value`` is None when unset or sensitive."""

    name: str
    value: str | None
    source: str
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    type: str  # Kafka's type name (INT, LONG, ...); see CONFIG_TYPE_IDS
    doc: str

    @property
    def source_id(self) -> int:
        return CONFIG_SOURCE_IDS[self.source]

    @property
    def type_id(self) -> int:
        return CONFIG_TYPE_IDS[self.type]


# --------------------------------------------------------------------------------------------
# BrokerConfig
# --------------------------------------------------------------------------------------------

_NON_ROUTABLE = ("0.0.0.0", "::", "0:0:0:0:0:0:0:0")


class BrokerConfig:
    """The effective, typed configuration of one broker.

    Typed attributes: ``broker_id``, ``listeners``, ``advertised_listeners``,
    ``security_protocol_map``, ``inter_broker_listener_name``, ``log_dirs``,
    ``zookeeper_connect``, ``standalone``, ``metrics_port`` and the effective millisecond
    values ``log_retention_ms``, ``log_roll_ms``, ``log_roll_jitter_ms``,
    ``log_flush_interval_ms``, ``zookeeper_connection_timeout_ms``. Any other key reads as an
    attribute with dots turned into underscores (``cfg.num_partitions``) and is the same as
    ``cfg.get("num.partitions")``: the typed value, None where Kafka's default is null.
    """

    def __init__(self, props: Mapping[str, str | Property], *, path: str | Path | None = None,
                 overrides: Mapping[str, str] | None = None):
        self.path: Path | None = Path(path) if path is not None else None
        label = str(path) if path is not None else "<config>"
        merged: dict[str, tuple[str, str]] = {}  # key -> (raw value, where)
        for key, p in props.items():
            if isinstance(p, Property):
                merged[key] = (p.value, f"{label}:{p.line}")
            else:
                merged[key] = (p, label)
        for key, value in (overrides or {}).items():
            merged[key] = (value, "--override")

        self._where: dict[str, str] = {}
        self._raw: dict[str, str] = {}      # explicitly set known keys, as written (trimmed)
        self.unknown: dict[str, str] = {}   # set but not known: warned about, otherwise unused
        self._values: dict[str, Any] = {  # copies: a caller mutating a list must not reach the table
            k.name: list(k.default) if isinstance(k.default, list) else k.default
            for k in BROKER_CONFIGS}
        errors: list[tuple[str, str]] = []
        for key, (raw, where) in merged.items():
            spec = BROKER_CONFIG.get(key)
            if spec is None:
                self.unknown[key] = raw
                log.warning("%s: unknown config %r is ignored", where, key)
                continue
            try:
                self._values[key] = spec.parse(raw)
            except ValueError as e:
                errors.append((key, f"{where}: {key}: {e}"))
                continue
            self._raw[key] = raw.strip()
            self._where[key] = where
            if spec.note:
                log.info("%s: %s is %s", where, key, spec.note)
        if errors:
            raise ConfigError("\n".join(msg for _, msg in errors), errors[0][0])
        self._label = label
        self._static_values = dict(self._values)
        # Dynamic configs (AlterConfigs on a BROKER resource, kept by the coordinator):
        # the cluster-wide defaults and this broker's own, raw strings; see set_dynamic().
        self._dynamic: dict[str, dict[str, str]] = {DYNAMIC_DEFAULT: {}, DYNAMIC_BROKER: {}}
        self._derive()

    # ---- construction ------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        """Read ``path`` (a .properties file); ``overrides`` win over it."""
        try:
            props = read_properties(path)
        except OSError as e:
            raise ConfigError(f"{path}: cannot read config file: {e.strerror or e}") from None
        return cls(props, path=path, overrides=overrides)

    @classmethod
    def from_dict(cls, props: Mapping[str, str] | None = None) -> BrokerConfig:
        """A config from plain strings (tests, embedded brokers); all count as static config."""
        return cls(dict(props or {}))

    def _fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self._where.get(key, self._label)}: {key}: {message}", key)

    def _derive(self) -> None:
        v = self._values
        self.zookeeper_connect: str | None = v["zookeeper.connect"] or None
        self.standalone: bool = self.zookeeper_connect is None

        bid = v["broker.id"]
        if v["broker.id.generation.enable"]:
            if not -1 <= bid <= v["reserved.broker.max.id"]:
                raise self._fail("broker.id", f"{bid} must be at least -1 and at most "
                                              f"reserved.broker.max.id ({v['reserved.broker.max.id']})")
        elif bid < 0:
            raise self._fail("broker.id", f"{bid} must be at least 0")
        self.broker_id: int = 0 if bid == -1 and self.standalone else bid

        dirs = v["log.dirs"] if v["log.dirs"] is not None else v["log.dir"]
        key = "log.dirs" if v["log.dirs"] is not None else "log.dir"
        if not dirs:
            raise self._fail(key, "at least one log directory must be defined")
        if len(set(dirs)) != len(dirs):
            raise self._fail(key, f"duplicate directories in {','.join(dirs)!r}")
        self.log_dirs: list[str] = [os.path.abspath(d) for d in dirs]

        self.security_protocol_map: dict[str, str] = parse_protocol_map(
            v["listener.security.protocol.map"])
        raw_listeners = parse_listeners(v["listeners"])
        if not raw_listeners:
            raise self._fail("listeners", "at least one listener must be defined")
        ports = [lst.port for lst in raw_listeners if lst.port != 0]
        if len(set(ports)) != len(ports):
            raise self._fail("listeners", "each listener must have a different port")
        for lst in raw_listeners:
            if lst.name not in self.security_protocol_map:
                raise self._fail("listeners", f"no security protocol defined for listener "
                                              f"{lst.name} in listener.security.protocol.map")
        self.listeners: list[Listener] = [
            lst._replace(host=lst.host or "0.0.0.0") for lst in raw_listeners]

        if v["advertised.listeners"] is not None:
            adv_key, adv = "advertised.listeners", parse_listeners(v["advertised.listeners"])
            names = {lst.name for lst in raw_listeners}
            extra = [a.name for a in adv if a.name not in names]
            if extra:
                raise self._fail(adv_key, f"listener names {', '.join(extra)} are not in listeners "
                                          f"(advertised names must be a subset of them)")
        else:
            adv_key, adv = "listeners", raw_listeners
        for a in adv:
            if a.host in _NON_ROUTABLE:
                hint = "" if adv_key == "advertised.listeners" else \
                    " (advertised.listeners defaults to listeners: set it to a routable address)"
                raise self._fail(adv_key, f"cannot advertise the non-routable address {a.host} "
                                          f"in {a}{hint}")
        self.advertised_listeners: list[Listener] = [
            a._replace(host=a.host or "127.0.0.1") for a in adv]

        ibl = v["inter.broker.listener.name"]
        if ibl is not None:
            if "security.inter.broker.protocol" in self._raw:
                raise self._fail("inter.broker.listener.name",
                                 "set only one of inter.broker.listener.name and "
                                 "security.inter.broker.protocol")
            ibl_key, ibl = "inter.broker.listener.name", ibl.upper()
        else:
            ibl_key, ibl = "security.inter.broker.protocol", v["security.inter.broker.protocol"]
        if ibl not in {a.name for a in self.advertised_listeners}:
            raise self._fail(ibl_key, f"inter-broker listener {ibl} must be a listener name in "
                                      f"advertised.listeners (have: "
                                      f"{', '.join(a.name for a in self.advertised_listeners)})")
        self.inter_broker_listener_name: str = ibl

        if v["replica.fetch.wait.max.ms"] > v["replica.lag.time.max.ms"]:
            raise self._fail("replica.fetch.wait.max.ms",
                             "must not be greater than replica.lag.time.max.ms")
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise self._fail("group.min.session.timeout.ms",
                             "must not be greater than group.max.session.timeout.ms")

        self.metrics_port: int = (v["metrics.port"] if "metrics.port" in self._raw
                                  else v["strom.metrics.port"])
        self.zookeeper_connection_timeout_ms: int = (
            v["zookeeper.connection.timeout.ms"] if v["zookeeper.connection.timeout.ms"] is not None
            else v["zookeeper.session.timeout.ms"])
        self.log_roll_ms: int = self._first_of(("log.roll.ms", "log.roll.hours"))
        self.log_roll_jitter_ms: int = self._first_of(("log.roll.jitter.ms", "log.roll.jitter.hours"))
        retention = self._first_of(("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
        self.log_retention_ms: int = -1 if retention < 0 else retention  # Kafka: any negative = -1
        self.log_flush_interval_ms: int = self._first_of(
            ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))

    def _first_of(self, keys: Sequence[str], values: Mapping[str, Any] | None = None) -> Any:
        """The first non-null of keys, scaled to milliseconds (Kafka's synonym converters)."""
        values = self._values if values is None else values
        for k in keys:
            val = values[k]
            if val is not None:
                return val * _SYNONYM_SCALE[k] if k in _SYNONYM_SCALE else val
        return None

    # ---- reading -----------------------------------------------------------------------

    def __getattr__(self, attr: str) -> Any:
        if not attr.startswith("_"):
            key = attr.replace("_", ".")
            if key in BROKER_CONFIG:
                return self._values[key]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {attr!r}")

    def get(self, name: str) -> Any:
        """The typed value of a broker key (None where unset and Kafka's default is null)."""
        if name not in BROKER_CONFIG:
            raise KeyError(f"unknown broker config {name!r}")
        return self._values[name]

    def values(self) -> dict[str, Any]:
        """Every broker key with its typed effective value (defaults included)."""
        return dict(self._values)

    def source(self, name: str) -> str:
        """Where the effective value comes from: "DYNAMIC_BROKER_CONFIG" (set for this broker
        with AlterConfigs), "DYNAMIC_DEFAULT_BROKER_CONFIG" (set for all brokers),
        "STATIC_BROKER_CONFIG" (the file or an override) or "DEFAULT_CONFIG"."""
        if name not in BROKER_CONFIG:
            raise KeyError(f"unknown broker config {name!r}")
        for source in (DYNAMIC_BROKER, DYNAMIC_DEFAULT):
            if name in self._dynamic[source]:
                return source
        return STATIC if name in self._raw else DEFAULT

    # ---- dynamic configs -----------------------------------------------------------------

    def check_dynamic(self, configs: Mapping[str, str], per_broker: bool) -> None:
        """Validate what AlterConfigs would store for the BROKER resource (this broker's id
        when `per_broker`, else "" for the cluster-wide defaults): Kafka's rules
        (DynamicBrokerConfig.validateConfigs) plus strom's own limit, the keys it applies
        while running. ConfigError names the first offending key."""
        for key, raw in configs.items():
            spec = BROKER_CONFIG.get(key)
            if spec is None:
                raise ConfigError(f"Unknown broker config: {key}", key)
            if spec.read_only:
                raise ConfigError(f"Cannot update these configs dynamically: Set({key})", key)
            if not per_broker and spec.update_mode == PB:
                raise ConfigError("Cannot update these configs at default cluster level, broker "
                                  f"id must be specified: Set({key})", key)
            if key not in DYNAMIC_APPLIED:
                raise ConfigError(f"strom does not apply {key} while running; set it in "
                                  f"server.properties (strom's dynamic broker configs are the "
                                  f"topic defaults: log.*, message.max.bytes, compression.type, "
                                  f"min.insync.replicas, unclean.leader.election.enable)", key)
            if raw is None:
                raise ConfigError(f"Invalid value null for configuration {key}", key)
            try:
                spec.parse(raw)
            except ValueError as e:
                raise ConfigError(f"Invalid value {raw} for configuration {key}: {e}", key) from None

    def _layered(self, defaults: Mapping[str, str], own: Mapping[str, str]
                 ) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
        """The typed values and the kept raw layers if these dynamic configs were in force
        (this broker's own over the cluster-wide defaults over the file). Entries this
        broker cannot apply are skipped with a warning."""
        values = dict(self._static_values)
        layers: dict[str, dict[str, str]] = {}
        for source, props in ((DYNAMIC_DEFAULT, defaults), (DYNAMIC_BROKER, own)):
            kept: dict[str, str] = {}
            for key, raw in props.items():
                try:
                    self.check_dynamic({key: raw}, per_broker=source == DYNAMIC_BROKER)
                except ConfigError as e:
                    log.warning("dynamic broker config %s=%r ignored: %s", key, raw, e)
                    continue
                values[key] = BROKER_CONFIG[key].parse(raw)
                kept[key] = raw.strip()
            layers[source] = kept
        return values, layers

    def topic_defaults_with(self, defaults: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
        """What topic_defaults() would be with these dynamic configs (nothing changes)."""
        return self._topic_defaults(self._layered(defaults, own)[0])

    def set_dynamic(self, defaults: Mapping[str, str], own: Mapping[str, str],
                    validate: Callable[[dict[str, str]], Any] | None = None) -> set[str]:
        """Put the dynamic configs as the coordinator stores them in force; the keys whose
        effective value changed. Entries this broker cannot apply (written by another tool
        or version) are skipped with a warning. `validate(topic defaults)` may raise
        ValueError: then nothing changes (logged), as when the combination fails here."""
        values, layers = self._layered(defaults, own)
        try:
            if validate is not None:
                validate(self._topic_defaults(values))
        except ValueError as e:
            log.error("dynamic broker configs not applied: %s", e)
            return set()
        changed = {k for k, v in values.items() if v != self._values[k]}
        old_values, old_layers = self._values, self._dynamic
        self._values, self._dynamic = values, layers
        try:
            self._derive()
        except ConfigError as e:          # a combination the file alone would not allow
            log.error("dynamic broker configs not applied: %s", e)
            self._values, self._dynamic = old_values, old_layers
            self._derive()
            return set()
        return changed

    def where(self, name: str) -> str | None:
        """Where a key was set: "path:line", "--override", or None for a default."""
        return self._where.get(name)

    def security_protocol(self, listener_name: str) -> str:
        return self.security_protocol_map[listener_name.upper()]

    def topic_defaults(self) -> dict[str, str]:
        """Every topic config's effective default on this broker, as Kafka's strings."""
        return self._topic_defaults(self._values)

    def _topic_defaults(self, values: Mapping[str, Any]) -> dict[str, str]:
        return {k.name: self._topic_default_string(k, values) for k in TOPIC_CONFIGS}

    def _topic_default_string(self, spec: ConfigKey, values: Mapping[str, Any] | None = None) -> str:
        value = self._first_of(spec.synonyms, values) if spec.synonyms else None
        if value is None:
            value = spec.default
        if spec.name == "retention.ms" and value < 0:
            value = -1
        return to_config_string(spec.type, value) or ""

    def topic_config(self, overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Typed effective config of a topic: its validated overrides on this broker's defaults."""
        strings = self.topic_defaults()
        strings.update(TopicConfigs.validate(overrides or {}))
        return {name: TOPIC_CONFIG[name].parse(s) for name, s in strings.items()}

    # ---- DescribeConfigs -----------------------------------------------------------------

    def _config_synonyms(self, name: str, synonyms: Sequence[str],
                         sensitive: bool) -> list[ConfigSynonym]:
        """Kafka's ConfigHelper.configSynonyms: static values, then defaults, in synonym order,
        with everything before the first entry for ``name`` dropped."""
        out: list[ConfigSynonym] = []
        for source in (DYNAMIC_BROKER, DYNAMIC_DEFAULT):
            layer = self._dynamic[source]
            for s in synonyms:
                if s in layer:
                    out.append(ConfigSynonym(s, None if sensitive else layer[s], source))
        for s in synonyms:
            if s in self._raw:
                out.append(ConfigSynonym(s, None if sensitive else self._raw[s], STATIC))
        for s in synonyms:
            d = BROKER_CONFIG[s].default_string()
            if d is not None:
                out.append(ConfigSynonym(s, None if sensitive else d, DEFAULT))
        while out and out[0].name != name:
            out.pop(0)
        return out

    def describe(self, name: str) -> ConfigEntry:
        """The DescribeConfigs entry of a broker key (resource type BROKER)."""
        spec = BROKER_CONFIG[name]
        synonyms = self._config_synonyms(name, broker_synonyms(name), spec.is_sensitive)
        value = None if spec.is_sensitive else to_config_string(spec.type, self._values[name])
        return ConfigEntry(name, value, synonyms[0].source if synonyms else DEFAULT,
                           spec.read_only, spec.is_sensitive, tuple(synonyms), spec.kafka_type,
                           spec.doc)

    def describe_all(self) -> list[ConfigEntry]:
        return [self.describe(k.name) for k in BROKER_CONFIGS]

    def describe_dynamic_defaults(self) -> list[ConfigEntry]:
        """DescribeConfigs of the cluster-wide entity (resource name ""): its dynamic
        configs only, with the values set there and only that entity's synonyms (Kafka's
        createBrokerConfigEntry with perBrokerConfig=false)."""
        out = []
        for k in BROKER_CONFIGS:
            value = self._dynamic[DYNAMIC_DEFAULT].get(k.name)
            if value is None:
                continue
            synonyms = [s for s in self._config_synonyms(k.name, broker_synonyms(k.name),
                                                          k.is_sensitive)
                        if s.source == DYNAMIC_DEFAULT]
            out.append(ConfigEntry(k.name, None if k.is_sensitive else value, DYNAMIC_DEFAULT,
                                   k.read_only, k.is_sensitive, tuple(synonyms), k.kafka_type,
                                   k.doc))
        return out

    def describe_topic(self, name: str, overrides: Mapping[str, str] | None = None) -> ConfigEntry:
        """The DescribeConfigs entry of a topic config, given the topic's own overrides."""
        spec = TOPIC_CONFIG[name]
        overrides = overrides or {}
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            value: str | None = overrides[name]
            synonyms.append(ConfigSynonym(name, value, TOPIC))
        else:
            value = self._topic_default_string(spec)
        if spec.synonyms:
            first = spec.synonyms[0]
            synonyms += self._config_synonyms(first, broker_synonyms(first), spec.is_sensitive)
        return ConfigEntry(name, value, synonyms[0].source if synonyms else DEFAULT, False,
                           spec.is_sensitive, tuple(synonyms), spec.kafka_type, spec.doc)

    def describe_topic_all(self, overrides: Mapping[str, str] | None = None) -> list[ConfigEntry]:
        return [self.describe_topic(k.name, overrides) for k in TOPIC_CONFIGS]

    def __repr__(self) -> str:
        return f"BrokerConfig(path={str(self.path)!r}, broker_id={self.broker_id})"


# --------------------------------------------------------------------------------------------
# Topic config validation (CreateTopics, AlterConfigs)
# --------------------------------------------------------------------------------------------

class TopicConfigs:
    """Validation of per-topic config overrides, with Kafka's error messages."""

    @staticmethod
    def names() -> list[str]:
        return sorted(TOPIC_CONFIG)

    @staticmethod
    def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
        """Return the overrides with values trimmed; raise ConfigError (INVALID_CONFIG) naming
        the first bad key: an unknown name, a null value or a value of the wrong type/range."""
        out: dict[str, str] = {}
        typed: dict[str, Any] = {}
        for name, raw in configs.items():
            spec = TOPIC_CONFIG.get(name)
            if spec is None:
                raise ConfigError(f"Unknown topic config name: {name}", name)
            if raw is None:
                raise ConfigError(f"Null value not supported for topic configs: {name}", name)
            try:
                typed[name] = spec.parse(raw)
            except ValueError as e:
                raise ConfigError(f"Invalid value {raw.strip()} for configuration {name}: {e}",
                                  name) from None
            out[name] = raw.strip()
        lo = typed.get("min.compaction.lag.ms", TOPIC_CONFIG["min.compaction.lag.ms"].default)
        hi = typed.get("max.compaction.lag.ms", TOPIC_CONFIG["max.compaction.lag.ms"].default)
        if lo > hi:
            key = "min.compaction.lag.ms" if "min.compaction.lag.ms" in typed else "max.compaction.lag.ms"
            raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                              f"max.compaction.lag.ms ({hi})", key)
        return out


# --------------------------------------------------------------------------------------------
# python -m broker.config FILE: print the effective config
# --------------------------------------------------------------------------------------------

def _print_table(rows: Iterable[tuple[str, str, str]], out: Any) -> None:
    rows = list(rows)
    w0 = max(len(r[0]) for r in rows)
    w1 = min(max(len(r[1]) for r in rows), 32)
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:<{w1}}  {c}".rstrip(), file=out)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m broker.config",
                                 description="Print a broker's effective configuration.")
    ap.add_argument("config", help="server.properties file")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="override a property of the file (repeatable)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--override {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        overrides[key.strip()] = value
    try:
        cfg = BrokerConfig.load(args.config, overrides)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    out = sys.stdout
    print(f"# effective broker config of {args.config}", file=out)
    print(f"# broker id {cfg.broker_id}, "
          f"{'standalone' if cfg.standalone else 'ZooKeeper ' + str(cfg.zookeeper_connect)}",
          file=out)
    print(f"# binds      {', '.join(map(str, cfg.listeners))}", file=out)
    print(f"# advertises {', '.join(map(str, cfg.advertised_listeners))}", file=out)
    print(f"# log dirs   {', '.join(cfg.log_dirs)}", file=out)
    rows = []
    for spec in sorted(BROKER_CONFIGS, key=lambda k: k.name):
        value = cfg.get(spec.name)
        text = "null" if value is None else (
            "[hidden]" if spec.is_sensitive else to_config_string(spec.type, value) or '""')
        rows.append((spec.name, text, cfg.where(spec.name) or "default"))
    _print_table(rows, out)
    print("\n# topic defaults on this broker", file=out)
    _print_table(((k, v, "") for k, v in sorted(cfg.topic_defaults().items())), out)
    if cfg.unknown:
        print(f"\n# unknown keys (ignored): {', '.join(sorted(cfg.unknown))}", file=out)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `... | head`: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
