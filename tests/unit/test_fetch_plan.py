"""The Fetch handler's per-partition answers (_FetchPlan), with a broker that has none of
the partitions asked for."""
from __future__ import annotations

from types import SimpleNamespace

from broker.server.handlers.fetch import _FetchPlan
from clients.protocol.errors import Code
from clients.protocol.schema import Struct


def _plan(isolation: int) -> _FetchPlan:
    replicas = SimpleNamespace(maybe_get=lambda topic, i: None, missing_code=lambda topic, i, default: default)
    request = Struct(replica_id=-1, isolation_level=isolation, max_bytes=1 << 20)
    parts = [Struct(partition=i, fetch_offset=0, partition_max_bytes=1024, current_leader_epoch=-1)
             for i in range(2)]
    return _FetchPlan(replicas, request, 11, [("t", None, parts)])


def test_a_partition_in_error_answers_the_aborted_list_of_its_isolation_level() -> None:
    """As every other partition does (a review caught errors answering null instead)."""
    for isolation, aborted in ((0, None), (1, [])):
        responses, total, any_error = _plan(isolation).read()
        assert any_error and total == 0
        for entry in responses[0]["partitions"]:
            assert entry["error_code"] == Code.UNKNOWN_TOPIC_OR_PARTITION
            assert entry["aborted_transactions"] == aborted
            assert entry["high_watermark"] == -1 and entry["records"] == b""


def test_a_follower_position_outside_the_log_is_not_recorded(tmp_path) -> None:
    """Kafka updates a follower's fetch state only when its read succeeded: a fetch offset
    beyond the leader's log end (a follower with a tail it has not truncated yet) answers
    OFFSET_OUT_OF_RANGE and must not count as that follower holding the leader's records,
    or the high watermark would pass records the follower does not have."""
    import uuid

    from broker.log import LogConfig, PartitionLog
    from broker.replication.partition import Partition
    from clients.protocol.records import Record, build_batch

    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    p = Partition("t", 0, uuid.uuid4(), log, broker_id=0, leader_id=0)
    p.make_leader(3, [0, 1], [0, 1], 1, now=0.0)
    log.append_as_leader(build_batch([Record(None, b"v")] * 5), 3)       # offsets 0..4
    recorded = []

    def record_follower_fetch(partition, replica_id, offset):
        recorded.append((replica_id, offset))
        partition.update_follower(replica_id, offset, 0.0)

    replicas = SimpleNamespace(maybe_get=lambda topic, i: p, record_follower_fetch=record_follower_fetch)
    request = Struct(replica_id=1, isolation_level=0, max_bytes=1 << 20)

    def fetch_at(offset: int) -> int:
        rp = Struct(partition=0, fetch_offset=offset, partition_max_bytes=1024, current_leader_epoch=3)
        plan = _FetchPlan(replicas, request, 11, [("t", None, [rp])])
        plan.record_follower_positions()
        responses, _, _ = plan.read()
        return responses[0]["partitions"][0]["error_code"]

    assert fetch_at(2) == 0 and p.high_watermark == 2
    assert fetch_at(9) == Code.OFFSET_OUT_OF_RANGE
    assert recorded == [(1, 2)] and p.high_watermark == 2       # not 5: the follower has 2
