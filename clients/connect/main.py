"""`connect-standalone.sh` and `connect-distributed.sh`: start a Connect worker.

    bin/connect-standalone.sh config/connect-standalone.properties connector1.properties [c2.json ...]
    bin/connect-distributed.sh config/connect-distributed.properties

The worker serves Connect's REST API (first of `listeners`, default port 8083) and its
Prometheus metrics at `/metrics` there, runs until SIGTERM/SIGINT, then stops its tasks
(committing their offsets) and leaves its group. A bad config is one line naming the file
and the key, exit code 1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any

from clients.command_line import CliError, ToolParser, run_tool
from clients.http_listeners import stop_on_signals
from clients.properties import ConfigError, read_properties

from .runtime.worker_config import WorkerConfig, load_worker_config

__all__ = ["standalone_main", "distributed_main", "run_worker", "read_connector_file"]

log = logging.getLogger("strom.connect")


def read_connector_file(path: str) -> tuple[str, dict[str, str], str | None]:
    """A connector config from a .properties file or a JSON file (the REST API's body
    `{"name": ..., "config": {...}}` or a flat map): (name, config, initial_state)."""
    p = Path(path)
    if p.suffix == ".json":
        try:
            body = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise CliError(f"{path}: not a readable JSON connector config: {e}") from None
        if isinstance(body, dict) and isinstance(body.get("config"), dict):
            config = {str(k): str(v) for k, v in body["config"].items()}
            name = body.get("name") or config.get("name")
            state = body.get("initial_state")
        elif isinstance(body, dict):
            config = {str(k): str(v) for k, v in body.items()}
            name, state = config.get("name"), None
        else:
            raise CliError(f"{path}: a connector config must be a JSON object")
    else:
        config = {k: prop.value for k, prop in read_properties(p).items()}
        name, state = config.get("name"), None
    if not name:
        raise CliError(f"{path}: the connector config has no name")
    return str(name), config, state


def _advertised(config: WorkerConfig, bound_port: int) -> tuple[str, str]:
    """(worker id host:port, REST url) as other workers reach this one."""
    host, _ = config.rest_listener()
    host = config.get("rest.advertised.host.name") or host or socket.gethostname()
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    port = config.get("rest.advertised.port") or bound_port
    return f"{host}:{port}", f"http://{host}:{port}"


async def run_worker(config: WorkerConfig, connector_files: list[str] = (),  # type: ignore[assignment]
                     stop: asyncio.Event | None = None,
                     started: Any = None) -> None:
    """Run one worker until `stop` is set (or a signal arrives). `started(url)` is called
    once the REST API and the herder are up."""
    from clients.aio import STROM_VERSION

    from .metrics import ConnectMetrics
    from .plugins import PluginRegistry
    from .rest.server import ConnectRestServer

    stop = stop or asyncio.Event()
    stop_on_signals(asyncio.get_running_loop(), stop)
    plugins = PluginRegistry(list(config["plugin.path"]))
    herder: Any
    if config.mode == "standalone":
        from .runtime.standalone import StandaloneHerder
        herder = StandaloneHerder(config, plugins, "")
    else:
        from .runtime.distributed import DistributedHerder
        herder = DistributedHerder(config, plugins, "")
    metrics = ConnectMetrics(herder)
    host, port = config.rest_listener()
    listener = f"http://{host or '0.0.0.0'}:{port}"
    rest = ConnectRestServer(herder, [listener], None, STROM_VERSION, "strom",
                             extra_routes=metrics.routes() + getattr(herder, "internal_routes", lambda: [])())
    rest.ready = False
    await rest.start()
    worker_id, url = _advertised(config, rest.port)
    herder.worker_id = worker_id
    herder.worker.worker_id = worker_id
    if hasattr(herder, "rest_url"):
        herder.rest_url = url
    log.info("Connect worker %s (%s) listening on %s", worker_id, config.mode, listener)
    try:
        await herder.start()
        for path in connector_files:
            name, cfg, state = read_connector_file(path)
            created, _ = await herder.put_connector_config(name, cfg, allow_replace=False,
                                                           initial_state=state)
            log.info("connector %s %s from %s", name, "created" if created else "updated", path)
        rest.ready = True
        if started is not None:
            started(url)
        await stop.wait()
    finally:
        log.info("Connect worker %s stopping", worker_id)
        await herder.stop()
        await rest.stop()


def _parser(mode: str) -> ToolParser:
    prog = f"connect-{mode}.sh"
    p = ToolParser(prog=prog, description=f"Start a Kafka Connect worker in {mode} mode.")
    p.add_argument("worker_config", help=f"the worker's properties (config/connect-{mode}.properties)")
    if mode == "standalone":
        p.add_argument("connectors", nargs="*",
                       help="connector configs (.properties, or .json as the REST API's body)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a worker config key")
    p.add_argument("-daemon", action="store_true", help=argparse.SUPPRESS)
    return p


def _main(mode: str, argv: list[str] | None) -> int:
    args = _parser(mode).parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")

    def body() -> int:
        try:
            config = load_worker_config(mode, args.worker_config)
            for item in args.override:
                key, sep, value = item.partition("=")
                if not sep:
                    raise CliError(f"--override {item}: expected KEY=VALUE")
                config = load_worker_config_with(config, key, value)
        except ConfigError as e:
            raise CliError(str(e)) from None
        except OSError as e:
            raise CliError(f"{args.worker_config}: {e.strerror or e}") from None
        asyncio.run(run_worker(config, getattr(args, "connectors", [])))
        return 0
    return run_tool(body)


def load_worker_config_with(config: WorkerConfig, key: str, value: str) -> WorkerConfig:
    from .runtime.worker_config import parse_worker_config
    from .config_def import ConfigException
    raw = {**config.raw, key: value}
    try:
        return parse_worker_config(config.mode, raw, config.source)
    except ConfigException as e:
        raise ConfigError(f"--override: {e}", key) from None


def standalone_main(argv: list[str] | None = None) -> int:
    return _main("standalone", argv)


def distributed_main(argv: list[str] | None = None) -> int:
    return _main("distributed", argv)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("standalone", "distributed"):
        sys.stderr.write("usage: python -m clients.connect.main standalone|distributed ...\n")
        sys.exit(2)
    sys.exit(_main(mode, sys.argv[2:]))
