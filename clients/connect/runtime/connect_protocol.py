"""Kafka Connect's group protocol (protocol type "connect"): worker metadata and assignments.

Sans-io, Kafka's binary layouts (ConnectProtocol and IncrementalCooperativeConnectProtocol),
so strom workers and Java workers can share one Connect group:

  protocol name  version  rebalancing
  "default"      0        eager: everything is revoked before every rebalance
  "compatible"   1        incremental cooperative (KIP-415)
  "sessioned"    2        as 1, plus signed internal requests (KIP-507); same layouts as 1

  WorkerState (JoinGroup metadata): int16 version, url string, config_offset int64,
      (v1+) allocation nullable bytes = the worker's current assignment, encoded as below
      (null before its first assignment)
  Assignment (SyncGroup payload): int16 version, error int16, leader string, leader_url
      string, config_offset int64, assignment [connector string, tasks []int32],
      (v1+) revoked [same] (both arrays nullable from v1), delay int32

A connector itself is listed as task id -1 (CONNECTOR_TASK) of its own entry. A newer
version than known is read with the newest known layout (newer versions only append).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from clients.protocol.schema import F, NULL, StructCodec
from clients.protocol.types import DecodeError, Reader, Writer

__all__ = ["PROTOCOL_TYPE", "EAGER", "COMPATIBLE", "SESSIONED", "PROTOCOL_VERSIONS",
           "CONNECTOR_TASK", "NO_ERROR", "CONFIG_MISMATCH", "TaskId", "WorkerMetadata",
           "ConnectAssignment", "encode_metadata", "decode_metadata", "encode_assignment",
           "decode_assignment", "protocols_for"]

PROTOCOL_TYPE = "connect"
EAGER = "default"
COMPATIBLE = "compatible"
SESSIONED = "sessioned"
PROTOCOL_VERSIONS = {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}
# connect.protocol's values (Kafka's ConnectProtocolCompatibility names) -> protocol names
_CONFIG_NAMES = {"eager": EAGER, "default": EAGER, "compatible": COMPATIBLE,
                 "sessioned": SESSIONED}

CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1     # the leader could not catch up with the config topic: read it, rejoin

TaskId = tuple[str, int]     # (connector, task number), ordered as Kafka's ConnectorTaskId

_CONNECTOR_ASSIGNMENT = [F("connector", "string"), F("tasks", "[]int32")]
_METADATA_FIELDS = [
    F("url", "string"),
    F("config_offset", "int64"),
    F("allocation", "bytes", versions="1+", nullable="1+", default=NULL),
]
_ASSIGNMENT_FIELDS = [
    F("error", "int16"),
    F("leader", "string"),
    F("leader_url", "string"),
    F("config_offset", "int64"),
    F("assignment", _CONNECTOR_ASSIGNMENT, nullable="1+"),
    F("revoked", _CONNECTOR_ASSIGNMENT, versions="1+", nullable="1+"),
    F("delay", "int32", versions="1+"),
]
# Versions 1 and 2 share one layout: two codecs cover every version.
_METADATA_CODECS = [StructCodec(_METADATA_FIELDS, v, False) for v in (0, 1)]
_ASSIGNMENT_CODECS = [StructCodec(_ASSIGNMENT_FIELDS, v, False) for v in (0, 1)]


@dataclass
class ConnectAssignment:
    """One worker's assignment. From the leader: `connectors`/`tasks` to start and
    `revoked_*` to stop (incremental, v1+; everything in v0), `delay_ms` until the members
    should rejoin (0: none). As a worker's allocation: what it runs."""

    error: int = NO_ERROR
    leader: str = ""
    leader_url: str = ""
    config_offset: int = -1
    connectors: list[str] = field(default_factory=list)
    tasks: list[TaskId] = field(default_factory=list)
    revoked_connectors: list[str] = field(default_factory=list)
    revoked_tasks: list[TaskId] = field(default_factory=list)
    delay_ms: int = 0
    version: int = PROTOCOL_VERSIONS[SESSIONED]

    @property
    def failed(self) -> bool:
        return self.error != NO_ERROR

    def with_version(self, version: int) -> "ConnectAssignment":
        return replace(self, version=version)


@dataclass
class WorkerMetadata:
    """A worker's JoinGroup metadata (Kafka's WorkerState / ExtendedWorkerState)."""

    url: str
    config_offset: int
    allocation: ConnectAssignment | None = None     # v1+: its current assignment
    version: int = PROTOCOL_VERSIONS[SESSIONED]


def protocols_for(connect_protocol: str) -> list[str]:
    """The protocol names a worker with `connect.protocol` (eager | compatible | sessioned)
    offers, most preferred first (as Kafka's worker: it also speaks every older one)."""
    try:
        name = _CONFIG_NAMES[connect_protocol.lower()]
    except KeyError:
        raise ValueError(f"connect.protocol must be eager, compatible or sessioned, "
                         f"not {connect_protocol!r}") from None
    return [n for n in (SESSIONED, COMPATIBLE, EAGER)
            if PROTOCOL_VERSIONS[n] <= PROTOCOL_VERSIONS[name]]


def _read_version(data: bytes) -> tuple[Reader, int]:
    r = Reader(data)
    v = r.int16()
    if v < 0:
        raise DecodeError(f"connect protocol version {v} is negative")
    return r, v


def _entries(connectors: Iterable[str], tasks: Iterable[TaskId]) -> list[dict]:
    """Per connector (sorted): -1 when the connector itself is included, then its tasks."""
    by_connector: dict[str, list[int]] = {}
    for c in connectors:
        by_connector.setdefault(c, []).append(CONNECTOR_TASK)
    for c, t in sorted(tasks):
        by_connector.setdefault(c, []).append(t)
    return [{"connector": c, "tasks": sorted(set(ts))} for c, ts in sorted(by_connector.items())]


def _split(entries: Sequence[Mapping] | None) -> tuple[list[str], list[TaskId]]:
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for e in entries or ():
        for t in e["tasks"]:
            if t == CONNECTOR_TASK:
                connectors.append(e["connector"])
            else:
                tasks.append((e["connector"], t))
    return connectors, tasks


def encode_assignment(a: ConnectAssignment) -> bytes:
    w = Writer()
    w.int16(a.version)
    _ASSIGNMENT_CODECS[min(a.version, 1)].write(w, {
        "error": a.error, "leader": a.leader, "leader_url": a.leader_url,
        "config_offset": a.config_offset, "assignment": _entries(a.connectors, a.tasks),
        "revoked": _entries(a.revoked_connectors, a.revoked_tasks), "delay": a.delay_ms})
    return w.getvalue()


def decode_assignment(data: bytes) -> ConnectAssignment:
    r, v = _read_version(data)
    s = _ASSIGNMENT_CODECS[min(v, 1)].read(r)
    connectors, tasks = _split(s.assignment)
    revoked_connectors, revoked_tasks = _split(s.revoked)
    return ConnectAssignment(s.error, s.leader, s.leader_url, s.config_offset, connectors,
                             tasks, revoked_connectors, revoked_tasks, s.delay, v)


def encode_metadata(m: WorkerMetadata) -> bytes:
    """The allocation is embedded with the metadata's version (as Kafka's worker does)."""
    w = Writer()
    w.int16(m.version)
    allocation = None
    if m.version >= 1 and m.allocation is not None:
        allocation = encode_assignment(m.allocation.with_version(m.version))
    _METADATA_CODECS[min(m.version, 1)].write(w, {"url": m.url, "config_offset": m.config_offset,
                                                  "allocation": allocation})
    return w.getvalue()


def decode_metadata(data: bytes) -> WorkerMetadata:
    r, v = _read_version(data)
    s = _METADATA_CODECS[min(v, 1)].read(r)
    allocation = decode_assignment(bytes(s.allocation)) if s.allocation is not None else None
    return WorkerMetadata(s.url, s.config_offset, allocation, v)
