"""kafka-acls.sh and kafka-configs.sh's `users` entity against a real broker with Kafka's
AclAuthorizer configured (allow.everyone.if.no.acl.found=true, so the anonymous PLAINTEXT
tools may still manage ACLs).

Every change a tool makes is read back with librdkafka's AdminClient (confluent-kafka), so a
tool is never verified only by itself: the ACLs kafka-acls adds and removes, and the SCRAM
credentials kafka-configs upserts and deletes."""
from __future__ import annotations

import os
import subprocess

import pytest
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)

from tests.support.broker_process import REPO, BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

QUIET = {"log_level": 0}
OVERRIDES = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
             "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("acls") / "b0", overrides=OVERRIDES).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def librdkafka(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def tool(name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / f"kafka-{name}.sh"), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=REPO,
                          env=dict(os.environ))


def ok(name: str, *args: str, stdin: str | None = None) -> str:
    r = tool(name, *args, stdin=stdin)
    assert r.returncode == 0, f"kafka-{name} {args} -> {r.returncode}: {r.stdout} {r.stderr}"
    assert "Traceback" not in r.stderr
    return r.stdout


def acls_of(admin: AdminClient, topic: str, pattern=ResourcePatternType.ANY) -> set[tuple]:
    """(name, pattern, principal, host, operation, permission) of the topic ACLs librdkafka
    sees for `topic`."""
    f = AclBindingFilter(ResourceType.TOPIC, topic, pattern, None, None,  # type: ignore[arg-type]
                         AclOperation.ANY, AclPermissionType.ANY)
    return {(b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
             b.permission_type.name) for b in admin.describe_acls(f).result(30)}


PATTERN_T = "`ResourcePattern(resourceType=TOPIC, name=acl-t, patternType=LITERAL)`"
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


def test_acls_add_list_remove(broker, librdkafka):
    bs = ("--bootstrap-server", broker.bootstrap)
    out = ok("acls", *bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
             "--topic", "acl-t")
    assert out == (f"Adding ACLs for resource {PATTERN_T}: \n \t{ALICE_READ} \n\n"
                   f"Current ACLs for resource {PATTERN_T}: \n \t{ALICE_READ} \n\n")
    assert acls_of(librdkafka, "acl-t") == {
        ("acl-t", "LITERAL", "User:alice", "*", "READ", "ALLOW")}

    # The producer role on a prefix, from one host.
    ok("acls", *bs, "--add", "--allow-principal", "User:bob", "--allow-host", "10.1.2.3",
       "--producer", "--topic", "acl-", "--resource-pattern-type", "prefixed")
    assert acls_of(librdkafka, "acl-", ResourcePatternType.PREFIXED) == {
        ("acl-", "PREFIXED", "User:bob", "10.1.2.3", op, "ALLOW")
        for op in ("WRITE", "DESCRIBE", "CREATE")}

    # --list of everything, of one resource with MATCH (literal and prefixed both apply),
    # and of one principal.
    everything = ok("acls", *bs, "--list")
    assert ALICE_READ in everything and "name=acl-, patternType=PREFIXED" in everything
    matching = ok("acls", *bs, "--list", "--topic", "acl-t", "--resource-pattern-type", "match")
    assert matching.count("Current ACLs for resource") == 2
    bobs = ok("acls", *bs, "--list", "--principal", "User:bob")
    assert bobs.startswith("ACLs for principal `User:bob`\n")
    assert "User:alice" not in bobs and bobs.count("User:bob, host=10.1.2.3") == 3

    # --remove asks first; "n" keeps the ACL, "y" removes it.
    remove = ("--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic",
              "acl-t")
    out = ok("acls", *bs, *remove, stdin="n\n")
    assert out.startswith(f"Are you sure you want to remove ACLs: \n \t{ALICE_READ} \n from "
                          f"resource filter {PATTERN_T}? (y/n)\n")
    assert len(acls_of(librdkafka, "acl-t")) == 1
    ok("acls", *bs, *remove, stdin="y\n")
    assert acls_of(librdkafka, "acl-t") == set()

    # --force removes every ACL of the prefixed resource without asking.
    out = ok("acls", *bs, "--remove", "--force", "--topic", "acl-", "--resource-pattern-type",
             "prefixed")
    assert "Are you sure" not in out
    assert acls_of(librdkafka, "acl-", ResourcePatternType.PREFIXED) == set()


def test_acls_tool_refuses_bad_flags_without_touching_the_cluster(broker, librdkafka):
    r = tool("acls", "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal",
             "User:x", "--operation", "Write", "--group", "acl-g")
    assert r.returncode == 1 and "ResourceType GROUP only supports operations" in r.stderr
    f = AclBindingFilter(ResourceType.GROUP, "acl-g", ResourcePatternType.ANY,
                         None, None,  # type: ignore[arg-type]
                         AclOperation.ANY, AclPermissionType.ANY)
    assert librdkafka.describe_acls(f).result(30) == []


def scram_infos(admin: AdminClient, user: str) -> dict[str, int]:
    futures = admin.describe_user_scram_credentials([user])
    assert isinstance(futures, dict)
    desc = futures[user].result(30)
    return {i.mechanism.name: i.iterations for i in desc.scram_credential_infos}


def test_configs_users_scram_add_describe_delete(broker, librdkafka):
    bs = ("--bootstrap-server", broker.bootstrap)
    user = ("--entity-type", "users", "--entity-name", "alice")
    out = ok("configs", *bs, "--alter", *user, "--add-config",
             "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
             "SCRAM-SHA-512=[password=alice-512]")
    assert out == "Completed updating config for user alice.\n"
    assert scram_infos(librdkafka, "alice") == {"SCRAM_SHA_256": 8192, "SCRAM_SHA_512": 4096}
    assert ok("configs", *bs, "--describe", *user) == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")

    ok("configs", *bs, "--alter", "--entity-type", "users", "--entity-name", "carol",
       "--add-config", "SCRAM-SHA-512=[iterations=4096,password=c]")
    every = ok("configs", *bs, "--describe", "--entity-type", "users").splitlines()
    assert "SCRAM credential configs for user-principal 'carol' are " \
           "SCRAM-SHA-512=iterations=4096" in every
    assert any(line.startswith("SCRAM credential configs for user-principal 'alice'")
               for line in every)

    assert ok("configs", *bs, "--alter", *user, "--delete-config", "SCRAM-SHA-512") == \
        "Completed updating config for user alice.\n"
    assert scram_infos(librdkafka, "alice") == {"SCRAM_SHA_256": 8192}
    ok("configs", *bs, "--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-256")
    out = ok("configs", *bs, "--describe", *user)
    assert out.startswith("Error retrieving SCRAM credential configs for user-principal "
                          "'alice': ResourceNotFoundException")

    # Refused by the tool (minimum iterations) and by the broker (above the maximum).
    r = tool("configs", *bs, "--alter", *user, "--add-config",
             "SCRAM-SHA-256=[iterations=100,password=x]")
    assert r.returncode == 1 and "less than the minimum 4096" in r.stderr
    r = tool("configs", *bs, "--alter", *user, "--add-config",
             "SCRAM-SHA-256=[iterations=20000,password=x]")
    assert r.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in r.stderr
