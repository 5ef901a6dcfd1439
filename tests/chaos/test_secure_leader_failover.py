"""Invariant 3 under leader loss, on a secured cluster: three brokers whose only listener is
SASL_SSL, talking to each other over it as the super user "admin", and clients that produce
and read back as "alice" with PLAIN over SASL_SSL. Replication factor 3,
min.insync.replicas=2, acks=all: kill -9 of the partition leader (repeatedly, each time
restarted) loses no acknowledged record, and every replica's log is byte-identical once all
are back.

The same scenario as test_leader_failover.py, with the same checker (tests/chaos/checker.py);
only the security differs. The brokers authenticate to each other with PLAIN, and with
SCRAM-SHA-512, the admin's SCRAM credential written to ZooKeeper before any broker starts,
as Kafka's docs do with `kafka-configs.sh --zookeeper` (a broker reads the credentials before
it registers, so the controller's first login to it succeeds).

Short form: 2 rounds, SCRAM between brokers. `--long` (or STROM_LONG_TESTS=1): 10 rounds, both.
"""
from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import scramp  # type: ignore[import-untyped]
from confluent_kafka.admin import AdminClient, NewTopic

from clients.aio.security import ClientSecurity
from tests.chaos.checker import ChaosProducer, Checker, read_back
from tests.chaos.conftest import ZK_SESSION_MS, stop_telling_a_failure
from tests.chaos.test_leader_failover import kill_leader_rounds, replicas_identical
from tests.support.cluster import Cluster
from tests.support.security import USERS, SecurityKit, secure_overrides

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "chaos"      # replicas_identical() reads the log directories of this topic
SCRAM_ITERATIONS = 4096
LISTENERS: dict[str, int | str] = {"SASL_SSL": "{port}"}     # each broker's own port


def librdkafka_config(kit: SecurityKit, user: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    """SASL_SSL settings under librdkafka's names (strom's clients read them too)."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": USERS[user],
            "ssl.ca.location": str(kit.ca_pem), "log_level": 0}


def scram_user_znode(mechanism: str, password: str) -> bytes:
    """/config/users/<user> as Kafka writes it, with a credential computed by `scramp` (not
    by strom, so the broker's SCRAM check is verified against an independent derivation)."""
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=SCRAM_ITERATIONS)

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")

    credential = (f"salt={b64(salt)},stored_key={b64(stored_key)},"
                  f"server_key={b64(server_key)},iterations={iterations}")
    return json.dumps({"version": 1, "config": {mechanism: credential}}).encode()


@pytest.fixture
def kit(tmp_path: Path) -> SecurityKit:
    return SecurityKit(tmp_path / "tls")


@pytest.fixture(params=["PLAIN", "SCRAM-SHA-512"])
def inter_broker_mechanism(request: pytest.FixtureRequest, long_run: bool) -> str:
    if request.param == "PLAIN" and not long_run:
        # The short form (CI) runs the SCRAM variant, which also exercises the brokers'
        # credential cache at registration; PLAIN between brokers runs with --long.
        pytest.skip("PLAIN between brokers runs with --long")
    return str(request.param)


@pytest.fixture
def secure_cluster(tmp_path: Path, kit: SecurityKit, inter_broker_mechanism: str,
                   request: pytest.FixtureRequest) -> Iterator[Cluster]:
    overrides = secure_overrides(kit, LISTENERS, inter_broker="SASL_SSL",
                                 inter_broker_mechanism=inter_broker_mechanism)
    admin = ClientSecurity.from_config(librdkafka_config(kit, "admin"))
    c = Cluster(tmp_path / "cluster", brokers=3, overrides=overrides, client_security=admin,
                zookeeper_session_timeout_ms=ZK_SESSION_MS)
    try:
        if inter_broker_mechanism.startswith("SCRAM-"):
            # The brokers log in to each other with SCRAM from their first request on.
            c.zookeeper.start()
            c.zk.create(c.path("/config/users/admin"),
                        scram_user_znode(inter_broker_mechanism, USERS["admin"]), makepath=True)
        c.start(timeout=30)
        yield c
    finally:
        stop_telling_a_failure(c, request)


def create_topic(cluster: Cluster, kit: SecurityKit) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **librdkafka_config(kit, "admin")})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    cluster.wait_for_leader(TOPIC, 0)
    cluster.wait_until(lambda: sorted(cluster.isr(TOPIC, 0)) == [0, 1, 2], timeout=60,
                       message="the ISR to fill over SASL_SSL")


def test_secure_leader_kill9_loses_no_acked_record(secure_cluster: Cluster, kit: SecurityKit,
                                                    long_run: bool) -> None:
    cluster = secure_cluster
    rounds = 10 if long_run else 2
    rng = random.Random(3)
    started = time.monotonic()
    create_topic(cluster, kit)
    checker = Checker()
    alice = librdkafka_config(kit, "alice")
    with ChaosProducer(cluster.bootstrap, TOPIC, checker, idempotence=True, keys=None,
                       config=alice) as producer:
        # Back in the ISR each round means the restarted broker fetched over SASL_SSL as admin.
        kill_leader_rounds(cluster, producer, checker, rounds, rng)
        producer.wait_acked(checker.acked_count + 100, timeout=60)   # still producing at the end
    read_back(cluster.bootstrap, TOPIC, 1, checker, config=alice)
    report = checker.report()
    print(report)
    report.assert_ok(min_acked=1000)
    assert report.lost == 0
    cluster.wait_until(lambda: replicas_identical(cluster), timeout=60,
                       message="byte-identical replica logs")
    print(f"{rounds} rounds in {time.monotonic() - started:.1f} s")
