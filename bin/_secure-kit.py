#!/usr/bin/env python3
"""The secrets and certificates of a cluster started by bin/start-cluster.sh --secure.

    bin/_secure-kit.py SECURE_DIR [--bootstrap HOST:PORT,...] [--dry-run]

Makes what is missing in SECURE_DIR (mode 0700) and reuses what is there, so a second start
on the same data dir keeps its passwords and certificates:

    credentials.properties   admin=<password>, broker=<password>: random, made once (0600)
    ca.pem                   the CA certificate clients and brokers trust
    broker.pem               the brokers' private key and certificate chain, for 127.0.0.1
                             and localhost, signed by that CA (0600)
    broker-security.properties  config/secure/security.properties filled in (0600)
    client.properties        the admin user over SASL_SSL in Kafka's client keys, for
                             bin/kafka-*.sh --command-config (0600)
    librdkafka.properties    the same in librdkafka's keys, for kcat -F and confluent-kafka (0600)

The CA's private key is not kept: no other certificate can be signed with it (docs/SECURITY.md
shows how to run your own CA with openssl). Certificates come from trustme (ECDSA P-256,
valid until 3000). Prints one line per file made or reused on stderr; with --dry-run only
says what it would do.
"""
from __future__ import annotations

import argparse
import os
import secrets
import string
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "config" / "secure" / "security.properties"
USERS = ("admin", "broker")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def say(text: str, dry_run: bool = False) -> None:
    """What is done goes to stderr as the bin/ scripts log; what --dry-run would do to stdout,
    as bin/start-cluster.sh --dry-run shows its steps."""
    if dry_run:
        print(f"+ {text}")
    else:
        print(f"[strom] {text}", file=sys.stderr)


def write_private(path: Path, text: str | bytes) -> None:
    """Write `path` readable by its owner only, replacing it whole (never half-written)."""
    data = text.encode() if isinstance(text, str) else text
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)   # O_CREAT's mode does not apply to a file that existed
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_credentials(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        name, sep, password = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            out[name.strip()] = password.strip()
    return out


def ensure_credentials(directory: Path, dry_run: bool) -> dict[str, str]:
    path = directory / "credentials.properties"
    have = read_credentials(path) if path.exists() else {}
    missing = [u for u in USERS if not have.get(u)]
    if not missing:
        say(f"reusing the passwords of {', '.join(USERS)} in {path}", dry_run)
        return have
    # URL-safe: no quote, backslash or '=' to escape in JAAS or .properties lines.
    made = {u: have.get(u) or secrets.token_urlsafe(24) for u in USERS}
    say(f"{'make' if dry_run else 'making'} random passwords for {', '.join(missing)} "
        f"in {path} (mode 0600)", dry_run)
    if not dry_run:
        write_private(path, "# SASL passwords of this cluster (bin/start-cluster.sh --secure)\n"
                      + "".join(f"{u}={p}\n" for u, p in made.items()))
    return made


def ensure_certificates(directory: Path, dry_run: bool) -> None:
    ca_pem, broker_pem = directory / "ca.pem", directory / "broker.pem"
    if ca_pem.exists() and broker_pem.exists():
        say(f"reusing the CA {ca_pem} and the brokers' certificate {broker_pem}", dry_run)
        return
    say(f"{'make' if dry_run else 'making'} a CA ({ca_pem}) and the brokers' key and "
        f"certificate for 127.0.0.1 and localhost ({broker_pem}, mode 0600)", dry_run)
    if dry_run:
        return
    try:
        import trustme
    except ImportError:
        sys.exit("[strom] --secure makes its certificates with trustme, which is not installed: "
                 ".venv/bin/pip install trustme (or pip install -e '.[test]')")
    ca = trustme.CA(organization_name="strom", organization_unit_name="strom development CA")
    cert = ca.issue_cert("127.0.0.1", "localhost", common_name="broker",
                         organization_name="strom")
    write_private(broker_pem, cert.private_key_and_cert_chain_pem.bytes())
    ca_pem.write_bytes(ca.cert_pem.bytes())


def broker_security(directory: Path, passwords: dict[str, str]) -> str:
    """The template's settings filled in, under a header of ours (the template's own header
    describes the template)."""
    text = TEMPLATE.read_text()
    body = text.split("\n\n", 1)[1] if text.startswith("#") else text
    header = ("############################# Security #############################\n"
              f"# From config/secure/security.properties (bin/start-cluster.sh --secure); the "
              f"passwords are in\n# {directory}/credentials.properties. docs/SECURITY.md explains "
              "each line.\n\n")
    return header + string.Template(body).substitute(
        SECURE_DIR=str(directory), BROKER_PASSWORD=passwords["broker"],
        ADMIN_PASSWORD=passwords["admin"])


def client_properties(directory: Path, passwords: dict[str, str], bootstrap: str) -> str:
    return ("# The admin user (a super user) over SASL_SSL, in Kafka's client keys:\n"
            f"#   bin/kafka-topics.sh --bootstrap-server {bootstrap} "
            f"--command-config {directory}/client.properties --list\n"
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={PLAIN_MODULE} required username="admin" '
            f'password="{passwords["admin"]}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={directory}/ca.pem\n")


def librdkafka_properties(directory: Path, passwords: dict[str, str], bootstrap: str) -> str:
    return ("# The admin user over SASL_SSL in librdkafka's keys, for kcat and confluent-kafka:\n"
            f"#   kcat -b {bootstrap} -F {directory}/librdkafka.properties -L\n"
            "security.protocol=SASL_SSL\n"
            "sasl.mechanisms=PLAIN\n"
            "sasl.username=admin\n"
            f"sasl.password={passwords['admin']}\n"
            f"ssl.ca.location={directory}/ca.pem\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("directory", type=Path, help="DATA_DIR/secure")
    p.add_argument("--bootstrap", default="127.0.0.1:9092",
                   help="the brokers, for the usage lines in the client configs' comments")
    p.add_argument("--dry-run", action="store_true", help="say what would be made; write nothing")
    args = p.parse_args(argv)
    directory: Path = args.directory.resolve()
    if not args.dry_run:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
    passwords = ensure_credentials(directory, args.dry_run)
    ensure_certificates(directory, args.dry_run)
    files = {"broker-security.properties": broker_security(directory, passwords),
             "client.properties": client_properties(directory, passwords, args.bootstrap),
             "librdkafka.properties": librdkafka_properties(directory, passwords, args.bootstrap)}
    say(f"{'write' if args.dry_run else 'writing'} {', '.join(files)} in {directory} "
        "(mode 0600)", args.dry_run)
    if not args.dry_run:
        for name, text in files.items():
            write_private(directory / name, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
