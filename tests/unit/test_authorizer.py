"""AclAuthorizer decides as Kafka's kafka.security.authorizer.AclAuthorizer: the cases of
Kafka's AclAuthorizerTest and BaseAuthorizerTest (authorize and the KIP-679
authorize_by_resource_type), on a list of ACLs as the store would hand them."""
from __future__ import annotations

import pytest

from broker.security.authorizer import AclAuthorizer, AllowAll
from clients.protocol.acl import (
    CLUSTER_NAME, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AclOperation, AclPermissionType,
    PatternType, ResourceType,
)
from zkcoord.store import AclBinding

Op, Perm, RT = AclOperation, AclPermissionType, ResourceType
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Perm.ALLOW, Perm.DENY
ALICE, BOB = "User:alice", "User:bob"
H1, H2 = "192.168.1.1", "192.168.1.2"
TOPIC = "foo-1"

# Every operation an ACL can name, as Kafka's testAclInheritance walks them.
CONCRETE_OPS = [Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION,
                Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.CREATE_TOKENS,
                Op.DESCRIBE_TOKENS]


def acl(principal: str, host: str, operation: AclOperation, permission: AclPermissionType,
        name: str = TOPIC, pattern: PatternType = LITERAL, resource_type: ResourceType = RT.TOPIC) -> AclBinding:
    return AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                      principal=principal, host=host, operation=operation, permission=permission)


def authorizer(*acls: AclBinding, allow_everyone: bool = False) -> AclAuthorizer:
    return AclAuthorizer(lambda: list(acls), super_users={"User:superuser1", "User:superuser2"},
                         allow_everyone_if_no_acl_found=allow_everyone)


# (case, ACLs, allow.everyone, principal, host, operation, resource type, resource name, allowed)
CASES = [
    ("no ACL at all: fail closed", [], False, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("no ACL, allow.everyone", [], True, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("allow.everyone only where no ACL at all matches the resource",
     [acl(BOB, "*", Op.READ, ALLOW)], True, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("allow.everyone: ACLs on another resource do not count",
     [acl(BOB, "*", Op.READ, ALLOW, name="other")], True, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("literal allow", [acl(ALICE, H1, Op.READ, ALLOW)], False, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("literal allow is for its name only",
     [acl(ALICE, H1, Op.READ, ALLOW)], False, ALICE, H1, Op.READ, RT.TOPIC, "foo-2", False),
    ("literal allow is for its resource type only",
     [acl(ALICE, H1, Op.READ, ALLOW, resource_type=RT.GROUP)], False, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("another operation is not allowed",
     [acl(ALICE, H1, Op.READ, ALLOW)], False, ALICE, H1, Op.WRITE, RT.TOPIC, TOPIC, False),
    ("another principal is not allowed",
     [acl(ALICE, H1, Op.READ, ALLOW)], False, BOB, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("principal type matters", [acl("Group:alice", H1, Op.READ, ALLOW)], False, ALICE, H1, Op.READ,
     RT.TOPIC, TOPIC, False),
    ("another host is not allowed",
     [acl(ALICE, H1, Op.READ, ALLOW)], False, ALICE, H2, Op.READ, RT.TOPIC, TOPIC, False),
    ("wildcard host", [acl(ALICE, WILDCARD_HOST, Op.READ, ALLOW)], False, ALICE, H2, Op.READ,
     RT.TOPIC, TOPIC, True),
    ("wildcard principal", [acl(WILDCARD_PRINCIPAL, H1, Op.READ, ALLOW)], False, BOB, H1, Op.READ,
     RT.TOPIC, TOPIC, True),
    ("deny takes precedence (testDenyTakesPrecedence)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.ALL, ALLOW), acl(ALICE, H1, Op.ALL, DENY)], False,
     ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("a deny from one host leaves another host allowed",
     [acl(ALICE, H1, Op.READ, ALLOW), acl(ALICE, H2, Op.READ, ALLOW), acl(ALICE, H1, Op.READ, DENY)],
     False, ALICE, H2, Op.READ, RT.TOPIC, TOPIC, True),
    ("deny for everyone denies alice",
     [acl(ALICE, H1, Op.READ, ALLOW), acl(WILDCARD_PRINCIPAL, "*", Op.READ, DENY)], False,
     ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("deny READ does not deny DESCRIBE (testTopicAcl)",
     [acl(ALICE, "*", Op.DESCRIBE, ALLOW), acl(ALICE, H1, Op.READ, DENY)], False,
     ALICE, H1, Op.DESCRIBE, RT.TOPIC, TOPIC, True),
    ("allow all (testAllowAllAccess)", [acl(WILDCARD_PRINCIPAL, "*", Op.ALL, ALLOW)], False,
     "User:random", "192.0.4.4", Op.READ, RT.TOPIC, TOPIC, True),
    ("literal * allows every name (testAccessAllowedIfAllowAclExistsOnWildcardResource)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name=WILDCARD_RESOURCE)], False,
     ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("deny on literal * beats a literal allow (testWildCardAcls)",
     [acl(ALICE, H1, Op.READ, ALLOW, name="*"), acl(ALICE, H1, Op.WRITE, ALLOW),
      acl(ALICE, H1, Op.WRITE, DENY, name="*")], False, ALICE, H1, Op.WRITE, RT.TOPIC, TOPIC, False),
    ("prefixed allow (testAccessAllowedIfAllowAclExistsOnPrefixedResource)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="foo", pattern=PREFIXED)], False,
     ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("a prefix equal to the name", [acl(ALICE, "*", Op.READ, ALLOW, name=TOPIC, pattern=PREFIXED)],
     False, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("a prefix longer than the name does not match",
     [acl(ALICE, "*", Op.READ, ALLOW, name="foo-10", pattern=PREFIXED)], False, ALICE, H1, Op.READ,
     RT.TOPIC, TOPIC, False),
    ("a prefixed ACL is not a literal one",
     [acl(ALICE, "*", Op.READ, ALLOW, name="fo", pattern=PREFIXED)], False, ALICE, H1, Op.READ,
     RT.TOPIC, "bar", False),
    ("a prefixed deny beats a literal allow",
     [acl(ALICE, "*", Op.READ, ALLOW), acl(ALICE, "*", Op.READ, DENY, name="foo-", pattern=PREFIXED)],
     False, ALICE, H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("prefixed PREFIXED * matches names starting with *, not every name",
     [acl(ALICE, "*", Op.READ, ALLOW, name="*", pattern=PREFIXED)], False, ALICE, H1, Op.READ,
     RT.TOPIC, TOPIC, False),
    ("unrelated prefixed denies (testAuthorizeWithPrefixedResource)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, DENY, name=n, pattern=p) for n, p in [
         ("a_other", LITERAL), ("a_other", PREFIXED), ("foo-1x", PREFIXED), ("foo-12", PREFIXED),
         ("fooo-", PREFIXED), ("fo-", PREFIXED), ("fop-", PREFIXED), ("fon-", PREFIXED),
         ("z_other", PREFIXED), ("z_other", LITERAL)]]
     + [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="foo", pattern=PREFIXED)], False,
     ALICE, H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("single character literal (testSingleCharacterResourceAcls)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="f")], False, ALICE, H1, Op.READ, RT.TOPIC, "foo", False),
    ("single character prefix", [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="_", pattern=PREFIXED)],
     False, ALICE, H1, Op.READ, RT.TOPIC, "_", True),
    ("single character prefix, other name",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="_", pattern=PREFIXED)], False, ALICE, H1,
     Op.READ, RT.TOPIC, "foo_", False),
    ("empty resource name: wildcard applies (testAuthorizeWithEmptyResourceName)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.READ, ALLOW, name="*", resource_type=RT.GROUP)], False,
     ALICE, H1, Op.READ, RT.GROUP, "", True),
    ("super user beats deny all (testSuperUserHasAccess)",
     [acl(WILDCARD_PRINCIPAL, "*", Op.ALL, DENY)], False, "User:superuser2", H1, Op.READ, RT.TOPIC, TOPIC, True),
    ("super user with no ACL at all", [], False, "User:superuser1", H1, Op.ALTER, RT.CLUSTER, CLUSTER_NAME, True),
    ("super users are exact principals", [], False, "Group:superuser1", H1, Op.READ, RT.TOPIC, TOPIC, False),
    ("cluster ACL", [acl(ALICE, "*", Op.ALTER, ALLOW, name=CLUSTER_NAME, resource_type=RT.CLUSTER)], False,
     ALICE, H1, Op.ALTER, RT.CLUSTER, CLUSTER_NAME, True),
]


@pytest.mark.parametrize("case,acls,everyone,principal,host,op,rtype,name,allowed", CASES,
                         ids=[c[0] for c in CASES])
def test_authorize(case: str, acls: list[AclBinding], everyone: bool, principal: str, host: str,
                   op: AclOperation, rtype: ResourceType, name: str, allowed: bool) -> None:
    assert authorizer(*acls, allow_everyone=everyone).authorize(principal, host, op, rtype, name) is allowed


# Kafka's testAclInheritance: what an ALLOW or a DENY of one operation implies.
ALLOW_IMPLIES = [(Op.ALL, set(CONCRETE_OPS)), (Op.READ, {Op.DESCRIBE}), (Op.WRITE, {Op.DESCRIBE}),
                 (Op.DELETE, {Op.DESCRIBE}), (Op.ALTER, {Op.DESCRIBE}), (Op.DESCRIBE, set()),
                 (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}), (Op.DESCRIBE_CONFIGS, set()),
                 (Op.CREATE, set()), (Op.IDEMPOTENT_WRITE, set())]
DENY_IMPLIES = [(Op.ALL, set(CONCRETE_OPS)), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()),
                (Op.READ, set()), (Op.ALTER, set())]


@pytest.mark.parametrize("granted,implied", ALLOW_IMPLIES, ids=[o.name for o, _ in ALLOW_IMPLIES])
def test_allow_implies(granted: AclOperation, implied: set[AclOperation]) -> None:
    a = authorizer(acl(ALICE, "*", granted, ALLOW, name=CLUSTER_NAME, resource_type=RT.CLUSTER))
    for op in CONCRETE_OPS:
        expected = op == granted or op in implied
        assert a.authorize(ALICE, H1, op, RT.CLUSTER, CLUSTER_NAME) is expected, f"ALLOW {granted.name} -> {op.name}"


@pytest.mark.parametrize("denied,implied", DENY_IMPLIES, ids=[o.name for o, _ in DENY_IMPLIES])
def test_deny_implies(denied: AclOperation, implied: set[AclOperation]) -> None:
    a = authorizer(acl(ALICE, "*", denied, DENY, name=CLUSTER_NAME, resource_type=RT.CLUSTER),
                   acl(ALICE, "*", Op.ALL, ALLOW, name=CLUSTER_NAME, resource_type=RT.CLUSTER))
    for op in CONCRETE_OPS:
        expected = not (op == denied or op in implied)
        assert a.authorize(ALICE, H1, op, RT.CLUSTER, CLUSTER_NAME) is expected, f"DENY {denied.name} -> {op.name}"


def test_the_index_changes_only_on_refresh_and_reads_the_source_only_then() -> None:
    store: list[AclBinding] = []
    reads = 0

    def source() -> list[AclBinding]:
        nonlocal reads
        reads += 1
        return list(store)

    a = AclAuthorizer(source)
    assert reads == 1
    store.append(acl(ALICE, "*", Op.READ, ALLOW))
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, TOPIC)
    a.refresh()
    for _ in range(10):
        assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, TOPIC)
    assert reads == 2                   # decisions come from the index, never from the source
    store.clear()
    a.refresh()
    assert not a.authorize(ALICE, H1, Op.READ, RT.TOPIC, TOPIC)


def test_duplicate_acls_and_both_enabled_flags() -> None:
    a = authorizer(acl(ALICE, "*", Op.READ, ALLOW), acl(ALICE, "*", Op.READ, ALLOW))
    assert a.authorize(ALICE, H1, Op.READ, RT.TOPIC, TOPIC)
    assert a.enabled is True and AllowAll.enabled is False
    assert AllowAll().authorize(ALICE, H1, Op.READ, RT.TOPIC, TOPIC)


def test_parse_super_users() -> None:
    from clients.properties import ConfigError
    from broker.config.security import parse_super_users

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{key}: {message}", key)
    assert parse_super_users("User:superuser1; User:superuser2", fail) == {"User:superuser1", "User:superuser2"}
    assert parse_super_users("", fail) == set()
    assert parse_super_users("User:a;;", fail) == {"User:a"}
    with pytest.raises(ConfigError, match="super.users"):
        parse_super_users("User:a;bob", fail)


# KIP-679, authorize_by_resource_type: Kafka's BaseAuthorizerTest cases, on a set of ACLs
# that refreshes the authorizer after every change.
U1, U2 = "User:user1", "User:user2"


class Acls:
    def __init__(self, allow_everyone: bool = False):
        self.acls: list[AclBinding] = []
        self.authorizer = AclAuthorizer(lambda: list(self.acls), super_users={"User:superuser1"},
                                        allow_everyone_if_no_acl_found=allow_everyone)

    def add(self, *bindings: AclBinding) -> None:
        self.acls.extend(b for b in bindings if b not in self.acls)
        self.authorizer.refresh()

    def remove(self, *bindings: AclBinding) -> None:
        self.acls = [b for b in self.acls if b not in bindings]
        self.authorizer.refresh()

    def by_type(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        return self.authorizer.authorize_by_resource_type(principal, host, op, rtype)


def test_an_authorizer_not_loaded_yet_allows_super_users_only() -> None:
    a = AclAuthorizer(lambda: [], super_users={"User:admin"}, allow_everyone_if_no_acl_found=True,
                      loaded=False)
    assert a.authorize("User:admin", H1, Op.WRITE, RT.TOPIC, TOPIC)
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, TOPIC)
    assert not a.authorize_by_resource_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    a.refresh()
    assert not a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, TOPIC)
    a.refresh(loaded=True)
    assert a.authorize(ALICE, H1, Op.WRITE, RT.TOPIC, TOPIC)


def test_by_type_multiple_add_and_remove() -> None:
    s = Acls()
    deny_read, allow_read = acl(U1, H1, Op.READ, DENY, name="sb1"), acl(U1, H1, Op.READ, ALLOW, name="sb1")
    for _ in range(3):
        assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
        s.add(allow_read)
        assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
        for _ in range(3):
            s.add(deny_read)
            assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
            s.remove(deny_read)
            s.add(allow_read)
            assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
        s.remove(allow_read)
        assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_type_isolation_unrelated_deny_wont_dominate_allow() -> None:
    s = Acls()
    s.add(acl(U1, H1, Op.READ, DENY, name="sb1"), acl(U2, H1, Op.READ, DENY, name="sb1"),
          acl(U1, H2, Op.WRITE, DENY, name="sb1"), acl(U2, H2, Op.READ, DENY, name="sb1"),
          acl(U1, H2, Op.READ, ALLOW, name="sb1"),
          acl(U1, H2, Op.READ, DENY, name="sb2"),
          acl(U1, H2, Op.READ, DENY, name="s", pattern=PREFIXED, resource_type=RT.GROUP))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    assert not s.by_type(U1, H1, Op.READ, RT.GROUP)
    assert not s.by_type(U1, H1, Op.READ, RT.TRANSACTIONAL_ID)
    assert not s.by_type(U1, H1, Op.READ, RT.CLUSTER)
    assert s.by_type(U1, H2, Op.READ, RT.TOPIC)


def test_by_type_deny_takes_precedence() -> None:
    s = Acls()
    s.add(acl(U1, H1, Op.WRITE, ALLOW, name="sb1"))
    assert s.by_type(U1, H1, Op.WRITE, RT.TOPIC)
    s.add(acl(U1, H1, Op.WRITE, DENY, name="sb1"))
    assert not s.by_type(U1, H1, Op.WRITE, RT.TOPIC)


def test_by_type_prefixed_resource_deny_dominates() -> None:
    s = Acls()

    def group(name: str, permission: AclPermissionType) -> AclBinding:
        return acl(U1, H1, Op.READ, permission, name=name, pattern=PREFIXED, resource_type=RT.GROUP)

    s.add(group("abcde", ALLOW))
    assert s.by_type(U1, H1, Op.READ, RT.GROUP)
    s.add(group("abcd", DENY))
    assert not s.by_type(U1, H1, Op.READ, RT.GROUP)
    s.add(group("abc", ALLOW))
    assert s.by_type(U1, H1, Op.READ, RT.GROUP)
    s.add(group("a", DENY))
    assert not s.by_type(U1, H1, Op.READ, RT.GROUP)
    s.add(group("ab", ALLOW))
    assert not s.by_type(U1, H1, Op.READ, RT.GROUP)


def test_by_type_wildcard_resource_deny_dominates() -> None:
    s = Acls()

    def group(name: str, permission: AclPermissionType, pattern: PatternType = LITERAL) -> AclBinding:
        return acl(U1, H1, Op.WRITE, permission, name=name, pattern=pattern, resource_type=RT.GROUP)

    s.add(group("hello", ALLOW, PREFIXED))
    assert s.by_type(U1, H1, Op.WRITE, RT.GROUP)
    s.add(group(WILDCARD_RESOURCE, DENY))
    assert not s.by_type(U1, H1, Op.WRITE, RT.GROUP)
    s.add(group(WILDCARD_RESOURCE, ALLOW))
    assert not s.by_type(U1, H1, Op.WRITE, RT.GROUP)
    s.add(group("aloha", ALLOW))
    assert not s.by_type(U1, H1, Op.WRITE, RT.GROUP)


def test_by_type_literal_deny_dominates_only_its_own_literal() -> None:
    s = Acls()
    s.add(acl(U1, H1, Op.READ, ALLOW, name="t1"), acl(U1, H1, Op.READ, DENY, name="t1"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, ALLOW, name="t2"))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, DENY, name="t", pattern=PREFIXED))      # dominates t1 and t2
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, ALLOW, name=WILDCARD_RESOURCE))          # only a deny on literal * beats it
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, DENY, name=WILDCARD_RESOURCE, pattern=PREFIXED))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_type_a_prefix_deny_as_long_as_the_name_dominates_it() -> None:
    s = Acls()
    s.add(acl(U1, H1, Op.READ, ALLOW, name="t1"), acl(U1, H1, Op.READ, DENY, name="t1", pattern=PREFIXED))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, ALLOW, name="t", pattern=PREFIXED))     # "t" is shorter: not dominated
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_type_with_all_operation_ace() -> None:
    s = Acls()
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.WRITE, DENY, name="sb1"), acl(U1, H1, Op.ALL, ALLOW, name="sb1"))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.ALL, DENY, name="sb1"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)


def test_by_type_with_all_host_ace() -> None:
    s = Acls()
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, ALLOW, name="sb1"))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, WILDCARD_HOST, Op.READ, DENY, name="sb1"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, DENY, name="sb2"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    assert not s.by_type(U1, H2, Op.READ, RT.TOPIC)
    s.add(acl(U1, WILDCARD_HOST, Op.READ, ALLOW, name="sb2"))
    assert s.by_type(U1, H2, Op.READ, RT.TOPIC)
    s.add(acl(U1, WILDCARD_HOST, Op.READ, DENY, name="sb2"))
    assert not s.by_type(U1, H2, Op.READ, RT.TOPIC)


def test_by_type_with_all_principal_ace() -> None:
    s = Acls()
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, ALLOW, name="sb1"))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(WILDCARD_PRINCIPAL, H1, Op.READ, DENY, name="sb1"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    s.add(acl(U1, H1, Op.READ, DENY, name="sb2"))
    assert not s.by_type(U1, H1, Op.READ, RT.TOPIC)
    assert not s.by_type(U2, H1, Op.READ, RT.TOPIC)
    s.add(acl(WILDCARD_PRINCIPAL, H1, Op.READ, ALLOW, name="sb2"))
    assert s.by_type(U2, H1, Op.READ, RT.TOPIC)
    s.add(acl(WILDCARD_PRINCIPAL, H1, Op.READ, DENY, name="sb2"))
    assert not s.by_type(U2, H1, Op.READ, RT.TOPIC)


def test_by_type_super_user_has_access() -> None:
    s = Acls()
    for rtype in (RT.TOPIC, RT.CLUSTER, RT.GROUP, RT.TRANSACTIONAL_ID):
        s.add(acl(WILDCARD_PRINCIPAL, WILDCARD_HOST, Op.ALL, DENY, name=WILDCARD_RESOURCE, resource_type=rtype))
        assert s.by_type("User:superuser1", "192.0.4.4", Op.READ, rtype)
        assert not s.by_type(U1, "192.0.4.4", Op.READ, rtype)


def test_by_type_no_acl_found_override() -> None:
    s = Acls(allow_everyone=True)
    assert s.by_type(ALICE, H1, Op.READ, RT.TOPIC)
    assert s.by_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    # allow.everyone yields only to a deny on the literal wildcard.
    s.add(acl(ALICE, H1, Op.WRITE, DENY, name="t"))
    assert s.by_type(ALICE, H1, Op.WRITE, RT.TOPIC)
    s.add(acl(ALICE, H1, Op.WRITE, DENY, name=WILDCARD_RESOURCE))
    assert not s.by_type(ALICE, H1, Op.WRITE, RT.TOPIC)


def test_by_type_counts_no_implied_operation() -> None:
    s = Acls()
    s.add(acl(U1, H1, Op.READ, ALLOW, name="t"))
    assert s.by_type(U1, H1, Op.READ, RT.TOPIC)
    assert not s.by_type(U1, H1, Op.DESCRIBE, RT.TOPIC)


@pytest.mark.parametrize("op,rtype", [(Op.ANY, RT.TOPIC), (Op.UNKNOWN, RT.TOPIC),
                                      (Op.READ, RT.ANY), (Op.READ, RT.UNKNOWN)])
def test_by_type_refuses_filters(op: AclOperation, rtype: ResourceType) -> None:
    with pytest.raises(ValueError):
        Acls().by_type(U1, H1, op, rtype)
