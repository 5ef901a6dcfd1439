"""Plumbing shared by strom's command-line tools (the parts any program on the clients may
use, `ToolParser`, `run_tool`, `CliError`, `wait_reachable`, live in `clients.command_line`
and are re-exported here).

- `add_connection_args`: --bootstrap-server, the tool's properties-file flag
  (--command-config, --producer.config, --consumer.config) and --command-timeout.
- `client_config`: a client config dict from the properties file, `key=value` overrides and
  the command timeout; `bootstrap.servers` always comes from --bootstrap-server. The file is
  where a secured cluster's settings go, as with Kafka's tools: `security.protocol`,
  `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.location`, ... (every key of
  `clients.config`; a bad one is a one-line error naming it).
- `admin_client`: an AdminClient for the tool's flags, after a reachability check.
- `wait_reachable`: that check. A refused connection fails within a second, in Kafka's
  words; a broker that listens but is slow still gets the whole timeout.
- `ToolParser`: every tool's parser; `--zookeeper` (removed in Kafka 3.0) is refused with
  one line that says to use --bootstrap-server.

Tools are single-threaded; the clients they use run their own I/O thread.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from clients.command_line import CliError, describe_error, print_error, run_tool, wait_reachable
from clients.command_line import ToolParser as _BaseToolParser
from clients.properties import read_properties

if TYPE_CHECKING:
    from clients.admin import AdminClient

__all__ = ["CliError", "ToolParser", "add_connection_args", "command_timeout", "client_config",
           "read_config_file", "parse_assignment", "parse_config_list", "wait_reachable",
           "run_tool", "describe_error", "admin_client", "interrupt_on_sigterm", "exit_after",
           "DEFAULT_TIMEOUT", "TIMEOUT_ENV", "SECURITY_HELP"]

TIMEOUT_ENV = "STROM_CLI_TIMEOUT"     # seconds; the default of --command-timeout
SECURITY_HELP = ("Security settings go here too: security.protocol, sasl.mechanism, "
                 "sasl.jaas.config, ssl.truststore.location, ssl.keystore.location, ...")
DEFAULT_TIMEOUT = 10.0
ZOOKEEPER_REMOVED = ("--zookeeper is not supported: it was removed in Kafka 3.0; use "
                     "--bootstrap-server HOST:PORT (a broker's address, e.g. 127.0.0.1:9092) instead")


class ToolParser(_BaseToolParser):
    """The tools' parser: one-line usage errors (exit 2), and `--zookeeper`, in any form,
    refused before anything else (argparse would first complain of a missing
    --bootstrap-server, which does not say why)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        argv = sys.argv[1:] if args is None else list(args)
        if any(a == "--zookeeper" or a.startswith("--zookeeper=") for a in argv):
            self.exit(2, f"{self.prog}: error: {ZOOKEEPER_REMOVED}\n")
        return super().parse_known_args(argv, namespace)


def add_connection_args(parser: argparse.ArgumentParser, config_flag: str = "--command-config",
                        config_help: str = "Property file with configs for the admin client.",
                        bootstrap_required: bool = True) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        required=bootstrap_required,
                        help="REQUIRED: the server(s) to connect to.")
    parser.add_argument(config_flag, metavar="FILE", dest="config_file",
                        help=f"{config_help.rstrip()} {SECURITY_HELP}")
    parser.add_argument("--command-timeout", metavar="SECONDS", type=float, default=None,
                        help=f"Give up reaching the cluster (and on admin requests) after this "
                             f"long (default ${TIMEOUT_ENV} or {DEFAULT_TIMEOUT:g}).")


def command_timeout(args: argparse.Namespace) -> float:
    t = getattr(args, "command_timeout", None)
    if t is None:
        env = os.environ.get(TIMEOUT_ENV)
        try:
            t = float(env) if env else DEFAULT_TIMEOUT
        except ValueError:
            raise CliError(f"{TIMEOUT_ENV}={env!r} is not a number of seconds") from None
    if t <= 0:
        raise CliError("--command-timeout must be positive")
    return t


def read_config_file(path: str) -> dict[str, str]:
    """A .properties file as {key: value} (values stripped, as typed parsing wants them)."""
    try:
        return {k: p.value.strip() for k, p in read_properties(path).items()}
    except OSError as e:
        raise CliError(f"cannot read config file {path}: {e.strerror or e}") from None


def parse_assignment(text: str, what: str = "property") -> tuple[str, str]:
    """`key=value` -> (key, value); the value may contain '='."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise CliError(f"invalid {what} '{text}': expected key=value")
    return key.strip(), value


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's --add-config syntax: `k1=v1,k2=[a,b,c],k3=v3` (brackets keep commas in a
    value, and are removed)."""
    out: dict[str, str] = {}
    items: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    for item in items:
        if not item.strip():
            continue
        key, value = parse_assignment(item.strip(), "config")
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key] = value
    return out


def client_config(args: argparse.Namespace, kind: str, overrides: dict[str, Any] | None = None,
                  defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Config for a client of `kind` (producer/consumer/admin): the properties file named by
    the tool's config flag, then `overrides`, then --bootstrap-server; `defaults` fill keys
    neither set. The command timeout bounds connection setup (and, for admin, each request
    and call) unless the file says otherwise."""
    from clients.config import KEYS

    cfg: dict[str, Any] = {}
    path = getattr(args, "config_file", None)
    if path:
        cfg.update(read_config_file(path))
    cfg.update(overrides or {})
    t_ms = int(command_timeout(args) * 1000)
    known = KEYS[kind]
    fill: dict[str, Any] = {"socket.connection.setup.timeout.ms": t_ms, **(defaults or {})}
    if kind == "admin":
        fill.update({"request.timeout.ms": min(t_ms, 30000), "default.api.timeout.ms": t_ms})
    for key, value in fill.items():
        if key in known:
            cfg.setdefault(key, value)
    cfg["bootstrap.servers"] = args.bootstrap_server
    return cfg


def exit_after(seconds: float, error_prefix: str, what: str) -> threading.Timer:
    """A backstop: if the tool is still running after `seconds`, print one line and exit 1
    (a client call that ignores its timeout must not hang a shell script)."""
    def fire() -> None:
        print_error(f"{error_prefix}timed out after {seconds:g}s {what}")
        os._exit(1)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


def interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so a console tool stopped by a supervisor still flushes,
    commits, leaves its group and prints its summary."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@contextmanager
def admin_client(args: argparse.Namespace,
                 error_prefix: str = "Error: ") -> Iterator[AdminClient]:
    """An AdminClient for the tool's --bootstrap-server / --command-config, after checking the
    cluster is reachable; closed on exit. The whole block is bounded by a backstop timer."""
    timeout = command_timeout(args)
    # Topic creation/deletion waits up to 30 s for metadata to show the change (the admin
    # client's own bound), so the backstop leaves room for that.
    guard = exit_after(max(timeout, 30.0) * 2 + 10, error_prefix, "waiting for the cluster")
    try:
        wait_reachable(args.bootstrap_server, timeout)
        from clients.admin import AdminClient

        admin = AdminClient(client_config(args, "admin"))
        try:
            yield admin
        finally:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - closing must not mask the real outcome
                pass
    finally:
        guard.cancel()
