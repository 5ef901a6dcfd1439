"""Golden request bytes captured from real clients, decoded by strom's declarations.

The fixtures in golden/ are request frames (without the 4-byte size) that confluent-kafka,
kafka-python, aiokafka and kcat sent through a recording proxy in front of a strom broker;
tests/tools/capture_golden.py made them and golden/manifest.json describes them. Every
fixture must decode with no byte left over and re-encode to the identical bytes, and its
fields must hold what the capture script told the client to send (`sent_records`, topics,
partitions, codecs) and what each client is known to send on its own (client ids, acks,
isolation levels). A declaration that mis-reads a field fails here.

No processes, no sockets.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clients.protocol.compression import CODEC_NAMES
from clients.protocol.headers import (RequestHeader, decode_request_header,
                                      encode_request_header, peek_api)
from clients.protocol.messages import API_BY_KEY
from clients.protocol.records import CREATE_TIME, iter_batches
from clients.protocol.schema import Api, Struct
from clients.protocol.types import ZERO_UUID, Reader, Writer
from tests.tools.capture_golden import (CONFLUENT_GROUP, OFFSETS_FOR_TIME, PRODUCE_PARTITION,
                                        TOPIC_CONFIG, TOPICS, sent_records)

GOLDEN = Path(__file__).parent / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
FIXTURES: list[dict[str, Any]] = MANIFEST["fixtures"]
TOPIC_IDS = {name: uuid.UUID(t["topic_id"]) for name, t in MANIFEST["topics"].items()}


def _ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["file"] for e in entries]


def fixtures_of(api_name: str) -> list[dict[str, Any]]:
    return [e for e in FIXTURES if e["api"] == api_name]


@dataclass
class Decoded:
    entry: dict[str, Any]
    frame: bytes
    api: Api
    version: int        # the version on the wire
    body_version: int   # the version the body was decoded with
    header: RequestHeader
    body: Struct
    left: int           # bytes not consumed by header + body

    @property
    def client(self) -> str:
        return self.entry["client"]

    @property
    def topic(self) -> str:
        return TOPICS[self.client]


def decode(entry: dict[str, Any]) -> Decoded:
    frame = (GOLDEN / entry["file"]).read_bytes()
    key, version, _ = peek_api(frame)
    api = API_BY_KEY[key]
    body_version = version
    if not api.supports(version):
        # Only ApiVersions may arrive above our highest version: a client opens with its own
        # highest and retries lower when told UNSUPPORTED_VERSION. As Kafka's broker does
        # (KIP-511), the body is read at our highest version: v4 adds no request field.
        assert api.name == "ApiVersions", f"{api.name} v{version} is not declared"
        body_version = api.max_version
    r = Reader(frame)
    header = decode_request_header(r, api.request_header_version(version))
    body = api.decode_request(r, body_version)
    return Decoded(entry, frame, api, version, body_version, header, body, r.remaining())


def reencode(d: Decoded) -> bytes:
    w = Writer()
    encode_request_header(w, d.header, d.api.request_header_version(d.version))
    d.api.encode_request(d.body, d.body_version, w)
    return w.getvalue()


# ------------------------------------------------------------------ the fixture set itself

def test_manifest_matches_the_files():
    on_disk = {str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.bin")}
    assert on_disk == {e["file"] for e in FIXTURES}
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert total < 2 * 2**20
    for e in FIXTURES:
        key, version, _ = peek_api((GOLDEN / e["file"]).read_bytes())
        assert (key, version) == (e["api_key"], e["version"])
        assert API_BY_KEY[key].name == e["api"]
        assert e["file"].endswith(f"_{e['api']}_v{version}.bin")


# Each client's session must have left these fixtures (api, variant); a re-capture that
# loses one (a session that failed quietly) fails here.
EXPECTED_COVERAGE = {
    "confluent_kafka": {("ApiVersions", None), ("Metadata", "topics=named"),
                        ("CreateTopics", None), ("InitProducerId", None),
                        ("Produce", "codec=1"), ("Produce", "codec=4"), ("Fetch", None)},
    "kafka_python": {("ApiVersions", None), ("Metadata", "topics=named"), ("CreateTopics", None),
                     ("InitProducerId", None), ("Produce", "codec=3"),
                     ("ListOffsets", "timestamp=earliest"), ("ListOffsets", "timestamp=time"),
                     ("Fetch", None)},
    "aiokafka": {("ApiVersions", None), ("Metadata", "topics=named"), ("Produce", "codec=2"),
                 ("ListOffsets", "timestamp=earliest"), ("Fetch", None)},
    "kcat": {("ApiVersions", None), ("Metadata", "topics=named"), ("Produce", "codec=0"),
             ("ListOffsets", "timestamp=earliest"), ("Fetch", None)},
}


@pytest.mark.parametrize("client", sorted(EXPECTED_COVERAGE))
def test_every_session_left_its_fixtures(client):
    have = {(e["api"], e.get("variant")) for e in FIXTURES if e["client"] == client}
    assert EXPECTED_COVERAGE[client] <= have


# ------------------------------------------------------------------ (a) and (b): every fixture

@pytest.mark.parametrize("entry", FIXTURES, ids=_ids(FIXTURES))
def test_decodes_exactly_and_reencodes_identically(entry):
    d = decode(entry)
    assert d.left == 0, f"{d.left} bytes left after the body"
    assert (d.header.api_key, d.header.api_version) == (entry["api_key"], entry["version"])
    assert d.header.correlation_id == peek_api(d.frame)[2]
    assert reencode(d) == d.frame


def _expected_client_id(entry: dict[str, Any]) -> str:
    client, lib, component = entry["client"], entry["library_version"], entry["component"]
    if client in ("confluent_kafka", "kcat"):
        return "rdkafka"                                   # librdkafka's client.id default
    if client == "kafka_python":
        # KafkaProducer names itself per instance; admin and consumer use the library's.
        return "kafka-python-producer-1" if component == "producer" else f"kafka-python-{lib}"
    assert client == "aiokafka"
    return "aiokafka-producer-1" if component == "producer" else f"aiokafka-{lib}"


@pytest.mark.parametrize("entry", FIXTURES, ids=_ids(FIXTURES))
def test_client_id(entry):
    assert decode(entry).header.client_id == _expected_client_id(entry)


# ------------------------------------------------------------------ (c): per API

def _librdkafka_version(library_version: str) -> str:
    # "2.16.1 (librdkafka 2.16.0)" -> "2.16.0"
    return library_version.split("librdkafka ")[1].rstrip(")")


@pytest.mark.parametrize("entry", fixtures_of("ApiVersions"), ids=_ids(fixtures_of("ApiVersions")))
def test_api_versions(entry):
    d = decode(entry)
    lib = entry["library_version"]
    if d.version < 3:
        assert d.body == {"client_software_name": "", "client_software_version": ""}
        assert len(d.frame) == 10 + len(d.header.client_id or "")   # header only
        return
    if d.client == "confluent_kafka":
        expected = ("confluent-kafka-python",
                    f"{lib.split()[0]}-rdkafka-{_librdkafka_version(lib)}")
    elif d.client == "kcat":
        expected = ("librdkafka", _librdkafka_version(lib))   # kcat does not name itself
    else:
        assert d.client == "kafka_python"
        expected = ("kafka-python", lib)
    assert (d.body.client_software_name, d.body.client_software_version) == expected


@pytest.mark.parametrize("entry", fixtures_of("Metadata"), ids=_ids(fixtures_of("Metadata")))
def test_metadata(entry):
    d = decode(entry)
    if entry["variant"] == "topics=none":
        assert d.body.topics == []
    else:
        assert entry["variant"] == "topics=named"
        assert [t.name for t in d.body.topics] == [d.topic]
        assert all(t.topic_id == ZERO_UUID for t in d.body.topics)
    # The admin clients only ask for brokers and must not create topics by asking.
    auto_create = not (d.client == "confluent_kafka" and entry["component"] == "admin")
    if d.version >= 4:
        assert d.body.allow_auto_topic_creation is auto_create
    if d.version >= 8:
        assert d.body.include_topic_authorized_operations is False
    if 8 <= d.version <= 10:
        assert d.body.include_cluster_authorized_operations is False


@pytest.mark.parametrize("entry", fixtures_of("CreateTopics"),
                         ids=_ids(fixtures_of("CreateTopics")))
def test_create_topics(entry):
    d = decode(entry)
    [t] = d.body.topics
    assert t.name == d.topic
    assert t.num_partitions == 3
    assert t.replication_factor == 1
    assert t.assignments == []
    assert {c.name: c.value for c in t.configs} == TOPIC_CONFIG
    assert d.body.timeout_ms == {"confluent_kafka": 60000, "kafka_python": 30000}[d.client]
    assert d.body.validate_only is False


@pytest.mark.parametrize("entry", fixtures_of("InitProducerId"),
                         ids=_ids(fixtures_of("InitProducerId")))
def test_init_producer_id(entry):
    d = decode(entry)
    assert entry["component"] == "producer"
    assert d.body.transactional_id is None          # idempotent, not transactional
    # librdkafka sends -1 for an idempotent producer, kafka-python 0.
    assert d.body.transaction_timeout_ms == {"confluent_kafka": -1, "kafka_python": 0}[d.client]
    if d.version >= 3:
        assert (d.body.producer_id, d.body.producer_epoch) == (-1, -1)


# What each client's producer is configured (or defaults) to send, and how it fills the
# batch header fields the broker overwrites or that only idempotence sets.
PRODUCE_SETTINGS = {
    #                  acks  timeout_ms  idempotent  partition_leader_epoch  base_sequence
    "confluent_kafka": (-1, 30000, True, 0, 0),
    "kafka_python": (-1, 30000, True, 0, 0),
    "aiokafka": (1, 40000, False, -1, 0),   # aiokafka writes sequence 0 with no producer id
    "kcat": (-1, 30000, False, 0, -1),
}


@pytest.mark.parametrize("entry", fixtures_of("Produce"), ids=_ids(fixtures_of("Produce")))
def test_produce(entry):
    d = decode(entry)
    codec = CODEC_NAMES[int(entry["variant"].removeprefix("codec="))]
    acks, timeout_ms, idempotent, leader_epoch, base_sequence = PRODUCE_SETTINGS[d.client]
    assert d.body.transactional_id is None
    assert d.body.acks == acks
    assert d.body.timeout_ms == timeout_ms
    [t] = d.body.topic_data
    assert t.name == d.topic
    [p] = t.partition_data
    assert p.index == PRODUCE_PARTITION[(d.client, codec)]

    batches = list(iter_batches(p.records))
    assert sum(b.size for b in batches) == len(p.records)   # no partial batch either
    [batch] = batches
    assert batch.header.magic == 2
    assert batch.compression == CODEC_NAMES.index(codec)
    assert batch.is_transactional is False and batch.is_control is False
    assert batch.timestamp_type == CREATE_TIME
    assert batch.partition_leader_epoch == leader_epoch
    assert batch.base_sequence == base_sequence
    if idempotent:
        assert batch.producer_id >= 0
        assert batch.producer_epoch == 0
    else:
        assert (batch.producer_id, batch.producer_epoch) == (-1, -1)

    kcat = d.client == "kcat"   # kcat cannot set timestamps: librdkafka stamps them
    expected = sent_records(d.client, codec, with_timestamps=not kcat)
    assert batch.records_count == len(expected)
    assert [r.offset for r in batch.records] == list(range(len(expected)))
    got = [(r.key, r.value, [(k, bytes(v)) for k, v in r.headers],
            None if kcat else r.timestamp) for r in batch.records]
    assert got == expected
    if kcat:
        stamps = [r.timestamp for r in batch.records]
        assert 1_700_000_000_000 < stamps[0] <= stamps[-1] < 4_000_000_000_000
        assert batch.max_timestamp == max(stamps)
    else:
        assert batch.base_timestamp == expected[0][3]
        assert batch.max_timestamp == expected[-1][3]


# What each client's consumer fetches: partitions from offset 0, its isolation level and
# its fetch-session epoch (-1: no session; 0: a full fetch opening a session).
FETCH_SETTINGS = {
    #                  partitions  isolation  session_epoch
    "confluent_kafka": ([0, 1, 2], 1, -1),  # librdkafka: read_committed by default
    "kafka_python": ([PRODUCE_PARTITION[("kafka_python", "lz4")]], 0, 0),
    "aiokafka": ([PRODUCE_PARTITION[("aiokafka", "snappy")]], 0, -1),
    "kcat": ([PRODUCE_PARTITION[("kcat", "none")]], 1, -1),
}


@pytest.mark.parametrize("entry", fixtures_of("Fetch"), ids=_ids(fixtures_of("Fetch")))
def test_fetch(entry):
    d = decode(entry)
    partitions, isolation, session_epoch = FETCH_SETTINGS[d.client]
    b = d.body
    if d.version <= 14:
        assert b.replica_id == -1
    assert b.max_wait_ms == 500
    assert b.min_bytes == 1
    assert b.max_bytes == 50 * 2**20
    assert b.isolation_level == isolation
    assert (b.session_id, b.session_epoch) == (0, session_epoch)
    assert b.forgotten_topics_data == []
    [t] = b.topics
    if d.version >= 13:
        assert t.topic_id == TOPIC_IDS[d.topic]
    else:
        assert t.topic == d.topic
    assert [p.partition for p in t.partitions] == partitions
    for p in t.partitions:
        assert p.fetch_offset == 0
        assert p.partition_max_bytes == 2**20
        assert p.log_start_offset == -1
        if d.version >= 12:
            assert p.last_fetched_epoch == -1


@pytest.mark.parametrize("entry", fixtures_of("ListOffsets"),
                         ids=_ids(fixtures_of("ListOffsets")))
def test_list_offsets(entry):
    d = decode(entry)
    assert d.body.replica_id == -1
    if d.version >= 2:
        assert d.body.isolation_level == (1 if d.client == "kcat" else 0)
    [t] = d.body.topics
    assert t.name == d.topic
    [p] = t.partitions
    codec = {"kafka_python": "lz4", "aiokafka": "snappy", "kcat": "none"}[d.client]
    assert p.partition_index == PRODUCE_PARTITION[(d.client, codec)]
    assert p.timestamp == {"timestamp=earliest": -2,
                           "timestamp=time": OFFSETS_FOR_TIME}[entry["variant"]]
    if d.version >= 4:
        assert p.current_leader_epoch == -1


# librdkafka's consumer may look up its group's coordinator even when it only assigns.
@pytest.mark.parametrize("entry", fixtures_of("FindCoordinator"),
                         ids=_ids(fixtures_of("FindCoordinator")))
def test_find_coordinator(entry):
    d = decode(entry)
    assert (d.client, entry["component"]) == ("confluent_kafka", "consumer")
    if d.version >= 4:
        assert d.body.coordinator_keys == [CONFLUENT_GROUP]
    else:
        assert d.body.key == CONFLUENT_GROUP
    if d.version >= 1:
        assert d.body.key_type == 0   # group
