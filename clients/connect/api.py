"""The connector API: what a connector written in Python implements, as Kafka Connect's.

A connector is a `SourceConnector` (external system -> topics) or a `SinkConnector`
(topics -> external system); it splits its work into task configs, and the worker runs one
`SourceTask` / `SinkTask` per config. Names follow Kafka's Java API in snake_case
(`taskConfigs` -> `task_configs`, `poll`, `put`, `flush`, `preCommit` -> `pre_commit`).

Threads: a task or connector method written `async def` runs on the worker's event loop
and must not block; a plain method runs in the task's own thread (one thread per task, as
Kafka runs each task), so a blocking `poll()` stalls only its task. The worker calls one
task's methods one at a time.

Records carry Connect's data model (`clients.connect.data`): a value with an optional
schema. Converters turn them into bytes and back; transforms rewrite them in between.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Awaitable, Mapping, Sequence

from clients.types import TopicPartition

from .config_def import ConfigDef, ConfigValue, validate_config

__all__ = ["ConnectRecord", "SourceRecord", "SinkRecord", "Connector", "SourceConnector",
           "SinkConnector", "Task", "SourceTask", "SinkTask", "ConnectorContext",
           "SourceTaskContext", "SinkTaskContext", "OffsetStorageReader", "ConnectError",
           "RetriableError", "ExactlyOnceSupport", "ConnectorTransactionBoundaries",
           "MaybeAwaitable"]

MaybeAwaitable = Any    # a value, or an awaitable of it (an `async def` method's result)


class ConnectError(Exception):
    """A connector or task failed; the worker marks it FAILED with this message (Kafka's
    ConnectException)."""


class RetriableError(ConnectError):
    """A sink task's put()/flush() may be retried after a pause (Kafka's RetriableException)."""


# --------------------------------------------------------------------------- records

@dataclass(slots=True)
class ConnectRecord:
    """One record in Connect's data model. `headers` are (key, value) pairs; a value is
    bytes, str, a number, a bool or None. `timestamp` is epoch milliseconds or None.
    Treat records as immutable (transforms make new ones with new_record()); they are not
    frozen only because a frozen dataclass costs ~3x more to build, and sources build
    100,000s per second."""

    topic: str
    kafka_partition: int | None
    key_schema: Any          # clients.connect.data.Schema or None
    key: Any
    value_schema: Any
    value: Any
    timestamp: int | None = None
    headers: tuple[tuple[str, Any], ...] = ()

    def new_record(self, **changes: Any) -> "ConnectRecord":
        """A copy with some fields replaced (Kafka's newRecord); headers may be any sequence."""
        if "headers" in changes:
            changes["headers"] = tuple(changes["headers"])
        return dataclasses.replace(self, **changes)


@dataclass(slots=True)
class SourceRecord(ConnectRecord):
    """A record from a source task. `source_partition` names where in the external system
    it came from (e.g. {"filename": "/var/log/app.log"}), `source_offset` how far that
    partition was read (e.g. {"position": 1234}); both JSON-able dicts. The worker stores the
    offset once the record is written, and gives it back through the OffsetStorageReader
    after a restart."""

    source_partition: Mapping[str, Any] | None = None
    source_offset: Mapping[str, Any] | None = None


@dataclass(slots=True)
class SinkRecord(ConnectRecord):
    """A record a sink task receives: where it was read, and its timestamp's type
    ("CreateTime", "LogAppendTime" or "NoTimestampType")."""

    kafka_offset: int = -1
    timestamp_type: str = "CreateTime"


# --------------------------------------------------------------------------- contexts

class OffsetStorageReader:
    """The stored source offsets of one connector: the last committed offset of each
    source partition (a dict), or None. Reads the worker's in-memory copy: safe from any
    thread, never blocks."""

    def __init__(self, lookup: Any):
        self._lookup = lookup   # (partition dict) -> offset dict | None

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self._lookup(dict(partition))

    def offsets(self, partitions: Sequence[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
        """Keyed by each partition as a tuple of sorted items (dicts are not hashable)."""
        out = {}
        for p in partitions:
            found = self.offset(p)
            if found is not None:
                out[tuple(sorted(p.items()))] = found
        return out


class ConnectorContext:
    """What a connector may ask of the worker."""

    def __init__(self, reconfigure: Any, fail: Any):
        self._reconfigure = reconfigure
        self._fail = fail

    def request_task_reconfiguration(self) -> None:
        """Ask for task_configs() again (the input changed: a new file, a new table)."""
        self._reconfigure()

    def raise_error(self, error: BaseException) -> None:
        """Mark the connector FAILED with this error."""
        self._fail(error)


class SourceTaskContext:
    def __init__(self, configs: Mapping[str, str], offset_storage_reader: OffsetStorageReader):
        self._configs = dict(configs)
        self.offset_storage_reader = offset_storage_reader

    def configs(self) -> dict[str, str]:
        return dict(self._configs)


class SinkTaskContext:
    """A sink task's requests to its worker: rewind (`offset`), pause, resume, commit."""

    def __init__(self, configs: Mapping[str, str]):
        self._configs = dict(configs)
        self.requested_offsets: dict[TopicPartition, int] = {}
        self.requested_timeout_ms: int | None = None
        self.paused: set[TopicPartition] = set()
        self.commit_requested = False
        self._assignment: set[TopicPartition] = set()

    def configs(self) -> dict[str, str]:
        return dict(self._configs)

    def offset(self, tp_or_offsets: TopicPartition | Mapping[TopicPartition, int],
               offset: int | None = None) -> None:
        """Read these partitions from these offsets next (the sink keeps its own offsets)."""
        if isinstance(tp_or_offsets, TopicPartition):
            assert offset is not None, "offset(tp, offset)"
            self.requested_offsets[tp_or_offsets] = offset
        else:
            self.requested_offsets.update(tp_or_offsets)

    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableError, wait this long before put() is tried again."""
        self.requested_timeout_ms = timeout_ms

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def request_commit(self) -> None:
        self.commit_requested = True


# --------------------------------------------------------------------------- connectors

class ExactlyOnceSupport:
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries:
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector:
    """Base of both kinds. Subclasses implement start, task_class, task_configs, stop and
    config; version() defaults to strom's."""

    context: ConnectorContext

    def version(self) -> str:
        from clients.aio import STROM_VERSION
        return STROM_VERSION

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def start(self, props: dict[str, str]) -> MaybeAwaitable:
        raise NotImplementedError

    def task_class(self) -> type["Task"]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        raise NotImplementedError

    def stop(self) -> MaybeAwaitable:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        return ConfigDef()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """Each declared key's parsed value and errors (Kafka's Connector.validate)."""
        return validate_config(self.config(), props)


class SourceConnector(Connector):
    def exactly_once_support(self, props: Mapping[str, str]) -> str | None:
        """SUPPORTED when the tasks' offsets make re-reading exact (KIP-618); None: unknown."""
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> str:
        return ConnectorTransactionBoundaries.UNSUPPORTED


class SinkConnector(Connector):
    pass


class Task:
    def version(self) -> str:
        from clients.aio import STROM_VERSION
        return STROM_VERSION

    def start(self, props: dict[str, str]) -> MaybeAwaitable:
        raise NotImplementedError

    def stop(self) -> MaybeAwaitable:
        raise NotImplementedError


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    def poll(self) -> "list[SourceRecord] | None | Awaitable[list[SourceRecord] | None]":
        """The next records, or None/[] when there are none yet. A plain poll() may block a
        little (it runs in the task's thread); an async one should await its input."""
        raise NotImplementedError

    def commit(self) -> MaybeAwaitable:
        """The worker stored the offsets of everything poll() returned so far."""
        return None

    def commit_record(self, record: SourceRecord, metadata: Any) -> MaybeAwaitable:
        """One record was written (metadata: its RecordMetadata, None if a transform dropped it)."""
        return None


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def open(self, partitions: list[TopicPartition]) -> MaybeAwaitable:
        return None

    def close(self, partitions: list[TopicPartition]) -> MaybeAwaitable:
        return None

    def put(self, records: list[SinkRecord]) -> MaybeAwaitable:
        raise NotImplementedError

    def flush(self, current_offsets: dict[TopicPartition, int]) -> MaybeAwaitable:
        """Make everything put() so far durable in the external system."""
        return None

    def pre_commit(self, current_offsets: dict[TopicPartition, int]
                   ) -> "dict[TopicPartition, int] | Awaitable[dict[TopicPartition, int]]":
        """The offsets to commit (next offset to read per partition); by default flush()
        and commit what was put."""
        return current_offsets
