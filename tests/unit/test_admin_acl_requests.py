"""The admin client's ACL and SCRAM requests without a broker: the bodies built for every
version of CreateAcls / DescribeAcls / DeleteAcls (encoded and decoded by the protocol
declarations), the answers read back into bindings, the salted password against RFC 7677's
test vector, and how the AsyncAdminClient methods turn answers into results and errors."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac

import pytest
import scramp  # type: ignore[import-untyped]

from clients.aio.acl_types import (AccessControlEntry, AclBinding, AclBindingFilter,
                                   ResourcePattern, binding_from_match, bindings_from_describe,
                                   check_creatable, create_acls_request, delete_acls_request,
                                   describe_acls_request)
from clients.aio.admin import AsyncAdminClient
from clients.aio.scram_types import (ScramCredentialInfo, ScramMechanism,
                                     UserScramCredentialAlteration, UserScramCredentialDeletion,
                                     UserScramCredentialUpsertion,
                                     alter_scram_request, describe_scram_request,
                                     salted_password)
from clients.protocol.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from clients.protocol.errors import (Code, DuplicateResourceError, InvalidRequestError,
                                     ResourceNotFoundError, SecurityDisabledError,
                                     UnsupportedVersionError)
from clients.protocol.messages import api
from clients.protocol.schema import Struct

READ_T = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*",
                    AclOperation.READ, AclPermissionType.ALLOW)
WRITE_PREFIX = AclBinding(ResourceType.TOPIC, "pay-", PatternType.PREFIXED, "User:bob",
                          "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)


def roundtrip(api_name: str, body: dict, version: int) -> Struct:
    """Encode `body` as the request at `version` and decode it again: what the broker reads."""
    a = api(api_name)
    return a.decode_request(a.encode_request(body, version).getvalue(), version)


# ---------------------------------------------------------------------- types and text

def test_kafka_tostring_forms():
    assert str(READ_T.pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(READ_T.entry) == \
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert str(READ_T) == f"(pattern={READ_T.pattern}, entry={READ_T.entry})"
    any_entry = AclBindingFilter.ANY.entry
    assert str(any_entry) == "(principal=<any>, host=<any>, operation=ANY, permissionType=ANY)"
    assert str(AclBindingFilter.ANY.pattern) == \
        "ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY)"


def test_wire_codes_become_enum_members():
    b = AclBinding(2, "t", 3, "User:alice", "*", 3, 3)      # type: ignore[arg-type]
    assert b == READ_T and hash(b) == hash(READ_T) and b.operation is AclOperation.READ
    f = AclBindingFilter(resource_type=None, operation=None)  # type: ignore[arg-type]
    assert f == AclBindingFilter.ANY
    assert READ_T.to_filter() == AclBindingFilter(ResourceType.TOPIC, "t", PatternType.LITERAL,
                                                  "User:alice", "*", AclOperation.READ,
                                                  AclPermissionType.ALLOW)
    assert AclBinding.of(READ_T.pattern, READ_T.entry) == READ_T
    with pytest.raises(ValueError):
        AclBinding.of(ResourcePattern(ResourceType.TOPIC, None, PatternType.LITERAL), READ_T.entry)


def test_only_concrete_bindings_can_be_created():
    check_creatable(READ_T)
    check_creatable(WRITE_PREFIX)
    for bad in (AclBinding(ResourceType.ANY, "t", PatternType.LITERAL, "User:a", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "t", PatternType.MATCH, "User:a", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*",
                           AclOperation.ANY, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*",
                           AclOperation.READ, AclPermissionType.ANY)):
        with pytest.raises(InvalidRequestError, match="invalid ACL creation"):
            check_creatable(bad)


# ---------------------------------------------------------------------- CreateAcls

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_acls_body_every_version(version):
    body = create_acls_request([READ_T], version)
    got = roundtrip("CreateAcls", body, version).creations[0]
    assert (got.resource_type, got.resource_name, got.principal, got.host, got.operation,
            got.permission_type) == (2, "t", "User:alice", "*", 3, 3)
    # v0 has no pattern type on the wire; the codec's default there is LITERAL.
    assert got.get("resource_pattern_type", PatternType.LITERAL) == PatternType.LITERAL


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_acls_prefixed_from_v1(version):
    got = roundtrip("CreateAcls", create_acls_request([WRITE_PREFIX], version), version)
    c = got.creations[0]
    assert (c.resource_pattern_type, c.operation, c.permission_type, c.host) == \
        (4, 4, 2, "10.0.0.1")


def test_create_acls_v0_cannot_carry_prefixed():
    with pytest.raises(UnsupportedVersionError, match="v0.*PREFIXED"):
        create_acls_request([READ_T, WRITE_PREFIX], 0)


# ---------------------------------------------------------------------- DescribeAcls / DeleteAcls

@pytest.mark.parametrize("version", [1, 2, 3])
def test_describe_filter_every_field(version):
    f = AclBindingFilter(ResourceType.GROUP, "g", PatternType.MATCH, "User:alice", None,
                         AclOperation.ANY, AclPermissionType.ALLOW)
    got = roundtrip("DescribeAcls", describe_acls_request(f, version), version)
    assert (got.resource_type_filter, got.resource_name_filter, got.pattern_type_filter,
            got.principal_filter, got.host_filter, got.operation, got.permission_type) == \
        (3, "g", 2, "User:alice", None, 1, 3)


def test_any_filter_is_all_nulls_and_any_codes():
    got = roundtrip("DescribeAcls", describe_acls_request(AclBindingFilter.ANY, 3), 3)
    assert (got.resource_type_filter, got.resource_name_filter, got.pattern_type_filter,
            got.principal_filter, got.host_filter, got.operation, got.permission_type) == \
        (1, None, 1, None, None, 1, 1)


def test_v0_filters_are_literal_only():
    # ANY means literal at v0 (a v0 broker has nothing else) ...
    body = describe_acls_request(AclBindingFilter.ANY, 0)
    assert body["pattern_type_filter"] == PatternType.LITERAL
    roundtrip("DescribeAcls", body, 0)
    # ... while PREFIXED and MATCH cannot be asked of it.
    for pt in (PatternType.PREFIXED, PatternType.MATCH):
        f = AclBindingFilter(ResourceType.TOPIC, "t", pt)
        with pytest.raises(UnsupportedVersionError, match="DescribeAcls v0"):
            describe_acls_request(f, 0)
        with pytest.raises(UnsupportedVersionError, match="DeleteAcls v0"):
            delete_acls_request([f], 0)
        describe_acls_request(f, 1)
    with pytest.raises(InvalidRequestError, match="UNKNOWN"):
        describe_acls_request(AclBindingFilter(ResourceType.UNKNOWN), 2)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_delete_acls_body_every_version(version):
    filters = [READ_T.to_filter(), AclBindingFilter(ResourceType.TOPIC, "t", PatternType.LITERAL)]
    got = roundtrip("DeleteAcls", delete_acls_request(filters, version), version).filters
    assert len(got) == 2
    assert (got[0].resource_name_filter, got[0].principal_filter, got[0].operation) == \
        ("t", "User:alice", 3)
    assert (got[1].principal_filter, got[1].host_filter, got[1].operation,
            got[1].permission_type) == (None, None, 1, 1)


def test_describe_answer_to_bindings_v0_and_v3():
    resources = [{"resource_type": 2, "resource_name": "t", "pattern_type": 4, "acls": [
        {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3},
        {"principal": "User:bob", "host": "h", "operation": 4, "permission_type": 2}]}]
    for version in (0, 3):
        a = api("DescribeAcls")
        wire = a.encode_response({"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                                  "resources": resources}, version).getvalue()
        got = bindings_from_describe(a.decode_response(wire, version))
        pattern = PatternType.LITERAL if version == 0 else PatternType.PREFIXED
        assert got == [
            AclBinding(ResourceType.TOPIC, "t", pattern, "User:alice", "*", AclOperation.READ,
                       AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "t", pattern, "User:bob", "h", AclOperation.WRITE,
                       AclPermissionType.DENY)]


def test_delete_answer_match_to_binding():
    m = Struct(error_code=0, error_message=None, resource_type=3, resource_name="g",
               pattern_type=3, principal="User:c", host="*", operation=3, permission_type=3)
    assert binding_from_match(m) == AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL,
                                               "User:c", "*", AclOperation.READ,
                                               AclPermissionType.ALLOW)


# ---------------------------------------------------------------------- SCRAM

def test_salted_password_rfc7677_vector():
    """RFC 7677 section 3: user "user", password "pencil", i=4096. The salted password is
    right iff the client proof and server signature it yields are the RFC's."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, "pencil", salt, 4096)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
            f"c=biws,r={nonce}").encode()

    def h(key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, hashlib.sha256).digest()

    client_key = h(salted, b"Client Key")
    proof = bytes(a ^ b for a, b in zip(client_key, h(hashlib.sha256(client_key).digest(), auth)))
    assert base64.b64encode(proof).decode() == "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_sig = h(h(salted, b"Server Key"), auth)
    assert base64.b64encode(server_sig).decode() == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
def test_salted_password_agrees_with_scramp(mechanism):
    salt = b"0123456789abcdef"
    salted = salted_password(mechanism, "s3cret", salt, 8192)
    hash_fn = getattr(hashlib, mechanism.hash_name)
    assert len(salted) == hash_fn().digest_size
    _, stored_key, server_key, _ = scramp.ScramMechanism(mechanism.mechanism_name).make_auth_info(
        "s3cret", iteration_count=8192, salt=salt)
    client_key = hmac.new(salted, b"Client Key", hash_fn).digest()
    assert hash_fn(client_key).digest() == stored_key
    assert hmac.new(salted, b"Server Key", hash_fn).digest() == server_key


def test_mechanism_names():
    assert ScramMechanism.from_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.SCRAM_SHA_256.mechanism_name == "SCRAM-SHA-256"
    assert str(ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)) == \
        "SCRAM-SHA-256=iterations=8192"
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        ScramMechanism.from_name("PLAIN")
    up = UserScramCredentialUpsertion("a", "SCRAM-SHA-256", 4096, "pw")  # type: ignore[arg-type]
    assert up.mechanism is ScramMechanism.SCRAM_SHA_256 and "pw" not in repr(up)


def test_alter_scram_body_roundtrip():
    alterations: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, 8192, "alice-secret"),
        UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_512, 4096, b"pw",
                                     salt=b"fixed-salt"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
    salts = iter([b"random-salt-1"])
    body = alter_scram_request(alterations, make_salt=lambda: next(salts))
    got = roundtrip("AlterUserScramCredentials", body, 0)
    assert [(d.name, d.mechanism) for d in got.deletions] == [("bob", 2)]
    u256, u512 = got.upsertions
    assert (u256.name, u256.mechanism, u256.iterations, u256.salt) == \
        ("alice", 1, 8192, b"random-salt-1")
    assert u256.salted_password == hashlib.pbkdf2_hmac("sha256", b"alice-secret",
                                                        b"random-salt-1", 8192)
    assert (u512.mechanism, u512.salt) == (2, b"fixed-salt")
    assert u512.salted_password == hashlib.pbkdf2_hmac("sha512", b"pw", b"fixed-salt", 4096)
    wire = api("AlterUserScramCredentials").encode_request(body, 0).getvalue()
    assert b"alice-secret" not in wire
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        alter_scram_request([UserScramCredentialDeletion("x", ScramMechanism.UNKNOWN)])


def test_random_salts_differ():
    body = alter_scram_request([UserScramCredentialUpsertion("a", ScramMechanism.SCRAM_SHA_256,
                                                             4096, "pw")] * 2)
    s1, s2 = (u["salt"] for u in body["upsertions"])
    assert s1 != s2 and len(s1) >= 16


def test_describe_scram_body():
    assert describe_scram_request(None) == {"users": None}
    assert describe_scram_request([]) == {"users": None}
    assert describe_scram_request(["a", "b", "a"]) == {"users": [{"name": "a"}, {"name": "b"}]}
    got = roundtrip("DescribeUserScramCredentials", describe_scram_request(["a"]), 0)
    assert [u.name for u in got.users] == ["a"]


# ---------------------------------------------------------------------- the client's methods

class Answers:
    """Stands in for the network under AsyncAdminClient._send: records each request's API,
    version and body (built by the client's own builder) and returns the next canned answer
    decoded from its encoding."""

    def __init__(self, admin: AsyncAdminClient, version: int, answers: list[dict]):
        self.sent: list[tuple[str, dict]] = []
        self.version = version
        self.answers = list(answers)

        async def send(node, api_name, build, deadline):
            assert node is None                       # these go to the least loaded broker
            body = build(self.version)
            self.sent.append((api_name, body))
            a = api(api_name)
            a.encode_request(body, self.version)      # the body must encode at this version
            wire = a.encode_response(self.answers.pop(0), self.version).getvalue()
            return a.decode_response(wire, self.version)

        async def start():
            return None

        admin._send = send                            # type: ignore[method-assign]
        admin.start = start                           # type: ignore[method-assign]


def run(coro):
    return asyncio.run(coro)


def test_create_acls_raises_the_first_failed_binding():
    admin = AsyncAdminClient({"bootstrap.servers": "127.0.0.1:1"})
    net = Answers(admin, 3, [{"throttle_time_ms": 0, "results": [
        {"error_code": 0, "error_message": None},
        {"error_code": Code.SECURITY_DISABLED, "error_message": "No Authorizer is configured."}]}])
    with pytest.raises(SecurityDisabledError, match="pay-.*No Authorizer"):
        run(admin.create_acls([READ_T, WRITE_PREFIX]))
    assert net.sent[0][0] == "CreateAcls" and len(net.sent[0][1]["creations"]) == 2


def test_create_acls_refuses_prefixed_at_v0_before_sending():
    admin = AsyncAdminClient({"bootstrap.servers": "127.0.0.1:1"})
    net = Answers(admin, 0, [])
    with pytest.raises(UnsupportedVersionError):
        run(admin.create_acls([WRITE_PREFIX]))
    assert net.sent == []


def test_describe_and_delete_acls_results():
    admin = AsyncAdminClient({"bootstrap.servers": "127.0.0.1:1"})
    acl = {"principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    match = {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
             "pattern_type": 3, **acl}
    Answers(admin, 2, [
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": [
            {"resource_type": 2, "resource_name": "t", "pattern_type": 3, "acls": [acl]}]},
        {"throttle_time_ms": 0, "filter_results": [
            {"error_code": 0, "error_message": None, "matching_acls": [match]},
            {"error_code": 0, "error_message": None, "matching_acls": []}]},
        {"throttle_time_ms": 0, "error_code": Code.SECURITY_DISABLED, "error_message": "off",
         "resources": []}])
    assert run(admin.describe_acls(AclBindingFilter(ResourceType.TOPIC))) == [READ_T]
    deleted = run(admin.delete_acls([READ_T.to_filter(), WRITE_PREFIX.to_filter()]))
    assert deleted == [[READ_T], []]
    with pytest.raises(SecurityDisabledError):
        run(admin.describe_acls())


def test_describe_user_scram_credentials():
    admin = AsyncAdminClient({"bootstrap.servers": "127.0.0.1:1"})
    ok = {"user": "alice", "error_code": 0, "error_message": None,
          "credential_infos": [{"mechanism": 2, "iterations": 4096},
                               {"mechanism": 1, "iterations": 8192}]}
    missing = {"user": "nobody", "error_code": Code.RESOURCE_NOT_FOUND,
               "error_message": "attempt to describe a user credential that does not exist",
               "credential_infos": []}
    net = Answers(admin, 0, [
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": [ok]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
         "results": [ok, missing]}])
    assert run(admin.describe_user_scram_credentials()) == {"alice": [
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
        ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)]}
    assert net.sent[0][1] == {"users": None}
    with pytest.raises(ResourceNotFoundError, match="user nobody: attempt to describe"):
        run(admin.describe_user_scram_credentials(["alice", "nobody"]))


def test_alter_user_scram_credentials_errors_by_user():
    admin = AsyncAdminClient({"bootstrap.servers": "127.0.0.1:1"})
    net = Answers(admin, 0, [{"throttle_time_ms": 0, "results": [
        {"user": "alice", "error_code": 0, "error_message": None},
        {"user": "bob", "error_code": Code.DUPLICATE_RESOURCE, "error_message": "twice"}]}])
    with pytest.raises(DuplicateResourceError, match="user bob: twice"):
        run(admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, 4096, "a"),
            UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256),
            UserScramCredentialUpsertion("bob", ScramMechanism.SCRAM_SHA_256, 4096, "b")]))
    body = net.sent[0][1]
    assert [u["name"] for u in body["upsertions"]] == ["alice", "bob"]
    assert body["deletions"] == [{"name": "bob", "mechanism": 1}]


def test_entry_and_pattern_sort_for_stable_output():
    entries = {AccessControlEntry("User:b", "*", AclOperation.READ, AclPermissionType.ALLOW),
               AccessControlEntry("User:a", "*", AclOperation.WRITE, AclPermissionType.ALLOW)}
    assert [e.principal for e in sorted(entries)] == ["User:a", "User:b"]
