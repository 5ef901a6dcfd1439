"""The options of `.format("strom")`: Spark's Kafka source and sink options, parsed once.

Names and meanings are those of Spark's Kafka integration (spark-sql-kafka-0-10), so a job
written for `.format("kafka")` runs with `.format("strom")` unchanged:

  kafka.bootstrap.servers                       required
  subscribe | subscribePattern | assign         exactly one (source)
  startingOffsets / endingOffsets               "earliest" / "latest" / per-partition JSON
  startingTimestamp / startingOffsetsByTimestamp, endingTimestamp / endingOffsetsByTimestamp
  startingOffsetsByTimestampStrategy            "error" (default) or "latest"
  maxOffsetsPerTrigger, minOffsetsPerTrigger, maxTriggerDelay     streaming admission control
  failOnDataLoss (true), includeHeaders (false), minPartitions, maxRecordsPerPartition
  topic                                         sink: the default topic
  kafka.*                                       passed to strom's client (consumer or producer)

Spark hands the options over as a case-insensitive dict; everything here is plain data
(picklable), because the parsed options travel to the executors inside input partitions.
Errors are `ValueError`s worded as Spark's Kafka source words them (Spark shows them as
IllegalArgumentException).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from clients.config import ConfigError, resolve

__all__ = ["SourceOptions", "SinkOptions", "OffsetSpec", "parse_source_options",
           "parse_sink_options", "EARLIEST", "LATEST", "parse_duration_ms"]

EARLIEST = -2
LATEST = -1

# Consumer settings Spark's Kafka source refuses, with the option to use instead.
_UNSUPPORTED_CONSUMER = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the "
                         "source option 'startingOffsets' to 'earliest' or 'latest' to specify "
                         "where to start.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are always "
                        "deserialized as byte arrays. Use DataFrame operations to explicitly "
                        "deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are "
                          "always deserialized as byte arrays. Use DataFrame operations to "
                          "explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported, as offsets are "
                          "tracked by the query's checkpoint, not committed to Kafka.",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
}
_UNSUPPORTED_PRODUCER = {
    "key.serializer": "Kafka option 'key.serializer' is not supported, as keys are always "
                      "serialized with ByteArraySerializer. Use DataFrame operations to "
                      "explicitly serialize the keys into either strings or byte arrays.",
    "value.serializer": "Kafka option 'value.serializer' is not supported, as values are "
                        "always serialized with ByteArraySerializer. Use DataFrame operations "
                        "to explicitly serialize the values into either strings or byte arrays.",
}
# Spark-only consumer keys that strom's client does not know: accepted, without effect.
_IGNORED_CONSUMER = {"group.id", "session.timeout.ms", "heartbeat.interval.ms",
                     "max.poll.records", "max.poll.interval.ms"}
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|"
                       r"hours?)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000,
                "secs": 1000, "second": 1000, "seconds": 1000, "m": 60_000, "min": 60_000,
                "mins": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000,
                "hour": 3_600_000, "hours": 3_600_000}


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: "earliest", "latest", per-partition offsets
    ({topic: {partition: offset}}, -2 earliest, -1 latest), per-partition timestamps or one
    global timestamp (ms)."""

    kind: str                                   # earliest | latest | offsets | timestamps | timestamp
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps({t: {str(p): o for p, o in ps.items()}
                           for t, ps in self.offsets.items()})


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    client_config: dict[str, Any]               # kafka.* without the prefix (consumer keys)
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None

    @property
    def read_committed(self) -> bool:
        return str(self.client_config.get("isolation.level", "")).lower() == "read_committed"

    @property
    def isolation_level(self) -> str:
        return "read_committed" if self.read_committed else "read_uncommitted"

    def describe_subscription(self) -> str:
        if self.assign is not None:
            return f"assign {json.dumps({t: list(p) for t, p in self.assign.items()})}"
        if self.pattern is not None:
            return f"subscribePattern {self.pattern}"
        return f"subscribe {','.join(self.subscribe)}"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    client_config: dict[str, Any]               # kafka.* without the prefix (producer keys)
    topic: str | None = None
    exactly_once: bool = False                  # exactlyOnce: two-phase commit (exactly_once.py)
    transactional_id_prefix: str = "strom-spark-"


# How long a prepared transaction of the exactly-once sink may wait for the driver's commit:
# the broker's default transaction.max.timeout.ms.
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 900_000

# Default split of a big offset range (records per Spark input partition); Spark's Kafka
# source has no default, but one task per Kafka partition leaves cores idle when partitions
# are few or uneven, and Python decoding is the bottleneck of this source.
DEFAULT_MAX_RECORDS_PER_PARTITION = 250_000


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _kafka_params(opts: dict[str, str]) -> tuple[str, dict[str, Any]]:
    params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    bootstrap = params.pop("bootstrap.servers", None)
    if not bootstrap or not str(bootstrap).strip():
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                         "Kafka consumer")
    return str(bootstrap), params


def _check_client_config(kind: str, bootstrap: str, params: dict[str, Any]) -> None:
    try:
        resolve(kind, {"bootstrap.servers": bootstrap, **params})
    except ConfigError as e:
        raise ValueError(f"Invalid Kafka option: kafka.{e}") from None


def _int_option(opts: dict[str, str], name: str, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"Invalid value '{raw}' for option '{name}', must be a positive "
                         f"integer") from None
    if value < minimum:
        raise ValueError(f"Invalid value '{raw}' for option '{name}', must be a positive "
                         f"integer")
    return value


def _bool_option(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"Invalid value '{raw}' for option '{name}', must be true or false")
    return value == "true"


def parse_duration_ms(raw: str, name: str) -> int:
    """Spark's duration strings for maxTriggerDelay: "15m", "30s", "500ms", "2 minutes"."""
    m = _DURATION.match(str(raw))
    if not m:
        raise ValueError(f"Invalid value '{raw}' for option '{name}': expected a duration "
                         f"such as 500ms, 30s, 15m or 1h")
    unit = (m.group(2) or "ms").lower()
    return int(m.group(1)) * _DURATION_MS[unit]


def _json_object(raw: str, name: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, "
                         f"got {raw} (option '{name}': {e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, "
                         f"got {raw} (option '{name}')")
    return value


def _partition_map(raw: str, name: str) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {raw} "
                             f"(option '{name}')")
        try:
            out[str(topic)] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            raise ValueError(f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}}}}, got {raw} "
                             f"(option '{name}')") from None
    return out


def _partitions_at(spec: OffsetSpec, sentinel: int) -> list[str]:
    """"topic-partition" of each partition a per-partition offsets spec sets to `sentinel`."""
    if spec.kind != "offsets":
        return []
    return [f"{t}-{p}" for t, ps in spec.offsets.items() for p, o in ps.items() if o == sentinel]


def _offset_spec(opts: dict[str, str], prefix: str, default: str) -> OffsetSpec:
    """startingOffsets / startingOffsetsByTimestamp / startingTimestamp (or ending*): the
    global timestamp wins over per-partition timestamps, which win over offsets (Spark's
    precedence)."""
    ts = opts.get(f"{prefix}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(str(ts).strip()))
        except ValueError:
            raise ValueError(f"Invalid value '{ts}' for option '{prefix}Timestamp': must be "
                             f"a timestamp in milliseconds") from None
    by_ts = opts.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=_partition_map(by_ts, f"{prefix}OffsetsByTimestamp"))
    raw = opts.get(f"{prefix}offsets")
    if raw is None:
        return OffsetSpec(default)
    value = str(raw).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    return OffsetSpec("offsets", offsets=_partition_map(value, f"{prefix}Offsets"))


def _subscription(opts: dict[str, str]) -> dict[str, Any]:
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    names = {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}
    if len(strategies) != 1:
        if not strategies:
            raise ValueError("One of the following options must be specified for Kafka source: "
                             "subscribe, subscribePattern, assign. See the docs for more details.")
        raise ValueError("Only one of the following options can be specified for Kafka source: "
                         "subscribe, subscribePattern, assign. See the docs for more details. "
                         f"Given: {', '.join(names[s] for s in strategies)}")
    kind = strategies[0]
    raw = str(opts[kind])
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ValueError(f"No topics to subscribe to as specified value for option "
                             f"'subscribe' is '{raw}'")
        return {"subscribe": topics}
    if kind == "subscribepattern":
        if not raw.strip():
            raise ValueError(f"Pattern to subscribe is empty as specified value for option "
                             f"'subscribePattern' is '{raw}'")
        try:
            re.compile(raw.strip())
        except re.error as e:
            raise ValueError(f"Invalid value '{raw}' for option 'subscribePattern': {e}") from None
        return {"pattern": raw.strip()}
    value = _json_object(raw, "assign")
    assign: dict[str, tuple[int, ...]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise ValueError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {raw} "
                             f"(option 'assign')")
        assign[str(topic)] = tuple(sorted(set(parts)))
    if not any(assign.values()):
        raise ValueError(f"No topicpartitions to assign as specified value for option "
                         f"'assign' is '{raw}'")
    return {"assign": assign}


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """Validate and parse the source options of one query (batch or streaming)."""
    opts = _lower(options)
    bootstrap, params = _kafka_params(opts)
    for key, message in _UNSUPPORTED_CONSUMER.items():
        if key in params:
            raise ValueError(message)
    client = {k: v for k, v in params.items() if k not in _IGNORED_CONSUMER}
    _check_client_config("consumer", bootstrap, client)
    sub = _subscription(opts)

    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest")
    ending = _offset_spec(opts, "ending", "latest")
    has_ending = any(k in opts for k in ("endingoffsets", "endingtimestamp",
                                         "endingoffsetsbytimestamp"))
    if streaming and has_ending:
        raise ValueError("Ending offset not valid in streaming queries")
    if not streaming:
        if starting.kind == "latest":
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        bad = _partitions_at(starting, LATEST)
        if bad:
            raise ValueError(f"startingOffsets for {', '.join(bad)} can't be latest for batch "
                             f"queries on Kafka")
        if ending.kind == "earliest":
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        bad = _partitions_at(ending, EARLIEST)
        if bad:
            raise ValueError(f"Ending offset for {', '.join(bad)} can't be earliest for batch "
                             f"queries on Kafka")
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"Invalid value '{strategy}' for option "
                         f"'startingOffsetsByTimestampStrategy', must be error or latest")
    delay = opts.get("maxtriggerdelay")
    max_per_partition = _int_option(opts, "maxRecordsPerPartition")
    return SourceOptions(
        bootstrap=bootstrap, client_config=client,
        subscribe=sub.get("subscribe", ()), pattern=sub.get("pattern"), assign=sub.get("assign"),
        starting=starting, ending=ending, by_timestamp_strategy=strategy,
        max_offsets_per_trigger=_int_option(opts, "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_int_option(opts, "minOffsetsPerTrigger"),
        max_trigger_delay_ms=(parse_duration_ms(delay, "maxTriggerDelay") if delay is not None
                              else 15 * 60_000),
        fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
        include_headers=_bool_option(opts, "includeHeaders", False),
        min_partitions=_int_option(opts, "minPartitions"),
        max_records_per_partition=(max_per_partition if max_per_partition is not None
                                   else DEFAULT_MAX_RECORDS_PER_PARTITION),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate and parse the sink options (`topic`, kafka.*)."""
    opts = _lower(options)
    params = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    bootstrap = params.pop("bootstrap.servers", None)
    if not bootstrap or not str(bootstrap).strip():
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                         "Kafka producer")
    for key, message in _UNSUPPORTED_PRODUCER.items():
        if key in params:
            raise ValueError(message)
    _check_client_config("producer", str(bootstrap), params)
    topic = opts.get("topic")
    if topic is not None and not str(topic).strip():
        raise ValueError("Option 'topic' must not be empty")
    exactly_once = _bool_option(opts, "exactlyOnce", False)
    prefix = str(opts.get("transactionalidprefix", "strom-spark-"))
    if exactly_once:
        if "transactional.id" in params:
            raise ValueError("Kafka option 'transactional.id' is not supported with "
                             "exactlyOnce: each task gets its own; set transactionalIdPrefix")
        params.setdefault("transaction.timeout.ms", str(EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS))
    elif "transactional.id" in params:
        raise ValueError("Kafka option 'transactional.id' is not supported: set "
                         "exactlyOnce=true for transactional writes")
    return SinkOptions(str(bootstrap), params, str(topic).strip() if topic is not None else None,
                       exactly_once, prefix)

