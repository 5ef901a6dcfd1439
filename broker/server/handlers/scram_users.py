"""DescribeUserScramCredentials and AlterUserScramCredentials: the SCRAM users of the cluster
(Kafka's ZkAdminManager, which keeps them in /config/users/<user>).

Describe needs DESCRIBE on the Cluster, Alter needs ALTER on it; without it every user named
gets CLUSTER_AUTHORIZATION_FAILED. Describe answers only a mechanism and an iteration count
per credential, never the keys. Alter receives a salt and SaltedPassword per upsertion (the
client derives it; the password never travels), stores the credential as Kafka's string, and
answers one result per user: a user with any invalid alteration is altered not at all.
"""
from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol

from clients.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from clients.protocol.errors import Code, KafkaError
from zkcoord.store import MetadataStore

from ...security.authorizer import Authorizer
from ...security.scram import (MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential,
                               mechanism_code, mechanism_name)
from ..dispatch import RequestContext, handles

log = logging.getLogger(__name__)


class ScramUserServices(Protocol):
    authorizer: Authorizer
    store: MetadataStore


CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
UNKNOWN_SERVER_ERROR = "The server experienced an unexpected error when processing the request."
EMPTY_USERNAME = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
# scramp, which runs the broker's side of SCRAM, refuses shorter salts: a credential with one
# could never be used, so it is refused here rather than stored.
MIN_SALT_BYTES = 12


def _authorized(services: ScramUserServices, ctx: RequestContext, operation: AclOperation) -> bool:
    return services.authorizer.authorize(ctx.conn.principal, ctx.conn.host, operation,
                                         ResourceType.CLUSTER, CLUSTER_NAME)


# ------------------------------------------------------------------ describe

@handles("DescribeUserScramCredentials", (0, 0))
def describe_user_scram_credentials(services: ScramUserServices, request: Any,
                                    ctx: RequestContext) -> dict:
    names = [u.name for u in request.users] if request.users is not None else []
    if not _authorized(services, ctx, AclOperation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": Code.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": CLUSTER_AUTHORIZATION_FAILED,
                "results": [_describe_error(n, Code.CLUSTER_AUTHORIZATION_FAILED,
                                            CLUSTER_AUTHORIZATION_FAILED) for n in names]}
    if not names:
        users = services.store.scram_users()
        results = [_describe_user(user, users[user]) for user in sorted(users)
                   if any(m in users[user] for m in MECHANISMS)]
    else:
        counts = Counter(names)
        results = [_describe_named(services, n, counts[n]) for n in counts]
    return {"throttle_time_ms": 0, "error_code": Code.NONE, "error_message": None,
            "results": results}


def _describe_named(services: ScramUserServices, user: str, times: int) -> dict:
    if not user:
        return _describe_error(user, Code.RESOURCE_NOT_FOUND, EMPTY_USERNAME)
    if times > 1:
        return _describe_error(user, Code.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials "
                               f"for the same user twice in a single request: {user}")
    credentials = services.store.user_scram_credentials(user)
    if not any(m in credentials for m in MECHANISMS):
        return _describe_error(user, Code.RESOURCE_NOT_FOUND,
                               f"Attempt to describe a user credential that does not exist: {user}")
    return _describe_user(user, credentials)


def _describe_user(user: str, credentials: dict[str, str]) -> dict:
    try:
        infos = [{"mechanism": mechanism_code(m),
                  "iterations": ScramCredential.parse(credentials[m]).iterations}
                 for m in MECHANISMS if m in credentials]
    except ValueError as e:          # bad data in the store: say so without the secret
        log.error("user %s has an unreadable SCRAM credential: %s", user, e)
        return _describe_error(user, Code.UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR)
    return {"user": user, "error_code": Code.NONE, "error_message": None, "credential_infos": infos}


def _describe_error(user: str, code: int, message: str) -> dict:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


# ------------------------------------------------------------------ alter

@handles("AlterUserScramCredentials", (0, 0))
async def alter_user_scram_credentials(services: ScramUserServices, request: Any,
                                       ctx: RequestContext) -> dict:
    deletions, upsertions = list(request.deletions), list(request.upsertions)
    if not _authorized(services, ctx, AclOperation.ALTER):
        users = sorted({a.name for a in deletions + upsertions})
        return {"throttle_time_ms": 0,
                "results": [_result(u, Code.CLUSTER_AUTHORIZATION_FAILED,
                                    CLUSTER_AUTHORIZATION_FAILED) for u in users]}
    results: list[dict] = []
    failed: set[str] = set()

    def fail(user: str, code: int, message: str) -> None:
        if user not in failed:
            failed.add(user)
            results.append(_result(user, code, message))

    # 1. each alteration on its own: a user, a known mechanism, acceptable iterations and salt
    invalid: dict[str, tuple[int, str]] = {}
    for d in deletions:
        problem = _invalid_deletion(d)
        if problem is not None:
            invalid[d.name] = problem
    for u in upsertions:
        problem = _invalid_upsertion(u)
        if problem is not None:
            invalid[u.name] = problem
    for user, (code, message) in invalid.items():
        fail(user, code, message)

    # 2. one alteration per (user, mechanism) in the whole request
    pairs = Counter((a.name, a.mechanism) for a in deletions + upsertions if a.name not in failed)
    for user in dict.fromkeys(user for (user, _), n in pairs.items() if n > 1):
        fail(user, Code.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the "
                                            "same request")

    # 3. a deletion must name a credential that exists
    for d in deletions:
        if d.name not in failed and \
                mechanism_name(d.mechanism) not in services.store.user_scram_credentials(d.name):
            fail(d.name, Code.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that "
                                                  "does not exist")

    # 4. the rest, one write per user
    changes: dict[str, dict[str, str | None]] = {}
    for d in deletions:
        if d.name not in failed:
            changes.setdefault(d.name, {})[_name(d.mechanism)] = None
    for u in upsertions:
        if u.name not in failed:
            mechanism = _name(u.mechanism)
            credential = ScramCredential.from_salted_password(
                mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
            changes.setdefault(u.name, {})[mechanism] = credential.format()
    for user, change in changes.items():
        try:
            await services.store.alter_user_scram_credentials(user, change)
        except KafkaError as e:
            fail(user, e.code, e.message)
            continue
        except Exception:
            log.exception("altering the SCRAM credentials of user %s failed", user)
            fail(user, Code.UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR)
            continue
        results.append(_result(user, Code.NONE, None))
    return {"throttle_time_ms": 0, "results": results}


def _name(code: int) -> str:
    name = mechanism_name(code)
    assert name is not None, "mechanisms were checked before"
    return name


def _invalid_deletion(d: Any) -> tuple[int, str] | None:
    if not d.name:
        return Code.UNACCEPTABLE_CREDENTIAL, EMPTY_USERNAME
    if mechanism_name(d.mechanism) is None:
        return Code.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
    return None


def _invalid_upsertion(u: Any) -> tuple[int, str] | None:
    if not u.name:
        return Code.UNACCEPTABLE_CREDENTIAL, EMPTY_USERNAME
    if mechanism_name(u.mechanism) is None:
        return Code.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM
    if u.iterations < MIN_ITERATIONS:
        return Code.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return Code.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if len(u.salt) < MIN_SALT_BYTES:
        return Code.UNACCEPTABLE_CREDENTIAL, f"Salt must be at least {MIN_SALT_BYTES} bytes"
    if not len(u.salted_password):
        return Code.UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty"
    return None


def _result(user: str, code: int, message: str | None) -> dict:
    return {"user": user, "error_code": code, "error_message": message}
