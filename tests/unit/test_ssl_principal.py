"""Who a TLS client is (broker/security/principal.py): the certificate's DN as Java prints it,
and ssl.principal.mapping.rules with the cases of Kafka's SslPrincipalMapperTest."""
from __future__ import annotations

import datetime
import ssl

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from broker.security.principal import (NoMatchingRule, SslPrincipalBuilder, SslPrincipalMapper,
                                       subject_dn)
from broker.security.tls import server_ssl_context


def certificate(*rdns: list[x509.NameAttribute]) -> bytes:
    """A self-signed certificate (DER) whose subject has these RDNs, in DER order."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(Encoding.DER)


def attr(oid: x509.ObjectIdentifier, value: str) -> list[x509.NameAttribute]:
    return [x509.NameAttribute(oid, value)]


# ------------------------------------------------------------------ the DN

def test_dn_is_most_specific_first_with_javas_keywords():
    der = certificate(attr(NameOID.COUNTRY_NAME, "US"), attr(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
                      attr(NameOID.LOCALITY_NAME, "Fulton"), attr(NameOID.ORGANIZATION_NAME, "mycp"),
                      attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "SME"), attr(NameOID.COMMON_NAME, "Duke"))
    assert subject_dn(der) == "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"


def test_dn_of_a_trustme_client_certificate():
    cert = trustme.CA().issue_cert("client.example", common_name="alice",
                                   organization_name="Org", organization_unit_name="Eng")
    der = ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())
    assert subject_dn(der) == "CN=alice,OU=Eng,O=Org"


def test_domain_components_street_and_uid_keep_their_keywords():
    der = certificate(attr(NameOID.DOMAIN_COMPONENT, "com"), attr(NameOID.DOMAIN_COMPONENT, "example"),
                      attr(NameOID.STREET_ADDRESS, "Main St"), attr(NameOID.USER_ID, "u1"))
    assert subject_dn(der) == "UID=u1,STREET=Main St,DC=example,DC=com"


@pytest.mark.parametrize("value, printed", [
    ("Tkac, Adam", r"Tkac\, Adam"),
    ("a=b+c", r"a\=b\+c"),
    ("#1 <x>; \"q\" \\", r"\#1 \<x\>\; \"q\" \\"),
    (" lead and trail  ", r"\ lead and trail\ \ "),
    ("a\0b", r"a\00b"),
    ("user@example.com_*", "user@example.com_*"),
    ("Ünïcode", "Ünïcode"),
])
def test_dn_escapes_as_java_does(value, printed):
    assert subject_dn(certificate(attr(NameOID.COMMON_NAME, value))) == f"CN={printed}"


def test_other_attributes_are_their_oid_and_hex_der_value():
    # Java's X500Principal.getName(): emailAddress (an IA5String) is not an RFC 2253 keyword.
    der = certificate(attr(NameOID.ORGANIZATION_NAME, "Org"),
                      attr(NameOID.EMAIL_ADDRESS, "foo@bar.com"), attr(NameOID.COMMON_NAME, "alice"))
    assert subject_dn(der) == \
        "CN=alice,1.2.840.113549.1.9.1=#160b666f6f406261722e636f6d,O=Org"


def test_multi_valued_rdn_is_joined_with_plus():
    der = certificate(attr(NameOID.ORGANIZATION_NAME, "Org"),
                      [x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
                       x509.NameAttribute(NameOID.USER_ID, "a1")])
    first, rest = subject_dn(der).split(",")
    assert sorted(first.split("+")) == ["CN=alice", "UID=a1"] and rest == "O=Org"


# ------------------------------------------------------------------ Kafka's SslPrincipalMapperTest

@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    with pytest.raises(ValueError):
        SslPrincipalMapper(rules)


def test_ssl_principal_mapper():
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("expected, rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
    (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
    # rules rule
    (r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace():
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_back_references_beyond_the_groups_stay_literal():
    # Kafka's escapeLiteralBackReferences: $4 with three groups is the text "$4".
    mapper = SslPrincipalMapper(r"RULE:^CN=(\w+),OU=(\w+),O=(\w+)$/$1@$4-$3/")
    assert mapper.name("CN=duke,OU=sme,O=org") == "duke@$4-org"


def test_no_rule_matches():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=duke,OU=Other"):
        mapper.name("CN=duke,OU=Other")
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("").name("CN=duke")


def test_default_rules_when_unset():
    assert SslPrincipalMapper(None).name("CN=duke,O=org") == "CN=duke,O=org"


# ------------------------------------------------------------------ the principal of a connection

def test_no_certificate_is_anonymous():
    assert SslPrincipalBuilder()(None) == "User:ANONYMOUS"


def test_principal_of_a_certificate_with_rules():
    der = certificate(attr(NameOID.ORGANIZATION_NAME, "Org"),
                      attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
                      attr(NameOID.COMMON_NAME, "Producer1"))
    assert SslPrincipalBuilder()(der) == "User:CN=Producer1,OU=ServiceUsers,O=Org"
    rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT"
    assert SslPrincipalBuilder(rules)(der) == "User:producer1"
    with pytest.raises(NoMatchingRule, match="Failed to map name for 'CN=Producer1"):
        SslPrincipalBuilder("RULE:^CN=(.*?),OU=Humans$/$1/")(der)


def test_principal_from_a_tls_handshake_with_a_client_certificate(tmp_path):
    ca = trustme.CA()
    server_cert = ca.issue_cert("broker.example")
    client_cert = ca.issue_cert("client.example", common_name="alice",
                                organization_name="Org", organization_unit_name="Eng")
    keystore, truststore = tmp_path / "broker.pem", tmp_path / "ca.pem"
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(truststore))
    server_ctx = server_ssl_context({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(truststore),
        "ssl.client.auth": "required"})
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    client_cert.configure_cert(client_ctx)

    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="broker.example")
    for _ in range(10):
        for obj in (client, server):
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    client.write(b"x")
    s_in.write(c_out.read())
    assert server.read(1) == b"x"
    build = SslPrincipalBuilder("RULE:^CN=([^,]+),OU=Eng,.*$/$1/U,DEFAULT")
    assert build(server.getpeercert(binary_form=True)) == "User:ALICE"


def test_named_groups_in_the_replacement():
    mapper = SslPrincipalMapper(r"RULE:^CN=(?<user>\w+)(?<!x),.*$/${user}/")
    assert mapper.name("CN=duke,O=org") == "duke"
    with pytest.raises(ValueError, match="named group"):
        SslPrincipalMapper(r"RULE:^CN=(?<user>\w+),.*$/${nope}/").name("CN=duke,O=org")
