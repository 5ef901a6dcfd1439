"""kafka-transactions: the transactional state of producers in the cluster; find and abort
hanging transactions (Kafka's TransactionsCommand, KIP-664).

    kafka-transactions --bootstrap-server H:P [--command-config FILE] list [--duration-filter MS]
    kafka-transactions ... describe --transactional-id ID
    kafka-transactions ... describe-producers --topic T --partition P [--broker-id B]
    kafka-transactions ... find-hanging (--broker-id B | --topic T [--partition P])
        [--max-transaction-timeout MINUTES (default 15)]
    kafka-transactions ... abort --topic T --partition P (--start-offset O
        | --producer-id PID --producer-epoch E --coordinator-epoch C)

Each command sends the request Kafka's admin client would, to the broker that must answer it:
ListTransactions to every broker (each coordinator lists only its own transactions),
FindCoordinator + DescribeTransactions to the transactional id's coordinator,
DescribeProducers and WriteTxnMarkers to the partition's leader (or the broker named by
--broker-id). The connection flags may also follow the command name.

Output is Kafka's: a header line, then one line per row, every cell padded to its column's
width and followed by a tab. `abort` prints nothing on success. A broker error code is one
line `Error: <ERROR_NAME>: <what failed>` on stderr and exit code 1; bad or missing flags are
a usage error (exit 2).

find-hanging, as Kafka's: every producer with an open transaction (a current transaction
start offset) whose last write is older than --max-transaction-timeout is a candidate; it is
hanging unless some coordinator lists a transaction of that producer id whose description
still includes the partition (an Ongoing transaction, or one whose markers are pending).
strom's brokers describe producers only on partition leaders, so --broker-id searches the
partitions that broker leads (Kafka: every partition it has a replica of).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Iterable, NamedTuple, Sequence,
                    TextIO, TypeVar)

from .common import (CliError, ToolParser, add_connection_args, client_config, command_timeout,
                     exit_after, run_tool, wait_reachable)

if TYPE_CHECKING:
    from clients.aio.client import KafkaClient
    from clients.aio.metadata import ClusterMetadata
    from clients.protocol.schema import Struct

ERROR_PREFIX = "Error: "
T = TypeVar("T")

LIST_HEADER = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADER = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                   "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                   "TransactionDurationMs", "TopicPartitions")
PRODUCERS_HEADER = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADER = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                  "StartOffset", "LastTimestamp", "Duration(min)")

# Error names worth another attempt (after a metadata refresh or a new coordinator lookup).
LEADER_MOVED = frozenset({"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH",
                          "FENCED_LEADER_EPOCH", "REPLICA_NOT_AVAILABLE", "REQUEST_TIMED_OUT",
                          "NETWORK_EXCEPTION"})
COORDINATOR_MOVED = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                               "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT",
                               "NETWORK_EXCEPTION"})
BATCH = 500                          # partitions per DescribeProducers request, as Kafka


# ------------------------------------------------------------------ arguments

def _hidden_connection_args(p: argparse.ArgumentParser) -> None:
    """The connection flags again, after the command name (`list --bootstrap-server ...`);
    SUPPRESS keeps a value given before the command."""
    p.add_argument("--bootstrap-server", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--command-config", dest="config_file", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)
    p.add_argument("--command-timeout", type=float, default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-transactions",
                   description="Analyze the transactional state of producers in the cluster; "
                               "detect and recover from hanging transactions.")
    add_connection_args(p, config_help="Property file with configs for the admin client.",
                        bootstrap_required=False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands",
                           parser_class=ToolParser)
    sub.required = True

    lst = sub.add_parser("list", help="list transactions",
                         description="List the transactions every coordinator knows.")
    lst.add_argument("--duration-filter", type=int, metavar="MS", default=None,
                     help="Only transactions running (Ongoing) for at least this many ms.")

    desc = sub.add_parser("describe", help="describe the state of an active transactional-id",
                          description="Describe the state of an active transactional-id.")
    desc.add_argument("--transactional-id", required=True, help="transactional id")

    prod = sub.add_parser("describe-producers",
                          help="describe the states of active producers for a topic partition")
    prod.add_argument("--broker-id", type=int, default=None,
                      help="optional broker id to describe the producer state on a specific "
                           "replica (default: the leader)")
    prod.add_argument("--topic", required=True, help="topic name")
    prod.add_argument("--partition", type=int, required=True, help="partition number")

    abort = sub.add_parser("abort", help="abort a hanging transaction (requires administrative "
                                         "privileges)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    new = abort.add_argument_group("Brokers on versions 3.0 and above",
                                   "For newer brokers, only the start offset of the transaction "
                                   "to be aborted is required")
    new.add_argument("--start-offset", type=int, default=None,
                     help="start offset of the transaction to abort")
    old = abort.add_argument_group("Brokers on versions older than 3.0",
                                   "For older brokers, you must provide all of these arguments")
    old.add_argument("--producer-id", type=int, default=None, help="producer id")
    old.add_argument("--producer-epoch", type=int, default=None, help="producer epoch")
    old.add_argument("--coordinator-epoch", type=int, default=None, help="coordinator epoch")

    hang = sub.add_parser("find-hanging", help="find hanging transactions")
    hang.add_argument("--broker-id", type=int, default=None,
                      help="broker id to search for hanging transactions (the partitions it leads)")
    hang.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                      help="maximum transaction timeout in minutes to limit the scope of the "
                           "search (default 15)")
    hang.add_argument("--topic", default=None, help="topic name to limit search to")
    hang.add_argument("--partition", type=int, default=None, help="partition number")

    for child in (lst, desc, prod, abort, hang):
        _hidden_connection_args(child)
    return p


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Flag rules argparse cannot express; a broken rule is a usage error (exit 2)."""
    if not getattr(args, "bootstrap_server", None):
        parser.error("the following arguments are required: --bootstrap-server")
    if args.command == "abort":
        old = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        if args.start_offset is not None:
            if any(v is not None for v in old):
                parser.error("abort: --start-offset can't be used with --producer-id, "
                             "--producer-epoch or --coordinator-epoch")
        elif args.producer_id is None:
            parser.error("abort: the transaction to abort must be identified either with "
                         "--start-offset or with --producer-id, --producer-epoch and "
                         "--coordinator-epoch")
        elif args.producer_epoch is None:
            parser.error("abort: missing required argument --producer-epoch")
        elif args.coordinator_epoch is None:
            parser.error("abort: missing required argument --coordinator-epoch")
        if args.partition < 0:
            parser.error("abort: --partition must not be negative")
    elif args.command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            parser.error("find-hanging: requires either --topic or --broker-id to limit the "
                         "scope of the search")
        if args.partition is not None and args.topic is None:
            parser.error("find-hanging: the --partition argument requires --topic to be provided")
        if args.max_transaction_timeout < 0:
            parser.error("find-hanging: --max-transaction-timeout must not be negative")
    elif args.command == "describe-producers" and args.partition < 0:
        parser.error("describe-producers: --partition must not be negative")


# ------------------------------------------------------------------ output

def table_lines(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """Kafka's TransactionsCommand table: each cell padded to its column's width (the
    longest of header and values) and followed by a tab; the header line first."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    return ["".join(c.ljust(widths[i]) + "\t" for i, c in enumerate(line))
            for line in [list(header)] + cells]


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]], out: TextIO) -> None:
    for line in table_lines(header, rows):
        print(line, file=out)


def broker_error(code: int, what: str, message: str | None = None) -> CliError:
    """`<ERROR_NAME>: <what failed>[ (<the broker's message>)]`, exit 1."""
    from clients.protocol.errors import for_code

    name = for_code(code).name
    text = (message or "").strip()
    detail = f" ({text})" if text and text != name else ""
    return CliError(f"{name}: {what}{detail}")


def none_if_negative(value: int) -> str:
    return "None" if value < 0 else str(value)


def describe_row(coordinator: int, tid: str, state: Any, now_ms: int) -> list[Any]:
    """One row of `describe` from a DescribeTransactions entry."""
    start = state.transaction_start_time_ms
    tps = sorted((t.topic, p) for t in state.topics for p in t.partitions)
    return [coordinator, tid, state.producer_id, state.producer_epoch, state.transaction_state,
            state.transaction_timeout_ms, none_if_negative(start),
            "None" if start < 0 else now_ms - start, ",".join(f"{t}-{p}" for t, p in tps)]


def producer_row(p: Any) -> list[Any]:
    """One row of `describe-producers` from a DescribeProducers active producer."""
    return [p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
            p.last_timestamp, none_if_negative(p.current_txn_start_offset)]


class OpenTxn(NamedTuple):
    topic: str
    partition: int
    producer: Any            # the DescribeProducers entry


def hanging_row(t: OpenTxn, now_ms: int) -> list[Any]:
    p = t.producer
    return [t.topic, t.partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
            p.current_txn_start_offset, p.last_timestamp, (now_ms - p.last_timestamp) // 60000]


def is_candidate(p: Any, now_ms: int, max_timeout_ms: int) -> bool:
    """An open transaction older than the longest a transaction may run (Kafka's test)."""
    return p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms


def filter_hanging(candidates: Sequence[OpenTxn], listed: dict[int, tuple[int, str]],
                   described: dict[str, Any]) -> list[OpenTxn]:
    """The candidates no coordinator will finish: their producer id is listed by no
    coordinator, or its transactional id is not found, or the transaction it describes does
    not include the partition (any longer)."""
    out = []
    for t in candidates:
        entry = listed.get(t.producer.producer_id)
        desc = described.get(entry[1]) if entry is not None else None
        if desc is None or (t.topic, t.partition) not in {
                (x.topic, p) for x in desc.topics for p in x.partitions}:
            out.append(t)
    return out


# ------------------------------------------------------------------ talking to brokers

class Session:
    """A started KafkaClient and the deadline of the whole command."""

    def __init__(self, client: KafkaClient, timeout: float):
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.deadline = self.loop.time() + timeout
        self.timeout = timeout

    def left(self) -> float:
        return max(0.01, self.deadline - self.loop.time())

    async def request(self, node: int, api_name: str, body: Any,
                      version: int | None = None) -> Struct:
        return await self.client.request(node, api_name, body, version=version,
                                          timeout=min(self.client.request_timeout, self.left()))

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt()` until it returns; a `Retry` (or a lost connection / timed-out request)
        is tried again after a backoff while the deadline allows, then raised as is."""
        from clients.aio.errors import KafkaConnectionError, KafkaTimeoutError

        backoff = self.client.retry_backoff
        while True:
            try:
                return await attempt()
            except (Retry, KafkaConnectionError, KafkaTimeoutError) as e:
                if self.loop.time() + backoff >= self.deadline:
                    if isinstance(e, Retry):
                        raise e.error from None
                    raise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.client.retry_backoff_max)

    async def metadata(self, topics: list[str] | None) -> ClusterMetadata:
        """A fresh Metadata answer for `topics` (None: every topic)."""
        from clients.aio.metadata import ClusterMetadata

        resp = await self.client.request_any("Metadata", {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False}, timeout=self.left())
        cluster = ClusterMetadata.from_response(resp)
        for b in cluster.brokers.values():
            self.client.pool.set_address(b.node_id, b.host, b.port)
        return cluster


class Retry(Exception):
    """A transient error code: try again; `error` is what to report if time runs out."""

    def __init__(self, error: CliError):
        super().__init__(error.message)
        self.error = error


async def leader_of(s: Session, topic: str, partition: int) -> int:
    from clients.protocol.errors import Code

    cluster = await s.metadata([topic])
    code = cluster.topic_error(topic)
    what = f"Failed to find the leader of partition {topic}-{partition}"
    if code == Code.LEADER_NOT_AVAILABLE:
        raise Retry(broker_error(code, what))
    if code:
        raise broker_error(code, what)
    info = cluster.partition(topic, partition)
    if info is None:
        raise broker_error(Code.UNKNOWN_TOPIC_OR_PARTITION, what)
    if info.leader < 0:
        raise Retry(broker_error(Code.LEADER_NOT_AVAILABLE, what))
    return info.leader


async def describe_producers(s: Session, node: int, tps: Sequence[tuple[str, int]]
                             ) -> dict[tuple[str, int], tuple[int, Any]]:
    """{(topic, partition): (error code, the partition's DescribeProducers entry)} from `node`."""
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    resp = await s.request(node, "DescribeProducers", {"topics": [
        {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
    return {(t.name, p.partition_index): (p.error_code, p)
            for t in resp.topics for p in t.partitions}


async def producers_of(s: Session, topic: str, partition: int, broker: int | None) -> list[Any]:
    """The active producers of one partition, from its leader (or `broker`)."""
    from clients.protocol.errors import for_code

    where = f"broker {broker}" if broker is not None else "leader"
    what = f"Failed to describe producers for partition {topic}-{partition} on {where}"

    async def attempt() -> list[Any]:
        node = broker if broker is not None else await leader_of(s, topic, partition)
        code, entry = (await describe_producers(s, node, [(topic, partition)])).get(
            (topic, partition), (0, None))
        if code:
            err = broker_error(code, what, entry.error_message)
            if broker is None and for_code(code).name in LEADER_MOVED:
                raise Retry(err)
            raise err
        return list(entry.active_producers) if entry is not None else []
    return await s.retrying(attempt)


async def list_transactions(s: Session, body: dict, version: int | None = None
                            ) -> list[tuple[int, Any]]:
    """[(coordinator id, listing)] from ListTransactions sent to every broker."""
    from clients.protocol.errors import for_code

    found: dict[int, list[Any]] = {}

    async def ask(node: int) -> None:
        resp = await s.request(node, "ListTransactions", body, version)
        if resp.error_code:
            err = broker_error(resp.error_code, f"Failed to list transactions on broker {node}")
            if for_code(resp.error_code).name in COORDINATOR_MOVED:
                raise Retry(err)
            raise err
        found[node] = list(resp.transaction_states)

    async def attempt() -> None:
        cluster = await s.metadata([])
        todo = [n for n in sorted(cluster.brokers) if n not in found]
        results = await asyncio.gather(*(ask(n) for n in todo), return_exceptions=True)
        transient: BaseException | None = None
        for r in results:
            if isinstance(r, CliError):
                raise r
            if isinstance(r, BaseException):
                transient = r
        if transient is not None:
            raise transient
    await s.retrying(attempt)
    return [(node, t) for node in sorted(found) for t in found[node]]


async def describe_transaction(s: Session, tid: str, coordinator: int | None = None,
                               missing_ok: bool = False) -> tuple[int, Any] | None:
    """(coordinator id, DescribeTransactions entry) of `tid`; None when it is unknown and
    `missing_ok`. The coordinator is looked up (FindCoordinator key_type 1) unless given."""
    from clients.protocol.errors import Code, KafkaError, for_code

    what = f"Failed to describe transaction state of transactional-id `{tid}`"

    async def attempt() -> tuple[int, Any] | None:
        node = coordinator
        if node is None:
            try:
                node = await s.client.coordinator(tid, 1, timeout=s.left())
            except KafkaError as e:      # retried inside until the deadline
                raise broker_error(e.code, f"Failed to find the coordinator of "
                                           f"transactional-id `{tid}`") from None
        resp = await s.request(node, "DescribeTransactions", {"transactional_ids": [tid]})
        entry = resp.transaction_states[0]
        if entry.error_code == Code.TRANSACTIONAL_ID_NOT_FOUND and missing_ok:
            return None
        if entry.error_code:
            err = broker_error(entry.error_code, what)
            if for_code(entry.error_code).name in COORDINATOR_MOVED:
                s.client.forget_coordinator(tid, 1)
                raise Retry(err)
            raise err
        return node, entry
    return await s.retrying(attempt)


# ------------------------------------------------------------------ commands

async def do_list(s: Session, args: argparse.Namespace, out: TextIO) -> int:
    body: dict[str, Any] = {"state_filters": [], "producer_id_filters": []}
    version = None
    if args.duration_filter is not None:
        body["duration_filter"] = args.duration_filter
        version = 1
    listed = await list_transactions(s, body, version)
    rows = sorted(([t.transactional_id, node, t.producer_id, t.transaction_state]
                   for node, t in listed), key=lambda r: (r[0], r[1]))
    print_table(LIST_HEADER, rows, out)
    return 0


async def do_describe(s: Session, args: argparse.Namespace, out: TextIO) -> int:
    found = await describe_transaction(s, args.transactional_id)
    assert found is not None
    node, entry = found
    print_table(DESCRIBE_HEADER, [describe_row(node, args.transactional_id, entry,
                                               int(time.time() * 1000))], out)
    return 0


async def do_describe_producers(s: Session, args: argparse.Namespace, out: TextIO) -> int:
    producers = await producers_of(s, args.topic, args.partition, args.broker_id)
    print_table(PRODUCERS_HEADER, [producer_row(p) for p in producers], out)
    return 0


async def _partitions_to_search(s: Session, args: argparse.Namespace
                                ) -> dict[int, list[tuple[str, int]]]:
    """{leader: [(topic, partition)]} of the partitions find-hanging looks at."""
    from clients.protocol.errors import Code

    async def attempt() -> dict[int, list[tuple[str, int]]]:
        cluster = await s.metadata([args.topic] if args.topic is not None else None)
        if args.broker_id is not None and args.broker_id not in cluster.brokers:
            raise CliError(f"Broker {args.broker_id} is not in the cluster "
                           f"(brokers: {', '.join(str(b) for b in sorted(cluster.brokers))})")
        if args.topic is not None:
            code = cluster.topic_error(args.topic)
            if code:
                raise broker_error(code, f"Failed to describe topic {args.topic}")
            names = [args.topic]
        else:
            names = sorted(n for n, t in cluster.topics.items() if t.error_code == 0)
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for name in names:
            topic = cluster.topics[name]
            parts = sorted(topic.partitions)
            if args.partition is not None:
                if args.partition not in topic.partitions:
                    raise broker_error(Code.UNKNOWN_TOPIC_OR_PARTITION,
                                       f"Failed to find partition {name}-{args.partition}")
                parts = [args.partition]
            for p in parts:
                leader = topic.partitions[p].leader
                if args.broker_id is not None and leader != args.broker_id:
                    continue
                if leader < 0:
                    raise Retry(broker_error(Code.LEADER_NOT_AVAILABLE,
                                             f"Failed to find the leader of partition {name}-{p}"))
                by_leader.setdefault(leader, []).append((name, p))
        return by_leader
    return await s.retrying(attempt)


async def do_find_hanging(s: Session, args: argparse.Namespace, out: TextIO) -> int:
    from clients.protocol.errors import for_code

    max_timeout_ms = args.max_transaction_timeout * 60_000
    candidates: dict[tuple[str, int, int], OpenTxn] = {}   # a retried batch adds no twins
    pending = await _partitions_to_search(s, args)

    async def attempt() -> None:
        nonlocal pending
        moved = False
        now_ms = int(time.time() * 1000)
        for node, tps in sorted(pending.items()):
            for i in range(0, len(tps), BATCH):
                batch = tps[i:i + BATCH]
                answers = await describe_producers(s, node, batch)
                for tp in batch:
                    code, entry = answers.get(tp, (0, None))
                    if code:
                        err = broker_error(code, f"Failed to describe producers for partition "
                                                 f"{tp[0]}-{tp[1]} on broker {node}",
                                           entry.error_message if entry is not None else None)
                        if for_code(code).name in LEADER_MOVED:
                            moved = True
                            continue
                        raise err
                    for p in (entry.active_producers if entry is not None else []):
                        if is_candidate(p, now_ms, max_timeout_ms):
                            candidates[(tp[0], tp[1], p.producer_id)] = OpenTxn(tp[0], tp[1], p)
            pending[node] = []
        if moved:   # leadership changed under us: look at the partitions afresh
            candidates.clear()
            pending = await _partitions_to_search(s, args)
            raise Retry(CliError("partition leadership kept changing during the search"))
    await s.retrying(attempt)

    hanging: list[OpenTxn] = []
    if candidates:
        pids = sorted({pid for _, _, pid in candidates})
        listed: dict[int, tuple[int, str]] = {}
        for node, t in await list_transactions(s, {"state_filters": [],
                                                   "producer_id_filters": pids}):
            if t.producer_id in pids:
                listed[t.producer_id] = (node, t.transactional_id)
        described: dict[str, Any] = {}
        for node, tid in sorted(set(listed.values())):
            found = await describe_transaction(s, tid, node, missing_ok=True)
            if found is not None:
                described[tid] = found[1]
        hanging = filter_hanging(list(candidates.values()), listed, described)
    now_ms = int(time.time() * 1000)
    rows = [hanging_row(t, now_ms) for t in sorted(
        hanging, key=lambda t: (t.topic, t.partition, t.producer.producer_id))]
    print_table(HANGING_HEADER, rows, out)
    return 0


async def do_abort(s: Session, args: argparse.Namespace, out: TextIO) -> int:
    from clients.protocol.errors import for_code

    topic, partition = args.topic, args.partition
    if args.start_offset is not None:
        found = [p for p in await producers_of(s, topic, partition, None)
                 if p.current_txn_start_offset == args.start_offset]
        if not found:
            raise CliError(f"Could not find any open transactions starting at offset "
                           f"{args.start_offset} on partition {topic}-{partition}")
        pid, epoch, coord_epoch = (found[0].producer_id, found[0].producer_epoch,
                                   found[0].coordinator_epoch)
    else:
        pid, epoch, coord_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    # A transaction left hanging before its producer's first marker has coordinator epoch
    # -1; 0 is no greater than any epoch a coordinator could have written with.
    coord_epoch = max(0, coord_epoch)
    what = (f"Failed to abort transaction of producer {pid} (epoch {epoch}, coordinator epoch "
            f"{coord_epoch}) on partition {topic}-{partition}")
    body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
                         "topics": [{"name": topic, "partition_indexes": [partition]}],
                         "coordinator_epoch": coord_epoch}]}

    async def attempt() -> None:
        leader = await leader_of(s, topic, partition)
        resp = await s.request(leader, "WriteTxnMarkers", body, 1)
        codes = [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]
        code = next((c for c in codes if c), 0)
        if code:
            err = broker_error(code, what)
            if for_code(code).name in LEADER_MOVED:
                raise Retry(err)
            raise err
        if not codes:
            raise CliError(f"{what}: the leader answered for no partition")
    await s.retrying(attempt)
    return 0


COMMANDS: dict[str, Callable[[Session, argparse.Namespace, TextIO], Awaitable[int]]] = {
    "list": do_list, "describe": do_describe, "describe-producers": do_describe_producers,
    "find-hanging": do_find_hanging, "abort": do_abort}


async def _run(args: argparse.Namespace, out: TextIO) -> int:
    from clients.aio.client import KafkaClient
    from clients.config import resolve

    timeout = command_timeout(args)
    client = KafkaClient(resolve("admin", client_config(args, "admin")))
    try:
        await client.start(timeout)
        return await COMMANDS[args.command](Session(client, timeout), args, out)
    finally:
        await client.close()


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    timeout = command_timeout(args)
    guard = exit_after(timeout * 3 + 10, ERROR_PREFIX, f"running {args.command}")
    try:
        wait_reachable(args.bootstrap_server, timeout)
        return asyncio.run(_run(args, out or sys.stdout))
    finally:
        guard.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
