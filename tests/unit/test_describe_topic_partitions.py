"""DescribeTopicPartitions (KIP-966) as Kafka's handler answers it: pages of partitions with a
cursor, topics in name order, Describe asked per topic, and its wire format read by
kafka-python 3's own codec (an independent implementation of Kafka's spec)."""
from __future__ import annotations

from pathlib import Path

from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from clients.protocol.acl import AclOperation as Op, ResourceType as Rt
from clients.protocol.errors import Code
from clients.protocol.messages import API_BY_NAME
from clients.protocol.types import Reader, Writer
from tests.unit.test_handler_authorization import secured, run

API = API_BY_NAME["DescribeTopicPartitions"]


def _ask(topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> dict:
    return {"topics": [{"name": t} for t in topics], "response_partition_limit": limit,
            "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}}


def _pages(r) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]


def test_pages_follow_the_cursor_across_topics(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path, {"a": 3, "b": 2, "c": 1}) as (broker, acls, _, admin):
            r = await admin.ask("DescribeTopicPartitions", _ask(["c", "a", "b"], limit=2), 0)
            assert _pages(r) == [("a", [0, 1])]
            assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("a", 2)
            r = await admin.ask("DescribeTopicPartitions", _ask(["c", "a", "b"], 2, ("a", 2)), 0)
            # The rest of "a", then "b" until the page is full: the next page starts inside b.
            assert _pages(r) == [("a", [2]), ("b", [0])]
            assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("b", 1)
            r = await admin.ask("DescribeTopicPartitions", _ask(["c", "a", "b"], 2, ("b", 1)), 0)
            assert _pages(r) == [("b", [1]), ("c", [0])] and r.next_cursor is None
            r = await admin.ask("DescribeTopicPartitions", _ask(["a", "b"], 3), 0)
            assert _pages(r) == [("a", [0, 1, 2])]
            assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("b", 0)
            meta = broker.store.topic("a")
            t = r.topics[0]
            assert t.error_code == 0 and t.topic_id == meta.topic_id and not t.is_internal
            p = t.partitions[0]
            assert p.leader_id == 0 and p.replica_nodes == [0] and p.isr_nodes == [0]
            assert p.eligible_leader_replicas is None and p.last_known_elr is None
            assert t.topic_authorized_operations != -2147483648     # always told, as Kafka
    run(main())


def test_all_topics_and_errors(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path, {"a": 1, "b": 1}) as (broker, acls, alice, admin):
            r = await admin.ask("DescribeTopicPartitions", _ask([]), 0)
            names = [t.name for t in r.topics]
            assert names == sorted(names) and {"a", "b", "__consumer_offsets"} <= set(names)
            assert [t.is_internal for t in r.topics if t.name == "__consumer_offsets"] == [True]
            r = await admin.ask("DescribeTopicPartitions", _ask(["ghost", "bad/name"]), 0)
            assert {t.name: t.error_code for t in r.topics} == {
                "ghost": Code.UNKNOWN_TOPIC_OR_PARTITION, "bad/name": Code.INVALID_TOPIC_EXCEPTION}
            # The cursor's topic must be one of those named; a negative partition is invalid.
            r = await admin.ask("DescribeTopicPartitions", _ask(["a"], cursor=("b", 0)), 0)
            assert [t.error_code for t in r.topics] == [Code.INVALID_REQUEST]
            r = await admin.ask("DescribeTopicPartitions", _ask(["a"], cursor=("a", -1)), 0)
            assert [t.error_code for t in r.topics] == [Code.INVALID_REQUEST]

            # Describe is asked per topic; a refused named topic says nothing of itself.
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "a")
            r = await alice.ask("DescribeTopicPartitions", _ask(["a", "b"]), 0)
            assert [(t.name, t.error_code) for t in r.topics] == [
                ("a", 0), ("b", Code.TOPIC_AUTHORIZATION_FAILED)]
            assert r.topics[1].topic_id.int == 0 and r.topics[1].partitions == []
            assert r.topics[0].topic_authorized_operations == 1 << Op.DESCRIBE
            r = await alice.ask("DescribeTopicPartitions", _ask([]), 0)
            assert [t.name for t in r.topics] == ["a"]
    run(main())


def test_kafka_python_codec_reads_strom_and_strom_reads_it() -> None:
    sent = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")], response_partition_limit=7,
        cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="t", partition_index=3))
    got = API.decode_request(Reader(memoryview(sent.encode(version=0))), 0)
    assert [t.name for t in got.topics] == ["t"] and got.response_partition_limit == 7
    assert (got.cursor.topic_name, got.cursor.partition_index) == ("t", 3)

    w = Writer()
    API.encode_response({"topics": [{"name": "t", "partitions": [
        {"partition_index": 1, "leader_id": 2, "replica_nodes": [2, 3], "isr_nodes": [2]}]}],
        "next_cursor": {"topic_name": "t", "partition_index": 2}}, 0, w)
    answer = DescribeTopicPartitionsResponse.decode(b"".join(bytes(c) for c in w.chunks()), version=0)
    p = answer.topics[0].partitions[0]
    assert (p.partition_index, p.leader_id, list(p.replica_nodes), p.eligible_leader_replicas) == \
        (1, 2, [2, 3], None)
    assert answer.next_cursor.partition_index == 2
