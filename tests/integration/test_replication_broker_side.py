"""Broker-side replication between two real broker processes, with the test acting as the
controller (LeaderAndIsr / UpdateMetadata sent by hand): a follower fetches from its leader
and ends byte-identical, acks=all waits for the in-sync follower, a stale controller epoch
is refused, and a follower with a divergent tail truncates it (KIP-101)."""
from __future__ import annotations

import time
import uuid

import pytest

from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch, records_from_fetch
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

TOPIC = "rep"
TOPIC_ID = uuid.UUID("11111111-2222-3333-4444-555555555555")


def wire(b) -> WireClient:
    return WireClient("127.0.0.1", b.port)


def control(brokers, leader: int, epoch: int, isr: list[int], controller_epoch: int, zk_version: int = 0,
            only=None) -> None:
    """What the controller would send: LeaderAndIsr to the replicas, UpdateMetadata to all
    (or only to the brokers in `only`: the others are cut off and learn nothing)."""
    live = [{"id": b.broker_id, "endpoints": [{"port": b.port, "host": "127.0.0.1", "listener": "PLAINTEXT",
                                              "security_protocol": 0}], "rack": None} for b in brokers]
    state = {"partition_index": 0, "controller_epoch": controller_epoch, "leader": leader,
             "leader_epoch": epoch, "isr": isr, "zk_version": zk_version,
             "replicas": [b.broker_id for b in brokers], "offline_replicas": []}
    for b in (only or brokers):
        with wire(b) as c:
            r = c.request("UpdateMetadata", 7, {"controller_id": 99, "controller_epoch": controller_epoch,
                                                 "broker_epoch": -1, "live_brokers": live,
                                                 "topic_states": [{"topic_name": TOPIC, "topic_id": TOPIC_ID,
                                                                   "partition_states": [state]}]})
            assert r.error_code == 0
            r = c.request("LeaderAndIsr", 6, {
                "controller_id": 99, "controller_epoch": controller_epoch, "broker_epoch": -1, "type": 0,
                "topic_states": [{"topic_name": TOPIC, "topic_id": TOPIC_ID, "partition_states": [state]}],
                "live_leaders": [{"broker_id": leader, "host_name": "127.0.0.1",
                                  "port": next(x.port for x in brokers if x.broker_id == leader)}]})
            assert r.error_code == 0, r
            assert r.topics[0].partition_errors[0].error_code == 0, r


def produce(b, values: list[bytes], acks: int = -1, timeout_ms: int = 10_000) -> tuple[int, int]:
    with wire(b) as c:
        r = c.request("Produce", 9, {"acks": acks, "timeout_ms": timeout_ms, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": build_batch([Record(None, v) for v in values])}]}]})
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def log_bytes(b) -> bytes:
    return b"".join(f.read_bytes() for f in sorted((b.log_dir / f"{TOPIC}-0").glob("*.log")))


def wait_until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def consume(b) -> list[bytes]:
    with wire(b) as c:
        r = c.request("Fetch", 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 10_000_000,
                                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                    "topics": [{"topic": TOPIC, "partitions": [
                                        {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                         "log_start_offset": -1, "partition_max_bytes": 10_000_000}]}],
                                    "forgotten_topics_data": [], "rack_id": ""})
    part = r.responses[0].partitions[0]
    assert part.error_code == 0, part
    return [rec.value for rec in records_from_fetch(bytes(part.records or b""))]


@pytest.fixture
def pair(broker_factory):
    a = broker_factory({"broker.id": "0", "replica.fetch.wait.max.ms": "100"}, name="a")
    b = broker_factory({"broker.id": "1", "replica.fetch.wait.max.ms": "100"}, name="b")
    a.broker_id, b.broker_id = 0, 1
    return a, b


def test_follower_replicates_and_acks_all_waits_for_it(pair):
    a, b = pair
    control([a, b], leader=0, epoch=1, isr=[0, 1], controller_epoch=1)
    assert produce(a, [b"r%d" % i for i in range(100)]) == (0, 0)
    assert produce(a, [b"s%d" % i for i in range(100)]) == (0, 100)
    wait_until(lambda: log_bytes(a) == log_bytes(b))
    assert len(consume(a)) == 200                   # the high watermark covers both batches

    # A follower that stops fetching holds acks=all back (no ISR shrink without a
    # controller to record it); acks=1 is unaffected.
    b.proc.send_signal(__import__("signal").SIGSTOP)
    try:
        assert produce(a, [b"t"], acks=-1, timeout_ms=1500)[0] == Code.REQUEST_TIMED_OUT
        assert produce(a, [b"u"], acks=1) == (0, 201)
        assert len(consume(a)) == 200               # consumers never see past the high watermark
    finally:
        b.proc.send_signal(__import__("signal").SIGCONT)
    wait_until(lambda: log_bytes(a) == log_bytes(b))
    wait_until(lambda: len(consume(a)) == 202)


def test_stale_controller_epoch_is_refused(pair):
    a, b = pair
    control([a, b], leader=0, epoch=1, isr=[0, 1], controller_epoch=5)
    with wire(b) as c:
        r = c.request("LeaderAndIsr", 6, {"controller_id": 98, "controller_epoch": 4, "broker_epoch": -1,
                                          "type": 0, "topic_states": [], "live_leaders": []})
        assert r.error_code == Code.STALE_CONTROLLER_EPOCH
        r = c.request("UpdateMetadata", 7, {"controller_id": 98, "controller_epoch": 4, "broker_epoch": -1,
                                             "live_brokers": [], "topic_states": []})
        assert r.error_code == Code.STALE_CONTROLLER_EPOCH


def test_divergent_follower_truncates_to_the_leader(pair):
    a, b = pair
    control([a, b], leader=0, epoch=1, isr=[0, 1], controller_epoch=1)
    assert produce(a, [b"c%d" % i for i in range(10)])[0] == 0
    wait_until(lambda: log_bytes(a) == log_bytes(b))
    # a is cut off; b leads alone for a moment and takes writes a never gets (an
    # uncommitted tail: acks=1, only b has them).
    control([a, b], leader=1, epoch=2, isr=[1], controller_epoch=2, only=[b])
    assert produce(b, [b"lost%d" % i for i in range(5)], acks=1) == (0, 10)
    # a becomes leader again at a newer epoch and takes different writes at the same offsets.
    control([a, b], leader=0, epoch=3, isr=[0, 1], controller_epoch=3)
    assert produce(a, [b"kept%d" % i for i in range(3)], acks=1) == (0, 10)
    wait_until(lambda: log_bytes(a) == log_bytes(b))
    assert consume(a)[-3:] == [b"kept0", b"kept1", b"kept2"]
