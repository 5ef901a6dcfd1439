"""kafka-reassign-partitions: move partition replicas between brokers and log dirs (Kafka's
ReassignPartitionsCommand), with Kafka's options, JSON and output.

    kafka-reassign-partitions --bootstrap-server H:P
        --generate --topics-to-move-json-file F --broker-list 0,1,2 [--disable-rack-aware]
        --execute  --reassignment-json-file F [--throttle B/s] [--replica-alter-log-dirs-throttle B/s]
                   [--additional] [--timeout MS]
        --verify   --reassignment-json-file F [--preserve-throttles]
        --cancel   --reassignment-json-file F [--preserve-throttles] [--timeout MS]
        --list

The reassignment JSON is Kafka's: {"version":1,"partitions":[{"topic":"t","partition":0,
"replicas":[1,2,3],"log_dirs":["any","any","any"]}]} ("log_dirs" optional, an absolute path
moves that replica to that dir of its broker); --generate reads {"version":1,"topics":
[{"topic":"t"}]} and proposes a plan with Kafka's (rack-aware) placement over --broker-list.

--execute with --throttle limits the replication the move causes as Kafka's tool does: the
brokers involved get `leader.replication.throttled.rate` and `follower.replication.throttled.rate`,
each moving topic `leader.replication.throttled.replicas` (its current replicas, which send)
and `follower.replication.throttled.replicas` (the replicas being added, which fetch). --verify
(or --cancel) clears them once nothing moves any more, unless --preserve-throttles.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, TextIO

from clients.types import TopicPartition

from .common import CliError, ToolParser, add_connection_args, admin_client, run_tool

if TYPE_CHECKING:
    from clients.admin import AdminClient
    from clients.aio.log_dir_types import TopicPartitionReplica
    from clients.aio.reassignment import PartitionReassignment

ERROR_PREFIX = "Error: "
ANY_LOG_DIR = "any"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# Options each action takes besides itself and --bootstrap-server / --command-config
# (Kafka's validateAndParseArgs); the first list is required.
ACTION_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "generate": (("topics-to-move-json-file", "broker-list"), ("disable-rack-aware",)),
    "execute": (("reassignment-json-file",),
                ("additional", "throttle", "replica-alter-log-dirs-throttle", "timeout")),
    "verify": (("reassignment-json-file",), ("preserve-throttles",)),
    "cancel": (("reassignment-json-file",), ("preserve-throttles", "timeout")),
    "list": ((), ()),
}
# The tool's own options, in Kafka's order (--bootstrap-server, --command-config and
# --command-timeout go with every action).
OPTIONS = (*ACTIONS, "reassignment-json-file", "topics-to-move-json-file", "broker-list",
           "disable-rack-aware", "throttle", "replica-alter-log-dirs-throttle", "timeout",
           "additional", "preserve-throttles")

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

CANNOT_EXECUTE_WHILE_MOVING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment.")
RUN_VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment "
                      "completes, to ensure the throttle is removed.")

Assignment = dict[TopicPartition, list[int]]


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-reassign-partitions",
                   description="This tool helps to move topic partitions between replicas.")
    add_connection_args(p, bootstrap_required=False)
    p.add_argument("--generate", action="store_true",
                   help="Generate a candidate partition reassignment configuration. Note that this "
                        "only generates a candidate assignment, it does not execute it.")
    p.add_argument("--execute", action="store_true",
                   help="Kick off the reassignment as specified by the --reassignment-json-file option.")
    p.add_argument("--verify", action="store_true",
                   help="Verify if the reassignment completed as specified by the "
                        "--reassignment-json-file option. If there is a throttle engaged for the "
                        "replicas specified, and the rebalance has completed, the throttle will be removed.")
    p.add_argument("--cancel", action="store_true",
                   help="Cancel an active reassignment.")
    p.add_argument("--list", action="store_true",
                   help="List all active partition reassignments.")
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='The JSON file with the partition reassignment configuration: '
                        '{"partitions": [{"topic": "foo", "partition": 1, "replicas": [1,2,3], '
                        '"log_dirs": ["dir1","dir2","dir3"]}], "version": 1}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help='Generate a reassignment configuration to move the partitions of the '
                        'specified topics to the list of brokers specified by the --broker-list '
                        'option: {"topics": [{"topic": "foo"},{"topic": "foo1"}], "version": 1}')
    p.add_argument("--broker-list", metavar="0,1,2",
                   help="The list of brokers to which the partitions need to be reassigned in the "
                        "form \"0,1,2\". This is required if --topics-to-move-json-file is used to "
                        "generate reassignment configuration")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="Disable rack aware replica assignment")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="The movement of partitions between brokers will be throttled to this "
                        "value (bytes/sec). This option can be included with --execute when a "
                        "reassignment is started, and it can be altered by resubmitting the current "
                        "reassignment along with the --additional flag.")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="The movement of replicas between log directories on the same broker will "
                        "be throttled to this value (bytes/sec).")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="The maximum time in ms to wait for log directory replica assignment to "
                        "begin. (default: 10000)")
    p.add_argument("--additional", action="store_true",
                   help="Execute this reassignment in addition to any other ongoing ones.")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="Do not modify broker or topic throttles.")
    return p


def validate(args: argparse.Namespace) -> str:
    """Kafka's validateAndParseArgs: exactly one action, its required options, and no option
    another action owns. Returns the action."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise CliError("Command must include exactly one action: "
                       + ", ".join(f"--{a}" for a in ACTIONS))
    action = chosen[0]
    if not args.bootstrap_server:
        raise CliError("Please specify --bootstrap-server")
    required, permitted = ACTION_OPTIONS[action]
    for option in required:
        if getattr(args, option.replace("-", "_")) is None:
            raise CliError(f'Missing required argument "[{option}]"')
    defaults = build_parser()
    for option in OPTIONS:
        dest = option.replace("-", "_")
        given = getattr(args, dest) != defaults.get_default(dest)
        if given and option not in (action, *required, *permitted):
            raise CliError(f'Option "[{option}]" can\'t be used with action "[{action}]"')
    return action


# ---------------------------------------------------------------------------- JSON files

def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise CliError(f"The input string is not a valid JSON: {e}") from None


def _field(obj: Any, name: str) -> Any:
    if not isinstance(obj, dict) or name not in obj:
        raise CliError(f"No such field exists: `{name}`")
    return obj[name]


def _version(data: Any) -> None:
    if not isinstance(data, dict):
        raise CliError("The input string is not a valid JSON: expected an object")
    version = data.get("version", 1)
    if version != 1:
        raise CliError(f"Not supported version field value {version}")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CliError(f"Expected an integer for {what}, received {json.dumps(value)}")
    return value


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise CliError(f"Expected an array for {what}, received {json.dumps(value)}")
    return value


def parse_topics_to_move(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file, in order, duplicates kept."""
    data = _json(text)
    _version(data)
    topics = []
    for entry in _list(data.get("topics", []), "topics"):
        topic = _field(entry, "topic")
        if not isinstance(topic, str):
            raise CliError(f"Expected a string for topic, received {json.dumps(topic)}")
        topics.append(topic)
    return topics


@dataclass
class ReassignmentPlan:
    """A reassignment JSON: each partition's target replicas in file order (duplicates kept
    so they can be reported), and the replicas to move to a named log dir."""

    partitions: list[tuple[TopicPartition, list[int]]]
    log_dirs: dict[TopicPartitionReplica, str]

    def targets(self) -> Assignment:
        return dict(self.partitions)


def parse_reassignment(text: str) -> ReassignmentPlan:
    """Kafka's reassignment JSON (version 1); "log_dirs" defaults to "any" for every replica."""
    from clients.aio.log_dir_types import TopicPartitionReplica

    data = _json(text)
    _version(data)
    partitions: list[tuple[TopicPartition, list[int]]] = []
    log_dirs: dict[TopicPartitionReplica, str] = {}
    for entry in _list(data.get("partitions", []), "partitions"):
        topic = _field(entry, "topic")
        if not isinstance(topic, str):
            raise CliError(f"Expected a string for topic, received {json.dumps(topic)}")
        tp = TopicPartition(topic, _int(_field(entry, "partition"), "partition"))
        replicas = [_int(r, f"the replicas of {tp}") for r in _list(_field(entry, "replicas"), "replicas")]
        dirs = entry.get("log_dirs")
        dirs = [ANY_LOG_DIR] * len(replicas) if dirs is None else _list(dirs, "log_dirs")
        if len(dirs) != len(replicas):
            raise CliError(f"Size of replicas list {_java_list(replicas)} is different from size of "
                           f"log dirs list {_java_list(dirs)} for partition {tp}")
        partitions.append((tp, replicas))
        for broker, path in zip(replicas, dirs):
            if path != ANY_LOG_DIR:
                log_dirs[TopicPartitionReplica(tp.topic, tp.partition, broker)] = str(path)
    return ReassignmentPlan(partitions, log_dirs)


def check_executable(plan: ReassignmentPlan) -> None:
    """Kafka's checks before --execute: something to move, no partition twice, no broker
    twice in one replica list."""
    if not plan.partitions:
        raise CliError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in plan.partitions):
        raise CliError("Partition replica list cannot be empty")
    names = [tp for tp, _ in plan.partitions]
    twice = sorted({tp for tp in names if names.count(tp) > 1})
    if twice:
        raise CliError("Partition reassignment contains duplicate topic partitions: "
                       + ",".join(map(str, twice)))
    repeated = [f"{tp} contains multiple entries for "
                + ",".join(str(b) for b in sorted({b for b in rs if rs.count(b) > 1}))
                for tp, rs in plan.partitions if len(set(rs)) != len(rs)]
    if repeated:
        raise CliError("Partition replica lists may not contain duplicate entries: " + ". ".join(repeated))


def format_reassignment(assignment: Assignment,
                        log_dirs: dict[TopicPartitionReplica, str] | None = None) -> str:
    """Kafka's reassignment JSON, compact, partitions sorted by topic then partition."""
    from clients.aio.log_dir_types import TopicPartitionReplica

    dirs = log_dirs or {}
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": [dirs.get(TopicPartitionReplica(tp.topic, tp.partition, b), ANY_LOG_DIR)
                      for b in replicas]}
        for tp, replicas in sorted(assignment.items())]}, separators=(",", ":"))


def _java_list(items: Iterable[Any]) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


def parse_broker_list(text: str) -> list[int]:
    """--broker-list 0,1,2; duplicates refused with Kafka's message."""
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise CliError(f"--broker-list {text}: expected broker ids such as 0,1,2") from None
    twice = sorted({b for b in brokers if brokers.count(b) > 1})
    if twice:
        raise CliError(f"Broker list contains duplicate entries: {_java_list(twice)}")
    return brokers


# ---------------------------------------------------------------------------- plans and throttles

def propose_assignment(current: Assignment, brokers: list[tuple[int, str | None]],
                       fixed_start: int = -1) -> Assignment:
    """Kafka's --generate: each topic's partitions placed afresh over `brokers` (id, rack or
    None) with the topic's present replication factor."""
    from clients.aio.reassignment import BrokerRack, assign_replicas_to_brokers

    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in current:
        by_topic.setdefault(tp.topic, []).append(tp)
    racks = [BrokerRack(b, rack) for b, rack in brokers]
    proposed: Assignment = {}
    for topic, tps in sorted(by_topic.items()):
        rf = len(current[min(tps)])
        try:
            plan = assign_replicas_to_brokers(racks, len(tps), rf, fixed_start)
        except ValueError as e:
            raise CliError(str(e)) from None
        proposed.update({TopicPartition(topic, p): replicas for p, replicas in plan.items()})
    return proposed


@dataclass
class PartitionMove:
    """The replicas a moving partition copies from (its current ones) and to (new ones)."""

    sources: set[int]
    destinations: set[int]


def move_map(in_progress: dict[TopicPartition, PartitionReassignment], proposed: Assignment,
             current: Assignment) -> dict[TopicPartition, PartitionMove]:
    """Every partition moving once the proposal starts: those already moving (their sources
    are the replicas not being added) and the proposed ones (sources: the replicas they have
    before this or an earlier move; destinations: the targets not among them)."""
    moves = {tp: PartitionMove(set(r.replicas) - set(r.adding_replicas), set(r.adding_replicas))
             for tp, r in in_progress.items()}
    for tp, replicas in proposed.items():
        sources = moves[tp].sources if tp in moves else set(current.get(tp, ()))
        if not sources:
            raise CliError(f"Trying to reassign a topic partition {tp} with 0 replicas")
        moves[tp] = PartitionMove(set(sources), set(replicas) - sources)
    return moves


def throttled_replicas(moves: dict[TopicPartition, PartitionMove]) -> dict[str, tuple[str, str]]:
    """Per topic the values of (leader.replication.throttled.replicas,
    follower.replication.throttled.replicas) in Kafka's `partition:broker,...` form: the
    sources lead (and send) the copy, the destinations follow (and fetch) it."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for tp, move in moves.items():
        leaders.setdefault(tp.topic, set()).update((tp.partition, b) for b in move.sources)
        followers.setdefault(tp.topic, set()).update(
            (tp.partition, b) for b in move.destinations - move.sources)

    def text(pairs: set[tuple[int, int]]) -> str:
        # Kafka sorts the "p:b" strings themselves (a TreeSet of strings).
        return ",".join(sorted(f"{p}:{b}" for p, b in pairs))
    return {t: (text(leaders[t]), text(followers.get(t, set()))) for t in leaders}


def reassigning_brokers(moves: dict[TopicPartition, PartitionMove]) -> list[int]:
    return sorted({b for m in moves.values() for b in m.sources | m.destinations})


# ---------------------------------------------------------------------------- cluster reads

def current_assignment(admin: AdminClient, topics: Iterable[str]) -> Assignment:
    """Each partition's replicas; a missing topic raises with Kafka's message."""
    from clients.protocol.errors import UnknownTopicOrPartitionError

    out: Assignment = {}
    for topic in sorted(set(topics)):
        try:
            described = admin.describe_topics([topic])[topic]
        except UnknownTopicOrPartitionError:
            raise CliError(f"Topic {topic} not found.") from None
        out.update({TopicPartition(topic, p.partition): list(p.replicas) for p in described.partitions})
    return out


def live_brokers(admin: AdminClient) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in admin.describe_cluster().brokers}


def alter_broker_configs(admin: AdminClient, brokers: Iterable[int], set: dict[str, str] | None = None,
                         delete: Iterable[str] = ()) -> None:
    for broker in brokers:
        admin.alter_configs("broker", str(broker), set=set, delete=list(delete))


# ---------------------------------------------------------------------------- actions

def generate(admin: AdminClient, topics_json: str, broker_list: str, rack_aware: bool,
             out: TextIO) -> tuple[Assignment, Assignment]:
    """--generate: print the current assignment of the topics and a proposal over the
    brokers of --broker-list that the cluster knows (Kafka leaves the others out)."""
    brokers = parse_broker_list(broker_list)
    topics = parse_topics_to_move(topics_json)
    twice = sorted({t for t in topics if topics.count(t) > 1})
    if twice:
        raise CliError(f"List of topics to reassign contains duplicate entries: {_java_list(twice)}")
    current = current_assignment(admin, topics)
    live = live_brokers(admin)
    chosen = [(b, live[b] if rack_aware else None) for b in brokers if b in live]
    racked = sum(1 for _, rack in chosen if rack is not None)
    if rack_aware and 0 < racked < len(chosen):
        raise CliError("Not all brokers have rack information. Add --disable-rack-aware in command "
                       "line to make replica assignment without rack information.")
    proposed = propose_assignment(current, chosen)
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}", file=out)
    return proposed, current


def execute(admin: AdminClient, plan: ReassignmentPlan, additional: bool, throttle: int,
            log_dir_throttle: int, timeout_ms: int, out: TextIO) -> None:
    """--execute: print the assignment to roll back to, set the throttles asked for, start
    the reassignment, then the log dir moves."""
    check_executable(plan)
    proposed = plan.targets()
    in_progress = admin.list_partition_reassignments()
    if in_progress and not additional:
        raise CliError(CANNOT_EXECUTE_WHILE_MOVING)
    live = live_brokers(admin)
    for broker in sorted({b for rs in proposed.values() for b in rs}):
        if broker not in live:
            raise CliError(f"Unknown broker id {broker}")
    described = current_assignment(admin, {tp.topic for tp in proposed})
    missing = [tp for tp in proposed if tp not in described]
    if missing:
        raise CliError("Unable to find partition: " + ", ".join(map(str, missing)))
    current = {tp: described[tp] for tp in proposed}
    print(f"Current partition replica assignment\n\n{format_reassignment(current)}\n\n"
          f"Save this to use as the --reassignment-json-file option during rollback", file=out)
    if throttle >= 0 or log_dir_throttle >= 0:
        print(RUN_VERIFY_WARNING, file=out)
        if throttle >= 0:
            moves = move_map(in_progress, proposed, current)
            for topic, (leaders, followers) in sorted(throttled_replicas(moves).items()):
                admin.alter_configs("topic", topic, set={LEADER_REPLICAS: leaders,
                                                         FOLLOWER_REPLICAS: followers})
            alter_broker_configs(admin, reassigning_brokers(moves),
                                 set={LEADER_RATE: str(throttle), FOLLOWER_RATE: str(throttle)})
            print(f"The inter-broker throttle limit was set to {throttle} B/s", file=out)
        if log_dir_throttle >= 0:
            alter_broker_configs(admin, sorted({r.broker_id for r in plan.log_dirs}),
                                 set={LOG_DIR_RATE: str(log_dir_throttle)})
            print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s", file=out)
    errors = {tp: e for tp, e in admin.alter_partition_reassignments(proposed).items() if e is not None}
    if errors:
        raise CliError("Error reassigning partition(s):\n"
                       + "\n".join(f"{tp}: {errors[tp]}" for tp in sorted(errors)))
    names = ",".join(str(tp) for tp in sorted(proposed))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for {names}",
          file=out)
    if plan.log_dirs:
        start_log_dir_moves(admin, plan.log_dirs, timeout_ms, out)


def _replica_name(r: TopicPartitionReplica) -> str:
    return f"{r.topic}-{r.partition}-{r.broker_id}"       # Kafka's TopicPartitionReplica


def _replica_order(r: TopicPartitionReplica) -> tuple[int, str, int]:
    return (r.broker_id, r.topic, r.partition)


def start_log_dir_moves(admin: AdminClient, moves: dict[TopicPartitionReplica, str], timeout_ms: int,
                        out: TextIO) -> None:
    """Ask each broker to move its replicas to the named dirs, again and again while a
    replica is not there yet (a new replica exists once the reassignment created it),
    until all have started or `timeout_ms` passed."""
    from clients.protocol.errors import ReplicaNotAvailableError

    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while pending:
        results = admin.alter_replica_log_dirs(pending)
        started = []
        for replica, error in results.items():
            if error is None:
                started.append(replica)
            elif not isinstance(error, ReplicaNotAvailableError):
                raise CliError(f"Failed to alter dir for {_replica_name(replica)}: {error}")
        for replica in sorted(started, key=_replica_order):
            print(f"Successfully started moving log directory to {pending.pop(replica)} for replica "
                  f"{replica.topic}-{replica.partition} with broker {replica.broker_id} ", file=out)
        if pending and time.monotonic() >= deadline:
            names = ",".join(_replica_name(r) for r in sorted(pending, key=_replica_order))
            raise CliError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} "
                           f"could be started for: {names}")
        if pending:
            time.sleep(0.1)


@dataclass
class PartitionState:
    """Where a partition of the plan is: `done` once no reassignment of it is in progress."""

    current: list[int]
    target: list[int]
    done: bool


def partition_states(admin: AdminClient, targets: Assignment
                     ) -> tuple[dict[TopicPartition, PartitionState], bool]:
    """Each target partition's state, and whether any reassignment at all is in progress."""
    in_progress = admin.list_partition_reassignments()
    states = {tp: PartitionState(in_progress[tp].replicas, target, False)
              for tp, target in targets.items() if tp in in_progress}
    rest = {tp: target for tp, target in targets.items() if tp not in in_progress}
    described: Assignment = {}
    for topic in sorted({tp.topic for tp in rest}):
        try:
            described.update(current_assignment(admin, [topic]))
        except CliError:
            pass                                  # a deleted topic: no replicas
    states.update({tp: PartitionState(described.get(tp, []), target, True) for tp, target in rest.items()})
    return states, bool(in_progress)


def format_states(states: dict[TopicPartition, PartitionState]) -> str:
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        s = states[tp]
        if not s.done:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif s.current == s.target:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp}, but replica set is "
                         f"{','.join(map(str, s.current))} rather than {','.join(map(str, s.target))}.")
    return "\n".join(lines)


@dataclass
class LogDirMove:
    """Where a replica with a target log dir is: `current` and `future` dir (None: none),
    `answered` False when its broker could not be asked."""

    target: str
    current: str | None
    future: str | None
    answered: bool = True

    @property
    def done(self) -> bool:
        return self.answered and self.current is not None and self.future is None


def log_dir_moves(admin: AdminClient, targets: dict[TopicPartitionReplica, str]
                  ) -> dict[TopicPartitionReplica, LogDirMove]:
    """Each replica's dirs, from DescribeLogDirs of the brokers holding them."""
    if not targets:
        return {}
    by_broker = {}
    for broker in sorted({r.broker_id for r in targets}):
        try:
            by_broker[broker] = admin.describe_log_dirs([broker])[broker]
        except Exception:  # noqa: BLE001 - a broker that cannot answer is reported per replica
            pass
    states = {}
    for replica, target in targets.items():
        dirs = by_broker.get(replica.broker_id)
        tp = TopicPartition(replica.topic, replica.partition)
        current = future = None
        for path, d in (dirs or {}).items():
            info = d.replicas.get(tp)
            if info is not None and info.is_future:
                future = path
            elif info is not None:
                current = path
        states[replica] = LogDirMove(target, current, future, dirs is not None)
    return states


def format_log_dir_moves(moves: dict[TopicPartitionReplica, LogDirMove]) -> str:
    lines = []
    for r in sorted(moves, key=_replica_order):
        m = moves[r]
        where = f"Partition {r.topic}-{r.partition}"
        if not m.answered:
            lines.append(f"{where} cannot be found in any live log directory on broker {r.broker_id}.")
        elif m.current is None:
            lines.append(f"{where} is not found in any live log dir on broker {r.broker_id}. There is "
                         f"likely an offline log directory on the broker.")
        elif m.future is not None and m.future == m.target:
            lines.append(f"Reassignment of replica {_replica_name(r)} is still in progress.")
        elif m.future is not None:
            lines.append(f"{where} on broker {r.broker_id} is being moved to log dir {m.future} "
                         f"instead of {m.target}.")
        elif m.current == m.target:
            lines.append(f"Reassignment of replica {_replica_name(r)} completed successfully.")
        else:
            lines.append(f"{where} on broker {r.broker_id} is not being moved from log dir "
                         f"{m.current} to {m.target}.")
    return "\n".join(lines)


def clear_throttles(admin: AdminClient, targets: Assignment, out: TextIO) -> None:
    """Kafka clears every throttle once nothing moves: it cannot know which brokers an
    earlier reassignment involved, so every live broker and every broker of the plan."""
    live = live_brokers(admin)
    brokers = sorted(set(live) | {b for rs in targets.values() for b in rs})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}", file=out)
    alter_broker_configs(admin, [b for b in brokers if b in live], delete=BROKER_THROTTLES)
    topics = sorted({tp.topic for tp in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}",
          file=out)
    for topic in topics:
        admin.alter_configs("topic", topic, delete=list(TOPIC_THROTTLES))


def verify(admin: AdminClient, plan: ReassignmentPlan, preserve_throttles: bool, out: TextIO) -> bool:
    """--verify: each partition's and log dir move's state; once nothing moves, clear the
    throttles. True when every partition and replica is where the plan puts it."""
    targets = plan.targets()
    states, any_moving = partition_states(admin, targets)
    print(format_states(states), file=out)
    moves = log_dir_moves(admin, plan.log_dirs)
    if moves:
        print(format_log_dir_moves(moves), file=out)
    dirs_moving = not all(m.done for m in moves.values())
    if not any_moving and not dirs_moving and not preserve_throttles:
        clear_throttles(admin, targets, out)
    return all(s.done and s.current == s.target for s in states.values()) and not dirs_moving


def cancel(admin: AdminClient, plan: ReassignmentPlan, preserve_throttles: bool, timeout_ms: int,
           out: TextIO) -> set[TopicPartition]:
    """--cancel: stop the plan's reassignments in progress (their partitions go back to the
    replicas they had), move replicas back to the dirs they are leaving, clear throttles."""
    targets = plan.targets()
    moving = {tp for tp, r in admin.list_partition_reassignments(list(targets)).items()
              if r.adding_replicas or r.removing_replicas}
    if moving:
        errors = {tp: e for tp, e in admin.alter_partition_reassignments(
            {tp: None for tp in moving}).items() if e is not None}
        if errors:
            raise CliError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                           + "\n".join(f"{tp}: {errors[tp]}" for tp in sorted(errors)))
        print(f"Successfully cancelled partition reassignment{'' if len(moving) == 1 else 's'} for: "
              + ",".join(str(tp) for tp in sorted(moving)), file=out)
    else:
        print("None of the specified partition reassignments are active.", file=out)
    back = {r: m.current for r, m in log_dir_moves(admin, plan.log_dirs).items()
            if m.answered and m.current is not None and m.future is not None}
    if back:
        start_log_dir_moves(admin, {r: path for r, path in back.items() if path}, timeout_ms, out)
    else:
        print("None of the specified partition moves are active.", file=out)
    if not preserve_throttles:
        clear_throttles(admin, targets, out)
    return moving


def format_in_progress(in_progress: dict[TopicPartition, PartitionReassignment]) -> str:
    """--list's text."""
    if not in_progress:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp in sorted(in_progress):
        r = in_progress[tp]
        line = f"{tp}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    return "\n".join(lines)


# ---------------------------------------------------------------------------- entry point

def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CliError(f"cannot read {path}: {e.strerror or e}") from None


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from clients.aio.errors import KafkaTimeoutError
    from clients.protocol.errors import ClusterAuthorizationFailedError

    out = out or sys.stdout
    action = validate(args)
    # Read and check the files before connecting: a typo is reported without a cluster.
    topics_json = _read(args.topics_to_move_json_file) if action == "generate" else ""
    plan = (parse_reassignment(_read(args.reassignment_json_file))
            if action in ("execute", "verify", "cancel") else None)
    if action == "generate":
        parse_broker_list(args.broker_list)
        parse_topics_to_move(topics_json)
    elif action == "execute" and plan is not None:
        check_executable(plan)
    with admin_client(args, ERROR_PREFIX) as admin:
        try:
            if action == "generate":
                generate(admin, topics_json, args.broker_list, not args.disable_rack_aware, out)
            elif action == "execute" and plan is not None:
                execute(admin, plan, args.additional, args.throttle,
                        args.replica_alter_log_dirs_throttle, args.timeout, out)
            elif action == "verify" and plan is not None:
                verify(admin, plan, args.preserve_throttles, out)
            elif action == "cancel" and plan is not None:
                cancel(admin, plan, args.preserve_throttles, args.timeout, out)
            else:
                print(format_in_progress(admin.list_partition_reassignments()), file=out)
        except KafkaTimeoutError as e:
            raise CliError(f"Timed out waiting for the cluster ({e})") from None
        except ClusterAuthorizationFailedError:
            raise CliError("Not authorized to reassign partitions (ALTER on the Cluster is needed)") from None
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
