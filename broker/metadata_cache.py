"""What this broker tells clients about the cluster: live brokers, the controller, and each
partition's leader, epoch, replicas and ISR.

In a cluster the controller fills it with UpdateMetadata; standalone, the broker fills it
itself. Metadata and DescribeCluster answer from here, so clients follow leadership.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from zkcoord.store import BrokerInfo


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)


class MetadataCache:
    """`brokers` are addressed on the inter-broker listener (what replication and the
    coordinators connect to); `endpoints` holds every listener's address of each broker, so a
    client is given the addresses of the listener it came in on (Kafka's rule)."""

    def __init__(self, this_broker: BrokerInfo | None = None,
                 this_endpoints: dict[str, tuple[str, int]] | None = None) -> None:
        self.this_broker = this_broker
        self.this_endpoints: dict[str, tuple[str, int]] = dict(this_endpoints or {})
        self.brokers: dict[int, BrokerInfo] = {}
        self.endpoints: dict[int, dict[str, tuple[str, int]]] = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self._controller_waiters: list[asyncio.Future] = []
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}

    def alive_brokers(self, listener: str | None = None) -> list[BrokerInfo]:
        """Live brokers, addressed on `listener` (None: the inter-broker one); always
        including this one, so a client that asks before the controller's first
        UpdateMetadata keeps a broker to ask again. A broker without that listener is left
        out, as Kafka does."""
        brokers = dict(self.brokers)
        if self.this_broker is not None:
            brokers.setdefault(self.this_broker.broker_id, self.this_broker)
        if listener is None:
            return [brokers[b] for b in sorted(brokers)]
        out = []
        for b in sorted(brokers):
            info = self._on_listener(brokers[b], listener)
            if info is not None:
                out.append(info)
        return out

    def _on_listener(self, info: BrokerInfo, listener: str) -> BrokerInfo | None:
        eps = self.endpoints.get(info.broker_id)
        if eps is None and self.this_broker is not None and info.broker_id == self.this_broker.broker_id:
            eps = self.this_endpoints
        if not eps:
            return info         # told nothing about its listeners (UpdateMetadata v0)
        ep = eps.get(listener)
        return None if ep is None else BrokerInfo(info.broker_id, ep[0], ep[1], info.rack)

    def set_controller(self, controller_id: int, controller_epoch: int) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        if controller_id >= 0:
            waiters, self._controller_waiters = self._controller_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def elected_here(self, broker_id: int, controller_epoch: int) -> None:
        """This broker won a controller election: once it has been told about the cluster,
        its Metadata answers name itself at once, not its predecessor (dead, after a
        failover) until its own UpdateMetadata reaches it; librdkafka's AdminClient would
        wait for the dead one. Before that first UpdateMetadata it still waits for it, so
        that its first answer lists every broker."""
        if self.controller_id >= 0:
            self.set_controller(broker_id, controller_epoch)

    async def wait_for_controller(self, timeout_s: float) -> None:
        """Until a controller has told this broker about the cluster (its first
        UpdateMetadata) or `timeout_s` passed."""
        if self.controller_id >= 0:
            return
        w = asyncio.get_running_loop().create_future()
        self._controller_waiters.append(w)
        try:
            await asyncio.wait_for(w, timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            if w in self._controller_waiters:
                self._controller_waiters.remove(w)

    def broker(self, broker_id: int, listener: str | None = None) -> BrokerInfo | None:
        """A live broker, addressed on `listener` (None: the inter-broker listener)."""
        info = self.brokers.get(broker_id)
        if info is None or listener is None:
            return info
        return self._on_listener(info, listener)

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self.partitions.get((topic, index))

    def set_partition(self, topic: str, index: int, info: PartitionInfo) -> None:
        self.partitions[(topic, index)] = info

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            del self.partitions[key]

    async def wait_for_leaders(self, topic: str, partitions: int, timeout_s: float) -> None:
        """Until partitions 0..partitions-1 of `topic` all have a leader here (the
        controller's UpdateMetadata arrived) or `timeout_s` passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            infos = [self.partition(topic, p) for p in range(partitions)]
            if all(i is not None and i.leader >= 0 for i in infos):
                return
            await asyncio.sleep(0.05)
