"""CreateAcls, DescribeAcls and DeleteAcls called as the dispatcher calls them (a request
decoded at its version, a RequestContext with the connection's principal and host), over a
real LocalMetadataStore and the AclAuthorizer refreshed by the store's AclsChanged, with
each response encoded and decoded again at the request's version. Kafka's answers: AclApis
with its AclAuthorizer (and AclAuthorizerTest.testAclsFilter for what a delete reports)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

import broker.server.handlers.acls  # noqa: F401  (registers the handlers)
from broker.security.authorizer import AclAuthorizer, AllowAll, Authorizer
from broker.server.dispatch import REGISTRY, RequestContext
from broker.server.network import ConnectionInfo
from clients.protocol.acl import (
    CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType,
)
from clients.protocol.errors import Code, KafkaError, NotControllerError
from clients.protocol.headers import RequestHeader
from clients.protocol.messages import API_BY_NAME
from clients.protocol.schema import Struct
from zkcoord.local import LocalMetadataStore
from zkcoord.store import AclBinding, AclsChanged, BrokerInfo, MetadataStore

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ADMIN, ALICE = "User:admin", "User:alice"
HOST = "10.0.0.7"


class Services:
    def __init__(self, store: MetadataStore, authorizer: Authorizer):
        self.store = store
        self.authorizer = authorizer


async def call(services: Services, api_name: str, body: dict, version: int,
               principal: str = ADMIN, host: str = HOST) -> Struct:
    api = API_BY_NAME[api_name]
    request = api.decode_request(api.encode_request(body, version).getvalue(), version)
    conn = ConnectionInfo((host, 50000), "PLAINTEXT")
    conn.principal = principal
    ctx = RequestContext(RequestHeader(api.key, version, 1, "test"), conn, api)
    handler: Any = REGISTRY[api.key].fn       # typed for ApiServices; these services are the AclServices part
    result = handler(services, request, ctx)
    if asyncio.iscoroutine(result):
        result = await result
    return api.decode_response(api.encode_response(result, version).getvalue(), version)


def run(tmp_path: Path, test: Callable[[Services], Awaitable[None]],
        store_class: type[LocalMetadataStore] = LocalMetadataStore, authorizer: bool = True) -> None:
    async def main() -> None:
        store = store_class(tmp_path / "meta", BrokerInfo(0, "localhost", 9092))
        await store.start()
        if authorizer:
            acl_authorizer = AclAuthorizer(store.acls, super_users={ADMIN})
            store.subscribe(lambda e: acl_authorizer.refresh() if isinstance(e, AclsChanged) else None)
            services = Services(store, acl_authorizer)
        else:
            services = Services(store, AllowAll())
        try:
            await test(services)
        finally:
            await store.stop()
    asyncio.run(main())


def creation(rt: int, name: str, principal: str = ALICE, op: int = Op.READ, perm: int = Perm.ALLOW,
             pattern: int = PT.LITERAL, host: str = "*") -> dict:
    return {"resource_type": rt, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": op, "permission_type": perm}


def acl_filter(rt: int = RT.ANY, name: str | None = None, pattern: int = PT.ANY, principal: str | None = None,
               host: str | None = None, op: int = Op.ANY, perm: int = Perm.ANY) -> dict:
    return {"resource_type_filter": rt, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def binding(rt: ResourceType, name: str, principal: str = ALICE, op: AclOperation = Op.READ,
            perm: AclPermissionType = Perm.ALLOW, pattern: PatternType = PT.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(resource_type=rt, resource_name=name, pattern_type=pattern, principal=principal,
                      host=host, operation=op, permission=perm)


def described(response: Struct) -> set[AclBinding]:
    return {binding(RT(r.resource_type), r.resource_name, a.principal, Op(a.operation), Perm(a.permission_type),
                    PT(r.pattern_type), a.host)
            for r in response.resources for a in r.acls}


def deleted(result: Struct) -> set[AclBinding]:
    return {binding(RT(m.resource_type), m.resource_name, m.principal, Op(m.operation), Perm(m.permission_type),
                    PT(m.pattern_type), m.host) for m in result.matching_acls}


# ---------------------------------------------------------------- no authorizer, not authorized

def test_no_authorizer_answers_security_disabled(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        r = await call(s, "CreateAcls", {"creations": [creation(RT.TOPIC, "t"), creation(RT.TOPIC, "u")]}, 3)
        assert [(x.error_code, x.error_message) for x in r.results] == \
            [(Code.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        r = await call(s, "DescribeAcls", acl_filter(), 3)
        assert (r.error_code, r.error_message, r.resources) == \
            (Code.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
        r = await call(s, "DeleteAcls", {"filters": [acl_filter()]}, 3)
        assert [(x.error_code, x.error_message, x.matching_acls) for x in r.filter_results] == \
            [(Code.SECURITY_DISABLED, "No Authorizer is configured.", [])]
        assert s.store.acls() == []
    assert Code.SECURITY_DISABLED == 54
    run(tmp_path, test, authorizer=False)


def test_cluster_alter_and_describe_are_required(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        await s.store.create_acls([binding(RT.TOPIC, "t", ALICE)])
        r = await call(s, "CreateAcls", {"creations": [creation(RT.TOPIC, "t2"), creation(RT.GROUP, "g")]}, 2,
                       principal=ALICE)
        assert [x.error_code for x in r.results] == [Code.CLUSTER_AUTHORIZATION_FAILED] * 2
        assert r.results[0].error_message.startswith("Request ")
        assert r.results[0].error_message.endswith(" is not authorized.")
        r = await call(s, "DescribeAcls", acl_filter(), 2, principal=ALICE)
        assert (r.error_code, r.resources) == (Code.CLUSTER_AUTHORIZATION_FAILED, [])
        r = await call(s, "DeleteAcls", {"filters": [acl_filter(), acl_filter(RT.TOPIC)]}, 2, principal=ALICE)
        assert [(x.error_code, x.matching_acls) for x in r.filter_results] == \
            [(Code.CLUSTER_AUTHORIZATION_FAILED, [])] * 2
        assert s.store.acls() == [binding(RT.TOPIC, "t", ALICE)]       # nothing was written or deleted

        # DESCRIBE on the Cluster lets alice describe but not alter.
        await s.store.create_acls([binding(RT.CLUSTER, CLUSTER_NAME, ALICE, Op.DESCRIBE, host=HOST)])
        r = await call(s, "DescribeAcls", acl_filter(RT.TOPIC), 2, principal=ALICE)
        assert r.error_code == Code.NONE and described(r) == {binding(RT.TOPIC, "t", ALICE)}
        r = await call(s, "DescribeAcls", acl_filter(RT.TOPIC), 2, principal=ALICE, host="10.0.0.8")
        assert r.error_code == Code.CLUSTER_AUTHORIZATION_FAILED            # the ACL names her host
        r = await call(s, "CreateAcls", {"creations": [creation(RT.TOPIC, "t2")]}, 2, principal=ALICE)
        assert r.results[0].error_code == Code.CLUSTER_AUTHORIZATION_FAILED

        # ALTER on the Cluster: create and delete (and describe, which ALTER implies).
        await s.store.create_acls([binding(RT.CLUSTER, CLUSTER_NAME, ALICE, Op.ALTER)])
        r = await call(s, "CreateAcls", {"creations": [creation(RT.TOPIC, "t2")]}, 2, principal=ALICE)
        assert r.results[0].error_code == Code.NONE
        r = await call(s, "DeleteAcls", {"filters": [acl_filter(RT.TOPIC, "t2", PT.LITERAL)]}, 2, principal=ALICE)
        assert deleted(r.filter_results[0]) == {binding(RT.TOPIC, "t2")}
        r = await call(s, "DescribeAcls", acl_filter(RT.TOPIC), 2, principal=ALICE, host="10.0.0.8")
        assert r.error_code == Code.NONE
    run(tmp_path, test)


# ---------------------------------------------------------------- CreateAcls

INVALID = [
    (creation(RT.ANY, "t"), "Invalid resourceType ANY"),
    (creation(RT.UNKNOWN, "t"), "Invalid resourceType UNKNOWN"),
    (creation(99, "t"), "Invalid resourceType UNKNOWN"),           # a code Kafka does not know
    (creation(RT.TOPIC, "t", pattern=PT.MATCH), "Invalid patternType MATCH"),
    (creation(RT.TOPIC, "t", pattern=PT.ANY), "Invalid patternType ANY"),
    (creation(RT.TOPIC, "t", pattern=PT.UNKNOWN), "Invalid patternType UNKNOWN"),
    (creation(RT.TOPIC, "t", op=Op.ANY), "Invalid operation ANY"),
    (creation(RT.TOPIC, "t", op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (creation(RT.TOPIC, "t", perm=Perm.ANY), "Invalid permissionType ANY"),
    (creation(RT.TOPIC, "t", perm=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (creation(RT.CLUSTER, "my-cluster"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (creation(RT.TOPIC, ""), "Invalid empty resource name"),
    (creation(RT.TOPIC, "t", principal="alice"),
     "Could not parse principal from `alice` (no colon is present separating the principal type "
     "from the principal name)"),
    (creation(RT.GROUP, "a/b"), "Failed to create ACL"),
]


def test_create_answers_each_creation_and_writes_the_valid_ones(tmp_path: Path) -> None:
    valid = [creation(RT.TOPIC, "t", ALICE, Op.WRITE, Perm.DENY, host="10.0.0.1"),
             creation(RT.GROUP, "app-", "User:*", Op.READ, pattern=PT.PREFIXED),
             creation(RT.TOPIC, "*", pattern=PT.PREFIXED),      # Kafka stores it: names starting with "*"
             creation(RT.CLUSTER, CLUSTER_NAME, op=Op.IDEMPOTENT_WRITE),
             creation(RT.TRANSACTIONAL_ID, "*", op=Op.ALL)]

    async def test(s: Services) -> None:
        # Valid and invalid interleaved (the valid ones repeat): each answer at its index.
        creations: list[dict] = []
        expected: list[tuple[int, str | None]] = []
        for i, (bad, message) in enumerate(INVALID):
            creations += [valid[i % len(valid)], bad]
            expected += [(Code.NONE, None), (Code.INVALID_REQUEST, message)]
        r = await call(s, "CreateAcls", {"creations": creations}, 3)
        assert [(x.error_code, x.error_message) for x in r.results] == expected
        assert set(s.store.acls()) == {
            binding(RT.TOPIC, "t", ALICE, Op.WRITE, Perm.DENY, host="10.0.0.1"),
            binding(RT.GROUP, "app-", "User:*", pattern=PT.PREFIXED),
            binding(RT.TOPIC, "*", pattern=PT.PREFIXED),
            binding(RT.CLUSTER, CLUSTER_NAME, op=Op.IDEMPOTENT_WRITE),
            binding(RT.TRANSACTIONAL_ID, "*", op=Op.ALL)}
        # The authorizer follows at once (AclsChanged).
        assert s.authorizer.authorize("User:bob", HOST, Op.READ, RT.GROUP, "app-1")
        assert not s.authorizer.authorize(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "t")
    run(tmp_path, test)


def test_create_v0_means_literal_and_an_existing_acl_is_created_again(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        c = creation(RT.TOPIC, "t")
        del c["resource_pattern_type"]
        r = await call(s, "CreateAcls", {"creations": [c, c]}, 0)
        assert [x.error_code for x in r.results] == [Code.NONE, Code.NONE]
        r = await call(s, "CreateAcls", {"creations": [c]}, 0)
        assert [x.error_code for x in r.results] == [Code.NONE]
        assert s.store.acls() == [binding(RT.TOPIC, "t", pattern=PT.LITERAL)]
    run(tmp_path, test)


class FailingStore(LocalMetadataStore):
    async def create_acls(self, bindings: list[AclBinding]) -> None:
        raise NotControllerError("the store is unavailable")

    async def delete_acls(self, bindings: list[AclBinding]) -> None:
        raise RuntimeError("disk on fire")


def test_a_failed_store_write_is_each_valid_acls_error(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        r = await call(s, "CreateAcls", {"creations": [creation(RT.TOPIC, "t"), creation(RT.ANY, "t")]}, 1)
        assert [(x.error_code, x.error_message) for x in r.results] == [
            (NotControllerError.code, "the store is unavailable"),
            (Code.INVALID_REQUEST, "Invalid resourceType ANY")]
        assert isinstance(s.store, FailingStore)
        await LocalMetadataStore.create_acls(s.store, [binding(RT.TOPIC, "t"), binding(RT.GROUP, "g")])
        r = await call(s, "DeleteAcls", {"filters": [acl_filter(RT.TOPIC), acl_filter(RT.USER)]}, 1)
        first, second = r.filter_results
        assert first.error_code == Code.NONE and second.matching_acls == []
        assert [(m.error_code, m.resource_name) for m in first.matching_acls] == [(Code.UNKNOWN_SERVER_ERROR, "t")]
        assert len(s.store.acls()) == 2
    assert issubclass(NotControllerError, KafkaError)
    run(tmp_path, test, store_class=FailingStore)


# ---------------------------------------------------------------- DescribeAcls

STORED = [
    binding(RT.TOPIC, "foo-1", ALICE, Op.READ),
    binding(RT.TOPIC, "foo-1", ALICE, Op.WRITE, host="192.168.0.1"),
    binding(RT.TOPIC, "bar-1", ALICE, Op.DESCRIBE),
    binding(RT.TOPIC, "bar-", "User:*", Op.READ, pattern=PT.PREFIXED),
    binding(RT.TOPIC, "*", "User:bob", Op.ALL, Perm.DENY),
    binding(RT.GROUP, "bar-1", ALICE, Op.READ),
    binding(RT.CLUSTER, CLUSTER_NAME, "User:bob", Op.ALTER),
]
FOO1_READ, FOO1_WRITE, BAR1, BAR_PREFIX, TOPIC_WILDCARD, GROUP_BAR1, CLUSTER_ALTER = STORED

DESCRIBE_CASES = [
    ("everything", acl_filter(), set(STORED)),
    ("one type", acl_filter(RT.TOPIC), {FOO1_READ, FOO1_WRITE, BAR1, BAR_PREFIX, TOPIC_WILDCARD}),
    ("literal name", acl_filter(RT.TOPIC, "foo-1", PT.LITERAL), {FOO1_READ, FOO1_WRITE}),
    ("literal *: the wildcard ACLs only", acl_filter(RT.TOPIC, "*", PT.LITERAL), {TOPIC_WILDCARD}),
    ("prefixed name", acl_filter(RT.TOPIC, "bar-", PT.PREFIXED), {BAR_PREFIX}),
    ("prefixed name, not a literal", acl_filter(RT.TOPIC, "bar-1", PT.PREFIXED), set()),
    ("any pattern, one name", acl_filter(RT.ANY, "bar-1", PT.ANY), {BAR1, GROUP_BAR1}),
    ("match: literal, wildcard and prefixes of the name", acl_filter(RT.TOPIC, "bar-1", PT.MATCH),
     {BAR1, BAR_PREFIX, TOPIC_WILDCARD}),
    ("match, any type (testAclsFilter)", acl_filter(RT.ANY, "bar-1", PT.MATCH),
     {BAR1, BAR_PREFIX, TOPIC_WILDCARD, GROUP_BAR1}),
    ("match without a name", acl_filter(RT.GROUP, None, PT.MATCH), {GROUP_BAR1}),
    ("principal", acl_filter(principal="User:bob"), {TOPIC_WILDCARD, CLUSTER_ALTER}),
    ("wildcard principal is literal in a filter", acl_filter(principal="User:*"), {BAR_PREFIX}),
    ("host", acl_filter(host="192.168.0.1"), {FOO1_WRITE}),
    ("operation", acl_filter(op=Op.READ), {FOO1_READ, BAR_PREFIX, GROUP_BAR1}),
    ("ALL in a filter is the ALL operation", acl_filter(op=Op.ALL), {TOPIC_WILDCARD}),
    ("permission", acl_filter(perm=Perm.DENY), {TOPIC_WILDCARD}),
    ("nothing", acl_filter(RT.TRANSACTIONAL_ID), set()),
]


@pytest.mark.parametrize("case,request_filter,expected", DESCRIBE_CASES, ids=[c[0] for c in DESCRIBE_CASES])
def test_describe_filters(tmp_path: Path, case: str, request_filter: dict, expected: set[AclBinding]) -> None:
    async def test(s: Services) -> None:
        await s.store.create_acls(STORED)
        r = await call(s, "DescribeAcls", request_filter, 3)
        assert (r.error_code, r.error_message) == (Code.NONE, None)
        assert described(r) == expected
        keys = [(x.resource_type, x.resource_name, x.pattern_type) for x in r.resources]
        assert len(keys) == len(set(keys))      # one entry per resource pattern
    run(tmp_path, test)


def test_describe_v0_is_literal_and_unknown_filters_are_invalid(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        await s.store.create_acls(STORED)
        v0 = acl_filter()
        del v0["pattern_type_filter"]
        r = await call(s, "DescribeAcls", v0, 0)
        assert described(r) == {b for b in STORED if b.pattern_type == PT.LITERAL}
        for bad, message in [(acl_filter(RT.UNKNOWN), "Unknown patternFilter."),
                             (acl_filter(pattern=PT.UNKNOWN), "Unknown patternFilter."),
                             (acl_filter(op=Op.UNKNOWN), "Unknown entryFilter."),
                             (acl_filter(perm=42), "Unknown entryFilter.")]:
            r = await call(s, "DescribeAcls", bad, 1)
            assert (r.error_code, r.error_message, r.resources) == (Code.INVALID_REQUEST, message, [])
    run(tmp_path, test)


# ---------------------------------------------------------------- DeleteAcls

def test_delete_reports_each_acl_under_the_first_filter_that_matched_it(tmp_path: Path) -> None:
    # Kafka's AclAuthorizerTest.testAclsFilter
    resource1, resource2 = "foo-1", "bar-1"
    acl1 = binding(RT.TOPIC, resource1, ALICE, Op.READ)
    acl2 = binding(RT.TOPIC, resource1, ALICE, Op.WRITE, host="192.168.0.1")
    acl3 = binding(RT.TOPIC, resource2, ALICE, Op.DESCRIBE)
    acl4 = binding(RT.TOPIC, "bar-", "User:*", Op.READ, pattern=PT.PREFIXED)

    async def test(s: Services) -> None:
        await s.store.create_acls([acl1, acl2, acl3, acl4])
        filters = [acl_filter(RT.ANY, resource2, PT.MATCH),
                   acl_filter(RT.TOPIC, resource1, PT.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW),
                   acl_filter(RT.TOPIC, resource2, PT.LITERAL),
                   acl_filter(RT.TOPIC, "baz", PT.ANY)]
        r = await call(s, "DeleteAcls", {"filters": filters}, 3)
        results = r.filter_results
        assert [x.error_code for x in results] == [Code.NONE] * 4
        assert all(m.error_code == Code.NONE for x in results for m in x.matching_acls)
        assert [deleted(x) for x in results] == [{acl3, acl4}, {acl1}, set(), set()]
        assert s.store.acls() == [acl2]
        assert not s.authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, resource1)    # refreshed
    run(tmp_path, test)


def test_delete_v0_is_literal_and_an_unknown_filter_fails_alone(tmp_path: Path) -> None:
    async def test(s: Services) -> None:
        await s.store.create_acls(STORED)
        v0 = acl_filter(RT.TOPIC)
        del v0["pattern_type_filter"]
        r = await call(s, "DeleteAcls", {"filters": [v0]}, 0)
        assert deleted(r.filter_results[0]) == {FOO1_READ, FOO1_WRITE, BAR1, TOPIC_WILDCARD}
        r = await call(s, "DeleteAcls", {"filters": [acl_filter(RT.UNKNOWN), acl_filter(op=Op.UNKNOWN),
                                                     acl_filter(RT.GROUP)]}, 2)
        assert [(x.error_code, x.error_message) for x in r.filter_results] == [
            (Code.INVALID_REQUEST, "Unknown patternFilter."), (Code.INVALID_REQUEST, "Unknown entryFilter."),
            (Code.NONE, None)]
        assert deleted(r.filter_results[2]) == {GROUP_BAR1}
        assert set(s.store.acls()) == {BAR_PREFIX, CLUSTER_ALTER}
        r = await call(s, "DeleteAcls", {"filters": [acl_filter(RT.GROUP)]}, 2)
        assert r.filter_results[0].matching_acls == []                    # nothing left to match
    run(tmp_path, test)
