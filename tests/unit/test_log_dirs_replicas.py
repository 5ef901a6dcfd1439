"""The replica manager over several log dirs: a failed dir's partitions become offline
(KAFKA_STORAGE_ERROR to Produce and LeaderAndIsr, acks=all waits answered, the controller
told), the other dir's partitions go on; AlterReplicaLogDirs' codes; no empty log in the ISR
while a dir is offline."""
from __future__ import annotations

import asyncio
import shutil
import uuid

import pytest

from broker.log import LogConfig, LogManager
from broker.replication.purgatory import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from clients.protocol.errors import Code, KafkaStorageErrorError
from clients.protocol.records import Record, build_batch

TOPIC_ID = uuid.uuid4()


def lead(rm: ReplicaManager, partition: int, isr: list[int] | None = None, epoch: int = 1) -> int:
    return rm.apply_partition_state("t", TOPIC_ID, partition, leader=0, leader_epoch=epoch,
                                    isr=isr or [0, 1], replicas=[0, 1], partition_epoch=1,
                                    log_config=None)


def records() -> bytes:
    return build_batch([Record(None, b"v")])


def manager(tmp_path) -> tuple[LogManager, ReplicaManager, list[str]]:
    lm = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], LogConfig())
    rm = ReplicaManager(0, lm, FetchPurgatory(), clock=lambda: 0.0)
    rm.halt = lambda reason: pytest.fail(f"halted: {reason}")
    return lm, rm, lm.log_dirs


def test_a_failed_dir_makes_its_partitions_offline_and_the_other_dir_goes_on(tmp_path):
    lm, rm, dirs = manager(tmp_path)
    announced: list[str] = []

    async def tell_controller(d: str) -> None:
        announced.append(d)
    rm.on_log_dir_failure = tell_controller

    async def run() -> None:
        assert lead(rm, 0) == 0 and lead(rm, 1) == 0
        broken, healthy = lm.log_dir_of("t", 0), lm.log_dir_of("t", 1)
        assert broken != healthy
        info = rm.append("t", 0, records(), required_acks=-1)
        waiting = asyncio.ensure_future(rm.wait_replicated("t", 0, info.last_offset + 1, 30))
        await asyncio.sleep(0)
        shutil.rmtree(rm.get("t", 0).log.dir)        # the disk loses the partition's files
        with pytest.raises(KafkaStorageErrorError):
            rm.get("t", 0).log.roll()
        assert await waiting == Code.KAFKA_STORAGE_ERROR
        with pytest.raises(KafkaStorageErrorError):
            rm.append("t", 0, records())
        assert rm.missing_code("t", 0, Code.UNKNOWN_TOPIC_OR_PARTITION) == Code.KAFKA_STORAGE_ERROR
        assert rm.missing_code("t", 1, Code.UNKNOWN_TOPIC_OR_PARTITION) == Code.UNKNOWN_TOPIC_OR_PARTITION
        assert lead(rm, 0, epoch=2) == Code.KAFKA_STORAGE_ERROR     # the controller learns it here
        assert rm.append("t", 1, records()).first_offset == 0       # the other dir serves on
        await asyncio.sleep(0)
        assert announced == [broken]
        assert broken is not None and rm.alter_replica_log_dir("t", 1, broken) == Code.KAFKA_STORAGE_ERROR
    asyncio.run(run())


def test_the_last_dir_failing_halts_the_broker(tmp_path):
    lm = LogManager([str(tmp_path / "only")], LogConfig())
    rm = ReplicaManager(0, lm, FetchPurgatory(), clock=lambda: 0.0)
    halted: list[str] = []
    rm.halt = halted.append
    assert lead(rm, 0) == 0
    rm.append("t", 0, records())
    shutil.rmtree(rm.get("t", 0).log.dir)
    with pytest.raises(KafkaStorageErrorError):
        rm.get("t", 0).log.roll()
    assert halted and "every log dir failed" in halted[0]


def test_no_empty_log_joins_the_isr_while_a_dir_is_offline(tmp_path):
    (tmp_path / "b").write_text("a file where a dir should be")     # offline from the start
    lm, rm, dirs = manager(tmp_path)
    assert list(lm.offline_dirs) == [str(tmp_path / "b")]
    # In the ISR at a later epoch: its log may be in the offline dir.
    assert lead(rm, 0, isr=[0, 1], epoch=3) == Code.KAFKA_STORAGE_ERROR
    assert lm.get_log("t", 0) is None
    # A new partition (epoch 0) or one this broker is not in the ISR of is created.
    assert lead(rm, 1, isr=[0, 1], epoch=0) == 0
    assert rm.apply_partition_state("t", TOPIC_ID, 2, leader=1, leader_epoch=3, isr=[1], replicas=[0, 1],
                                    partition_epoch=1, log_config=None) == 0


def test_alter_replica_log_dir_codes(tmp_path):
    lm, rm, dirs = manager(tmp_path)
    assert rm.alter_replica_log_dir("t", 0, str(tmp_path / "nowhere")) == Code.LOG_DIR_NOT_FOUND
    # Not here yet: REPLICA_NOT_AVAILABLE, and the dir is where its log will be created.
    other = dirs[1]
    assert rm.alter_replica_log_dir("t", 0, other) == Code.REPLICA_NOT_AVAILABLE
    assert lead(rm, 0) == 0 and lm.log_dir_of("t", 0) == other
    assert rm.alter_replica_log_dir("t", 0, other) == Code.NONE          # already there
    assert lm.future_log("t", 0) is None
    assert rm.alter_replica_log_dir("t", 0, dirs[0]) == Code.NONE
    assert lm.future_log("t", 0) is not None
