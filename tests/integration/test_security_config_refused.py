"""A broker whose config names a security feature it cannot enforce refuses to start, with
one line naming the key (issue 20): it never serves a listener less secure than its config."""
from __future__ import annotations

import subprocess
import sys

import pytest
import trustme

from tests.support.broker_process import REPO, free_port

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


def _config(tmp_path, props: dict[str, str]) -> str:
    port = free_port()
    lines = {"log.dirs": str(tmp_path / "logs"), **props}
    lines = {k: v.replace("PORT", str(port)) for k, v in lines.items()}
    cfg = tmp_path / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return str(cfg)


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    d = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    return d


SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:PORT",
        "security.inter.broker.protocol": "SASL_PLAINTEXT"}


def cases(pem) -> list[tuple[str, dict[str, str], str]]:
    ssl = {"listeners": "SSL://127.0.0.1:PORT", "security.inter.broker.protocol": "SSL"}
    keystore = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem / "server.pem")}
    return [
        ("Kafka's default mechanism GSSAPI", SASL, "sasl.enabled.mechanisms"),
        ("OAUTHBEARER", {**SASL, "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"},
         "sasl.enabled.mechanisms"),
        ("PLAIN without users", {**SASL, "sasl.enabled.mechanisms": "PLAIN",
                                 "sasl.mechanism.inter.broker.protocol": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
        ("inter-broker SCRAM without the broker's credentials",
         {**SASL, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
         "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"),
        ("inter-broker mechanism not enabled",
         {**SASL, "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
         "sasl.mechanism.inter.broker.protocol"),
        ("TLS without a key store", ssl, "ssl.keystore.location"),
        ("a JKS key store", {**ssl, "ssl.keystore.location": str(pem / "server.pem")},
         "ssl.keystore.type"),
        ("client certificates required without a trust store",
         {**ssl, **keystore, "ssl.client.auth": "required"}, "ssl.client.auth"),
        ("a key store that is not PEM", {**ssl, "ssl.keystore.type": "PEM",
                                         "ssl.keystore.location": str(pem / "ca.pem")},
         "ssl.keystore.location"),
        ("bad principal mapping rules", {**ssl, **keystore,
                                         "ssl.principal.mapping.rules": "RULE:^CN=(.*$/$1/"},
         "ssl.principal.mapping.rules"),
        ("another authorizer", {"authorizer.class.name": "com.example.OpaAuthorizer"},
         "authorizer.class.name"),
        ("re-authentication", {"connections.max.reauth.ms": "3600000"},
         "connections.max.reauth.ms"),
        ("a super user that is no principal", {"super.users": "admin"}, "super.users"),
        ("ZooKeeper ACLs", {"zookeeper.set.acl": "true"}, "zookeeper.set.acl"),
        ("TLS to ZooKeeper", {"zookeeper.ssl.client.enable": "true"}, "zookeeper.ssl.client.enable"),
        ("delegation tokens", {"delegation.token.secret.key": "s3cret"}, "delegation.token.secret.key"),
        ("a principal builder", {"principal.builder.class": "com.example.Builder"},
         "principal.builder.class"),
        ("a broker-wide JAAS config", {"sasl.jaas.config": PLAIN_JAAS}, "sasl.jaas.config"),
        ("a SASL callback handler per listener",
         {**SASL, "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
          "sasl.mechanism.inter.broker.protocol": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "com.example.H"},
         "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class"),
    ]


def test_each_unenforceable_setting_stops_the_broker_with_one_line(tmp_path, pem, capsys):
    """broker.main.main() in this process (what `python -m broker` runs): it returns before
    the broker would start, so each case costs no process start-up."""
    from broker.main import main
    failures = []
    for i, (what, props, key) in enumerate(cases(pem)):
        d = tmp_path / str(i)
        d.mkdir()
        rc = main([_config(d, {"listeners": "PLAINTEXT://127.0.0.1:PORT", **props})])
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.startswith("strom: ")]
        if rc != 1 or len(lines) != 1 or key not in lines[0]:
            failures.append(f"{what}: rc={rc} stderr={err[-600:]!r}")
    assert not failures, "\n".join(failures)


def test_the_broker_process_exits_with_the_line(tmp_path):
    cfg = _config(tmp_path, {"listeners": "SASL_PLAINTEXT://127.0.0.1:PORT",
                             "security.inter.broker.protocol": "SASL_PLAINTEXT"})
    r = subprocess.run([sys.executable, "-m", "broker", cfg], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("strom: ")] == [
        f"strom: {cfg}: sasl.enabled.mechanisms: GSSAPI is not supported by strom "
        f"(listener SASL_PLAINTEXT); use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"]
