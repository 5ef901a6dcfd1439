"""ONE consumer group mixing three client libraries, each member its own OS process
(tests/support/groups2_consumer.py): confluent-kafka (partition.assignment.strategy=range),
kafka-python ([RangePartitionAssignor]) and aiokafka ((RangePartitionAssignor,)). All offer
the "range" protocol, so the coordinator finds it in common whoever leads and whichever
library's subscription metadata the leader has to decode. On a 6-partition topic: every
partition owned by exactly one member (2 each), every record consumed exactly once, clean
shutdowns, and the committed offsets read back identically by all three libraries."""
from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KPTopicPartition
from kafka.admin import KafkaAdminClient

from tests.support.groups2_harness import (Member, check_all_seen, check_exclusive_ownership,
                                           current_assignment, seen_by_member, stderr_problems, wait_for)
from tests.support.groups2_scenario import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 6
N = 6_000
CLIENTS = ["confluent", "kafka-python", "aiokafka"]


def committed_kafka_python(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(KPTopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        c.close(autocommit=False)


def committed_aiokafka(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AIOTopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await c.start()
        try:
            return {p: await c.committed(AIOTopicPartition(topic, p)) for p in range(PARTITIONS)}
        finally:
            await c.stop()
    return asyncio.run(run())


def committed_confluent(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.committed([CKTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
        assert all(tp.error is None for tp in res), res
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res}
    finally:
        c.close()


def committed_everywhere(bootstrap: str, group: str, topic: str) -> dict[str, dict[int, int | None]]:
    return {"kafka-python": committed_kafka_python(bootstrap, group, topic),
            "aiokafka": committed_aiokafka(bootstrap, group, topic),
            "confluent": committed_confluent(bootstrap, group, topic)}


@pytest.mark.parametrize("leader", CLIENTS)
def test_mixed_client_group_range(broker, tmp_path, leader):
    """`leader` joins first and alone, so it stays the group leader and runs the range
    assignment over the other two libraries' subscriptions."""
    topic, group = f"groups2-mixed-{leader}", f"groups2-mixed-{leader}-group"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    order = [leader] + [c for c in CLIENTS if c != leader]
    members = [Member(tmp_path, f"mixed-{c}", c, broker.bootstrap, topic, group, strategy="range",
                      commit_every=500) for c in order]
    try:
        members[0].start()
        wait_for(lambda: current_assignment(members[:1], PARTITIONS), 30, f"{leader} to own all partitions")
        for m in members[1:]:
            m.start()

        def stable():
            for m in members:
                assert m.alive(), f"{m.name} exited:\n{m.stderr()}"
            return current_assignment(members, PARTITIONS)

        assignment = wait_for(stable, 40, "the three members to share the 6 partitions")
        assert sorted(len(s) for s in assignment.values()) == [2, 2, 2], assignment
        # range: each member holds two adjacent partitions.
        assert sorted(sorted(s) for s in assignment.values()) == [[0, 1], [2, 3], [4, 5]], assignment

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="groups2-admin")
        try:
            desc = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert desc["error"] is None and desc["group_state"] == "Stable", desc
        assert desc["protocol_type"] == "consumer" and desc["protocol_data"] == "range", desc
        assert sorted(m["client_id"] for m in desc["members"]) == sorted(m.name for m in members), desc
        for d in desc["members"]:      # the coordinator hands out what the members' logs say
            [a] = d["member_assignment"]["assigned_partitions"]
            assert a["topic"] == topic and sorted(a["partitions"]) == sorted(assignment[d["client_id"]]), desc

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        try:
            futures = [producer.send(topic, key=b"k-%d" % (i % 300), value=f"v-{i}".encode())
                       for i in range(N)]
            producer.flush(30)
            produced = {}
            for i, f in enumerate(futures):
                md = f.get(timeout=0)
                produced[(md.partition, md.offset)] = f"v-{i}"
        finally:
            producer.close(5)
        end = {p: 1 + max(o for q, o in produced if q == p) for p in range(PARTITIONS)}
        assert all(end[p] > 0 for p in range(PARTITIONS)), end

        # Consumed and committed up to the end, each partition by its owner.
        def committed_to_end():
            for m in members:
                assert m.alive(), f"{m.name} exited:\n{m.stderr()}"
            done = {}
            for m in members:
                for e in m.log().of("commit"):
                    done.update(e.offsets())
            return done == end

        wait_for(committed_to_end, 30, "every partition consumed and committed to its end", interval=0.2)
        assert stable() == assignment, "a rebalance happened during a clean run"

        # The members' commits, read back by every library while the group is Stable ...
        for lib, got in committed_everywhere(broker.bootstrap, group, topic).items():
            assert got == end, f"{lib} reads committed offsets {got}, expected {end}"

        for m in members:
            rc = m.stop()
            assert rc == 0, f"{m.name} exited {rc}:\n{m.stderr()}"
    finally:
        for m in members:
            m.cleanup()

    logs = {m.name: m.log() for m in members}
    for m in members:
        assert logs[m.name].of("closed"), f"{m.name} did not shut down cleanly"
        problems = stderr_problems(m.stderr(), until=logs[m.name].of("closing")[-1].ts)
        assert not problems, f"{m.name}: {problems}"
        bad = [e for e in logs[m.name].events if e.kind in ("commit-failed", "consume-error")]
        assert not bad, f"{m.name}: {bad}"
    check_exclusive_ownership(logs, {n: log.of("closed")[-1].ts for n, log in logs.items()})
    seen = seen_by_member(logs)
    check_all_seen(seen, produced)
    twice = {tp: copies for tp, copies in seen.items() if len(copies) > 1}
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {list(twice.items())[:5]}"
    # Every record was read by the member that owned its partition in the stable assignment.
    for (p, _), [(name, _)] in seen.items():
        assert p in assignment[name], (p, name, assignment)

    # ... and after every member has left (the group is Empty, its offsets stay).
    for lib, got in committed_everywhere(broker.bootstrap, group, topic).items():
        assert got == end, f"{lib} reads committed offsets {got} after shutdown, expected {end}"
