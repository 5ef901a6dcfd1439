"""kafka-acls and kafka-configs' `users` entity without a broker: the flags -> the ACL bindings
and filters (AclCommand's rules), Kafka's output text, the --remove confirmation, and the
SCRAM credential values of kafka-configs."""
from __future__ import annotations

import contextlib
import io

import pytest

from clients.aio.acl_types import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from clients.aio.scram_types import (ScramCredentialInfo, ScramMechanism,
                                     UserScramCredentialDeletion, UserScramCredentialUpsertion)
from clients.cli import acls, configs
from clients.cli.common import CliError
from clients.protocol.acl import AclOperation as Op
from clients.protocol.acl import AclPermissionType as Perm
from clients.protocol.acl import PatternType, ResourceType
from clients.protocol.errors import ResourceNotFoundError

ALLOW, DENY = Perm.ALLOW, Perm.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def args(*argv: str):
    return acls.build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


def topic(name: str, pt: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pt)


def group(name: str, pt: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.GROUP, name, pt)


def ace(principal: str, op: Op, perm: Perm = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


# ---------------------------------------------------------------------- flags -> ACLs

def test_add_principals_operations_hosts_cross_product():
    a = args("--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
             "--allow-host", "10.0.0.1", "--allow-host", " 10.0.0.2 ",
             "--operation", "Read", "--operation", "describe", "--topic", "t")
    got = acls.resource_to_acls(a)
    assert list(got) == [topic("t")]
    assert got[topic("t")] == {ace(p, op, host=h) for p in ("User:alice", "User:bob")
                               for op in (Op.READ, Op.DESCRIBE) for h in ("10.0.0.1", "10.0.0.2")}


def test_add_defaults_all_operation_and_wildcard_host_with_denies():
    a = args("--add", "--allow-principal", "User:*", "--deny-principal", "User:mallory",
             "--group", "g", "--cluster")
    got = acls.resource_to_acls(a)
    assert set(got) == {group("g"), acls.CLUSTER_FILTER}
    assert got[group("g")] == {ace("User:*", Op.ALL), ace("User:mallory", Op.ALL, DENY)}
    bindings = acls.bindings_to_add(got)
    assert AclBinding(ResourceType.CLUSTER, "kafka-cluster", LIT, "User:mallory", "*", Op.ALL,
                      DENY) in bindings
    assert len(bindings) == 4


def test_producer_shortcut():
    a = args("--add", "--allow-principal", "User:p", "--producer", "--topic", "t",
             "--transactional-id", "tx", "--idempotent")
    got = acls.resource_to_acls(a)
    assert got == {
        topic("t"): {ace("User:p", op) for op in (Op.WRITE, Op.DESCRIBE, Op.CREATE)},
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LIT):
            {ace("User:p", Op.WRITE), ace("User:p", Op.DESCRIBE)},
        acls.CLUSTER_FILTER: {ace("User:p", Op.IDEMPOTENT_WRITE)}}


def test_producer_prefixed_keeps_cluster_literal():
    a = args("--add", "--allow-principal", "User:p", "--producer", "--topic", "pay-",
             "--resource-pattern-type", "PREFIXED", "--idempotent")
    got = acls.resource_to_acls(a)
    assert set(got) == {topic("pay-", PRE), acls.CLUSTER_FILTER}


def test_consumer_shortcut_and_both_roles_merge():
    a = args("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    assert acls.resource_to_acls(a) == {
        topic("t"): {ace("User:c", Op.READ), ace("User:c", Op.DESCRIBE)},
        group("g"): {ace("User:c", Op.READ)}}
    both = acls.resource_to_acls(args("--add", "--allow-principal", "User:c", "--consumer",
                                      "--producer", "--topic", "t", "--group", "g"))
    assert both[topic("t")] == {ace("User:c", op) for op in
                                (Op.READ, Op.WRITE, Op.DESCRIBE, Op.CREATE)}


def test_operation_names_and_validation():
    assert acls.parse_operation("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert acls.parse_operation("cluster_action") is Op.CLUSTER_ACTION
    assert acls.parse_operation("DESCRIBE_CONFIGS") is Op.DESCRIBE_CONFIGS
    for bad in ("Fly", "Any"):
        with pytest.raises(CliError, match="Unknown operation"):
            acls.parse_operation(bad)
    with pytest.raises(CliError, match="ResourceType GROUP only supports operations All, "
                                       "Read, Delete, Describe$"):
        acls.resource_to_acls(args("--add", "--allow-principal", "User:a", "--operation",
                                   "Write", "--group", "g"))


@pytest.mark.parametrize("argv, message", [
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"),
     "'ANY' is not valid when adding acls"),
    (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal"),
    (("--add", "--allow-principal", "User:a"), "You must provide at least one resource"),
    (("--add", "--allow-principal", "alice", "--topic", "t"),
     "format principalType:principalName but got alice"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "glob"),
     "Unknown resource-pattern-type: glob"),
])
def test_add_refusals(argv, message):
    with pytest.raises(CliError, match=message):
        acls.resource_to_acls(args(*argv))


@pytest.mark.parametrize("argv, message", [
    (("--list", "--producer", "--topic", "t"),
     'Option "\\[list\\]" can\'t be used with option "\\[producer\\]"'),
    (("--list", "--allow-principal", "User:a"),
     "can't be used with option \"\\[allow-principal\\]\""),
    (("--add", "--producer", "--operation", "Read", "--topic", "t", "--allow-principal", "User:a"),
     'Option "\\[producer\\]" can\'t be used with option "\\[operation\\]"'),
    (("--add", "--consumer", "--deny-principal", "User:a", "--topic", "t", "--group", "g"),
     "\\[consumer\\]\" can't be used with option \"\\[deny-principal\\]"),
    (("--add", "--principal", "User:a", "--topic", "t"), "only available if --list is set"),
    (("--add", "--producer", "--allow-principal", "User:a", "--group", "g"),
     "With --producer you must specify a --topic"),
    (("--add", "--idempotent", "--allow-principal", "User:a", "--topic", "t"),
     "only available if --producer is set"),
    (("--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"),
     "With --consumer you must specify a --topic and a --group"),
    (("--add", "--consumer", "--allow-principal", "User:a", "--topic", "t", "--group", "g",
      "--cluster"), "no --cluster or --transactional-id"),
])
def test_check_args(argv, message):
    with pytest.raises(CliError, match=message):
        acls.check_args(args(*argv))


def test_exactly_one_action(capsys):
    for argv in ([], ["--add", "--list"]):
        with pytest.raises(SystemExit) as e:
            args(*argv)
        assert e.value.code == 2


# ---------------------------------------------------------------------- remove and list filters

def test_remove_without_principal_deletes_everything_on_the_resource():
    got = acls.filter_to_acls(args("--remove", "--topic", "t", "--resource-pattern-type", "match"))
    pattern = topic("t", PatternType.MATCH)
    assert got == {pattern: set()}
    assert acls.delete_filters(pattern, set()) == [AclBindingFilter(
        ResourceType.TOPIC, "t", PatternType.MATCH)]


def test_remove_with_principal_deletes_exactly_those_entries():
    got = acls.filter_to_acls(args("--remove", "--allow-principal", "User:a", "--operation",
                                   "Read", "--topic", "t"))
    assert got == {topic("t"): {ace("User:a", Op.READ)}}
    assert acls.delete_filters(topic("t"), got[topic("t")]) == [AclBindingFilter(
        ResourceType.TOPIC, "t", LIT, "User:a", "*", Op.READ, ALLOW)]


def test_list_filters():
    assert acls.list_filters(args("--list")) == [AclBindingFilter.ANY]
    assert acls.list_filters(args("--list", "--topic", "t", "--resource-pattern-type", "any")) == [
        AclBindingFilter(ResourceType.TOPIC, "t", PatternType.ANY)]
    # --cluster only counts with the literal pattern type, as in Kafka.
    assert acls.list_filters(args("--list", "--cluster", "--resource-pattern-type", "any")) == [
        AclBindingFilter.ANY]


# ---------------------------------------------------------------------- output

def test_block_format_is_kafkas():
    text = acls.acl_block("Adding ACLs for resource", topic("t"),
                          {ace("User:bob", Op.READ), ace("User:alice", Op.READ)})
    assert text == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW) \n")


def test_remove_prompts():
    assert acls.remove_prompt(topic("t"), set()) == (
        "Are you sure you want to delete all ACLs for resource filter "
        "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`? (y/n)")
    assert acls.remove_prompt(topic("t"), {ace("User:a", Op.READ)}) == (
        "Are you sure you want to remove ACLs: \n"
        " \t(principal=User:a, host=*, operation=READ, permissionType=ALLOW) \n"
        " from resource filter `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=LITERAL)`? (y/n)")


def test_listing_by_principal():
    found = acls.by_resource([
        AclBinding.of(topic("t"), ace("User:a", Op.READ)),
        AclBinding.of(topic("t"), ace("User:b", Op.READ)),
        AclBinding.of(group("g"), ace("User:b", Op.READ))])
    assert len(acls.listing(found, [])) == 2
    lines = acls.listing(found, ["User:a"])
    assert lines[0] == "ACLs for principal `User:a`"
    assert len(lines) == 2 and "User:b" not in lines[1]


class FakeAdmin:
    """The admin calls kafka-acls makes, over an in-memory set of bindings (literal names
    only, which is all these tests use)."""

    def __init__(self, bindings=()):
        self.bindings = set(bindings)
        self.calls: list[str] = []

    @staticmethod
    def _matches(f: AclBindingFilter, b: AclBinding) -> bool:
        return ((f.resource_type in (ResourceType.ANY, b.resource_type))
                and f.name in (None, b.name)
                and f.pattern_type in (PatternType.ANY, PatternType.MATCH, b.pattern_type)
                and f.principal in (None, b.principal) and f.host in (None, b.host)
                and f.operation in (Op.ANY, b.operation)
                and f.permission in (Perm.ANY, b.permission))

    def create_acls(self, bindings):
        self.calls.append("create")
        self.bindings.update(bindings)

    def describe_acls(self, f=None):
        f = f or AclBindingFilter.ANY
        return sorted(b for b in self.bindings if self._matches(f, b))

    def delete_acls(self, filters):
        self.calls.append("delete")
        out = []
        for f in filters:
            gone = [b for b in self.bindings if self._matches(f, b)]
            self.bindings.difference_update(gone)
            out.append(sorted(gone))
        return out


def run_with(monkeypatch, fake: FakeAdmin, argv, stdin: str = "") -> str:
    @contextlib.contextmanager
    def fake_client(_args, _prefix=""):
        yield fake

    monkeypatch.setattr(acls, "admin_client", fake_client)
    out = io.StringIO()
    assert acls.run(args(*argv), out, io.StringIO(stdin)) == 0
    return out.getvalue()


def test_run_add_prints_then_lists(monkeypatch):
    fake = FakeAdmin()
    text = run_with(monkeypatch, fake, ["--add", "--allow-principal", "User:alice",
                                        "--operation", "Read", "--topic", "t"])
    pattern = "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`"
    entry = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert text == (f"Adding ACLs for resource {pattern}: \n \t{entry} \n\n"
                    f"Current ACLs for resource {pattern}: \n \t{entry} \n\n")
    assert len(fake.bindings) == 1


def test_run_remove_asks_and_respects_no(monkeypatch):
    binding = AclBinding.of(topic("t"), ace("User:alice", Op.READ))
    fake = FakeAdmin([binding])
    argv = ["--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"]
    text = run_with(monkeypatch, fake, argv, stdin="n\n")
    assert text.startswith("Are you sure you want to remove ACLs: \n")
    assert fake.calls == [] and fake.bindings == {binding}
    assert "Current ACLs for resource" in text
    run_with(monkeypatch, fake, argv, stdin="Y\n")
    assert fake.calls == ["delete"] and fake.bindings == set()


def test_run_remove_force_does_not_ask(monkeypatch):
    fake = FakeAdmin([AclBinding.of(topic("t"), ace("User:alice", Op.READ)),
                      AclBinding.of(topic("u"), ace("User:alice", Op.READ))])
    text = run_with(monkeypatch, fake, ["--remove", "--force", "--topic", "t"])
    assert "Are you sure" not in text and text == ""
    assert [b.name for b in fake.bindings] == ["u"]


# ---------------------------------------------------------------------- kafka-configs users

def cfg(*argv: str):
    return configs.build_parser().parse_args(["--bootstrap-server", "h:1", *argv])


def test_users_entity_resolution():
    assert configs.resolve_entity(cfg("--describe", "--entity-type", "users")) == ("user", None)
    assert configs.resolve_entity(cfg("--alter", "--user", "alice")) == ("user", "alice")
    assert configs.resolve_entity(cfg("--describe", "--entity-type", "users",
                                      "--entity-name", "bob")) == ("user", "bob")


def test_scram_credential_values():
    sha256 = ScramMechanism.SCRAM_SHA_256
    assert configs.parse_scram_credential(sha256, "iterations=8192,password=alice-secret") == \
        (8192, "alice-secret")
    assert configs.parse_scram_credential(sha256, "password=p,w=x") == (4096, "p,w=x")
    assert configs.parse_scram_credential(sha256, "iterations=-1,password=p") == (4096, "p")
    with pytest.raises(CliError, match="Iterations 100 is less than the minimum 4096 required "
                                       "for SCRAM-SHA-256"):
        configs.parse_scram_credential(sha256, "iterations=100,password=p")
    for bad in ("iterations=8192", "secret", "iterations=,password=p"):
        with pytest.raises(CliError, match="Invalid credential property SCRAM-SHA-256="):
            configs.parse_scram_credential(sha256, bad)


def test_users_alterations_from_flags():
    a = cfg("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=x]")
    got = configs.scram_alterations("alice", *configs.alter_request(a))
    assert [(type(g).__name__, g.mechanism, getattr(g, "iterations", None)) for g in got] == [
        ("UserScramCredentialUpsertion", ScramMechanism.SCRAM_SHA_256, 8192),
        ("UserScramCredentialUpsertion", ScramMechanism.SCRAM_SHA_512, 4096)]
    assert isinstance(got[0], UserScramCredentialUpsertion) and got[0].password == "alice-secret"
    d = configs.scram_alterations("alice", *configs.alter_request(
        cfg("--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-512")))
    assert d == [UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)]
    with pytest.raises(CliError, match="Unexpected config names: producer_byte_rate"):
        configs.scram_alterations("alice", {"producer_byte_rate": "10"}, [])


def test_users_alter_needs_a_name():
    with pytest.raises(CliError, match="An entity name must be specified"):
        configs.run(cfg("--alter", "--entity-type", "users", "--add-config",
                        "SCRAM-SHA-256=[password=p]"))


def test_users_describe_lines():
    infos = [ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
             ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)]
    assert configs.scram_describe_line("alice", infos) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    err = ResourceNotFoundError("user bob: attempt to describe a user credential that does "
                                "not exist")
    assert configs.scram_error_line("bob", err) == (
        "Error retrieving SCRAM credential configs for user-principal 'bob': "
        "ResourceNotFoundException: attempt to describe a user credential that does not exist")
