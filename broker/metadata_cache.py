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
    def __init__(self, this_broker: BrokerInfo | None = None) -> None:
        self.this_broker = this_broker
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self._controller_waiters: list[asyncio.Future] = []
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}

    def alive_brokers(self) -> list[BrokerInfo]:
        """Live brokers; always including this one, so a client that asks before the
        controller's first UpdateMetadata keeps a broker to ask again."""
        brokers = dict(self.brokers)
        if self.this_broker is not None:
            brokers.setdefault(self.this_broker.broker_id, self.this_broker)
        return [brokers[b] for b in sorted(brokers)]

    def set_controller(self, controller_id: int, controller_epoch: int) -> None:
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        if controller_id >= 0:
            waiters, self._controller_waiters = self._controller_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

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

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)

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
