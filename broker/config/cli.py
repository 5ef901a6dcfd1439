"""``python -m broker.config FILE [--override k=v]``: print a broker's effective config, where
each value came from, and the topic defaults it gives (docs/OPERATIONS.md)."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Iterable, Sequence, TextIO

from clients.properties import ConfigError

from .broker_config import BrokerConfig
from .broker_keys import BROKER_CONFIGS
from .value_types import to_config_string


def _print_table(rows: Iterable[tuple[str, str, str]], out: TextIO) -> None:
    rows = list(rows)
    w0 = max(len(r[0]) for r in rows)
    w1 = min(max(len(r[1]) for r in rows), 32)
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:<{w1}}  {c}".rstrip(), file=out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.config",
                                 description="Print a broker's effective configuration.")
    ap.add_argument("config", help="server.properties file")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="override a property of the file (repeatable)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--override {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        overrides[key.strip()] = value
    try:
        cfg = BrokerConfig.load(args.config, overrides)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    out = sys.stdout
    print(f"# effective broker config of {args.config}", file=out)
    print(f"# broker id {cfg.broker_id}, "
          f"{'standalone' if cfg.standalone else 'ZooKeeper ' + str(cfg.zookeeper_connect)}",
          file=out)
    print(f"# binds      {', '.join(map(str, cfg.listeners))}", file=out)
    print(f"# advertises {', '.join(map(str, cfg.advertised_listeners))}", file=out)
    print(f"# log dirs   {', '.join(cfg.log_dirs)}", file=out)
    rows = []
    for spec in sorted(BROKER_CONFIGS, key=lambda k: k.name):
        value = cfg.get(spec.name)
        text = "null" if value is None else (
            "[hidden]" if spec.is_sensitive else to_config_string(spec.type, value) or '""')
        rows.append((spec.name, text, cfg.where(spec.name) or "default"))
    _print_table(rows, out)
    print("\n# topic defaults on this broker", file=out)
    _print_table(((k, v, "") for k, v in sorted(cfg.topic_defaults().items())), out)
    if cfg.unknown:
        print(f"\n# unknown keys (ignored): {', '.join(sorted(cfg.unknown))}", file=out)
    return 0
