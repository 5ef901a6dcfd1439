"""KIP-890 part 1, the partition leader's half: before a producer's first transactional
batch of a transaction lands in a partition, the leader asks the transaction coordinator
(AddPartitionsToTxn v4, verify_only) whether the partition was added to that producer's
ongoing transaction at that epoch. A Produce delayed in the network and delivered after its
transaction ended (aborted, say, after the request timed out) then cannot open a
transaction nobody will ever end there: it is refused with INVALID_TXN_STATE.

Transaction version 2 (KIP-890 part 2: Produce v12+, TxnOffsetCommit v5+) asks more: the
client sends no AddPartitionsToTxn, so the leader *adds* the partition to the transaction
(AddPartitionsToTxn v5 without verify_only), which may also start it.

Later batches of the same transaction need no question: the partition's producer state shows
the transaction open at that epoch. Appends of one producer to one partition that arrive
while its question is out wait behind it and are appended in arrival order."""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterable

from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError
from clients.aio.pool import ConnectionPool
from clients.aio.security import PLAINTEXT, AuthenticationError, ClientSecurity
from clients.protocol.errors import Code

from ..metadata_cache import MetadataCache
from .state_manager import TXN_TOPIC, TransactionStateManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ADD_PARTITIONS_VERIFY_VERSION = 4
ADD_PARTITIONS_ADD_VERSION = 5          # a leader's add for transaction version 2
LocalVerify = Callable[[str, int, int, list[TopicPartition]], dict[TopicPartition, int]]
# (transactional id, producer id, epoch, partitions, client transaction version) -> error code
LocalAdd = Callable[[str, int, int, list[TopicPartition], int], Awaitable[int]]


class TxnVerifier:
    def __init__(self, broker_id: int, metadata: MetadataCache, state: TransactionStateManager,
                 local_verify: LocalVerify, pool: ConnectionPool | None = None,
                 local_add: LocalAdd | None = None, security: ClientSecurity = PLAINTEXT) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.state = state
        self.local_verify = local_verify
        self.local_add = local_add
        self.pool = pool or ConnectionPool(client_id=f"broker-{broker_id}-txn-verify", security=security)
        # (topic, partition, producer id) -> the last deferred append of that producer there.
        self._tails: dict[tuple[str, int, int], asyncio.Future[None]] = {}

    def waiting(self, topic: str, partition: int, producer_id: int) -> asyncio.Future[None] | None:
        """The deferred append a new one of this producer to this partition must follow."""
        tail = self._tails.get((topic, partition, producer_id))
        return None if tail is None or tail.done() else tail

    def enqueue(self, topic: str, partition: int, producer_id: int) -> asyncio.Future[None]:
        """Register a deferred append; the caller resolves the future once it appended."""
        key = (topic, partition, producer_id)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = fut
        fut.add_done_callback(lambda f: self._tails.pop(key, None) if self._tails.get(key) is f else None)
        return fut

    async def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition], add: bool = False
                     ) -> dict[TopicPartition, int]:
        """0 for each partition in the producer's ongoing transaction, else the code its
        append is refused with. `add` (transaction version 2): add the partitions to the
        transaction (starting it if none is open) instead of only asking."""
        tps = list(partitions)
        if not transactional_id:
            return {tp: Code.INVALID_TXN_STATE for tp in tps}
        coordinator = self.metadata.partition(TXN_TOPIC, self.state.partition_for(transactional_id))
        if coordinator is None or coordinator.leader < 0:
            return {tp: Code.NOT_ENOUGH_REPLICAS for tp in tps}       # retriable
        if coordinator.leader == self.broker_id:
            if add:
                assert self.local_add is not None
                code = await self.local_add(transactional_id, producer_id, producer_epoch, tps, 2)
                return {tp: _for_produce(code) for tp in tps}
            local = self.local_verify(transactional_id, producer_id, producer_epoch, tps)
            return {tp: _for_produce(code) for tp, code in local.items()}
        node = self.metadata.broker(coordinator.leader)
        if node is None:
            return {tp: Code.NOT_ENOUGH_REPLICAS for tp in tps}
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": not add,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        self.pool.set_address(node.broker_id, node.host, node.port)
        try:
            conn = await self.pool.get(node.broker_id)
            r = await conn.request("AddPartitionsToTxn", body, version=(
                ADD_PARTITIONS_ADD_VERSION if add else ADD_PARTITIONS_VERIFY_VERSION))
        except (KafkaConnectionError, KafkaTimeoutError, OSError, AuthenticationError) as e:
            log.info("verifying with the transaction coordinator %d failed: %s", node.broker_id, e)
            return {tp: Code.NOT_ENOUGH_REPLICAS for tp in tps}
        codes = {(t.name, p.partition_index): p.partition_error_code
                 for tx in r.results_by_transaction for t in tx.topic_results for p in t.results_by_partition}
        return {tp: _for_produce(codes.get(tp, r.error_code or Code.INVALID_TXN_STATE)) for tp in tps}

    async def close(self) -> None:
        await self.pool.close_all()


def _for_produce(code: int) -> int:
    """The coordinator's answer as a Produce error every client version knows (Kafka's
    mapping): coordinator trouble is retriable, a fenced producer an old epoch, anything
    else a partition outside the transaction."""
    if code in (0, Code.INVALID_TXN_STATE):
        return code
    if code in (Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE, Code.COORDINATOR_LOAD_IN_PROGRESS,
                Code.CONCURRENT_TRANSACTIONS):
        return Code.NOT_ENOUGH_REPLICAS
    if code == Code.PRODUCER_FENCED:
        return Code.INVALID_PRODUCER_EPOCH
    return Code.INVALID_TXN_STATE
