"""The broker's start-up failures as ONE line each: what went wrong and what to do about it,
instead of a Python traceback (`broker.main.main` prints it and exits 1).

Covered: a listener or metrics port already in use, a log dir that cannot be used (not a
directory, not writable, or locked by another broker), ZooKeeper not answering within
zookeeper.connection.timeout.ms, and a broker.id another live broker holds. Anything else is
a bug and keeps its traceback. `load_config` makes the warning for a typo'd key stand out
(one WARN line per key, before the start-up INFO lines).
"""
from __future__ import annotations

import errno
import logging
import re
import sys
from typing import Collection, Mapping

from clients.properties import Property, read_properties
from zkcoord.zk_errors import BrokerIdInUseError, ZkNotConnectedError

from .config import BrokerConfig
from .log.dir_lock import LogDirLockedError, LogDirUnusableError

__all__ = ["describe_startup_failure", "unknown_key_warnings", "load_config"]

# asyncio's bind error: "[Errno 98] error while attempting to bind on address ('h', p): ..."
_BIND_ADDRESS = re.compile(r"\('([^']*)', (\d+)")


def describe_startup_failure(e: BaseException, config: BrokerConfig) -> str | None:
    """One line for an expected start-up failure of a broker with `config`; None for any
    other exception (a bug: let its traceback show)."""
    source = str(config.path) if config.path is not None else "the broker's config"
    if isinstance(e, LogDirLockedError):
        return (f"{e} Stop the broker that uses it (bin/stop-cluster.sh, or "
                f"bin/kafka-server-stop.sh), or give this broker its own log.dirs in {source}.")
    if isinstance(e, LogDirUnusableError):
        return (f"Log directory {e.log_dir} is not usable: {e.reason}. Each entry of log.dirs "
                f"in {source} must be a directory this user can write (or create).")
    if isinstance(e, ZkNotConnectedError):
        seconds = config.zookeeper_connection_timeout_ms / 1000
        return (f"Timed out waiting for connection to ZooKeeper at {config.zookeeper_connect} "
                f"after {seconds:g} s (zookeeper.connection.timeout.ms). Is ZooKeeper running? "
                f"Start it (bin/start-cluster.sh starts one), or fix zookeeper.connect in {source}.")
    if isinstance(e, BrokerIdInUseError):
        return str(e)
    if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
        found = _BIND_ADDRESS.search(str(e))
        where = f"{found.group(1)}:{found.group(2)}" if found else "a configured port"
        return (f"Socket server failed to bind to {where}: Address already in use. Another "
                f"process listens there (another broker?): stop it, or change listeners (or "
                f"metrics.port) in {source}.")
    return None


def unknown_key_warnings(config: BrokerConfig, file_props: Mapping[str, Property],
                         overrides: Mapping[str, str]) -> list[str]:
    """Kafka's warning for each key the config does not know, naming where it was set."""
    lines = []
    for key in sorted(config.unknown):
        if key in overrides:
            where = "--override"
        elif key in file_props:
            where = f"{config.path}:{file_props[key].line}"
        else:
            where = str(config.path)
        lines.append(f"WARN The configuration '{key}' was supplied but isn't a known config. "
                     f"({where}; check its spelling: it is ignored)")
    return lines


def load_config(path: str, overrides: Mapping[str, str]) -> BrokerConfig:
    """The config, with a typo'd key reported as one WARN line each on stderr (naming the file
    and line) before anything else is logged, instead of among the start-up INFO lines."""
    config_log = logging.getLogger("broker.config")
    capture = _Capture(config_log)
    try:
        config = BrokerConfig.load(path, overrides)
    except BaseException:
        capture.replay(skip=())
        raise
    try:
        file_props = read_properties(path)
    except OSError:
        file_props = {}
    for line in unknown_key_warnings(config, file_props, overrides):
        print(line, file=sys.stderr, flush=True)
    capture.replay(skip=config.unknown)   # minus its own unknown-key warnings
    return config


class _Capture(logging.Handler):
    """Holds what `logger` logs (instead of passing it on) until `replay`."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.logger = logger
        logger.addHandler(self)
        logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def replay(self, skip: Collection[str]) -> None:
        """Stop holding, and log the records held, except those naming a key of `skip`
        (loading.py passes the key as an argument of its warning)."""
        self.logger.removeHandler(self)
        self.logger.propagate = True
        for record in self.records:
            if not any(isinstance(arg, str) and arg in skip for arg in record.args or ()):
                self.logger.handle(record)
