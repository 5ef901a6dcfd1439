"""Records of `__consumer_offsets`: golden bytes written by hand from Kafka's formats, and
round trips of what strom writes.

The formats are Kafka's group-coordinator/src/main/resources/common/message/
OffsetCommitKey.json, OffsetCommitValue.json, GroupMetadataKey.json and
GroupMetadataValue.json (the older GroupMetadataManager.scala schemas are the same bytes):
every key and value starts with an int16 version; key versions 0 and 1 are offset commits
(group, topic, partition), key version 2 is group metadata (group). Values:

    OffsetCommitValue  v0: offset, metadata, commit_timestamp
                       v1: + expire_timestamp (v1 only)
                       v2: offset, metadata, commit_timestamp
                       v3: offset, leader_epoch, metadata, commit_timestamp
                       v4: v3, flexible (compact strings, tagged fields)
    GroupMetadataValue v0: protocol_type, generation, protocol?, leader?, members
                       v1: members gain rebalance_timeout; v2: + current_state_timestamp;
                       v3: members gain group_instance_id?; v4: flexible
    member (v3): member_id, group_instance_id?, client_id, client_host,
                 rebalance_timeout, session_timeout, subscription, assignment
"""
from __future__ import annotations

import pytest

from broker.group import records as R

from tests.support.hex_layout import TS, TS2, cs, h, s16  # noqa: F401


# ---------------------------------------------------------------- keys

OFFSET_KEY_V1 = h("0001", s16("grp"), s16("tp"), "00000007")
GROUP_KEY_V2 = h("0002", s16("grp"))


def test_offset_commit_key_golden_bytes() -> None:
    assert OFFSET_KEY_V1 == h("0001 0003 677270 0002 7470 00000007")
    assert R.offset_key("grp", "tp", 7) == OFFSET_KEY_V1
    assert R.decode_key(OFFSET_KEY_V1) == R.OffsetKey("grp", "tp", 7)
    # Key version 0 has the same fields.
    assert R.decode_key(h("0000", s16("grp"), s16("tp"), "00000007")) == R.OffsetKey("grp", "tp", 7)


def test_group_metadata_key_golden_bytes() -> None:
    assert GROUP_KEY_V2 == h("0002 0003 677270")
    assert R.group_key("grp") == GROUP_KEY_V2
    assert R.decode_key(GROUP_KEY_V2) == R.GroupKey("grp")


def test_unknown_key_versions_are_skipped() -> None:
    # KIP-848 records (ConsumerGroupMetadataKey is type 3, ...) are not classic-group records.
    assert R.decode_key(h("0003", s16("grp"))) is None
    assert R.decode_key(h("0008", s16("grp"), s16("m"))) is None


@pytest.mark.parametrize("group,topic,partition", [
    ("g", "t", 0), ("", "x", 2**31 - 1), ("gr\u00fcppe-\U0001F600", "topic.with-dots_1", 123)])
def test_offset_key_round_trip(group: str, topic: str, partition: int) -> None:
    assert R.decode_key(R.offset_key(group, topic, partition)) == R.OffsetKey(group, topic, partition)
    assert R.decode_key(R.group_key(group)) == R.GroupKey(group)


# ---------------------------------------------------------------- offset values

OFFSET_VALUE_V3 = h("0003", "000000000000002a", "00000005", s16("md"), TS)


def test_offset_commit_value_v3_golden_bytes() -> None:
    assert OFFSET_VALUE_V3 == h("0003 000000000000002a 00000005 0002 6d64 0000018bcfe56800")
    assert R.offset_value(42, 5, "md", 1700000000000) == OFFSET_VALUE_V3
    v = R.decode_offset_value(OFFSET_VALUE_V3)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 5, "md", 1700000000000)


def test_offset_commit_value_v0_v1_v2_decode() -> None:
    v0 = R.decode_offset_value(h("0000", "0000000000000064", s16("m"), TS))
    assert (v0.offset, v0.leader_epoch, v0.metadata, v0.commit_timestamp) == (100, -1, "m", 1700000000000)
    # v1 carries the explicit expire timestamp of OffsetCommit v2-v4's retention_time.
    v1 = R.decode_offset_value(h("0001", "0000000000000065", s16(""), TS, TS2))
    assert (v1.offset, v1.leader_epoch, v1.metadata, v1.commit_timestamp, v1.expire_timestamp) == (
        101, -1, "", 1700000000000, 1700000600000)
    v2 = R.decode_offset_value(h("0002", "0000000000000066", s16("x"), TS))
    assert (v2.offset, v2.leader_epoch, v2.metadata, v2.commit_timestamp) == (102, -1, "x", 1700000000000)


def test_offset_commit_value_v4_flexible_skips_unknown_tags() -> None:
    # v4: compact metadata string and a tagged-field section; tag 0 (a topic id in later
    # Kafkas) is unknown to strom and skipped.
    data = h("0004", "000000000000002a", "00000005", cs("md"), TS, "01", "00", "10", "ab" * 16)
    v = R.decode_offset_value(data)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 5, "md", 1700000000000)
    assert R.decode_offset_value(h("0004", "0000000000000001", "ffffffff", cs(""), TS, "00")).offset == 1


@pytest.mark.parametrize("offset,epoch,metadata", [(0, -1, ""), (2**63 - 1, 2**31 - 1, "x" * 300),
                                                   (17, 3, "m\u00e9ta")])
def test_offset_value_round_trip(offset: int, epoch: int, metadata: str) -> None:
    v = R.decode_offset_value(R.offset_value(offset, epoch, metadata, 1700000000000))
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (offset, epoch, metadata, 1700000000000)


# ---------------------------------------------------------------- group values

GROUP_VALUE_V3 = h(
    "0003",
    s16("consumer"), "00000003", s16("range"), s16("m1"), TS,
    "00000001",                                           # one member
    s16("m1"), s16("i1"), s16("c"), s16("/h"),
    "00007530", "00002710",                               # rebalance 30000, session 10000
    "00000002 0001",                                      # subscription
    "00000001 02",                                        # assignment
)

MEMBER = {"member_id": "m1", "group_instance_id": "i1", "client_id": "c", "client_host": "/h",
          "rebalance_timeout": 30000, "session_timeout": 10000,
          "subscription": b"\x00\x01", "assignment": b"\x02"}
GROUP = {"protocol_type": "consumer", "generation": 3, "protocol": "range", "leader": "m1",
         "current_state_timestamp": 1700000000000, "members": [MEMBER]}


def _plain(v) -> dict:
    return {**v, "members": [dict(m) for m in v.members]}


def test_group_metadata_value_v3_golden_bytes() -> None:
    assert GROUP_VALUE_V3 == h(
        "0003 0008 636f6e73756d6572 00000003 0005 72616e6765 0002 6d31 0000018bcfe56800"
        "00000001 0002 6d31 0002 6931 0001 63 0002 2f68 00007530 00002710 00000002 0001 00000001 02")
    assert R.group_value(GROUP) == GROUP_VALUE_V3
    assert _plain(R.decode_group_value(GROUP_VALUE_V3)) == GROUP


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    empty = {"protocol_type": "consumer", "generation": 4, "protocol": None, "leader": None,
             "current_state_timestamp": 1700000000000, "members": []}
    data = h("0003", s16("consumer"), "00000004", "ffff", "ffff", TS, "00000000")
    assert R.group_value(empty) == data
    assert _plain(R.decode_group_value(data)) == empty


def test_group_metadata_value_v0_v1_v2_decode() -> None:
    member_v0 = s16("m1") + s16("c") + s16("/h") + "00002710" + "00000002 0001" + "00000001 02"
    v0 = R.decode_group_value(h("0000", s16("consumer"), "00000001", s16("range"), s16("m1"),
                                "00000001", member_v0))
    assert (v0.protocol_type, v0.generation, v0.protocol, v0.leader, v0.current_state_timestamp) == (
        "consumer", 1, "range", "m1", -1)
    m = v0.members[0]
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
            m.subscription, m.assignment) == ("m1", None, "c", "/h", 10000, b"\x00\x01", b"\x02")

    member_v1 = s16("m1") + s16("c") + s16("/h") + "00007530 00002710" + "00000002 0001" + "00000001 02"
    v1 = R.decode_group_value(h("0001", s16("consumer"), "00000002", s16("range"), s16("m1"),
                                "00000001", member_v1))
    assert (v1.generation, v1.members[0].rebalance_timeout, v1.members[0].session_timeout) == (2, 30000, 10000)

    v2 = R.decode_group_value(h("0002", s16("consumer"), "00000003", s16("range"), s16("m1"), TS,
                                "00000001", member_v1))
    assert (v2.generation, v2.current_state_timestamp, v2.members[0].group_instance_id) == (
        3, 1700000000000, None)


def test_group_metadata_value_v4_flexible_decode() -> None:
    data = h(
        "0004",
        cs("consumer"), "00000003", cs("range"), cs("m1"), TS,
        "02",                                              # compact array: one member
        cs("m1"), cs(None), cs("c"), cs("/h"), "00007530", "00002710",
        "03 0001", "02 02",                                # compact bytes
        "00",                                              # member's tagged fields
        "00",                                              # value's tagged fields
    )
    v = R.decode_group_value(data)
    assert _plain(v) == {**GROUP, "members": [{**MEMBER, "group_instance_id": None}]}


@pytest.mark.parametrize("instance", [None, "static-1"])
def test_group_value_round_trip(instance: str | None) -> None:
    members = [{**MEMBER, "member_id": f"m{i}", "group_instance_id": instance and f"{instance}-{i}",
                "assignment": bytes(range(i))} for i in range(3)]
    value = {**GROUP, "members": members}
    assert _plain(R.decode_group_value(R.group_value(value))) == value
