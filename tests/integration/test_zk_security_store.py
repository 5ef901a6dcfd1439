"""ACLs and SCRAM credentials in ZooKeeper, as Kafka's ZK mode keeps them, through
ZkMetadataStore against a real ZooKeeper server.

Two stores in one test are two ZooKeeper sessions (as two brokers are): what one writes must
be in the other's cache within a second, through the change notifications. A plain kazoo client
reads the znodes back and compares them with Kafka's formats, and plays Kafka's own tools
writing them. The expected paths and JSON were written by hand from Kafka's
core/src/main/scala/kafka/zk/ZkData.scala (LiteralAclStore, ExtendedAclStore,
LiteralAclChangeStore, ExtendedAclChangeStore, ConfigEntityZNode,
ConfigEntityChangeNotificationSequenceZNode), kafka/security/authorizer/AclEntry.scala and
clients' Sanitizer.java.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, AsyncIterator, Callable, Coroutine, TypeVar

import pytest
from kazoo.client import KazooClient

from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.support.zookeeper import ZooKeeperServer, zookeeper  # noqa: F401  (fixture)
from zkcoord import zk_paths as zp
from zkcoord.store import AclBinding, AclsChanged, BrokerInfo, UserScramCredentialsChanged
from zkcoord.zookeeper import ZkMetadataStore

pytestmark = pytest.mark.timeout(120)
CHROOT = "/strom"
T = TypeVar("T")

CRED_256 = "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
CRED_512 = "salt=c2FsdDI=,stored_key=c3RvcmVkMg==,server_key=c2VydmVyMg==,iterations=8192"


def run(coro: Coroutine[Any, Any, T], timeout: float = 90.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def acl(name: str = "orders", op: AclOperation = AclOperation.READ,
        principal: str = "User:alice", pattern: PatternType = PatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW,
        rtype: ResourceType = ResourceType.TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def store(zk: ZooKeeperServer, broker_id: int) -> ZkMetadataStore:
    return ZkMetadataStore(zk.connect_string_for(CHROOT),
                           BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id),
                           session_timeout_ms=6000, connection_timeout_ms=10000)


async def within(seconds: float, pred: Callable[[], bool], what: str) -> float:
    """Wait for `pred`; fail unless it holds within `seconds`. Returns the time it took."""
    start = time.monotonic()
    while not pred():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"not within {seconds}s: {what}")
        await asyncio.sleep(0.005)
    return time.monotonic() - start


class Raw:
    """A plain kazoo client in the chroot, its blocking calls run off the loop."""

    def __init__(self, zk: ZooKeeperServer):
        self.client = KazooClient(hosts=zk.connect_string_for(CHROOT))
        self.client.start(10)

    async def __call__(self, method: str, *args: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(getattr(self.client, method), *args, **kw)

    async def json(self, path: str) -> Any:
        data, _ = await self("get", path)
        return json.loads(data)

    async def notifications(self, root: str) -> list[bytes]:
        names = sorted(await self("get_children", root))
        return [(await self("get", f"{root}/{n}"))[0] for n in names]

    def close(self) -> None:
        self.client.stop()
        self.client.close()


# ------------------------------------------------------------------ the formats, sans-io

def test_acl_paths_and_json_are_kafkas() -> None:
    topic = zp.AclResource(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    txn = zp.AclResource(ResourceType.TRANSACTIONAL_ID, "tx-", PatternType.PREFIXED)
    assert zp.acl_resource_path(topic) == "/kafka-acl/Topic/orders"
    assert zp.acl_resource_path(txn) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    assert zp.acl_change_create_path(PatternType.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert (zp.acl_change_create_path(PatternType.PREFIXED)
            == "/kafka-acl-extended-changes/acl_changes_")
    assert "/kafka-acl/DelegationToken" in zp.ACL_PERSISTENT_PATHS
    assert "/kafka-acl-extended/prefixed/User" in zp.ACL_PERSISTENT_PATHS

    # Kafka's LiteralAclChangeStore writes ResourceType.toString (the Java enum name)
    assert zp.encode_acl_change(topic) == b"TOPIC:orders"
    assert json.loads(zp.encode_acl_change(txn)) == {
        "version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-", "patternType": "PREFIXED"}
    for r in (topic, txn):
        assert zp.decode_acl_change(zp.acl_change_root(r.pattern_type),
                                    zp.encode_acl_change(r)) == r
    # older brokers wrote the title; a group name may hold ':' (Kafka splits at the first)
    assert zp.decode_acl_change(zp.KAFKA_ACL_CHANGES, b"Group:PREFIXED:g:1") == zp.AclResource(
        ResourceType.GROUP, "PREFIXED:g:1", PatternType.LITERAL)

    entries = [zp.AclEntry("User:bob", AclPermissionType.DENY, AclOperation.IDEMPOTENT_WRITE,
                           "10.0.0.1"),
               zp.AclEntry("User:alice", AclPermissionType.ALLOW, AclOperation.READ, "*")]
    data = zp.encode_acls(entries)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite",
         "host": "10.0.0.1"}]}
    assert b" " not in data                      # compact, as Jackson writes it
    assert zp.decode_acls(data) == frozenset(entries)
    with pytest.raises(ValueError):
        zp.acl_resource_path(zp.AclResource(ResourceType.GROUP, "a/b", PatternType.LITERAL))


def test_user_names_are_sanitized_as_kafka_does() -> None:
    assert zp.user_config_path("alice") == "/config/users/alice"
    assert zp.sanitize("a b*c+d/é~") == "a%20b%2Ac%2Bd%2F%C3%A9%7E"
    assert zp.desanitize("a%20b%2Ac%2Bd%2F%C3%A9%7E") == "a b*c+d/é~"
    assert zp.user_entity_path("CN=x,O=y") == "users/CN%3Dx%2CO%3Dy"
    assert zp.user_of_entity_path("users/CN%3Dx%2CO%3Dy") == "CN=x,O=y"
    assert zp.user_of_entity_path("users/alice/clients/c1") is None     # a quota entity
    assert zp.user_of_entity_path("topics/alice") is None


@contextlib.asynccontextmanager
async def two_stores(zookeeper: ZooKeeperServer) -> AsyncIterator[tuple[ZkMetadataStore, ZkMetadataStore, "Raw"]]:
    """Two brokers' stores on one ZooKeeper, started, and a raw kazoo view of the znodes."""
    a, b = store(zookeeper, 1), store(zookeeper, 2)
    await a.start()
    await b.start()
    raw = Raw(zookeeper)
    try:
        yield a, b, raw
    finally:
        raw.close()
        await a.stop()
        await b.stop()


# ------------------------------------------------------------------ ACLs through ZooKeeper

def test_acls_reach_the_other_broker_within_a_second_in_kafkas_znodes(
        zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        async with two_stores(zookeeper) as (a, b, raw):
            b_events: list[object] = []
            b.subscribe(b_events.append)
            read = acl()
            write = acl(op=AclOperation.WRITE, host="10.0.0.7")
            prefixed = acl("billing-", AclOperation.READ, "User:bob", PatternType.PREFIXED,
                           AclPermissionType.DENY, ResourceType.GROUP)
            await a.create_acls([read, write, prefixed])
            assert set(a.acls()) == {read, write, prefixed}      # the writer's own cache, at once
            took = await within(1.0, lambda: set(b.acls()) == {read, write, prefixed},
                                "ACLs created through broker 1 in broker 2's cache")
            assert AclsChanged() in b_events
            print(f"ACLs visible on the other broker after {took * 1000:.0f} ms")

            assert await raw.json("/kafka-acl/Topic/orders") == {"version": 1, "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                 "host": "*"},
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Write",
                 "host": "10.0.0.7"}]}
            assert await raw.json("/kafka-acl-extended/prefixed/Group/billing-") == {
                "version": 1, "acls": [{"principal": "User:bob", "permissionType": "Deny",
                                        "operation": "Read", "host": "*"}]}
            assert await raw("exists", "/kafka-acl/Group/billing-") is None
            assert await raw.notifications("/kafka-acl-changes") == [b"TOPIC:orders"]
            assert [json.loads(n) for n in await raw.notifications("/kafka-acl-extended-changes")
                    ] == [{"version": 1, "resourceType": "GROUP", "name": "billing-",
                           "patternType": "PREFIXED"}]
            names = await raw("get_children", "/kafka-acl-changes")
            assert len(names) == 1 and names[0].startswith("acl_changes_") and \
                len(names[0]) == len("acl_changes_") + 10

            # Deleting one ACL rewrites the node; deleting the last one removes it.
            await b.delete_acls([write, acl("never-created")])
            await within(1.0, lambda: set(a.acls()) == {read, prefixed}, "delete seen by a")
            assert [e["operation"] for e in (await raw.json("/kafka-acl/Topic/orders"))["acls"]
                    ] == ["Read"]
            await a.delete_acls([read, prefixed])
            assert await raw("exists", "/kafka-acl/Topic/orders") is None
            assert await raw("exists", "/kafka-acl-extended/prefixed/Group/billing-") is None
            await within(1.0, lambda: b.acls() == [], "last deletes seen by b")
            assert len(await raw("get_children", "/kafka-acl-changes")) == 3

    run(main())


def test_concurrent_adds_to_one_resource_from_two_brokers_all_land(
        zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        async with two_stores(zookeeper) as (a, b, raw):
            from_a = [acl(principal=f"User:a{i}") for i in range(15)]
            from_b = [acl(principal=f"User:b{i}") for i in range(15)]
            await asyncio.gather(*(a.create_acls([x]) for x in from_a),
                                 *(b.create_acls([x]) for x in from_b))
            stored = (await raw.json("/kafka-acl/Topic/orders"))["acls"]
            assert sorted(e["principal"] for e in stored) == sorted(
                x.principal for x in from_a + from_b)
            everything = set(from_a + from_b)
            await within(1.0, lambda: set(a.acls()) == everything == set(b.acls()),
                         "both caches hold all 30 ACLs")

            await asyncio.gather(*(a.delete_acls([x]) for x in from_a),
                                 *(b.delete_acls([x]) for x in from_b))
            assert await raw("exists", "/kafka-acl/Topic/orders") is None
            await within(1.0, lambda: a.acls() == [] == b.acls(), "both caches empty")

    run(main())


def test_acls_written_by_kafkas_tools_are_followed_and_loaded_at_start(
        zookeeper: ZooKeeperServer) -> None:
    """What Kafka's own AclAuthorizer (say, kafka-acls.sh --authorizer-properties
    zookeeper.connect=...) leaves in ZooKeeper is read, at start and through notifications."""
    async def main() -> None:
        a = store(zookeeper, 1)
        await a.start()
        raw = Raw(zookeeper)
        try:
            await raw("create", "/kafka-acl/Cluster/kafka-cluster", json.dumps(
                {"version": 1, "acls": [{"host": "*", "permissionType": "Allow",
                                         "operation": "ClusterAction",
                                         "principal": "User:broker"}]}).encode())
            await raw("create", "/kafka-acl-changes/acl_changes_", b"CLUSTER:kafka-cluster",
                      sequence=True)
            cluster = acl("kafka-cluster", AclOperation.CLUSTER_ACTION, "User:broker",
                          rtype=ResourceType.CLUSTER)
            await within(1.0, lambda: a.acls() == [cluster], "a tool's ACL in the cache")

            late = store(zookeeper, 2)       # a broker that starts later loads everything
            await late.start()
            assert late.acls() == [cluster]
            await late.stop()
        finally:
            raw.close()
            await a.stop()

    run(main())


def test_old_change_notifications_are_purged(zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        async with two_stores(zookeeper) as (a, b, raw):
            for notes in b.acl_store.changes.values():
                notes.expiry_ms = 300        # Kafka's is 15 minutes
            b.user_store.changes.expiry_ms = 300
            await a.create_acls([acl("first")])
            await a.alter_user_scram_credentials("alice", {"SCRAM-SHA-256": CRED_256})
            first = await raw("get_children", "/kafka-acl-changes")
            first_config = await raw("get_children", "/config/changes")
            await asyncio.sleep(0.6)
            await a.create_acls([acl("second")])
            await a.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": CRED_256})
            await within(1.0, lambda: len(b.acls()) == 2 and "bob" in b.scram_users(),
                         "second changes followed by b")

            async def purged(root: str, old: list[str]) -> bool:
                return not set(old) & set(await raw("get_children", root))

            for _ in range(100):
                if (await purged("/kafka-acl-changes", first)
                        and await purged("/config/changes", first_config)):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("notifications older than the expiry were not purged")

    run(main())


# ------------------------------------------------------------------ SCRAM credentials

def test_scram_credentials_round_trip_with_kafkas_config_znodes(
        zookeeper: ZooKeeperServer) -> None:
    async def main() -> None:
        async with two_stores(zookeeper) as (a, b, raw):
            b_events: list[object] = []
            b.subscribe(b_events.append)
            # a quota someone set for alice must survive credential changes
            await raw("create", "/config/users/alice",
                      b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
            await a.alter_user_scram_credentials("alice", {"SCRAM-SHA-256": CRED_256,
                                                           "SCRAM-SHA-512": CRED_512})
            assert a.user_scram_credentials("alice") == {"SCRAM-SHA-256": CRED_256,
                                                         "SCRAM-SHA-512": CRED_512}
            await within(1.0, lambda: b.user_scram_credentials("alice") == {
                "SCRAM-SHA-256": CRED_256, "SCRAM-SHA-512": CRED_512},
                "credentials written through broker 1 on broker 2")
            assert UserScramCredentialsChanged("alice") in b_events
            assert await raw.json("/config/users/alice") == {"version": 1, "config": {
                "producer_byte_rate": "1024", "SCRAM-SHA-256": CRED_256,
                "SCRAM-SHA-512": CRED_512}}
            notes = [json.loads(n) for n in await raw.notifications("/config/changes")]
            assert notes == [{"version": 2, "entity_path": "users/alice"}]

            await b.alter_user_scram_credentials("alice", {"SCRAM-SHA-256": None})
            await within(1.0, lambda: a.user_scram_credentials("alice") == {
                "SCRAM-SHA-512": CRED_512}, "a mechanism deleted through broker 2")
            assert await raw.json("/config/users/alice") == {"version": 1, "config": {
                "producer_byte_rate": "1024", "SCRAM-SHA-512": CRED_512}}
            await a.alter_user_scram_credentials("alice", {"SCRAM-SHA-512": None})
            await within(1.0, lambda: "alice" not in b.scram_users(), "alice has none left")
            assert (await raw.json("/config/users/alice"))["config"] == {
                "producer_byte_rate": "1024"}

            # a principal name that is no plain znode name is sanitized as Kafka does
            await a.alter_user_scram_credentials("CN=svc,O=acme", {"SCRAM-SHA-512": CRED_512})
            assert (await raw.json("/config/users/CN%3Dsvc%2CO%3Dacme"))["config"] == {
                "SCRAM-SHA-512": CRED_512}
            await within(1.0, lambda: b.scram_users() == {
                "CN=svc,O=acme": {"SCRAM-SHA-512": CRED_512}}, "sanitized user on b")
            assert json.loads((await raw.notifications("/config/changes"))[-1]) == {
                "version": 2, "entity_path": "users/CN%3Dsvc%2CO%3Dacme"}

            # a tool writing the config and the notification (kafka-configs.sh --zookeeper)
            await raw("create", "/config/users/carol",
                      f'{{"version":1,"config":{{"SCRAM-SHA-256":"{CRED_256}"}}}}'.encode())
            await raw("create", "/config/changes/config_change_",
                      b'{"version":2,"entity_path":"users/carol"}', sequence=True)
            await within(1.0, lambda: b.user_scram_credentials("carol") == {
                "SCRAM-SHA-256": CRED_256}, "a tool's credentials on b")

            late = store(zookeeper, 3)
            await late.start()
            assert late.scram_users() == b.scram_users() == a.scram_users()
            await late.stop()

    run(main())
