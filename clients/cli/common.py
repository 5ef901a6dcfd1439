"""Plumbing shared by strom's command-line tools.

- `ToolParser`: argparse with Kafka's flag style; a usage error is ONE line on stderr, exit 2.
- `add_connection_args`: --bootstrap-server, the tool's properties-file flag
  (--command-config, --producer.config, --consumer.config) and --command-timeout.
- `client_config`: a client config dict from the properties file, `key=value` overrides and
  the command timeout; `bootstrap.servers` always comes from --bootstrap-server.
- `wait_reachable`: fail fast, with one line, when no bootstrap broker accepts a connection
  within the command timeout (instead of each client's own, much longer, retry loop).
- `run_tool`: runs a tool's body and turns every expected error (bad input, broker error
  codes, connection failures, timeouts) into one `Error: ...` line and exit code 1 — never a
  traceback (set STROM_CLI_DEBUG=1 to get one for an unexpected exception).

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
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from clients.properties import ConfigError, read_properties

__all__ = ["CliError", "ToolParser", "add_connection_args", "command_timeout", "client_config",
           "read_config_file", "parse_assignment", "parse_config_list", "wait_reachable",
           "run_tool", "describe_error", "admin_client", "interrupt_on_sigterm", "exit_after",
           "DEFAULT_TIMEOUT", "TIMEOUT_ENV"]

TIMEOUT_ENV = "STROM_CLI_TIMEOUT"     # seconds; the default of --command-timeout
DEFAULT_TIMEOUT = 10.0


class CliError(Exception):
    """An expected failure: printed as one line, exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ToolParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (`prog: error: ... (see --help)`), exit 2."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_connection_args(parser: argparse.ArgumentParser, config_flag: str = "--command-config",
                        config_help: str = "Property file with configs for the admin client.",
                        bootstrap_required: bool = True) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        required=bootstrap_required,
                        help="REQUIRED: the server(s) to connect to.")
    parser.add_argument(config_flag, metavar="FILE", dest="config_file", help=config_help)
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


def wait_reachable(bootstrap: str, timeout: float) -> None:
    """Return once some bootstrap address accepts a TCP connection; raise CliError naming the
    list after `timeout` seconds of trying (refused connections are retried, as a client
    would, since a broker may be starting)."""
    from clients.config import bootstrap_addresses

    addrs = bootstrap_addresses(bootstrap)
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    while True:
        for host, port in addrs:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                with socket.create_connection((host, port), timeout=min(left, 2.0)):
                    return
            except OSError as e:
                last = e
        if time.monotonic() + 0.2 >= deadline:
            reason = f" ({last.strerror or last})" if last is not None else ""
            raise CliError(f"no broker reachable at {bootstrap} within {timeout:g}s{reason}")
        time.sleep(0.2)


def describe_error(e: BaseException) -> str:
    """One line for an exception a tool expects: the broker's message plus its error name."""
    from clients.protocol.errors import KafkaError

    if isinstance(e, KafkaError):
        msg = (e.message or e.name).strip()
        if e.name not in msg:
            msg = f"{msg} ({e.name})"
        return " ".join(msg.split())
    if isinstance(e, OSError) and e.strerror and not str(e).strip():
        return e.strerror
    text = str(e).strip() or type(e).__name__
    if isinstance(e, TimeoutError) and "time" not in text.lower():
        text = f"timed out: {text}"
    return " ".join(text.split())


def _quiet_stdout() -> None:
    # stdout's reader went away (`| head`): point fd 1 at /dev/null so the interpreter's
    # final flush does not complain.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def run_tool(body: Callable[[], int | None], error_prefix: str = "Error: ") -> int:
    """Run a tool body; map expected failures to one stderr line. Returns the exit code."""
    from clients.protocol.errors import KafkaError

    try:
        rc = body()
        sys.stdout.flush()
        return rc or 0
    except CliError as e:
        _print_error(error_prefix + e.message)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except (KafkaError, ConfigError, TimeoutError, ConnectionError, OSError) as e:
        _print_error(error_prefix + describe_error(e))
        return 1
    except Exception as e:  # noqa: BLE001 - a tool must never end in a traceback
        _print_error(f"{error_prefix}unexpected {type(e).__name__}: {describe_error(e)}")
        if os.environ.get("STROM_CLI_DEBUG"):
            traceback.print_exc()
        return 1


def _print_error(line: str) -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _quiet_stdout()
    sys.stderr.write(" ".join(line.split("\n")) + "\n")
    sys.stderr.flush()


def exit_after(seconds: float, error_prefix: str, what: str) -> threading.Timer:
    """A backstop: if the tool is still running after `seconds`, print one line and exit 1
    (a client call that ignores its timeout must not hang a shell script)."""
    def fire() -> None:
        _print_error(f"{error_prefix}timed out after {seconds:g}s {what}")
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
def admin_client(args: argparse.Namespace, error_prefix: str = "Error: ") -> Iterator[Any]:
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
