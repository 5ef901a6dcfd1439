"""What the ZooKeeper metadata store tells its subscribers (the controller, the broker): one
event per change its watches saw, delivered in the order its caches changed. The two the
broker acts on (TopicConfigChanged, BrokerConfigsChanged) are the store interface's own
(`store.py`); the others are for the controller."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .store import BrokerConfigsChanged, TopicConfigChanged, TopicMetadata
from .zk_paths import BrokerRegistration, TopicPartition


@dataclass(frozen=True)
class BrokersChanged:
    """Children of /brokers/ids changed. `live` is the full set after the change."""
    added: frozenset[int]
    removed: frozenset[int]
    live: frozenset[int]


@dataclass(frozen=True)
class BrokerModified:
    """A live broker rewrote its registration (e.g. new endpoints)."""
    broker_id: int
    registration: BrokerRegistration


@dataclass(frozen=True)
class TopicsChanged:
    added: frozenset[str]
    removed: frozenset[str]


@dataclass(frozen=True)
class TopicModified:
    """/brokers/topics/<t> changed (partitions added, reassignment)."""
    name: str
    metadata: TopicMetadata


@dataclass(frozen=True)
class ControllerChanged:
    controller_id: int            # NO_CONTROLLER (-1) when /controller is gone
    previous_id: int


@dataclass(frozen=True)
class TopicDeletionsRequested:
    """Children of /admin/delete_topics (non-empty and different from the last event)."""
    topics: frozenset[str]


@dataclass(frozen=True)
class IsrChangesNotified:
    """Sequence nodes under /isr_change_notification (names, sorted)."""
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class PreferredReplicaElectionRequested:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class SessionStateChanged:
    state: str                    # "CONNECTED", "SUSPENDED" or "LOST" (kazoo's KazooState)


@dataclass(frozen=True)
class SessionReestablished:
    """A new ZooKeeper session replaced an expired one; the broker znode was re-created
    (`registered`) unless `error` says why not. Ephemeral /controller is gone with the old
    session: a controller must stand down and run for election again."""
    session_id: int
    registered: bool
    error: str | None = None


@dataclass(frozen=True)
class ReassignPartitionsRequested:
    """/admin/reassign_partitions was written (the legacy tools' reassignment request)."""


@dataclass(frozen=True)
class LogDirEventsNotified:
    """Sequence nodes under /log_dir_event_notification (names, sorted): brokers whose log
    dir failed (KIP-112)."""
    nodes: tuple[str, ...]


ZkEvent = Union[BrokersChanged, BrokerModified, TopicsChanged, TopicModified, TopicConfigChanged,
                BrokerConfigsChanged, ControllerChanged, TopicDeletionsRequested, IsrChangesNotified,
                PreferredReplicaElectionRequested, SessionStateChanged, SessionReestablished,
                LogDirEventsNotified, ReassignPartitionsRequested]
