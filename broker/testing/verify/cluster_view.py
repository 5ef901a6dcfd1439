"""What strom-verify asks the cluster over the Kafka protocol, with strom's admin client: the
topic (made if missing), its partitions' leaders and in-sync replicas, and the live brokers.
Works against any Kafka-compatible bootstrap; the faults use it to pick their victims and to
see that the cluster has healed.

Calls may meet a paused or dead broker: each is bounded by the admin client's request
timeout and retried by `until`, so one frozen broker costs seconds, never the run.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping, TypeVar

from clients.admin import AdminClient, PartitionDescription
from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError
from clients.protocol.errors import KafkaError, TopicAlreadyExistsError
from clients.types import NewTopic

T = TypeVar("T")

# What a call may fail with while faults run: it is asked again.
TRANSIENT = (KafkaError, KafkaConnectionError, KafkaTimeoutError, TimeoutError, OSError)

# A paused broker answers nothing: the admin client gives up on it after this and asks another.
ADMIN_REQUEST_TIMEOUT_MS = 3000


class ClusterView:
    """The admin-client view of one topic's cluster. Thread-safe (the admin client is)."""

    def __init__(self, bootstrap: str, topic: str, client_config: Mapping[str, Any] | None = None):
        self.topic = topic
        config: dict[str, Any] = {"request.timeout.ms": ADMIN_REQUEST_TIMEOUT_MS,
                                  "default.api.timeout.ms": 10_000}
        config.update(client_config or {})
        config["bootstrap.servers"] = bootstrap
        self._admin = AdminClient(config)

    def close(self) -> None:
        self._admin.close()

    # ---- the topic ------------------------------------------------------------------------

    def ensure_topic(self, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> bool:
        """Create the topic unless it exists; True if this call created it."""
        try:
            self._admin.create_topics([NewTopic(self.topic, partitions, replication_factor,
                                                dict(configs))])
            return True
        except TopicAlreadyExistsError:
            return False

    def partitions(self) -> list[PartitionDescription]:
        """The topic's partitions, in partition order (raises while it is unknown)."""
        desc = self._admin.describe_topics([self.topic])[self.topic]
        return sorted(desc.partitions, key=lambda p: p.partition)

    def leader(self, partition: int) -> int | None:
        """The partition's leader as the cluster reports it now, None without one."""
        for p in self.partitions():
            if p.partition == partition:
                return p.leader if p.leader >= 0 else None
        return None

    def in_sync(self) -> bool:
        """Every partition has a leader and all its replicas in sync."""
        parts = self.partitions()
        return bool(parts) and all(p.leader >= 0 and sorted(p.isr) == sorted(p.replicas)
                                   for p in parts)

    # ---- brokers ----------------------------------------------------------------------------

    def live_brokers(self) -> set[int]:
        """The brokers the cluster reports as live (registered, not found dead)."""
        return {b.node_id for b in self._admin.describe_cluster().brokers}

    def controller(self) -> int:
        """The controller's broker id as the broker asked reports it; -1 while none."""
        return self._admin.describe_cluster().controller_id

    # ---- waiting ----------------------------------------------------------------------------

    def until(self, what: str, cond: Callable[[], T | None], timeout: float,
              interval: float = 0.2) -> T:
        """Ask `cond` until it returns something truthy (transient errors count as not yet);
        TimeoutError naming `what` and the last answer or error otherwise."""
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = cond()
                if value:
                    return value
                last = value
            except TRANSIENT as e:
                last = e
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what}: not within {timeout:g}s (last: {last!r})")
            time.sleep(interval)
