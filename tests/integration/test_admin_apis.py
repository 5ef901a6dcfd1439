"""Topic administration through confluent-kafka's AdminClient against a real broker
process: CreateTopics (configs, validate-only, errors), DescribeConfigs (every topic and
broker config, with Kafka's defaults and sources), AlterConfigs, IncrementalAlterConfigs,
CreatePartitions, DeleteRecords, DeleteTopics, DescribeCluster, and max.message.bytes."""
from __future__ import annotations

import pytest
from confluent_kafka import (ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, OffsetSpec)

from broker.config import TOPIC_CONFIGS
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin, *topics: NewTopic, validate_only: bool = False) -> dict:
    fs = admin.create_topics(list(topics), validate_only=validate_only, operation_timeout=10)
    out = {}
    for name, f in fs.items():
        try:
            f.result(15)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0].code()
    return out


def describe_topic(admin, name: str) -> dict:
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin.describe_configs([res])[res].result(15)


def test_create_topics_configs_validate_only_and_errors(admin, broker):
    assert create(admin, NewTopic("t1", 3, 1, config={"retention.ms": "3600000"})) == {"t1": None}
    md = admin.list_topics("t1", timeout=10)
    assert len(md.topics["t1"].partitions) == 3
    # Already exists, bad replication factor, unknown config, bad name: Kafka's error codes.
    assert create(admin, NewTopic("t1", 1, 1)) == {"t1": KafkaError.TOPIC_ALREADY_EXISTS}
    assert create(admin, NewTopic("t2", 1, 3)) == {"t2": KafkaError.INVALID_REPLICATION_FACTOR}
    assert create(admin, NewTopic("t3", 1, 1, config={"no.such.config": "1"})) == {"t3": KafkaError.INVALID_CONFIG}
    assert create(admin, NewTopic("bad/name", 1, 1)) == {"bad/name": KafkaError.TOPIC_EXCEPTION}
    # validate_only creates nothing.
    assert create(admin, NewTopic("t4", 2, 1), validate_only=True) == {"t4": None}
    assert "t4" not in admin.list_topics(timeout=10).topics


def test_describe_configs_every_topic_config_with_sources(admin):
    create(admin, NewTopic("dc", 1, 1, config={"cleanup.policy": "compact", "retention.ms": "1000"}))
    configs = describe_topic(admin, "dc")
    assert set(configs) == {k.name for k in TOPIC_CONFIGS}
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].value == "1000"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["min.insync.replicas"].value == "1"

    broker_res = ConfigResource(ConfigResource.Type.BROKER, "0")
    bcfg = admin.describe_configs([broker_res])[broker_res].result(15)
    assert bcfg["num.partitions"].value == "1"
    assert bcfg["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bcfg["log.segment.bytes"].value == "1073741824"
    assert bcfg["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert len(bcfg) > 80


def test_alter_and_incremental_alter_topic_configs(admin):
    create(admin, NewTopic("ac", 1, 1, config={"retention.ms": "5000"}))
    res = ConfigResource(ConfigResource.Type.TOPIC, "ac", set_config={"segment.bytes": "100000"})
    admin.alter_configs([res])[res].result(15)
    configs = describe_topic(admin, "ac")
    # AlterConfigs replaces the whole set: retention.ms falls back to its default.
    assert configs["segment.bytes"].value == "100000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    inc = ConfigResource(ConfigResource.Type.TOPIC, "ac", incremental_configs=[
        ConfigEntry("retention.ms", "7000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([inc])[inc].result(15)
    configs = describe_topic(admin, "ac")
    assert configs["retention.ms"].value == "7000"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource(ConfigResource.Type.TOPIC, "ac", incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([bad])[bad].result(15)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_create_partitions_delete_records_delete_topics(admin, broker):
    create(admin, NewTopic("cp", 2, 1))
    admin.create_partitions([NewPartitions("cp", 5)])["cp"].result(15)
    assert len(admin.list_topics("cp", timeout=10).topics["cp"].partitions) == 5
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions("cp", 3)])["cp"].result(15)
    assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        p.produce("cp", value=b"%d" % i, partition=0)
    p.flush(10)
    tp = TopicPartition("cp", 0, 40)
    res = admin.delete_records([tp])[tp].result(15)
    assert res.low_watermark == 40
    earliest = admin.list_offsets({TopicPartition("cp", 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(15).offset == 40

    admin.delete_topics(["cp"], operation_timeout=10)["cp"].result(15)
    assert "cp" not in admin.list_topics(timeout=10).topics
    assert not (broker.log_dir / "cp-0").exists()


def test_describe_cluster(admin, broker):
    desc = admin.describe_cluster().result(15)
    assert [n.id for n in desc.nodes] == [0]
    assert desc.nodes[0].port == broker.port
    assert desc.controller.id == 0
    assert desc.cluster_id and len(desc.cluster_id) == 22


def test_max_message_bytes_enforced(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        c.request("CreateTopics", 7, {"topics": [{"name": "small", "num_partitions": 1, "replication_factor": 1,
                                                  "configs": [{"name": "max.message.bytes", "value": "1000"}]}],
                                      "timeout_ms": 5000})
        big = build_batch([Record(None, b"x" * 2000)])
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "small", "partition_data": [{"index": 0, "records": big}]}]})
        assert r.responses[0].partition_responses[0].error_code == Code.MESSAGE_TOO_LARGE
        ok = build_batch([Record(None, b"x" * 500)])
        r = c.request("Produce", 9, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "small", "partition_data": [{"index": 0, "records": ok}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0
        assert r.responses[0].partition_responses[0].base_offset == 0


def test_alter_configs_drops_entries_without_a_value(admin, broker):
    """Kafka's ZkAdminManager.alterConfigs ignores entries whose value is null (legacy
    AlterConfigs has no delete operation): the rest is applied."""
    create(admin, NewTopic("ac-null", 1, 1))
    host, port = broker.bootstrap.split(":")
    with WireClient(host, int(port)) as c:
        r = c.request("AlterConfigs", 1, {"resources": [{
            "resource_type": 2, "resource_name": "ac-null", "configs": [
                {"name": "retention.ms", "value": "5000"},
                {"name": "segment.bytes", "value": None}]}], "validate_only": False})
    assert [(x.error_code, x.error_message) for x in r.responses] == [(0, None)]
    configs = describe_topic(admin, "ac-null")
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
