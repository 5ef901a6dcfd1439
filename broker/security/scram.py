"""Kafka's SCRAM credential: what a broker keeps of a user's password (RFC 5802).

The password itself is never stored: only a salt, the iteration count, and the two keys
derived from SaltedPassword = Hi(password, salt, i) (PBKDF2-HMAC):

    ClientKey = HMAC(SaltedPassword, "Client Key")    StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")

Kafka stores a credential as the string (ScramCredentialUtils)

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>

under the mechanism's name ("SCRAM-SHA-256") in the user's config (/config/users/<user>).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = ["ScramCredential", "MECHANISMS", "MECHANISM_CODES", "MIN_ITERATIONS",
           "MAX_ITERATIONS", "mechanism_name", "mechanism_code"]

# Kafka's wire codes (AlterUserScramCredentials, DescribeUserScramCredentials); 0 is UNKNOWN.
MECHANISM_CODES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISMS: tuple[str, ...] = tuple(MECHANISM_CODES)
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's limits: ScramMechanism.minIterations for both mechanisms, and the most
# AlterUserScramCredentials accepts.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
_FIELDS = ("salt", "stored_key", "server_key", "iterations")


def mechanism_name(code: int) -> str | None:
    """"SCRAM-SHA-256" for 1, "SCRAM-SHA-512" for 2, None for any other code."""
    for name, c in MECHANISM_CODES.items():
        if c == code:
            return name
    return None


def mechanism_code(name: str) -> int:
    """The wire code of a mechanism name; ValueError for one that is not SCRAM."""
    try:
        return MECHANISM_CODES[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a SCRAM mechanism "
                         f"({', '.join(MECHANISMS)})") from None


def _hash_name(mechanism: str) -> str:
    try:
        return _HASHES[mechanism]
    except KeyError:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism "
                         f"({', '.join(MECHANISMS)})") from None


@dataclass(frozen=True)
class ScramCredential:
    """One user's credential for one mechanism. `repr` leaves the keys out of logs."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"

    def format(self) -> str:
        """Kafka's string form (ScramCredentialUtils.credentialToString)."""
        def b64(b: bytes) -> str:
            return base64.b64encode(b).decode("ascii")
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> "ScramCredential":
        """Kafka's string form back (credentialFromString): exactly the four fields, in any
        order. ValueError, without the secret parts, for anything else."""
        fields: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError("SCRAM credential is not key=value pairs")
            fields[key] = value
        if sorted(fields) != sorted(_FIELDS):
            raise ValueError(f"SCRAM credential must have exactly the fields {', '.join(_FIELDS)}; "
                             f"found {', '.join(sorted(fields))}")
        try:
            salt, stored_key, server_key = (base64.b64decode(fields[k], validate=True)
                                            for k in _FIELDS[:3])
        except binascii.Error:
            raise ValueError("SCRAM credential has a field that is not base64") from None
        try:
            iterations = int(fields["iterations"])
        except ValueError:
            raise ValueError(f"SCRAM credential iterations {fields['iterations']!r} "
                             f"is not a number") from None
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> "ScramCredential":
        """The credential of a SaltedPassword, as an AlterUserScramCredentials upsertion
        carries it (Kafka's ScramFormatter.generateCredential)."""
        digest = _hash_name(mechanism)
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        stored_key = hashlib.new(digest, client_key).digest()
        server_key = hmac.digest(salted_password, b"Server Key", digest)
        return cls(bytes(salt), stored_key, server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int,
                      salt: bytes | None = None) -> "ScramCredential":
        """The credential of a password. Like Kafka (ScramFormatter.normalize), the password
        is taken as its UTF-8 bytes, without SASLprep. A random 32-byte salt by default."""
        digest = _hash_name(mechanism)
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)
