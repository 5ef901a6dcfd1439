"""Focused wire-level checks for client compatibility problems found by the client round-trip
tests, each sending the exact request a real client sends, against a real broker process."""
from __future__ import annotations

import pytest

from clients.protocol.errors import Code
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

# librdkafka < 2.11.1 (Debian's kcat: 2.0.2) enables a feature only if, for every API the
# feature depends on, the broker's advertised [min, max] contains the whole [lo, hi] below
# (rdkafka_feature.c, rd_kafka_feature_map). A missing feature fails nothing: the client
# silently drops timestamps/headers, idempotence or compression. Features that depend on
# APIs strom does not implement yet (balanced consumer groups, SASL) are left out.
LIBRDKAFKA_2_0_FEATURES = {
    "MsgVer1": [("Produce", 0, 2, 2), ("Fetch", 1, 2, 2)],
    "MsgVer2": [("Produce", 0, 3, 3), ("Fetch", 1, 4, 4)],
    "ApiVersion": [("ApiVersions", 18, 0, 0)],
    "BrokerGroupCoordinator": [("FindCoordinator", 10, 0, 0)],
    "ThrottleTime": [("Produce", 0, 1, 2), ("Fetch", 1, 1, 2)],
    # LZ4 is keyed to FindCoordinator v0 (it shipped with Kafka 0.8.2, as GroupCoordinator
    # did): without it `-z lz4` sends uncompressed batches ("Broker does not support
    # compression type lz4: not compressing batch").
    "LZ4": [("FindCoordinator", 10, 0, 0)],
    "OffsetTime": [("ListOffsets", 2, 1, 1)],
    "IdempotentProducer": [("InitProducerId", 22, 0, 0)],
    "ZSTD": [("Produce", 0, 7, 7), ("Fetch", 1, 10, 10)],
}


def _client(broker) -> WireClient:
    host, port = broker.bootstrap.rsplit(":", 1)
    return WireClient(host, int(port), client_id="rdkafka")


@pytest.mark.parametrize("feature", sorted(LIBRDKAFKA_2_0_FEATURES))
def test_librdkafka_2_0_features_enabled(broker, feature):
    with _client(broker) as c:
        # librdkafka 2.0.2 opens every connection with ApiVersions v3.
        resp = c.request("ApiVersions", 3, {"client_software_name": "librdkafka",
                                            "client_software_version": "2.0.2"})
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for name, key, lo, hi in LIBRDKAFKA_2_0_FEATURES[feature]:
        assert key in ranges, f"{feature} needs {name} {lo}..{hi}: {name} not advertised"
        bmin, bmax = ranges[key]
        assert bmin <= lo and hi <= bmax, f"{feature} needs {name} {lo}..{hi}, advertised {bmin}..{bmax}"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_answers_single_key_versions(broker, version):
    """Every advertised version decodes; a group's and a transactional id's coordinator is
    this broker (it leads every __consumer_offsets and __transaction_state partition)."""
    with _client(broker) as c:
        body = {"key": "some-group"}
        if version >= 1:
            body["key_type"] = 0
        resp = c.request("FindCoordinator", version, body)
        assert resp.error_code == 0
        assert (resp.node_id, resp.host, resp.port) == (0, "127.0.0.1", broker.port)
        if version >= 1:
            resp = c.request("FindCoordinator", version, {"key": "txn-id", "key_type": 1})
            assert (resp.error_code, resp.node_id, resp.port) == (0, 0, broker.port)
            resp = c.request("FindCoordinator", version, {"key": "x", "key_type": 7})
            assert resp.error_code == Code.INVALID_REQUEST
        # The connection is still usable afterwards.
        assert c.request("ApiVersions", 0, {}).error_code == 0


def test_find_coordinator_v4_answers_per_key(broker):
    with _client(broker) as c:
        resp = c.request("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
        assert [(k.key, k.error_code, k.node_id, k.port) for k in resp.coordinators] == [
            ("g1", 0, 0, broker.port), ("g2", 0, 0, broker.port)]
        resp = c.request("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": ["t1"]})
        assert [(k.key, k.error_code, k.port) for k in resp.coordinators] == [("t1", 0, broker.port)]
        resp = c.request("FindCoordinator", 4, {"key_type": 7, "coordinator_keys": ["g1"]})
        assert [(k.key, k.error_code) for k in resp.coordinators] == [("g1", Code.INVALID_REQUEST)]
