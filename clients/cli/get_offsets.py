"""kafka-get-offsets: offsets of topic partitions at a point in time (Kafka's GetOffsetShell).

    kafka-get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,2-4]
                      [--time -1|latest|-2|earliest|-3|max-timestamp|<ms>]

prints `topic:partition:offset` per partition, sorted; the offset is empty when no record has
a timestamp at or after <ms>. With no --topic every (non-internal with
--exclude-internal-topics) topic is listed.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

if TYPE_CHECKING:
    from clients.types import OffsetAndTimestamp, TopicPartition

ERROR_PREFIX = "Error: "
NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-get-offsets", description="Print offsets of topic partitions.")
    add_connection_args(p, bootstrap_required=False)
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead.")
    p.add_argument("--topic", help="The topic to get offsets of (a regular expression); all "
                   "topics when absent.")
    p.add_argument("--partitions", help="Comma-separated partition ids or ranges (0,2-4); "
                   "all partitions when absent.")
    p.add_argument("--time", default="-1",
                   help="-1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp in "
                        "ms: the first offset whose timestamp is at or after it (default -1).")
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="Leave internal topics out when --topic is a pattern or absent.")
    return p


def parse_time(text: str) -> int:
    """-1/-2/-3 or a name for them, or a timestamp (ms)."""
    t = text.strip().lower()
    if t in NAMED_TIMES:
        return NAMED_TIMES[t]
    try:
        value = int(t)
    except ValueError:
        raise CliError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                       f"earliest / -3 or max-timestamp, or a specified long format timestamp") from None
    if value < -3:
        raise CliError(f"unsupported --time {text} (tiered storage offsets are not supported)")
    return value


def parse_partitions(text: str | None) -> set[int] | None:
    """`0,2-4` -> {0, 2, 3, 4}; None means every partition."""
    if text is None:
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                out.update(range(int(lo), int(hi) + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise CliError(f"Invalid partition '{part}' in --partitions {text}") from None
    return out


def list_offsets_spec(time_value: int) -> Any:
    """What AdminClient.list_offsets takes: "earliest", "latest", or a timestamp (-3 passed
    as is: the wire value of max-timestamp)."""
    return {-1: "latest", -2: "earliest"}.get(time_value, time_value)


def format_offsets(tps: list[TopicPartition],
                   results: dict[TopicPartition, OffsetAndTimestamp]) -> list[str]:
    """`topic:partition:offset` lines sorted by topic then partition (offset blank if none)."""
    lines = []
    for tp in sorted(tps, key=lambda tp: (tp.topic, tp.partition)):
        r = results.get(tp)
        offset = r.offset if r is not None else None
        shown = "" if offset is None or offset < 0 else str(offset)
        lines.append(f"{tp.topic}:{tp.partition}:{shown}")
    return lines


def run(args: argparse.Namespace, out=None) -> int:
    from clients.types import TopicPartition

    out = out or sys.stdout
    if args.bootstrap_server is None:
        args.bootstrap_server = args.broker_list
    if not args.bootstrap_server:
        raise CliError("--bootstrap-server is required")
    time_value = parse_time(args.time)
    wanted = parse_partitions(args.partitions)
    with admin_client(args, ERROR_PREFIX) as admin:
        names = admin.list_topics(include_internal=not args.exclude_internal_topics)
        if args.topic is not None:
            try:
                rx = re.compile(args.topic)
                names = [n for n in names if n == args.topic or rx.fullmatch(n)]
            except re.error:
                names = [n for n in names if n == args.topic]
        descs = admin.describe_topics(sorted(names)) if names else {}
        tps = [TopicPartition(name, p.partition) for name, d in descs.items() for p in d.partitions
               if wanted is None or p.partition in wanted]
        if not tps:
            raise CliError("Could not match any topic-partitions with the specified filters")
        spec = list_offsets_spec(time_value)
        results = admin.list_offsets({tp: spec for tp in tps})
        for line in format_offsets(tps, results):
            print(line, file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
