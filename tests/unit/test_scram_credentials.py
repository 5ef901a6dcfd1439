"""Kafka's SCRAM credential (broker/security/scram.py): the keys RFC 5802 derives, and the
string Kafka stores in /config/users/<user>."""
from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest
from scramp import ScramMechanism  # type: ignore[import-untyped]

from broker.security.scram import (MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential,
                                   mechanism_code, mechanism_name)

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_FIRST = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC7677_FINAL_WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_keys_verify_the_rfc_7677_exchange():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt=RFC7677_SALT)
    auth_message = ",".join([RFC7677_CLIENT_FIRST_BARE, RFC7677_SERVER_FIRST,
                             RFC7677_FINAL_WITHOUT_PROOF]).encode()
    # The server checks the client's proof with StoredKey alone ...
    client_signature = hmac.digest(cred.stored_key, auth_message, "sha256")
    client_key = bytes(a ^ b for a, b in zip(RFC7677_PROOF, client_signature))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    # ... and proves itself with ServerKey.
    assert hmac.digest(cred.server_key, auth_message, "sha256") == RFC7677_SERVER_SIGNATURE


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_keys_match_scramp(mechanism):
    salt = bytes(range(16))
    cred = ScramCredential.from_password(mechanism, "alice-secret", 8192, salt=salt)
    assert (cred.salt, cred.stored_key, cred.server_key, cred.iterations) == \
        ScramMechanism(mechanism).make_auth_info("alice-secret", iteration_count=8192, salt=salt)


@pytest.mark.parametrize("mechanism, digest", [("SCRAM-SHA-256", "sha256"),
                                               ("SCRAM-SHA-512", "sha512")])
def test_salted_password_gives_the_same_credential_as_the_password(mechanism, digest):
    # What an AlterUserScramCredentials upsertion carries: the client did Hi() itself.
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac(digest, b"pw", salt, 4096)
    assert ScramCredential.from_salted_password(mechanism, salt, salted, 4096) == \
        ScramCredential.from_password(mechanism, "pw", 4096, salt=salt)


def test_random_salt_by_default():
    a = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    b = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    assert len(a.salt) == 32 and a.salt != b.salt and a.stored_key != b.stored_key


def test_kafka_string_form_round_trips():
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw", 4096, salt=b"salt-of-16-bytes")
    text = cred.format()
    assert re.fullmatch(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]+,"
                        r"server_key=[A-Za-z0-9+/=]+,iterations=4096", text)
    assert text.startswith("salt=" + base64.b64encode(b"salt-of-16-bytes").decode() + ",")
    assert ScramCredential.parse(text) == cred


def test_parse_takes_fields_in_any_order():
    cred = ScramCredential(b"s" * 12, b"k" * 32, b"v" * 32, 8192)
    fields = cred.format().split(",")
    assert ScramCredential.parse(",".join(reversed(fields))) == cred


@pytest.mark.parametrize("text, words", [
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA", "exactly the fields"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096,extra=1", "exactly the fields"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations", "key=value"),
    ("salt=A!AA,stored_key=AAAA,server_key=AAAA,iterations=4096", "base64"),
    ("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=many", "not a number"),
])
def test_parse_refuses_what_kafka_refuses(text, words):
    with pytest.raises(ValueError, match=words):
        ScramCredential.parse(text)


def test_repr_keeps_the_keys_out_of_logs():
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096, salt=b"x" * 16)
    assert repr(cred) == "ScramCredential(iterations=4096)"
    assert base64.b64encode(cred.stored_key).decode() not in repr(cred)


def test_mechanisms_have_kafkas_wire_codes_and_limits():
    assert mechanism_code("SCRAM-SHA-256") == 1 and mechanism_code("SCRAM-SHA-512") == 2
    assert mechanism_name(1) == "SCRAM-SHA-256" and mechanism_name(2) == "SCRAM-SHA-512"
    assert mechanism_name(0) is None and mechanism_name(3) is None
    assert (MIN_ITERATIONS, MAX_ITERATIONS) == (4096, 16384)
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        mechanism_code("PLAIN")
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        ScramCredential.from_password("SCRAM-SHA-1", "pw", 4096)
