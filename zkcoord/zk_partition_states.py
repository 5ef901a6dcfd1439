"""Partition leadership in ZooKeeper: each partition's state znode (leader, leader epoch, ISR)
written with compare-and-set on its zk version, the ISR change notifications leaders leave
for the controller, and requests for a preferred replica election.

Writes that must not overwrite newer state are conditional on the znode version: a refused
write (StaleZkVersionError) means the caller holds stale state (a deposed leader or
controller) and must re-read, never blindly retry. A controller also passes the zk version of
/controller_epoch from its election, so its writes fail once another broker is controller.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from clients.protocol.errors import UnknownTopicOrPartitionError

from . import zk_paths as zp
from .zk_errors import NoPartitionStateError, PartitionStateExistsError, StaleZkVersionError
from .zk_paths import PartitionState, TopicPartition
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")


class PartitionStates:
    def __init__(self, session: ZkSession):
        self.session = session

    async def get(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        """(state, zk version) or None when the partition has no state yet."""
        path = zp.partition_state_path(topic, partition)
        got = await self.session.get(path)
        if got is None:
            return None
        return zp.decode_partition_state(got[0], path), got[1].version

    async def get_many(self, partitions: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, tuple[PartitionState, int]]:
        tps = list(partitions)
        got = await asyncio.gather(*(self.get(t, p) for t, p in tps))
        return {tp: g for tp, g in zip(tps, got) if g is not None}

    async def create(self, topic: str, partition: int, state: PartitionState,
                     *, controller_epoch_zk_version: int | None = None) -> int:
        """Create the state znode (and its parents); returns its zk version (0). Raises
        PartitionStateExistsError, or ControllerMovedError when the epoch check fails."""
        session = self.session
        c = session.client
        for parent in (zp.topic_partitions_path(topic), zp.topic_partition_path(topic, partition)):
            try:
                await session.create(parent, b"")
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.") from None
        path = zp.partition_state_path(topic, partition)
        data = zp.encode_partition_state(state)
        try:
            await session.guarded(controller_epoch_zk_version,
                                  lambda t: t.create(path, data), lambda: c.create_async(path, data))
        except NodeExistsError:
            got = await session.get(path)
            if got is not None and got[0] == data and got[1].version == 0:
                return 0           # our own create, retried after a dropped connection
            raise PartitionStateExistsError(f"{path} already exists") from None
        return 0

    async def create_many(self, states: Mapping[TopicPartition, PartitionState], *,
                          controller_epoch_zk_version: int | None = None
                          ) -> dict[TopicPartition, int | Exception]:
        tps = list(states)
        results = await asyncio.gather(
            *(self.create(t, p, states[(t, p)], controller_epoch_zk_version=controller_epoch_zk_version)
              for t, p in tps), return_exceptions=True)
        return {tp: r for tp, r in zip(tps, results)}   # type: ignore[misc]

    async def update(self, topic: str, partition: int, state: PartitionState,
                     expected_version: int, *,
                     controller_epoch_zk_version: int | None = None) -> int:
        """Conditional write of a partition's leader/ISR; returns the new zk version.

        Raises StaleZkVersionError when the znode is no longer at `expected_version` (a newer
        leader or controller wrote it: re-read, never blindly retry), NoPartitionStateError
        when it does not exist, ControllerMovedError when the controller-epoch check fails.
        (After a dropped connection the retried write can report StaleZkVersionError for a
        write that did land; re-reading shows it.)"""
        c = self.session.client
        path = zp.partition_state_path(topic, partition)
        data = zp.encode_partition_state(state)
        try:
            stat = await self.session.guarded(
                controller_epoch_zk_version,
                lambda t: t.set_data(path, data, expected_version),
                lambda: c.set_async(path, data, expected_version))
        except BadVersionError:
            raise StaleZkVersionError(
                path, expected_version,
                f"BADVERSION: partition state of {topic}-{partition} is no longer at zk version "
                f"{expected_version} (a newer leader or controller wrote it)") from None
        except NoNodeError:
            raise NoPartitionStateError(f"{path} does not exist") from None
        return stat.version

    async def update_many(self, updates: Mapping[TopicPartition, tuple[PartitionState, int]], *,
                          controller_epoch_zk_version: int | None = None
                          ) -> dict[TopicPartition, int | Exception]:
        """Many conditional writes at once (like Kafka's updateLeaderAndIsr): per partition
        the new zk version or the exception (StaleZkVersionError means retry after re-read)."""
        tps = list(updates)
        results = await asyncio.gather(
            *(self.update(t, p, *updates[(t, p)], controller_epoch_zk_version=controller_epoch_zk_version)
              for t, p in tps), return_exceptions=True)
        return {tp: r for tp, r in zip(tps, results)}   # type: ignore[misc]

    async def update_isr_as_leader(self, topic: str, partition: int, state: PartitionState,
                                   expected_version: int) -> tuple[list[int], int] | None:
        """A leader's conditional ISR write (Kafka's Partition.updateIsr in ZooKeeper mode):
        the ISR the znode then holds at `state`'s leader and epoch, with its zk version; None
        when it holds another leader or epoch (this leader's view is stale).

        Refused for its version, the znode is re-read: only the leader writes at its own
        epoch (the controller bumps the epoch), so a znode at our leader and epoch holds an
        earlier write of ours whose answer was lost with a connection (Kafka's
        checkLeaderAndIsrZkData). Its ISR is what the controller would elect from: taken."""
        try:
            version = await self.update(topic, partition, state, expected_version)
            return list(state.isr), version
        except NoPartitionStateError:
            return None                     # the topic is being deleted
        except StaleZkVersionError:
            got = await self.get(topic, partition)
            if got is None:
                return None
            held, version = got
            if held.leader != state.leader or held.leader_epoch != state.leader_epoch:
                return None
            return list(held.isr), version

    # ------------------------------------------------------------ ISR change notifications

    async def notify_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """A leader that changed ISRs tells the controller: creates
        /isr_change_notification/isr_change_<seq>; returns the node name."""
        data = zp.encode_isr_change(partitions)
        path = await self.session.create(zp.isr_change_create_path(), data, sequence=True,
                                         makepath=True)
        return zp.parent_and_name(path)[1]

    async def isr_change_notifications(self) -> dict[str, set[TopicPartition]]:
        """Pending notifications by node name (the controller reads, acts, then deletes)."""
        names = sorted(await self.session.children(zp.ISR_CHANGE_NOTIFICATION))
        datas = await asyncio.gather(*(self.session.get(zp.isr_change_path(n)) for n in names))
        out: dict[str, set[TopicPartition]] = {}
        for name, got in zip(names, datas):
            if got is None:
                continue
            try:
                out[name] = zp.decode_isr_change(got[0])
            except zp.ZkDataError as e:
                log.error("unreadable ISR change notification %s: %s", name, e)
                out[name] = set()
        return out

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        await asyncio.gather(*(self.session.delete_if_exists(zp.isr_change_path(n)) for n in names))

    # ------------------------------------------------------------ preferred replica election

    async def request_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        data = zp.encode_preferred_replica_election(partitions)
        await self.session.create(zp.PREFERRED_REPLICA_ELECTION, data, makepath=True)

    async def preferred_replica_election(self) -> set[TopicPartition] | None:
        got = await self.session.get(zp.PREFERRED_REPLICA_ELECTION)
        return None if got is None else zp.decode_preferred_replica_election(got[0])

    async def clear_preferred_replica_election(self) -> None:
        await self.session.delete_if_exists(zp.PREFERRED_REPLICA_ELECTION)

    async def reassign_partitions_request(self) -> tuple[dict[TopicPartition, list[int]], int] | None:
        """/admin/reassign_partitions and its version, None when absent; an unreadable one
        is deleted (Kafka's controller drops it too)."""
        got = await self.session.get(zp.REASSIGN_PARTITIONS)
        if got is None:
            return None
        try:
            return zp.decode_reassign_partitions(got[0]), got[1].version
        except zp.ZkDataError as e:
            log.error("deleting unreadable %s: %s", zp.REASSIGN_PARTITIONS, e)
            await self.session.delete_if_exists(zp.REASSIGN_PARTITIONS)
            return None

    async def finish_reassign_partitions(self, done: Iterable[TopicPartition]) -> None:
        """Take completed partitions out of /admin/reassign_partitions; delete it when none
        is left (Kafka's removePartitionsFromZkReassignment)."""
        done = set(done)
        for _ in range(5):
            got = await self.reassign_partitions_request()
            if got is None:
                return
            targets, version = got
            left = {tp: r for tp, r in targets.items() if tp not in done}
            if left == targets:
                return
            try:
                if left:
                    await self.session.set(zp.REASSIGN_PARTITIONS, zp.encode_reassign_partitions(left), version)
                else:
                    await self.session.delete_if_exists(zp.REASSIGN_PARTITIONS, version)
                return
            except BadVersionError:
                continue

