"""A leader told to stop its replica (StopReplica: the partition moved away, e.g. the end of
a reassignment) answers the acks=all produce requests still waiting for replication with
NOT_LEADER_OR_FOLLOWER at once, as Kafka's ReplicaManager.stopReplicas completes the delayed
produces; otherwise they hang until their timeout and an idempotent client that gives up on
them resends under a new producer epoch, duplicating what was written."""
from __future__ import annotations

import asyncio
import uuid

from broker.log import LogConfig, PartitionLog
from broker.replication.purgatory import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch


def test_stop_replica_answers_waiting_acks_all_produces(tmp_path) -> None:
    async def main() -> None:
        plog = PartitionLog(str(tmp_path / "t-0"), LogConfig())
        rm = ReplicaManager(0, None, FetchPurgatory(), clock=lambda: 0.0)
        rm.logs = type("Logs", (), {"get_log": staticmethod(lambda t, i: plog),
                                    "delete_log": staticmethod(lambda t, i: None)})()
        rm.apply_partition_state("t", uuid.uuid4(), 0, leader=0, leader_epoch=1, isr=[0, 1],
                                 replicas=[0, 1], partition_epoch=3, log_config=None)
        info = rm.append("t", 0, build_batch([Record(None, b"v")] * 3), required_acks=-1)
        waiting = asyncio.ensure_future(rm.wait_replicated("t", 0, info.last_offset + 1, 30.0))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        rm.stop_replica("t", 0, delete=True)
        assert await asyncio.wait_for(waiting, 1.0) == Code.NOT_LEADER_OR_FOLLOWER
    asyncio.run(main())
