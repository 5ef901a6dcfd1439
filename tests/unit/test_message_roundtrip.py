"""Round trip of every version of every declared API, plus golden bytes for known encodings.

The round trip is generic: it walks each declaration and builds a sample whose every field
present in the version holds a non-default value (nested arrays of two elements, nullable
fields null in a second sample), so it also covers APIs declared after this file was written.
"""
from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from clients.protocol.headers import RequestHeader, encode_request_header
from clients.protocol.messages import API_BY_KEY
from clients.protocol.schema import Api, F, NULL, Struct
from clients.protocol.types import DecodeError, Reader, Writer

# Kafka's first flexible version of each API (None: never flexible), as of Kafka 3.7.
# Every declared API must appear here, so a typo in a declaration's `flexible=` shows.
KAFKA_FIRST_FLEXIBLE: dict[int, int | None] = {
    0: 9,     # Produce
    1: 12,    # Fetch
    2: 6,     # ListOffsets
    3: 9,     # Metadata
    4: 4,     # LeaderAndIsr
    5: 2,     # StopReplica
    6: 6,     # UpdateMetadata
    7: 3,     # ControlledShutdown
    8: 8,     # OffsetCommit
    9: 6,     # OffsetFetch
    10: 3,    # FindCoordinator
    11: 6,    # JoinGroup
    12: 4,    # Heartbeat
    13: 4,    # LeaveGroup
    14: 4,    # SyncGroup
    15: 5,    # DescribeGroups
    16: 3,    # ListGroups
    17: None,  # SaslHandshake
    18: 3,    # ApiVersions
    19: 5,    # CreateTopics
    20: 4,    # DeleteTopics
    21: 2,    # DeleteRecords
    22: 2,    # InitProducerId
    23: 4,    # OffsetForLeaderEpoch
    24: 3,    # AddPartitionsToTxn
    25: 3,    # AddOffsetsToTxn
    26: 3,    # EndTxn
    27: 1,    # WriteTxnMarkers
    28: 3,    # TxnOffsetCommit
    29: 2,    # DescribeAcls
    30: 2,    # CreateAcls
    31: 2,    # DeleteAcls
    32: 4,    # DescribeConfigs
    33: 2,    # AlterConfigs
    34: 2,    # AlterReplicaLogDirs
    35: 2,    # DescribeLogDirs
    36: 2,    # SaslAuthenticate
    37: 2,    # CreatePartitions
    38: 2,    # CreateDelegationToken
    39: 2,    # RenewDelegationToken
    40: 2,    # ExpireDelegationToken
    41: 2,    # DescribeDelegationToken
    42: 2,    # DeleteGroups
    43: 2,    # ElectLeaders
    44: 1,    # IncrementalAlterConfigs
    45: 0,    # AlterPartitionReassignments
    46: 0,    # ListPartitionReassignments
    47: None,  # OffsetDelete
    48: 1,    # DescribeClientQuotas
    49: 1,    # AlterClientQuotas
    50: 0,    # DescribeUserScramCredentials
    51: 0,    # AlterUserScramCredentials
    52: 0,    # Vote
    53: None,  # BeginQuorumEpoch (v0 only in 3.7; v1, flexible, came with KIP-853)
    54: None,  # EndQuorumEpoch (same)
    55: 0,    # DescribeQuorum
    56: 0,    # AlterPartition
    57: 0,    # UpdateFeatures
    58: 0,    # Envelope
    59: 0,    # FetchSnapshot
    60: 0,    # DescribeCluster
    61: 0,    # DescribeProducers
    62: 0,    # BrokerRegistration
    63: 0,    # BrokerHeartbeat
    64: 0,    # UnregisterBroker
    65: 0,    # DescribeTransactions
    66: 0,    # ListTransactions
    67: 0,    # AllocateProducerIds
    68: 0,    # ConsumerGroupHeartbeat
    69: 0,    # ConsumerGroupDescribe
    70: 0,    # ControllerRegistration
    71: 0,    # GetTelemetrySubscriptions
    72: 0,    # PushTelemetry
    73: 0,    # AssignReplicasToDirs
    74: 0,    # ListClientMetricsResources
    75: 0,    # DescribeTopicPartitions
}

APIS = sorted(API_BY_KEY.values(), key=lambda a: a.key)
CASES = [(api, v) for api in APIS for v in range(api.min_version, api.max_version + 1)]
IDS = [f"{api.name}-v{v}" for api, v in CASES]


# ---------------------------------------------------------------- sample builder

_INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
}
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789-._é☃"


def _prim_value(t: str, rng: random.Random, default: Any) -> Any:
    """A random value of primitive type `t` different from `default`."""
    while True:
        if t == "bool":
            v: Any = not default
        elif t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            v = rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(-5, 5) if lo < 0 else 7])
        elif t == "float64":
            v = rng.uniform(-1e9, 1e9)
        elif t == "string":
            v = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 12)))
        elif t in ("bytes", "records"):
            v = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40)))
        elif t == "uuid":
            v = uuid.UUID(int=rng.getrandbits(128))
        else:
            raise AssertionError(f"no sample for type {t!r}")
        if v != default:
            return v


def _field_value(f: F, version: int, rng: random.Random, nulls: bool) -> Any:
    nullable = f.nr is not None and version in f.nr
    default = f.default_value()
    # The encoder treats a tagged field holding None as absent (decoded as its default), so
    # null only round-trips for tagged fields whose default is null.
    null_ok = f.tag is None or default is None
    if nullable and nulls and null_ok and rng.random() < 0.5:
        return None
    if f.kind == "prim":
        return _prim_value(f.elem, rng, default)
    if f.kind == "prim_array":
        return [_prim_value(f.elem, rng, None) for _ in range(2)]
    if f.kind == "struct":
        return _struct_value(f.elem, version, rng, nulls)
    return [_struct_value(f.elem, version, rng, nulls) for _ in range(2)]


def _struct_value(fields: list[F], version: int, rng: random.Random, nulls: bool) -> dict:
    """Input for the encoder: non-default values for every field, absent ones included
    (the encoder must ignore a field the version lacks)."""
    return {f.name: _field_value(f, version, rng, nulls) for f in fields}


def _expected(fields: list[F], version: int, value: dict) -> dict:
    """What decoding must give back: the value where the field exists, else the default."""
    out = {}
    for f in fields:
        if version not in f.vr:
            out[f.name] = f.default_value()
            continue
        v = value[f.name]
        if v is not None and f.kind == "struct_array":
            v = [_expected(f.elem, version, it) for it in v]
        elif v is not None and f.kind == "struct":
            v = _expected(f.elem, version, v)
        out[f.name] = v
    return out


def _plain(v: Any) -> Any:
    """Decoded value with memoryviews (records) made bytes and Structs made dicts."""
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _sample(api: Api, which: str, version: int, nulls: bool) -> tuple[dict, dict]:
    fields = api.request if which == "req" else api.response
    rng = random.Random(f"{api.key}/{which}/{version}/{nulls}")
    value = _struct_value(fields, version, rng, nulls)
    return value, _expected(fields, version, value)


def _codec(api: Api, which: str):
    if which == "req":
        return api.encode_request, api.decode_request
    return api.encode_response, api.decode_response


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize("which", ["req", "resp"])
@pytest.mark.parametrize("api,version", CASES, ids=IDS)
def test_roundtrip_every_field(api: Api, version: int, which: str) -> None:
    encode, decode = _codec(api, which)
    for nulls in (False, True):
        value, expected = _sample(api, which, version, nulls)
        data = encode(value, version).getvalue()
        r = Reader(data)
        decoded = decode(r, version)
        assert r.remaining() == 0, "decoder left bytes unread"
        assert isinstance(decoded, Struct)
        assert _plain(decoded) == expected
        # Re-encoding the decoded message gives the same bytes.
        assert encode(decoded, version).getvalue() == data


@pytest.mark.parametrize("which", ["req", "resp"])
@pytest.mark.parametrize("api,version", CASES, ids=IDS)
def test_defaults_roundtrip(api: Api, version: int, which: str) -> None:
    encode, decode = _codec(api, which)
    default = api.default_request(version) if which == "req" else api.default_response(version)
    data = encode(default, version).getvalue()
    assert _plain(decode(data, version)) == _plain(default)
    # An empty dict means "all defaults" and encodes the same.
    assert encode({}, version).getvalue() == data


@pytest.mark.parametrize("which", ["req", "resp"])
@pytest.mark.parametrize("api,version", CASES, ids=IDS)
def test_truncated_bytes_raise_decode_error(api: Api, version: int, which: str) -> None:
    encode, decode = _codec(api, which)
    value, _ = _sample(api, which, version, nulls=False)
    data = encode(value, version).getvalue()
    for n in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:n], version)


@pytest.mark.parametrize("api,version", CASES, ids=IDS)
def test_garbage_raises_only_decode_error(api: Api, version: int) -> None:
    """Random and bit-flipped input either decodes or raises DecodeError, quickly."""
    rng = random.Random(f"garbage/{api.key}/{version}")
    value, _ = _sample(api, "req", version, nulls=False)
    good = api.encode_request(value, version).getvalue()
    inputs = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))) for _ in range(20)]
    for _ in range(20):
        flipped = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            if flipped:
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        inputs.append(bytes(flipped))
    # Huge lengths/counts must be rejected without allocating or looping.
    inputs += [b"\x7f\xff\xff\xff" * 8, b"\xff" * 40, b"\x80" * 20 + b"\x01"]
    for data in inputs:
        for decode in (api.decode_request, api.decode_response):
            try:
                decode(data, version)
            except DecodeError:
                pass


# ---------------------------------------------------------------- declarations

@pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])
def test_flexible_version_matches_kafka(api: Api) -> None:
    assert api.key in KAFKA_FIRST_FLEXIBLE, f"{api.name}: add it to KAFKA_FIRST_FLEXIBLE"
    assert api.flexible == KAFKA_FIRST_FLEXIBLE[api.key]


@pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])
def test_declaration_is_well_formed(api: Api) -> None:
    assert 0 <= api.min_version <= api.max_version
    if api.flexible is not None:
        assert api.min_version <= api.flexible <= api.max_version

    def walk(fields: list[F], path: str) -> None:
        names = [f.name for f in fields]
        assert len(names) == len(set(names)), f"{path}: duplicate field names"
        tags = [f.tag for f in fields if f.tag is not None]
        assert len(tags) == len(set(tags)), f"{path}: duplicate tags"
        for f in fields:
            assert f.name == f.name.lower() and " " not in f.name, f"{path}.{f.name}"
            if f.tag is not None:
                # Tagged fields only exist where the version is flexible.
                assert api.flexible is not None and f.tr is not None, f"{path}.{f.name}"
                assert f.tr.low >= api.flexible, f"{path}.{f.name}"
            if f.kind in ("struct", "struct_array"):
                walk(f.elem, f"{path}.{f.name}")

    walk(api.request, f"{api.name}.request")
    walk(api.response, f"{api.name}.response")


# API key -> (name, version range) for the APIs core.py and admin.py declare: Kafka 3.7's,
# raised to Kafka 4.0's where strom honours the new versions (issue 23: Fetch 17, ListOffsets
# 10, Metadata 13, ApiVersions 4, DescribeCluster 2, DescribeTopicPartitions); the
# transaction APIs go to Kafka 4.x's, for transaction version 2 (KIP-890 part 2).
KAFKA_RANGES: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 12), 1: ("Fetch", 0, 17), 2: ("ListOffsets", 0, 10),
    3: ("Metadata", 0, 13), 18: ("ApiVersions", 0, 4), 22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 0, 4), 60: ("DescribeCluster", 0, 2),
    75: ("DescribeTopicPartitions", 0, 0),
    19: ("CreateTopics", 0, 7), 20: ("DeleteTopics", 0, 6), 21: ("DeleteRecords", 0, 2),
    32: ("DescribeConfigs", 0, 4), 33: ("AlterConfigs", 0, 2), 37: ("CreatePartitions", 0, 3),
    44: ("IncrementalAlterConfigs", 0, 1),
    24: ("AddPartitionsToTxn", 0, 5), 25: ("AddOffsetsToTxn", 0, 4), 26: ("EndTxn", 0, 5),
    27: ("WriteTxnMarkers", 0, 1), 28: ("TxnOffsetCommit", 0, 5), 61: ("DescribeProducers", 0, 0),
    65: ("DescribeTransactions", 0, 0), 66: ("ListTransactions", 0, 1),
    29: ("DescribeAcls", 0, 3), 30: ("CreateAcls", 0, 3), 31: ("DeleteAcls", 0, 3),
    35: ("DescribeLogDirs", 0, 4), 43: ("ElectLeaders", 0, 2),
    45: ("AlterPartitionReassignments", 0, 0), 46: ("ListPartitionReassignments", 0, 0),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0),
}


@pytest.mark.parametrize("key", sorted(KAFKA_RANGES))
def test_core_and_admin_apis_declared_with_kafka_versions(key: int) -> None:
    name, lo, hi = KAFKA_RANGES[key]
    api = API_BY_KEY[key]
    assert (api.name, api.min_version, api.max_version) == (name, lo, hi)


# ---------------------------------------------------------------- golden bytes

def _request_frame(api: Api, version: int, body: dict, correlation_id: int,
                   client_id: str) -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(api.key, version, correlation_id, client_id),
                          api.request_header_version(version))
    api.encode_request(body, version, w)
    return w.getvalue()


def test_golden_metadata_v0_request_one_topic() -> None:
    # Metadata Request (Version: 0) => [topics]; topics => name: STRING (int16 length).
    frame = _request_frame(API_BY_KEY[3], 0, {"topics": [{"name": "foo"}]}, 7, "cli")
    assert frame == bytes.fromhex(
        "0003" "0000" "00000007"        # api_key 3, api_version 0, correlation_id 7
        "0003" "636c69"                 # client_id "cli" (request header v1)
        "00000001"                      # topics: int32 array length 1
        "0003" "666f6f"                 # name "foo"
    )


def test_golden_metadata_v1_null_topics_means_all() -> None:
    body = API_BY_KEY[3].encode_request({"topics": None}, 1).getvalue()
    assert body == bytes.fromhex("ffffffff")
    assert API_BY_KEY[3].decode_request(body, 1).topics is None


def test_golden_flexible_request_compact_strings_and_tag_section() -> None:
    # ApiVersions Request (Version: 3) => client_software_name: COMPACT_STRING
    #   client_software_version: COMPACT_STRING TAG_BUFFER; request header v2.
    frame = _request_frame(API_BY_KEY[18], 3,
                           {"client_software_name": "strom", "client_software_version": "0.1"},
                           1, "c")
    assert frame == bytes.fromhex(
        "0012" "0003" "00000001"        # api_key 18, api_version 3, correlation_id 1
        "0001" "63"                     # client_id stays a classic int16 string in header v2
        "00"                            # header tagged fields: none
        "06" "7374726f6d"               # compact string: uvarint(len + 1) = 6, "strom"
        "04" "302e31"                   # "0.1"
        "00"                            # body tagged fields: none
    )


def test_golden_metadata_v9_request_compact_arrays() -> None:
    body = API_BY_KEY[3].encode_request(
        {"topics": [{"name": "ab"}], "allow_auto_topic_creation": False,
         "include_cluster_authorized_operations": True}, 9).getvalue()
    assert body == bytes.fromhex(
        "02"            # compact array: uvarint(1 + 1)
        "03" "6162" "00"  # name "ab", topic's tag buffer
        "00"            # allow_auto_topic_creation false
        "01"            # include_cluster_authorized_operations true (v8-10)
        "00"            # include_topic_authorized_operations false
        "00"            # tag buffer
    )
    # v11 drops include_cluster_authorized_operations; v10 adds the topic id first.
    body = API_BY_KEY[3].encode_request({"topics": None}, 11).getvalue()
    assert body == bytes.fromhex("00" "01" "00" "00")


def test_golden_tagged_fields_in_response() -> None:
    # ApiVersions v3 response with finalized_features_epoch (tag 1, int64) set.
    body = API_BY_KEY[18].encode_response(
        {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
         "throttle_time_ms": 0, "finalized_features_epoch": 5}, 3).getvalue()
    assert body == bytes.fromhex(
        "0000"                          # error_code
        "02" "0012" "0000" "0003" "00"  # api_keys: one entry + its tag buffer
        "00000000"                      # throttle_time_ms
        "01"                            # one tagged field
        "01" "08" "0000000000000005"    # tag 1, size 8, int64 5
    )
    decoded = API_BY_KEY[18].decode_response(body, 3)
    assert decoded.finalized_features_epoch == 5
    assert decoded.supported_features == [] and decoded.zk_migration_ready is False


def test_golden_fetch_response_tagged_struct() -> None:
    # A partition's current_leader (tag 1) is a single struct of two int32s.
    fetch = API_BY_KEY[1]
    part = {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": None,
            "current_leader": {"leader_id": 2, "leader_epoch": 3}}
    body = fetch.encode_response(
        {"responses": [{"topic": "t", "partitions": [part]}]}, 12).getvalue()
    partition_bytes = bytes.fromhex(
        "00000000" "0000" "0000000000000001"   # partition_index, error_code, high_watermark
        "ffffffffffffffff" "ffffffffffffffff"  # last_stable_offset, log_start_offset: -1
        "01"                                   # aborted_transactions: empty compact array
        "ffffffff"                             # preferred_read_replica -1
        "00"                                   # records: null compact bytes
        "01" "01" "09"                         # one tagged field: tag 1, size 9:
        "00000002" "00000003" "00"             # the struct, with its own tag buffer
    )
    assert body == bytes.fromhex(
        "00000000" "0000" "00000000"  # throttle_time_ms, error_code, session_id
        "02" "02" "74" "02"           # responses[1]: topic "t", partitions[1]
    ) + partition_bytes + bytes.fromhex("00" "00")  # topic tag buffer, top-level tag buffer
    decoded = fetch.decode_response(body, 12)
    p = decoded.responses[0].partitions[0]
    assert p.current_leader == {"leader_id": 2, "leader_epoch": 3}
    assert p.diverging_epoch == {"epoch": -1, "end_offset": -1}
    assert p.snapshot_id.end_offset == -1


def test_golden_produce_v3_null_transactional_id_and_records() -> None:
    body = API_BY_KEY[0].encode_request(
        {"acks": -1, "timeout_ms": 1000,
         "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x01\x02"}]}]},
        3).getvalue()
    assert body == bytes.fromhex(
        "ffff"                  # transactional_id: null (classic nullable string)
        "ffff" "000003e8"       # acks -1, timeout_ms 1000
        "00000001" "0001" "74"  # topic_data[1], name "t"
        "00000001" "00000000"   # partition_data[1], index 0
        "00000002" "0102"       # records: int32 length + bytes
    )
    decoded = API_BY_KEY[0].decode_request(body, 3)
    assert decoded.transactional_id is None
    assert bytes(decoded.topic_data[0].partition_data[0].records) == b"\x01\x02"


def test_golden_list_offsets_v0_fields_removed_in_v1() -> None:
    lo = API_BY_KEY[2]
    body = lo.encode_request(
        {"replica_id": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 1, "timestamp": -2, "max_num_offsets": 1}]}]}, 0).getvalue()
    assert body == bytes.fromhex(
        "ffffffff" "00000001" "0001" "74" "00000001"
        "00000001" "fffffffffffffffe" "00000001")
    body1 = lo.encode_request(
        {"replica_id": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 1, "timestamp": -2, "max_num_offsets": 1}]}]}, 1).getvalue()
    assert body1 == body[:-4]


def test_golden_nullable_primitive_array_and_common_structs() -> None:
    # AlterPartitionReassignments v0 (flexible): replicas null cancels; compact null is 0.
    body = API_BY_KEY[45].encode_request(
        {"timeout_ms": 1, "topics": [{"name": "t", "partitions": [{"partition_index": 2}]}]},
        0).getvalue()
    assert body == bytes.fromhex(
        "00000001" "02" "0274" "02" "00000002" "00" "00" "00" "00")
    assert API_BY_KEY[45].decode_request(body, 0).topics[0].partitions[0].replicas is None
    # AddPartitionsToTxn v3 and v4 share the per-topic struct (Kafka's commonStructs).
    apt = API_BY_KEY[24]
    topic = {"name": "t", "partitions": [0, 1]}
    v3 = apt.encode_request({"v3_and_below_transactional_id": "x", "v3_and_below_producer_id": 5,
                             "v3_and_below_producer_epoch": 1, "v3_and_below_topics": [topic]},
                            3).getvalue()
    assert v3 == bytes.fromhex(
        "0278" "0000000000000005" "0001" "02" "0274" "03" "00000000" "00000001" "00" "00")
    v4 = apt.decode_request(apt.encode_request({"transactions": [
        {"transactional_id": "x", "producer_id": 5, "producer_epoch": 1, "verify_only": True,
         "topics": [topic]}]}, 4).getvalue(), 4)
    assert v4.transactions[0].topics == [topic] and v4.v3_and_below_topics == []


# ---------------------------------------------------------------- single nested structs

_TOY = Api(
    key=9999, name="Toy", valid=(0, 2), flexible=1,
    request=[
        F("a", "int32"),
        F("leader", (F("leader_id", "int32", default=-1), F("leader_epoch", "int32", default=-1)),
          versions="1+", tag=0),
        F("maybe", (F("x", "int16"), F("s", "string")), nullable="2+"),
        F("plain", (F("y", "int8", default=4),)),
        F("gone", "string", versions="0", default=NULL, nullable="0+"),
    ],
    response=[],
)


def test_single_struct_defaults_and_encoding() -> None:
    d = _TOY.default_request(1)
    assert d.leader == {"leader_id": -1, "leader_epoch": -1}
    assert d.maybe == {"x": 0, "s": ""} and d.plain.y == 4 and d.gone is None
    # v0: no tagged section; structs inline.
    assert _TOY.encode_request({"a": 1}, 0).getvalue() == bytes.fromhex(
        "00000001" "0000" "0000" "04" "ffff")
    # v2: nullable struct has a presence byte; default tagged struct is not sent.
    assert _TOY.encode_request({"a": 1, "maybe": None}, 2).getvalue() == bytes.fromhex(
        "00000001" "ff" "0400" "00")
    assert _TOY.encode_request({"a": 1, "maybe": {"x": 2, "s": "z"}}, 2).getvalue() == \
        bytes.fromhex("00000001" "01" "0002" "027a" "00" "0400" "00")
    decoded = _TOY.decode_request(bytes.fromhex("00000001" "ff" "0400" "00"), 2)
    assert decoded.maybe is None and decoded.leader.leader_id == -1


def test_tagged_field_size_overrunning_buffer_is_decode_error() -> None:
    # Tag 0 claims 200 bytes but only 8 follow.
    data = bytes.fromhex("00000001" "0000" "01" "00" "0400" "01" "00" "c801") + b"\0" * 8
    with pytest.raises(DecodeError):
        _TOY.decode_request(data, 1)
