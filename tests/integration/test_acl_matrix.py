"""The ACL matrix end to end: a broker process with a SASL_PLAINTEXT listener (PLAIN users
admin, alice, bob), Kafka's ACL authorizer and `super.users=User:admin`; confluent-kafka
clients as alice. For each API a client uses (produce, fetch, metadata, list offsets, the
group protocol and offsets, create/delete topics, describe/alter configs, transactions)
alice without the ACL gets Kafka's error and, once admin granted it (CreateAcls through
confluent-kafka's AdminClient), succeeds. Deny beats allow; prefixed patterns; the super
user needs no ACL; a replica Fetch or a LeaderAndIsr from a non-broker is refused
(CVE-2018-1288), checked on the wire.

One broker serves the whole module; each test uses its own topic, group and transactional
id names, so the ACLs of one do not decide another."""
from __future__ import annotations

import gc
import time
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourcePatternType,
                                   ResourceType)

from clients.protocol.errors import Code
from clients.protocol.records import records_from_fetch
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
OVERRIDES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
}
ACL_WAIT_S = 5.0      # an ACL change is in force within 1 s; generous for a loaded machine


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("acl-matrix"), overrides=OVERRIDES).start()
    try:
        yield b
    finally:
        _ADMINS.clear()
        gc.collect()            # the clients go before the broker does (no reconnect noise)
        b.stop()


def conf(broker: BrokerProcess, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": USERS[user], **extra}


_ADMINS: dict[tuple[int, str], AdminClient] = {}


def admin_client(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One AdminClient per user, kept alive: a client dropped while its futures are
    pending fails them with _DESTROY."""
    key = (broker.port, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def acl(rtype: ResourceType, name: str, op: AclOperation, user: str = "alice",
        permission: AclPermissionType = AclPermissionType.ALLOW,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}" if user != "*" else "User:*", "*", op, permission)


def grant(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for f in admin_client(broker).create_acls(list(bindings), request_timeout=15).values():
        f.result(15)


def revoke(broker: BrokerProcess, *bindings: AclBinding) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]
    for f in admin_client(broker).delete_acls(filters, request_timeout=15).values():
        f.result(15)


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    admin_client(broker).create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


def eventually(check: Callable[[], Any], timeout: float = ACL_WAIT_S) -> Any:
    """`check()`'s value once it stops raising (an ACL change reaches the authorizer)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, KafkaException):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def produce_one(broker: BrokerProcess, user: str, topic: str, **extra) -> KafkaError | None:
    """Produce one record; the delivery error, or None once it is written."""
    p = Producer(conf(broker, user, **{"message.timeout.ms": 5000, "retries": 0, **extra}))
    outcome: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(10)
    assert outcome, "no delivery report"
    return outcome[0]


def consume(broker: BrokerProcess, user: str, topic: str, group: str, subscribe: bool = False,
            timeout: float = 10.0) -> tuple[list[bytes], list[KafkaError]]:
    """(values read, errors seen) reading `topic` from its start, as a member of `group`
    (subscribe, committing what it read) or with the partition assigned. Assigned, the
    group is not used, but librdkafka looks its coordinator up all the same: that lookup's
    GROUP_AUTHORIZATION_FAILED is not what such a test is about, and is read past."""
    c = Consumer(conf(broker, user, **{"group.id": group, "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest"}))
    values: list[bytes] = []
    errors: list[KafkaError] = []
    try:
        if subscribe:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not values:
            m = c.poll(0.5)
            if m is None:
                continue
            error, value = m.error(), m.value()
            if error is not None:
                errors.append(error)
                if subscribe or error.code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                    break
            elif value is not None:
                values.append(value)
        if values and subscribe:
            c.commit(asynchronous=False)
    except KafkaException as e:
        errors.append(e.args[0])
    finally:
        c.close()
    return values, errors


def codes_of(errors: list[KafkaError]) -> set[int]:
    return {e.code() for e in errors}


# ---------------------------------------------------------------------------- produce, fetch

def test_produce_needs_write(secured: BrokerProcess) -> None:
    create_topic(secured, "m-produce")
    err = produce_one(secured, "alice", "m-produce")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    grant(secured, acl(ResourceType.TOPIC, "m-produce", AclOperation.WRITE))
    assert eventually(lambda: _delivered(secured, "alice", "m-produce")) is None
    # bob is not alice
    err = produce_one(secured, "bob", "m-produce")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _delivered(broker: BrokerProcess, user: str, topic: str) -> None:
    err = produce_one(broker, user, topic)
    assert err is None, err


def test_super_user_needs_no_acl(secured: BrokerProcess) -> None:
    create_topic(secured, "m-super")
    assert produce_one(secured, "admin", "m-super") is None
    values, errors = consume(secured, "admin", "m-super", "m-super-group", subscribe=True)
    assert values == [b"v"] and not errors


def test_fetch_needs_read(secured: BrokerProcess) -> None:
    create_topic(secured, "m-fetch")
    assert produce_one(secured, "admin", "m-fetch") is None
    # Describe lets librdkafka find the partition's leader and send its Fetch; Read is what
    # the Fetch needs.
    grant(secured, acl(ResourceType.TOPIC, "m-fetch", AclOperation.DESCRIBE))

    def fetch_refused() -> None:
        values, errors = consume(secured, "alice", "m-fetch", "m-fetch-group")
        assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in codes_of(errors), errors
    eventually(fetch_refused)
    assert wire_fetch(secured, "alice", "m-fetch") == (Code.TOPIC_AUTHORIZATION_FAILED, 0)
    grant(secured, acl(ResourceType.TOPIC, "m-fetch", AclOperation.READ))

    def reads() -> None:
        values, errors = consume(secured, "alice", "m-fetch", "m-fetch-group")
        assert values == [b"v"], errors
    eventually(reads)
    assert wire_fetch(secured, "alice", "m-fetch") == (0, 1)


def test_metadata_lists_only_describable_topics(secured: BrokerProcess) -> None:
    for name in ("m-meta-seen", "m-meta-hidden"):
        create_topic(secured, name)
    grant(secured, acl(ResourceType.TOPIC, "m-meta-seen", AclOperation.DESCRIBE))

    def listed() -> None:
        topics = admin_client(secured, "alice").list_topics(timeout=10).topics
        assert "m-meta-seen" in topics and "m-meta-hidden" not in topics, sorted(topics)
    eventually(listed)
    everything = admin_client(secured).list_topics(timeout=10).topics
    assert {"m-meta-seen", "m-meta-hidden"} <= set(everything)


def test_list_offsets_needs_describe(secured: BrokerProcess) -> None:
    create_topic(secured, "m-offsets")
    assert produce_one(secured, "admin", "m-offsets") is None
    # On the wire: librdkafka would not even ask without Describe (its Metadata is refused).
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "m-offsets", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    with _wire_as(secured, "alice") as w:
        p = w.request("ListOffsets", 7, body).topics[0].partitions[0]
    assert (p.error_code, p.offset) == (Code.TOPIC_AUTHORIZATION_FAILED, -1)
    grant(secured, acl(ResourceType.TOPIC, "m-offsets", AclOperation.DESCRIBE))

    def watermarks() -> tuple[int, int]:
        c = Consumer(conf(secured, "alice", **{"group.id": "m-offsets-group"}))
        try:
            return c.get_watermark_offsets(TopicPartition("m-offsets", 0), timeout=10)
        finally:
            c.close()
    assert eventually(watermarks) == (0, 1)


# ---------------------------------------------------------------------------- groups

def test_group_join_sync_heartbeat_commit_and_fetch_offsets_need_read_on_the_group(secured: BrokerProcess) -> None:
    create_topic(secured, "m-group")
    assert produce_one(secured, "admin", "m-group") is None
    grant(secured, acl(ResourceType.TOPIC, "m-group", AclOperation.READ))
    values, errors = consume(secured, "alice", "m-group", "m-group-g", subscribe=True)
    assert values == [] and KafkaError.GROUP_AUTHORIZATION_FAILED in codes_of(errors), errors
    grant(secured, acl(ResourceType.GROUP, "m-group-g", AclOperation.READ))

    def joins_and_commits() -> None:
        values, errors = consume(secured, "alice", "m-group", "m-group-g", subscribe=True)
        assert values == [b"v"] and not errors, errors
    eventually(joins_and_commits)
    c = Consumer(conf(secured, "alice", **{"group.id": "m-group-g"}))
    try:
        committed = c.committed([TopicPartition("m-group", 0)], timeout=10)   # OffsetFetch
    finally:
        c.close()
    assert committed[0].offset == 1 and committed[0].error is None


# ---------------------------------------------------------------------------- topics, configs

def test_create_and_delete_topics(secured: BrokerProcess) -> None:
    alice = admin_client(secured, "alice")
    with pytest.raises(KafkaException) as refused:
        alice.create_topics([NewTopic("m-created", 1, 1)])["m-created"].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(secured, acl(ResourceType.TOPIC, "m-created", AclOperation.CREATE))
    eventually(lambda: admin_client(secured, "alice").create_topics(
        [NewTopic("m-created", 1, 1)])["m-created"].result(15))
    with pytest.raises(KafkaException) as refused:
        alice.delete_topics(["m-created"])["m-created"].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(secured, acl(ResourceType.TOPIC, "m-created", AclOperation.DELETE))
    eventually(lambda: admin_client(secured, "alice").delete_topics(["m-created"])["m-created"].result(15))


def test_describe_and_alter_configs(secured: BrokerProcess) -> None:
    create_topic(secured, "m-configs")
    resource = ConfigResource(ResourceType.TOPIC, "m-configs")
    alice = admin_client(secured, "alice")
    with pytest.raises(KafkaException) as refused:
        alice.describe_configs([resource])[resource].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(secured, acl(ResourceType.TOPIC, "m-configs", AclOperation.DESCRIBE_CONFIGS))
    configs = eventually(lambda: admin_client(secured, "alice").describe_configs([resource])[resource].result(15))
    assert "retention.ms" in configs

    change = ConfigResource(ResourceType.TOPIC, "m-configs", incremental_configs=[
        ConfigEntry("retention.ms", "1234", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        alice.incremental_alter_configs([change])[change].result(15)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(secured, acl(ResourceType.TOPIC, "m-configs", AclOperation.ALTER_CONFIGS))
    eventually(lambda: admin_client(secured, "alice").incremental_alter_configs([change])[change].result(15))
    configs = admin_client(secured).describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "1234"


# ---------------------------------------------------------------------------- transactions

def test_transactions_need_write_on_the_transactional_id(secured: BrokerProcess) -> None:
    create_topic(secured, "m-txn")
    grant(secured, acl(ResourceType.TOPIC, "m-txn", AclOperation.WRITE))

    def transact(txn_id: str) -> None:
        p = Producer(conf(secured, "alice", **{"transactional.id": txn_id, "transaction.timeout.ms": 10000}))
        p.init_transactions(10)
        p.begin_transaction()
        p.produce("m-txn", b"t")
        p.commit_transaction(10)
    with pytest.raises(KafkaException) as refused:
        transact("m-txn-id")
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(secured, acl(ResourceType.TRANSACTIONAL_ID, "m-txn-id", AclOperation.WRITE))
    eventually(lambda: transact("m-txn-id"))


# ---------------------------------------------------------------------------- ACL semantics

def test_deny_beats_allow(secured: BrokerProcess) -> None:
    create_topic(secured, "m-deny")
    assert produce_one(secured, "admin", "m-deny") is None
    grant(secured, acl(ResourceType.TOPIC, "m-deny", AclOperation.READ),
          acl(ResourceType.TOPIC, "m-deny", AclOperation.READ, user="bob"),
          acl(ResourceType.TOPIC, "m-deny", AclOperation.READ, permission=AclPermissionType.DENY))
    assert eventually(lambda: _fetched(secured, "bob", "m-deny")) == (0, 1)    # the ACLs are in force
    assert wire_fetch(secured, "alice", "m-deny") == (Code.TOPIC_AUTHORIZATION_FAILED, 0)
    values, errors = consume(secured, "alice", "m-deny", "m-deny-alice")
    assert values == [] and KafkaError.TOPIC_AUTHORIZATION_FAILED in codes_of(errors), errors
    # a deny of everything for everyone beats bob's allow too
    grant(secured, acl(ResourceType.TOPIC, "m-deny", AclOperation.ALL, user="*",
                       permission=AclPermissionType.DENY))
    assert eventually(lambda: _refused(secured, "bob", "m-deny")) == (Code.TOPIC_AUTHORIZATION_FAILED, 0)
    values, _ = consume(secured, "bob", "m-deny", "m-deny-bob", timeout=3)
    assert values == []


def _fetched(broker: BrokerProcess, user: str, topic: str) -> tuple[int, int]:
    got = wire_fetch(broker, user, topic)
    assert got[0] == 0, got
    return got


def _refused(broker: BrokerProcess, user: str, topic: str) -> tuple[int, int]:
    got = wire_fetch(broker, user, topic)
    assert got[0] == Code.TOPIC_AUTHORIZATION_FAILED, got
    return got


def test_prefixed_patterns(secured: BrokerProcess) -> None:
    for name in ("m-pre-one", "m-other"):
        create_topic(secured, name)
    grant(secured, acl(ResourceType.TOPIC, "m-pre-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))
    assert eventually(lambda: _delivered(secured, "alice", "m-pre-one")) is None
    err = produce_one(secured, "alice", "m-other")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    revoke(secured, acl(ResourceType.TOPIC, "m-pre-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))

    def refused_again() -> None:
        err = produce_one(secured, "alice", "m-pre-one")
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    eventually(refused_again)


# ---------------------------------------------------------------------------- broker-only APIs, on the wire

def _wire_as(broker: BrokerProcess, user: str) -> WireClient:
    w = WireClient("127.0.0.1", broker.port)
    assert w.request("SaslHandshake", 1, {"mechanism": "PLAIN"}).error_code == 0
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    r = w.request("SaslAuthenticate", 2, {"auth_bytes": token})
    assert r.error_code == 0, r.error_message
    return w


def wire_fetch(broker: BrokerProcess, user: str, topic: str, replica_id: int = -1) -> tuple[int, int]:
    """(error code, records) of a Fetch v12 of `topic`-0 from offset 0, sent as `user`."""
    body = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}
    with _wire_as(broker, user) as w:
        p = w.request("Fetch", 12, body).responses[0].partitions[0]
    return p.error_code, sum(1 for _ in records_from_fetch(bytes(p.records or b"")))


def test_a_replica_fetch_or_leader_and_isr_from_a_non_broker_is_refused(secured: BrokerProcess) -> None:
    create_topic(secured, "m-replica")
    assert produce_one(secured, "admin", "m-replica") is None
    grant(secured, acl(ResourceType.TOPIC, "m-replica", AclOperation.READ))
    # alice may Read the topic as a consumer, but is no broker: nothing, not even as a follower
    assert eventually(lambda: _fetched(secured, "alice", "m-replica")) == (0, 1)
    assert wire_fetch(secured, "alice", "m-replica", replica_id=1) == (Code.TOPIC_AUTHORIZATION_FAILED, 0)
    # the super user (as a broker authenticates here) may
    assert wire_fetch(secured, "admin", "m-replica", replica_id=1)[0] != Code.TOPIC_AUTHORIZATION_FAILED
    with _wire_as(secured, "alice") as w:
        r = w.request("LeaderAndIsr", 5, {"controller_id": 0, "controller_epoch": 99, "broker_epoch": -1,
                                          "topic_states": [], "live_leaders": []})
        assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
        r = w.request("UpdateMetadata", 7, {"controller_id": 0, "controller_epoch": 99, "broker_epoch": -1,
                                            "topic_states": [], "live_brokers": []})
        assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED


