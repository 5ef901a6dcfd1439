"""Records of the `__consumer_offsets` topic, in Kafka's formats, declared as data.

Each record is a versioned key and a versioned value (an int16 version, then the struct).
Key versions 0/1 are offset commits, key version 2 is group metadata; a null value is a
tombstone, so compaction keeps only the latest commit per (group, topic, partition) and
the latest metadata per group. strom writes offset values v3 and group values v3 (what
Kafka 3.x writes for classic groups) and reads v0-v4.
"""
from __future__ import annotations

from dataclasses import dataclass

from clients.protocol.schema import NULL, F, Struct, VersionedCodecs
from clients.protocol.types import Reader

OFFSET_KEY_FIELDS = [F("group", "string"), F("topic", "string"), F("partition", "int32")]
GROUP_KEY_FIELDS = [F("group", "string")]

OFFSET_VALUE_FIELDS = [
    F("offset", "int64"),
    F("leader_epoch", "int32", versions="3+", default=-1),
    F("metadata", "string"),
    F("commit_timestamp", "int64"),
    F("expire_timestamp", "int64", versions="1", default=-1),
]

GROUP_VALUE_FIELDS = [
    F("protocol_type", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+", default=NULL),
    F("leader", "string", nullable="0+", default=NULL),
    F("current_state_timestamp", "int64", versions="2+", default=-1),
    F("members", [
        F("member_id", "string"),
        F("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
        F("client_id", "string"),
        F("client_host", "string"),
        F("rebalance_timeout", "int32", versions="1+"),
        F("session_timeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    ]),
]

OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
_FLEXIBLE_FROM = 4

_CODECS = VersionedCodecs({"okey": (OFFSET_KEY_FIELDS, None), "gkey": (GROUP_KEY_FIELDS, None),
                           "oval": (OFFSET_VALUE_FIELDS, _FLEXIBLE_FROM),
                           "gval": (GROUP_VALUE_FIELDS, _FLEXIBLE_FROM)})
_codec = _CODECS.codec
_encode = _CODECS.encode


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _encode("okey", 1, {"group": group, "topic": topic, "partition": partition})


def group_key(group: str) -> bytes:
    return _encode("gkey", 2, {"group": group})


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes:
    return _encode("oval", OFFSET_VALUE_VERSION, {"offset": offset, "leader_epoch": leader_epoch,
                                                  "metadata": metadata, "commit_timestamp": commit_timestamp})


def group_value(value: dict) -> bytes:
    return _encode("gval", GROUP_VALUE_VERSION, value)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """None for key versions strom does not know (e.g. KIP-848 records): skip them."""
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        s = _codec("okey", version).read(r)
        return OffsetKey(s.group, s.topic, s.partition)
    if version == 2:
        return GroupKey(_codec("gkey", version).read(r).group)
    return None


def decode_offset_value(data: bytes) -> Struct:
    r = Reader(data)
    version = r.int16()
    return _codec("oval", min(version, 4)).read(r)


def decode_group_value(data: bytes) -> Struct:
    r = Reader(data)
    version = r.int16()
    return _codec("gval", min(version, 4)).read(r)
