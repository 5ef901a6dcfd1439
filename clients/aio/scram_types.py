"""SCRAM user credentials as the admin client alters and describes them (Kafka's
`UserScramCredentialUpsertion` / `UserScramCredentialDeletion` / `ScramCredentialInfo`), and
the bodies of AlterUserScramCredentials and DescribeUserScramCredentials (sans-io).

The password never travels: the client picks a random salt and sends
SaltedPassword = Hi(password, salt, iterations) (RFC 5802: PBKDF2 with HMAC of the mechanism's
hash, output one digest long), as Kafka's ScramFormatter.saltedPassword does; the broker
derives StoredKey and ServerKey from it.
"""
from __future__ import annotations

import enum
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

__all__ = ["ScramMechanism", "ScramCredentialInfo", "UserScramCredentialUpsertion",
           "UserScramCredentialDeletion", "UserScramCredentialAlteration", "salted_password",
           "random_salt", "alter_scram_request", "describe_scram_request",
           "MIN_ITERATIONS", "MAX_ITERATIONS", "DEFAULT_ITERATIONS"]

MIN_ITERATIONS = 4096       # Kafka's ScramMechanism.minIterations (both mechanisms)
MAX_ITERATIONS = 16384      # the most a Kafka broker accepts
DEFAULT_ITERATIONS = 4096   # kafka-configs' default


class ScramMechanism(enum.IntEnum):
    """Wire codes of Kafka's org.apache.kafka.clients.admin.ScramMechanism."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: "SCRAM-SHA-256"."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """hashlib's name of the mechanism's hash: "sha256"."""
        if self is ScramMechanism.UNKNOWN:
            raise ValueError("the UNKNOWN SCRAM mechanism has no hash")
        return "sha" + self.name.rsplit("_", 1)[1]

    @classmethod
    def from_name(cls, name: str) -> "ScramMechanism":
        """"SCRAM-SHA-256" -> SCRAM_SHA_256; ValueError for any other text."""
        for m in cls:
            if m is not cls.UNKNOWN and m.mechanism_name == name.strip().upper():
                return m
        raise ValueError(f"unknown SCRAM mechanism {name!r}: expected SCRAM-SHA-256 or "
                         f"SCRAM-SHA-512")

    @classmethod
    def coerce(cls, value: "ScramMechanism | str | int") -> "ScramMechanism":
        if isinstance(value, str):
            return cls.from_name(value)
        return cls(value)


class ScramCredentialInfo(NamedTuple):
    """What the cluster says of one credential of a user: its mechanism and iterations."""

    mechanism: ScramMechanism
    iterations: int

    def __str__(self) -> str:
        return f"{self.mechanism.mechanism_name}=iterations={self.iterations}"


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Create or replace `user`'s credential for `mechanism`. `salt` None: a random one."""

    user: str
    mechanism: ScramMechanism
    iterations: int
    password: str | bytes
    salt: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mechanism", ScramMechanism.coerce(self.mechanism))

    def __repr__(self) -> str:   # keeps the password out of logs and tracebacks
        return (f"UserScramCredentialUpsertion(user={self.user!r}, "
                f"mechanism={self.mechanism.mechanism_name}, iterations={self.iterations})")


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Delete `user`'s credential for `mechanism`."""

    user: str
    mechanism: ScramMechanism

    def __post_init__(self) -> None:
        object.__setattr__(self, "mechanism", ScramMechanism.coerce(self.mechanism))


UserScramCredentialAlteration = UserScramCredentialUpsertion | UserScramCredentialDeletion


def salted_password(mechanism: ScramMechanism, password: str | bytes, salt: bytes,
                    iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2-HMAC of the mechanism's hash."""
    secret = password.encode("utf-8") if isinstance(password, str) else password
    return hashlib.pbkdf2_hmac(mechanism.hash_name, secret, salt, iterations)


def random_salt() -> bytes:
    return secrets.token_bytes(32)


def alter_scram_request(alterations: Iterable[UserScramCredentialAlteration],
                        make_salt: Callable[[], bytes] = random_salt) -> dict[str, Any]:
    """The AlterUserScramCredentials body: deletions as they are, upsertions with their
    salt (given, or from `make_salt`) and salted password. ValueError for the UNKNOWN
    mechanism (Kafka's client refuses it before sending)."""
    deletions: list[dict[str, Any]] = []
    upsertions: list[dict[str, Any]] = []
    for a in alterations:
        if a.mechanism is ScramMechanism.UNKNOWN:
            raise ValueError(f"user {a.user}: unknown SCRAM mechanism")
        if isinstance(a, UserScramCredentialDeletion):
            deletions.append({"name": a.user, "mechanism": int(a.mechanism)})
            continue
        salt = a.salt if a.salt is not None else make_salt()
        upsertions.append({
            "name": a.user, "mechanism": int(a.mechanism), "iterations": a.iterations,
            "salt": salt,
            "salted_password": salted_password(a.mechanism, a.password, salt, a.iterations)})
    return {"deletions": deletions, "upsertions": upsertions}


def describe_scram_request(users: Iterable[str] | None) -> dict[str, Any]:
    """The DescribeUserScramCredentials body: None (or no names) asks for every user."""
    names = list(dict.fromkeys(users)) if users is not None else []
    return {"users": [{"name": u} for u in names] if names else None}
