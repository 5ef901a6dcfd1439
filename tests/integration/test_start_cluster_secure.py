"""bin/start-cluster.sh --secure (docs/SECURITY.md's first step): ZooKeeper and three brokers
whose only listener is SASL_SSL, with the ACL authorizer on. The admin's client.properties it
writes works with strom's tools and (librdkafka.properties) with kcat; a plaintext
connection, a TLS one without SASL and a wrong password get nothing; a SCRAM user needs an
ACL; a second start reuses the passwords and certificates; bin/stop-cluster.sh stops it. The
standalone broker is secured the same way."""
from __future__ import annotations

import shutil
import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
PORTS = [2181, 9092, 9093, 9094, 9404, 9405, 9406]   # ZooKeeper, brokers, metrics
BOOTSTRAP = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


busy = pytest.mark.skipif(any(in_use(p) for p in PORTS),
                          reason="a port of the default cluster is busy here")


def script(name: str, *args: str, timeout: float = 150) -> subprocess.CompletedProcess:
    r = subprocess.run([str(REPO / "bin" / name), *args], cwd=REPO, capture_output=True,
                       text=True, timeout=timeout)
    print(f"$ bin/{name} {' '.join(args)} -> {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def tool(name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(REPO / "bin" / f"kafka-{name}.sh"), *args], input=stdin, cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def ok(name: str, *args: str, stdin: str | None = None) -> str:
    r = tool(name, *args, stdin=stdin)
    assert r.returncode == 0, f"kafka-{name} {args}: {r.stdout} {r.stderr}"
    return r.stdout


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def plaintext_api_versions_answered(port: int) -> bool:
    """Send ApiVersions v0 in plaintext; True if any answer comes back before the close."""
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        try:
            return s.recv(4) != b""
        except ConnectionResetError:
            return False


def properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            out[key.strip()] = value.strip()
    return out


@busy
def test_secure_cluster(tmp_path):
    data = tmp_path / "data"
    secure = data / "secure"
    client = secure / "client.properties"
    bs = ("--bootstrap-server", BOOTSTRAP)
    admin = (*bs, "--command-config", str(client))
    try:
        r = script("start-cluster.sh", "--no-setup", "--secure", "--data-dir", str(data),
                   "--timeout", "90")
        assert r.returncode == 0
        assert f"bootstrap servers: {BOOTSTRAP}" in r.stdout
        assert f"--command-config {client} --list" in r.stdout
        assert f"bin/stop-cluster.sh --data-dir {data}" in r.stdout

        # Secrets: random, readable by the owner only, and what the brokers are given.
        assert mode(secure) == 0o700
        for name in ("credentials.properties", "broker.pem", "client.properties",
                     "librdkafka.properties", "server-0.properties", "server-2.properties"):
            assert mode(secure / name) == 0o600, name
        passwords = properties(secure / "credentials.properties")
        assert set(passwords) == {"admin", "broker"}
        assert all(len(p) >= 24 for p in passwords.values()) and len(set(passwords.values())) == 2
        assert f'password="{passwords["admin"]}"' in client.read_text()
        broker0 = properties(secure / "server-0.properties")
        assert broker0["listeners"] == "SASL_SSL://127.0.0.1:9092"
        assert broker0["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"

        # The admin (a super user) with the written client.properties: strom's tools...
        ok("topics", *admin, "--create", "--topic", "orders", "--partitions", "3",
           "--replication-factor", "3")
        assert "orders" in ok("topics", *admin, "--list").split()
        ok("console-producer", *bs, "--producer.config", str(client), "--topic", "orders",
           stdin="one\ntwo\nthree\n")
        out = ok("console-consumer", *bs, "--consumer.config", str(client), "--topic", "orders",
                 "--from-beginning", "--max-messages", "3", "--timeout-ms", "15000")
        assert sorted(out.split()) == ["one", "three", "two"]
        # ...and librdkafka's kcat with librdkafka.properties
        if shutil.which("kcat"):
            md = subprocess.run(["kcat", "-b", "127.0.0.1:9093", "-F",
                                 str(secure / "librdkafka.properties"), "-L", "-m", "10"],
                                capture_output=True, text=True, timeout=30)
            assert " 3 brokers:" in md.stdout and 'topic "orders"' in md.stdout, md.stderr

        # Without credentials, nothing: plaintext is closed unanswered, TLS without SASL is
        # closed at its first request, a wrong password is refused at once.
        assert not plaintext_api_versions_answered(9092)
        tls_only = tmp_path / "tls-only.properties"
        tls_only.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                            f"ssl.truststore.location={secure}/ca.pem\n")
        r = tool("topics", *bs, "--command-config", str(tls_only), "--command-timeout", "3",
                 "--list")
        assert r.returncode != 0 and "orders" not in r.stdout
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(client.read_text().replace(passwords["admin"], "not-the-password"))
        started = time.monotonic()
        r = tool("topics", *bs, "--command-config", str(wrong), "--list")
        assert r.returncode != 0 and "orders" not in r.stdout
        assert "SASL_AUTHENTICATION_FAILED" in r.stderr
        assert time.monotonic() - started < 10

        # A SCRAM-SHA-512 user made with kafka-configs.sh may write only once an ACL allows it.
        ok("configs", *admin, "--alter", "--entity-type", "users", "--entity-name", "alice",
           "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")
        alice = tmp_path / "alice.properties"
        alice.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                         f'sasl.jaas.config={SCRAM_MODULE} required username="alice" '
                         'password="alice-secret";\n'
                         f"ssl.truststore.type=PEM\nssl.truststore.location={secure}/ca.pem\n")
        produce = ("console-producer", *bs, "--producer.config", str(alice), "--topic", "orders")
        r = tool(*produce, stdin="denied\n")
        assert r.returncode != 0 and "TopicAuthorization" in r.stderr, r.stderr
        ok("acls", *admin, "--add", "--allow-principal", "User:alice", "--producer",
           "--topic", "orders")
        ok(*produce, stdin="allowed\n")

        # A second start on the same data dir keeps the passwords and certificates.
        kept = {n: (secure / n).read_bytes() for n in ("credentials.properties", "ca.pem",
                                                       "broker.pem")}
        assert script("stop-cluster.sh", "--data-dir", str(data)).returncode == 0
        r = script("start-cluster.sh", "--no-setup", "--secure", "--data-dir", str(data),
                   "--timeout", "90")
        assert r.returncode == 0
        assert {n: (secure / n).read_bytes() for n in kept} == kept
        assert "orders" in ok("topics", *admin, "--list").split()
    finally:
        s = script("stop-cluster.sh", "--data-dir", str(data), timeout=120)
    assert s.returncode == 0
    assert not any(in_use(p) for p in PORTS), "something is still listening after stop-cluster.sh"


@busy
def test_secure_standalone(tmp_path):
    data = tmp_path / "data"
    client = data / "secure" / "client.properties"
    log = (tmp_path / "standalone.out").open("w")
    proc = subprocess.Popen([str(REPO / "bin/start-cluster.sh"), "--no-setup", "--secure",
                             "--standalone", "--data-dir", str(data)], cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not in_use(9092):
            assert proc.poll() is None, (tmp_path / "standalone.out").read_text()
            assert time.monotonic() < deadline, "the standalone broker does not listen on 9092"
            time.sleep(0.1)
        assert properties(data / "secure" / "server.properties")["listeners"] == \
            "SASL_SSL://127.0.0.1:9092"
        admin = ("--bootstrap-server", "127.0.0.1:9092", "--command-config", str(client))
        ok("topics", *admin, "--create", "--topic", "solo")
        assert "solo" in ok("topics", *admin, "--list").split()
        assert not plaintext_api_versions_answered(9092)
    finally:
        # The broker is this test's child: reap it while stop-cluster.sh waits for it to go
        # (an unreaped zombie would look alive to the script's kill -0 for its whole timeout).
        stop = subprocess.Popen([str(REPO / "bin/stop-cluster.sh"), "--data-dir", str(data)],
                                cwd=REPO)
        try:
            proc.wait(timeout=40)
            assert stop.wait(timeout=20) == 0
        finally:
            stop.kill()
            proc.kill()
            log.close()
        # bin/kafka-server-start.sh also records the pid under the repository's data/run/
        stray = REPO / "data" / "run" / "broker-server.pid"
        if stray.exists() and stray.read_text().strip() == str(proc.pid):
            stray.unlink()
    assert proc.returncode == 0, (tmp_path / "standalone.out").read_text()[-2000:]


def test_secure_dry_run_makes_nothing(tmp_path):
    data = tmp_path / "data"
    r = script("start-cluster.sh", "--secure", "--dry-run", "--data-dir", str(data))
    assert r.returncode == 0
    assert f"generate {data}/secure/server-0.properties" in r.stdout
    assert f"make a CA ({data}/secure/ca.pem)" in r.stdout
    assert f"bin/kafka-server-start.sh {data}/secure/server-2.properties" in r.stdout
    assert not data.exists()
    r = script("start-cluster.sh", "--secure", "--standalone", "--dry-run", "--data-dir", str(data))
    assert r.returncode == 0 and f"exec bin/kafka-server-start.sh {data}/secure/server.properties" \
        in r.stdout
    assert not data.exists()
