"""ACLs across a secured 3-broker cluster: one SASL_PLAINTEXT listener per broker (PLAIN users
admin, alice, bob), Kafka's ACL authorizer, `super.users=User:admin`, no ACL means denied.

- kafka-acls.sh, given only broker 0 as --bootstrap-server and the admin's --command-config,
  adds an ACL letting alice write topic t: from the tool's exit, alice's Produce to the
  partitions led by broker 1 and by broker 2 (sent straight to those leaders, on connections
  authenticated before the tool ran) succeeds within 1 s; `--remove --force` and the denial is
  back within 1 s too. Every broker follows ZooKeeper's /kafka-acl-changes on its own.
- confluent-kafka's and kafka-python's admin clients create, describe (filtered by principal,
  by resource pattern type, and Kafka's MATCH) and delete ACLs; what one client writes the
  other reads back, so no client is verified only by itself.

One cluster serves the module; each test uses its own resource names.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ResourcePatternType as PatternType
from confluent_kafka.admin import ResourceType as RType
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourcePatternFilter, ResourceType)

from clients.aio.connection import BrokerConnection
from clients.aio.security import ClientSecurity
from clients.protocol import acl as wire_acl
from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.support.broker_process import REPO
from tests.support.cluster import Cluster
from tests.support.security import PLAIN_MODULE, USERS, SecurityKit, secure_overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "t"
# Partition p's preferred leader is broker p: one partition led by each broker.
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
PROPAGATION_BOUND_S = 1.0
POLL_S = 0.01
# "{port}" is each broker's own port (BrokerProcess); secure_overrides' hint says int only.
LISTENERS: dict[str, Any] = {"SASL_PLAINTEXT": "{port}"}


def sasl(user: str) -> dict[str, str]:
    """SASL_PLAINTEXT + PLAIN as `user`, in keys librdkafka and strom's clients both read."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("acl-propagation")
    kit = SecurityKit(workdir / "tls")
    overrides = secure_overrides(kit, LISTENERS, mechanisms="PLAIN", acls=True)
    c = Cluster(workdir / "cluster", client_security=ClientSecurity.from_config(sasl("admin")), brokers=3,
                      overrides=overrides)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, **sasl("admin"), "log_level": 0})


@pytest.fixture(scope="module")
def command_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The admin's --command-config, as a Kafka user writes it (sasl.jaas.config)."""
    path = tmp_path_factory.mktemp("tool") / "admin.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN_MODULE} required username="admin" '
                    f'password="{USERS["admin"]}";\n')
    return path


def kafka_acls(bootstrap: str, command_config: Path, *args: str) -> str:
    r = subprocess.run([str(REPO / "bin" / "kafka-acls.sh"), "--bootstrap-server", bootstrap,
                        "--command-config", str(command_config), *args],
                       capture_output=True, text=True, timeout=60, cwd=REPO, env=dict(os.environ))
    assert r.returncode == 0 and "Traceback" not in r.stderr, \
        f"kafka-acls {args} -> {r.returncode}: {r.stdout} {r.stderr}"
    return r.stdout


# ---- ACL changes reach every broker -------------------------------------------------------


async def produce_code(conn: BrokerConnection, partition: int) -> int:
    """The error code of a one-record Produce (acks=1) to `TOPIC`-`partition` on `conn`."""
    resp = await conn.request("Produce", {"acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition,
                                            "records": build_batch([Record(None, b"acl-probe")])}]}]})
    return int(resp.responses[0].partition_responses[0].error_code)


async def seconds_until(conn: BrokerConnection, partition: int, code: int, t0: float,
                        limit_s: float = 10.0) -> float:
    """Seconds from `t0` until a Produce to `partition` on `conn` answers `code`."""
    while True:
        got = await produce_code(conn, partition)
        elapsed = time.monotonic() - t0
        if got == code:
            return elapsed
        if elapsed > limit_s:
            raise AssertionError(f"partition {partition}: still error {got} after {elapsed:.1f} s "
                                 f"(waiting for {code})")
        await asyncio.sleep(POLL_S)


def wire_acl_change(write: bool) -> tuple[str, dict[str, Any]]:
    """CreateAcls (or DeleteAcls) of alice's Write on `TOPIC`, as kafka-acls.sh sends it."""
    entry = {"resource_type": wire_acl.ResourceType.TOPIC, "resource_name": TOPIC,
             "resource_pattern_type": wire_acl.PatternType.LITERAL, "principal": "User:alice",
             "host": "*", "operation": wire_acl.AclOperation.WRITE,
             "permission_type": wire_acl.AclPermissionType.ALLOW}
    if write:
        return "CreateAcls", {"creations": [entry]}
    return "DeleteAcls", {"filters": [{"resource_type_filter": entry["resource_type"],
                                       "resource_name_filter": TOPIC,
                                       "pattern_type_filter": entry["resource_pattern_type"],
                                       "principal_filter": "User:alice", "host_filter": "*",
                                       "operation": entry["operation"],
                                       "permission_type": entry["permission_type"]}]}


@pytest.mark.alone
def test_kafka_acls_on_one_broker_takes_effect_on_the_others_within_1s(
        cluster: Cluster, confluent_admin: AdminClient, command_config: Path) -> None:
    confluent_admin.create_topics([NewTopic(TOPIC, num_partitions=len(ASSIGNMENT),
                                            replica_assignment=ASSIGNMENT)])[TOPIC].result(30)
    for p, replicas in enumerate(ASSIGNMENT):
        cluster.wait_until(lambda: cluster.leader(TOPIC, p) == replicas[0], timeout=30,
                           message=f"broker {replicas[0]} leading {TOPIC}-{p}")
    acl_flags = ("--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
                 "--topic", TOPIC)
    alice = ClientSecurity.from_config(sasl("alice"))
    admin = ClientSecurity.from_config(sasl("admin"))
    broker0 = cluster.broker(0)
    timings: dict[str, dict[int, float]] = {}

    async def measure() -> None:
        # Authenticated before any change: what is timed is authorization alone.
        conns = {b: await BrokerConnection.connect("127.0.0.1", cluster.broker(b).port, security=alice)
                 for b in range(3)}
        admin0 = await BrokerConnection.connect("127.0.0.1", broker0.port, security=admin)
        try:
            for b, conn in conns.items():       # partition b is led by broker b
                assert await produce_code(conn, b) == Code.TOPIC_AUTHORIZATION_FAILED

            async def until_all(code: int, t0: float) -> dict[int, float]:
                took = await asyncio.gather(*(seconds_until(conns[b], b, code, t0) for b in range(3)))
                return dict(enumerate(took))

            async def tool(name: str, code: int, *flags: str) -> None:
                started = time.monotonic()
                await asyncio.to_thread(kafka_acls, broker0.bootstrap, command_config, *flags)
                exited = time.monotonic()
                timings[name] = await until_all(code, exited)
                timings[name + ", from the tool's start"] = {
                    b: s + exited - started for b, s in timings[name].items()}

            async def wire(name: str, code: int, write: bool) -> None:
                api, body = wire_acl_change(write)
                answer = await admin0.request(api, body)
                answered = time.monotonic()
                results = answer.results if write else answer.filter_results
                assert [r.error_code for r in results] == [Code.NONE], answer
                timings[name] = await until_all(code, answered)

            await tool("kafka-acls.sh --add: allowed", Code.NONE, "--add", *acl_flags)
            await tool("kafka-acls.sh --remove: denied again", Code.TOPIC_AUTHORIZATION_FAILED,
                       "--remove", "--force", *acl_flags)
            await wire("CreateAcls answered: allowed", Code.NONE, True)
            await wire("DeleteAcls answered: denied again", Code.TOPIC_AUTHORIZATION_FAILED, False)
        finally:
            for conn in (*conns.values(), admin0):
                await conn.close()

    asyncio.run(measure())
    for name, took in timings.items():
        print(f"{name} (change sent to broker 0): "
              + ", ".join(f"broker {b} {s * 1000:.0f} ms" for b, s in took.items()))
    for name, took in timings.items():
        if "from the tool's start" not in name:
            assert max(took.values()) < PROPAGATION_BOUND_S, (name, took)


# ---- admin clients: create, describe with filters, delete ---------------------------------


AclRow = tuple[str, str, str, str, str, str, str]   # type, name, pattern, principal, host, op, permission


def confluent_row(b: Any) -> AclRow:          # an AclBinding, as describe_acls answers it
    return (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
            b.permission_type.name)


def kp_row(a: ACL) -> AclRow:
    return (a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
            a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name, a.permission_type.name)


def confluent_acls(admin: AdminClient, flt: AclBindingFilter) -> set[AclRow]:
    """What DescribeAcls answers for `flt`, through confluent-kafka."""
    return {confluent_row(b) for b in admin.describe_acls(flt, request_timeout=15).result(30)}


def kp_filter(principal: str | None = None, resource_type: ResourceType = ResourceType.ANY,
              name: str | None = None,
              pattern: ACLResourcePatternType = ACLResourcePatternType.ANY) -> ACLFilter:
    return ACLFilter(principal=principal, host=None, operation=ACLOperation.ANY,
                     permission_type=ACLPermissionType.ANY,
                     resource_pattern=ResourcePatternFilter(resource_type, name, pattern))


def kp_acls(admin: KafkaAdminClient, flt: ACLFilter) -> set[AclRow]:
    """What DescribeAcls answers for `flt`, through kafka-python."""
    acls, error = admin.describe_acls(flt)
    assert error.errno == 0, error
    return {kp_row(a) for a in acls}


def only(prefix: str, acls: set[AclRow]) -> set[AclRow]:
    """The ACLs of this test's resources (other tests' may exist at the same time)."""
    return {a for a in acls if a[1].startswith(prefix)}


def confluent_any(principal: str | None = None, pattern: PatternType = PatternType.ANY,
                  rtype: RType = RType.ANY, name: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, None,  # type: ignore[arg-type]
                            AclOperation.ANY, AclPermissionType.ANY)


def test_confluent_kafka_admin_creates_describes_with_filters_and_deletes_acls(
        cluster: Cluster, confluent_admin: AdminClient) -> None:
    admin = confluent_admin
    bindings = [
        AclBinding(RType.TOPIC, "cf-orders", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(RType.GROUP, "cf-group", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(RType.TOPIC, "cf-", PatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
        AclBinding(RType.TOPIC, "cf-orders", PatternType.LITERAL, "User:bob", "127.0.0.1",
                   AclOperation.DESCRIBE, AclPermissionType.DENY),
    ]
    for f in admin.create_acls(bindings, request_timeout=15).values():
        assert f.result(30) is None
    alice_read = ("TOPIC", "cf-orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    alice_group = ("GROUP", "cf-group", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    bob_prefixed = ("TOPIC", "cf-", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW")
    bob_deny = ("TOPIC", "cf-orders", "LITERAL", "User:bob", "127.0.0.1", "DESCRIBE", "DENY")

    assert only("cf-", confluent_acls(admin, confluent_any())) == {alice_read, alice_group, bob_prefixed, bob_deny}
    # by principal
    assert only("cf-", confluent_acls(admin, confluent_any("User:alice"))) == {alice_read, alice_group}
    # by resource pattern type
    assert only("cf-", confluent_acls(admin, confluent_any(pattern=PatternType.PREFIXED))) == {bob_prefixed}
    assert only("cf-", confluent_acls(admin, confluent_any(pattern=PatternType.LITERAL))) == \
        {alice_read, alice_group, bob_deny}
    # MATCH: every pattern that applies to topic cf-orders (the literal ones and the prefix)
    assert confluent_acls(admin, confluent_any(pattern=PatternType.MATCH, rtype=RType.TOPIC, name="cf-orders")) \
        == {alice_read, bob_prefixed, bob_deny}
    # by resource type, name and principal together
    assert confluent_acls(admin, confluent_any("User:bob", PatternType.ANY, RType.TOPIC, "cf-orders")) == {bob_deny}

    # Delete by filter: bob's prefixed ACL only; the answer names what went.
    (deleted,) = admin.delete_acls([confluent_any("User:bob", PatternType.PREFIXED)], request_timeout=15).values()
    assert {confluent_row(b) for b in deleted.result(30)} >= {bob_prefixed}
    assert only("cf-", confluent_acls(admin, confluent_any())) == {alice_read, alice_group, bob_deny}

    # kafka-python reads back what confluent-kafka wrote.
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password=USERS["admin"])
    try:
        assert only("cf-", kp_acls(kp, kp_filter("User:alice"))) == {alice_read, alice_group}
    finally:
        kp.close()

    for f in admin.delete_acls([confluent_any(rtype=RType.TOPIC, name="cf-orders"),
                                confluent_any(rtype=RType.GROUP, name="cf-group")], request_timeout=15).values():
        f.result(30)
    assert only("cf-", confluent_acls(admin, confluent_any())) == set()


def eventually(read: Any, want: set, timeout: float = 15.0) -> None:
    """Assert that `read()` comes to give `want`. An ACL reaches each broker's cache through
    a ZooKeeper watch a moment after the write (test_kafka_acls_on_one_broker_takes_effect_on_the_others_within_1s
    bounds it), and a client may read from another broker than the one that wrote."""
    deadline = time.monotonic() + timeout
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == want


def test_kafka_python_admin_creates_describes_with_filters_and_deletes_acls(
        cluster: Cluster, confluent_admin: AdminClient) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin",
                             sasl_plain_password=USERS["admin"])
    try:
        acls = [
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "kp-orders", ACLResourcePatternType.LITERAL)),
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "kp-group", ACLResourcePatternType.LITERAL)),
            ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)),
            ACL("User:bob", "*", ACLOperation.DESCRIBE, ACLPermissionType.DENY,
                ResourcePattern(ResourceType.TOPIC, "kp-orders", ACLResourcePatternType.LITERAL)),
        ]
        result = admin.create_acls(acls)
        assert result["failed"] == [] and len(result["succeeded"]) == 4, result
        alice_read = ("TOPIC", "kp-orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
        alice_group = ("GROUP", "kp-group", "LITERAL", "User:alice", "*", "READ", "ALLOW")
        bob_prefixed = ("TOPIC", "kp-", "PREFIXED", "User:bob", "*", "WRITE", "ALLOW")
        bob_deny = ("TOPIC", "kp-orders", "LITERAL", "User:bob", "*", "DESCRIBE", "DENY")

        eventually(lambda: only("kp-", kp_acls(admin, kp_filter())), {alice_read, alice_group, bob_prefixed, bob_deny})
        eventually(lambda: only("kp-", kp_acls(admin, kp_filter("User:alice"))), {alice_read, alice_group})
        eventually(lambda: only("kp-", kp_acls(admin, kp_filter(pattern=ACLResourcePatternType.PREFIXED))), {bob_prefixed})
        eventually(lambda: kp_acls(admin, kp_filter(resource_type=ResourceType.TOPIC, name="kp-orders",
                                                    pattern=ACLResourcePatternType.MATCH)),
                   {alice_read, bob_prefixed, bob_deny})
        # confluent-kafka reads back what kafka-python wrote.
        eventually(lambda: only("kp-", confluent_acls(confluent_admin, confluent_any(pattern=PatternType.PREFIXED))),
                   {bob_prefixed})

        ((flt, affected, error),) = admin.delete_acls([kp_filter("User:bob")])
        assert error.errno == 0, error
        assert only("kp-", {kp_row(a) for a in affected}) == {bob_prefixed, bob_deny}
        eventually(lambda: only("kp-", kp_acls(admin, kp_filter())), {alice_read, alice_group})
        eventually(lambda: only("kp-", confluent_acls(confluent_admin, confluent_any())), {alice_read, alice_group})

        ((_, affected, error),) = admin.delete_acls([kp_filter("User:alice")])
        assert error.errno == 0, error
        eventually(lambda: only("kp-", kp_acls(admin, kp_filter())), set())
    finally:
        admin.close()
