"""The client's metadata snapshot answers the producers' hot-path questions from two maps
derived once per snapshot: partition counts (every send()) and leaders (every look of the
sender). They must say what the snapshot's own lookups say, topics with an error included."""
from __future__ import annotations

import pickle

from clients.aio.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from clients.types import TopicPartition


def snapshot() -> ClusterMetadata:
    def part(topic: str, i: int, leader: int) -> PartitionInfo:
        return PartitionInfo(topic, i, leader, 0, (leader,), (leader,))
    return ClusterMetadata(
        {1: BrokerInfo(1, "127.0.0.1", 9092), 2: BrokerInfo(2, "127.0.0.1", 9093)},
        {"a": TopicInfo("a", {0: part("a", 0, 1), 1: part("a", 1, 2), 2: part("a", 2, -1)}),
         "b": TopicInfo("b", {0: part("b", 0, 2)}),
         "bad": TopicInfo("bad", {0: part("bad", 0, 1)}, error_code=3)})


def test_partition_counts_leave_out_topics_with_an_error() -> None:
    c = snapshot()
    assert c.partition_counts == {"a": 3, "b": 1}
    assert [c.partition_count(t) for t in ("a", "b", "bad", "unknown")] == [3, 1, 0, 0]


def test_leaders_answer_as_leader_for_and_take_a_topic_partition() -> None:
    c = snapshot()
    keys = [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("bad", 0), ("nope", 0)]
    assert [c.leaders[k] for k in keys] == [1, 2, -1, -1, 2, -1, -1]
    assert [c.leader_for(*k) for k in keys] == [1, 2, -1, -1, 2, -1, -1]
    assert c.leaders[TopicPartition("a", 1)] == 2
    lookup = c.leaders.__getitem__          # what the producer's sender hands around
    assert lookup(TopicPartition("b", 0)) == 2 and lookup(TopicPartition("b", 9)) == -1
    assert ("a", 3) not in c.leaders, "a miss answers -1 without being remembered"


def test_the_maps_are_the_snapshots_own() -> None:
    old = snapshot()
    assert old.leaders[("b", 0)] == 2
    new = ClusterMetadata(old.brokers, {"b": TopicInfo("b", {
        0: PartitionInfo("b", 0, 1, 1, (1,), (1,))})})
    assert new.leaders[("b", 0)] == 1 and old.leaders[("b", 0)] == 2
    assert new.partition_counts == {"b": 1}
    assert new == ClusterMetadata(old.brokers, dict(new.topics)), "equality is the fields'"
    copy = pickle.loads(pickle.dumps(old))
    assert copy.leaders[("a", 1)] == 2 and copy == old
