"""LocalMetadataStore's ACLs and SCRAM credentials: kept, persisted across a reopen, and told
to subscribers before the call that changed them returns."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Coroutine, TypeVar

import pytest

from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from clients.protocol.errors import InvalidRequestError
from zkcoord.local import META_FILE, LocalMetadataStore
from zkcoord.store import AclBinding, AclsChanged, BrokerInfo, UserScramCredentialsChanged

CRED_256 = "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096"
CRED_512 = "salt=c2FsdDI=,stored_key=c3RvcmVkMg==,server_key=c2VydmVyMg==,iterations=8192"


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def acl(name: str = "orders", op: AclOperation = AclOperation.READ,
        principal: str = "User:alice", pattern: PatternType = PatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW,
        rtype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


async def opened(path: Path) -> LocalMetadataStore:
    store = LocalMetadataStore(path, BrokerInfo(0, "127.0.0.1", 9092))
    await store.start()
    return store


def test_acls_created_deleted_and_told(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await opened(tmp_path)
        events: list[object] = []
        unsubscribe = store.subscribe(events.append)
        a, b = acl(), acl("pay-", AclOperation.WRITE, pattern=PatternType.PREFIXED)
        await store.create_acls([a, b])
        assert sorted(store.acls(), key=str) == sorted([a, b], key=str)
        assert events == [AclsChanged()]

        await store.create_acls([a])                   # already there: nothing changes
        assert events == [AclsChanged()]

        await store.delete_acls([a, acl("absent")])    # absent ones are ignored
        assert store.acls() == [b]
        assert events == [AclsChanged(), AclsChanged()]

        await store.delete_acls([acl("absent")])
        assert len(events) == 2
        unsubscribe()
        await store.delete_acls([b])
        assert store.acls() == [] and len(events) == 2
        await store.stop()

    run(scenario())


def test_acls_persist_across_reopen(tmp_path: Path) -> None:
    bindings = [acl(), acl("*", AclOperation.DESCRIBE, "User:*"),
                acl("tx-", AclOperation.WRITE, pattern=PatternType.PREFIXED,
                    rtype=ResourceType.TRANSACTIONAL_ID),
                acl("kafka-cluster", AclOperation.CLUSTER_ACTION, "User:broker",
                    rtype=ResourceType.CLUSTER, permission=AclPermissionType.DENY)]

    async def write() -> None:
        store = await opened(tmp_path)
        await store.create_acls(bindings)
        await store.delete_acls([bindings[1]])
        # no stop(): every change is on disk when the call returns

    async def reopen() -> list[AclBinding]:
        store = await opened(tmp_path)
        return store.acls()

    run(write())
    doc = json.loads((tmp_path / META_FILE).read_text())
    assert {"resource_type": "TransactionalId", "resource_name": "tx-", "pattern_type": "PREFIXED",
            "principal": "User:alice", "host": "*", "operation": "Write",
            "permission": "Allow"} in doc["acls"]
    assert set(run(reopen())) == {bindings[0], bindings[2], bindings[3]}


def test_only_literal_and_prefixed_acls_are_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await opened(tmp_path)
        with pytest.raises(InvalidRequestError):
            await store.create_acls([acl(pattern=PatternType.MATCH)])
        assert store.acls() == []

    run(scenario())


def test_scram_credentials_alter_delete_and_persist(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await opened(tmp_path)
        events: list[object] = []
        store.subscribe(events.append)
        assert store.user_scram_credentials("alice") == {}

        await store.alter_user_scram_credentials("alice", {"SCRAM-SHA-256": CRED_256,
                                                           "SCRAM-SHA-512": CRED_512})
        assert store.user_scram_credentials("alice") == {"SCRAM-SHA-256": CRED_256,
                                                         "SCRAM-SHA-512": CRED_512}
        assert events == [UserScramCredentialsChanged("alice")]

        await store.alter_user_scram_credentials("alice", {"SCRAM-SHA-256": None})
        assert store.user_scram_credentials("alice") == {"SCRAM-SHA-512": CRED_512}
        await store.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": None})   # nothing
        assert len(events) == 2

        await store.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": CRED_256})
        assert store.scram_users() == {"alice": {"SCRAM-SHA-512": CRED_512},
                                       "bob": {"SCRAM-SHA-256": CRED_256}}
        await store.alter_user_scram_credentials("bob", {"SCRAM-SHA-256": None})
        assert store.scram_users() == {"alice": {"SCRAM-SHA-512": CRED_512}}
        assert events[-1] == UserScramCredentialsChanged("bob") and len(events) == 4

        # the cache hands out copies
        store.user_scram_credentials("alice")["SCRAM-SHA-512"] = "tampered"
        assert store.user_scram_credentials("alice") == {"SCRAM-SHA-512": CRED_512}

        reopened = await opened(tmp_path)
        assert reopened.scram_users() == {"alice": {"SCRAM-SHA-512": CRED_512}}

    run(scenario())


def test_a_failing_subscriber_does_not_stop_the_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await opened(tmp_path)
        seen: list[object] = []

        def broken(event: object) -> None:
            raise RuntimeError("subscriber bug")

        store.subscribe(broken)
        store.subscribe(seen.append)
        await store.create_acls([acl()])
        assert seen == [AclsChanged()] and store.acls() == [acl()]

    run(scenario())


def test_a_store_file_without_security_data_still_opens(tmp_path: Path) -> None:
    """Files written before ACLs existed have no "acls" or "scram_credentials" keys."""
    async def scenario() -> None:
        store = await opened(tmp_path)
        await store.stop()
        doc = json.loads((tmp_path / META_FILE).read_text())
        del doc["acls"], doc["scram_credentials"]
        (tmp_path / META_FILE).write_text(json.dumps(doc))
        again = await opened(tmp_path)
        assert again.acls() == [] and again.scram_users() == {}

    run(scenario())
