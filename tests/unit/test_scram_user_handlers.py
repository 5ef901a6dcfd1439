"""DescribeUserScramCredentials and AlterUserScramCredentials (broker/server/handlers/
scram_users.py) against an in-memory store, with Kafka's errors (ZkAdminManager)."""
from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Mapping

import pytest
from scramp import ScramClient  # type: ignore[import-untyped]

from broker.security.sasl import ListenerSasl, SaslServer
from broker.security.scram import ScramCredential
from broker.server.dispatch import RequestContext
from broker.server.handlers.scram_users import (alter_user_scram_credentials,
                                                describe_user_scram_credentials)
from broker.server.network import ConnectionInfo
from clients.protocol.acl import AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.headers import RequestHeader
from clients.protocol.messages import API_BY_NAME

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


class MemoryStore:
    """The store's SCRAM part: user -> {mechanism: credential string}."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, str]] = {}
        self.writes: list[tuple[str, dict[str, str | None]]] = []
        self.fail_for: dict[str, Exception] = {}

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {u: dict(c) for u, c in self.users.items()}

    def user_scram_credentials(self, user: str) -> dict[str, str]:
        return dict(self.users.get(user, {}))

    async def alter_user_scram_credentials(self, user: str,
                                           changes: Mapping[str, str | None]) -> None:
        if user in self.fail_for:
            raise self.fail_for[user]
        self.writes.append((user, dict(changes)))
        creds = self.users.setdefault(user, {})
        for mechanism, value in changes.items():
            if value is None:
                creds.pop(mechanism, None)
            else:
                creds[mechanism] = value
        if not creds:
            del self.users[user]

    def add(self, user: str, mechanism: str, iterations: int = 4096) -> None:
        cred = ScramCredential.from_password(mechanism, "pw", iterations, salt=SALT)
        self.users.setdefault(user, {})[mechanism] = cred.format()


class Authorizer:
    enabled = True

    def __init__(self, allow: bool = True):
        self.allow = allow
        self.asked: list[tuple] = []

    def authorize(self, principal, host, operation, resource_type, resource_name) -> bool:
        self.asked.append((principal, host, operation, resource_type, resource_name))
        return self.allow

    def authorize_by_resource_type(self, principal, host, operation, resource_type) -> bool:
        raise AssertionError("not used here")


class Services:
    def __init__(self, allow: bool = True):
        self.store = MemoryStore()
        self.authorizer = Authorizer(allow)


def call(services: Services, api_name: str, body: dict) -> Any:
    api = API_BY_NAME[api_name]
    request = api.decode_request(api.encode_request(body, 0).getvalue(), 0)
    conn = ConnectionInfo(("10.9.8.7", 50000), "SASL_SSL", "SASL_SSL")
    conn.principal = "User:admin"
    ctx = RequestContext(RequestHeader(api.key, 0, 1, "test"), conn, api)
    handler: Any = {"DescribeUserScramCredentials": describe_user_scram_credentials,
               "AlterUserScramCredentials": alter_user_scram_credentials}[api_name]
    response = handler(services, request, ctx)
    if asyncio.iscoroutine(response):
        response = asyncio.run(response)
    return api.decode_response(api.encode_response(response, 0).getvalue(), 0)


def describe(services: Services, users: list[str] | None) -> Any:
    return call(services, "DescribeUserScramCredentials",
                {"users": None if users is None else [{"name": u} for u in users]})


def upsertion(name: str, mechanism: int = SHA256, iterations: int = 8192, password: str = "pw",
              salt: bytes = SALT) -> dict:
    digest = {SHA256: "sha256", SHA512: "sha512"}.get(mechanism, "sha256")
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)}


def alter(services: Services, upsertions: list[dict] = [], deletions: list[tuple[str, int]] = []):
    r = call(services, "AlterUserScramCredentials", {
        "upsertions": upsertions,
        "deletions": [{"name": n, "mechanism": m} for n, m in deletions]})
    return {res.user: (res.error_code, res.error_message) for res in r.results}


# ------------------------------------------------------------------ describe

@pytest.mark.parametrize("users", [None, []])
def test_describe_all_users_sorted_with_their_mechanisms(users):
    services = Services()
    services.store.add("bob", "SCRAM-SHA-512", 8192)
    services.store.add("alice", "SCRAM-SHA-512", 4096)
    services.store.add("alice", "SCRAM-SHA-256", 16384)
    r = describe(services, users)
    assert r.error_code == 0 and r.error_message is None
    assert [(x.user, x.error_code, [(c.mechanism, c.iterations) for c in x.credential_infos])
            for x in r.results] == [("alice", 0, [(SHA256, 16384), (SHA512, 4096)]),
                                    ("bob", 0, [(SHA512, 8192)])]


def test_describe_named_users_in_request_order():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-256")
    services.store.add("bob", "SCRAM-SHA-512")
    r = describe(services, ["bob", "ghost", "alice"])
    assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
        ("bob", 0, None),
        ("ghost", Code.RESOURCE_NOT_FOUND,
         "Attempt to describe a user credential that does not exist: ghost"),
        ("alice", 0, None)]


def test_describe_empty_and_duplicated_names():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-256")
    r = describe(services, ["alice", "", "alice"])
    assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
        ("alice", Code.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
        ("", Code.RESOURCE_NOT_FOUND, "Username must not be empty")]


def test_describe_unreadable_credential_does_not_leak_it():
    services = Services()
    services.store.users["alice"] = {"SCRAM-SHA-256": "salt=c2VjcmV0"}
    [res] = describe(services, ["alice"]).results
    assert res.error_code == Code.UNKNOWN_SERVER_ERROR and "c2VjcmV0" not in res.error_message


def test_describe_needs_describe_on_the_cluster():
    services = Services(allow=False)
    services.store.add("alice", "SCRAM-SHA-256")
    r = describe(services, ["alice", "bob"])
    assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED
    assert [(x.user, x.error_code, list(x.credential_infos)) for x in r.results] == [
        ("alice", Code.CLUSTER_AUTHORIZATION_FAILED, []), ("bob", Code.CLUSTER_AUTHORIZATION_FAILED, [])]
    assert services.authorizer.asked == [("User:admin", "10.9.8.7", AclOperation.DESCRIBE,
                                          ResourceType.CLUSTER, "kafka-cluster")]


# ------------------------------------------------------------------ alter

def test_upserted_credential_authenticates_with_the_password():
    services = Services()
    assert alter(services, [upsertion("alice", SHA512, 8192, "alice-secret")]) == {"alice": (0, None)}
    stored = ScramCredential.parse(services.store.users["alice"]["SCRAM-SHA-512"])
    assert stored.iterations == 8192 and stored.salt == SALT
    sasl = SaslServer({"L": ListenerSasl(["SCRAM-SHA-512"])}, services.store.user_scram_credentials)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    exchange = sasl.start("L", "SCRAM-SHA-512")
    client.set_server_first(exchange.step(client.get_client_first().encode()).decode())
    client.set_server_final(exchange.step(client.get_client_final().encode()).decode())
    assert exchange.principal == "User:alice"
    assert services.authorizer.asked == [("User:admin", "10.9.8.7", AclOperation.ALTER,
                                          ResourceType.CLUSTER, "kafka-cluster")]


def test_one_write_per_user_with_all_its_changes():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-512")
    result = alter(services, [upsertion("alice", SHA256), upsertion("bob", SHA256)],
                   [("alice", SHA512)])
    assert result == {"alice": (0, None), "bob": (0, None)}
    writes = dict(services.store.writes)
    assert set(writes) == {"alice", "bob"} and len(services.store.writes) == 2
    assert writes["alice"]["SCRAM-SHA-512"] is None and writes["alice"]["SCRAM-SHA-256"]
    assert list(services.store.users["alice"]) == ["SCRAM-SHA-256"]


@pytest.mark.parametrize("bad, code, message", [
    (upsertion("alice", iterations=4095), Code.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (upsertion("alice", iterations=16385), Code.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    (upsertion("alice", mechanism=0), Code.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsertion("alice", mechanism=3), Code.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsertion("alice", salt=b"short"), Code.UNACCEPTABLE_CREDENTIAL,
     "Salt must be at least 12 bytes"),
])
def test_an_invalid_upsertion_fails_its_user_only(bad, code, message):
    services = Services()
    result = alter(services, [bad, upsertion("alice", SHA512), upsertion("bob")])
    assert result == {"alice": (code, message), "bob": (0, None)}
    assert [u for u, _ in services.store.writes] == ["bob"]


def test_limits_are_inclusive():
    services = Services()
    assert alter(services, [upsertion("a", iterations=4096), upsertion("b", iterations=16384)]) \
        == {"a": (0, None), "b": (0, None)}


def test_empty_user_names():
    services = Services()
    assert alter(services, [upsertion("")], [("", SHA256)]) == \
        {"": (Code.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}
    assert services.store.writes == []


def test_unknown_mechanism_in_a_deletion():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-256")
    assert alter(services, [], [("alice", 7)]) == \
        {"alice": (Code.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")}


def test_same_user_and_mechanism_twice_is_a_duplicate():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-256")
    assert alter(services, [upsertion("alice", SHA256)], [("alice", SHA256)]) == \
        {"alice": (Code.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    assert alter(services, [upsertion("bob"), upsertion("bob")]) == \
        {"bob": (Code.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    assert services.store.writes == []


def test_deleting_a_credential_that_does_not_exist():
    services = Services()
    services.store.add("alice", "SCRAM-SHA-256")
    assert alter(services, [upsertion("alice", SHA512)], [("alice", SHA256), ("ghost", SHA512)]) == \
        {"alice": (0, None),
         "ghost": (Code.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    assert list(services.store.users["alice"]) == ["SCRAM-SHA-512"]
    assert alter(services, [], [("alice", SHA512)]) == {"alice": (0, None)}
    assert "alice" not in services.store.users
    assert alter(services, [], [("alice", SHA512)]) == \
        {"alice": (Code.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}


def test_alter_needs_alter_on_the_cluster():
    services = Services(allow=False)
    services.store.add("bob", "SCRAM-SHA-256")
    r = call(services, "AlterUserScramCredentials", {
        "upsertions": [upsertion("carol"), upsertion("alice")],
        "deletions": [{"name": "bob", "mechanism": SHA256}]})
    assert [(x.user, x.error_code, x.error_message) for x in r.results] == [
        (u, Code.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        for u in ("alice", "bob", "carol")]
    assert services.store.writes == [] and services.authorizer.asked[0][2] == AclOperation.ALTER


def test_a_failed_write_is_that_users_error():
    services = Services()
    error: KafkaError = for_code(Code.NOT_CONTROLLER)("not now")
    services.store.fail_for = {"alice": error, "bob": RuntimeError("zk is gone")}
    result = alter(services, [upsertion("alice"), upsertion("bob"), upsertion("carol")])
    assert result["alice"] == (Code.NOT_CONTROLLER, "not now")
    assert result["bob"][0] == Code.UNKNOWN_SERVER_ERROR and "zk" not in result["bob"][1]
    assert result["carol"] == (0, None)
