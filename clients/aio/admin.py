"""AsyncAdminClient: topics, partitions, configs, consumer groups, offsets and records.

Each method sends the Kafka admin requests its job needs to the broker that must answer them,
as Kafka's AdminClient does:

  - CreateTopics, DeleteTopics, CreatePartitions: the controller (Metadata's controller_id);
  - DescribeConfigs / IncrementalAlterConfigs: any broker for topics, the named broker for
    broker resources;
  - ListGroups: every broker (each knows only the groups it coordinates), answers merged;
  - DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit: the group's coordinator;
  - ListOffsets, DeleteRecords: each partition's leader;
  - DescribeTransactions, EndTxn (completing a prepared transaction): the transactional id's
    coordinator (FindCoordinator key_type 1);
  - CreateAcls, DescribeAcls, DeleteAcls, DescribeUserScramCredentials,
    AlterUserScramCredentials: any broker (the least loaded), each at the highest version both
    sides speak (types in `acl_types.py` and `scram_types.py`).

Errors: a method raises the error-table class (`clients.protocol.errors`) of the first
failure, its message naming the resource ("topic nope", "group g1", "partition t-3").
Transient trouble - NOT_CONTROLLER, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, a lost connection - is retried inside with a
growing backoff (retry.backoff.ms up to retry.backoff.max.ms), after refreshing metadata or
forgetting the coordinator, until the call's `timeout` (default.api.timeout.ms when the method
takes none) runs out; then KafkaTimeoutError names the last error. A call that touches several
resources is not atomic: resources before the failing one may have been changed.

create_topics / create_partitions / delete_topics return once metadata shows the change (new
partitions with leaders, deleted topics gone), so a produce right after works.

Single event loop, not thread-safe; `clients.admin.AdminClient` is the blocking facade.
"""
from __future__ import annotations

import asyncio
import struct
import uuid
from typing import (Any, Awaitable, Callable, Iterable, Literal, Mapping, NamedTuple, Sequence,
                    TypeVar)

from clients.config import resolve
from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.messages import api
from clients.protocol.schema import Struct
from clients.types import (NewTopic, OffsetAndMetadata, OffsetAndTimestamp, PreparedTransaction,
                           TopicPartition)

from .acl_types import (AclBinding, AclBindingFilter, binding_from_match,
                        bindings_from_describe, check_creatable, create_acls_request,
                        delete_acls_request, describe_acls_request)
from .client import KafkaClient
from .connection import BrokerConnection
from .errors import KafkaConnectionError, KafkaTimeoutError
from .metadata import BrokerInfo, ClusterMetadata
from .pool import Node
from .log_dir_types import (LogDirDescription, TopicPartitionReplica, alter_log_dirs_request,
                            log_dirs_from_response)
from .reassignment import (PartitionReassignment, alter_reassignments_request,
                           list_reassignments_request, reassignments_from_response)
from .scram_types import (ScramCredentialInfo, ScramMechanism, UserScramCredentialAlteration,
                          alter_scram_request, describe_scram_request)
from .transactions import coordinated

__all__ = ["AsyncAdminClient", "ClusterDescription", "BrokerInfo", "TopicDescription",
           "PartitionDescription", "ConfigEntry", "GroupListing", "GroupDescription",
           "MemberDescription", "TransactionDescription", "decode_consumer_assignment"]

T = TypeVar("T")
ResourceType = Literal["topic", "broker"]
OffsetSpec = Literal["earliest", "latest"] | int


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


class PartitionDescription(NamedTuple):
    partition: int
    leader: int                   # -1: no leader right now
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


class TopicDescription(NamedTuple):
    name: str
    internal: bool
    partitions: list[PartitionDescription]
    topic_id: uuid.UUID | None = None


class ConfigEntry(NamedTuple):
    name: str
    value: str | None              # None for sensitive values
    source: str                    # Kafka's ConfigEntry.ConfigSource name, e.g. DEFAULT_CONFIG
    is_default: bool
    read_only: bool
    sensitive: bool


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str             # "consumer" for consumer groups, "" for offset-only groups
    state: str | None              # None when the broker is too old to say


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str                  # the assignor chosen, while the group is Stable
    members: list[MemberDescription]
    coordinator: int = -1          # the broker that answered: the group's coordinator


class TransactionDescription(NamedTuple):
    transactional_id: str
    state: str                     # Kafka's names: Empty, Ongoing, PrepareCommit, CompleteCommit, ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int                  # -1 unless a transaction is open
    partitions: list[TopicPartition]


_RESOURCE_TYPES = {"topic": 2, "broker": 4}
# Kafka's AdminClient ConfigEntry.ConfigSource names, by wire id.
_CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                   3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                   5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                   7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
_OFFSET_SPECS = {"earliest": -2, "latest": -1}
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_OP_SET, _OP_DELETE = 0, 1

# Codes worth another attempt after a metadata refresh / coordinator lookup. Not Kafka's
# whole `retriable` set: UNKNOWN_TOPIC_OR_PARTITION is retriable for a producer waiting on
# a topic, but an admin asked about a missing topic should hear so at once.
_RETRY_CODES = frozenset({
    Code.NOT_CONTROLLER, Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE,
    Code.COORDINATOR_LOAD_IN_PROGRESS, Code.LEADER_NOT_AVAILABLE, Code.NOT_LEADER_OR_FOLLOWER,
    Code.REQUEST_TIMED_OUT, Code.NETWORK_EXCEPTION, Code.FENCED_LEADER_EPOCH,
    Code.UNKNOWN_LEADER_EPOCH, Code.REPLICA_NOT_AVAILABLE, Code.KAFKA_STORAGE_ERROR})
_COORDINATOR_MOVED = frozenset({Code.NOT_COORDINATOR, Code.COORDINATOR_NOT_AVAILABLE})


class _Retry(Exception):
    """One attempt hit a transient problem; `cause` says which."""

    def __init__(self, cause: BaseException | str):
        super().__init__(str(cause))
        self.cause = cause


def _error(code: int, resource: str, message: str | None = None) -> KafkaError:
    return for_code(code)(f"{resource}: {message}" if message else resource)


def decode_consumer_assignment(data: bytes | None) -> list[TopicPartition]:
    """The partitions in a ConsumerProtocol Assignment (int16 version, array of (topic
    string, int32 partitions array), user_data bytes; later versions only add fields at
    the end). Empty or undecodable bytes give []."""
    if not data or len(data) < 6:
        return []
    try:
        pos = 2                                    # the version: every one starts alike
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: list[TopicPartition] = []
        for _ in range(max(n_topics, 0)):
            (name_len,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = bytes(data[pos:pos + name_len]).decode("utf-8")
            pos += name_len
            (n_parts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(n_parts, 0)}i", data, pos)
            pos += 4 * max(n_parts, 0)
            out.extend(TopicPartition(topic, p) for p in parts)
        return sorted(out)
    except (struct.error, UnicodeDecodeError):
        return []


class AsyncAdminClient:
    """Kafka admin operations as coroutines; see the module docstring.

    `AsyncAdminClient(config=None, **kwargs)` takes Kafka's admin keys (bootstrap.servers,
    client.id, request.timeout.ms, default.api.timeout.ms, retry.backoff.ms, ...) as a dict
    or as Python keywords. The first call connects; `close()` (or `async with`) releases the
    connections. One event loop, not thread-safe.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        self.config = resolve("admin", config, **kwargs)
        self._client = KafkaClient(self.config)
        self.default_timeout: float = self.config.ms("default.api.timeout.ms")
        self._start_lock: asyncio.Lock | None = None

    async def start(self) -> None:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            await self._client.start()

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> "AsyncAdminClient":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ------------------------------------------------------------------ plumbing

    def _deadline(self, timeout: float | None) -> float:
        return asyncio.get_running_loop().time() + (
            self.default_timeout if timeout is None else timeout)

    def _remaining(self, deadline: float) -> float:
        return max(0.01, deadline - asyncio.get_running_loop().time())

    async def _retrying(self, what: str, deadline: float,
                        attempt: Callable[[], Awaitable[T]]) -> T:
        """Run `attempt` until it returns; a `_Retry` or connection error is retried with
        a growing backoff until `deadline`, other errors propagate."""
        await self.start()
        loop = asyncio.get_running_loop()
        backoff = self._client.retry_backoff
        while True:
            try:
                return await attempt()
            except (_Retry, KafkaConnectionError, KafkaTimeoutError) as e:
                cause = e.cause if isinstance(e, _Retry) else e
                if loop.time() + backoff >= deadline:
                    raise KafkaTimeoutError(f"{what}: not done before the timeout "
                                            f"(last error: {cause})") from (
                        cause if isinstance(cause, BaseException) else None)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._client.retry_backoff_max)

    async def _send(self, node: Node | None, api_name: str, build: Callable[[int], Any],
                    deadline: float) -> Struct:
        """One request to `node` (None: the least loaded broker), its body built for the
        version both sides speak."""
        if node is None:
            node = self._client.least_loaded_node()
        conn = await self._client.connection(node)
        version = conn.version_for(api_name)
        return await conn.request(api_name, build(version), version=version,
                                  timeout=min(self._client.request_timeout,
                                              self._remaining(deadline)))

    async def _metadata(self, topics: Iterable[str] | None, deadline: float) -> ClusterMetadata:
        """A fresh Metadata answer for `topics` (None: all), from any broker."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False}
        resp = await self._client.request_any("Metadata", body,
                                              timeout=self._remaining(deadline))
        cluster = ClusterMetadata.from_response(resp)
        for b in cluster.brokers.values():
            self._client.pool.set_address(b.node_id, b.host, b.port)
        return cluster

    async def _controller(self, deadline: float) -> int:
        cluster = await self._metadata([], deadline)
        if cluster.controller_id < 0 or cluster.controller_id not in cluster.brokers:
            raise _Retry("no controller elected")
        return cluster.controller_id

    async def _wait_for_metadata(self, what: str, names: list[str], deadline: float,
                                 ready: Callable[[ClusterMetadata, str], bool]) -> None:
        async def attempt() -> None:
            cluster = await self._metadata(names, deadline)
            waiting = [n for n in names if not ready(cluster, n)]
            if waiting:
                raise _Retry(f"metadata does not show {what} yet for {', '.join(waiting)}")
        await self._retrying(what, deadline, attempt)

    async def _to_controller(self, what: str, api_name: str, names: list[str],
                             build: Callable[[int, list[str]], Any], results_field: str,
                             deadline: float) -> None:
        """Send a per-topic controller request for `names`, resending those answered
        NOT_CONTROLLER (after a metadata refresh) until all succeed; raise the first error."""
        pending = list(dict.fromkeys(names))

        async def attempt() -> None:
            controller = await self._controller(deadline)
            resp = await self._send(controller, api_name, lambda v: build(v, pending), deadline)
            retry: list[str] = []
            for r in resp[results_field]:
                code = r.error_code
                if code == 0:
                    continue
                if code in _RETRY_CODES:
                    retry.append(r.name)
                    continue
                raise _error(code, f"topic {r.name}", r.get("error_message"))
            pending[:] = retry
            if pending:
                raise _Retry(f"{api_name} for {', '.join(pending)}")
        await self._retrying(what, deadline, attempt)

    # ------------------------------------------------------------------ topics

    async def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False,
                            timeout: float = 30.0) -> None:
        """Create topics; returns once metadata shows every partition with a leader.
        Raises e.g. TopicAlreadyExistsError("topic t: ..."), InvalidPartitionsError."""
        deadline = self._deadline(timeout)
        by_name = {t.name: t for t in new_topics}

        def build(version: int, names: list[str]) -> dict:
            topics = []
            for name in names:
                t = by_name[name]
                assignments = [{"partition_index": p, "broker_ids": list(b)}
                               for p, b in sorted((t.replica_assignment or {}).items())]
                topics.append({
                    "name": name,
                    "num_partitions": -1 if assignments else t.num_partitions,
                    "replication_factor": -1 if assignments else t.replication_factor,
                    "assignments": assignments,
                    "configs": [{"name": k, "value": v} for k, v in (t.config or {}).items()]})
            return {"topics": topics, "timeout_ms": int(self._remaining(deadline) * 1000),
                    "validate_only": validate_only}

        await self._to_controller("create_topics", "CreateTopics", list(by_name), build,
                                  "topics", deadline)
        if validate_only:
            return

        def ready(cluster: ClusterMetadata, name: str) -> bool:
            t = cluster.topic(name)
            want = by_name[name].num_partitions
            return (t is not None and len(t.partitions) > 0
                    and (want < 0 or len(t.partitions) >= want)
                    and all(p.leader >= 0 for p in t.partitions.values()))
        await self._wait_for_metadata("create_topics", list(by_name), deadline, ready)

    async def delete_topics(self, names: list[str], timeout: float = 30.0) -> None:
        """Delete topics; returns once metadata no longer shows them.
        Raises UnknownTopicOrPartitionError("topic t: ...") for a missing one."""
        deadline = self._deadline(timeout)

        def build(version: int, pending: list[str]) -> dict:
            body: dict[str, Any] = {"timeout_ms": int(self._remaining(deadline) * 1000)}
            if version >= 6:
                body["topics"] = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in pending]
            else:
                body["topic_names"] = list(pending)
            return body

        await self._to_controller("delete_topics", "DeleteTopics", names, build, "responses",
                                  deadline)
        await self._wait_for_metadata(
            "delete_topics", list(names), deadline,
            lambda cluster, n: cluster.topic_error(n) == Code.UNKNOWN_TOPIC_OR_PARTITION)

    async def create_partitions(self, new_counts: Mapping[str, int], validate_only: bool = False,
                                timeout: float = 30.0) -> None:
        """Grow topics to `new_counts[topic]` partitions (InvalidPartitionsError when not
        more than now); returns once the new partitions have leaders."""
        deadline = self._deadline(timeout)

        def build(version: int, pending: list[str]) -> dict:
            return {"topics": [{"name": n, "count": new_counts[n], "assignments": None}
                               for n in pending],
                    "timeout_ms": int(self._remaining(deadline) * 1000),
                    "validate_only": validate_only}

        await self._to_controller("create_partitions", "CreatePartitions", list(new_counts),
                                  build, "results", deadline)
        if validate_only:
            return

        def ready(cluster: ClusterMetadata, name: str) -> bool:
            t = cluster.topic(name)
            return (t is not None and len(t.partitions) >= new_counts[name]
                    and all(p.leader >= 0 for p in t.partitions.values()))
        await self._wait_for_metadata("create_partitions", list(new_counts), deadline, ready)

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        """Sorted names of the cluster's topics."""
        deadline = self._deadline(None)
        cluster = await self._retrying("list_topics", deadline,
                                       lambda: self._metadata(None, deadline))
        return sorted(n for n, t in cluster.topics.items()
                      if t.error_code == 0 and (include_internal or not t.is_internal))

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and live brokers (DescribeCluster, else Metadata)."""
        deadline = self._deadline(None)

        async def attempt() -> ClusterDescription:
            node = self._client.least_loaded_node()
            conn = await self._client.connection(node)
            if "DescribeCluster" in _supported(conn):
                resp = await self._send(node, "DescribeCluster",
                                        lambda v: {"include_cluster_authorized_operations": False,
                                                   "endpoint_type": 1}, deadline)
                if resp.error_code:
                    raise _error(resp.error_code, "cluster", resp.error_message)
                brokers = [BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
                return ClusterDescription(resp.cluster_id, resp.controller_id,
                                          sorted(brokers, key=lambda b: b.node_id))
            cluster = await self._metadata([], deadline)
            return ClusterDescription(cluster.cluster_id, cluster.controller_id,
                                      sorted(cluster.brokers.values(), key=lambda b: b.node_id))
        return await self._retrying("describe_cluster", deadline, attempt)

    async def describe_topics(self, names: list[str] | None = None
                              ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of `names` (None: every non-internal topic).
        Raises UnknownTopicOrPartitionError("topic t") for a missing one."""
        deadline = self._deadline(None)

        async def attempt() -> dict[str, TopicDescription]:
            cluster = await self._metadata(names, deadline)
            wanted = names if names is not None else [
                n for n, t in cluster.topics.items() if t.error_code == 0 and not t.is_internal]
            out = {}
            for name in wanted:
                code = cluster.topic_error(name)
                if code in _RETRY_CODES:
                    raise _Retry(_error(code, f"topic {name}"))
                if code:
                    raise _error(code, f"topic {name}")
                t = cluster.topics[name]
                out[name] = TopicDescription(name, t.is_internal, [
                    PartitionDescription(p.partition, p.leader, list(p.replicas), list(p.isr),
                                         list(p.offline_replicas))
                    for _, p in sorted(t.partitions.items())],
                    t.topic_id if isinstance(t.topic_id, uuid.UUID) else None)
            return out
        return await self._retrying("describe_topics", deadline, attempt)

    # ------------------------------------------------------------------ configs

    def _resource(self, resource_type: ResourceType | int, name: str) -> tuple[int, int | None]:
        """(wire type, node to ask): broker resources go to that broker."""
        rtype = resource_type if isinstance(resource_type, int) else _RESOURCE_TYPES.get(
            str(resource_type).lower())
        if rtype is None:
            raise ValueError(f"resource_type must be 'topic' or 'broker', not {resource_type!r}")
        node = int(name) if rtype == _RESOURCE_TYPES["broker"] and name.strip() else None
        return rtype, node

    async def describe_configs(self, resource_type: ResourceType, name: str,
                               keys: list[str] | None = None) -> dict[str, ConfigEntry]:
        """Every config (or only `keys`) of a topic or broker, with its source."""
        rtype, node = self._resource(resource_type, name)
        deadline = self._deadline(None)

        async def attempt() -> dict[str, ConfigEntry]:
            resp = await self._send(node, "DescribeConfigs", lambda v: {
                "resources": [{"resource_type": rtype, "resource_name": name,
                               "configuration_keys": keys}],
                "include_synonyms": False, "include_documentation": False}, deadline)
            res = resp.results[0]
            if res.error_code:
                err = _error(res.error_code, f"{resource_type} {name}", res.error_message)
                raise _Retry(err) if res.error_code in _RETRY_CODES else err
            out = {}
            for c in res.configs:
                source_id = c.get("config_source", -1)
                if source_id is None or source_id < 0:      # v0: only is_default is known
                    source_id = 5 if c.get("is_default") else (1 if rtype == 2 else 4)
                out[c.name] = ConfigEntry(c.name, c.value, _CONFIG_SOURCES.get(source_id, "UNKNOWN"),
                                          source_id == 5, c.read_only, c.is_sensitive)
            return out
        return await self._retrying("describe_configs", deadline, attempt)

    async def alter_configs(self, resource_type: ResourceType, name: str,
                            set: Mapping[str, str] | None = None,
                            delete: Iterable[str] | None = None) -> None:
        """IncrementalAlterConfigs: set the keys in `set`, return those in `delete` to
        their default. Other keys keep their values."""
        rtype, node = self._resource(resource_type, name)
        ops = ([{"name": k, "config_operation": _OP_SET, "value": str(v)}
                for k, v in (set or {}).items()]
               + [{"name": k, "config_operation": _OP_DELETE, "value": None}
                  for k in (delete or ())])
        deadline = self._deadline(None)

        async def attempt() -> None:
            resp = await self._send(node, "IncrementalAlterConfigs", lambda v: {
                "resources": [{"resource_type": rtype, "resource_name": name, "configs": ops}],
                "validate_only": False}, deadline)
            res = resp.responses[0]
            if res.error_code:
                err = _error(res.error_code, f"{resource_type} {name}", res.error_message)
                raise _Retry(err) if res.error_code in _RETRY_CODES else err
        await self._retrying("alter_configs", deadline, attempt)

    # ------------------------------------------------------------------ groups

    async def list_groups(self) -> list[GroupListing]:
        """Every group of the cluster (ListGroups to every broker, merged), by group id."""
        deadline = self._deadline(None)
        found: dict[str, GroupListing] = {}
        done: set[int] = set()

        async def ask(node: int) -> None:
            resp = await self._send(node, "ListGroups", lambda v: {"states_filter": []},
                                    deadline)
            if resp.error_code in _RETRY_CODES:
                raise _Retry(_error(resp.error_code, f"ListGroups on broker {node}"))
            if resp.error_code:
                raise _error(resp.error_code, f"ListGroups on broker {node}")
            for g in resp.groups:
                found[g.group_id] = GroupListing(g.group_id, g.protocol_type,
                                                 g.get("group_state"))
            done.add(node)

        async def attempt() -> None:
            cluster = await self._metadata([], deadline)
            todo = [n for n in cluster.brokers if n not in done]
            results = await asyncio.gather(*(ask(n) for n in todo), return_exceptions=True)
            retry = None
            for r in results:
                if isinstance(r, (_Retry, KafkaConnectionError, KafkaTimeoutError)):
                    retry = r
                elif isinstance(r, BaseException):
                    raise r
            if retry is not None:
                raise retry
        await self._retrying("list_groups", deadline, attempt)
        return sorted(found.values())

    async def _group_call(self, what: str, group_id: str, deadline: float,
                          call: Callable[[int], Awaitable[T]]) -> T:
        """`call(coordinator)`, retried when the coordinator moved or is loading. `call`
        raises `_Retry(error)` for such codes; a moved coordinator is looked up again."""
        async def attempt() -> T:
            node = await self._client.coordinator(group_id, 0, timeout=self._remaining(deadline))
            try:
                return await call(node)
            except _Retry as e:
                if isinstance(e.cause, KafkaError) and e.cause.code in _COORDINATOR_MOVED:
                    self._client.forget_coordinator(group_id)
                raise
            except KafkaConnectionError:
                self._client.forget_coordinator(group_id)
                raise
        return await self._retrying(what, deadline, attempt)

    @staticmethod
    def _check_group_code(code: int, group_id: str, message: str | None = None) -> None:
        if code in _RETRY_CODES:
            raise _Retry(_error(code, f"group {group_id}", message))
        if code:
            raise _error(code, f"group {group_id}", message)

    async def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group.
        Raises GroupIdNotFoundError("group g") for a group the cluster does not know."""
        deadline = self._deadline(None)

        async def describe_one(group_id: str) -> GroupDescription:
            async def call(node: int) -> GroupDescription:
                resp = await self._send(node, "DescribeGroups", lambda v: {
                    "groups": [group_id], "include_authorized_operations": False}, deadline)
                g = resp.groups[0]
                self._check_group_code(g.error_code, group_id)
                if g.group_state == "Dead":
                    raise for_code(Code.GROUP_ID_NOT_FOUND)(f"group {group_id}")
                consumer = g.protocol_type == "consumer"
                members = [MemberDescription(
                    m.member_id, m.get("group_instance_id"), m.client_id, m.client_host,
                    decode_consumer_assignment(m.member_assignment) if consumer else [])
                    for m in g.members]
                return GroupDescription(group_id, g.group_state, g.protocol_type,
                                        g.protocol_data, members, node)
            return await self._group_call("describe_groups", group_id, deadline, call)

        results = await asyncio.gather(*(describe_one(g) for g in group_ids),
                                       return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r                 # the first failure in the order asked
        return dict(zip(group_ids, results))  # type: ignore[arg-type]

    async def delete_groups(self, group_ids: list[str]) -> None:
        """Delete empty groups and their offsets (NonEmptyGroupError while a group has
        members, GroupIdNotFoundError for an unknown one)."""
        deadline = self._deadline(None)

        async def delete_one(group_id: str) -> None:
            async def call(node: int) -> None:
                resp = await self._send(node, "DeleteGroups",
                                        lambda v: {"groups_names": [group_id]}, deadline)
                self._check_group_code(resp.results[0].error_code, group_id)
            await self._group_call("delete_groups", group_id, deadline, call)

        for group_id in dict.fromkeys(group_ids):
            await delete_one(group_id)

    async def list_group_offsets(self, group_id: str,
                                 partitions: list[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all of them when `partitions` is None).
        Partitions without a committed offset are left out."""
        deadline = self._deadline(None)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]

        def build(version: int) -> dict:
            if version >= 8:
                return {"groups": [{"group_id": group_id, "topics": topics}],
                        "require_stable": True}
            return {"group_id": group_id, "topics": topics, "require_stable": True}

        async def call(node: int) -> dict[TopicPartition, OffsetAndMetadata]:
            resp = await self._send(node, "OffsetFetch", build, deadline)
            body = resp.groups[0] if resp.get("groups") else resp
            self._check_group_code(body.get("error_code", 0), group_id)
            out = {}
            for t in body.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        if p.error_code in _RETRY_CODES or p.error_code == Code.UNSTABLE_OFFSET_COMMIT:
                            raise _Retry(_error(p.error_code, f"group {group_id} partition {tp}"))
                        raise _error(p.error_code, f"group {group_id} partition {tp}")
                    if p.committed_offset >= 0:
                        out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                    p.get("committed_leader_epoch", -1))
            return out
        return await self._group_call("list_group_offsets", group_id, deadline, call)

    async def alter_group_offsets(self, group_id: str,
                                  offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
                                  ) -> None:
        """Set a group's committed offsets, as a commit from outside the group (generation
        -1, no member id). The group must have no members: NonEmptyGroupError otherwise."""
        deadline = self._deadline(None)
        by_topic: dict[str, list[dict]] = {}
        for tp, o in offsets.items():
            om = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        body = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def call(node: int) -> None:
            resp = await self._send(node, "OffsetCommit", lambda v: body, deadline)
            for t in resp.topics:
                for p in t.partitions:
                    code = p.error_code
                    where = f"group {group_id} partition {t.name}-{p.partition_index}"
                    if code in (Code.UNKNOWN_MEMBER_ID, Code.ILLEGAL_GENERATION,
                                Code.REBALANCE_IN_PROGRESS):
                        # Only members may commit while a group has any.
                        raise for_code(Code.NON_EMPTY_GROUP)(
                            f"group {group_id}: offsets can only be altered while the group "
                            f"has no active members")
                    if code in _RETRY_CODES:
                        raise _Retry(_error(code, where))
                    if code:
                        raise _error(code, where)
        await self._group_call("alter_group_offsets", group_id, deadline, call)

    # ------------------------------------------------------------------ partitions' leaders

    async def _on_leaders(self, what: str, tps: Iterable[TopicPartition], deadline: float,
                          call: Callable[[int, list[TopicPartition]],
                                         Awaitable[dict[TopicPartition, tuple[int, T]]]]
                          ) -> dict[TopicPartition, T]:
        """Run `call(leader, partitions)` for the partitions each broker leads; it returns
        {tp: (error code, value)}. Partitions answered with a leadership error (or whose
        leader was unreachable) are retried after a metadata refresh."""
        pending = set(tps)
        results: dict[TopicPartition, T] = {}

        async def attempt() -> None:
            cluster = await self._metadata({tp.topic for tp in pending}, deadline)
            by_leader: dict[int, list[TopicPartition]] = {}
            last: BaseException | None = None
            for tp in sorted(pending):
                code = cluster.topic_error(tp.topic)
                if code and code not in _RETRY_CODES:
                    raise _error(code, f"topic {tp.topic}")
                info = cluster.partition(tp.topic, tp.partition)
                if code or (info is not None and info.leader < 0):
                    last = _error(code or Code.LEADER_NOT_AVAILABLE, f"partition {tp}")
                    continue
                if info is None:
                    raise _error(Code.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp}")
                by_leader.setdefault(info.leader, []).append(tp)
            answers = await asyncio.gather(*(call(n, ps) for n, ps in by_leader.items()),
                                           return_exceptions=True)
            for answer in answers:
                if isinstance(answer, (KafkaConnectionError, KafkaTimeoutError)):
                    last = answer
                    continue
                if isinstance(answer, BaseException):
                    raise answer
                for tp, (code, value) in answer.items():
                    if code == 0:
                        results[tp] = value
                        pending.discard(tp)
                    elif code in _RETRY_CODES:
                        last = _error(code, f"partition {tp}")
                    else:
                        raise _error(code, f"partition {tp}")
            if pending:
                raise _Retry(last or "partitions still pending")
        await self._retrying(what, deadline, attempt)
        return results

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec | str],
                           isolation_level: str = "read_uncommitted"
                           ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by spec: "earliest" (log start), "latest" (end; the last stable offset
        under read_committed) or a timestamp in ms (first offset at or after it; offset -1
        when there is none)."""
        if isolation_level not in _ISOLATION:
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        wire: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                if spec not in _OFFSET_SPECS:
                    raise ValueError(f"offset spec for {tp} must be 'earliest', 'latest' or "
                                     f"a timestamp in ms, not {spec!r}")
                wire[tp] = _OFFSET_SPECS[spec]
            else:
                wire[tp] = int(spec)
        deadline = self._deadline(None)

        async def call(node: int, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp]]:
            by_topic: dict[str, list[dict]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "timestamp": wire[tp]})
            resp = await self._send(node, "ListOffsets", lambda v: {
                "replica_id": -1, "isolation_level": _ISOLATION[isolation_level],
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                deadline)
            return {TopicPartition(t.name, p.partition_index): (
                p.error_code, OffsetAndTimestamp(p.offset, p.timestamp, p.get("leader_epoch", -1)))
                for t in resp.topics for p in t.partitions}
        return await self._on_leaders("list_offsets", wire, deadline, call)

    async def delete_records(self, before: Mapping[TopicPartition, int]
                             ) -> dict[TopicPartition, int]:
        """Delete every record before `before[tp]` (-1: the high watermark); returns the new
        low watermarks. OffsetOutOfRangeError when an offset is past the high watermark."""
        deadline = self._deadline(None)

        async def call(node: int, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, int]]:
            by_topic: dict[str, list[dict]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(
                    {"partition_index": tp.partition, "offset": int(before[tp])})
            resp = await self._send(node, "DeleteRecords", lambda v: {
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "timeout_ms": int(self._remaining(deadline) * 1000)}, deadline)
            return {TopicPartition(t.name, p.partition_index): (p.error_code, p.low_watermark)
                    for t in resp.topics for p in t.partitions}
        return await self._on_leaders("delete_records", before, deadline, call)

    # ------------------------------------------------------------------ transactions

    async def describe_transactions(self, transactional_ids: Iterable[str],
                                    timeout: float | None = None
                                    ) -> dict[str, TransactionDescription]:
        """The coordinator's state of each transactional id; ids it does not know are left
        out."""
        await self.start()
        deadline = self._deadline(timeout)
        out: dict[str, TransactionDescription] = {}
        for tid in transactional_ids:
            def code(resp: Struct) -> int:
                c = resp.transaction_states[0].error_code
                return 0 if c == Code.TRANSACTIONAL_ID_NOT_FOUND else c
            resp = await coordinated(self._client, tid, 1, "DescribeTransactions",
                                     {"transactional_ids": [tid]}, deadline, code)
            e = resp.transaction_states[0]
            if e.error_code == Code.TRANSACTIONAL_ID_NOT_FOUND:
                continue
            out[tid] = TransactionDescription(
                tid, e.transaction_state, e.producer_id, e.producer_epoch,
                e.transaction_timeout_ms, e.transaction_start_time_ms,
                sorted(TopicPartition(t.topic, p) for t in e.topics for p in t.partitions))
        return out

    async def complete_transaction(self, prepared: PreparedTransaction, commit: bool = True,
                                   timeout: float | None = None) -> None:
        """Commit (or abort) a transaction another process prepared
        (`Producer.prepare_transaction()`): EndTxn with its producer id and epoch. Safe to
        repeat: ending it the same way again succeeds. InvalidTxnStateError when it was
        ended the other way, ProducerFencedError / InvalidProducerEpochError when a newer
        producer took the transactional id (which aborts the prepared transaction)."""
        if prepared.empty:
            return
        await self.start()
        await coordinated(self._client, prepared.transactional_id, 1, "EndTxn", {
            "transactional_id": prepared.transactional_id,
            "producer_id": prepared.producer_id, "producer_epoch": prepared.producer_epoch,
            "committed": commit}, self._deadline(timeout))

    # ------------------------------------------------------------------ ACLs

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create ACLs (CreateAcls to any broker); creating one that exists is no error.
        Raises the first binding's error, its message naming the binding:
        SecurityDisabledError when the cluster has no authorizer,
        ClusterAuthorizationFailedError without Alter on the cluster, InvalidRequestError for
        a binding with an ANY/UNKNOWN field (before anything is sent), UnsupportedVersionError
        for a PREFIXED binding to a broker that speaks only v0."""
        todo = list(bindings)
        for b in todo:
            check_creatable(b)
        if not todo:
            return
        deadline = self._deadline(None)

        async def attempt() -> None:
            resp = await self._send(None, "CreateAcls", lambda v: create_acls_request(todo, v),
                                    deadline)
            for b, r in zip(todo, resp.results):
                if r.error_code:
                    raise _error(r.error_code, f"acl {b}", r.get("error_message"))
        await self._retrying("create_acls", deadline, attempt)

    async def describe_acls(self, filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs `filter` selects (None: every ACL), sorted. SecurityDisabledError when the
        cluster has no authorizer."""
        f = filter if filter is not None else AclBindingFilter.ANY
        deadline = self._deadline(None)

        async def attempt() -> list[AclBinding]:
            resp = await self._send(None, "DescribeAcls", lambda v: describe_acls_request(f, v),
                                    deadline)
            if resp.error_code:
                raise _error(resp.error_code, f"acls {f}", resp.get("error_message"))
            return sorted(set(bindings_from_describe(resp)))
        return await self._retrying("describe_acls", deadline, attempt)

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL each filter selects (DeleteAcls to any broker); returns, per
        filter in order, the bindings it deleted. Raises the first error (a filter's, or a
        matched binding's), its message naming the filter or binding."""
        todo = list(filters)
        if not todo:
            return []
        deadline = self._deadline(None)

        async def attempt() -> list[list[AclBinding]]:
            resp = await self._send(None, "DeleteAcls", lambda v: delete_acls_request(todo, v),
                                    deadline)
            out = []
            for f, r in zip(todo, resp.filter_results):
                if r.error_code:
                    raise _error(r.error_code, f"acl filter {f}", r.get("error_message"))
                deleted = []
                for m in r.matching_acls:
                    b = binding_from_match(m)
                    if m.error_code:
                        raise _error(m.error_code, f"acl {b}", m.get("error_message"))
                    deleted.append(b)
                out.append(sorted(deleted))
            return out
        return await self._retrying("delete_acls", deadline, attempt)

    # ------------------------------------------------------------------ SCRAM credentials

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                              ) -> dict[str, list[ScramCredentialInfo]]:
        """Each user's SCRAM mechanisms and iterations (never the credentials). `users` None
        (or empty): every user that has one. A named user without credentials raises
        ResourceNotFoundError("user alice: ..."); the first such error in the order asked
        is raised."""
        names = None if users is None else list(dict.fromkeys(users))
        deadline = self._deadline(None)

        async def attempt() -> dict[str, list[ScramCredentialInfo]]:
            resp = await self._send(None, "DescribeUserScramCredentials",
                                    lambda v: describe_scram_request(names), deadline)
            if resp.error_code:
                raise _error(resp.error_code, "user SCRAM credentials",
                             resp.get("error_message"))
            by_user = {r.user: r for r in resp.results}
            for name in names or ():
                r = by_user.get(name)
                if r is None:
                    raise _error(Code.RESOURCE_NOT_FOUND, f"user {name}",
                                 "not in the broker's answer")
            out: dict[str, list[ScramCredentialInfo]] = {}
            for user in (names or sorted(by_user)):
                r = by_user[user]
                if r.error_code:
                    raise _error(r.error_code, f"user {user}", r.get("error_message"))
                out[user] = sorted(
                    ScramCredentialInfo(ScramMechanism(c.mechanism), c.iterations)
                    for c in r.credential_infos)
            return out
        return await self._retrying("describe_user_scram_credentials", deadline, attempt)

    async def alter_user_scram_credentials(
            self, alterations: Iterable[UserScramCredentialAlteration]) -> None:
        """Upsert and delete users' SCRAM credentials (AlterUserScramCredentials to any
        broker). The salt is random unless an upsertion names one; the password is sent only
        as SaltedPassword. Raises the first user's error, e.g.
        UnacceptableCredentialError("user alice: ...") for iterations out of range,
        ResourceNotFoundError for deleting a credential that does not exist,
        DuplicateResourceError for one user and mechanism named twice."""
        todo = list(alterations)
        if not todo:
            return
        body = alter_scram_request(todo)         # one salt per upsertion, kept across retries
        users = list(dict.fromkeys(a.user for a in todo))
        deadline = self._deadline(None)

        async def attempt() -> None:
            resp = await self._send(None, "AlterUserScramCredentials", lambda v: body,
                                    deadline)
            codes = {r.user: r for r in resp.results}
            for user in users:
                r = codes.get(user)
                if r is not None and r.error_code:
                    raise _error(r.error_code, f"user {user}", r.get("error_message"))
        await self._retrying("alter_user_scram_credentials", deadline, attempt)

    # ------------------------------------------------------------------ leader election

    async def elect_leaders(self, election_type: Literal["preferred", "unclean"],
                            partitions: Iterable[TopicPartition] | None = None,
                            timeout: float | None = None
                            ) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders to the controller, as Kafka's Admin.electLeaders: per partition None
        (elected) or the error why not, e.g. ElectionNotNeededError (the right leader already
        leads), PreferredLeaderNotAvailableError, EligibleLeadersNotAvailableError,
        UnknownTopicOrPartitionError. `partitions` None: every partition, and only those
        elected or failed are in the answer. A request refused as a whole raises (e.g.
        ClusterAuthorizationFailedError); NOT_CONTROLLER is retried after a metadata refresh."""
        kind = {"preferred": 0, "unclean": 1}[election_type]
        asked = None if partitions is None else list(dict.fromkeys(partitions))
        deadline = self._deadline(timeout)
        topics: dict[str, list[int]] = {}
        for tp in asked or ():
            topics.setdefault(tp.topic, []).append(tp.partition)

        def build(version: int) -> dict:
            if version == 0 and kind != 0:
                raise _error(Code.UNSUPPORTED_VERSION, "unclean leader election",
                             "the broker speaks ElectLeaders v0 only")
            return {"election_type": kind,
                    "topic_partitions": None if asked is None else
                    [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                    "timeout_ms": int(self._remaining(deadline) * 1000)}

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            controller = await self._controller(deadline)
            resp = await self._send(controller, "ElectLeaders", build, deadline)
            top = resp.get("error_code", 0)
            if top in _RETRY_CODES:
                raise _Retry(_error(top, "leader election"))
            if top:
                raise _error(top, "leader election")
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in resp.replica_election_results:
                for r in t.partition_result:
                    tp = TopicPartition(t.topic, r.partition_id)
                    if r.error_code in _RETRY_CODES:
                        raise _Retry(_error(r.error_code, f"partition {tp.topic}-{tp.partition}"))
                    out[tp] = (_error(r.error_code, f"partition {tp.topic}-{tp.partition}",
                                      r.get("error_message")) if r.error_code else None)
            return out
        return await self._retrying("elect_leaders", deadline, attempt)

    # ------------------------------------------------------------------ group offsets deleted

    async def delete_consumer_group_offsets(self, group_id: str,
                                            partitions: Iterable[TopicPartition]
                                            ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetDelete to the group's coordinator, as Kafka's Admin.deleteConsumerGroupOffsets:
        per partition None (its committed offset is gone) or why not, e.g.
        GroupSubscribedToTopicError while a member of the group subscribes to the topic. A
        refusal of the whole group raises (GroupIdNotFoundError, GroupAuthorizationFailedError,
        NonEmptyGroupError for a group of another protocol with members)."""
        asked = list(dict.fromkeys(partitions))
        deadline = self._deadline(None)
        by_topic: dict[str, list[dict]] = {}
        for tp in asked:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {"group_id": group_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        async def call(node: int) -> dict[TopicPartition, KafkaError | None]:
            resp = await self._send(node, "OffsetDelete", lambda v: body, deadline)
            self._check_group_code(resp.error_code, group_id)
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code in _RETRY_CODES:
                        raise _Retry(_error(p.error_code, f"group {group_id} partition {tp}"))
                    out[tp] = (_error(p.error_code, f"group {group_id} partition "
                                                    f"{t.name}-{p.partition_index}")
                               if p.error_code else None)
            return out
        return await self._group_call("delete_consumer_group_offsets", group_id, deadline, call)


    # ------------------------------------------------------------------ client quotas

    async def describe_client_quotas(self, components: Iterable[tuple[str, int, str | None]] = (),
                                     strict: bool = False
                                     ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """DescribeClientQuotas to any broker, as Kafka's Admin.describeClientQuotas: each
        entity matching the filter (sorted (entity type, name) pairs, name None for a default
        entity) with its quota values. A component is (entity type, match type, match): 0 the
        entity named `match`, 1 the type's default entity, 2 any named entity of the type;
        `strict` leaves out entities with types the filter does not name. No components and
        not strict: every entity. A refused filter raises (InvalidRequestError, or
        ClusterAuthorizationFailedError without DESCRIBE_CONFIGS on the cluster)."""
        body = {"components": [{"entity_type": t, "match_type": m, "match": v}
                               for t, m, v in components], "strict": strict}
        deadline = self._deadline(None)

        async def attempt() -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
            resp = await self._send(None, "DescribeClientQuotas", lambda v: body, deadline)
            if resp.error_code:
                raise _error(resp.error_code, "client quotas", resp.get("error_message"))
            return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
                    {v.key: v.value for v in entry["values"]} for entry in resp.entries or ()}
        return await self._retrying("describe_client_quotas", deadline, attempt)

    async def alter_client_quotas(self, alterations: Iterable[tuple[Mapping[str, str | None],
                                                                    Mapping[str, float | None]]],
                                  validate_only: bool = False) -> None:
        """AlterClientQuotas to any broker, as Kafka's Admin.alterClientQuotas: each alteration
        is an entity ({"user": "alice", "client-id": None} - None the default entity) and its
        changes (key -> value, or None to remove the key). Raises the first entity's error,
        e.g. InvalidRequestError("client quotas user=alice: Invalid configuration key ...")."""
        todo = [(dict(e), dict(ops)) for e, ops in alterations]
        if not todo:
            return
        body = {"validate_only": validate_only, "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in e.items()],
             "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                     for k, v in ops.items()]} for e, ops in todo]}
        deadline = self._deadline(None)

        async def attempt() -> None:
            resp = await self._send(None, "AlterClientQuotas", lambda v: body, deadline)
            for entry in resp.entries:
                if entry.error_code:
                    name = ",".join(f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}"
                                    for e in entry.entity)
                    raise _error(entry.error_code, f"client quotas {name}", entry.get("error_message"))
        await self._retrying("alter_client_quotas", deadline, attempt)

    # ------------------------------------------------------------------ log dirs

    async def describe_log_dirs(self, broker_ids: Iterable[int] | None = None, timeout: float | None = None
                                ) -> dict[int, dict[str, LogDirDescription]]:
        """Every log dir of each broker (None: every live broker) with its replicas, as
        Kafka's Admin.describeLogDirs: DescribeLogDirs to each broker. An offline dir has
        `error` KafkaStorageErrorError. A broker's refusal raises (e.g.
        ClusterAuthorizationFailedError: DESCRIBE on the Cluster is needed)."""
        deadline = self._deadline(timeout)

        async def attempt() -> dict[int, dict[str, LogDirDescription]]:
            cluster = await self._metadata([], deadline)
            ids = sorted(cluster.brokers) if broker_ids is None else list(dict.fromkeys(broker_ids))

            async def ask(broker_id: int) -> dict[str, LogDirDescription]:
                resp = await self._send(broker_id, "DescribeLogDirs", lambda v: {"topics": None}, deadline)
                if resp.get("error_code", 0):
                    raise _error(resp.error_code, f"log dirs of broker {broker_id}")
                return log_dirs_from_response(resp)
            answers = await asyncio.gather(*(ask(b) for b in ids))
            return dict(zip(ids, answers))
        return await self._retrying("describe_log_dirs", deadline, attempt)

    async def alter_replica_log_dirs(self, moves: Mapping[TopicPartitionReplica, str],
                                     timeout: float | None = None
                                     ) -> dict[TopicPartitionReplica, KafkaError | None]:
        """Move each replica to the log dir (an absolute path of its broker's log.dirs), as
        Kafka's Admin.alterReplicaLogDirs: AlterReplicaLogDirs to each broker. Per replica
        None (moving, or already there) or the error: LogDirNotFoundError,
        KafkaStorageErrorError (the dir or the replica is offline), ReplicaNotAvailableError
        (no replica there yet: the dir is remembered for when one is created, so a
        reassignment tool sends this before the reassignment and again until it succeeds),
        ClusterAuthorizationFailedError (ALTER on the Cluster is needed)."""
        deadline = self._deadline(timeout)
        by_broker: dict[int, list[tuple[TopicPartitionReplica, str]]] = {}
        for replica, path in moves.items():
            by_broker.setdefault(replica.broker_id, []).append((replica, path))

        async def attempt() -> dict[TopicPartitionReplica, KafkaError | None]:
            await self._metadata([], deadline)

            async def ask(broker_id: int, items: list[tuple[TopicPartitionReplica, str]]
                          ) -> dict[TopicPartitionReplica, KafkaError | None]:
                body = alter_log_dirs_request((TopicPartition(r.topic, r.partition), path) for r, path in items)
                resp = await self._send(broker_id, "AlterReplicaLogDirs", lambda v: body, deadline)
                out: dict[TopicPartitionReplica, KafkaError | None] = {}
                for t in resp.results:
                    for p in t.partitions:
                        replica = TopicPartitionReplica(t.topic_name, p.partition_index, broker_id)
                        out[replica] = (_error(p.error_code, f"replica {t.topic_name}-{p.partition_index} "
                                                             f"on broker {broker_id}")
                                        if p.error_code else None)
                return out
            results: dict[TopicPartitionReplica, KafkaError | None] = {}
            for answer in await asyncio.gather(*(ask(b, items) for b, items in by_broker.items())):
                results.update(answer)
            return results
        return await self._retrying("alter_replica_log_dirs", deadline, attempt)

    # ------------------------------------------------------------------ partition reassignment

    async def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None],
            timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments to the controller, as Kafka's
        Admin.alterPartitionReassignments: each partition to its target replicas (the
        controller adds the new ones, waits for every target to join the ISR, moves the
        leadership if needed and drops the others), or None to cancel its reassignment in
        progress. Per partition None (started, or cancelled) or why not, e.g.
        NoReassignmentInProgressError (nothing to cancel), UnknownTopicOrPartitionError,
        InvalidReplicaAssignmentError. A refusal of the whole request raises (e.g.
        ClusterAuthorizationFailedError); NOT_CONTROLLER, for the whole request or a
        partition, is resent to the new controller after a metadata refresh."""
        pending = dict(reassignments)
        deadline = self._deadline(timeout)
        results: dict[TopicPartition, KafkaError | None] = {}

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            if not pending:
                return results
            controller = await self._controller(deadline)
            body = alter_reassignments_request(pending, int(self._remaining(deadline) * 1000))
            resp = await self._send(controller, "AlterPartitionReassignments", lambda v: body, deadline)
            if resp.error_code == Code.NOT_CONTROLLER:
                raise _Retry(_error(resp.error_code, "partition reassignment"))
            if resp.error_code:
                raise _error(resp.error_code, "partition reassignment", resp.get("error_message"))
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code == Code.NOT_CONTROLLER:
                        continue                  # stays pending: resent to the new controller
                    results[tp] = (_error(p.error_code, f"partition {tp}", p.get("error_message"))
                                   if p.error_code else None)
                    pending.pop(tp, None)
            if pending:
                raise _Retry(f"AlterPartitionReassignments for {', '.join(map(str, pending))}")
            return results
        return await self._retrying("alter_partition_reassignments", deadline, attempt)

    async def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                                           timeout: float | None = None
                                           ) -> dict[TopicPartition, PartitionReassignment]:
        """ListPartitionReassignments to the controller, as Kafka's
        Admin.listPartitionReassignments: the reassignments in progress among `partitions`
        (None: every one); a partition not being reassigned is not in the answer. A refusal
        raises (e.g. ClusterAuthorizationFailedError: DESCRIBE on the Cluster is needed);
        NOT_CONTROLLER is retried after a metadata refresh."""
        asked = None if partitions is None else list(dict.fromkeys(partitions))
        deadline = self._deadline(timeout)

        async def attempt() -> dict[TopicPartition, PartitionReassignment]:
            controller = await self._controller(deadline)
            body = list_reassignments_request(asked, int(self._remaining(deadline) * 1000))
            resp = await self._send(controller, "ListPartitionReassignments", lambda v: body, deadline)
            if resp.error_code == Code.NOT_CONTROLLER:
                raise _Retry(_error(resp.error_code, "partition reassignments"))
            if resp.error_code:
                raise _error(resp.error_code, "partition reassignments", resp.get("error_message"))
            return reassignments_from_response(resp)
        return await self._retrying("list_partition_reassignments", deadline, attempt)


def _supported(conn: BrokerConnection) -> set[str]:
    """Names of the APIs a connection's broker advertises."""
    names = set()
    for key in conn.broker_versions:
        try:
            names.add(api(key).name)
        except KeyError:
            pass
    return names
