"""Connector and task configurations: Kafka Connect's config topic format and the stores.

Records (keys are UTF-8 strings, values JSON as Kafka's JsonConverter writes them):

    connector-<name>     {"properties":{...}}             null: the connector was deleted
    task-<name>-<i>      {"properties":{...}}             task i of the next generation
    commit-<name>        {"tasks":n}                      tasks 0..n-1 written before apply
    target-state-<name>  {"state":"PAUSED","state.v2":"STOPPED"}   (v2 readers take state.v2;
                         STOPPED is written as PAUSED in "state" for older workers)
    restart-connector-<name>  {"include-tasks":b,"only-failed":b}
    tasks-fencing-<name> {"task-count":n}                 (exactly-once source, KIP-618)
    session-key          {"key":base64,"algorithm":"HmacSHA256","creation-timestamp":ms}

Task configs become visible only with the commit record that follows them: the reader
buffers `task-` records per connector and applies them when `commit-<name>` says how many
tasks there are, provided configs for tasks 0..n-1 were all seen (else, as after
compaction lost some, the connector is `inconsistent` until the next complete commit).

`ConfigStore.snapshot()` is a copy; listeners get events (`ConnectorConfigUpdated`, ...)
on the event loop in topic order, once the store has started (the initial read of the
topic fires none). `MemoryConfigStore` (standalone) runs the same reader over records
kept in memory; `KafkaConfigStore` over the config topic (exactly one partition).
"""
from __future__ import annotations

import base64
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from clients.types import ConsumerRecord

from ..api import ConnectError
from .kafka_log import KafkaBasedLog
from .offset_store import dumps_json

__all__ = ["ClusterConfigState", "SessionKey", "ConfigStore", "MemoryConfigStore",
           "KafkaConfigStore", "ConfigEvent", "ConnectorConfigUpdated", "ConnectorRemoved",
           "TasksCommitted", "TargetStateChanged", "RestartRequested",
           "TARGET_STATES", "encode_config_record", "connector_key", "task_key", "commit_key",
           "target_state_key", "restart_key", "task_count_key", "SESSION_KEY_KEY"]

log = logging.getLogger("strom.connect.configs")

TARGET_STATES = ("STARTED", "PAUSED", "STOPPED")
SESSION_KEY_KEY = "session-key"


def connector_key(name: str) -> str:
    return "connector-" + name


def task_key(name: str, task: int) -> str:
    return f"task-{name}-{task}"


def commit_key(name: str) -> str:
    return "commit-" + name


def target_state_key(name: str) -> str:
    return "target-state-" + name


def restart_key(name: str) -> str:
    return "restart-connector-" + name


def task_count_key(name: str) -> str:
    return "tasks-fencing-" + name


def encode_config_record(kind: str, **fields: Any) -> bytes:
    """The JSON value of a config record, fields in Kafka's schema order: kind
    "connector"/"task" (properties), "commit" (tasks), "target_state" (state),
    "restart" (include_tasks, only_failed), "task_count" (task_count), "session_key"
    (key: bytes, algorithm, creation_timestamp)."""
    if kind in ("connector", "task"):
        return dumps_json({"properties": dict(fields["properties"])})
    if kind == "commit":
        return dumps_json({"tasks": int(fields["tasks"])})
    if kind == "target_state":
        state = fields["state"]
        return dumps_json({"state": "PAUSED" if state == "STOPPED" else state,
                           "state.v2": state})
    if kind == "restart":
        return dumps_json({"include-tasks": bool(fields["include_tasks"]),
                           "only-failed": bool(fields["only_failed"])})
    if kind == "task_count":
        return dumps_json({"task-count": int(fields["task_count"])})
    if kind == "session_key":
        return dumps_json({"key": base64.b64encode(fields["key"]).decode("ascii"),
                           "algorithm": fields["algorithm"],
                           "creation-timestamp": int(fields["creation_timestamp"])})
    raise ValueError(f"unknown config record kind {kind!r}")


# --------------------------------------------------------------------------- state + events

@dataclass(frozen=True)
class SessionKey:
    """The key workers sign internal REST requests with (KIP-507)."""

    key: bytes
    algorithm: str
    creation_timestamp: int


@dataclass
class ClusterConfigState:
    """A snapshot of the config topic (Kafka's ClusterConfigState). `offset`: the next
    offset of the topic to be read (-1: nothing read). `task_configs[c]` holds the
    committed generation of tasks 0..task_count(c)-1, empty while `c` is inconsistent."""

    offset: int = -1
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    task_configs: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    task_count_records: dict[str, int] = field(default_factory=dict)
    session_key: SessionKey | None = None

    def connectors(self) -> list[str]:
        """Names of the connectors with a config, sorted."""
        return sorted(self.connector_configs)

    def contains(self, name: str) -> bool:
        return name in self.connector_configs

    def task_count(self, name: str) -> int:
        """The task count of the connector's last commit record (0 if none)."""
        return self.task_counts.get(name, 0)

    def target_state(self, name: str) -> str | None:
        return self.target_states.get(name)

    def task_config(self, name: str, task: int) -> dict[str, str] | None:
        tasks = self.task_configs.get(name, [])
        return tasks[task] if 0 <= task < len(tasks) else None


@dataclass(frozen=True)
class ConnectorConfigUpdated:
    name: str


@dataclass(frozen=True)
class ConnectorRemoved:
    name: str


@dataclass(frozen=True)
class TasksCommitted:
    """A commit record was read: the connector's task configs may have changed (look at
    the snapshot: still empty when the connector is inconsistent)."""

    name: str


@dataclass(frozen=True)
class TargetStateChanged:
    name: str
    state: str


@dataclass(frozen=True)
class RestartRequested:
    name: str
    only_failed: bool
    include_tasks: bool


# Every event names a connector (`.name`); a new session key shows in the snapshot only.
ConfigEvent = (ConnectorConfigUpdated | ConnectorRemoved | TasksCommitted | TargetStateChanged
               | RestartRequested)
Listener = Callable[[ConfigEvent], Any]


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _ConfigReader:
    """Applies config records in topic order (Kafka's ConsumeCallback); returns the events
    each one causes. Junk is logged and skipped, as Kafka does."""

    def __init__(self) -> None:
        self.state = ClusterConfigState()
        self._tasks: dict[str, dict[int, dict[str, str]]] = {}       # committed, by id
        self._deferred: dict[str, dict[int, dict[str, str]]] = {}

    def snapshot(self) -> ClusterConfigState:
        s = self.state
        task_configs: dict[str, list[dict[str, str]]] = {}
        for name, count in s.task_counts.items():
            have = self._tasks.get(name, {})
            if name in s.inconsistent or any(i not in have for i in range(count)):
                task_configs[name] = []
            else:
                task_configs[name] = [dict(have[i]) for i in range(count)]
        return ClusterConfigState(
            s.offset, {c: dict(p) for c, p in s.connector_configs.items()}, task_configs,
            dict(s.target_states), dict(s.task_counts), set(s.inconsistent),
            dict(s.task_count_records), s.session_key)

    def apply(self, key: str, value: bytes | None, offset: int) -> list[ConfigEvent]:
        data: Any = None
        if value is not None:
            try:
                data = json.loads(value)
            except ValueError:
                log.error("Failed to convert config data to Kafka Connect format (key %s)", key)
                return []
        self.state.offset = offset + 1
        if key.startswith("target-state-"):
            return self._target_state(key[len("target-state-"):], data, value is None)
        if key.startswith("connector-"):
            return self._connector(key[len("connector-"):], data, value is None)
        if key.startswith("task-"):
            name, sep, num = key[len("task-"):].rpartition("-")
            if not sep or not name or not num.isdigit():
                log.error("Ignoring task configuration because %s couldn't be parsed as a "
                          "task config key", key)
                return []
            props = self._properties(key, data)
            if props is not None:
                self._deferred.setdefault(name, {})[int(num)] = props
            return []
        if key.startswith("commit-"):
            return self._commit(key[len("commit-"):], data)
        if key.startswith("restart-connector-"):
            if not isinstance(data, dict):
                log.error("Ignoring restart request because the value is not a Map")
                return []
            only_failed, include_tasks = data.get("only-failed"), data.get("include-tasks")
            return [RestartRequested(key[len("restart-connector-"):],
                                     only_failed if isinstance(only_failed, bool) else False,
                                     include_tasks if isinstance(include_tasks, bool) else False)]
        if key.startswith("tasks-fencing-"):
            count = _as_int(data.get("task-count")) if isinstance(data, dict) else None
            if count is None:
                log.error("Ignoring task count record %s: wrong format", key)
                return []
            self.state.task_count_records[key[len("tasks-fencing-"):]] = count
            return []
        if key == SESSION_KEY_KEY:
            return self._session_key(data)
        log.error("Discarding config update record with invalid key: %s", key)
        return []

    @staticmethod
    def _properties(key: str, data: Any) -> dict[str, str] | None:
        props = data.get("properties") if isinstance(data, dict) else None
        if not isinstance(props, dict):
            log.error("Ignoring %s: 'properties' field should be a Map", key)
            return None
        return props

    def _connector(self, name: str, data: Any, tombstone: bool) -> list[ConfigEvent]:
        s = self.state
        if tombstone:
            log.info("Successfully processed removal of connector '%s'", name)
            s.connector_configs.pop(name, None)
            s.task_counts.pop(name, None)
            s.inconsistent.discard(name)
            self._tasks.pop(name, None)
            self._deferred.pop(name, None)
            return [ConnectorRemoved(name)]
        props = self._properties(connector_key(name), data)
        if props is None:
            return []
        s.connector_configs[name] = props
        s.target_states.setdefault(name, "STARTED")
        return [ConnectorConfigUpdated(name)]

    def _target_state(self, name: str, data: Any, tombstone: bool) -> list[ConfigEvent]:
        s = self.state
        if tombstone:
            s.target_states.pop(name, None)
            if name in s.connector_configs:     # every connector keeps a target state
                s.target_states[name] = "STARTED"
            return []                           # the connector's removal notifies
        if not isinstance(data, dict):
            log.error("Ignoring target state for connector '%s': wrong format", name)
            return []
        state = data.get("state.v2")
        if not isinstance(state, str):
            state = data.get("state")       # written by an older worker
        if state not in TARGET_STATES:
            log.error("Invalid target state for connector '%s': %r", name, state)
            return []
        assert isinstance(state, str)
        previous = s.target_states.get(name)
        s.target_states[name] = state
        if previous != state and name in s.connector_configs:
            return [TargetStateChanged(name, state)]
        return []

    def _commit(self, name: str, data: Any) -> list[ConfigEvent]:
        s = self.state
        count = _as_int(data.get("tasks")) if isinstance(data, dict) else None
        if count is None:
            log.error("Ignoring connector tasks configuration commit for connector '%s' "
                      "because it is in the wrong format", name)
            return []
        deferred = self._deferred.pop(name, {})
        if all(i in deferred for i in range(count)):
            self._tasks.setdefault(name, {}).update(deferred)
            s.inconsistent.discard(name)
        else:
            # Compaction removed some of this generation's task configs: wait for a
            # complete one (the herder regenerates them).
            log.debug("incomplete set of task configs for connector '%s'", name)
            s.inconsistent.add(name)
        s.task_counts[name] = count
        return [TasksCommitted(name)]

    def _session_key(self, data: Any) -> list[ConfigEvent]:
        if not isinstance(data, dict):
            log.error("Ignoring session key because the value is not a Map")
            return []
        key, algorithm = data.get("key"), data.get("algorithm")
        created = _as_int(data.get("creation-timestamp"))
        if not isinstance(key, str) or not isinstance(algorithm, str) or created is None:
            log.error("Ignoring session key: wrong format")
            return []
        try:
            raw = base64.b64decode(key, validate=True)
        except ValueError:
            log.error("Ignoring session key: 'key' is not base64")
            return []
        self.state.session_key = SessionKey(raw, algorithm, created)
        return []


# --------------------------------------------------------------------------- stores

class ConfigStore:
    """Connector configs, task configs and target states (Kafka's ConfigBackingStore).

    Writes return once the store has read them back (snapshot() shows them). Only one
    writer at a time is expected (standalone: the herder; distributed: the leader), as
    in Kafka."""

    def __init__(self) -> None:
        self._reader = _ConfigReader()
        self._lock = threading.Lock()       # snapshot() may come from another thread
        self._listeners: list[Listener] = []
        self._started = False

    def add_listener(self, callback: Listener) -> None:
        """`callback(event)` for every change read after start(), on the event loop, in
        topic order; an exception it raises is logged."""
        self._listeners.append(callback)

    def remove_listener(self, callback: Listener) -> None:
        self._listeners.remove(callback)

    def snapshot(self) -> ClusterConfigState:
        """A copy of the state read so far (safe from any thread)."""
        with self._lock:
            return self._reader.snapshot()

    def _read(self, key: str, value: bytes | None, offset: int) -> None:
        with self._lock:
            events = self._reader.apply(key, value, offset)
        if not self._started:
            return
        for event in events:
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception:
                    log.exception("config listener failed on %r", event)

    async def start(self) -> None:
        self._started = True

    async def stop(self) -> None:
        self._started = False

    async def read_to_end(self) -> None:
        """Catch up with the records written so far (by any worker)."""

    async def _write(self, records: list[tuple[str, bytes | None]]) -> None:
        """Write the records in order and return once they were read back."""
        raise NotImplementedError

    async def put_connector_config(self, name: str, config: Mapping[str, str],
                                   target_state: str | None = None) -> None:
        """Create or update a connector (with `target_state`: that first, as Kafka)."""
        records: list[tuple[str, bytes | None]] = []
        if target_state is not None:
            records.append((target_state_key(name), self._target_state_value(target_state)))
        records.append((connector_key(name), encode_config_record("connector",
                                                                  properties=config)))
        await self._write(records)

    async def remove_connector_config(self, name: str) -> None:
        """Delete a connector: null connector config, then a null target state."""
        await self._write([(connector_key(name), None), (target_state_key(name), None)])

    async def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Write a new generation of task configs, then the commit that applies them."""
        await self.read_to_end()
        await self._write([(task_key(name, i), encode_config_record("task", properties=c))
                           for i, c in enumerate(configs)])
        await self._write([(commit_key(name), encode_config_record("commit",
                                                                   tasks=len(configs)))])

    async def put_target_state(self, name: str, state: str) -> None:
        """STARTED, PAUSED or STOPPED (pause, resume and stop of the REST API)."""
        await self._write([(target_state_key(name), self._target_state_value(state))])

    async def put_restart_request(self, name: str, only_failed: bool,
                                  include_tasks: bool) -> None:
        """Record a restart request; every worker's listener gets RestartRequested."""
        await self._write([(restart_key(name), encode_config_record(
            "restart", include_tasks=include_tasks, only_failed=only_failed))])

    async def put_task_count_record(self, name: str, task_count: int) -> None:
        await self._write([(task_count_key(name), encode_config_record(
            "task_count", task_count=task_count))])

    async def put_session_key(self, key: SessionKey) -> None:
        await self._write([(SESSION_KEY_KEY, encode_config_record(
            "session_key", key=key.key, algorithm=key.algorithm,
            creation_timestamp=key.creation_timestamp))])

    @staticmethod
    def _target_state_value(state: str) -> bytes:
        if state not in TARGET_STATES:
            raise ValueError(f"target state must be one of {', '.join(TARGET_STATES)}, "
                             f"not {state!r}")
        return encode_config_record("target_state", state=state)


class MemoryConfigStore(ConfigStore):
    """Configs in memory (standalone; Kafka's MemoryConfigBackingStore): each write is
    read at once, with the listeners called before it returns."""

    def __init__(self) -> None:
        super().__init__()
        self._next_offset = 0

    async def _write(self, records: list[tuple[str, bytes | None]]) -> None:
        for key, value in records:
            self._next_offset += 1
            self._read(key, value, self._next_offset - 1)


class KafkaConfigStore(ConfigStore):
    """Configs in the config topic (Kafka's KafkaConfigBackingStore): one partition,
    compacted (ConnectError with Kafka's messages for a topic with several partitions or
    another cleanup policy)."""

    def __init__(self, client_config: Mapping[str, Any], topic: str,
                 replication_factor: int = -1, *, read_committed: bool = False,
                 config_key: str = "config.storage.topic"):
        super().__init__()
        self.topic = topic
        self.config_key = config_key
        self.log = KafkaBasedLog(topic, client_config, 1, replication_factor, self._consume,
                                 read_committed=read_committed, config_key=config_key,
                                 purpose="connector configurations")

    async def start(self) -> None:
        await self.log.start()
        if self.log.partitions > 1:
            await self.log.stop()
            raise ConnectError(
                f"Topic '{self.topic}' supplied via the '{self.config_key}' property is "
                f"required to have a single partition in order to guarantee consistency of "
                f"connector configurations, but found {self.log.partitions} partitions.")
        self._started = True

    async def stop(self) -> None:
        self._started = False
        await self.log.stop()

    async def read_to_end(self) -> None:
        await self.log.read_to_end()

    def _consume(self, record: ConsumerRecord) -> None:
        key = record.key
        if not isinstance(key, bytes):
            log.error("Discarding config update record without a key at offset %d",
                      record.offset)
            return
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            log.error("Discarding config update record with a key that is not UTF-8")
            return
        value = record.value if isinstance(record.value, bytes) else None
        self._read(name, value, record.offset)

    async def _write(self, records: list[tuple[str, bytes | None]]) -> None:
        try:
            futures = [await self.log.send_nowait(k.encode("utf-8"), v) for k, v in records]
            for f in futures:
                await f
        except ConnectError:
            raise
        except Exception as e:
            raise ConnectError(f"Error writing to the config topic {self.topic}: {e}") from e
        await self.log.read_to_end()
