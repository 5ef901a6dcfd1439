"""bin/kafka-transactions.sh (clients.cli.transactions) against a real 3-broker cluster.

An open transaction of a confluent-kafka (librdkafka) producer is what `list`, `describe` and
`describe-producers` must show, and `find-hanging` must not report it; after its commit
`describe` shows CompleteCommit. A hanging transaction is made over the raw wire protocol,
behind the coordinator's back (a transactional batch the coordinator never heard of): the
tool finds it, aborts it with a marker, and a read_committed librdkafka consumer then gets
past it to a record that was stuck behind it.

The cluster runs with KIP-890 partition verification off: otherwise the leader would ask the
coordinator about the hand-made producer and refuse its batch (test_txn_markers.py does the
same)."""
from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients.protocol.records import Record, build_batch
from tests.support.broker_process import REPO
from tests.support.cluster import Cluster
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUIET = {"log_level": 0}
LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADER = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                   "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                   "TransactionDurationMs", "TopicPartitions"]
PRODUCERS_HEADER = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset"]
HANGING_HEADER = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                  "StartOffset", "LastTimestamp", "Duration(min)"]
HANGING_PID = 9999


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("txtool") / "c", brokers=3,
                 overrides={"transaction.partition.verification.enable": "false"}) as c:
        yield c


def new_topic(c: Cluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[name].result(30)
    c.wait_for_leader(name, 0)
    c.wait_until(lambda: len(c.isr(name, 0)) == 3)
    return name


def tool(c: Cluster, *args: str) -> subprocess.CompletedProcess:
    """bin/kafka-transactions.sh --bootstrap-server <cluster> ARGS..., as a user runs it."""
    return subprocess.run([str(REPO / "bin" / "kafka-transactions.sh"), "--bootstrap-server",
                           c.bootstrap, *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env=dict(os.environ, STROM_CLI_TIMEOUT="20"))


def table(c: Cluster, *args: str, header: list[str]) -> list[dict[str, str]]:
    """Run a command that succeeds and prints Kafka's table: check the layout (every cell
    padded to its column's width and followed by a tab) and return the rows as dicts."""
    r = tool(c, *args)
    assert r.returncode == 0, f"{args} -> {r.returncode}: {r.stderr}"
    assert r.stderr == ""
    lines = r.stdout.split("\n")
    assert lines[-1] == "", r.stdout
    cells = [line.split("\t") for line in lines[:-1]]
    assert all(len(row) == len(header) + 1 and row[-1] == "" for row in cells), r.stdout
    for i in range(len(header)):
        assert len({len(row[i]) for row in cells}) == 1, f"column {i} not aligned: {r.stdout!r}"
    assert [x.rstrip() for x in cells[0][:-1]] == header
    return [dict(zip(header, (x.rstrip() for x in row))) for row in cells[1:]]


def fails(c: Cluster, *args: str) -> str:
    """Run a command that must fail with exit 1 and one stderr line; return that line."""
    r = tool(c, *args)
    assert r.returncode == 1, f"{args} -> {r.returncode}: {r.stdout} {r.stderr}"
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def txn_coordinator(c: Cluster, tid: str) -> int:
    """The coordinator of `tid`, asked over the wire (not through the tool)."""
    with WireClient("127.0.0.1", c.broker(0).port) as w:
        r = w.request("FindCoordinator", 3, {"key": tid, "key_type": 1})
    assert r.error_code == 0, r.error_code
    return r.node_id


def test_open_then_committed_transaction_of_a_confluent_producer(cluster):
    c = cluster
    topic = new_topic(c, "tool-tx")
    tid = "tool-tx"
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, **QUIET})
    p.init_transactions(60)
    p.begin_transaction()
    try:
        check_open_then_commit(c, p, topic, tid)
    except BaseException:
        try:                        # leave no open transaction behind for the next test
            p.abort_transaction(30)
        except Exception:           # noqa: BLE001 - already committed: nothing to abort
            pass
        raise


def check_open_then_commit(c: Cluster, p: Producer, topic: str, tid: str) -> None:
    errors: list = []
    p.produce(topic, b"in-txn", partition=0,
              on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and errors == []
    coordinator = txn_coordinator(c, tid)

    listed = [r for r in table(c, "list", header=LIST_HEADER) if r["TransactionalId"] == tid]
    assert len(listed) == 1, listed
    row = listed[0]
    assert row["TransactionState"] == "Ongoing" and row["Coordinator"] == str(coordinator)
    pid = row["ProducerId"]
    assert int(pid) >= 0

    before = int(time.time() * 1000)
    (desc,) = table(c, "describe", "--transactional-id", tid, header=DESCRIBE_HEADER)
    assert desc["CoordinatorId"] == str(coordinator) and desc["TransactionalId"] == tid
    assert desc["ProducerId"] == pid and int(desc["ProducerEpoch"]) >= 0
    assert desc["TransactionState"] == "Ongoing"
    assert int(desc["TransactionTimeoutMs"]) == 60000          # librdkafka's default
    assert 0 < int(desc["CurrentTransactionStartTimeMs"]) <= before
    assert int(desc["TransactionDurationMs"]) >= 0
    assert desc["TopicPartitions"] == f"{topic}-0"

    producers = table(c, "describe-producers", "--topic", topic, "--partition", "0",
                      header=PRODUCERS_HEADER)
    assert [(r["ProducerId"], r["ProducerEpoch"], r["LastSequence"],
             r["CurrentTransactionStartOffset"]) for r in producers] == [
        (pid, desc["ProducerEpoch"], "0", "0")]
    # The same answer from a follower is refused (strom's brokers describe producers on the
    # leader only): one error line naming the code.
    follower = next(b for b in range(3) if b != c.leader(topic, 0))
    line = fails(c, "describe-producers", "--topic", topic, "--partition", "0",
                 "--broker-id", str(follower))
    assert line.startswith("Error: NOT_LEADER_OR_FOLLOWER: Failed to describe producers for "
                           f"partition {topic}-0 on broker {follower}"), line

    # Open, and its coordinator still expects to write the partition's marker: not hanging,
    # however short the timeout.
    assert table(c, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                 header=HANGING_HEADER) == []

    p.commit_transaction(30)
    (desc,) = table(c, "describe", "--transactional-id", tid, header=DESCRIBE_HEADER)
    assert desc["TransactionState"] == "CompleteCommit" and desc["ProducerId"] == pid
    assert desc["TopicPartitions"] == ""
    producers = table(c, "describe-producers", "--topic", topic, "--partition", "0",
                      header=PRODUCERS_HEADER)
    assert [(r["ProducerId"], r["CurrentTransactionStartOffset"]) for r in producers] == [
        (pid, "None")]
    assert [r["TransactionState"] for r in table(c, "list", header=LIST_HEADER)
            if r["TransactionalId"] == tid] == ["CompleteCommit"]

    line = fails(c, "describe", "--transactional-id", "tool-no-such-tx")
    assert line == ("Error: TRANSACTIONAL_ID_NOT_FOUND: Failed to describe transaction state "
                    "of transactional-id `tool-no-such-tx`"), line


def produce(w: WireClient, topic: str, batch: bytes) -> int:
    r = w.request("Produce", 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                 "topic_data": [{"name": topic, "partition_data": [
                                     {"index": 0, "records": batch}]}]})
    part = r.responses[0].partition_responses[0]
    assert part.error_code == 0, part.error_code
    return part.base_offset


def stable_end(w: WireClient, topic: str) -> int:
    """The partition's last stable offset (ListOffsets latest, read_committed)."""
    r = w.request("ListOffsets", 5, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset


def read_committed(c: Cluster, topic: str, end: int) -> list[tuple[int | None, bytes | None]]:
    """(offset, value) a read_committed librdkafka consumer gets from offset 0 until its
    position reaches `end` (or 30 s pass)."""
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
            if consumer.position([TopicPartition(topic, 0)])[0].offset >= end:
                break
        return got
    finally:
        consumer.close()


def test_find_and_abort_a_hanging_transaction(cluster):
    c = cluster
    topic = new_topic(c, "tool-hang")
    leader = c.leader(topic, 0)

    def mine(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        # A broker-wide search may also see other tests' partitions on that broker.
        return [r for r in rows if r["Topic"] == topic]
    assert leader is not None
    with WireClient("127.0.0.1", c.broker(leader).port) as w:
        start = produce(w, topic, build_batch([Record(None, b"hanging")], producer_id=HANGING_PID,
                                              producer_epoch=0, base_sequence=0,
                                              is_transactional=True))
        after = produce(w, topic, build_batch([Record(None, b"after")]))
        assert (start, after) == (0, 1)
        assert stable_end(w, topic) == start          # stuck behind the open transaction

        # Younger than the default 15 minutes: not a candidate yet.
        assert mine(table(c, "find-hanging", "--broker-id", str(leader),
                          header=HANGING_HEADER)) == []
        hanging = mine(table(c, "find-hanging", "--broker-id", str(leader),
                             "--max-transaction-timeout", "0", header=HANGING_HEADER))
        assert [(r["Topic"], r["Partition"], r["ProducerId"], r["ProducerEpoch"],
                 r["StartOffset"], r["Duration(min)"]) for r in hanging] == [
            (topic, "0", str(HANGING_PID), "0", str(start), "0")]
        assert abs(int(hanging[0]["LastTimestamp"]) - time.time() * 1000) < 60_000
        # The same search scoped by topic finds it too; another broker does not lead it.
        assert [r["ProducerId"] for r in table(
            c, "find-hanging", "--topic", topic, "--partition", "0",
            "--max-transaction-timeout", "0", header=HANGING_HEADER)] == [str(HANGING_PID)]
        other = next(b for b in range(3) if b != leader)
        assert mine(table(c, "find-hanging", "--broker-id", str(other),
                          "--max-transaction-timeout", "0", header=HANGING_HEADER)) == []

        line = fails(c, "abort", "--topic", topic, "--partition", "0", "--start-offset", "5")
        assert line == (f"Error: Could not find any open transactions starting at offset 5 "
                        f"on partition {topic}-0"), line
        r = tool(c, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
        assert stable_end(w, topic) == after + 2       # past "after" and the ABORT marker

    assert read_committed(c, topic, after + 1) == [(after, b"after")]
    assert mine(table(c, "find-hanging", "--broker-id", str(leader),
                      "--max-transaction-timeout", "0", header=HANGING_HEADER)) == []
    assert table(c, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                 header=HANGING_HEADER) == []
    producers = table(c, "describe-producers", "--topic", topic, "--partition", "0",
                      header=PRODUCERS_HEADER)
    assert [(r["ProducerId"], r["CurrentTransactionStartOffset"]) for r in producers
            if r["ProducerId"] == str(HANGING_PID)] == [(str(HANGING_PID), "None")]
    # Aborting it again: nothing is open at that offset any more.
    assert "Could not find any open transactions" in fails(
        c, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))
