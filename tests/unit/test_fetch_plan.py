"""The Fetch handler's per-partition answers (_FetchPlan), with a broker that has none of
the partitions asked for."""
from __future__ import annotations

from types import SimpleNamespace

from broker.server.handlers.fetch import _FetchPlan
from clients.protocol.errors import Code
from clients.protocol.schema import Struct


def _plan(isolation: int) -> _FetchPlan:
    broker = SimpleNamespace(replicas=SimpleNamespace(maybe_get=lambda topic, i: None))
    request = Struct(replica_id=-1, isolation_level=isolation, max_bytes=1 << 20)
    parts = [Struct(partition=i, fetch_offset=0, partition_max_bytes=1024, current_leader_epoch=-1)
             for i in range(2)]
    return _FetchPlan(broker, request, 11, [("t", None, parts)])


def test_a_partition_in_error_answers_the_aborted_list_of_its_isolation_level() -> None:
    """As every other partition does (a review caught errors answering null instead)."""
    for isolation, aborted in ((0, None), (1, [])):
        responses, total, any_error = _plan(isolation).read()
        assert any_error and total == 0
        for entry in responses[0]["partitions"]:
            assert entry["error_code"] == Code.UNKNOWN_TOPIC_OR_PARTITION
            assert entry["aborted_transactions"] == aborted
            assert entry["high_watermark"] == -1 and entry["records"] == b""
