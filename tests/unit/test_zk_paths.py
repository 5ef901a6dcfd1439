"""znode paths and JSON values against Kafka's ZK-mode formats.

The expected JSON documents below were written by hand from Kafka's
core/src/main/scala/kafka/zk/ZkData.scala (the encoders and the schema comments in
BrokerIdZNode.decode) and from what a Kafka 3.x broker leaves in ZooKeeper. Values are
compared as parsed JSON (Jackson's key order carries no meaning), and each decoder is fed
Kafka's own bytes, including older versions Kafka still reads.
"""
from __future__ import annotations

import json
import uuid

import pytest

from zkcoord import zk_paths as zp


def j(data: bytes) -> object:
    return json.loads(data)


# ------------------------------------------------------------------ paths

def test_paths_are_kafkas() -> None:
    assert zp.broker_path(3) == "/brokers/ids/3"
    assert zp.topic_path("orders") == "/brokers/topics/orders"
    assert zp.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert zp.topic_config_path("orders") == "/config/topics/orders"
    assert zp.TOPIC_CONFIGS == "/config/topics"
    assert zp.config_entity_path("users", "alice") == "/config/users/alice"
    assert zp.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zp.config_change_create_path() == "/config/changes/config_change_"
    assert zp.isr_change_create_path() == "/isr_change_notification/isr_change_"
    assert zp.CONTROLLER == "/controller" and zp.CONTROLLER_EPOCH == "/controller_epoch"
    assert zp.CLUSTER_ID == "/cluster/id"
    assert zp.LATEST_PRODUCER_ID_BLOCK == "/latest_producer_id_block"
    assert zp.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert zp.BROKER_SEQID == "/brokers/seqid"
    # Kafka's PersistentZkPaths (without the old consumers' /consumers).
    assert set(zp.PERSISTENT_PATHS) == {
        "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
        "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
        "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
        "/config/brokers", "/config/ips"}


def test_sequence_numbers() -> None:
    assert zp.sequence_number("isr_change_0000000042", zp.ISR_CHANGE_PREFIX) == 42
    assert zp.sequence_number("config_change_0000000001", zp.CONFIG_CHANGE_PREFIX) == 1
    assert zp.parent_and_name("/brokers/ids/1") == ("/brokers/ids", "1")
    assert zp.parent_and_name("/controller") == ("/", "controller")


# ------------------------------------------------------------------ cluster id, uuids

def test_cluster_id() -> None:
    kafka = b'{"version":"1","id":"Y2c3ZDJmMTgtNDkwNi00Yw"}'
    assert zp.decode_cluster_id(kafka) == "Y2c3ZDJmMTgtNDkwNi00Yw"
    assert j(zp.encode_cluster_id("Y2c3ZDJmMTgtNDkwNi00Yw")) == j(kafka)
    cid = zp.new_cluster_id()
    assert len(cid) == 22 and not cid.startswith("-") and "=" not in cid


def test_kafka_uuid_string_form() -> None:
    u = uuid.UUID("a2b9c4e8-7f00-4b1e-9e6d-0123456789ab")
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes without padding.
    assert zp.kafka_uuid_str(u) == "ornE6H8ASx6ebQEjRWeJqw"
    assert zp.parse_kafka_uuid("ornE6H8ASx6ebQEjRWeJqw") == u
    assert zp.parse_kafka_uuid(str(u)) == u
    with pytest.raises(zp.ZkDataError):
        zp.parse_kafka_uuid("short")
    for _ in range(200):
        assert not zp.kafka_uuid_str(zp.new_kafka_uuid()).startswith("-")


# ------------------------------------------------------------------ brokers

def test_broker_registration_v5_encode() -> None:
    reg = zp.BrokerRegistration(
        1, [zp.EndPoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
            zp.EndPoint("SSL", "host1", 9093, "SSL")],
        rack="dc1", jmx_port=9999, timestamp=2233345666)
    assert j(zp.encode_broker(reg)) == {
        "version": 5,
        "host": "host1",
        "port": 9092,
        "jmx_port": 9999,
        "timestamp": "2233345666",
        "endpoints": ["PLAINTEXT://host1:9092", "SSL://host1:9093"],
        "rack": "dc1",
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "features": {},
    }


def test_broker_without_plaintext_listener_has_null_host() -> None:
    reg = zp.BrokerRegistration(2, [zp.EndPoint("INTERNAL", "h", 9094, "SASL_PLAINTEXT")],
                                timestamp=1)
    obj = j(zp.encode_broker(reg))
    assert obj["host"] is None and obj["port"] == -1 and "rack" not in obj
    assert obj["listener_security_protocol_map"] == {"INTERNAL": "SASL_PLAINTEXT"}


def test_broker_registration_decode_kafka_versions() -> None:
    # Version 5 as a Kafka 3.x broker writes it.
    v5 = (b'{"features":{},"listener_security_protocol_map":{"CLIENT":"SASL_SSL",'
          b'"REPLICATION":"PLAINTEXT"},"endpoints":["CLIENT://host1:9092",'
          b'"REPLICATION://host1:9093"],"jmx_port":-1,"port":-1,"host":null,'
          b'"version":5,"timestamp":"1700000000000","rack":"dc1"}')
    reg = zp.decode_broker(7, v5)
    assert reg.broker_id == 7 and reg.version == 5 and reg.rack == "dc1"
    assert reg.endpoints == [zp.EndPoint("CLIENT", "host1", 9092, "SASL_SSL"),
                             zp.EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT")]
    assert reg.timestamp == 1700000000000 and reg.jmx_port == -1
    # Version 4 schema from ZkData's comment (no features).
    v4 = (b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,'
          b'"timestamp":"2233345666","endpoints":["CLIENT://host1:9092",'
          b'"REPLICATION://host1:9093"],"rack":"dc1",'
          b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"}}')
    assert zp.decode_broker(1, v4).endpoints[0] == zp.EndPoint("CLIENT", "host1", 9092, "SSL")
    # Version 2: endpoints named after their protocol, no map.
    v2 = (b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,'
          b'"timestamp":"2233345666","endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}')
    assert zp.decode_broker(1, v2).endpoints[1] == zp.EndPoint("SSL", "host1", 9093, "SSL")
    # Version 1: host and port only.
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert zp.decode_broker(1, v1).endpoints == [zp.EndPoint("PLAINTEXT", "localhost", 9092)]
    # v5 features as ZkData's comment shows them.
    feat = (b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,'
            b'"timestamp":"2233345666","endpoints":["PLAINTEXT://host1:9092"],'
            b'"features":{"feature":{"min_version":1,"max_version":3}}}')
    assert zp.decode_broker(1, feat).features == {"feature": {"min_version": 1, "max_version": 3}}


def test_broker_registration_round_trip_and_ipv6() -> None:
    reg = zp.BrokerRegistration(3, [zp.EndPoint("PLAINTEXT", "::1", 9092)], timestamp=5)
    data = zp.encode_broker(reg)
    assert j(data)["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert zp.decode_broker(3, data) == reg


def test_broker_registration_garbage() -> None:
    for bad in (b"", b"not json", b"[1]", b'{"version":0,"jmx_port":1}', b'{"version":5}'):
        with pytest.raises(zp.ZkDataError):
            zp.decode_broker(1, bad)


# ------------------------------------------------------------------ topics

def test_topic_assignment_v3_encode() -> None:
    tid = zp.parse_kafka_uuid("ornE6H8ASx6ebQEjRWeJqw")
    a = zp.TopicAssignment({0: [1, 2, 3], 1: [2, 3, 1]}, tid, adding_replicas={1: [4]},
                           removing_replicas={1: [1]})
    assert j(zp.encode_topic(a)) == {
        "version": 3,
        "topic_id": "ornE6H8ASx6ebQEjRWeJqw",
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {"1": [4]},
        "removing_replicas": {"1": [1]},
    }
    assert zp.decode_topic("t", zp.encode_topic(a)) == a


def test_topic_assignment_decode_kafka_shapes() -> None:
    v3 = (b'{"removing_replicas":{},"partitions":{"2":[1,0],"1":[0,1],"0":[1,0]},'
          b'"topic_id":"ornE6H8ASx6ebQEjRWeJqw","adding_replicas":{},"version":3}')
    a = zp.decode_topic("t", v3)
    assert a.partitions == {0: [1, 0], 1: [0, 1], 2: [1, 0]}
    assert a.topic_id == uuid.UUID("a2b9c4e8-7f00-4b1e-9e6d-0123456789ab")
    assert a.adding_replicas == {} and a.removing_replicas == {}
    # Before Kafka 2.8 there was no topic_id; before 2.4 version 1 and partitions only.
    v1 = b'{"version":1,"partitions":{"0":[0]}}'
    assert zp.decode_topic("t", v1) == zp.TopicAssignment({0: [0]}, None, {}, {}, 1)


def test_topic_config() -> None:
    kafka = b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    assert zp.decode_entity_config(kafka) == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert j(zp.encode_entity_config({"cleanup.policy": "compact", "retention.ms": "1000"})) == j(kafka)
    assert j(zp.encode_entity_config({})) == {"version": 1, "config": {}}
    assert zp.decode_entity_config(b"") == {} and zp.decode_entity_config(None) == {}


def test_config_change_notification() -> None:
    n = zp.ConfigChangeNotification("topics/orders")
    assert j(zp.encode_config_change(n)) == {"version": 2, "entity_path": "topics/orders"}
    assert zp.decode_config_change(b'{"version":2,"entity_path":"topics/orders"}') == n
    assert n.entity_type == "topics" and n.entity_name == "orders"
    old = b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    assert zp.decode_config_change(old) == n


# ------------------------------------------------------------------ partition state

def test_partition_state() -> None:
    kafka = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    s = zp.decode_partition_state(kafka)
    assert s == zp.PartitionState(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1)
    assert j(zp.encode_partition_state(s)) == j(kafka)     # RECOVERED is not written
    recovering = zp.PartitionState(2, 5, [2], 3, zp.LEADER_RECOVERY_RECOVERING)
    assert j(zp.encode_partition_state(recovering)) == {
        "controller_epoch": 3, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2],
        "leader_recovery_state": 1}
    assert zp.decode_partition_state(zp.encode_partition_state(recovering)) == recovering
    no_leader = b'{"controller_epoch":4,"leader":-1,"version":1,"leader_epoch":9,"isr":[3]}'
    assert zp.decode_partition_state(no_leader).leader == zp.NO_LEADER
    with pytest.raises(zp.ZkDataError):
        zp.decode_partition_state(b'{"leader":1}')


# ------------------------------------------------------------------ controller

def test_controller_registration() -> None:
    c = zp.ControllerRegistration(2, timestamp=1700000000000)
    assert j(zp.encode_controller(c)) == {"version": 2, "brokerid": 2,
                                          "timestamp": "1700000000000",
                                          "kraftControllerEpoch": -1}
    # Older Kafka (version 1) has no kraftControllerEpoch.
    old = zp.decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1531327540617"}')
    assert old.broker_id == 0 and old.kraft_controller_epoch == -1 and old.version == 1
    assert zp.decode_controller(zp.encode_controller(c)) == c


def test_controller_epoch() -> None:
    assert zp.encode_controller_epoch(17) == b"17"
    assert zp.decode_controller_epoch(b"17") == 17
    assert zp.INITIAL_CONTROLLER_EPOCH - 1 == 0      # what /controller_epoch is created with
    with pytest.raises(zp.ZkDataError):
        zp.decode_controller_epoch(b"{}")


# ------------------------------------------------------------------ notifications

def test_isr_change_notification() -> None:
    kafka = (b'{"version":1,"partitions":[{"topic":"orders","partition":0},'
             b'{"topic":"orders","partition":3}]}')
    assert zp.decode_isr_change(kafka) == {("orders", 0), ("orders", 3)}
    assert j(zp.encode_isr_change([("orders", 3), ("orders", 0)])) == j(kafka)


def test_preferred_replica_election() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"a","partition":1}]}'
    assert zp.decode_preferred_replica_election(kafka) == {("a", 1)}
    assert j(zp.encode_preferred_replica_election([("a", 1)])) == j(kafka)


# ------------------------------------------------------------------ producer ids

def test_producer_id_block() -> None:
    kafka = b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    b = zp.decode_producer_id_block(kafka)
    assert b == zp.ProducerIdBlock(0, 0, 999) and b.size == 1000 == zp.PRODUCER_ID_BLOCK_SIZE
    assert j(zp.encode_producer_id_block(b)) == j(kafka)
    nxt = b.next_block(2, zp.PRODUCER_ID_BLOCK_SIZE)
    assert nxt == zp.ProducerIdBlock(2, 1000, 1999)
    assert j(zp.encode_producer_id_block(nxt)) == {"version": 1, "broker": 2,
                                                   "block_start": "1000", "block_end": "1999"}
