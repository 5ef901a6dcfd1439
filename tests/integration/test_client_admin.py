"""strom's own AdminClient (clients/admin.py over clients/aio/admin.py) against real broker
processes: every method for success and for a failure, with effects checked through other
clients (confluent-kafka producers and consumers) or through a second admin call. The last
test runs a 3-broker cluster for replication factor 3, ISR and controller routing."""
from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP

from clients.admin import (AdminClient, BrokerInfo, ClusterDescription, ConfigEntry,
                           GroupListing, MemberDescription, PartitionDescription)
from clients.aio.admin import AsyncAdminClient, decode_consumer_assignment
from clients.aio.errors import KafkaConnectionError
from clients.protocol.errors import (Code, GroupIdNotFoundError, InvalidConfigError,
                                     InvalidPartitionsError, InvalidReplicationFactorError,
                                     InvalidRequestError, NonEmptyGroupError,
                                     OffsetOutOfRangeError, TopicAlreadyExistsError,
                                     UnknownTopicOrPartitionError)
from clients.protocol.schema import Struct
from clients.types import NewTopic, OffsetAndMetadata, OffsetAndTimestamp
from clients.types import TopicPartition as TP

pytestmark = pytest.mark.integration

QUIET = {"log_level": 0}


@pytest.fixture
def admin(broker):
    with AdminClient(bootstrap_servers=broker.bootstrap) as a:
        yield a


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]],
            timestamps: list[int] | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **QUIET})
    errors = []
    for i, (part, value) in enumerate(values):
        p.produce(topic, value=value, partition=part,
                  timestamp=timestamps[i] if timestamps else 0,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def wait_until(cond, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ====================================================================== topics

def test_create_topics_then_produce_at_once_and_errors(admin, broker):
    admin.create_topics([NewTopic("a1", 3, 1, config={"retention.ms": "3600000"}),
                         NewTopic("a2", 1, 1)])
    # No waiting in between: create_topics returned once every partition had a leader.
    produce(broker.bootstrap, "a1", [(2, b"x")])
    assert admin.list_topics() == ["a1", "a2"]
    desc = admin.describe_topics(["a1"])["a1"]
    assert desc.name == "a1" and not desc.internal
    assert desc.partitions == [PartitionDescription(p, 0, [0], [0], []) for p in range(3)]
    assert set(admin.describe_topics()) == {"a1", "a2"}
    assert admin.describe_configs("topic", "a1", ["retention.ms"])["retention.ms"].value == "3600000"

    with pytest.raises(TopicAlreadyExistsError, match="topic a1"):
        admin.create_topics([NewTopic("a1", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError, match="topic r3"):
        admin.create_topics([NewTopic("r3", 1, 3)])
    with pytest.raises(InvalidPartitionsError, match="topic p0"):
        admin.create_topics([NewTopic("p0", 0, 1)])
    with pytest.raises(InvalidConfigError, match="topic c1"):
        admin.create_topics([NewTopic("c1", 1, 1, config={"no.such.config": "1"})])
    admin.create_topics([NewTopic("v1", 2, 1)], validate_only=True)
    with pytest.raises(UnknownTopicOrPartitionError, match="topic nope"):
        admin.describe_topics(["nope"])
    assert admin.list_topics() == ["a1", "a2"]          # none of the failures created anything


def test_delete_topics_and_recreate(admin, broker):
    admin.create_topics([NewTopic("d1", 2, 1)])
    produce(broker.bootstrap, "d1", [(0, b"old")] * 3)
    admin.delete_topics(["d1"])
    assert "d1" not in admin.list_topics()              # gone from metadata when it returns
    with pytest.raises(UnknownTopicOrPartitionError, match="topic d1"):
        admin.delete_topics(["d1"])
    # Re-created with the same name, the topic starts empty.
    admin.create_topics([NewTopic("d1", 1, 1)])
    assert admin.list_offsets({TP("d1", 0): "latest"})[TP("d1", 0)].offset == 0


def test_create_partitions(admin, broker):
    admin.create_topics([NewTopic("cp", 1, 1)])
    admin.create_partitions({"cp": 2}, validate_only=True)
    assert len(admin.describe_topics(["cp"])["cp"].partitions) == 1
    admin.create_partitions({"cp": 3})
    produce(broker.bootstrap, "cp", [(2, b"new partition")])
    assert [p.partition for p in admin.describe_topics(["cp"])["cp"].partitions] == [0, 1, 2]
    assert admin.list_offsets({TP("cp", 2): "latest"})[TP("cp", 2)].offset == 1
    with pytest.raises(InvalidPartitionsError, match="topic cp"):
        admin.create_partitions({"cp": 2})
    with pytest.raises(UnknownTopicOrPartitionError, match="topic nope"):
        admin.create_partitions({"nope": 4})


def test_describe_cluster_and_unreachable_bootstrap(admin, broker):
    c = admin.describe_cluster()
    assert isinstance(c, ClusterDescription) and c.cluster_id and c.controller_id == 0
    assert c.brokers == [BrokerInfo(0, "127.0.0.1", broker.port, None)]
    with AdminClient(bootstrap_servers="127.0.0.1:1", request_timeout_ms=500,
                     default_api_timeout_ms=1000) as dead:
        with pytest.raises(KafkaConnectionError, match="127.0.0.1:1"):
            dead.list_topics()


# ====================================================================== configs

def test_describe_and_alter_configs(admin):
    admin.create_topics([NewTopic("cfg", 1, 1, config={"cleanup.policy": "compact"})])
    all_configs = admin.describe_configs("topic", "cfg")
    assert len(all_configs) > 20
    assert all_configs["cleanup.policy"] == ConfigEntry(
        "cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", False, False, False)
    assert all_configs["segment.bytes"] == ConfigEntry(
        "segment.bytes", "1073741824", "DEFAULT_CONFIG", True, False, False)

    admin.alter_configs("topic", "cfg", set={"retention.ms": "5000", "segment.bytes": "100000"},
                        delete=["cleanup.policy"])
    got = admin.describe_configs("topic", "cfg", ["retention.ms", "segment.bytes", "cleanup.policy"])
    assert set(got) == {"retention.ms", "segment.bytes", "cleanup.policy"}
    assert (got["retention.ms"].value, got["retention.ms"].source) == ("5000", "DYNAMIC_TOPIC_CONFIG")
    assert got["segment.bytes"].value == "100000"
    assert (got["cleanup.policy"].value, got["cleanup.policy"].is_default) == ("delete", True)
    # Incremental: a later set leaves the other overrides alone.
    admin.alter_configs("topic", "cfg", set={"retention.ms": "6000"})
    got = admin.describe_configs("topic", "cfg", ["retention.ms", "segment.bytes"])
    assert (got["retention.ms"].value, got["segment.bytes"].value) == ("6000", "100000")

    broker_cfg = admin.describe_configs("broker", "0")
    assert broker_cfg["num.partitions"].source == "STATIC_BROKER_CONFIG"
    assert broker_cfg["log.segment.bytes"] == ConfigEntry(
        "log.segment.bytes", "1073741824", "DEFAULT_CONFIG", True, False, False)

    with pytest.raises(UnknownTopicOrPartitionError, match="topic nope"):
        admin.describe_configs("topic", "nope")
    with pytest.raises(UnknownTopicOrPartitionError, match="topic nope"):
        admin.alter_configs("topic", "nope", set={"retention.ms": "1"})
    with pytest.raises(InvalidConfigError, match="topic cfg"):
        admin.alter_configs("topic", "cfg", set={"retention.ms": "soon"})
    with pytest.raises(InvalidRequestError, match="broker 0"):
        admin.alter_configs("broker", "0", set={"num.partitions": "3"})
    with pytest.raises(ValueError):
        admin.describe_configs("group", "g")


# ====================================================================== offsets and records

def test_list_offsets_and_delete_records(admin, broker):
    admin.create_topics([NewTopic("off", 2, 1)])
    base = 1_700_000_000_000
    produce(broker.bootstrap, "off", [(0, b"%d" % i) for i in range(10)],
            timestamps=[base + 1000 * i for i in range(10)])
    t0, t1 = TP("off", 0), TP("off", 1)
    got = admin.list_offsets({t0: "latest", t1: "latest"})
    assert got[t0].offset == 10 and got[t1].offset == 0
    got = admin.list_offsets({t0: base + 3500, t1: "earliest"})
    assert got[t0] == OffsetAndTimestamp(4, base + 4000, 0)
    assert got[t1].offset == 0
    assert admin.list_offsets({t0: base + 99_000})[t0].offset == -1    # after the last record
    assert admin.list_offsets({t0: "latest"}, isolation_level="read_committed")[t0].offset == 10

    assert admin.delete_records({t0: 6}) == {t0: 6}
    assert admin.list_offsets({t0: "earliest"})[t0].offset == 6
    # A consumer reading from the beginning now starts at offset 6.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dr-reader",
                  "enable.auto.commit": False, **QUIET})
    try:
        c.assign([CTP("off", 0, -2)])
        msg = wait_until(lambda: (m := c.poll(0.5)) is not None and m, 20, "a record")
        assert msg.error() is None and msg.offset() == 6 and msg.value() == b"6"
    finally:
        c.close()
    assert admin.delete_records({t0: -1}) == {t0: 10}          # -1: up to the high watermark

    with pytest.raises(OffsetOutOfRangeError, match="partition off-1"):
        admin.delete_records({t1: 5})
    with pytest.raises(UnknownTopicOrPartitionError, match="partition off-7"):
        admin.list_offsets({TP("off", 7): "latest"})
    with pytest.raises(UnknownTopicOrPartitionError, match="topic nope"):
        admin.delete_records({TP("nope", 0): 1})
    with pytest.raises(ValueError):
        admin.list_offsets({t0: "newest"})


# ====================================================================== groups

def test_consumer_group_admin(admin, broker):
    admin.create_topics([NewTopic("grp", 2, 1)])
    produce(broker.bootstrap, "grp", [(p, b"v") for p in (0, 1) for _ in range(5)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g1", "client.id": "member-a",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, **QUIET})
    try:
        c.subscribe(["grp"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen += 1
        assert seen == 10
        c.commit(offsets=[CTP("grp", 0, 3), CTP("grp", 1, 5)], asynchronous=False)

        listed = {g.group_id: g for g in admin.list_groups()}
        assert listed["g1"] == GroupListing("g1", "consumer", "Stable")
        desc = admin.describe_groups(["g1"])["g1"]
        assert (desc.state, desc.protocol_type, desc.protocol) == ("Stable", "consumer", "range")
        assert desc.coordinator == 0        # the one broker coordinates every group
        [member] = desc.members
        assert isinstance(member, MemberDescription) and member.client_id == "member-a"
        assert member.member_id and member.client_host
        assert member.assignment == [TP("grp", 0), TP("grp", 1)]

        offsets = admin.list_group_offsets("g1")
        assert {tp: o.offset for tp, o in offsets.items()} == {TP("grp", 0): 3, TP("grp", 1): 5}
        assert admin.list_group_offsets("g1", [TP("grp", 1), TP("grp", 9)]) == {
            TP("grp", 1): offsets[TP("grp", 1)]}

        # While the member is there, the group can be neither altered nor deleted.
        with pytest.raises(NonEmptyGroupError, match="group g1"):
            admin.alter_group_offsets("g1", {TP("grp", 0): 0})
        with pytest.raises(NonEmptyGroupError, match="group g1"):
            admin.delete_groups(["g1"])
    finally:
        c.close()

    wait_until(lambda: admin.describe_groups(["g1"])["g1"].state == "Empty", 20, "an empty group")
    admin.alter_group_offsets("g1", {TP("grp", 0): OffsetAndMetadata(1, "reset by admin"),
                                     TP("grp", 1): 2})
    assert admin.list_group_offsets("g1") == {TP("grp", 0): OffsetAndMetadata(1, "reset by admin"),
                                              TP("grp", 1): OffsetAndMetadata(2, "")}
    # A consumer of the group resumes from the altered offset.
    c2 = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g1",
                   "enable.auto.commit": False, **QUIET})
    try:
        c2.assign([CTP("grp", 0)])
        msg = wait_until(lambda: (m := c2.poll(0.5)) is not None and m, 20, "a record")
        assert msg.offset() == 1
    finally:
        c2.close()
    with pytest.raises(UnknownTopicOrPartitionError, match="group g1 partition nope-0"):
        admin.alter_group_offsets("g1", {TP("nope", 0): 1})

    admin.delete_groups(["g1"])
    assert "g1" not in {g.group_id for g in admin.list_groups()}
    assert admin.list_group_offsets("g1") == {}
    with pytest.raises(GroupIdNotFoundError, match="group g1"):
        admin.describe_groups(["g1"])
    with pytest.raises(GroupIdNotFoundError, match="group g1"):
        admin.delete_groups(["g1"])


def test_decode_consumer_assignment_layout():
    # ConsumerProtocol Assignment v0 as Kafka's Java client writes it: version, topics with
    # partitions, user_data (here 2 bytes).
    data = (b"\x00\x00" + b"\x00\x00\x00\x02"
            + b"\x00\x01b" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x07"
            + b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"
            + b"\x00\x00\x00\x02ud")
    assert decode_consumer_assignment(data) == [TP("a", 0), TP("a", 1), TP("b", 7)]
    assert decode_consumer_assignment(b"") == []
    assert decode_consumer_assignment(b"\x00\x00\x00\x00\x00\x05\x00") == []      # truncated


def test_async_admin_client(broker):
    async def main():
        async with AsyncAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            await admin.create_topics([NewTopic("as", 2, 1)])
            described, offsets = await asyncio.gather(
                admin.describe_topics(["as"]),
                admin.list_offsets({TP("as", 0): "earliest", TP("as", 1): "latest"}))
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.delete_topics(["nope"])
            return described, offsets
    described, offsets = asyncio.run(main())
    assert len(described["as"].partitions) == 2
    assert {tp: o.offset for tp, o in offsets.items()} == {TP("as", 0): 0, TP("as", 1): 0}


def test_transient_errors_are_retried(broker):
    """NOT_CONTROLLER, NOT_COORDINATOR and NOT_LEADER_OR_FOLLOWER answers (injected once
    each in front of the real broker's answer) are retried: the call still succeeds."""
    injected = {
        "CreateTopics": Struct(topics=[Struct(name="tr", error_code=Code.NOT_CONTROLLER,
                                              error_message="moved")]),
        "DescribeGroups": Struct(groups=[Struct(error_code=Code.NOT_COORDINATOR)]),
        "ListOffsets": Struct(topics=[Struct(name="tr", partitions=[Struct(
            partition_index=0, error_code=Code.NOT_LEADER_OR_FOLLOWER, offset=-1, timestamp=-1)])]),
    }
    sent: list[str] = []

    async def main():
        async with AsyncAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            real = admin._send

            async def send(node, api_name, build, deadline):
                sent.append(api_name)
                fake = injected.pop(api_name, None)
                return fake if fake is not None else await real(node, api_name, build, deadline)
            admin._send = send
            await admin.create_topics([NewTopic("tr", 1, 1)])
            await admin.alter_group_offsets("gtr", {TP("tr", 0): 0})
            described = await admin.describe_groups(["gtr"])
            offsets = await admin.list_offsets({TP("tr", 0): "latest"})
            return described, offsets
    described, offsets = asyncio.run(main())
    assert injected == {}
    assert sent.count("CreateTopics") == 2 and sent.count("DescribeGroups") == 2
    assert sent.count("ListOffsets") == 2
    assert described["gtr"].state == "Empty" and offsets[TP("tr", 0)].offset == 0


# ====================================================================== a 3-broker cluster

@pytest.mark.slow
def test_replication_factor_3_in_a_cluster(tmp_path):
    from tests.support.cluster import Cluster
    with Cluster(tmp_path / "c", brokers=3) as cluster:
        cluster.start()
        controller = cluster.wait_for_controller()
        # Bootstrap through a broker that is not the controller: the admin finds it.
        other = next(i for i in range(3) if i != controller)
        with AdminClient(bootstrap_servers=cluster.broker(other).bootstrap) as admin:
            assert admin.describe_cluster().controller_id == controller
            assert [b.node_id for b in admin.describe_cluster().brokers] == [0, 1, 2]
            admin.create_topics([NewTopic("r3", 3, 3)])
            produce(cluster.bootstrap, "r3", [(p, b"x") for p in range(3)])
            for p in wait_until(lambda: (d := admin.describe_topics(["r3"])["r3"]) and all(
                    len(p.isr) == 3 for p in d.partitions) and d.partitions, 30, "full ISRs"):
                assert sorted(p.replicas) == [0, 1, 2] and p.leader in p.replicas
            with pytest.raises(InvalidReplicationFactorError, match="topic r4"):
                admin.create_topics([NewTopic("r4", 1, 4)])
            admin.create_partitions({"r3": 4})
            assert len(admin.describe_topics(["r3"])["r3"].partitions) == 4
            admin.delete_topics(["r3"])
            assert "r3" not in admin.list_topics()
