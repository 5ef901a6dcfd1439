"""kafka-topics: create, list, describe, alter (partition count) and delete topics.

Flags and output follow Kafka's TopicCommand: `--topic` is a regular expression (matched
against the whole name) except with --create; --describe prints

    Topic: t\tTopicId: ...\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: k=v,...
    \tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0

Errors are one line: `Error while executing topic command : <reason>`, exit 1.
"""
from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .common import (CliError, ToolParser, add_connection_args, admin_client, parse_assignment,
                     run_tool)

if TYPE_CHECKING:
    from clients.admin import AdminClient
    from clients.aio.admin import ConfigEntry, TopicDescription

ERROR_PREFIX = "Error while executing topic command : "
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-topics", description="Create, delete, describe, or change a topic.")
    add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    for flag, text in (("--create", "Create a new topic."), ("--list", "List all available topics."),
                       ("--describe", "List details for the given topics."),
                       ("--alter", "Alter the number of partitions of a topic."),
                       ("--delete", "Delete a topic.")):
        actions.add_argument(flag, action="store_true", help=text)
    p.add_argument("--topic", help="The topic to create, alter, describe or delete. A regular "
                   "expression except with --create.")
    p.add_argument("--partitions", type=int, help="The number of partitions for the topic "
                   "(--create; with --alter, the new, larger count).")
    p.add_argument("--replication-factor", type=int, help="The replication factor of each partition.")
    p.add_argument("--replica-assignment", metavar="B0:B1,B0:B1,...",
                   help="Manual partition-to-broker assignment for --create (partition order).")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="A topic configuration override for --create (repeatable).")
    p.add_argument("--if-not-exists", action="store_true",
                   help="With --create: only create the topic if it does not exist.")
    p.add_argument("--if-exists", action="store_true",
                   help="With --alter, --delete, --describe: only act if the topic exists.")
    p.add_argument("--exclude-internal", action="store_true",
                   help="Leave internal topics out of --list and --describe.")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="With --describe: only partitions whose ISR is smaller than their replicas.")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="With --describe: only partitions without a leader.")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="With --describe: only topics with config overrides (no partition lines).")
    return p


def check_args(args: argparse.Namespace) -> None:
    """Kafka's option-combination rules, as one-line CliErrors (exit 1)."""
    if (args.create or args.alter or args.delete) and not args.topic:
        raise CliError("--topic is required with --create, --alter and --delete")
    if args.create:
        if args.replica_assignment and (args.partitions is not None or
                                        args.replication_factor is not None):
            raise CliError("--replica-assignment can't be used with --partitions or --replication-factor")
        if args.if_exists:
            raise CliError("--if-exists can't be used with --create")
    else:
        for flag, given in (("--replication-factor", args.replication_factor is not None),
                            ("--config", bool(args.config)), ("--if-not-exists", args.if_not_exists),
                            ("--replica-assignment", bool(args.replica_assignment))):
            if given:
                raise CliError(f"{flag} can only be used with --create")
    if args.alter and args.partitions is None:
        raise CliError("--alter needs --partitions (change configs with kafka-configs)")
    if args.partitions is not None and not (args.create or args.alter):
        raise CliError("--partitions can only be used with --create or --alter")
    if args.partitions is not None and args.partitions < 1:
        raise CliError("The partitions must be greater than 0")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CliError("The replication factor must be greater than 0")


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """`0:1,1:2` -> {0: [0, 1], 1: [1, 2]} (one comma-separated entry per partition)."""
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise CliError(f"invalid --replica-assignment entry '{part}': expected broker ids "
                           f"separated by ':'") from None
        if len(set(brokers)) != len(brokers):
            raise CliError(f"Partition replica lists may not contain duplicate entries: {part}")
        out[i] = brokers
    return out


def matching(names: Iterable[str], pattern: str | None) -> list[str]:
    """Topic names matching `pattern` as a whole (a plain name matches itself), sorted."""
    names = sorted(names)
    if pattern is None:
        return names
    try:
        rx = re.compile(pattern)
    except re.error:
        return [n for n in names if n == pattern]
    return [n for n in names if n == pattern or rx.fullmatch(n)]


def format_topic_id(topic_id: Any) -> str:
    """Kafka prints a topic id as its 16 bytes in unpadded URL-safe base64."""
    if topic_id is None:
        return ""
    if isinstance(topic_id, uuid.UUID):
        topic_id = topic_id.bytes
    if isinstance(topic_id, (bytes, bytearray)) and len(topic_id) == 16:
        return base64.urlsafe_b64encode(bytes(topic_id)).rstrip(b"=").decode()
    return str(topic_id)


def _ids(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def describe_lines(desc: TopicDescription, configs: dict[str, str], *, under_replicated: bool = False,
                   unavailable: bool = False, overrides_only: bool = False) -> list[str]:
    """Kafka's --describe lines for one topic (`desc` a TopicDescription)."""
    parts = sorted(desc.partitions, key=lambda p: p.partition)
    rf = len(parts[0].replicas) if parts else 0
    cfg = ",".join(f"{k}={v}" for k, v in configs.items())
    head = (f"Topic: {desc.name}\tTopicId: {format_topic_id(getattr(desc, 'topic_id', None))}\t"
            f"PartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: {cfg}")
    if overrides_only:
        return [head] if configs else []
    lines = [] if (under_replicated or unavailable) else [head]
    for p in parts:
        leader = p.leader if p.leader is not None and p.leader >= 0 else "none"
        if under_replicated and len(p.isr) >= len(p.replicas):
            continue
        if unavailable and leader != "none":
            continue
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
    return lines


def non_default_configs(entries: dict[str, ConfigEntry]) -> dict[str, str]:
    """Configs Kafka lists in --describe: every entry that is not a default, sensitive
    values hidden."""
    out = {}
    for name, e in sorted(entries.items()):
        if getattr(e, "is_default", False):
            continue
        out[name] = "null" if getattr(e, "sensitive", False) else ("" if e.value is None else e.value)
    return out


def _topic_names(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    names = matching(admin.list_topics(include_internal=not args.exclude_internal), args.topic)
    if args.exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if args.topic is not None and not names and not args.if_exists:
        raise CliError(f"Topic '{args.topic}' does not exist as expected")
    return names


def run(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    check_args(args)
    with admin_client(args, ERROR_PREFIX) as admin:
        if args.create:
            return _create(admin, args, out)
        if args.list:
            for name in _topic_names(admin, args):
                print(name, file=out)
            return 0
        names = _topic_names(admin, args)
        if args.describe:
            _describe(admin, names, args, out)
        elif args.alter:
            if names:
                admin.create_partitions({n: args.partitions for n in names})
        elif args.delete:
            internal = [n for n in names if n in INTERNAL_TOPICS]
            if internal:
                raise CliError(f"Topic {internal[0]} is a kafka internal topic and is not "
                               f"allowed to be marked for deletion.")
            if names:
                admin.delete_topics(names)
    return 0


def _create(admin: AdminClient, args: argparse.Namespace, out) -> int:
    from clients.protocol.errors import KafkaError
    from clients.types import NewTopic

    configs = dict(parse_assignment(c, "--config") for c in args.config)
    if args.replica_assignment:
        topic = NewTopic(args.topic, -1, -1, configs, parse_replica_assignment(args.replica_assignment))
    else:
        topic = NewTopic(args.topic, -1 if args.partitions is None else args.partitions,
                         -1 if args.replication_factor is None else args.replication_factor, configs)
    try:
        admin.create_topics([topic])
    except KafkaError as e:
        if e.name == "TOPIC_ALREADY_EXISTS":
            if args.if_not_exists:
                return 0
            raise CliError(f"Topic '{args.topic}' already exists.") from None
        raise
    print(f"Created topic {args.topic}.", file=out)
    return 0


def _describe(admin: AdminClient, names: list[str], args: argparse.Namespace, out) -> None:
    if not names:
        return
    descs = admin.describe_topics(names)
    for name in names:
        desc = descs.get(name)
        if desc is None:
            continue
        configs = non_default_configs(admin.describe_configs("topic", name))
        for line in describe_lines(desc, configs, under_replicated=args.under_replicated_partitions,
                                   unavailable=args.unavailable_partitions,
                                   overrides_only=args.topics_with_overrides):
            print(line, file=out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
