"""Compaction of a transactional topic in a real 3-broker cluster (replication factor 3): a
confluent-kafka transactional producer commits and aborts transactions on a compacted
topic; the cleaner of each replica removes the aborted records and the committed values a
later commit replaced, and read_committed consumers still read exactly the latest committed
value of every key, before and after."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient, NewTopic

from clients import Consumer, TopicPartition
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("txn-compact") / "c", brokers=3,
                 overrides={"log.cleaner.backoff.ms": "200"}) as c:
        yield c


def read_all(c: Cluster, topic: str, isolation: str) -> list[tuple[bytes, bytes]]:
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=c.bootstrap, isolation_level=isolation,
                  auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline
            out += [(r.key, r.value) for r in consumer.poll(0.2)]
        return out


def latest(pairs: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return dict(pairs)


def test_the_cleaner_removes_aborted_and_replaced_transactional_records(cluster):
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"})])[topic].result(30)
    cluster.wait_for_leader(topic, 0)
    p = CKProducer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tx-{topic}",
                    "linger.ms": 5, "log_level": 0})
    p.init_transactions(60)

    def transaction(values: dict[str, str], commit: bool) -> None:
        p.begin_transaction()
        for k, v in values.items():
            p.produce(topic, key=k, value=v)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    keys = [f"k{i}" for i in range(10)]
    transaction({k: f"first-{k}" for k in keys}, commit=True)
    transaction({k: f"aborted-{k}" for k in keys}, commit=False)
    transaction({k: f"second-{k}" for k in keys[:5]}, commit=True)
    for i in range(60):                     # filler: rolls segments past the transactions
        transaction({f"fill{i % 3}": f"fill-{i}"}, commit=True)
    want = {**{k: f"first-{k}" for k in keys}, **{k: f"second-{k}" for k in keys[:5]},
            **{f"fill{j}": f"fill-{57 + j}" for j in range(3)}}
    want_b = {k.encode(): v.encode() for k, v in want.items()}
    assert latest(read_all(cluster, topic, "read_committed")) == want_b

    deadline = time.monotonic() + 90
    while True:
        everything = read_all(cluster, topic, "read_uncommitted")
        values = [v for _, v in everything]
        cleaned = (not any(v.startswith(b"aborted-") for v in values)
                   and not any(v == b"first-k0" for v in values))
        if cleaned:
            break
        assert time.monotonic() < deadline, f"not compacted: {len(values)} records left"
        time.sleep(0.5)
    committed = read_all(cluster, topic, "read_committed")
    assert latest(committed) == want_b
    assert len(committed) < 40                  # 85 values written, replaced ones gone
    print(f"after cleaning: {len(everything)} records left of 85 written (no aborted one, "
          f"no replaced one); read_committed gives the latest committed value of each key")
