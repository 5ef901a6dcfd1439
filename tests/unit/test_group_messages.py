"""Group, SASL and controller message declarations: golden bytes worked out by hand from the
protocol guide's grammars, and a realistic round trip per API at its lowest and highest
version. (The generic every-field round trip of every version is test_message_roundtrip.)
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from clients.protocol.headers import RequestHeader, decode_request_header, encode_request_header
from clients.protocol.messages import API_BY_KEY, controller, group, sasl
from clients.protocol.schema import Api, F
from clients.protocol.types import Reader, Writer


def _req(api: Api, msg: dict, version: int) -> bytes:
    return api.encode_request(msg, version).getvalue()


def _resp(api: Api, msg: dict, version: int) -> bytes:
    return api.encode_response(msg, version).getvalue()


# ---------------------------------------------------------------- registry

def test_declared_keys_and_version_ranges() -> None:
    # Kafka 3.7's ranges for these APIs; DescribeGroups and ListGroups at Kafka 4.0's.
    expected = {
        10: ("FindCoordinator", 4), 11: ("JoinGroup", 9), 12: ("Heartbeat", 4),
        13: ("LeaveGroup", 5), 14: ("SyncGroup", 5), 15: ("DescribeGroups", 6),
        16: ("ListGroups", 5), 8: ("OffsetCommit", 9), 9: ("OffsetFetch", 9),
        42: ("DeleteGroups", 2), 47: ("OffsetDelete", 0), 17: ("SaslHandshake", 1),
        36: ("SaslAuthenticate", 2), 4: ("LeaderAndIsr", 7), 5: ("StopReplica", 4),
        6: ("UpdateMetadata", 8), 7: ("ControlledShutdown", 3),
    }
    for key, (name, hi) in expected.items():
        api = API_BY_KEY[key]
        assert (api.name, api.min_version, api.max_version) == (name, 0, hi)
    declared = {a.key for m in (group, sasl, controller) for a in m.APIS}
    assert declared == set(expected)


def test_request_header_versions() -> None:
    cs = controller.ControlledShutdown
    # ControlledShutdown v0 alone has a header without client id.
    assert [cs.request_header_version(v) for v in range(4)] == [0, 1, 1, 2]
    jg = group.JoinGroup
    assert [jg.request_header_version(v) for v in (0, 5, 6, 9)] == [1, 1, 2, 2]
    assert [jg.response_header_version(v) for v in (5, 6)] == [0, 1]
    assert sasl.SaslHandshake.request_header_version(1) == 1


def test_controlled_shutdown_v0_frame_has_no_client_id() -> None:
    cs = controller.ControlledShutdown
    w = Writer()
    encode_request_header(w, RequestHeader(7, 0, 3, "ignored"), cs.request_header_version(0))
    cs.encode_request({"broker_id": 2}, 0, w)
    frame = w.getvalue()
    assert frame == bytes.fromhex("0007" "0000" "00000003" "00000002")
    r = Reader(frame)
    header = decode_request_header(r, cs.request_header_version(0))
    assert header.client_id is None
    assert cs.decode_request(r, 0).broker_id == 2


# ---------------------------------------------------------------- golden bytes

def test_golden_join_group_v0_request() -> None:
    # JoinGroup Request (Version: 0) => group_id session_timeout_ms member_id protocol_type
    #   [protocols]; protocols => name metadata (STRING / BYTES, non-compact).
    msg = {
        "group_id": "g", "session_timeout_ms": 30000, "member_id": "",
        "rebalance_timeout_ms": 60000,         # v1+: must not be written at v0
        "group_instance_id": "i-1",            # v5+: must not be written at v0
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01\x02"}],
    }
    body = _req(group.JoinGroup, msg, 0)
    assert body == bytes.fromhex(
        "0001" "67"                    # group_id "g"
        "00007530"                     # session_timeout_ms 30000
        "0000"                         # member_id ""
        "0008" "636f6e73756d6572"      # protocol_type "consumer"
        "00000001"                     # protocols: int32 count 1
        "0005" "72616e6765"            # name "range"
        "00000003" "000102"            # metadata: int32 length 3
    )
    decoded = group.JoinGroup.decode_request(body, 0)
    assert decoded.rebalance_timeout_ms == -1      # absent: the declared default
    assert decoded.group_instance_id is None
    assert decoded.reason is None
    assert decoded.protocols[0].metadata == b"\x00\x01\x02"


def test_golden_join_group_v1_adds_rebalance_timeout() -> None:
    body = _req(group.JoinGroup, {"group_id": "g", "session_timeout_ms": 1,
                                  "rebalance_timeout_ms": 2, "member_id": "m",
                                  "protocol_type": "c", "protocols": []}, 1)
    assert body == bytes.fromhex(
        "0001" "67" "00000001" "00000002" "0001" "6d" "0001" "63" "00000000")


def test_golden_offset_commit_v8_flexible_request() -> None:
    # OffsetCommit Request (Version: 8) => group_id generation_id member_id group_instance_id
    #   [topics] TAG_BUFFER; topics => name [partitions] TAG_BUFFER; partitions =>
    #   partition_index committed_offset committed_leader_epoch committed_metadata TAG_BUFFER.
    msg = {
        "group_id": "g", "generation_id_or_member_epoch": 5, "member_id": "m1",
        "group_instance_id": None, "retention_time_ms": 1000,   # v2-4 only
        "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
             "commit_timestamp": 7,                             # v1 only
             "committed_metadata": ""},
        ]}],
    }
    body = _req(group.OffsetCommit, msg, 8)
    assert body == bytes.fromhex(
        "02" "67"                      # group_id: compact string, uvarint(1 + 1)
        "00000005"                     # generation_id_or_member_epoch
        "03" "6d31"                    # member_id "m1"
        "00"                           # group_instance_id: null compact string
        "02"                           # topics: compact array of 1
        "02" "74"                      # name "t"
        "02"                           # partitions: compact array of 1
        "00000000"                     # partition_index 0
        "000000000000002a"             # committed_offset 42
        "ffffffff"                     # committed_leader_epoch -1
        "01"                           # committed_metadata "" (not null): uvarint(0 + 1)
        "00"                           # partition tag buffer
        "00"                           # topic tag buffer
        "00"                           # request tag buffer
    )
    decoded = group.OffsetCommit.decode_request(body, 8)
    assert decoded.group_instance_id is None
    assert decoded.retention_time_ms == -1
    assert decoded.topics[0].partitions[0].committed_metadata == ""
    assert decoded.topics[0].partitions[0].commit_timestamp == -1


def test_golden_offset_commit_v2_request_has_retention_not_timestamp() -> None:
    msg = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
           "retention_time_ms": -1,
           "topics": [{"name": "t", "partitions": [
               {"partition_index": 3, "committed_offset": 9, "commit_timestamp": 123,
                "committed_metadata": None}]}]}
    assert _req(group.OffsetCommit, msg, 2) == bytes.fromhex(
        "0001" "67" "00000001" "0001" "6d"
        "ffffffffffffffff"             # retention_time_ms -1
        "00000001" "0001" "74"
        "00000001" "00000003" "0000000000000009"
        "ffff"                         # committed_metadata: null STRING (int16 -1)
    )


def test_golden_find_coordinator_v4_batched_keys() -> None:
    # FindCoordinator Request (Version: 4) => key_type [coordinator_keys] TAG_BUFFER
    body = _req(group.FindCoordinator, {"key": "ignored", "key_type": 0,
                                        "coordinator_keys": ["a", "bc"]}, 4)
    assert body == bytes.fromhex(
        "00"                           # key_type 0 (group); key is gone in v4
        "03" "02" "61" "03" "6263"     # coordinator_keys: compact array of 2 compact strings
        "00"                           # tag buffer
    )
    # Response (Version: 4) => throttle_time_ms [coordinators] TAG_BUFFER
    resp = {"throttle_time_ms": 0, "coordinators": [
        {"key": "a", "node_id": 1, "host": "h", "port": 9092, "error_code": 0,
         "error_message": None}]}
    body = _resp(group.FindCoordinator, resp, 4)
    assert body == bytes.fromhex(
        "00000000"                     # throttle_time_ms
        "02"                           # coordinators: 1
        "02" "61"                      # key "a"
        "00000001"                     # node_id
        "02" "68"                      # host "h"
        "00002384"                     # port 9092
        "0000"                         # error_code
        "00"                           # error_message null
        "00"                           # coordinator tag buffer
        "00"                           # response tag buffer
    )
    assert group.FindCoordinator.decode_response(body, 4).coordinators[0].port == 9092


def test_golden_find_coordinator_v0_response() -> None:
    body = _resp(group.FindCoordinator,
                 {"error_code": 15, "node_id": -1, "host": "", "port": -1}, 0)
    assert body == bytes.fromhex("000f" "ffffffff" "0000" "ffffffff")


def test_golden_sasl_handshake_v1() -> None:
    # SaslHandshake Request (Version: 1) => mechanism: STRING
    assert _req(sasl.SaslHandshake, {"mechanism": "PLAIN"}, 1) == bytes.fromhex(
        "0005" "504c41494e")
    # Response => error_code [mechanisms]
    body = _resp(sasl.SaslHandshake,
                 {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}, 1)
    assert body == bytes.fromhex(
        "0021"                                     # UNSUPPORTED_SASL_MECHANISM
        "00000002"
        "0005" "504c41494e"
        "000d" "534352414d2d5348412d323536"
    )
    assert sasl.SaslHandshake.decode_response(body, 1).mechanisms == ["PLAIN", "SCRAM-SHA-256"]


def test_golden_sasl_authenticate_v2_flexible() -> None:
    body = _req(sasl.SaslAuthenticate, {"auth_bytes": b"\x00u\x00p"}, 2)
    assert body == bytes.fromhex("05" "00750070" "00")   # compact bytes, tag buffer
    body = _resp(sasl.SaslAuthenticate, {"error_code": 0, "error_message": None,
                                         "auth_bytes": b"", "session_lifetime_ms": 0}, 2)
    assert body == bytes.fromhex("0000" "00" "01" "0000000000000000" "00")
    # v0 has no session lifetime.
    body = _resp(sasl.SaslAuthenticate, {"error_code": 58, "error_message": "bad",
                                         "session_lifetime_ms": 5}, 0)
    assert body == bytes.fromhex("003a" "0003" "626164" "00000000")


def test_golden_list_groups_v4_states_filter() -> None:
    assert _req(group.ListGroups, {"states_filter": ["Stable"]}, 4) == bytes.fromhex(
        "02" "07" "537461626c65" "00")
    assert _req(group.ListGroups, {"states_filter": ["Stable"]}, 3) == bytes.fromhex("00")
    assert _req(group.ListGroups, {}, 2) == b""


def test_golden_leave_group_v5_member_reason() -> None:
    body = _req(group.LeaveGroup, {"group_id": "g", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": "bye"}]}, 5)
    assert body == bytes.fromhex(
        "02" "67"                       # group_id
        "02"                            # members: 1
        "02" "6d"                       # member_id "m"
        "00"                            # group_instance_id null
        "04" "627965"                   # reason "bye"
        "00" "00")                      # member tag buffer, request tag buffer
    # v0-2 name a single member instead.
    assert _req(group.LeaveGroup, {"group_id": "g", "member_id": "m"}, 0) == bytes.fromhex(
        "0001" "67" "0001" "6d")


def test_golden_update_metadata_v8_tagged_type() -> None:
    um = controller.UpdateMetadata
    msg = {"controller_id": 1, "is_k_raft_controller": False, "type": 2,
           "controller_epoch": 3, "broker_epoch": 4, "topic_states": [], "live_brokers": []}
    body = _req(um, msg, 8)
    assert body == bytes.fromhex(
        "00000001"                      # controller_id
        "00"                            # is_k_raft_controller
        "00000003"                      # controller_epoch (type is tagged, not here)
        "0000000000000004"              # broker_epoch
        "01"                            # topic_states: empty compact array
        "01"                            # live_brokers: empty
        "01" "00" "01" "02"             # 1 tagged field: tag 0, size 1, int8 2 (full)
    )
    assert um.decode_request(body, 8).type == 2
    # The default type (0) is not sent at all.
    msg["type"] = 0
    assert _req(um, msg, 8).endswith(bytes.fromhex("01" "01" "00"))


def test_golden_update_metadata_v0_single_endpoint() -> None:
    um = controller.UpdateMetadata
    msg = {"controller_id": 0, "controller_epoch": 1, "ungrouped_partition_states": [
        {"topic_name": "t", "partition_index": 0, "controller_epoch": 1, "leader": 2,
         "leader_epoch": 3, "isr": [2], "zk_version": 4, "replicas": [2]}],
        "live_brokers": [{"id": 2, "v0_host": "h", "v0_port": 9092, "rack": "r"}]}
    assert _req(um, msg, 0) == bytes.fromhex(
        "00000000" "00000001"
        "00000001"                                      # ungrouped_partition_states: 1
        "0001" "74" "00000000" "00000001" "00000002" "00000003"
        "00000001" "00000002"                           # isr [2]
        "00000004"                                      # zk_version
        "00000001" "00000002"                           # replicas [2]
        "00000001"                                      # live_brokers: 1
        "00000002" "0001" "68" "00002384"               # id, v0_host, v0_port; no rack in v0
    )


def test_golden_leader_and_isr_v1_flat_partition_states() -> None:
    lai = controller.LeaderAndIsr
    msg = {"controller_id": 1, "controller_epoch": 2, "ungrouped_partition_states": [
        {"topic_name": "t", "partition_index": 0, "controller_epoch": 2, "leader": 1,
         "leader_epoch": 5, "isr": [1, 2], "zk_version": 6, "replicas": [1, 2],
         "is_new": True}],
        "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}]}
    assert _req(lai, msg, 1) == bytes.fromhex(
        "00000001" "00000002"
        "00000001"
        "0001" "74" "00000000" "00000002" "00000001" "00000005"
        "00000002" "00000001" "00000002"                # isr
        "00000006"                                      # zk_version
        "00000002" "00000001" "00000002"                # replicas
        "01"                                            # is_new (v1+)
        "00000001" "00000001" "0001" "68" "00002384"    # live_leaders
    )


# ---------------------------------------------------------------- realistic round trips

U1 = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")

# (api, request, response): realistic messages; fields a version lacks are ignored when
# encoding that version and must decode as their declared defaults.
REALISTIC: list[tuple[Api, dict, dict]] = [
    (group.FindCoordinator,
     {"key": "my-group", "key_type": 0, "coordinator_keys": ["my-group", "other"]},
     {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "node_id": 2,
      "host": "broker-2", "port": 9092,
      "coordinators": [{"key": "my-group", "node_id": 2, "host": "broker-2", "port": 9092,
                        "error_code": 0, "error_message": None},
                       {"key": "other", "node_id": -1, "host": "", "port": -1,
                        "error_code": 15, "error_message": "not available"}]}),
    (group.JoinGroup,
     {"group_id": "my-group", "session_timeout_ms": 45000, "rebalance_timeout_ms": 300000,
      "member_id": "", "group_instance_id": "instance-1", "protocol_type": "consumer",
      "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01\x00\x01t"},
                    {"name": "cooperative-sticky", "metadata": b"\x00\x03"}],
      "reason": "rebalance failed due to MemberIdRequiredException"},
     {"throttle_time_ms": 0, "error_code": 0, "generation_id": 3,
      "protocol_type": "consumer", "protocol_name": "range", "leader": "c-1-abc",
      "skip_assignment": False, "member_id": "c-1-abc",
      "members": [{"member_id": "c-1-abc", "group_instance_id": None, "metadata": b"\x00\x01"},
                  {"member_id": "c-2-def", "group_instance_id": "instance-2",
                   "metadata": b"\x00\x01"}]}),
    (group.Heartbeat,
     {"group_id": "my-group", "generation_id": 3, "member_id": "c-1-abc",
      "group_instance_id": None},
     {"throttle_time_ms": 0, "error_code": 27}),
    (group.LeaveGroup,
     {"group_id": "my-group", "member_id": "c-1-abc",
      "members": [{"member_id": "c-1-abc", "group_instance_id": None,
                   "reason": "the consumer is being closed"}]},
     {"throttle_time_ms": 0, "error_code": 0,
      "members": [{"member_id": "c-1-abc", "group_instance_id": None, "error_code": 0}]}),
    (group.SyncGroup,
     {"group_id": "my-group", "generation_id": 3, "member_id": "c-1-abc",
      "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
      "assignments": [{"member_id": "c-1-abc", "assignment": b"\x00\x01\x00\x00\x00\x01"},
                      {"member_id": "c-2-def", "assignment": b""}]},
     {"throttle_time_ms": 0, "error_code": 0, "protocol_type": "consumer",
      "protocol_name": "range", "assignment": b"\x00\x01\x00\x00\x00\x01"}),
    (group.DescribeGroups,
     {"groups": ["my-group", "missing"], "include_authorized_operations": True},
     {"throttle_time_ms": 0, "groups": [
         {"error_code": 0, "group_id": "my-group", "group_state": "Stable",
          "protocol_type": "consumer", "protocol_data": "range",
          "members": [{"member_id": "c-1-abc", "group_instance_id": None,
                       "client_id": "c-1", "client_host": "/10.0.0.1",
                       "member_metadata": b"\x00\x01", "member_assignment": b"\x00\x01"}],
          "authorized_operations": 0x7F8},
         {"error_code": 0, "group_id": "missing", "group_state": "Dead",
          "protocol_type": "", "protocol_data": "", "members": [],
          "authorized_operations": -2147483648}]}),
    (group.ListGroups,
     {"states_filter": ["Stable", "Empty"]},
     {"throttle_time_ms": 0, "error_code": 0,
      "groups": [{"group_id": "my-group", "protocol_type": "consumer", "group_state": "Stable"},
                 {"group_id": "connect-x", "protocol_type": "connect", "group_state": "Empty"}]}),
    (group.OffsetCommit,
     {"group_id": "my-group", "generation_id_or_member_epoch": 3, "member_id": "c-1-abc",
      "group_instance_id": None, "retention_time_ms": -1,
      "topics": [{"name": "orders", "partitions": [
          {"partition_index": 0, "committed_offset": 1200, "committed_leader_epoch": 4,
           "commit_timestamp": -1, "committed_metadata": ""},
          {"partition_index": 1, "committed_offset": 7, "committed_leader_epoch": -1,
           "commit_timestamp": -1, "committed_metadata": None}]}]},
     {"throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
         {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 0}]}]}),
    (group.OffsetFetch,
     {"group_id": "my-group",
      "topics": [{"name": "orders", "partition_indexes": [0, 1]}],
      "groups": [{"group_id": "my-group", "member_id": None, "member_epoch": -1,
                  "topics": None},
                 {"group_id": "g2", "member_id": "m", "member_epoch": 7,
                  "topics": [{"name": "orders", "partition_indexes": [2]}]}],
      "require_stable": True},
     {"throttle_time_ms": 0,
      "topics": [{"name": "orders", "partitions": [
          {"partition_index": 0, "committed_offset": 1200, "committed_leader_epoch": 4,
           "metadata": "", "error_code": 0},
          {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1,
           "metadata": None, "error_code": 0}]}],
      "error_code": 0,
      "groups": [{"group_id": "my-group", "error_code": 0, "topics": [
          {"name": "orders", "partitions": [
              {"partition_index": 0, "committed_offset": 1200, "committed_leader_epoch": 4,
               "metadata": "", "error_code": 0}]}]},
                 {"group_id": "g2", "error_code": 16, "topics": []}]}),
    (group.DeleteGroups,
     {"groups_names": ["old-group", "busy-group"]},
     {"throttle_time_ms": 0, "results": [{"group_id": "old-group", "error_code": 0},
                                         {"group_id": "busy-group", "error_code": 68}]}),
    (group.OffsetDelete,
     {"group_id": "my-group", "topics": [{"name": "orders", "partitions": [
         {"partition_index": 0}, {"partition_index": 1}]}]},
     {"error_code": 0, "throttle_time_ms": 0, "topics": [{"name": "orders", "partitions": [
         {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 86}]}]}),
    (sasl.SaslHandshake,
     {"mechanism": "SCRAM-SHA-512"},
     {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}),
    (sasl.SaslAuthenticate,
     {"auth_bytes": b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"},
     {"error_code": 0, "error_message": None,
      "auth_bytes": b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
      "session_lifetime_ms": 3600000}),
    (controller.LeaderAndIsr,
     {"controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 7,
      "broker_epoch": 4294967296, "type": 0,
      "ungrouped_partition_states": [
          {"topic_name": "orders", "partition_index": 0, "controller_epoch": 7, "leader": 1,
           "leader_epoch": 12, "isr": [1, 2, 3], "zk_version": 40, "replicas": [1, 2, 3],
           "adding_replicas": [], "removing_replicas": [], "is_new": False,
           "leader_recovery_state": 0}],
      "topic_states": [{"topic_name": "orders", "topic_id": U1, "partition_states": [
          {"partition_index": 0, "controller_epoch": 7, "leader": 1, "leader_epoch": 12,
           "isr": [1, 2, 3], "zk_version": 40, "replicas": [1, 2, 3],
           "adding_replicas": [4], "removing_replicas": [3], "is_new": True,
           "leader_recovery_state": 1}]}],
      "live_leaders": [{"broker_id": 1, "host_name": "broker-1", "port": 9092}]},
     {"error_code": 0,
      "partition_errors": [{"topic_name": "orders", "partition_index": 0, "error_code": 0}],
      "topics": [{"topic_id": U1, "partition_errors": [
          {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 56}]}]}),
    (controller.StopReplica,
     {"controller_id": 1, "is_k_raft_controller": False, "controller_epoch": 7,
      "broker_epoch": 99, "delete_partitions": True,
      "ungrouped_partitions": [{"topic_name": "orders", "partition_index": 2}],
      "topics": [{"name": "orders", "partition_indexes": [2]}],
      "topic_states": [{"topic_name": "orders", "partition_states": [
          {"partition_index": 2, "leader_epoch": -2, "delete_partition": True}]}]},
     {"error_code": 0, "partition_errors": [
         {"topic_name": "orders", "partition_index": 2, "error_code": 0}]}),
    (controller.UpdateMetadata,
     {"controller_id": 1, "is_k_raft_controller": False, "type": 1, "controller_epoch": 7,
      "broker_epoch": 99,
      "ungrouped_partition_states": [
          {"topic_name": "orders", "partition_index": 0, "controller_epoch": 7, "leader": 1,
           "leader_epoch": 12, "isr": [1, 2], "zk_version": 40, "replicas": [1, 2, 3],
           "offline_replicas": [3]}],
      "topic_states": [{"topic_name": "orders", "topic_id": U1, "partition_states": [
          {"partition_index": 0, "controller_epoch": 7, "leader": 1, "leader_epoch": 12,
           "isr": [1, 2], "zk_version": 40, "replicas": [1, 2, 3], "offline_replicas": [3]}]}],
      "live_brokers": [
          {"id": 1, "v0_host": "broker-1", "v0_port": 9092, "rack": "rack-a",
           "endpoints": [{"port": 9092, "host": "broker-1", "listener": "PLAINTEXT",
                          "security_protocol": 0},
                         {"port": 9093, "host": "broker-1", "listener": "SASL_SSL",
                          "security_protocol": 3}]},
          {"id": 2, "v0_host": "broker-2", "v0_port": 9092, "rack": None,
           "endpoints": [{"port": 9092, "host": "broker-2", "listener": "PLAINTEXT",
                          "security_protocol": 0}]}]},
     {"error_code": 0}),
    (controller.ControlledShutdown,
     {"broker_id": 3, "broker_epoch": 12345},
     {"error_code": 0, "remaining_partitions": [{"topic_name": "orders", "partition_index": 1}]}),
]


def _check(fields: list[F], version: int, sent: dict, got: Any, path: str) -> None:
    """Fields the version has decode as sent; the others (and those not sent) as their
    declared defaults."""
    assert set(got) == {f.name for f in fields}, path
    for f in fields:
        where = f"{path}.{f.name}"
        if version not in f.vr or f.name not in sent:
            assert got[f.name] == f.default_value(), where
        elif f.kind == "struct_array" and sent[f.name] is not None:
            assert len(got[f.name]) == len(sent[f.name]), where
            for i, (s, g) in enumerate(zip(sent[f.name], got[f.name])):
                _check(f.elem, version, s, g, f"{where}[{i}]")
        else:
            assert got[f.name] == sent[f.name], where


def _lowest_and_highest(api: Api) -> list[int]:
    return sorted({api.min_version, api.max_version})


CASES = [(api, v, req, resp) for api, req, resp in REALISTIC for v in _lowest_and_highest(api)]


def test_realistic_cases_cover_every_api() -> None:
    assert {api.key for api, _, _ in REALISTIC} == {
        a.key for m in (group, sasl, controller) for a in m.APIS}


def _version_view(fields: list[F], version: int, msg: dict) -> dict:
    """The message as a client of that version would build it: nullable-in-some-versions
    fields get a value legal in this version. Fields not in `msg` stay unsent (default)."""
    out = {}
    for f in fields:
        if f.name not in msg:
            continue
        v = msg[f.name]
        if v is None and version in f.vr and (f.nr is None or version not in f.nr):
            v = f.default_value() if f.default_value() is not None else ""
        if f.kind == "struct_array" and v is not None:
            v = [_version_view(f.elem, version, it) for it in v]
        out[f.name] = v
    return out


@pytest.mark.parametrize("which", ["req", "resp"])
@pytest.mark.parametrize("api,version,req,resp", CASES,
                         ids=[f"{a.name}-v{v}" for a, v, _, _ in CASES])
def test_realistic_roundtrip(api: Api, version: int, req: dict, resp: dict, which: str) -> None:
    if which == "req":
        fields, msg, encode, decode = api.request, req, api.encode_request, api.decode_request
    else:
        fields, msg, encode, decode = api.response, resp, api.encode_response, api.decode_response
    msg = _version_view(fields, version, msg)
    data = encode(msg, version).getvalue()
    r = Reader(data)
    got = decode(r, version)
    assert r.remaining() == 0
    _check(fields, version, msg, got, api.name)
    assert encode(got, version).getvalue() == data
