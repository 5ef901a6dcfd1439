"""Connector, task and topic statuses: Kafka Connect's status topic format and the stores.

Records (keys UTF-8 strings, values JSON as Kafka's JsonConverter writes them):

    status-connector-<name>   {"state":"RUNNING","trace":null,"worker_id":"host:port","generation":5}
    status-task-<name>-<i>    the same fields
    status-topic-<topic>:connector-<name>
                              {"topic":{"name":t,"connector":n,"task":i,"discoverTimestamp":ms}}

A null value deletes: a connector's tombstone also forgets its tasks' statuses (as Kafka's
reader does). Putting a status with state DESTROYED writes the tombstone.

`put_safe` follows Kafka's rule: write only if nothing is stored yet, or the stored status
is from the same worker, or its generation is not newer than the new one's.

`KafkaStatusStore` applies a write to its memory once the brokers acknowledged it (so the
writer reads its own writes at once) and every record it consumes that is not older.
Reads (`get_connector`, ...) take a lock and may come from any thread.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from clients.types import ConsumerRecord

from ..api import ConnectError
from .kafka_log import KafkaBasedLog, KeyPositions, LogBacked
from .offset_store import dumps_json

__all__ = ["ConnectorStatus", "TaskStatus", "TopicStatus", "StatusStore", "MemoryStatusStore",
           "KafkaStatusStore", "STATES", "encode_status", "encode_topic_status",
           "connector_status_key", "task_status_key", "topic_status_key"]

log = logging.getLogger("strom.connect.status")

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED", "DESTROYED")


@dataclass(frozen=True)
class ConnectorStatus:
    id: str
    state: str
    trace: str | None
    worker_id: str
    generation: int


@dataclass(frozen=True)
class TaskStatus:
    id: tuple[str, int]          # (connector, task number)
    state: str
    trace: str | None
    worker_id: str
    generation: int

    @property
    def connector(self) -> str:
        return self.id[0]

    @property
    def task(self) -> int:
        return self.id[1]


@dataclass(frozen=True)
class TopicStatus:
    """A topic a connector's task used (KIP-558, GET /connectors/<name>/topics)."""

    topic: str
    connector: str
    task: int
    discover_timestamp: int


def connector_status_key(name: str) -> str:
    return "status-connector-" + name


def task_status_key(name: str, task: int) -> str:
    return f"status-task-{name}-{task}"


def topic_status_key(connector: str, topic: str) -> str:
    return f"status-topic-{topic}:connector-{connector}"


def encode_status(status: ConnectorStatus | TaskStatus) -> bytes | None:
    """The record value of a status (None for DESTROYED: a tombstone)."""
    if status.state == "DESTROYED":
        return None
    return dumps_json({"state": status.state, "trace": status.trace,
                       "worker_id": status.worker_id, "generation": status.generation})


def encode_topic_status(status: TopicStatus) -> bytes:
    return dumps_json({"topic": {"name": status.topic, "connector": status.connector,
                                 "task": status.task,
                                 "discoverTimestamp": status.discover_timestamp}})


def _parse_status(key: str, value: bytes) -> tuple[str, str | None, str, int] | None:
    try:
        data = json.loads(value)
        state, trace = data["state"], data.get("trace")
        worker, generation = data["worker_id"], data["generation"]
    except (ValueError, TypeError, KeyError):
        log.error("Failed to deserialize status %s", key)
        return None
    if state not in STATES or not isinstance(worker, str) or not isinstance(generation, int) \
            or not (trace is None or isinstance(trace, str)):
        log.error("Failed to deserialize status %s: wrong format", key)
        return None
    return state, trace, worker, generation


def _parse_task_key(key: str) -> tuple[str, int] | None:
    name, sep, num = key[len("status-task-"):].rpartition("-")
    if not sep or not name or not num.isdigit():
        return None
    return name, int(num)


class StatusStore:
    """Statuses of connectors and tasks, and the topics connectors use (Kafka's
    StatusBackingStore). Reads are of memory, thread-safe; writes are coroutines."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, ConnectorStatus] = {}
        self._tasks: dict[str, dict[int, TaskStatus]] = {}
        self._topics: dict[str, dict[str, TopicStatus]] = {}

    async def start(self) -> None:
        """Load what is stored."""

    async def stop(self) -> None:
        """Release clients."""

    async def read_to_end(self) -> None:
        """Catch up with statuses other workers wrote."""

    async def _send(self, key: str, value: bytes | None) -> tuple[int, int]:
        """Write one record; (partition, offset) once acknowledged."""
        raise NotImplementedError

    # ------------------------------------------------------------------ reads

    def get_connector(self, name: str) -> ConnectorStatus | None:
        with self._lock:
            return self._connectors.get(name)

    def get_task(self, name: str, task: int) -> TaskStatus | None:
        with self._lock:
            return self._tasks.get(name, {}).get(task)

    def get_all_tasks(self, name: str) -> list[TaskStatus]:
        """The statuses of the connector's tasks, by task number."""
        with self._lock:
            return [s for _, s in sorted(self._tasks.get(name, {}).items())]

    def connectors(self) -> set[str]:
        with self._lock:
            return set(self._connectors)

    def topics(self, connector: str) -> list[str]:
        """The topics the connector's tasks used since their last reset, sorted."""
        with self._lock:
            return sorted(self._topics.get(connector, {}))

    def get_topic(self, connector: str, topic: str) -> TopicStatus | None:
        with self._lock:
            return self._topics.get(connector, {}).get(topic)

    # ------------------------------------------------------------------ writes

    async def put(self, status: ConnectorStatus | TaskStatus) -> None:
        """Store the status (DESTROYED: delete it)."""
        key = (connector_status_key(status.id) if isinstance(status, ConnectorStatus)
               else task_status_key(*status.id))
        value = encode_status(status)
        partition, offset = await self._send(key, value)
        self._read(key, value, partition, offset)

    async def put_safe(self, status: ConnectorStatus | TaskStatus) -> bool:
        """put() unless another worker stored a status of a newer generation; True if
        written."""
        current = (self.get_connector(status.id) if isinstance(status, ConnectorStatus)
                   else self.get_task(*status.id))
        if current is not None and current.worker_id != status.worker_id \
                and current.generation > status.generation:
            log.debug("not overwriting %s with the older generation's %s", current, status)
            return False
        await self.put(status)
        return True

    async def put_topic(self, connector: str, topic: str, task_id: int) -> None:
        """Record that the connector's task used `topic` (nothing if already recorded)."""
        if self.get_topic(connector, topic) is not None:
            return
        status = TopicStatus(topic, connector, task_id, int(time.time() * 1000))
        key = topic_status_key(connector, topic)
        value = encode_topic_status(status)
        partition, offset = await self._send(key, value)
        self._read(key, value, partition, offset)

    async def delete_topics(self, connector: str) -> None:
        """Forget the topics the connector used (PUT /connectors/<name>/topics/reset)."""
        for topic in self.topics(connector):
            key = topic_status_key(connector, topic)
            partition, offset = await self._send(key, None)
            self._read(key, None, partition, offset)

    async def delete_connector(self, name: str) -> None:
        """Delete the statuses of the connector and its tasks (tombstones, tasks first)."""
        for status in self.get_all_tasks(name):
            key = task_status_key(name, status.task)
            partition, offset = await self._send(key, None)
            self._read(key, None, partition, offset)
        key = connector_status_key(name)
        partition, offset = await self._send(key, None)
        self._read(key, None, partition, offset)

    # ------------------------------------------------------------------ the reader

    def _newer(self, key: str, partition: int, offset: int) -> bool:
        return True

    def _read(self, key: str, value: bytes | None, partition: int, offset: int) -> None:
        """Apply one record of the status topic (Kafka's read())."""
        if not self._newer(key, partition, offset):
            return
        if key.startswith("status-connector-"):
            name = key[len("status-connector-"):]
            if not name:
                log.warning("Discarding record with invalid connector status key %s", key)
                return
            if value is None:
                with self._lock:
                    self._connectors.pop(name, None)
                    self._tasks.pop(name, None)
                return
            parsed = _parse_status(key, value)
            if parsed is not None:
                with self._lock:
                    self._connectors[name] = ConnectorStatus(name, *parsed)
        elif key.startswith("status-task-"):
            task_id = _parse_task_key(key)
            if task_id is None:
                log.warning("Discarding record with invalid task status key %s", key)
                return
            if value is None:
                with self._lock:
                    tasks = self._tasks.get(task_id[0], {})
                    tasks.pop(task_id[1], None)
                    if not tasks:
                        self._tasks.pop(task_id[0], None)
                return
            parsed = _parse_status(key, value)
            if parsed is not None:
                with self._lock:
                    self._tasks.setdefault(task_id[0], {})[task_id[1]] = TaskStatus(
                        task_id, *parsed)
        elif key.startswith("status-topic-"):
            self._read_topic(key, value)
        else:
            log.warning("Discarding record with invalid key %s", key)

    def _read_topic(self, key: str, value: bytes | None) -> None:
        topic, sep, connector = key[len("status-topic-"):].partition(":connector-")
        if not sep or not topic or not connector:
            log.warning("Discarding record with invalid topic status key %s", key)
            return
        if value is None:
            with self._lock:
                topics = self._topics.get(connector, {})
                topics.pop(topic, None)
                if not topics:
                    self._topics.pop(connector, None)
            return
        try:
            t = json.loads(value)["topic"]
            status = TopicStatus(t["name"], t["connector"], t["task"], t["discoverTimestamp"])
        except (ValueError, TypeError, KeyError):
            log.warning("Failed to parse topic status with key %s", key)
            return
        if not (isinstance(status.topic, str) and isinstance(status.connector, str)
                and isinstance(status.task, int) and isinstance(status.discover_timestamp, int)):
            log.warning("Failed to parse topic status with key %s", key)
            return
        with self._lock:
            self._topics.setdefault(connector, {})[topic] = status


class MemoryStatusStore(StatusStore):
    """Statuses in memory (standalone; Kafka's MemoryStatusBackingStore)."""

    def __init__(self) -> None:
        super().__init__()
        self._offset = 0

    async def _send(self, key: str, value: bytes | None) -> tuple[int, int]:
        self._offset += 1
        return 0, self._offset - 1


class KafkaStatusStore(LogBacked, StatusStore):
    """Statuses in the status topic (Kafka's KafkaStatusBackingStore; compacted, 5
    partitions by default)."""

    def __init__(self, client_config: Mapping[str, Any], topic: str, partitions: int = 5,
                 replication_factor: int = -1, *, config_key: str = "status.storage.topic"):
        super().__init__()
        self.topic = topic
        self._order = KeyPositions()
        self.log = KafkaBasedLog(topic, client_config, partitions, replication_factor,
                                 self._consume, read_committed=False, config_key=config_key,
                                 purpose="connector and task statuses")


    def _newer(self, key: str, partition: int, offset: int) -> bool:
        return self._order.newer(key, partition, offset)

    def _consume(self, record: ConsumerRecord) -> None:
        try:
            key = record.key.decode("utf-8") if isinstance(record.key, bytes) else None
        except UnicodeDecodeError:
            key = None
        if key is None:
            log.warning("Discarding status record without a UTF-8 key at offset %d",
                        record.offset)
            return
        value = record.value if isinstance(record.value, bytes) else None
        self._read(key, value, record.partition, record.offset)

    async def _send(self, key: str, value: bytes | None) -> tuple[int, int]:
        try:
            md = await self.log.send(key.encode("utf-8"), value)
        except ConnectError:
            raise
        except Exception as e:
            raise ConnectError(f"Failed to write status update to topic {self.topic}: "
                               f"{e}") from e
        return md.partition, md.offset
