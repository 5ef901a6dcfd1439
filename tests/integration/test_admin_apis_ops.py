"""Issue 23, admin APIs clients send: confluent-kafka's and kafka-python's admin clients call
each of them against a real broker process, and Kafka's tools over them.

- DescribeTopicPartitions (KIP-966): kafka-python pages through topics with a cursor, as
  Kafka 3.8+ clients' describeTopics does;
- ApiVersions: kafka-python infers a Kafka 4.0 broker from what strom advertises;
- broker configs (IncrementalAlterConfigs / AlterConfigs / DescribeConfigs on BROKER): the
  replication throttles set per broker and cluster-wide, Kafka's `read_only` flags, sources
  and refusals;
- OffsetDelete: kafka-python's delete_group_offsets and `kafka-consumer-groups.sh
  --delete-offsets` (GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes);
- KIP-467 record_errors: what librdkafka does with a batch whose keyless records a
  compacted topic refuses.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer,
                             TopicPartition as CTopicPartition)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType
from kafka.errors import GroupSubscribedToTopicError, NoError

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
UNLIMITED = str(2 ** 63 - 1)


def confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create(admin: AdminClient, topics: dict[str, int], configs: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(t, n, 1, config=configs or {}) for t, n in topics.items()])
    for f in futures.values():
        f.result(30)


def wait_until(cond, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


# ====================================================================== DescribeTopicPartitions

def test_kafka_python_describe_topic_partitions_pages_with_a_cursor(broker):
    create(confluent_admin(broker.bootstrap), {"dtp-a": 5, "dtp-b": 2})
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        pages, seen, cursor = 0, [], None
        while True:
            answer = kp.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=3,
                                                  cursor=cursor)
            pages += 1
            for t in answer["topics"]:
                assert t["error_code"] == 0 and not t["is_internal"]
                for p in t["partitions"]:
                    assert p["leader_id"] == broker.broker_id and p["isr_nodes"] == [broker.broker_id]
                    seen.append((t["name"], p["partition_index"]))
            cursor = answer["next_cursor"]
            if cursor is None:
                break
        assert seen == [("dtp-a", i) for i in range(5)] + [("dtp-b", 0), ("dtp-b", 1)]
        assert pages == 3
        print(f"\nDescribeTopicPartitions: {len(seen)} partitions in {pages} pages of 3")
        missing = kp.describe_topic_partitions(["dtp-missing"])["topics"]
        assert [(t["name"], t["error_code"]) for t in missing] == [("dtp-missing", 3)]
    finally:
        kp.close()


def test_kafka_python_infers_kafka_4_0(broker):
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        version = kp._manager.broker_version_data.broker_version   # what it inferred
        assert tuple(version) == (4, 0), version
        advertised = kp.api_versions()
        assert advertised[75] == (0, 0) and advertised[2] == (0, 10) and advertised[1] == (0, 17)
        print(f"\nkafka-python infers broker version {'.'.join(map(str, version))}")
    finally:
        kp.close()


# ====================================================================== broker configs

def test_confluent_incremental_alter_and_describe_broker_configs(broker):
    admin = confluent_admin(broker.bootstrap)
    me = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id))
    set_rate = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id), incremental_configs=[
        ConfigEntry("leader.replication.throttled.rate", "1048576",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([set_rate])[set_rate].result(30)
    entries = admin.describe_configs([me])[me].result(30)
    rate = entries["leader.replication.throttled.rate"]
    assert rate.value == "1048576"
    assert rate.source == 2 and not rate.is_read_only            # DYNAMIC_BROKER_CONFIG
    follower = entries["follower.replication.throttled.rate"]
    assert follower.value == UNLIMITED and follower.source == 5 and not follower.is_read_only
    assert entries["broker.id"].is_read_only and entries["log.dirs"].is_read_only
    assert not entries["log.retention.ms"].is_read_only
    # A read-only key is refused with Kafka's words; nothing is stored.
    bad = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id), incremental_configs=[
        ConfigEntry("log.dirs", "/x", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception) as e:
        admin.incremental_alter_configs([bad])[bad].result(30)
    assert "Cannot update these configs dynamically: Set(log.dirs)" in str(e.value)
    delete = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id), incremental_configs=[
        ConfigEntry("leader.replication.throttled.rate", None,
                    incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([delete])[delete].result(30)
    assert admin.describe_configs([me])[me].result(30)[
        "leader.replication.throttled.rate"].value == UNLIMITED


def test_kafka_python_alter_and_describe_broker_configs(broker):
    # kafka-python (as librdkafka) refuses the cluster-wide entity's empty name: Kafka's tool
    # sets it; kafka-python sets this broker's own, which wins.
    tool = _kafka_configs(broker, "--entity-default", "follower.replication.throttled.rate=2000000")
    assert tool.returncode == 0, tool.stderr
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        kp.alter_configs([KConfigResource(ConfigResourceType.BROKER, str(broker.broker_id), configs={
            "follower.replication.throttled.rate": "3000000"})], incremental=True)
        described = kp.describe_configs([KConfigResource(ConfigResourceType.BROKER,
                                                         str(broker.broker_id))],
                                        include_synonyms=True, config_filter="all")
        entries = described["broker"][str(broker.broker_id)]
        rate = entries["follower.replication.throttled.rate"]
        assert rate["value"] == "3000000" and not rate["read_only"]
        assert rate["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert [(s["source"], s["value"]) for s in rate["synonyms"]] == [
            ("DYNAMIC_BROKER_CONFIG", "3000000"), ("DYNAMIC_DEFAULT_BROKER_CONFIG", "2000000"),
            ("DEFAULT_CONFIG", UNLIMITED)]
        assert entries["zookeeper.connect"]["read_only"]
    finally:
        kp.close()


def _kafka_configs(broker, scope: str, add_config: str) -> subprocess.CompletedProcess:
    scope_args = ["--entity-default"] if scope == "--entity-default" else ["--entity-name", scope]
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server",
                           broker.bootstrap, "--entity-type", "brokers", *scope_args, "--alter",
                           "--add-config", add_config], capture_output=True, text=True, timeout=60)


def _kafka_configs(broker, scope: str, add_config: str) -> subprocess.CompletedProcess:
    scope_args = ["--entity-default"] if scope == "--entity-default" else ["--entity-name", scope]
    return subprocess.run([str(REPO / "bin" / "kafka-configs.sh"), "--bootstrap-server",
                           broker.bootstrap, "--entity-type", "brokers", *scope_args, "--alter",
                           "--add-config", add_config], capture_output=True, text=True, timeout=60)


def _entries(result) -> list[dict]:
    """kafka-python's describe_configs answer, as plain dicts per config entry."""
    res = result if isinstance(result, dict) else result.to_object()
    rows = res.get("results", [res])
    out = []
    for r in rows:
        for c in r.get("configs", []):
            out.append(c if isinstance(c, dict) else c.to_object())
    return out


def test_kafka_configs_tool_sets_a_broker_throttle(broker):
    for scope in (str(broker.broker_id), "--entity-default"):
        r = _kafka_configs(broker, scope, "leader.replication.throttled.rate=5000000")
        assert r.returncode == 0, r.stderr
    admin = confluent_admin(broker.bootstrap)
    me = ConfigResource(ConfigResource.Type.BROKER, str(broker.broker_id))
    rate = admin.describe_configs([me])[me].result(30)["leader.replication.throttled.rate"]
    assert rate.value == "5000000" and rate.source == 2


# ====================================================================== OffsetDelete

def test_delete_group_offsets_by_kafka_python_and_the_tool(broker):
    admin = confluent_admin(broker.bootstrap)
    create(admin, {"od-live": 1, "od-old": 1})
    group = "od-group"
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [
        CTopicPartition("od-live", 0, 5), CTopicPartition("od-old", 0, 3)])])[group].result(30)
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 0,
                       "enable.auto.commit": False, "session.timeout.ms": 6000})
    member.subscribe(["od-live"])
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        wait_until(lambda: member.poll(0.2) is None and member.assignment(), 30, "an assignment")
        # A member subscribes to od-live: its offset stays; od-old's goes.
        result = kp.delete_group_offsets(group, [TopicPartition("od-live", 0), TopicPartition("od-old", 0)])
        assert result == {TopicPartition("od-live", 0): GroupSubscribedToTopicError,
                          TopicPartition("od-old", 0): NoError}
        tool = _consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", "od-live")
        assert tool.returncode == 1
        assert tool.stderr.strip() == \
            "Error: Encounter some partition level error, see the follow-up details:"
        rows = tool.stdout.split("\n")
        assert rows[1].split() == ["TOPIC", "PARTITION", "STATUS"]
        assert rows[2].split()[:3] == ["od-live", "0", "Error:"] and "GROUP_SUBSCRIBED_TO_TOPIC" in rows[2]
        member.close()
        member = None
        wait_until(lambda: _offsets(admin, group) == {("od-live", 0): 5}, 30, "only od-live left")
        tool = _consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", "od-live:0")
        assert tool.returncode == 0, tool.stderr
        assert tool.stdout.split("\n")[0] == "Request succeed for deleting offsets with topic od-live:0 group od-group"
        assert tool.stdout.split("\n")[3].split() == ["od-live", "0", "Successful"]
        assert _offsets(admin, group) == {}
        print("\n" + tool.stdout)
        missing = _consumer_groups(broker, "--delete-offsets", "--group", "nobody", "--topic", "od-old")
        assert missing.returncode == 1 and missing.stderr.strip() == "Error: 'nobody' does not exist."
    finally:
        kp.close()
        if member is not None:
            member.close()


def _consumer_groups(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / "kafka-consumer-groups.sh"), "--bootstrap-server",
                           broker.bootstrap, *args], capture_output=True, text=True, timeout=60)


def _offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions if tp.offset >= 0}


# ====================================================================== KIP-467 record_errors

def test_confluent_batch_with_keyless_records_to_a_compacted_topic(broker):
    """Kafka refuses the whole batch (INVALID_RECORD) and names the keyless records in
    record_errors; librdkafka reads them: the keyless records fail with INVALID_RECORD, the
    keyed ones of the same batch with _INVALID_DIFFERENT_RECORD ("another record of the batch
    was invalid"), so the application can tell them apart and resend the keyed ones."""
    admin = confluent_admin(broker.bootstrap)
    create(admin, {"keyless-c": 1}, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "log_level": 0,
                  "enable.idempotence": False})
    reports: list[tuple[bytes | None, KafkaError | None]] = []
    for i, key in enumerate([b"k0", None, b"k2", None, b"k4"]):
        p.produce("keyless-c", key=key, value=b"v%d" % i, partition=0,
                  on_delivery=lambda err, msg: reports.append((msg.key(), err)))
    assert p.flush(30) == 0
    assert len(reports) == 5
    codes = [(key, err.code() if err else None) for key, err in reports]
    assert sorted(codes, key=lambda kc: kc[0] or b"") == [
        (None, KafkaError.INVALID_RECORD), (None, KafkaError.INVALID_RECORD),
        (b"k0", KafkaError._INVALID_DIFFERENT_RECORD), (b"k2", KafkaError._INVALID_DIFFERENT_RECORD),
        (b"k4", KafkaError._INVALID_DIFFERENT_RECORD)], codes
    print("\nlibrdkafka per record: " + ", ".join(f"{k}: {str(e)}" for k, e in reports))
    # Nothing of the batch was written; keyed records sent on their own are.
    p.produce("keyless-c", key=b"k0", value=b"again", partition=0)
    assert p.flush(30) == 0
    lo, hi = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", "log_level": 0}
                      ).get_watermark_offsets(CTopicPartition("keyless-c", 0), timeout=10)
    assert (lo, hi) == (0, 1)
