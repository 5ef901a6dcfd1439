"""Kafka's TransactionStateManager: the transactional ids of the `__transaction_state`
partitions this broker leads. The topic is created on first use; a partition is loaded when
this broker starts to lead it (its leader epoch is the coordinator epoch every marker of its
transactions carries) and forgotten when another broker does.

Every state change of a transactional id is proposed (TransactionMetadata.prepare_*),
written to its partition with acks=all, and applied only once the ISR has it: a coordinator
that fails over reloads exactly what it acknowledged.

Runs on the broker's event loop: no locks; every state change happens between awaits.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Callable

from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.records import Record, build_batch
from zkcoord.store import MetadataStore

from ..log.keyed_replay import replay_keyed_records
from ..replication.coordinator_writes import COORDINATOR_WRITE_ERRORS
from ..replication.replica_manager import ReplicaManager
from ..topic_admin import TopicAdmin
from . import log_records as L
from .metadata import TransactionMetadata, TxnState, TxnTransit
from .settings import TxnSettings

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
LOADING = -1                        # a partition being loaded has no coordinator epoch yet



def to_log_value(t: TxnTransit) -> L.TxnLogValue:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(t.partitions):
        by_topic[topic].append(partition)
    return L.TxnLogValue(
        producer_id=t.producer_id, producer_epoch=t.producer_epoch,
        transaction_timeout_ms=t.txn_timeout_ms, transaction_status=int(t.state),
        transaction_partitions=tuple(L.TxnPartitions(topic, tuple(ps)) for topic, ps in by_topic.items()),
        transaction_last_update_timestamp_ms=t.txn_last_update_ms,
        transaction_start_timestamp_ms=t.txn_start_ms,
        previous_producer_id=t.prev_producer_id, next_producer_id=t.next_producer_id,
        client_transaction_version=t.client_transaction_version)


def from_log_value(v: L.TxnLogValue) -> TxnTransit:
    return TxnTransit(
        producer_id=v.producer_id, prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id, producer_epoch=v.producer_epoch,
        last_producer_epoch=-1, txn_timeout_ms=v.transaction_timeout_ms,
        state=TxnState(v.transaction_status),
        partitions=frozenset((p.topic, i) for p in v.transaction_partitions for i in p.partition_ids),
        txn_start_ms=v.transaction_start_timestamp_ms,
        txn_last_update_ms=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version)


class TransactionStateManager:
    def __init__(self, settings: TxnSettings, store: MetadataStore, topic_admin: TopicAdmin,
                 replicas: ReplicaManager,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)):
        self.settings = settings
        self.metadata_store = store
        self.topic_admin = topic_admin
        self.replicas = replicas
        self.wall_ms = wall_ms
        self.transactions: dict[str, TransactionMetadata] = {}
        self.partitions: dict[int, int] = {}       # partition -> coordinator epoch (LOADING)
        # Called with (partition, coordinator epoch, its transactions) once a load is done:
        # the coordinator finishes the transactions a failed coordinator left half done.
        self.on_loaded: Callable[[int, int, list[TransactionMetadata]], None] = lambda p, e, t: None

    # ================================================================== ownership and loading
    def partition_for(self, transactional_id: str) -> int:
        return L.partition_for(transactional_id, self.settings.num_partitions)

    async def ensure_topic(self) -> bool:
        """Create `__transaction_state` on first use, as Kafka does; False if it cannot be."""
        s = self.settings
        return await self.topic_admin.ensure_internal_topic(
            TXN_TOPIC, s.num_partitions, s.replication_factor,
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "min.insync.replicas": str(s.min_isr), "unclean.leader.election.enable": "false",
             "segment.bytes": str(s.segment_bytes)}, "transaction.state.log.replication.factor")

    def on_become_leader(self, partition: int, coordinator_epoch: int) -> None:
        if partition not in self.partitions or self.partitions[partition] != coordinator_epoch:
            self._forget(partition)
            self.partitions[partition] = LOADING
            asyncio.ensure_future(self._load(partition, coordinator_epoch))

    def on_resign(self, partition: int) -> None:
        """Another broker coordinates this partition's transactions now."""
        if self.partitions.pop(partition, None) is not None:
            self._forget(partition)

    def _forget(self, partition: int) -> None:
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[tid]

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        try:
            p = self.replicas.get(TXN_TOPIC, partition)
            latest: dict[str, TxnTransit | None] = {}
            for chunk in replay_keyed_records(p.log):
                await asyncio.sleep(0)      # other connections keep being served
                for key, value in chunk:
                    tid = L.decode_key(key).transactional_id
                    v = L.decode_value(value)
                    latest[tid] = None if v is None else from_log_value(v)
        except Exception:
            log.exception("loading %s-%d failed", TXN_TOPIC, partition)
            self.partitions.pop(partition, None)
            return
        if self.partitions.get(partition) != LOADING:
            return                          # resigned (or reloaded) meanwhile
        loaded = []
        for tid, t in latest.items():
            if t is None or t.state == TxnState.DEAD:
                continue
            meta = TransactionMetadata.from_transit(tid, t)
            self.transactions[tid] = meta
            loaded.append(meta)
        self.partitions[partition] = coordinator_epoch
        log.info("loaded %s-%d at coordinator epoch %d: %d transactional ids",
                 TXN_TOPIC, partition, coordinator_epoch, len(loaded))
        self.on_loaded(partition, coordinator_epoch, loaded)

    # ================================================================== lookups
    def check(self, transactional_id: str) -> int:
        """0 if this broker coordinates the id now, else Kafka's error code."""
        if not transactional_id:
            return Code.INVALID_REQUEST
        epoch = self.partitions.get(self.partition_for(transactional_id))
        if epoch == LOADING:
            return Code.COORDINATOR_LOAD_IN_PROGRESS
        if epoch is None:
            if self.metadata_store.topic(TXN_TOPIC) is None:
                return Code.COORDINATOR_NOT_AVAILABLE
            return Code.NOT_COORDINATOR
        return 0

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        """The epoch this broker coordinates the id at, None if it does not (any more)."""
        epoch = self.partitions.get(self.partition_for(transactional_id))
        return None if epoch is None or epoch == LOADING else epoch

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def put_if_absent(self, meta: TransactionMetadata) -> TransactionMetadata:
        return self.transactions.setdefault(meta.transactional_id, meta)

    # ================================================================== writes
    async def write(self, meta: TransactionMetadata, transit: TxnTransit) -> int:
        """Write `transit` (pending on `meta`) to the log with acks=all and apply it; 0, or
        the error a client gets (the transition then is dropped, nothing applied)."""
        tid = meta.transactional_id
        partition = self.partition_for(tid)
        epoch = self.coordinator_epoch(tid)
        code = Code.NOT_COORDINATOR
        if epoch is not None:
            value = None if transit.state == TxnState.DEAD else L.encode_value(to_log_value(transit))
            record = Record(L.encode_key(L.TxnLogKey(tid)), value)     # Dead: a tombstone
            try:
                info = self.replicas.append(TXN_TOPIC, partition, build_batch([record]), -1)
                code = await self.replicas.wait_replicated(
                    TXN_TOPIC, partition, info.last_offset + 1, self.settings.write_timeout_ms / 1000)
            except KafkaError as e:
                code = e.code
            if code == 0 and self.coordinator_epoch(tid) != epoch:
                code = Code.NOT_COORDINATOR         # the partition moved while we waited
        if code != 0:
            meta.abort_pending()
            mapped = COORDINATOR_WRITE_ERRORS.get(code, Code.UNKNOWN_SERVER_ERROR)
            log.info("%s: writing %s failed with %s (%s to the client)", tid, transit.state.kafka_name,
                     for_code(code).name, for_code(mapped).name)
            return mapped
        meta.complete_transition(transit)
        if meta.state == TxnState.DEAD and self.transactions.get(tid) is meta:
            del self.transactions[tid]              # expired: a later use starts afresh
        return 0
