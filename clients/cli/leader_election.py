"""kafka-leader-election: elect partition leaders (Kafka's LeaderElectionCommand).

    kafka-leader-election --bootstrap-server H:P --election-type preferred|unclean
                          (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)

The JSON file is Kafka's: {"partitions": [{"topic": "foo", "partition": 1}, ...]}. Output and
exit status as Kafka's tool: "Successfully completed leader election (PREFERRED) for
partitions ...", "Valid replica already elected for partitions ...", and one "Error completing
leader election ..." line per failed partition with exit 1.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

if TYPE_CHECKING:
    from clients.types import TopicPartition

ERROR_PREFIX = "Error: "
ELECTION_TYPES = ("preferred", "unclean")


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-leader-election",
                   description="This tool attempts to elect a new leader for a set of topic "
                               "partitions. The type of elections supported are preferred "
                               "replicas and unclean replicas.")
    add_connection_args(p, bootstrap_required=False)
    p.add_argument("--admin.config", dest="admin_config", metavar="FILE",
                   help="(DEPRECATED) Configuration properties files to pass to the admin "
                        "client. Use --command-config instead.")
    p.add_argument("--election-type", type=str.lower, choices=ELECTION_TYPES,
                   help='REQUIRED: "preferred" elects the preferred replica where it does not '
                        'lead; "unclean" elects a leader only where there is none.')
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="Perform election on all of the eligible topic partitions.")
    p.add_argument("--topic", help="Name of topic for which to perform an election.")
    p.add_argument("--partition", type=int, help="Partition id (REQUIRED with --topic).")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='The JSON file with the partitions to elect: '
                        '{"partitions": [{"topic": "foo", "partition": 1}]}')
    return p


def validate(args: argparse.Namespace) -> None:
    """Kafka's LeaderElectionCommandOptions.validate, with its messages."""
    missing = [flag for flag, value in (("--bootstrap-server", args.bootstrap_server),
                                        ("--election-type", args.election_type)) if not value]
    if missing:
        raise CliError(f"Missing required option(s): {', '.join(missing)}")
    chosen = sum(1 for v in (args.topic, args.all_topic_partitions, args.path_to_json_file) if v)
    if chosen != 1:
        raise CliError("One and only one of the following options is required: "
                       "--topic, --all-topic-partitions, --path-to-json-file")
    if args.topic and args.partition is None:
        raise CliError("Missing required option(s): --partition")
    if args.partition is not None and not args.topic:
        raise CliError("Option --partition is only allowed if --topic is used")


def parse_election_file(text: str, path: str) -> list[TopicPartition]:
    """Kafka's replica election JSON: its partitions, each once."""
    from clients.types import TopicPartition

    try:
        data = json.loads(text)
        entries = data["partitions"]
        tps = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{path}: Replica election data is missing or malformed: expected "
                       '{"partitions": [{"topic": "foo", "partition": 1}]}') from None
    duplicates = sorted({tp for tp in tps if tps.count(tp) > 1})
    if duplicates:
        raise CliError("Replica election data contains duplicate partitions: "
                       + ",".join(f"{t}-{p}" for t, p in duplicates))
    return tps


def report(election_type: str, results: dict[TopicPartition, Exception | None], out) -> int:
    """Kafka's three kinds of lines; 1 when any partition failed."""
    from clients.protocol.errors import ElectionNotNeededError

    label = election_type.upper()
    names = {tp: f"{tp.topic}-{tp.partition}" for tp in results}
    ordered = sorted(results, key=lambda tp: (tp.topic, tp.partition))
    succeeded = [names[tp] for tp in ordered if results[tp] is None]
    noop = [names[tp] for tp in ordered if isinstance(results[tp], ElectionNotNeededError)]
    failed = [tp for tp in ordered if results[tp] is not None and names[tp] not in noop]
    if succeeded:
        print(f"Successfully completed leader election ({label}) for partitions {', '.join(succeeded)}", file=out)
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}", file=out)
    for tp in failed:
        e = results[tp]
        print(f"Error completing leader election ({label}) for partition: {names[tp]}: "
              f"{type(e).__name__}: {e}", file=out)
    if failed:
        print(f"{ERROR_PREFIX}{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace, out=None) -> int:
    from clients.types import TopicPartition

    out = out or sys.stdout
    if args.admin_config and not args.config_file:
        print("Option --admin.config has been deprecated and will be removed in a future "
              "version. Use --command-config instead.", file=out)
        args.config_file = args.admin_config
    validate(args)
    partitions: list[TopicPartition] | None = None
    if args.topic:
        partitions = [TopicPartition(args.topic, args.partition)]
    elif args.path_to_json_file:
        try:
            with open(args.path_to_json_file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CliError(f"cannot read {args.path_to_json_file}: {e.strerror or e}") from None
        partitions = parse_election_file(text, args.path_to_json_file)
    from clients.aio.errors import KafkaTimeoutError
    from clients.protocol.errors import ClusterAuthorizationFailedError

    with admin_client(args, ERROR_PREFIX) as admin:
        try:
            results = admin.elect_leaders(args.election_type, partitions)
        except KafkaTimeoutError as e:
            raise CliError(f"Timeout waiting for election results ({e})") from None
        except ClusterAuthorizationFailedError:
            raise CliError("Not authorized to perform leader election") from None
    return report(args.election_type, results, out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
