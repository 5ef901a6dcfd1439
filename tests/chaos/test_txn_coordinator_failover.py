"""Transactions across a kill -9 of their coordinator: a confluent-kafka transactional
producer commits a stream of transactions, each writing one record to each of 3 partitions
(replication factor 3), while the broker coordinating its transactional id is killed at a
random moment, often in the middle of a commit. Whatever the moment, every transaction ends
committed or aborted on every partition, never split: a read_committed consumer sees each
transaction's records on all 3 partitions or on none, sees every transaction the producer
was told was committed, and no record twice.

Short form: 2 rounds. `--long` (or STROM_LONG_TESTS=1): 10 rounds.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "txn-failover"
PARTITIONS = 3
TXNS_PER_ROUND = 25


def coordinator_of(cluster, tid: str) -> int:
    def found() -> tuple[int] | None:
        node = cluster.transaction_coordinator(tid)
        return None if node is None else (node,)      # broker 0 is falsy: wrap it
    return cluster.wait_until(found, timeout=60, message="a transaction coordinator")[0]


def new_producer(cluster, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "log_level": 0,
                  "transaction.timeout.ms": 30000, "socket.connection.setup.timeout.ms": 1000,
                  "retry.backoff.ms": 50, "retry.backoff.max.ms": 200})
    p.init_transactions(90)
    return p


def run_round(cluster, tid: str, round_no: int, committed: set[str]) -> None:
    victim = coordinator_of(cluster, tid)
    producer = new_producer(cluster, tid)
    kill_after = random.uniform(0.05, 0.6)
    killer = threading.Timer(kill_after, cluster.kill9, args=(victim,))
    killer.start()
    try:
        for k in range(TXNS_PER_ROUND):
            txn = f"{round_no}-{k}"
            while True:
                try:
                    producer.begin_transaction()
                    for part in range(PARTITIONS):
                        producer.produce(TOPIC, f"{txn}/{part}".encode(), partition=part)
                    producer.commit_transaction(90)
                    committed.add(txn)
                    break
                except KafkaException as e:
                    err = e.args[0]
                    if err.txn_requires_abort():
                        producer.abort_transaction(90)
                        break                     # this transaction is given up: aborted
                    if err.retriable():
                        try:
                            producer.commit_transaction(90)
                            committed.add(txn)
                            break
                        except KafkaException:
                            pass
                    # Fatal (or still failing): a new instance fences this one and the
                    # coordinator ends what it left open.
                    producer = new_producer(cluster, tid)
                    break
    finally:
        killer.join()
        cluster.wait_for_broker_gone(victim)      # its session must expire first
        cluster.restart(victim)


def read_committed(cluster) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "log_level": 0})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got, last = [], time.monotonic()
    while time.monotonic() - last < 5:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
            last = time.monotonic()
    consumer.close()
    return got


def test_a_killed_coordinator_never_splits_a_transaction(cluster, long_run):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    for p in range(PARTITIONS):
        cluster.wait_for_leader(TOPIC, p)
    tid = f"failover-{uuid.uuid4()}"
    committed: set[str] = set()
    rounds = 10 if long_run else 2
    for r in range(rounds):
        run_round(cluster, tid, r, committed)
        cluster.wait_for_brokers(3, 60)

    seen = read_committed(cluster)
    dupes = [v for v, n in Counter(seen).items() if n > 1]
    by_txn = Counter(v.split("/")[0] for v in seen)
    torn = {t: n for t, n in by_txn.items() if n != PARTITIONS}
    lost = committed - set(by_txn)
    print(f"\n{rounds} rounds: {len(committed)} transactions acknowledged committed, "
          f"{len(by_txn)} visible, {len(torn)} torn, {len(lost)} lost, {len(dupes)} duplicated")
    assert not dupes, f"records seen twice: {dupes[:5]}"
    assert not torn, f"transactions visible on only some partitions: {dict(list(torn.items())[:5])}"
    assert not lost, f"committed transactions not visible: {sorted(lost)[:5]}"
    assert len(committed) >= rounds * TXNS_PER_ROUND // 2
