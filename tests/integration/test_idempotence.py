"""InitProducerId and per-partition sequence checks over the wire, against a real broker
process: duplicates of the last five batches are acknowledged at their original offsets
without appending, gaps get OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch gets
INVALID_PRODUCER_EPOCH, and producer state survives a restart."""
from __future__ import annotations

import pytest

from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

TOPIC = "idem"


def produce(c: WireClient, batch: bytes) -> tuple[int, int]:
    r = c.request("Produce", 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                 "topic_data": [{"name": TOPIC, "partition_data": [
                                     {"index": 0, "records": batch}]}]})
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    return build_batch([Record(b"k", b"v%d" % (seq + i)) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def init_pid(c: WireClient, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
    r = c.request("InitProducerId", 4, {"transactional_id": None, "transaction_timeout_ms": -1,
                                        "producer_id": pid, "producer_epoch": epoch})
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def latest(c: WireClient) -> int:
    r = c.request("ListOffsets", 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset


def test_sequence_checks_and_restart(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        c.request("CreateTopics", 7, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                                      "timeout_ms": 5000})
        pid, epoch = init_pid(c)
        other_pid, _ = init_pid(c)
        assert other_pid != pid
        offsets = []
        for seq in range(0, 12, 2):                       # six batches of two records
            err, base = produce(c, batch(pid, epoch, seq))
            assert err == 0
            offsets.append(base)
        assert offsets == [0, 2, 4, 6, 8, 10]
        end = latest(c)
        # Retries of each of the last five batches: acknowledged at the original offset.
        for i, seq in enumerate(range(2, 12, 2)):
            assert produce(c, batch(pid, epoch, seq)) == (0, offsets[i + 1])
        assert latest(c) == end, "a duplicate was appended"
        # A gap in the sequence.
        err, _ = produce(c, batch(pid, epoch, 20))
        assert err == Code.OUT_OF_ORDER_SEQUENCE_NUMBER
        # Epoch bump (KIP-360) fences the old epoch.
        same_pid, new_epoch = init_pid(c, pid, epoch)
        assert (same_pid, new_epoch) == (pid, epoch + 1)
        assert produce(c, batch(pid, new_epoch, 0))[0] == 0
        assert produce(c, batch(pid, epoch, 12))[0] == Code.INVALID_PRODUCER_EPOCH
        end = latest(c)

    broker.stop()
    broker.start()
    with WireClient("127.0.0.1", broker.port) as c:
        # Producer state survived: the last batch is still recognised as a duplicate...
        err, base = produce(c, batch(pid, new_epoch, 0))
        assert (err, base) == (0, end - 2)
        assert latest(c) == end
        # ...and the sequence continues where it was.
        assert produce(c, batch(pid, new_epoch, 2)) == (0, end)
        assert produce(c, batch(pid, new_epoch, 9))[0] == Code.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_state_survives_kill9(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        c.request("CreateTopics", 7, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1}],
                                      "timeout_ms": 5000})
        pid, epoch = init_pid(c)
        for seq in range(0, 10, 2):
            assert produce(c, batch(pid, epoch, seq))[0] == 0
    broker.kill9()
    broker.start()
    with WireClient("127.0.0.1", broker.port) as c:
        assert produce(c, batch(pid, epoch, 8)) == (0, 8)     # duplicate after an unclean stop
        assert latest(c) == 10
        # A new producer id is never one handed out before the crash.
        new_pid, _ = init_pid(c)
        assert new_pid != pid
