"""Test certificates and broker settings for secured listeners (issue 20).

    kit = SecurityKit(tmp_path)                 # a CA, the brokers' certificate, client certs
    props = secure_overrides(kit, {"SASL_PLAINTEXT": p1, "SASL_SSL": p2, "SSL": p3})
    BrokerProcess(tmp_path / "b", overrides=props)

Users: PLAIN users come from the listener's JAAS (`USERS`); SCRAM users must be created with
AlterUserScramCredentials (`add_scram_users`). The brokers authenticate to each other as
"admin", a super user.
"""
from __future__ import annotations

from pathlib import Path

import trustme

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def plain_jaas(users: dict[str, str] = USERS, me: str = "admin") -> str:
    """A broker listener's PLAIN JAAS: its own credentials and the users it accepts."""
    accepted = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f'{PLAIN_MODULE} required username="{me}" password="{users[me]}" {accepted};'


def scram_jaas(user: str = "admin", password: str = USERS["admin"]) -> str:
    return f'{SCRAM_MODULE} required username="{user}" password="{password}";'


class SecurityKit:
    """PEM files under `directory`: ca.pem (trust), server.pem (the brokers' key and chain,
    valid for 127.0.0.1 and localhost), and client certificates <name>.cert.pem /
    <name>.key.pem for "alice" (CN=alice,OU=eng,O=strom) and "admin" (CN=admin,OU=ops,O=strom).
    The brokers map a certificate's DN to its CN (`ssl.principal.mapping.rules`), so a
    client certificate's principal is User:alice or User:admin, the same as over SASL."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA()
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        server = self.ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
        server.private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))
        for name, ou, org in (("alice", "eng", "strom"), ("admin", "ops", "strom")):
            cert = self.ca.issue_cert(f"{name}.clients.strom", common_name=name,
                                      organization_unit_name=ou, organization_name=org)
            cert.private_key_pem.write_to_path(str(self.key_pem(name)))
            self.cert_pem(name).write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))

    @property
    def ca_pem(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def server_pem(self) -> Path:
        return self.dir / "server.pem"

    def cert_pem(self, name: str) -> Path:
        return self.dir / f"{name}.cert.pem"

    def key_pem(self, name: str) -> Path:
        return self.dir / f"{name}.key.pem"


def secure_overrides(kit: SecurityKit, ports: dict[str, int | str], *, inter_broker: str | None = None,
                     mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                     inter_broker_mechanism: str = "PLAIN", client_auth: str = "required",
                     acls: bool = False, allow_everyone: bool = False) -> dict[str, str]:
    """server.properties lines for listeners named after their protocol (PLAINTEXT, SSL,
    SASL_PLAINTEXT, SASL_SSL: `ports` says which and where). SASL listeners accept PLAIN with
    USERS and SCRAM; the SSL listener asks for client certificates (`client_auth`). A port
    may be the string "{port}" (BrokerProcess's own port). `acls`: Kafka's ACL authorizer with
    User:admin as super user."""
    props = {"listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
             "security.inter.broker.protocol": inter_broker or next(iter(ports)),
             "sasl.enabled.mechanisms": mechanisms,
             "sasl.mechanism.inter.broker.protocol": inter_broker_mechanism,
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(kit.server_pem),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(kit.ca_pem),
             "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"}
    for name in ports:
        if name.startswith("SASL_"):
            prefix = f"listener.name.{name.lower()}."
            props[prefix + "plain.sasl.jaas.config"] = plain_jaas()
            props[prefix + "scram-sha-256.sasl.jaas.config"] = scram_jaas()
            props[prefix + "scram-sha-512.sasl.jaas.config"] = scram_jaas()
        if name == "SSL":
            props["listener.name.ssl.ssl.client.auth"] = client_auth
    if acls:
        props["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
        props["super.users"] = "User:admin"
        props["allow.everyone.if.no.acl.found"] = "true" if allow_everyone else "false"
    return props


def client_config(kit: SecurityKit, protocol: str, bootstrap: str, *, user: str = "alice",
                  password: str | None = None, mechanism: str = "PLAIN") -> dict[str, str]:
    """Kafka client keys (strom's clients read them; librdkafka names differ) for `user`."""
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol.startswith("SASL_"):
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": USERS.get(user, "") if password is None else password})
    if protocol in ("SSL", "SASL_SSL"):
        conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(kit.ca_pem)})
    if protocol == "SSL":
        conf.update({"ssl.keystore.type": "PEM", "ssl.certificate.location": str(kit.cert_pem(user)),
                     "ssl.key.location": str(kit.key_pem(user))})
    return conf


def sasl_plain_overrides(*, acls: bool = False) -> dict[str, str]:
    """server.properties lines for one SASL_PLAINTEXT listener on the broker's own port
    (PLAIN with USERS; the brokers talk to each other the same way as "admin"); `acls`:
    Kafka's ACL authorizer with User:admin as super user."""
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
             "security.inter.broker.protocol": "SASL_PLAINTEXT",
             "sasl.enabled.mechanisms": "PLAIN",
             "sasl.mechanism.inter.broker.protocol": "PLAIN",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas()}
    if acls:
        props["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
        props["super.users"] = "User:admin"
    return props
