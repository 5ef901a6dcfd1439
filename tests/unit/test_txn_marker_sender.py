"""The transaction coordinator's markers (broker/txn/marker_sender.py): one WriteTxnMarkers
per leader, retried until each leader has written its marker; a marker for a topic deleted
meanwhile is dropped instead of retried forever; the sender stops when fenced or when this
broker no longer coordinates the transaction. The leaders are fakes that record each request
and answer what the test chose."""
from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from broker.metadata_cache import MetadataCache, PartitionInfo
from broker.txn import marker_sender
from broker.txn.marker_sender import TxnMarkerSender
from clients.aio.errors import KafkaConnectionError
from clients.protocol.errors import Code
from zkcoord.store import BrokerInfo

PID, EPOCH, COORDINATOR_EPOCH = 7, 3, 5


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch):
    monkeypatch.setattr(marker_sender, "RETRY_BACKOFF_S", 0.001)


class FakeLeaders:
    """Stands where the ConnectionPool is. `answer(leader, tp)` gives each partition's error
    code, or an exception to lose the whole request with; `requests` holds (leader, the
    partitions asked, the marker sent) in order."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[tuple[int, list, dict]] = []

    def set_address(self, node, host, port):
        pass

    async def get(self, node):
        return SimpleNamespace(request=lambda api, body, version: self._request(node, api, body))

    async def _request(self, leader, api, body):
        assert api == "WriteTxnMarkers"
        [marker] = body["markers"]
        tps = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        self.requests.append((leader, tps, marker))
        codes = {tp: self.answer(leader, tp) for tp in tps}
        for code in codes.values():
            if isinstance(code, Exception):
                raise code
        topics = {}
        for (t, p), code in codes.items():
            topics.setdefault(t, []).append(SimpleNamespace(partition_index=p, error_code=code))
        return SimpleNamespace(markers=[SimpleNamespace(topics=[
            SimpleNamespace(name=t, partitions=ps) for t, ps in topics.items()])])

    def asked(self) -> list[tuple[int, list]]:
        return [(leader, sorted(tps)) for leader, tps, _ in self.requests]


def _cluster(leaders: dict) -> MetadataCache:
    """Brokers 1 and 2; `leaders` maps (topic, partition) to its leader."""
    metadata = MetadataCache()
    metadata.brokers = {b: BrokerInfo(b, f"broker{b}", 9092) for b in (1, 2)}
    for (topic, index), leader in leaders.items():
        metadata.set_partition(topic, index, PartitionInfo(leader, 1, [1, 2], [1, 2]))
    return metadata


def _send(metadata, leaders, partitions, still_coordinator=lambda: True) -> bool:
    sender = TxnMarkerSender(0, metadata, pool=leaders)   
    return asyncio.run(asyncio.wait_for(sender.send(PID, EPOCH, True, COORDINATOR_EPOCH, partitions,
                                                    still_coordinator), 2))


def test_each_leader_gets_one_request_with_all_its_markers():
    metadata = _cluster({("a", 0): 1, ("a", 1): 2, ("b", 0): 1})
    leaders = FakeLeaders(lambda leader, tp: 0)
    assert _send(metadata, leaders, [("a", 0), ("a", 1), ("b", 0)]) is True
    assert sorted(leaders.asked()) == [(1, [("a", 0), ("b", 0)]), (2, [("a", 1)])]
    _, _, marker = leaders.requests[0]
    assert (marker["producer_id"], marker["producer_epoch"], marker["transaction_result"],
            marker["coordinator_epoch"]) == (PID, EPOCH, True, COORDINATOR_EPOCH)


def test_failed_markers_are_retried_at_the_leader_of_the_moment():
    metadata = _cluster({("a", 0): 1, ("a", 1): 2})
    tries = {}

    def answer(leader, tp):
        tries[leader] = tries.get(leader, 0) + 1
        if leader == 1:
            # The controller moved a-0 to broker 2 (UpdateMetadata arrives meanwhile).
            metadata.set_partition("a", 0, PartitionInfo(2, 2, [1, 2], [2]))
            return Code.NOT_LEADER_OR_FOLLOWER
        if tries[2] == 1:
            return KafkaConnectionError("broker 2 went away")
        return 0

    leaders = FakeLeaders(answer)
    assert _send(metadata, leaders, [("a", 0), ("a", 1)]) is True
    asked = leaders.asked()
    assert sorted(asked[:2]) == [(1, [("a", 0)]), (2, [("a", 1)])]
    assert asked[2:] == [(2, [("a", 0), ("a", 1)])]


def test_markers_of_a_deleted_topic_are_dropped_and_the_others_still_sent(caplog):
    metadata = _cluster({("gone", 0): 1, ("gone", 1): 1, ("kept", 0): 2})
    tries = {"kept": 0}

    def answer(leader, tp):
        if tp[0] == "gone":
            metadata.remove_topic("gone")       # deleted while its markers were on the way
            return Code.UNKNOWN_TOPIC_OR_PARTITION
        tries["kept"] += 1
        return Code.NOT_LEADER_OR_FOLLOWER if tries["kept"] < 3 else 0

    leaders = FakeLeaders(answer)
    with caplog.at_level(logging.INFO, logger="broker.txn.marker_sender"):
        assert _send(metadata, leaders, [("gone", 0), ("gone", 1), ("kept", 0)]) is True
    assert [tps for _, tps in leaders.asked()].count([("gone", 0), ("gone", 1)]) == 1
    assert [tps for _, tps in leaders.asked()].count([("kept", 0)]) == 3
    assert "marker for gone-0 dropped: the topic is gone" in caplog.text
    assert "marker for gone-1 dropped: the topic is gone" in caplog.text


def test_a_partition_without_metadata_or_leader_waits_while_its_topic_exists():
    metadata = _cluster({("a", 0): -1})         # a-0 is electing a leader; a-1 not known yet
    rounds = []

    def still_coordinator():
        rounds.append(None)
        if len(rounds) == 3:
            for index in (0, 1):
                metadata.set_partition("a", index, PartitionInfo(1, 2, [1, 2], [1]))
        return True

    leaders = FakeLeaders(lambda leader, tp: 0)
    assert _send(metadata, leaders, [("a", 0), ("a", 1)], still_coordinator) is True
    assert leaders.asked() == [(1, [("a", 0), ("a", 1)])]


@pytest.mark.parametrize("code", [Code.TRANSACTION_COORDINATOR_FENCED, Code.INVALID_PRODUCER_EPOCH])
def test_a_newer_coordinator_or_producer_epoch_stops_the_sender(code):
    metadata = _cluster({("a", 0): 1})
    leaders = FakeLeaders(lambda leader, tp: code)
    assert _send(metadata, leaders, [("a", 0)]) is False
    assert leaders.asked() == [(1, [("a", 0)])]


def test_the_sender_stops_once_this_broker_no_longer_coordinates_the_transaction():
    metadata = _cluster({("a", 0): 1})
    leaders = FakeLeaders(lambda leader, tp: Code.NOT_LEADER_OR_FOLLOWER)
    rounds = []

    def still_coordinator():
        rounds.append(None)
        return len(rounds) <= 2

    assert _send(metadata, leaders, [("a", 0)], still_coordinator) is False
    assert leaders.asked() == [(1, [("a", 0)])] * 2
