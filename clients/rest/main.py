"""`kafka-rest-start.sh config/kafka-rest.properties`: run the REST proxy until SIGTERM/SIGINT.

A bad config is one line naming the file and the key, exit code 1. Once listening it logs
"REST proxy listening at ..." and, with `--ready-file F`, writes its URL to F (for scripts
that start it in the background).
"""
from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from clients.command_line import CliError, ToolParser, run_tool
from clients.http_listeners import stop_on_signals
from clients.properties import ConfigError
from clients.rest.config import RestProxyConfig

__all__ = ["main", "run_proxy"]

log = logging.getLogger("strom.rest")


async def run_proxy(config: RestProxyConfig, stop: asyncio.Event | None = None,
                    ready_file: str | None = None) -> None:
    """Serve until `stop` is set or a signal arrives; then close the listeners, the
    consumer instances (leaving their groups) and the producers (delivering what they hold)."""
    from clients.rest.server import RestProxyServer

    stop = stop or asyncio.Event()
    stop_on_signals(asyncio.get_running_loop(), stop)
    server = RestProxyServer(config)
    await server.start()
    if ready_file:
        Path(ready_file).write_text(server.url + "\n")
    try:
        await stop.wait()
    finally:
        log.info("REST proxy stopping")
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    p = ToolParser(prog="kafka-rest-start.sh",
                   description="Start the REST proxy (Confluent's v2 and v3 APIs) for a strom cluster.")
    p.add_argument("config", help="the proxy's properties (config/kafka-rest.properties)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key")
    p.add_argument("--ready-file", help="write the proxy's URL to this file once it listens")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")

    def body() -> int:
        from clients.properties import Property, read_properties
        from clients.rest.config import rest_config_from
        try:
            props = read_properties(args.config)
            for item in args.override:
                key, sep, value = item.partition("=")
                if not sep:
                    raise CliError(f"--override {item}: expected KEY=VALUE")
                props[key.strip()] = Property(value, 0)
            config = rest_config_from(props, args.config)
        except ConfigError as e:
            raise CliError(str(e)) from None
        except OSError as e:
            raise CliError(f"{args.config}: {e.strerror or e}") from None
        try:
            asyncio.run(run_proxy(config, ready_file=args.ready_file))
        except OSError as e:        # a listener that cannot bind
            raise CliError(f"cannot listen on {', '.join(config.listeners)}: {e.strerror or e}") from None
        return 0
    return run_tool(body)


if __name__ == "__main__":
    sys.exit(main())
