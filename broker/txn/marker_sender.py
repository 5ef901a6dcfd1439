"""The transaction coordinator's markers (Kafka's TransactionMarkerChannelManager, reduced):
WriteTxnMarkers to the leader of every partition of a transaction that was decided, retried
until each leader has written its marker, the coordinator moved away, or the partition's
topic is gone. A partition led by this broker is written through the same request to
itself: one path, one set of rules.

The markers of one decision go out at once, one request per leader; their order relative to
other transactions does not matter (each marker carries its producer id and epoch, and the
partition checks the coordinator epoch)."""
from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Callable, Iterable

from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError
from clients.aio.pool import ConnectionPool
from clients.aio.security import PLAINTEXT, AuthenticationError, ClientSecurity
from clients.protocol.errors import Code

from ..metadata_cache import MetadataCache

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 2.0

TopicPartition = tuple[str, int]

# Answers after which the marker is not retried: the partition is gone, or this coordinator
# is no longer the one (a newer coordinator epoch wrote to the partition).
_GIVE_UP = {Code.TRANSACTION_COORDINATOR_FENCED: "fenced by a newer coordinator",
            Code.INVALID_PRODUCER_EPOCH: "the producer has a newer epoch there"}


class TxnMarkerSender:
    def __init__(self, broker_id: int, metadata: MetadataCache,
                 pool: ConnectionPool | None = None, security: ClientSecurity = PLAINTEXT) -> None:
        self.metadata = metadata
        self.pool = pool or ConnectionPool(client_id=f"broker-{broker_id}-txn-markers", security=security)

    async def send(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   partitions: Iterable[TopicPartition], still_coordinator: Callable[[], bool]) -> bool:
        """Write the markers; True once every partition has its marker (or is gone), False
        if this broker stopped coordinating the transaction or was fenced."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        while remaining:
            if not still_coordinator():
                return False
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(remaining):        # a copy: a deleted topic's partitions leave it
                info = self.metadata.partition(*tp)
                if info is None:
                    if not any(t == tp[0] for t, _ in self.metadata.partitions):
                        log.info("marker for %s-%d dropped: the topic is gone", *tp)
                        remaining.discard(tp)
                    continue
                if info.leader >= 0:
                    by_leader[info.leader].append(tp)
            results = await asyncio.gather(*(
                self._send_one(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch)
                for leader, tps in by_leader.items()))
            for answers in results:
                for tp, code in answers.items():
                    if code == 0:
                        remaining.discard(tp)
                    elif code in _GIVE_UP:
                        log.warning("marker of producer %d for %s-%d: %s; this coordinator stops",
                                    producer_id, tp[0], tp[1], _GIVE_UP[code])
                        return False
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return True

    async def _send_one(self, leader: int, tps: list[TopicPartition], producer_id: int,
                        producer_epoch: int, commit: bool, coordinator_epoch: int
                        ) -> dict[TopicPartition, int]:
        node = self.metadata.broker(leader)
        if node is None:
            return {}
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in tps:
            by_topic[t].append(p)
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
        self.pool.set_address(leader, node.host, node.port)
        try:
            conn = await self.pool.get(leader)
            r = await conn.request("WriteTxnMarkers", body, version=WRITE_TXN_MARKERS_VERSION)
        except (KafkaConnectionError, KafkaTimeoutError, OSError, AuthenticationError) as e:
            log.info("WriteTxnMarkers to broker %d failed (%s); retrying", leader, e)
            return {}
        return {(t.name, p.partition_index): p.error_code
                for m in r.markers for t in m.topics for p in t.partitions}

    async def close(self) -> None:
        await self.pool.close_all()
