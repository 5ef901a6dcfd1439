"""Running a command-line program on the clients: Kafka's usage-error style, one line and
an exit code for each expected failure, and a quick check that a cluster is reachable.
strom's console tools (`clients.cli`) and the Spark ETL jobs are built on it.

- `ToolParser`: argparse with Kafka's flag style; a usage error is ONE line on stderr, exit 2.
- `run_tool`: runs a program's body and turns every expected error (bad input, broker error
  codes, connection failures, timeouts) into one `Error: ...` line and exit code 1, never a
  traceback (set STROM_CLI_DEBUG=1 to get one for an unexpected exception).
- `CliError`: an expected failure with its message and exit code.
- `wait_reachable`: fail fast, with one line, when no bootstrap broker accepts a connection:
  within a second in Kafka's words when every address refuses, else after a timeout
  (instead of each client's own, much longer, retry loop).
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
import traceback
from typing import Callable, NoReturn

from clients.properties import ConfigError

__all__ = ["CliError", "ToolParser", "run_tool", "describe_error", "print_error",
           "wait_reachable"]


class CliError(Exception):
    """An expected failure: printed as one line, exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ToolParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (`prog: error: ... (see --help)`), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# How long connections that are all refused are retried (a broker may be binding its port)
# before a tool gives up: well inside the second Kafka users expect a refusal to take.
REFUSED_GRACE = 0.2


def _node(index: int, host: str, port: int) -> str:
    """Kafka's name of the index-th bootstrap address: `node -1 (host/ip:port)`."""
    try:
        ip = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        ip = host
    return f"node {-1 - index} ({host}/{ip}:{port})"


def wait_reachable(bootstrap: str, timeout: float) -> None:
    """Return once some bootstrap address accepts a TCP connection. CliError when every
    address refused the connection for REFUSED_GRACE seconds, in Kafka's words ("Connection to
    node -1 (...) could not be established. Broker may not be available."); naming the list
    after `timeout` when they did not answer at all."""
    from clients.config import bootstrap_addresses

    addrs = bootstrap_addresses(bootstrap)
    start = time.monotonic()
    deadline = start + timeout
    last: OSError | None = None
    while True:
        refused = 0
        for host, port in addrs:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                with socket.create_connection((host, port), timeout=min(left, 2.0)):
                    return
            except ConnectionRefusedError as e:
                refused += 1
                last = e
            except OSError as e:
                last = e
        now = time.monotonic()
        if refused == len(addrs) and now - start >= min(REFUSED_GRACE, timeout):
            nodes = " and ".join(_node(i, h, p) for i, (h, p) in enumerate(addrs))
            raise CliError(f"Connection to {nodes} could not be established. "
                           f"Broker may not be available.")
        if now + 0.1 >= deadline:
            reason = f" ({last.strerror or last})" if last is not None else ""
            raise CliError(f"no broker reachable at {bootstrap} within {timeout:g}s{reason}")
        time.sleep(0.1)


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
        print_error(error_prefix + e.message)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except (KafkaError, ConfigError, TimeoutError, ConnectionError, OSError) as e:
        print_error(error_prefix + describe_error(e))
        return 1
    except Exception as e:  # noqa: BLE001 - a tool must never end in a traceback
        print_error(f"{error_prefix}unexpected {type(e).__name__}: {describe_error(e)}")
        if os.environ.get("STROM_CLI_DEBUG"):
            traceback.print_exc()
        return 1


def print_error(line: str) -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        _quiet_stdout()
    sys.stderr.write(" ".join(line.split("\n")) + "\n")
    sys.stderr.flush()
