"""Partition states on this broker: which it leads, which it follows, and the waits that
depend on replication (acks=all).

Standalone: this broker leads every partition and is its only in-sync replica, so the high
watermark follows the log end. In a cluster the controller's LeaderAndIsr decides
leadership; followers fetch from leaders (fetcher.py) and leaders track them (partition.py).
ISR changes go through `isr_writer`, a coroutine that performs the coordinator's conditional
write and returns the ISR the coordinator then holds with its partition epoch, or None when
this broker's view was stale.

Log dir failure (KIP-112): when the log manager takes a dir offline, its partitions become
offline here (Kafka's HostedPartition.Offline, until restart): Produce and LeaderAndIsr for
them answer KAFKA_STORAGE_ERROR, fetchers and acks=all waits for them stop, and
`on_log_dir_failure` tells the controller (ZooKeeper mode: a log dir event notification),
which moves their leadership elsewhere. With every dir offline the broker halts, as Kafka.

Single event-loop thread: the methods here are synchronous except the awaits on
replication, and do blocking file I/O of the log (page-cache writes, header preads).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any, Awaitable, Callable

from clients.protocol.errors import Code, KafkaError, KafkaStorageErrorError, UnknownTopicOrPartitionError

from ..log import ORIGIN_CLIENT, LogConfig, LogManager, PartitionLog

from .purgatory import FetchPurgatory, wait_or_resolve
from .partition import READ_COMMITTED, READ_UNCOMMITTED, Partition  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

# (partition, new ISR) -> (the ISR the coordinator holds at this leader epoch, its version),
# or None when it holds another leader epoch (this broker's view is stale).
# An exception means the write may or may not have landed.
IsrWriter = Callable[[Partition, list[int]], Awaitable["tuple[list[int], int] | None"]]

LOG_DIR_EVENT_RETRY_S = 1.0         # pause before telling the controller again


def halt_broker(reason: str) -> None:
    """Kafka's Exit.halt(1) when its last log dir failed: nothing left to serve from."""
    log.critical("halting the broker: %s", reason)
    logging.shutdown()
    os._exit(1)


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, purgatory: FetchPurgatory,
                 isr_writer: IsrWriter | None = None, clock: Callable[[], float] = time.monotonic):
        self.broker_id = broker_id
        self.logs = log_manager
        self.purgatory = purgatory
        self.isr_writer = isr_writer
        self.clock = clock
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._topic_names: dict[uuid.UUID, str] = {}    # Fetch v13+ names topics by id
        self.controller_epoch = 0
        # Waiters for the high watermark (acks=all), per partition.
        self._hw_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future]]] = {}
        self.on_become_follower: Callable[[Partition], None] | None = None
        self.on_stop_following: Callable[[Partition], None] | None = None
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec: ISR changes this leader made.
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.isr_retry_s = 0.5          # first pause before retrying an ISR write (doubles to 8 s)
        self._isr_tasks: set[asyncio.Future] = set()
        self._isr_stopped = False
        # Partitions whose log dir failed: offline on this broker until it restarts.
        self.offline: set[tuple[str, int]] = set()
        # Tells the controller a log dir failed (ZooKeeper: a log dir event notification);
        # retried until it succeeds.
        self.on_log_dir_failure: Callable[[str], Awaitable[object]] | None = None
        self.halt: Callable[[str], None] = halt_broker
        self._dir_event_tasks: set[asyncio.Future] = set()
        if log_manager is not None:         # some unit tests give a stand-in
            log_manager.on_dir_failure = self._log_dir_failed
            log_manager.on_log_replaced = self._log_replaced

    # ------------------------------------------------------------------ lookup
    def get(self, topic: str, partition: int) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            if (topic, partition) in self.offline:
                raise KafkaStorageErrorError(f"{topic}-{partition} is offline on broker {self.broker_id}: "
                                             f"its log dir failed")
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} is not on broker {self.broker_id}")
        return p

    def missing_code(self, topic: str, partition: int, default: int) -> int:
        """The error for a partition this broker does not serve: KAFKA_STORAGE_ERROR for
        one whose log dir failed (clients retry elsewhere), else `default`."""
        return Code.KAFKA_STORAGE_ERROR if (topic, partition) in self.offline else default

    def maybe_get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._topic_names.get(topic_id)

    def _get_or_create(self, topic: str, topic_id: uuid.UUID, index: int, log_config: Any) -> Partition:
        p = self.partitions.get((topic, index))
        if p is None:
            plog = self.logs.get_log(topic, index) or self.logs.create_log(topic, index, log_config)
            p = Partition(topic, index, topic_id, plog, self.broker_id, -1)
            self.partitions[(topic, index)] = p
            self._topic_names[topic_id] = topic
        return p

    # ------------------------------------------------------------------ standalone
    def become_leader(self, topic: str, topic_id: uuid.UUID, index: int, replicas: list[int],
                      leader_epoch: int, log_config: Any) -> Partition:
        """Standalone: lead with this broker as the only in-sync replica."""
        p = self._get_or_create(topic, topic_id, index, log_config)
        p.make_leader(leader_epoch, [self.broker_id], list(replicas), 0, self.clock())
        p.log.high_watermark = p.log.log_end_offset
        return p

    # ------------------------------------------------------------------ controller requests
    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, index: int, leader: int,
                              leader_epoch: int, isr: list[int], replicas: list[int],
                              partition_epoch: int, log_config: Any, controller_epoch: int = 0) -> int:
        """One partition of a LeaderAndIsr request; returns its error code."""
        if (topic, index) in self.offline:
            return Code.KAFKA_STORAGE_ERROR      # the controller marks this replica offline
        if self.broker_id not in replicas:
            return Code.UNKNOWN_TOPIC_OR_PARTITION
        existing = self.partitions.get((topic, index))
        if existing is not None and existing.leader_id != -1 and leader_epoch <= existing.leader_epoch \
                and not (leader_epoch == existing.leader_epoch and partition_epoch > existing.partition_epoch):
            return Code.STALE_CONTROLLER_EPOCH
        if existing is None and self.broker_id in isr and leader_epoch > 0 \
                and self.logs.get_log(topic, index) is None and self.logs.offline_dirs:
            # Kafka refuses to create a log that is not new while a dir is offline: it may be
            # in that dir, and an empty log counted in the ISR could be elected and lose what
            # was acknowledged. (Epoch 0: a new partition, Kafka's isNew.)
            log.error("%s-%d: no log here while log dirs %s are offline; it may be there",
                      topic, index, ", ".join(self.logs.offline_dirs))
            return Code.KAFKA_STORAGE_ERROR
        try:
            p = self._get_or_create(topic, topic_id, index, log_config)
        except KafkaStorageErrorError as e:
            log.error("%s-%d: cannot create its log: %s", topic, index, e)
            return Code.KAFKA_STORAGE_ERROR
        p.controller_epoch = controller_epoch
        was_follower = p.leader_id not in (-1, self.broker_id)
        if leader == self.broker_id:
            if was_follower and self.on_stop_following:
                self.on_stop_following(p)
            p.make_leader(leader_epoch, isr, replicas, partition_epoch, self.clock())
            log.info("%s-%d: leader at epoch %d, isr %s", topic, index, leader_epoch, isr)
        else:
            p.make_follower(leader, leader_epoch, isr, replicas, partition_epoch)
            log.info("%s-%d: follower of %d at epoch %d", topic, index, leader, leader_epoch)
            if self.on_become_follower:
                self.on_become_follower(p)
        self._wake(p)
        return 0

    # ------------------------------------------------------------------ produce
    def append(self, topic: str, partition: int, records: Any, required_acks: int = 1,
               origin: str = ORIGIN_CLIENT) -> Any:
        """`origin`: ORIGIN_CLIENT (a producer's batches, fully checked) or
        ORIGIN_COORDINATOR (the broker's own: transaction markers)."""
        p = self.get(topic, partition)
        info = p.append_as_leader(records, required_acks, origin)
        self._wake(p)
        return info

    async def wait_replicated(self, topic: str, partition: int, offset: int, timeout_s: float) -> int:
        """acks=all: wait until the high watermark reaches `offset`; the error code."""
        p = self.get(topic, partition)
        code = p.replicated_to(offset)
        if code is not None:
            return code
        fut = asyncio.get_running_loop().create_future()
        waiters = self._hw_waiters.setdefault((topic, partition), [])
        waiters.append((offset, fut))
        try:
            return await wait_or_resolve(fut, timeout_s, Code.REQUEST_TIMED_OUT)
        finally:
            if (offset, fut) in waiters:
                waiters.remove((offset, fut))

    def fail_waiters(self, code: int = Code.NOT_LEADER_OR_FOLLOWER) -> None:
        """Answer every acks=all wait with `code` (the broker is going away)."""
        for waiters in self._hw_waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(code)

    def stop_isr_changes(self) -> None:
        """The broker is stopping: ISR writes (and log dir events) still retrying end here,
        and none start."""
        self._isr_stopped = True
        for task in [*self._isr_tasks, *self._dir_event_tasks]:
            task.cancel()

    def _wake(self, p: Partition) -> None:
        """After the log end or the high watermark moved: wake fetches and acks=all waits."""
        key = (p.topic, p.index)
        self.purgatory.notify(key)
        waiters = self._hw_waiters.get(key)
        if waiters:
            for offset, fut in list(waiters):
                code = p.replicated_to(offset)
                if code is not None and not fut.done():
                    fut.set_result(code)

    # ------------------------------------------------------------------ followers (leader side)
    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        if p.update_follower(replica_id, fetch_offset, self.clock()):
            self._wake(p)
        if not p.isr_change_in_flight and self.isr_writer and p.should_join_isr(replica_id):
            self._start_isr_change(p, sorted(set(p.isr) | {replica_id}))

    async def shrink_isrs(self, lag_max_ms: int) -> None:
        """Drop followers that have not caught up within replica.lag.time.max.ms."""
        now = self.clock()
        for p in list(self.partitions.values()):
            if p.is_leader and not p.isr_change_in_flight and self.isr_writer:
                out = p.isr_to_shrink(now, lag_max_ms / 1000.0)
                if out:
                    self._start_isr_change(p, [r for r in p.isr if r not in out])

    def _start_isr_change(self, p: Partition, new_isr: list[int]) -> None:
        """Mark the write pending at once (before its task first runs, so a second fetch in
        the same pass cannot start another), then write it in a task."""
        if self._isr_stopped:
            return
        p.pending_isr = list(new_isr)
        task = asyncio.ensure_future(self._change_isr(p, new_isr, p.leader_epoch))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _change_isr(self, p: Partition, new_isr: list[int], epoch: int) -> None:
        """Write `new_isr`, then apply what the coordinator holds. Until the answer is known
        the write is pending and counts for the high watermark (Partition.pending_isr).
        A failed write may have landed (a lost connection), and the controller may elect
        from what landed, so it is retried while this broker leads at `epoch`, as Kafka
        retries AlterPartition. A LeaderAndIsr with a new leader epoch resets the
        partition's ISR state (Partition.make_leader / make_follower); a write of an older
        epoch then ends quietly."""
        assert self.isr_writer is not None
        pause = self.isr_retry_s
        while True:
            if self._isr_stopped or not self._leads_at(p, epoch):
                return
            try:
                written = await self.isr_writer(p, new_isr)
                break
            except Exception as e:
                if self._isr_stopped or not self._leads_at(p, epoch):
                    return
                log.warning("%s-%d: ISR change to %s failed, outcome unknown (%r); retrying in %.1f s",
                            p.topic, p.index, new_isr, e, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 8.0)
        if not self._leads_at(p, epoch):
            return
        if written is None:
            # Refused: the coordinator holds another leader epoch, so this view is stale.
            # As Kafka, stay pending with the maximal ISR until the controller's
            # LeaderAndIsr (which is on its way) resets it: no stream of doomed writes.
            return
        isr, version = written
        log.info("%s-%d: ISR %s -> %s", p.topic, p.index, p.isr, isr)
        if len(isr) < len(p.isr):
            self.isr_shrinks += 1
        elif len(isr) > len(p.isr):
            self.isr_expands += 1
        p.isr = list(isr)
        p.partition_epoch = version
        p.pending_isr = None            # the coordinator holds exactly `isr` at our epoch
        p.maybe_advance_high_watermark()
        self._wake(p)

    def _leads_at(self, p: Partition, epoch: int) -> bool:
        return p.is_leader and p.leader_epoch == epoch and self.partitions.get((p.topic, p.index)) is p

    # ------------------------------------------------------------------ followers (follower side)
    def follower_appended(self, p: Partition, leader_high_watermark: int) -> None:
        p.log.high_watermark = min(leader_high_watermark, p.log.log_end_offset)
        self.purgatory.notify((p.topic, p.index))

    # ------------------------------------------------------------------ log dirs
    def alter_replica_log_dir(self, topic: str, partition: int, log_dir: str) -> int:
        """AlterReplicaLogDirs for one partition (Kafka's ReplicaManager.alterReplicaLogDirs):
        the dir becomes the partition's preferred one (a replica created later goes there)
        and a hosted replica starts moving there (dir_mover). The error code: NONE,
        LOG_DIR_NOT_FOUND (not one of log.dirs), KAFKA_STORAGE_ERROR (the dir or the
        replica is offline), REPLICA_NOT_AVAILABLE (no replica here yet)."""
        try:
            self.logs.set_preferred_dir(topic, partition, log_dir)
            if (topic, partition) in self.offline:
                return Code.KAFKA_STORAGE_ERROR
            if (topic, partition) not in self.partitions:
                return Code.REPLICA_NOT_AVAILABLE
            self.logs.create_future_log(topic, partition, log_dir)
        except KafkaError as e:
            return e.code
        return Code.NONE

    def _log_dir_failed(self, log_dir: str, lost: list[tuple[str, int]]) -> None:
        """The log manager took `log_dir` offline with the logs of `lost`: stop serving
        them (Kafka's handleLogDirFailure) and tell the controller."""
        for key in lost:
            self.offline.add(key)
            p = self.partitions.pop(key, None)
            if p is None:
                continue
            if self.on_stop_following and not p.is_leader:
                self.on_stop_following(p)
            for _, fut in self._hw_waiters.pop(key, []):
                if not fut.done():
                    fut.set_result(Code.KAFKA_STORAGE_ERROR)
            self.purgatory.notify(key)
        log.error("broker %d stopped serving %d partition(s) of the failed log dir %s: %s",
                  self.broker_id, len(lost), log_dir, ", ".join(f"{t}-{i}" for t, i in lost) or "none")
        if not self.logs.online_dirs:
            self.halt(f"every log dir failed ({', '.join(self.logs.log_dirs)})")
            return
        if self.on_log_dir_failure is not None:
            task = asyncio.ensure_future(self._announce_dir_failure(log_dir))
            self._dir_event_tasks.add(task)
            task.add_done_callback(self._dir_event_tasks.discard)

    async def _announce_dir_failure(self, log_dir: str) -> None:
        assert self.on_log_dir_failure is not None
        while True:
            try:
                await self.on_log_dir_failure(log_dir)
                return
            except Exception as e:          # noqa: BLE001 - the controller must hear of it
                log.warning("cannot tell the controller that %s failed (%r); retrying", log_dir, e)
            await asyncio.sleep(LOG_DIR_EVENT_RETRY_S)

    def _log_replaced(self, key: tuple[str, int], plog: PartitionLog) -> None:
        """A move between log dirs finished: the partition reads and appends the new log."""
        p = self.partitions.get(key)
        if p is not None:
            p.log = plog
            self._wake(p)

    # ------------------------------------------------------------------ removal / config
    def stop_replica(self, topic: str, partition: int, delete: bool) -> None:
        p = self.partitions.pop((topic, partition), None)
        if p is None:
            return
        if not any(t == topic for t, _ in self.partitions):
            self._topic_names.pop(p.topic_id, None)
        if self.on_stop_following and not p.is_leader:
            self.on_stop_following(p)
        if delete:
            self.logs.delete_log(topic, partition)
        self._wake(p)
        # Kafka's stopReplicas completes the delayed produces: acks=all waits here can no
        # longer be met by this broker, and a client left waiting would time out and resend.
        for _, fut in self._hw_waiters.pop((topic, partition), []):
            if not fut.done():
                fut.set_result(Code.NOT_LEADER_OR_FOLLOWER)

    def delete_partition(self, topic: str, partition: int) -> None:
        self.stop_replica(topic, partition, delete=True)

    def update_log_config(self, topic: str, log_config: LogConfig) -> None:
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(log_config)
