"""kafka-log-dirs: the log dirs of brokers and the replicas in them (Kafka's LogDirsCommand).

    kafka-log-dirs --bootstrap-server H:P --describe [--broker-list 0,1] [--topic-list t1,t2]

prints Kafka's two lines and its JSON:

    Querying brokers for log directories information
    Received log directory information from brokers 0,1
    {"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/data/a","error":null,
     "partitions":[{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}

`error` is the Java exception class Kafka names (KafkaStorageException for an offline dir),
`offsetLag` how far a future replica (one moving into the dir) is behind the current one.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

if TYPE_CHECKING:
    from clients.aio.log_dir_types import LogDirDescription

ERROR_PREFIX = "Error: "
# What Kafka's tool prints for a dir's error: the exception's Java class.
JAVA_ERRORS = {"KAFKA_STORAGE_ERROR": "org.apache.kafka.common.errors.KafkaStorageException",
               "LOG_DIR_NOT_FOUND": "org.apache.kafka.common.errors.LogDirNotFoundException",
               "CLUSTER_AUTHORIZATION_FAILED":
                   "org.apache.kafka.common.errors.ClusterAuthorizationException"}


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-log-dirs", description="Query the log dirs of brokers.")
    add_connection_args(p)
    p.add_argument("--describe", action="store_true", help="Describe the specified log dirs on the "
                   "specified brokers.")
    p.add_argument("--broker-list", help="The list of brokers to be queried in the form "
                   "\"0,1,2\". All brokers in the cluster will be queried if no broker list is specified.")
    p.add_argument("--topic-list", default="", help="The list of topics to be queried in the form "
                   "\"topic1,topic2,topic3\". All topics will be queried if no topic list is specified.")
    return p


def parse_ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--broker-list {text}: expected broker ids such as 0,1,2") from None


def format_json(by_broker: dict[int, dict[str, LogDirDescription]], topics: set[str]) -> str:
    """Kafka's JSON; with `topics`, only their partitions."""
    brokers = []
    for broker, dirs in sorted(by_broker.items()):
        log_dirs = []
        for path, d in sorted(dirs.items()):
            error = None if d.error is None else JAVA_ERRORS.get(d.error.name, d.error.name)
            partitions = [{"partition": f"{tp.topic}-{tp.partition}", "size": r.size,
                           "offsetLag": r.offset_lag, "isFuture": r.is_future}
                          for tp, r in sorted(d.replicas.items()) if not topics or tp.topic in topics]
            log_dirs.append({"logDir": path, "error": error, "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


def run(args: argparse.Namespace, out: Any = None) -> int:
    out = out or sys.stdout
    if not args.describe:
        raise CliError("Command must include exactly one action: --describe")
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
    with admin_client(args, ERROR_PREFIX) as admin:
        live = [b.node_id for b in admin.describe_cluster().brokers]
        wanted = parse_ids(args.broker_list) if args.broker_list else live
        missing = [b for b in wanted if b not in live]
        if missing:
            raise CliError(f"The given brokers do not exist from --broker-list: "
                           f"{','.join(map(str, missing))}. Current existent brokers: "
                           f"{','.join(map(str, sorted(live)))}")
        print("Querying brokers for log directories information", file=out)
        by_broker = admin.describe_log_dirs(wanted)
        print(f"Received log directory information from brokers {','.join(map(str, wanted))}", file=out)
        print(format_json(by_broker, topics), file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
