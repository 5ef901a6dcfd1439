"""Expiry of idle transactional ids (transactional.id.expiration.ms, checked every
transaction.remove.expired.transaction.cleanup.interval.ms), in a real 3-broker cluster: an
id with no transaction open and no update for that long is removed with a tombstone in
`__transaction_state`, so the broker that coordinates it after a failover does not bring it
back; an id with a transaction open is kept; a producer that uses an expired id starts afresh.
"""
from __future__ import annotations

import time
import uuid

import pytest

from clients import AdminClient, NewTopic, Producer
from tests.support.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXPIRY_MS = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    overrides = {"transactional.id.expiration.ms": str(EXPIRY_MS),
                 "transaction.remove.expired.transaction.cleanup.interval.ms": "500"}
    with Cluster(tmp_path_factory.mktemp("txn-expiry") / "c", brokers=3,
                 overrides=overrides) as c:
        yield c


def described(c: Cluster, tid: str):
    with AdminClient(bootstrap_servers=c.bootstrap) as admin:
        return admin.describe_transactions([tid]).get(tid)


def wait_gone(c: Cluster, tid: str, timeout: float = 30) -> float:
    t0 = time.monotonic()
    while described(c, tid) is not None:
        assert time.monotonic() - t0 < timeout, f"{tid} did not expire"
        time.sleep(0.2)
    return time.monotonic() - t0


def test_an_idle_transactional_id_expires_and_stays_gone_across_a_coordinator_failover(cluster):
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with AdminClient(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)])
    cluster.wait_for_leader(topic, 0)
    idle, busy = f"idle-{uuid.uuid4().hex[:6]}", f"busy-{uuid.uuid4().hex[:6]}"
    with Producer(bootstrap_servers=cluster.bootstrap, transactional_id=idle) as p:
        p.init_transactions(60)
        p.begin_transaction()
        p.send(topic, b"committed")
        p.commit_transaction(60)
        first_pid = described(cluster, idle).producer_id
    busy_producer = Producer(bootstrap_servers=cluster.bootstrap, transactional_id=busy,
                             transaction_timeout_ms=120_000)
    try:
        busy_producer.init_transactions(60)
        busy_producer.begin_transaction()
        busy_producer.send(topic, b"open").result(30)

        waited = wait_gone(cluster, idle)
        assert waited < 10
        time.sleep(EXPIRY_MS / 1000 + 1)               # the open one is older than the expiry
        open_txn = described(cluster, busy)
        assert open_txn is not None and open_txn.state == "Ongoing"
        busy_producer.commit_transaction(60)
    finally:
        busy_producer.close()

    # The tombstone is replicated: the next coordinator loads the partition without the id.
    victim = cluster.transaction_coordinator(idle)
    assert victim is not None
    cluster.kill9(victim)
    cluster.wait_for_broker_gone(victim)
    deadline = time.monotonic() + 60
    while cluster.transaction_coordinator(idle) in (None, victim):
        assert time.monotonic() < deadline, "no new coordinator"
        time.sleep(0.2)
    assert described(cluster, idle) is None
    cluster.restart(victim)

    with Producer(bootstrap_servers=cluster.bootstrap, transactional_id=idle) as p:
        p.init_transactions(60)                     # a fresh start: a new producer id
        fresh = described(cluster, idle)
        assert fresh is not None and fresh.state == "Empty"
        assert fresh.producer_id != first_pid and fresh.producer_epoch == 0
    print(f"the idle id expired {waited:.1f}s after its commit ({EXPIRY_MS} ms expiry); "
          f"still gone after its coordinator {victim} was killed; a new producer got id "
          f"{fresh.producer_id} (was {first_pid})")
