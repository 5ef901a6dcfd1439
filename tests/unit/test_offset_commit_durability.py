"""A committed offset is acknowledged only once the ISR has it (Kafka writes offset commits
and group metadata with acks=all, offsets.commit.required.acks=-1): an offset answered
after the leader alone had it could vanish with that leader, and the group would re-read
records it had committed. Failures reach the client as Kafka maps them (not enough
replicas or a timeout -> COORDINATOR_NOT_AVAILABLE)."""
from __future__ import annotations

import asyncio
import uuid

from broker.group.offsets import OFFSETS_TOPIC, CommittedOffset, OffsetStore
from broker.log import LogConfig, PartitionLog
from broker.replication.purgatory import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from clients.protocol.errors import Code, KafkaError


def _leader_with_a_lagging_follower(tmp_path) -> tuple[ReplicaManager, OffsetStore]:
    plog = PartitionLog(str(tmp_path / f"{OFFSETS_TOPIC}-0"), LogConfig())
    rm = ReplicaManager(0, None, FetchPurgatory(), clock=lambda: 0.0)
    rm.logs = type("Logs", (), {"get_log": staticmethod(lambda t, i: plog)})()
    rm.apply_partition_state(OFFSETS_TOPIC, uuid.uuid4(), 0, leader=0, leader_epoch=1, isr=[0, 1],
                             replicas=[0, 1], partition_epoch=0, log_config=None)
    return rm, OffsetStore(rm, 1, commit_timeout_s=0.3)


def test_a_commit_is_answered_once_the_follower_has_it(tmp_path):
    async def main() -> None:
        rm, store = _leader_with_a_lagging_follower(tmp_path)
        commit = asyncio.ensure_future(store.commit("g", {("t", 0): CommittedOffset(42, -1, "", 1)}))
        await asyncio.sleep(0.05)
        assert not commit.done(), "answered before the follower had the commit"
        rm.record_follower_fetch(rm.get(OFFSETS_TOPIC, 0), 1, rm.get(OFFSETS_TOPIC, 0).log.log_end_offset)
        await asyncio.wait_for(commit, 1)
        assert store.get("g")[("t", 0)].offset == 42

    asyncio.run(main())


def test_a_commit_the_isr_never_gets_fails_as_coordinator_not_available(tmp_path):
    async def main() -> None:
        _, store = _leader_with_a_lagging_follower(tmp_path)
        try:
            await store.commit("g", {("t", 0): CommittedOffset(42, -1, "", 1)})
        except KafkaError as e:
            assert e.code == Code.COORDINATOR_NOT_AVAILABLE
        else:
            raise AssertionError("the commit was acknowledged without the ISR")
        assert store.get("g") == {}

    asyncio.run(main())
