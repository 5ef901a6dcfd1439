"""kafka-consumer-groups: list, describe and delete consumer groups; reset or delete their offsets.

    kafka-consumer-groups --bootstrap-server H:P --list [--state [STATE,...]]
    kafka-consumer-groups ... --describe (--group G... | --all-groups) [--members [--verbose] | --state]
    kafka-consumer-groups ... --reset-offsets (--group G | --all-groups) (--topic T[:P,P] | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
         | --to-datetime YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm] | --by-duration PnDTnHnMnS)
        [--dry-run (default) | --execute] [--export]
    kafka-consumer-groups ... --delete (--group G... | --all-groups)
    kafka-consumer-groups ... --delete-offsets --group G --topic T[:P,P]...

Output and messages follow Kafka's ConsumerGroupCommand (column tables with a leading blank
line; "Consumer group 'g' has no active members." on stderr). Offsets can only be reset while
the group has no members; a reset target is clamped to [log start, log end], as Kafka does.
Errors are one `Error: ...` line, exit 1; --delete-offsets prints its per-partition table even
then (Kafka exits 0 there; strom exits 1 when anything was refused).
"""
from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

if TYPE_CHECKING:
    from clients.admin import AdminClient
    from clients.protocol.errors import KafkaError
    from clients.aio.admin import GroupDescription, MemberDescription
    from clients.types import OffsetAndMetadata, TopicPartition

ERROR_PREFIX = "Error: "
INACTIVE_STATES = ("Empty", "Dead", "")
RESET_SPECS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by", "to_datetime",
               "by_duration")


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-consumer-groups",
                   description="List, describe and delete consumer groups; reset their offsets.")
    add_connection_args(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="List all consumer groups.")
    actions.add_argument("--describe", action="store_true", help="Describe consumer group(s).")
    actions.add_argument("--delete", action="store_true", help="Delete consumer group(s).")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="Reset the offsets of a group (dry run unless --execute).")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="Delete the committed offsets of a group's topics (--topic); "
                              "refused for topics its active members subscribe to.")
    p.add_argument("--group", action="append", default=[], help="The consumer group (repeatable).")
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                   help="With --reset-offsets or --delete-offsets: a topic, optionally with "
                        "partitions (repeatable).")
    p.add_argument("--all-topics", action="store_true",
                   help="With --reset-offsets: every topic the group has committed offsets for.")
    p.add_argument("--members", action="store_true", help="With --describe: list members.")
    p.add_argument("--verbose", action="store_true", help="With --describe --members: assignments.")
    p.add_argument("--offsets", action="store_true", help="With --describe: offsets (the default).")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="With --describe: the group's state; with --list: show states, or only "
                        "groups in these comma-separated states.")
    spec = p.add_mutually_exclusive_group()
    spec.add_argument("--to-earliest", action="store_true", help="Reset to the earliest offset.")
    spec.add_argument("--to-latest", action="store_true", help="Reset to the latest offset.")
    spec.add_argument("--to-current", action="store_true", help="Reset to the current offset.")
    spec.add_argument("--to-offset", type=int, metavar="N", help="Reset to offset N.")
    spec.add_argument("--shift-by", type=int, metavar="N",
                      help="Move the current offset by N (negative: back).")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                      help="Reset to the first offset at or after this time (local time unless "
                           "the value ends in Z or +hh:mm).")
    spec.add_argument("--by-duration", metavar="PnDTnHnMnS",
                      help="Reset to the first offset at or after now minus this ISO-8601 duration.")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true",
                          help="Only show the result of the reset (the default).")
    run_mode.add_argument("--execute", action="store_true", help="Execute the reset.")
    p.add_argument("--export", action="store_true", help="With --reset-offsets: CSV output.")
    p.add_argument("--timeout", type=int, metavar="MS",
                   help="Kafka's timeout option (ms); an alternative to --command-timeout.")
    return p


def check_args(args: argparse.Namespace) -> None:
    if args.timeout is not None and args.command_timeout is None:
        args.command_timeout = args.timeout / 1000.0
    needs_group = args.describe or args.delete or args.reset_offsets
    if needs_group and not args.group and not args.all_groups:
        raise CliError("--group or --all-groups is required with --describe, --delete and --reset-offsets")
    if args.group and args.all_groups:
        raise CliError("--group and --all-groups can't be used together")
    if args.delete_offsets:
        if len(args.group) != 1 or not args.topic:
            raise CliError("Option [delete-offsets] takes the following options: "
                           "[bootstrap-server], [group], [topic]")
        if args.all_groups or args.all_topics or reset_spec(args) is not None:
            raise CliError("--delete-offsets takes one --group and --topic only")
    elif args.reset_offsets:
        if len(args.group) > 1:
            raise CliError("--reset-offsets takes one --group (or --all-groups)")
        if not args.topic and not args.all_topics:
            raise CliError("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.topic and args.all_topics:
            raise CliError("--topic and --all-topics can't be used together")
        if reset_spec(args) is None:
            raise CliError("One of the reset specifications should be defined: --to-earliest, "
                           "--to-latest, --to-current, --to-offset, --shift-by, --to-datetime, "
                           "--by-duration.")
    else:
        for flag in ("execute", "dry_run", "export", "all_topics", "to_earliest", "to_latest",
                     "to_current"):
            if getattr(args, flag):
                raise CliError(f"--{flag.replace('_', '-')} can only be used with --reset-offsets")
        if args.topic:
            raise CliError("--topic can only be used with --reset-offsets")
        if reset_spec(args) is not None:
            raise CliError("reset specifications can only be used with --reset-offsets")
    if args.describe and sum(bool(x) for x in (args.members, args.offsets, args.state is not None)) > 1:
        raise CliError("--members, --offsets and --state can't be used together")
    if (args.members or args.offsets) and not args.describe:
        raise CliError("--members and --offsets can only be used with --describe")
    if args.state is not None and not (args.describe or args.list):
        raise CliError("--state can only be used with --describe or --list")
    if args.describe and args.state:
        raise CliError("--describe --state takes no value")


def reset_spec(args: argparse.Namespace) -> tuple[str, Any] | None:
    """(kind, argument) of the one reset specification given, or None."""
    for name in RESET_SPECS:
        value = getattr(args, name, None)
        if value is not None and value is not False:
            return name, value
    return None


# ------------------------------------------------------------------ pure helpers

def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    """`t` -> ("t", None); `t:0,2` -> ("t", [0, 2])."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise CliError(f"invalid --topic '{text}'")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise CliError(f"invalid partitions in --topic '{text}': expected t:0,1,2") from None


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime value (yyyy-MM-ddTHH:mm:ss.SSS, optional Z / +hh:mm) -> epoch ms.
    Without a zone the local time zone is used, as Kafka does."""
    if "T" not in text:
        raise CliError(f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:ss.SSS")
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:ss.SSS") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local zone
    return int(round(when.timestamp() * 1000))


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.I)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration PnDTnHnMn.nS (Kafka's --by-duration) -> ms."""
    m = _DURATION.fullmatch(text.strip())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise CliError(f"Error parsing duration '{text}': expected an ISO-8601 duration like PT5M or P1DT2H")
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(round((((d * 24 + h) * 60 + mi) * 60 + s) * 1000))


def clamp(offset: int, earliest: int, latest: int) -> int:
    return max(earliest, min(latest, offset))


def plan_reset(spec: tuple[str, Any], tps: Iterable[TopicPartition],
               committed: dict[TopicPartition, int], earliest: dict[TopicPartition, int],
               latest: dict[TopicPartition, int],
               by_time: dict[TopicPartition, int | None] | None = None
               ) -> dict[TopicPartition, int]:
    """New offsets for `tps` under a reset specification (Kafka's semantics)."""
    kind, value = spec
    out = {}
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        if kind == "to_earliest":
            new = lo
        elif kind == "to_latest":
            new = hi
        elif kind == "to_current":
            new = committed.get(tp, hi)
        elif kind == "to_offset":
            new = clamp(value, lo, hi)
        elif kind == "shift_by":
            if tp not in committed:
                raise CliError(f"Cannot shift offset for partition {tp.topic}-{tp.partition} "
                               f"since there is no current committed offset")
            new = clamp(committed[tp] + value, lo, hi)
        else:  # to_datetime / by_duration: first offset at or after the time, else the end
            found = (by_time or {}).get(tp)
            new = hi if found is None or found < 0 else found
        out[tp] = new
    return out


def format_table(header: Sequence[str], rows: Iterable[Sequence[Any]],
                 min_widths: Sequence[int]) -> list[str]:
    """Kafka's left-aligned columns: each at least its minimum width and as wide as its
    longest value, one space apart; the last column unpadded. A leading blank line."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([w, len(h)] + [len(r[i]) for r in rows]) for i, (h, w) in
              enumerate(zip(header, min_widths))]
    def line(cells: Sequence[str]) -> str:
        return " ".join(c.ljust(widths[i]) if i < len(cells) - 1 else c
                        for i, c in enumerate(cells)).rstrip()
    return [""] + [line(header)] + [line(r) for r in rows]


OFFSETS_HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID")
OFFSETS_WIDTHS = (15, 15, 10, 15, 15, 15, 15, 15, 0)
RESET_HEADER = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
RESET_WIDTHS = (30, 30, 10, 15)


class OffsetRow(NamedTuple):
    group: str
    topic: str
    partition: Any
    current: Any
    log_end: Any
    lag: Any
    consumer_id: str
    host: str
    client_id: str


def offset_rows(group: str, members: Sequence[MemberDescription],
                committed: dict[TopicPartition, OffsetAndMetadata],
                log_end: dict[TopicPartition, int | None]) -> list[OffsetRow]:
    """One row per assigned or committed partition (members without partitions get a row of
    dashes), sorted by topic, partition."""
    rows: list[OffsetRow] = []
    owner: dict[TopicPartition, MemberDescription] = {}
    for m in members:
        assignment = list(getattr(m, "assignment", None) or [])
        for tp in assignment:
            owner[tp] = m
        if not assignment:
            rows.append(OffsetRow(group, "-", "-", "-", "-", "-", m.member_id,
                                  m.client_host, m.client_id))
    for tp in sorted(set(owner) | set(committed), key=lambda tp: (tp.topic, tp.partition)):
        c = committed.get(tp)
        current = c.offset if c is not None else None
        if current is not None and current < 0:
            current = None
        leo = log_end.get(tp)
        lag = leo - current if current is not None and leo is not None else None
        o = owner.get(tp)
        rows.append(OffsetRow(group, tp.topic, tp.partition, _dash(current), _dash(leo), _dash(lag),
                              o.member_id if o else "-", o.client_host if o else "-",
                              o.client_id if o else "-"))
    return rows


def _dash(v: Any) -> Any:
    return "-" if v is None else v


def member_rows(group: str, members: Sequence[MemberDescription],
                verbose: bool) -> list[list[Any]]:
    rows = []
    for m in members:
        assignment = list(getattr(m, "assignment", None) or [])
        row: list[Any] = [group, m.member_id, m.client_host, m.client_id, len(assignment)]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in assignment:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            row.append(",".join(f"{t}({','.join(str(p) for p in sorted(ps))})"
                                for t, ps in sorted(by_topic.items())) or "-")
        rows.append(row)
    return rows


def state_message(group: str, state: str) -> str | None:
    """Kafka's stderr note for a group's state (None for Stable)."""
    if state == "Empty":
        return f"\nConsumer group '{group}' has no active members."
    if state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        return f"\nWarning: Consumer group '{group}' is rebalancing."
    return None


# ------------------------------------------------------------------ actions

def _state(desc: GroupDescription) -> str:
    state = getattr(desc, "state", "") or ""
    return state if isinstance(state, str) else str(getattr(state, "name", state))


def _describe_group(admin: AdminClient, group: str) -> GroupDescription | None:
    """The group's description, or None if it does not exist."""
    from clients.protocol.errors import KafkaError

    try:
        desc = admin.describe_groups([group]).get(group)
    except KafkaError as e:
        if e.name == "GROUP_ID_NOT_FOUND":
            return None
        raise
    if desc is None or _state(desc) == "Dead":
        return None
    return desc


def find_coordinator(args: argparse.Namespace, group: str) -> str:
    """`host:port (id)` of the group's coordinator (FindCoordinator on a short-lived core
    client: the admin client does not expose it)."""
    import asyncio

    from clients.aio.client import KafkaClient
    from clients.config import resolve

    from .common import client_config

    async def find() -> str:
        client = KafkaClient(resolve("admin", client_config(args, "admin")))
        try:
            await client.start()
            node = await client.coordinator(group, 0)
            b = client.cluster.brokers.get(node)
            return f"{b.host}:{b.port} ({node})" if b is not None else f"- ({node})"
        finally:
            await client.close()
    return asyncio.run(find())


def _groups(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return sorted(g.group_id for g in admin.list_groups())
    return list(dict.fromkeys(args.group))


def _offsets_by(admin: AdminClient, tps: Sequence[TopicPartition],
                spec: Any) -> dict[TopicPartition, int | None]:
    if not tps:
        return {}
    res = admin.list_offsets({tp: spec for tp in tps})
    out: dict[TopicPartition, int | None] = {}
    for tp in tps:
        r = res.get(tp)
        out[tp] = None if r is None or r.offset < 0 else r.offset
    return out


def _do_list(admin: AdminClient, args: argparse.Namespace, out) -> int:
    groups = sorted(admin.list_groups(), key=lambda g: g.group_id)
    if args.state is None:
        for g in groups:
            print(g.group_id, file=out)
        return 0
    wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
    rows = [(g.group_id, g.state or "-") for g in groups
            if not wanted or str(g.state or "").lower() in wanted]
    for line in format_table(("GROUP", "STATE"), rows, (15, 0)):
        print(line, file=out)
    return 0


def _do_describe(admin: AdminClient, args: argparse.Namespace, out) -> int:
    from clients.types import TopicPartition

    rc = 0
    for group in _groups(admin, args):
        desc = _describe_group(admin, group)
        if desc is None:
            print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
            rc = 1
            continue
        state, members = _state(desc), list(desc.members)
        if args.state is not None:
            row = [group, find_coordinator(args, group), getattr(desc, "protocol", "") or "", state, len(members)]
            for line in format_table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                      "#MEMBERS"), [row], (25, 25, 20, 15, 0)):
                print(line, file=out)
            continue
        note = state_message(group, state)
        if note:
            print(note, file=sys.stderr)
        if args.members:
            header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            if args.verbose:
                header.append("ASSIGNMENT")
            rows = member_rows(group, members, args.verbose)
            if rows:
                for line in format_table(header, rows, (15, 15, 15, 15, 12, 0)[:len(header)]):
                    print(line, file=out)
            continue
        committed = admin.list_group_offsets(group)
        tps = {TopicPartition(tp.topic, tp.partition) for tp in committed}
        for m in members:
            tps.update(getattr(m, "assignment", None) or [])
        log_end = _offsets_by(admin, sorted(tps), "latest")
        offsets = offset_rows(group, members, committed, log_end)
        if offsets:
            for line in format_table(OFFSETS_HEADER, offsets, OFFSETS_WIDTHS):
                print(line, file=out)
    return rc


def _do_delete(admin: AdminClient, args: argparse.Namespace, out) -> int:
    from clients.protocol.errors import KafkaError

    groups = _groups(admin, args)
    failed = []
    for g in groups:
        try:
            admin.delete_groups([g])
        except KafkaError as e:
            reason = {"GROUP_ID_NOT_FOUND": "The group id does not exist.",
                      "NON_EMPTY_GROUP": "The group is not empty."}.get(e.name, e.message)
            failed.append(f"group '{g}' could not be deleted due to: {e.name}: {reason}")
    ok = [g for g in groups if not any(f"'{g}'" in f for f in failed)]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
    if failed:
        raise CliError("Deletion of some consumer groups failed: " + "; ".join(failed))
    return 0


# What Kafka's ConsumerGroupCommand says of a refusal of the whole group.
_DELETE_OFFSETS_REFUSALS = {
    "INVALID_GROUP_ID": "'{group}' is not valid.",
    "GROUP_ID_NOT_FOUND": "'{group}' does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Access to '{group}' is not authorized.",
    "NON_EMPTY_GROUP": "Deleting offsets of a consumer group '{group}' is forbidden if the "
                       "group is not empty.",
}
DELETE_OFFSETS_HEADER = ("TOPIC", "PARTITION", "STATUS")
DELETE_OFFSETS_WIDTHS = (30, 15, 15)


def _do_delete_offsets(admin: AdminClient, args: argparse.Namespace, out) -> int:
    """Kafka's ConsumerGroupCommand.deleteOffsets: a topic named without partitions means all
    of its partitions; one status row per partition, sorted."""
    from clients.protocol.errors import KafkaError
    from clients.types import TopicPartition

    group = args.group[0]
    results: dict[Any, Exception | None] = {}
    tps: list[TopicPartition] = []
    scopes = [parse_topic_scope(t) for t in args.topic]
    whole = sorted({t for t, parts in scopes if parts is None})
    existing = set(admin.list_topics(include_internal=True)) if whole else set()
    descs = admin.describe_topics([t for t in whole if t in existing]) if whole else {}
    for topic, parts in scopes:
        if parts is not None:
            tps += [TopicPartition(topic, p) for p in parts]
        elif topic in descs:
            tps += [TopicPartition(topic, p.partition) for p in descs[topic].partitions]
        else:
            results[(topic, -1)] = _unknown_topic(topic)
    top: KafkaError | None = None
    try:
        results.update(admin.delete_consumer_group_offsets(group, tps))
    except KafkaError as e:
        top = e
        results.update({tp: e for tp in tps})
    failed = [err for err in results.values() if err is not None]
    if top is not None:
        message = _DELETE_OFFSETS_REFUSALS.get(top.name, f"Encounter some unknown error: {top.name}")
        print(ERROR_PREFIX + message.format(group=group), file=sys.stderr)
    elif failed:
        print(ERROR_PREFIX + "Encounter some partition level error, see the follow-up details:",
              file=sys.stderr)
    else:
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} "
              f"group {group}", file=out)
    rows = []
    for tp, err in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        topic, partition = tp[0], tp[1]
        status = "Successful" if err is None else f"Error: :{getattr(err, 'name', '')}: {err}"
        rows.append((topic, partition if partition >= 0 else "Not Provided", status))
    for line in format_table(DELETE_OFFSETS_HEADER, rows, DELETE_OFFSETS_WIDTHS):
        print(line, file=out)
    return 1 if failed else 0


def _unknown_topic(topic: str) -> KafkaError:
    """The error Kafka's describeTopics gives a topic that does not exist."""
    from clients.protocol.errors import Code, for_code
    return for_code(Code.UNKNOWN_TOPIC_OR_PARTITION)(
        f"This server does not host this topic-partition: {topic}")


def _reset_partitions(admin: AdminClient, args: argparse.Namespace,
                      committed: dict[TopicPartition, OffsetAndMetadata]) -> list[TopicPartition]:
    from clients.types import TopicPartition

    if args.all_topics:
        return sorted(TopicPartition(tp.topic, tp.partition) for tp in committed)
    scopes = [parse_topic_scope(t) for t in args.topic]
    existing = set(admin.list_topics(include_internal=True))
    for topic, _ in scopes:
        if topic not in existing:
            raise CliError(f"Topic '{topic}' does not exist.")
    descs = admin.describe_topics(sorted({t for t, _ in scopes}))
    tps: set[TopicPartition] = set()
    for topic, parts in scopes:
        have = {p.partition for p in descs[topic].partitions}
        if parts is None:
            parts = sorted(have)
        missing = [p for p in parts if p not in have]
        if missing:
            raise CliError(f"Partition {topic}-{missing[0]} does not exist.")
        tps.update(TopicPartition(topic, p) for p in parts)
    return sorted(tps)


def _do_reset(admin: AdminClient, args: argparse.Namespace, out) -> int:
    from clients.types import OffsetAndMetadata

    spec = reset_spec(args)
    assert spec is not None
    plans: list[tuple[str, dict[TopicPartition, int]]] = []
    for group in _groups(admin, args):
        desc = _describe_group(admin, group)
        state = _state(desc) if desc is not None else "Dead"
        if state not in INACTIVE_STATES:
            raise CliError(f"Assignments can only be reset if the group '{group}' is inactive, "
                           f"but the current state is {state}.")
        committed_raw = admin.list_group_offsets(group)
        committed = {tp: o.offset for tp, o in committed_raw.items() if o.offset >= 0}
        tps = _reset_partitions(admin, args, committed_raw)
        earliest = _offsets_by(admin, tps, "earliest")
        latest = _offsets_by(admin, tps, "latest")
        by_time = None
        if spec[0] in ("to_datetime", "by_duration"):
            ts = (parse_datetime_ms(spec[1]) if spec[0] == "to_datetime"
                  else int(time.time() * 1000) - parse_duration_ms(spec[1]))
            by_time = _offsets_by(admin, tps, ts)
        plan = plan_reset(spec, tps, committed, {tp: earliest[tp] or 0 for tp in tps},
                          {tp: latest[tp] or 0 for tp in tps}, by_time)
        if args.execute and plan:
            admin.alter_group_offsets(group, {tp: OffsetAndMetadata(o) for tp, o in plan.items()})
        plans.append((group, plan))
    if not args.dry_run and not args.execute:  # after planning: an error stays one line
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to keep this behaviour without this warning.", file=sys.stderr)
    for group, plan in plans:
        ordered = sorted(plan.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
        if args.export:
            for tp, o in ordered:
                prefix = f"{group}," if len(plans) > 1 else ""
                print(f"{prefix}{tp.topic},{tp.partition},{o}", file=out)
        else:
            rows = [(group, tp.topic, tp.partition, o) for tp, o in ordered]
            for line in format_table(RESET_HEADER, rows, RESET_WIDTHS):
                print(line, file=out)
    return 0


def run(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    check_args(args)
    if args.reset_offsets:  # validate time arguments before connecting
        spec = reset_spec(args)
        if spec and spec[0] == "to_datetime":
            parse_datetime_ms(spec[1])
        elif spec and spec[0] == "by_duration":
            parse_duration_ms(spec[1])
    with admin_client(args, ERROR_PREFIX) as admin:
        if args.list:
            return _do_list(admin, args, out)
        if args.describe:
            return _do_describe(admin, args, out)
        if args.delete:
            return _do_delete(admin, args, out)
        if args.delete_offsets:
            return _do_delete_offsets(admin, args, out)
        return _do_reset(admin, args, out)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
