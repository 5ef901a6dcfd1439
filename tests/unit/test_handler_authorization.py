"""Every handler asks the authorizer what Kafka's KafkaApis asks, and answers a refusal with
Kafka's error and no effect: a whole standalone broker in the test's event loop, driven
through its real Dispatcher (requests encoded, responses decoded), with a table of allowed
(principal, operation, resource type, name) standing in for the ACL authorizer. For each
API a principal without the permission is refused and one with it is served.

The table is exact: it implies nothing (Describe is not implied by Read here), so each test
grants precisely what the handler must ask for."""
from __future__ import annotations

import asyncio
import os
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from broker.config import BrokerConfig
from broker.main import Broker
from broker.server.dispatch import Dispatcher
from broker.server.network import ConnectionInfo
from clients.protocol.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Rt
from clients.protocol.errors import Code
from clients.protocol.headers import decode_response_header
from clients.protocol.messages import API_BY_NAME
from clients.protocol.records import Record, build_batch, records_from_fetch
from clients.protocol.schema import Struct
from clients.protocol.types import DeferredBytes, Reader
from zkcoord.store import TopicMetadata
from tests.support.in_process_broker import answer, request_frame

ALICE = "User:alice"
ADMIN = "User:admin"          # allowed everything by the table (a super user)
NO_OPERATIONS = -2147483648
TOPIC_OPS = (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
             Op.ALTER_CONFIGS)


class AclTable:
    """The Authorizer Protocol over a set of allowed (principal, operation, type, name);
    records every question it is asked."""

    enabled = True

    def __init__(self) -> None:
        self.allowed: set[tuple[str, Op, Rt, str]] = set()
        self.asked: list[tuple[str, Op, Rt, str]] = []

    def allow(self, op: Op, rtype: Rt, name: str = CLUSTER_NAME, principal: str = ALICE) -> None:
        self.allowed.add((principal, op, rtype, name))

    def deny(self, op: Op, rtype: Rt, name: str = CLUSTER_NAME, principal: str = ALICE) -> None:
        self.allowed.discard((principal, op, rtype, name))

    def authorize(self, principal: str, host: str, operation: Op, resource_type: Rt, resource_name: str) -> bool:
        assert host == "127.0.0.1"
        self.asked.append((principal, operation, resource_type, resource_name))
        return principal == ADMIN or (principal, operation, resource_type, resource_name) in self.allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: Op, resource_type: Rt) -> bool:
        return principal == ADMIN or any(p == principal and o == operation and t == resource_type
                                         for p, o, t, _ in self.allowed)


class NothingAsked:
    """No authorizer configured: asking it anything is a bug."""

    enabled = False

    def authorize(self, *args: object) -> bool:
        raise AssertionError(f"asked {args} with no authorizer configured")

    def authorize_by_resource_type(self, *args: object) -> bool:
        raise AssertionError(f"asked {args} with no authorizer configured")


class Client:
    """Sends requests as one principal through the broker's Dispatcher."""

    def __init__(self, dispatch: Dispatcher, principal: str, listener: str = "PLAINTEXT"):
        self.dispatch = dispatch
        self.conn = ConnectionInfo(("127.0.0.1", 40000), listener)
        self.conn.principal = principal

    async def ask(self, api_name: str, body: dict, version: int) -> Struct:
        api = API_BY_NAME[api_name]
        response = await answer(self.dispatch, request_frame(api_name, body, version), self.conn)
        assert response is not None, f"{api_name} got no answer"
        data = b"".join(os.pread(c.fileno, c.size, c.position) if isinstance(c, DeferredBytes)  # type: ignore[attr-defined]
                        else bytes(c) for c in response.chunks)
        r = Reader(memoryview(data))
        decode_response_header(r, api.response_header_version(version))
        return api.decode_response(r, version)


@asynccontextmanager
async def secured(tmp_path: Path, topics: dict[str, int] | None = None
                  ) -> AsyncIterator[tuple[Broker, AclTable, Client, Client]]:
    """(broker, its ACL table, alice, admin): a standalone broker (in this event loop, no
    sockets) whose internal topics fit on it; topics t (2 partitions) and secret (1) exist."""
    broker = Broker(BrokerConfig.from_dict({
        "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0",
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "2",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "2", "group.initial.rebalance.delay.ms": "0"}))
    await broker.store.start()
    # What Broker.start does standalone before it listens: this broker is the cluster.
    broker.metadata.brokers = {b.broker_id: b for b in broker.store.live_brokers()}
    broker.metadata.set_controller(broker.store.controller_id, 0)
    try:
        for name, partitions in (topics or {"t": 2, "secret": 1}).items():
            await broker.topic_admin.create(name, partitions, 1)
        # The coordinators' topics, as a client's first FindCoordinator would create them.
        assert await broker.group_coordinator.ensure_offsets_topic()
        assert await broker.txn_coordinator.state.ensure_topic()
        acls = AclTable()
        broker.services.authorizer = acls
        dispatch = Dispatcher(broker.services, broker.request_stats)
        yield broker, acls, Client(dispatch, ALICE), Client(dispatch, ADMIN)
    finally:
        broker.log_manager.close()
        await broker.store.stop()


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


def batch(n: int = 3, **kw) -> bytes:
    return build_batch([Record(None, b"v%d" % i) for i in range(n)], **kw)


def produce_body(*targets: tuple[str, int], records: bytes | None = None, transactional_id=None) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, p in targets:
        by_topic.setdefault(topic, []).append(p)
    return {"transactional_id": transactional_id, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": t, "partition_data": [{"index": p, "records": records or batch()} for p in ps]}
        for t, ps in by_topic.items()]}


def fetch_body(*targets: tuple[str, int], replica_id: int = -1, session_id: int = 0, epoch: int = -1) -> dict:
    by_topic: dict[str, list[int]] = {}
    for topic, p in targets:
        by_topic.setdefault(topic, []).append(p)
    return {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for p in ps]} for t, ps in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""}


def codes(response_topics, name_key: str = "name", parts_key: str = "partitions",
          index_key: str = "partition_index", code_key: str = "error_code") -> dict[tuple[str, int], int]:
    return {(t[name_key], p[index_key]): p[code_key] for t in response_topics for p in t[parts_key]}


def records_of(fetch_response) -> dict[tuple[str, int], int]:
    """(topic, partition) -> number of records the fetch answer carries."""
    out = {}
    for t in fetch_response.responses:
        for p in t.partitions:
            data = p.records or b""
            out[(t.topic, p.partition_index)] = sum(1 for _ in records_from_fetch(bytes(data)))
    return out


def topic(broker: Broker, name: str) -> TopicMetadata:
    meta = broker.store.topic(name)
    assert meta is not None, f"no topic {name}"
    return meta


def end_offset(broker: Broker, topic: str, partition: int = 0) -> int:
    return broker.replicas.get(topic, partition).log.log_end_offset


def bits(*ops: Op) -> int:
    return sum(1 << int(op) for op in ops)


# ---------------------------------------------------------------------------- Produce, Fetch

def test_produce_needs_write_on_each_topic_asked_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.WRITE, Rt.TOPIC, "t")
            r = await alice.ask("Produce", produce_body(("t", 0), ("t", 1), ("secret", 0), ("ghost", 0)), 9)
            got = codes(r.responses, parts_key="partition_responses", index_key="index")
            assert got == {("t", 0): 0, ("t", 1): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED,
                           # a topic that does not exist is refused alike: its absence is not told
                           ("ghost", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            assert end_offset(broker, "t", 0) == 3 and end_offset(broker, "secret") == 0
            assert broker.store.topic("ghost") is None
            # once per topic, never per partition
            assert acls.asked.count((ALICE, Op.WRITE, Rt.TOPIC, "t")) == 1
    run(main())


def test_transactional_produce_needs_write_on_its_transactional_id(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.WRITE, Rt.TOPIC, "t")
            txn = batch(producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
            r = await alice.ask("Produce", produce_body(("t", 0), ("t", 1), records=txn, transactional_id="tx"), 9)
            got = codes(r.responses, parts_key="partition_responses", index_key="index")
            assert got == {("t", 0): Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           ("t", 1): Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            assert end_offset(broker, "t", 0) == end_offset(broker, "t", 1) == 0
            # Not transactional batches: the transactional id is not asked about.
            r = await alice.ask("Produce", produce_body(("t", 0), transactional_id="tx"), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
    run(main())


def test_fetch_needs_read_on_each_topic_and_refused_partitions_carry_no_data(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0)), 9)
            acls.allow(Op.READ, Rt.TOPIC, "t")
            r = await alice.ask("Fetch", fetch_body(("t", 0), ("secret", 0), ("ghost", 0)), 12)
            got = codes(r.responses, name_key="topic", code_key="error_code")
            assert got == {("t", 0): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED,
                           ("ghost", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            assert records_of(r) == {("t", 0): 3, ("secret", 0): 0, ("ghost", 0): 0}
            secret = next(p for t in r.responses if t.topic == "secret" for p in t.partitions)
            assert secret.high_watermark == -1     # nothing about the partition is told
    run(main())


def test_a_fetch_session_never_serves_a_refused_partition_and_sees_a_revoked_acl(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0)), 9)
            acls.allow(Op.READ, Rt.TOPIC, "t")
            first = await alice.ask("Fetch", fetch_body(("t", 0), ("secret", 0), epoch=0), 12)
            assert first.session_id != 0
            assert records_of(first) == {("t", 0): 3, ("secret", 0): 0}
            # An incremental fetch names no partition: the session's are read, the refused one
            # answered with its error again, never with its records.
            r = await alice.ask("Fetch", fetch_body(session_id=first.session_id, epoch=1), 12)
            assert codes(r.responses, name_key="topic").get(("secret", 0)) == Code.TOPIC_AUTHORIZATION_FAILED
            assert records_of(r).get(("secret", 0), 0) == 0
            # Read on t revoked mid-session: the next request of the session is refused too.
            acls.deny(Op.READ, Rt.TOPIC, "t")
            body = fetch_body(("t", 0), session_id=first.session_id, epoch=2)   # rewinds to offset 0
            r = await alice.ask("Fetch", body, 12)
            assert codes(r.responses, name_key="topic") == {("t", 0): Code.TOPIC_AUTHORIZATION_FAILED,
                                                           ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            assert sum(records_of(r).values()) == 0
    run(main())


def test_a_replica_fetch_needs_cluster_action_cve_2018_1288(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0)), 9)
            acls.allow(Op.READ, Rt.TOPIC, "t")
            acls.allow(Op.READ, Rt.TOPIC, "secret")
            p = broker.replicas.get("t", 0)
            followers_before = {r: (f.log_end_offset, f.last_caught_up_time) for r, f in p.followers.items()}
            # A consumer's Read does not make it a follower: every partition refused, no data.
            r = await alice.ask("Fetch", fetch_body(("t", 0), ("secret", 0), replica_id=7), 12)
            assert codes(r.responses, name_key="topic") == {("t", 0): Code.TOPIC_AUTHORIZATION_FAILED,
                                                           ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            assert sum(records_of(r).values()) == 0
            # no follower position recorded (a fake follower could move the high watermark)
            assert {r: (f.log_end_offset, f.last_caught_up_time) for r, f in p.followers.items()} == followers_before
            acls.allow(Op.CLUSTER_ACTION, Rt.CLUSTER)
            r = await alice.ask("Fetch", fetch_body(("t", 0), replica_id=7), 12)
            assert codes(r.responses, name_key="topic")[("t", 0)] != Code.TOPIC_AUTHORIZATION_FAILED
    run(main())


def test_with_no_authorizer_produce_and_fetch_ask_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, _, alice, _a):
            broker.services.authorizer = NothingAsked()
            r = await alice.ask("Produce", produce_body(("t", 0)), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
            r = await alice.ask("Fetch", fetch_body(("t", 0)), 12)
            assert records_of(r) == {("t", 0): 3}
            r = await alice.ask("Metadata", {"topics": None, "include_topic_authorized_operations": True}, 9)
            # Kafka without an authorizer: every operation the type supports.
            assert {t.name: t.topic_authorized_operations for t in r.topics}["t"] == bits(*TOPIC_OPS)
    run(main())


# ---------------------------------------------------------------------------- Metadata

def test_metadata_lists_only_describable_topics_and_refuses_named_ones_alike(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "t")
            r = await alice.ask("Metadata", {"topics": None}, 9)
            assert [t.name for t in r.topics] == ["t"]
            assert r.topics[0].topic_authorized_operations == NO_OPERATIONS   # not asked for
            r = await alice.ask("Metadata", {"topics": [{"name": "secret"}, {"name": "ghost"}, {"name": "t"}],
                                             "allow_auto_topic_creation": False}, 9)
            assert [(t.name, t.error_code) for t in r.topics] == [
                ("secret", Code.TOPIC_AUTHORIZATION_FAILED), ("ghost", Code.TOPIC_AUTHORIZATION_FAILED), ("t", 0)]
            assert r.topics[0].partitions == [] and r.topics[0].topic_id == uuid.UUID(int=0)
            # v0: an empty list is every topic
            r = await alice.ask("Metadata", {"topics": []}, 0)
            assert [t.name for t in r.topics] == ["t"]
    run(main())


def test_metadata_auto_creation_needs_create_on_the_cluster_or_the_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            for name in ("new1", "new2"):
                acls.allow(Op.DESCRIBE, Rt.TOPIC, name)
            body = {"topics": [{"name": "new1"}], "allow_auto_topic_creation": True}
            r = await alice.ask("Metadata", body, 9)
            assert r.topics[0].error_code == Code.TOPIC_AUTHORIZATION_FAILED
            assert broker.store.topic("new1") is None
            acls.allow(Op.CREATE, Rt.TOPIC, "new1")
            r = await alice.ask("Metadata", body, 9)
            assert r.topics[0].error_code in (0, Code.LEADER_NOT_AVAILABLE)
            assert broker.store.topic("new1") is not None
            acls.allow(Op.CREATE, Rt.CLUSTER)
            r = await alice.ask("Metadata", {"topics": [{"name": "new2"}], "allow_auto_topic_creation": True}, 9)
            assert broker.store.topic("new2") is not None
    run(main())


def test_metadata_by_topic_id_tells_the_id_never_the_name(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            secret_id = topic(broker, "secret").topic_id
            r = await alice.ask("Metadata", {"topics": [{"name": None, "topic_id": secret_id}]}, 12)
            assert (r.topics[0].error_code, r.topics[0].name, r.topics[0].topic_id) == (
                Code.TOPIC_AUTHORIZATION_FAILED, None, secret_id)
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "secret")
            r = await alice.ask("Metadata", {"topics": [{"name": None, "topic_id": secret_id}]}, 12)
            assert (r.topics[0].error_code, r.topics[0].name) == (0, "secret")
    run(main())


def test_metadata_and_describe_cluster_authorized_operations(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "t")
            acls.allow(Op.READ, Rt.TOPIC, "t")
            r = await alice.ask("Metadata", {"topics": None, "include_cluster_authorized_operations": True,
                                             "include_topic_authorized_operations": True}, 10)
            assert r.topics[0].topic_authorized_operations == bits(Op.DESCRIBE, Op.READ)
            assert r.cluster_authorized_operations == 0          # no Describe on the cluster
            r = await alice.ask("DescribeCluster", {"include_cluster_authorized_operations": True}, 0)
            assert r.cluster_authorized_operations == 0
            acls.allow(Op.DESCRIBE, Rt.CLUSTER)
            acls.allow(Op.ALTER_CONFIGS, Rt.CLUSTER)
            r = await alice.ask("DescribeCluster", {"include_cluster_authorized_operations": True}, 0)
            assert r.cluster_authorized_operations == bits(Op.DESCRIBE, Op.ALTER_CONFIGS)
            r = await alice.ask("DescribeCluster", {"include_cluster_authorized_operations": False}, 0)
            assert r.cluster_authorized_operations == NO_OPERATIONS
    run(main())


def test_clients_get_the_addresses_of_the_listener_they_came_in_on(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, _, admin):
            broker.metadata.this_endpoints = {"PLAINTEXT": ("127.0.0.1", 9092), "EXTERNAL": ("ext.example", 19092)}
            external = Client(admin.dispatch, ADMIN, listener="EXTERNAL")
            for client, expected in ((admin, ("127.0.0.1", 9092)), (external, ("ext.example", 19092))):
                r = await client.ask("Metadata", {"topics": None}, 9)
                assert [(b.host, b.port) for b in r.brokers] == [expected]
                r = await client.ask("DescribeCluster", {}, 0)
                assert [(b.host, b.port) for b in r.brokers] == [expected]
                r = await client.ask("FindCoordinator", {"key_type": 0, "coordinator_keys": ["g"]}, 4)
                assert (r.coordinators[0].error_code, r.coordinators[0].host, r.coordinators[0].port) == (
                    0, *expected)
    run(main())


# ---------------------------------------------------------------------------- offsets

def test_list_offsets_and_offset_for_leader_epoch_need_describe(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0)), 9)
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "t")
            body = {"replica_id": -1, "topics": [{"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                                                 for n in ("t", "secret")]}
            r = await alice.ask("ListOffsets", body, 7)
            assert {(t.name, t.partitions[0].error_code, t.partitions[0].offset) for t in r.topics} == {
                ("t", 0, 3), ("secret", Code.TOPIC_AUTHORIZATION_FAILED, -1)}
            body = {"replica_id": -1, "topics": [{"topic": n, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]} for n in ("t", "secret")]}
            r = await alice.ask("OffsetForLeaderEpoch", body, 4)
            assert {(t.topic, t.partitions[0].error_code) for t in r.topics} == {
                ("t", 0), ("secret", Code.TOPIC_AUTHORIZATION_FAILED)}
            # A follower's ClusterAction covers every topic.
            acls.allow(Op.CLUSTER_ACTION, Rt.CLUSTER)
            r = await alice.ask("OffsetForLeaderEpoch", body, 4)
            assert {(t.topic, t.partitions[0].error_code, t.partitions[0].end_offset) for t in r.topics} == {
                ("t", 0, 3), ("secret", 0, 3)}
    run(main())


def test_delete_records_needs_delete_on_the_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0)), 9)
            acls.allow(Op.DELETE, Rt.TOPIC, "t")
            body = {"topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": 2}]} for n in ("t", "secret")],
                    "timeout_ms": 1000}
            r = await alice.ask("DeleteRecords", body, 2)
            assert codes(r.topics) == {("t", 0): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            assert broker.replicas.get("t", 0).log.log_start_offset == 2
            assert broker.replicas.get("secret", 0).log.log_start_offset == 0
    run(main())


# ---------------------------------------------------------------------------- groups

def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.DESCRIBE, Rt.GROUP, "g")
            acls.allow(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, "tx")
            r = await alice.ask("FindCoordinator", {"key_type": 0, "coordinator_keys": ["g", "other"]}, 4)
            assert [(c.key, c.error_code) for c in r.coordinators] == [("g", 0), ("other", Code.GROUP_AUTHORIZATION_FAILED)]
            assert r.coordinators[1].node_id == -1
            r = await alice.ask("FindCoordinator", {"key_type": 1, "coordinator_keys": ["tx", "ty"]}, 4)
            assert [c.error_code for c in r.coordinators] == [0, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
            r = await alice.ask("FindCoordinator", {"key": "other", "key_type": 0}, 3)
            assert (r.error_code, r.node_id) == (Code.GROUP_AUTHORIZATION_FAILED, -1)
    run(main())


JOIN = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        "reason": None}


def test_group_membership_needs_read_on_the_group(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            r = await alice.ask("JoinGroup", JOIN, 9)
            assert (r.error_code, r.member_id) == (Code.GROUP_AUTHORIZATION_FAILED, "")
            assert broker.group_coordinator.groups.get("g") is None
            sync = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
                    "protocol_type": "consumer", "protocol_name": "range", "assignments": []}
            assert (await alice.ask("SyncGroup", sync, 5)).error_code == Code.GROUP_AUTHORIZATION_FAILED
            hb = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
            assert (await alice.ask("Heartbeat", hb, 4)).error_code == Code.GROUP_AUTHORIZATION_FAILED
            leave = {"group_id": "g", "members": [{"member_id": "m", "group_instance_id": None}]}
            assert (await alice.ask("LeaveGroup", leave, 5)).error_code == Code.GROUP_AUTHORIZATION_FAILED

            acls.allow(Op.READ, Rt.GROUP, "g")
            r = await alice.ask("JoinGroup", JOIN, 9)
            assert r.error_code == Code.MEMBER_ID_REQUIRED
            r = await alice.ask("JoinGroup", {**JOIN, "member_id": r.member_id}, 9)
            assert r.error_code == 0, r
            member, generation = r.member_id, r.generation_id
            r = await alice.ask("SyncGroup", {**sync, "member_id": member, "generation_id": generation,
                                              "assignments": [{"member_id": member, "assignment": b"a"}]}, 5)
            assert (r.error_code, r.assignment) == (0, b"a")
            r = await alice.ask("Heartbeat", {**hb, "member_id": member, "generation_id": generation}, 4)
            assert r.error_code == 0
            r = await alice.ask("LeaveGroup", {**leave, "members": [{"member_id": member, "group_instance_id": None}]}, 5)
            assert r.error_code == 0 and r.members[0].error_code == 0
    run(main())


def test_describe_list_and_delete_groups(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            for g in ("g1", "g2"):
                commit = {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
                    {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]}
                assert codes((await admin.ask("OffsetCommit", commit, 8)).topics) == {("t", 0): 0}
            acls.allow(Op.DESCRIBE, Rt.GROUP, "g1")
            r = await alice.ask("DescribeGroups", {"groups": ["g1", "g2"], "include_authorized_operations": True}, 5)
            assert [(g.group_id, g.error_code) for g in r.groups] == [("g1", 0), ("g2", Code.GROUP_AUTHORIZATION_FAILED)]
            assert r.groups[0].authorized_operations == bits(Op.DESCRIBE)
            assert r.groups[1].authorized_operations == NO_OPERATIONS
            r = await alice.ask("ListGroups", {}, 4)
            assert sorted(g.group_id for g in r.groups) == ["g1"]
            acls.allow(Op.DESCRIBE, Rt.CLUSTER)
            r = await alice.ask("ListGroups", {}, 4)
            assert sorted(g.group_id for g in r.groups) == ["g1", "g2"]
            acls.allow(Op.DELETE, Rt.GROUP, "g1")
            r = await alice.ask("DeleteGroups", {"groups_names": ["g1", "g2"]}, 2)
            assert [(x.group_id, x.error_code) for x in r.results] == [("g1", 0), ("g2", Code.GROUP_AUTHORIZATION_FAILED)]
            r = await admin.ask("ListGroups", {}, 4)
            assert sorted(g.group_id for g in r.groups) == ["g2"]
    run(main())


def test_offset_commit_fetch_and_delete(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            commit: dict[str, Any] = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "committed_offset": 5}]} for n in ("t", "secret")]}
            r = await alice.ask("OffsetCommit", commit, 8)
            assert codes(r.topics) == {("t", 0): Code.GROUP_AUTHORIZATION_FAILED,
                                       ("secret", 0): Code.GROUP_AUTHORIZATION_FAILED}
            acls.allow(Op.READ, Rt.GROUP, "g")
            acls.allow(Op.READ, Rt.TOPIC, "t")
            r = await alice.ask("OffsetCommit", commit, 8)
            assert codes(r.topics) == {("t", 0): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            # admin commits secret's offset; alice must not learn it
            await admin.ask("OffsetCommit", {**commit, "topics": commit["topics"][1:]}, 8)

            fetch = {"groups": [{"group_id": "g", "topics": None}], "require_stable": False}
            r = await alice.ask("OffsetFetch", fetch, 8)
            assert r.groups[0].error_code == Code.GROUP_AUTHORIZATION_FAILED and r.groups[0].topics == []
            acls.allow(Op.DESCRIBE, Rt.GROUP, "g")
            r = await alice.ask("OffsetFetch", fetch, 8)
            assert r.groups[0].topics == []           # no Describe on any topic: nothing told
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "t")
            r = await alice.ask("OffsetFetch", fetch, 8)
            assert {(t.name, p.committed_offset) for t in r.groups[0].topics for p in t.partitions} == {("t", 5)}
            named = {"groups": [{"group_id": "g", "topics": [{"name": n, "partition_indexes": [0]}
                                                              for n in ("t", "secret")]}]}
            r = await alice.ask("OffsetFetch", named, 8)
            assert {(t.name, p.committed_offset, p.error_code) for t in r.groups[0].topics for p in t.partitions} == {
                ("t", 5, 0), ("secret", -1, Code.TOPIC_AUTHORIZATION_FAILED)}
            r = await alice.ask("OffsetFetch", {"group_id": "g", "topics": None}, 7)
            assert r.error_code == 0 and [t.name for t in r.topics] == ["t"]

            delete = {"group_id": "g", "topics": [{"name": n, "partitions": [{"partition_index": 0}]}
                                                  for n in ("t", "secret")]}
            r = await alice.ask("OffsetDelete", delete, 0)
            assert r.error_code == Code.GROUP_AUTHORIZATION_FAILED
            acls.allow(Op.DELETE, Rt.GROUP, "g")
            r = await alice.ask("OffsetDelete", delete, 0)
            assert r.error_code == 0
            assert codes(r.topics) == {("t", 0): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            r = await admin.ask("OffsetFetch", {"group_id": "g", "topics": None}, 7)
            assert {t.name for t in r.topics} == {"secret"}       # t's offset deleted, secret's kept
    run(main())


# ---------------------------------------------------------------------------- topics, configs

def test_create_topics_needs_create_and_tells_configs_only_with_describe_configs(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            body: dict[str, Any] = {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1}
                                               for n in ("a", "b", "c")],
                    "timeout_ms": 5000}
            acls.allow(Op.CREATE, Rt.TOPIC, "a")
            acls.allow(Op.CREATE, Rt.TOPIC, "b")
            acls.allow(Op.DESCRIBE_CONFIGS, Rt.TOPIC, "a")
            r = await alice.ask("CreateTopics", body, 7)
            got = {t.name: t for t in r.topics}
            assert [got[n].error_code for n in "abc"] == [0, 0, Code.TOPIC_AUTHORIZATION_FAILED]
            assert got["a"].num_partitions == 1 and got["a"].configs
            assert got["b"].num_partitions == -1 and got["b"].topic_config_error_code == Code.TOPIC_AUTHORIZATION_FAILED
            assert [broker.store.topic(n) is not None for n in "abc"] == [True, True, False]
            acls.allow(Op.CREATE, Rt.CLUSTER)
            r = await alice.ask("CreateTopics", {**body, "topics": body["topics"][2:]}, 7)
            assert r.topics[0].error_code == 0 and broker.store.topic("c") is not None
    run(main())


def test_delete_topics_needs_delete_and_by_id_describe(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path, {"t": 1, "secret": 1, "u": 1}) as (broker, acls, alice, _):
            secret_id = topic(broker, "secret").topic_id
            r = await alice.ask("DeleteTopics", {"topics": [{"name": "t"}, {"name": None, "topic_id": secret_id},
                                                            {"name": None, "topic_id": uuid.uuid4()}],
                                                 "timeout_ms": 5000}, 6)
            assert [(x.name, x.error_code) for x in r.responses] == [
                ("t", Code.TOPIC_AUTHORIZATION_FAILED), (None, Code.TOPIC_AUTHORIZATION_FAILED),
                (None, Code.UNKNOWN_TOPIC_ID)]
            # Describe tells the name; still no Delete
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "secret")
            r = await alice.ask("DeleteTopics", {"topics": [{"name": None, "topic_id": secret_id}], "timeout_ms": 5000}, 6)
            assert (r.responses[0].name, r.responses[0].error_code) == ("secret", Code.TOPIC_AUTHORIZATION_FAILED)
            acls.allow(Op.DELETE, Rt.TOPIC, "t")
            r = await alice.ask("DeleteTopics", {"topic_names": ["t", "u"], "timeout_ms": 5000}, 5)
            assert [(x.name, x.error_code) for x in r.responses] == [("t", 0), ("u", Code.TOPIC_AUTHORIZATION_FAILED)]
            assert broker.store.topic("t") is None and broker.store.topic("u") is not None
    run(main())


def test_create_partitions_needs_alter_on_the_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            acls.allow(Op.ALTER, Rt.TOPIC, "t")
            body = {"topics": [{"name": n, "count": 3, "assignments": None} for n in ("t", "secret")],
                    "timeout_ms": 5000, "validate_only": False}
            r = await alice.ask("CreatePartitions", body, 3)
            assert [(x.name, x.error_code) for x in r.results] == [("t", 0), ("secret", Code.TOPIC_AUTHORIZATION_FAILED)]
            assert len(topic(broker, "t").partitions) == 3 and len(topic(broker, "secret").partitions) == 1
    run(main())


def test_describe_and_alter_configs(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            describe = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None},
                                      {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
                                      {"resource_type": 4, "resource_name": str(broker.broker_id),
                                       "configuration_keys": None}]}
            acls.allow(Op.DESCRIBE_CONFIGS, Rt.TOPIC, "t")
            r = await alice.ask("DescribeConfigs", describe, 4)
            assert [x.error_code for x in r.results] == [0, Code.TOPIC_AUTHORIZATION_FAILED,
                                                         Code.CLUSTER_AUTHORIZATION_FAILED]
            assert r.results[0].configs and r.results[1].configs == [] and r.results[2].configs == []
            acls.allow(Op.DESCRIBE_CONFIGS, Rt.CLUSTER)
            r = await alice.ask("DescribeConfigs", describe, 4)
            assert r.results[2].error_code == 0 and r.results[2].configs

            alter = {"resources": [{"resource_type": 2, "resource_name": n,
                                    "configs": [{"name": "retention.ms", "value": "1000"}]} for n in ("t", "secret")],
                     "validate_only": False}
            acls.allow(Op.ALTER_CONFIGS, Rt.TOPIC, "t")
            r = await alice.ask("AlterConfigs", alter, 2)
            assert [x.error_code for x in r.responses] == [0, Code.TOPIC_AUTHORIZATION_FAILED]
            assert topic(broker, "t").configs.get("retention.ms") == "1000"
            assert "retention.ms" not in topic(broker, "secret").configs
            incremental = {"resources": [
                {"resource_type": 2, "resource_name": "secret",
                 "configs": [{"name": "retention.ms", "config_operation": 0, "value": "2000"}]},
                {"resource_type": 4, "resource_name": "",
                 "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "3000"}]}],
                "validate_only": True}
            r = await alice.ask("IncrementalAlterConfigs", incremental, 1)
            assert [x.error_code for x in r.responses] == [Code.TOPIC_AUTHORIZATION_FAILED,
                                                           Code.CLUSTER_AUTHORIZATION_FAILED]
            acls.allow(Op.ALTER_CONFIGS, Rt.TOPIC, "secret")
            acls.allow(Op.ALTER_CONFIGS, Rt.CLUSTER)
            r = await alice.ask("IncrementalAlterConfigs", incremental, 1)
            assert [x.error_code for x in r.responses] == [0, 0]
    run(main())


# ---------------------------------------------------------------------------- producers, transactions

def test_init_producer_id(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            idempotent = {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1,
                          "producer_epoch": -1}
            r = await alice.ask("InitProducerId", idempotent, 4)
            assert (r.error_code, r.producer_id) == (Code.CLUSTER_AUTHORIZATION_FAILED, -1)
            acls.allow(Op.WRITE, Rt.TOPIC, "t")          # KIP-679: Write on some topic is enough
            r = await alice.ask("InitProducerId", idempotent, 4)
            assert r.error_code == 0 and r.producer_id >= 0
            acls.deny(Op.WRITE, Rt.TOPIC, "t")
            acls.allow(Op.IDEMPOTENT_WRITE, Rt.CLUSTER)
            assert (await alice.ask("InitProducerId", idempotent, 4)).error_code == 0
            transactional = {**idempotent, "transactional_id": "tx", "transaction_timeout_ms": 60000}
            r = await alice.ask("InitProducerId", transactional, 4)
            assert (r.error_code, r.producer_id) == (Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
            assert broker.txn_coordinator.state.get("tx") is None
            acls.allow(Op.WRITE, Rt.TRANSACTIONAL_ID, "tx")
            r = await alice.ask("InitProducerId", transactional, 4)
            assert r.error_code == 0 and r.producer_id >= 0
    run(main())


def test_a_transaction_needs_write_on_its_id_and_its_topics_and_read_on_its_group(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            acls.allow(Op.WRITE, Rt.TRANSACTIONAL_ID, "tx")
            acls.allow(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, "tx")
            acls.allow(Op.WRITE, Rt.TOPIC, "t")
            r = await alice.ask("InitProducerId", {"transactional_id": "tx", "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1}, 4)
            assert r.error_code == 0
            pid, epoch = r.producer_id, r.producer_epoch
            add = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                   "v3_and_below_producer_epoch": epoch,
                   "v3_and_below_topics": [{"name": "t", "partitions": [0]}, {"name": "secret", "partitions": [0]}]}
            r = await alice.ask("AddPartitionsToTxn", add, 3)
            got = codes(r.results_by_topic_v3_and_below, parts_key="results_by_partition",
                        code_key="partition_error_code")
            assert got == {("t", 0): Code.OPERATION_NOT_ATTEMPTED, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}
            meta = broker.txn_coordinator.state.get("tx")
            assert meta is not None and meta.partitions == set()
            r = await alice.ask("AddPartitionsToTxn", {**add, "v3_and_below_topics": add["v3_and_below_topics"][:1]}, 3)
            assert codes(r.results_by_topic_v3_and_below, parts_key="results_by_partition",
                         code_key="partition_error_code") == {("t", 0): 0}
            # another transactional id: refused on every partition
            r = await alice.ask("AddPartitionsToTxn", {**add, "v3_and_below_transactional_id": "other"}, 3)
            assert set(codes(r.results_by_topic_v3_and_below, parts_key="results_by_partition",
                             code_key="partition_error_code").values()) == {Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}

            offsets = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
            assert (await alice.ask("AddOffsetsToTxn", offsets, 3)).error_code == Code.GROUP_AUTHORIZATION_FAILED
            assert (await alice.ask("AddOffsetsToTxn", {**offsets, "transactional_id": "other"}, 3)
                    ).error_code == Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            acls.allow(Op.READ, Rt.GROUP, "g")
            assert (await alice.ask("AddOffsetsToTxn", offsets, 3)).error_code == 0

            commit = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                      "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                          {"name": n, "partitions": [{"partition_index": 0, "committed_offset": 1}]}
                          for n in ("t", "secret")]}
            r = await alice.ask("TxnOffsetCommit", {**commit, "transactional_id": "other"}, 3)
            assert set(codes(r.topics).values()) == {Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
            acls.allow(Op.READ, Rt.TOPIC, "t")
            r = await alice.ask("TxnOffsetCommit", commit, 3)
            assert codes(r.topics) == {("t", 0): 0, ("secret", 0): Code.TOPIC_AUTHORIZATION_FAILED}

            # Describing: the transaction's topics are those alice may Describe.
            acls.allow(Op.DESCRIBE, Rt.TOPIC, "__consumer_offsets")
            r = await alice.ask("DescribeTransactions", {"transactional_ids": ["tx", "other"]}, 0)
            assert [(s.transactional_id, s.error_code) for s in r.transaction_states] == [
                ("tx", 0), ("other", Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
            assert {t.topic for t in r.transaction_states[0].topics} == {"__consumer_offsets"}
            r = await alice.ask("ListTransactions", {"state_filters": [], "producer_id_filters": []}, 0)
            assert [s.transactional_id for s in r.transaction_states] == ["tx"]
            r = await Client(alice.dispatch, "User:bob").ask("ListTransactions",
                                                             {"state_filters": [], "producer_id_filters": []}, 0)
            assert r.transaction_states == []

            end = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "committed": True}
            r = await alice.ask("EndTxn", {**end, "transactional_id": "other"}, 3)
            assert r.error_code == Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert (await alice.ask("EndTxn", end, 3)).error_code == 0
    run(main())


def test_broker_to_broker_transaction_apis_need_cluster_action(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            verify = {"transactions": [{"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                                        "verify_only": True, "topics": [{"name": "t", "partitions": [0]}]}]}
            acls.allow(Op.WRITE, Rt.TRANSACTIONAL_ID, "tx")
            acls.allow(Op.WRITE, Rt.TOPIC, "t")
            r = await alice.ask("AddPartitionsToTxn", verify, 4)
            assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED and r.results_by_transaction == []
            r = await admin.ask("AddPartitionsToTxn", verify, 4)
            assert r.error_code == 0 and len(r.results_by_transaction) == 1

            markers = {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True,
                                    "topics": [{"name": "t", "partition_indexes": [0]}], "coordinator_epoch": 0}]}
            r = await alice.ask("WriteTxnMarkers", markers, 1)
            assert r.markers[0].topics[0].partitions[0].error_code == Code.CLUSTER_AUTHORIZATION_FAILED
            assert end_offset(broker, "t") == 0                  # no marker written
            acls.allow(Op.CLUSTER_ACTION, Rt.CLUSTER)
            r = await alice.ask("WriteTxnMarkers", markers, 1)
            assert r.markers[0].topics[0].partitions[0].error_code == 0 and end_offset(broker, "t") == 1
    run(main())


def test_describe_producers_needs_read_on_the_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, admin):
            await admin.ask("Produce", produce_body(("t", 0), ("secret", 0),
                                                    records=batch(producer_id=9, producer_epoch=0, base_sequence=0)), 9)
            acls.allow(Op.READ, Rt.TOPIC, "t")
            r = await alice.ask("DescribeProducers", {"topics": [{"name": n, "partition_indexes": [0]}
                                                                 for n in ("t", "secret")]}, 0)
            got = {t.name: t.partitions[0] for t in r.topics}
            assert got["t"].error_code == 0 and [p.producer_id for p in got["t"].active_producers] == [9]
            assert got["secret"].error_code == Code.TOPIC_AUTHORIZATION_FAILED and got["secret"].active_producers == []
    run(main())


# ---------------------------------------------------------------------------- controller requests

def test_controller_requests_need_cluster_action_and_change_nothing_without_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            p = broker.replicas.get("t", 0)
            epoch_before, controller_epoch = p.leader_epoch, broker.replicas.controller_epoch
            state = {"topic_name": "t", "partition_index": 0, "controller_epoch": 99, "leader": 5,
                     "leader_epoch": p.leader_epoch + 10, "isr": [5], "zk_version": 1, "replicas": [5],
                     "adding_replicas": [], "removing_replicas": [], "is_new": False}
            lai = {"controller_id": 5, "controller_epoch": 99, "broker_epoch": -1, "type": 0,
                   "topic_states": [{"topic_name": "t", "topic_id": topic(broker, "t").topic_id,
                                     "partition_states": [state]}], "live_leaders": []}
            r = await alice.ask("LeaderAndIsr", lai, 5)
            assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
            assert r.topics[0].partition_errors[0].error_code == Code.CLUSTER_AUTHORIZATION_FAILED
            assert (p.leader_epoch, p.is_leader, broker.replicas.controller_epoch) == (
                epoch_before, True, controller_epoch)

            um = {"controller_id": 5, "controller_epoch": 99, "broker_epoch": -1, "topic_states": [],
                  "live_brokers": [{"id": 5, "endpoints": [{"port": 1, "host": "evil", "listener": "PLAINTEXT",
                                                            "security_protocol": 0}], "rack": None}]}
            r = await alice.ask("UpdateMetadata", um, 7)
            assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
            assert 5 not in broker.metadata.brokers and broker.metadata.controller_id != 5

            stop = {"controller_id": 5, "controller_epoch": 99, "broker_epoch": -1, "topic_states": [
                {"topic_name": "t", "partition_states": [{"partition_index": 0, "leader_epoch": -1,
                                                          "delete_partition": True}]}]}
            r = await alice.ask("StopReplica", stop, 3)
            assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
            assert [e.error_code for e in r.partition_errors] == [Code.CLUSTER_AUTHORIZATION_FAILED]
            assert broker.replicas.maybe_get("t", 0) is not None

            r = await alice.ask("ControlledShutdown", {"broker_id": 0, "broker_epoch": -1}, 3)
            assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED

            acls.allow(Op.CLUSTER_ACTION, Rt.CLUSTER)
            r = await alice.ask("UpdateMetadata", um, 7)
            assert r.error_code == 0 and 5 in broker.metadata.brokers
    run(main())


def test_api_versions_needs_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with secured(tmp_path) as (broker, acls, alice, _):
            r = await alice.ask("ApiVersions", {"client_software_name": "x", "client_software_version": "1"}, 3)
            assert r.error_code == 0 and r.api_keys
            assert acls.asked == []
    run(main())


# ---------------------------------------------------------------------------- every version

_PARTITION = {"partition_index": 0, "committed_offset": 1, "timestamp": -1, "offset": 0}
# A request of each API that a principal allowed nothing is refused, and the code expected
# somewhere in the answer; sent at every version the broker serves, so that each refusal
# encodes in each version's shape.
REFUSED: dict[str, tuple[dict, int]] = {
    "Produce": (produce_body(("t", 0)), Code.TOPIC_AUTHORIZATION_FAILED),
    "Fetch": ({**fetch_body(("t", 0)), "max_wait_ms": 0}, Code.TOPIC_AUTHORIZATION_FAILED),
    "ListOffsets": ({"replica_id": -1, "topics": [{"name": "t", "partitions": [_PARTITION]}]},
                    Code.TOPIC_AUTHORIZATION_FAILED),
    "Metadata": ({"topics": [{"name": "t"}], "allow_auto_topic_creation": False}, Code.TOPIC_AUTHORIZATION_FAILED),
    "OffsetCommit": ({"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                      "topics": [{"name": "t", "partitions": [_PARTITION]}]}, Code.GROUP_AUTHORIZATION_FAILED),
    "OffsetFetch": ({"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}],
                     "groups": [{"group_id": "g", "topics": None}]}, Code.GROUP_AUTHORIZATION_FAILED),
    "FindCoordinator": ({"key": "g", "key_type": 0, "coordinator_keys": ["g"]}, Code.GROUP_AUTHORIZATION_FAILED),
    "JoinGroup": (JOIN, Code.GROUP_AUTHORIZATION_FAILED),
    "Heartbeat": ({"group_id": "g", "generation_id": 1, "member_id": "m"}, Code.GROUP_AUTHORIZATION_FAILED),
    "LeaveGroup": ({"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
                   Code.GROUP_AUTHORIZATION_FAILED),
    "SyncGroup": ({"group_id": "g", "generation_id": 1, "member_id": "m", "protocol_type": "consumer",
                   "protocol_name": "range", "assignments": []}, Code.GROUP_AUTHORIZATION_FAILED),
    "DescribeGroups": ({"groups": ["g"]}, Code.GROUP_AUTHORIZATION_FAILED),
    "DeleteGroups": ({"groups_names": ["g"]}, Code.GROUP_AUTHORIZATION_FAILED),
    "OffsetDelete": ({"group_id": "g", "topics": []}, Code.GROUP_AUTHORIZATION_FAILED),
    "CreateTopics": ({"topics": [{"name": "n", "num_partitions": 1, "replication_factor": 1}]},
                     Code.TOPIC_AUTHORIZATION_FAILED),
    "DeleteTopics": ({"topic_names": ["t"], "topics": [{"name": "t"}]}, Code.TOPIC_AUTHORIZATION_FAILED),
    "CreatePartitions": ({"topics": [{"name": "t", "count": 3, "assignments": None}]},
                         Code.TOPIC_AUTHORIZATION_FAILED),
    "DeleteRecords": ({"topics": [{"name": "t", "partitions": [_PARTITION]}]}, Code.TOPIC_AUTHORIZATION_FAILED),
    "OffsetForLeaderEpoch": ({"topics": [{"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
                             Code.TOPIC_AUTHORIZATION_FAILED),
    "DescribeConfigs": ({"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
                        Code.TOPIC_AUTHORIZATION_FAILED),
    "AlterConfigs": ({"resources": [{"resource_type": 2, "resource_name": "t", "configs": []}]},
                     Code.TOPIC_AUTHORIZATION_FAILED),
    "IncrementalAlterConfigs": ({"resources": [{"resource_type": 4, "resource_name": "", "configs": []}]},
                                Code.CLUSTER_AUTHORIZATION_FAILED),
    "InitProducerId": ({"transactional_id": "tx", "transaction_timeout_ms": 60000, "producer_id": -1,
                        "producer_epoch": -1}, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "AddPartitionsToTxn": ({"v3_and_below_transactional_id": "tx", "v3_and_below_topics": [
        {"name": "t", "partitions": [0]}], "transactions": []}, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "AddOffsetsToTxn": ({"transactional_id": "tx", "group_id": "g"}, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "EndTxn": ({"transactional_id": "tx", "committed": True}, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "TxnOffsetCommit": ({"transactional_id": "tx", "group_id": "g",
                         "topics": [{"name": "t", "partitions": [_PARTITION]}]},
                        Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "WriteTxnMarkers": ({"markers": [{"producer_id": 1, "topics": [{"name": "t", "partition_indexes": [0]}]}]},
                        Code.CLUSTER_AUTHORIZATION_FAILED),
    "DescribeProducers": ({"topics": [{"name": "t", "partition_indexes": [0]}]}, Code.TOPIC_AUTHORIZATION_FAILED),
    "DescribeTransactions": ({"transactional_ids": ["tx"]}, Code.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    "LeaderAndIsr": ({"controller_epoch": 99, "ungrouped_partition_states": [], "topic_states": []},
                     Code.CLUSTER_AUTHORIZATION_FAILED),
    "UpdateMetadata": ({"controller_epoch": 99}, Code.CLUSTER_AUTHORIZATION_FAILED),
    "StopReplica": ({"controller_epoch": 99}, Code.CLUSTER_AUTHORIZATION_FAILED),
    "ControlledShutdown": ({"broker_id": 0}, Code.CLUSTER_AUTHORIZATION_FAILED),
}


def _codes_in(value: Any) -> set[int]:
    """Every *error_code field anywhere in a decoded response."""
    found: set[int] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k.endswith("error_code") and isinstance(v, int):
                found.add(v)
            else:
                found |= _codes_in(v)
    elif isinstance(value, list):
        for v in value:
            found |= _codes_in(v)
    return found


def test_every_refusal_is_answered_in_every_version(tmp_path: Path) -> None:
    from broker.server.dispatch import REGISTRY
    versions = {h.api.name: (h.min_version, h.max_version) for h in REGISTRY.values()}

    async def main() -> list[str]:
        wrong = []
        async with secured(tmp_path) as (broker, acls, alice, _):
            for api_name, (body, code) in REFUSED.items():
                lo, hi = versions[api_name]
                for v in range(lo, hi + 1):
                    if api_name == "AddPartitionsToTxn" and v >= 4:
                        body, code = {"transactions": []}, Code.CLUSTER_AUTHORIZATION_FAILED
                    if api_name == "Fetch" and v >= 13:          # topics by id
                        body = {**body, "topics": [{**body["topics"][0], "topic_id": topic(broker, "t").topic_id}]}
                    try:
                        r = await alice.ask(api_name, body, v)
                    except Exception as e:          # a refusal that does not encode, or no answer
                        wrong.append(f"{api_name} v{v}: {e!r}")
                        continue
                    if code not in _codes_in(r):
                        wrong.append(f"{api_name} v{v}: {r}")
            assert end_offset(broker, "t") == 0 and broker.store.topic("n") is None
        return wrong
    assert asyncio.run(asyncio.wait_for(main(), 120)) == []
