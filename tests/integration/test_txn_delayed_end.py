"""KIP-890 part 2 against a delayed EndTxn: an EndTxn held back in the network and delivered
after the producer went on to its next transaction must not end that transaction.

Played over the wire (3 brokers, replication factor 3): transaction 1 writes to X; its
EndTxn(abort) is held back, the client's retry of it succeeds; transaction 2 writes to X and
Y; then the held EndTxn arrives; then transaction 2 commits. With transaction version 2
(EndTxn v5, Produce v12: the epoch is bumped at every end) the held request carries
transaction 1's epoch and is fenced. With version 0 (EndTxn v3, as every client before
Kafka 4) both transactions share an epoch: the held abort aborts transaction 2, whose commit
then fails and whose records never become visible. The test runs both ways; the second is
expected to fail, which shows the defence is what makes the first pass."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from clients.protocol.errors import Code
from clients.protocol.headers import decode_response_header
from clients.protocol.messages import api
from clients.protocol.records import Record, build_batch
from clients.protocol.types import Reader
from tests.integration.test_txn_delayed_produce import RawTxnProducer, committed_values
from tests.support.cluster import Cluster
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class VersionedTxnProducer(RawTxnProducer):
    """RawTxnProducer speaking transaction version 2 (no AddPartitionsToTxn, Produce v12,
    EndTxn v5 whose answer gives the next epoch) or version 0 (as the base class)."""

    def __init__(self, c: Cluster, tid: str, tv2: bool):
        super().__init__(c, tid)
        self.tv2 = tv2

    def begin(self, *topics: str) -> None:
        if not self.tv2:
            self.add(*topics)               # version 2: the leaders add them

    def produce(self, topic: str, value: bytes) -> int:
        seq = self.seq.get(topic, 0)
        self.seq[topic] = seq + 1
        batch = build_batch([Record(None, value)], producer_id=self.pid, producer_epoch=self.epoch,
                            base_sequence=seq, is_transactional=True)
        version = 12 if self.tv2 else 11
        r = self._retry(lambda: self._leader(topic).request("Produce", version, {
            "transactional_id": self.tid, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
        ).responses[0].partition_responses[0])
        return r.error_code

    def end_frame(self, commit: bool) -> bytes:
        return self.coordinator.encode("EndTxn", 5 if self.tv2 else 3, {
            "transactional_id": self.tid, "producer_id": self.pid, "producer_epoch": self.epoch,
            "committed": commit})

    def end(self, commit: bool) -> None:
        version = 5 if self.tv2 else 3
        r = self._retry(lambda: self.coordinator.request("EndTxn", version, {
            "transactional_id": self.tid, "producer_id": self.pid, "producer_epoch": self.epoch,
            "committed": commit}))
        assert r.error_code == 0, f"EndTxn(commit={commit}): {r}"
        if self.tv2:
            assert (r.producer_id, r.producer_epoch) == (self.pid, self.epoch + 1)
            self.epoch = r.producer_epoch
            self.seq.clear()                # a new epoch starts every sequence at 0

    def deliver_end(self, frame: bytes, version: int) -> int:
        """The held EndTxn, over a connection of its own, as a late packet would arrive."""
        host, port = self.coordinator.sock.getpeername()[:2]
        with WireClient(host, port) as w:
            w.send_raw(frame)
            reader = Reader(w.read_frame())
            a = api("EndTxn")
            decode_response_header(reader, a.response_header_version(version))
            return a.decode_response(reader, version).error_code


@pytest.mark.parametrize("tv2", [
    True,
    pytest.param(False, marks=pytest.mark.xfail(strict=True, reason="with one epoch for both "
                                                "transactions the delayed abort ends the second")),
])
def test_a_delayed_end_txn_never_ends_the_next_transaction(tmp_path, tv2):
    with Cluster(tmp_path / "c", brokers=3) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 0})
        for t in ("x", "y"):
            admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=3)])[t].result(30)
            c.wait_for_leader(t, 0)
        p = VersionedTxnProducer(c, f"delayed-end-{uuid.uuid4()}", tv2)

        # Transaction 1 writes to X; its EndTxn(abort) is held; the retry of it succeeds.
        p.begin("x")
        assert p.produce("x", b"txn1") == 0
        held = p.end_frame(commit=False)
        p.end(commit=False)

        # Transaction 2 writes to X and Y; the held EndTxn arrives while it is open.
        p.begin("x", "y")
        assert p.produce("x", b"txn2-x") == 0
        assert p.produce("y", b"txn2-y") == 0
        late = p.deliver_end(held, 5 if tv2 else 3)
        if tv2:
            assert late == Code.PRODUCER_FENCED
        p.end(commit=True)

        assert committed_values(c, "x") == [b"txn2-x"], "the later transaction was ended early"
        assert committed_values(c, "y") == [b"txn2-y"]
