"""Every znode strom uses: its path, and its value encoded and decoded as Kafka's ZK mode does.

The layout and the JSON shapes are Kafka's (`kafka/zk/ZkData.scala`), so a strom cluster's
ZooKeeper tree reads like a Kafka one to people and to tools (zkCli, zoonavigator, Kafka's
own `kafka-topics.sh --zookeeper` of old). This module is sans-io: paths are strings relative
to the chroot, values are bytes; nothing here talks to ZooKeeper.

Kafka writes JSON with Jackson: compact, no spaces. Key order carries no meaning. A few
numbers are strings on purpose (timestamps, producer id block bounds, the cluster id
version) because Kafka writes them so; decoders accept either form where Kafka would.
"""
from __future__ import annotations

import base64
import json
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from clients.protocol.acl import (AclOperation, AclPermissionType, PatternType, ResourceType,
                                  parse_title)

TopicPartition = tuple[str, int]

# ------------------------------------------------------------------ paths

ADMIN = "/admin"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
DEFAULT_BROKER_ENTITY = "<default>"    # Kafka's ZooKeeper name of the cluster-wide entity
CONFIG_CHANGE_PREFIX = "config_change_"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
USER_CONFIGS = "/config/users"
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs: change notifications older than
# this are deleted by the brokers that follow them.
CHANGE_NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000

# Kafka's ConfigType.ALL: one persistent /config/<type> per entity type.
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER,
                CONFIG_TYPE_IP)

# Persistent paths that must exist when a broker starts (Kafka's ZkData.PersistentZkPaths,
# minus the old consumers' /consumers).
PERSISTENT_PATHS: tuple[str, ...] = (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
) + tuple(f"{CONFIG}/{t}" for t in CONFIG_TYPES)

# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000
# Kafka's KafkaController.InitialControllerEpoch: /controller_epoch is created holding one
# less, so the first elected controller has epoch 1.
INITIAL_CONTROLLER_EPOCH = 1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(CONFIG_TYPE_TOPIC, topic)


def broker_config_path(broker_id: int | None) -> str:
    """/config/brokers/<id>, or /config/brokers/<default> for the cluster-wide configs."""
    return config_entity_path(CONFIG_TYPE_BROKER,
                              DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id))


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_change_create_path() -> str:
    """Prefix to create a PERSISTENT_SEQUENTIAL node with (ZooKeeper appends 10 digits)."""
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


def isr_change_create_path() -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def isr_change_path(node_name: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{node_name}"


def sequence_number(node_name: str, prefix: str) -> int:
    """`isr_change_0000000042` -> 42."""
    return int(node_name[node_name.rindex(prefix) + len(prefix):])


def parent_and_name(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent or "/", name


# ------------------------------------------------------------------ json helpers

def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZkDataError(f"{what}: empty znode")
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise ZkDataError(f"{what}: not JSON: {data[:200]!r}") from e
    if not isinstance(obj, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {data[:200]!r}")
    return obj


class ZkDataError(ValueError):
    """A znode holds something Kafka would not have written."""


def now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------ Kafka Uuid

def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; also accepts the dashed RFC form."""
    if len(text) == 36:
        return uuid.UUID(text)
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as e:
        raise ZkDataError(f"not a Kafka Uuid: {text!r}") from e
    if len(raw) != 16:
        raise ZkDataError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


# Kafka's Uuid.METADATA_TOPIC_ID (0...01) and ZERO_UUID are reserved.
_RESERVED_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1))


def new_kafka_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never a reserved id, never one whose string starts with '-'
    (it would read as a command-line flag)."""
    while True:
        u = uuid.uuid4()
        if u not in _RESERVED_UUIDS and not kafka_uuid_str(u).startswith("-"):
            return u


def new_cluster_id() -> str:
    return kafka_uuid_str(new_kafka_uuid())


# ------------------------------------------------------------------ /cluster/id

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    obj = _loads(data, CLUSTER_ID)
    if not isinstance(obj.get("id"), str):
        raise ZkDataError(f"{CLUSTER_ID}: no id in {data!r}")
    return obj["id"]


# ------------------------------------------------------------------ /brokers/ids/<id>

@dataclass(frozen=True)
class EndPoint:
    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: dict[str, str] | None = None) -> "EndPoint":
        """`NAME://host:port` (host may be empty or a bracketed IPv6 address)."""
        name, sep, rest = text.partition("://")
        if not sep:
            raise ZkDataError(f"not an endpoint: {text!r}")
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port_n = int(port)
        except ValueError as e:
            raise ZkDataError(f"bad port in endpoint {text!r}") from e
        protocol = (protocol_map or {}).get(name, name)
        return cls(name, host, port_n, protocol)


@dataclass
class BrokerRegistration:
    """The ephemeral /brokers/ids/<id> node (version 5 JSON, Kafka 2.7+).

    `host`/`port` at the top level are Kafka's compatibility copy of the first PLAINTEXT
    endpoint (null/-1 when there is none)."""

    broker_id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: int = field(default_factory=now_ms)
    features: dict[str, dict[str, int]] = field(default_factory=dict)
    version: int = 5

    @property
    def plaintext_endpoint(self) -> EndPoint | None:
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    @property
    def host(self) -> str | None:
        e = self.plaintext_endpoint
        return e.host if e else None

    @property
    def port(self) -> int:
        e = self.plaintext_endpoint
        return e.port if e else -1


def encode_broker(reg: BrokerRegistration) -> bytes:
    obj: dict[str, Any] = {
        "version": reg.version,
        "host": reg.host,
        "port": reg.port,
        "endpoints": [e.connection_string for e in reg.endpoints],
        "jmx_port": reg.jmx_port,
        "timestamp": str(reg.timestamp),
    }
    if reg.rack is not None and reg.version >= 3:
        obj["rack"] = reg.rack
    if reg.version >= 4:
        obj["listener_security_protocol_map"] = {e.listener_name: e.security_protocol
                                                 for e in reg.endpoints}
    if reg.version >= 5:
        obj["features"] = reg.features
    return _dumps(obj)


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    what = broker_path(broker_id)
    obj = _loads(data, what)
    try:
        version = int(obj["version"])
        jmx_port = int(obj.get("jmx_port", -1))
        if version < 1:
            raise ZkDataError(f"{what}: unsupported registration version {version}")
        if version == 1:
            endpoints = [EndPoint("PLAINTEXT", obj["host"], int(obj["port"]), "PLAINTEXT")]
        else:
            pmap = obj.get("listener_security_protocol_map") or {}
            endpoints = [EndPoint.parse(s, pmap) for s in obj["endpoints"]]
        ts = obj.get("timestamp")
        features = obj.get("features") or {}
        return BrokerRegistration(
            broker_id, endpoints, obj.get("rack"), jmx_port,
            int(ts) if ts not in (None, "") else 0,
            {k: {kk: int(vv) for kk, vv in v.items()} for k, v in features.items()},
            version)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ZkDataError):
            raise
        raise ZkDataError(f"{what}: bad broker registration {data[:300]!r}: {e}") from e


# ------------------------------------------------------------------ /brokers/topics/<t>

@dataclass
class TopicAssignment:
    """/brokers/topics/<t>: the replica assignment (version 3 JSON, Kafka 2.4+; topic_id
    since 2.8). adding/removing replicas describe a reassignment in progress."""

    partitions: dict[int, list[int]]
    topic_id: uuid.UUID | None = None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    version: int = 3


def encode_topic(a: TopicAssignment) -> bytes:
    def as_json(m: dict[int, list[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(m.items())}

    obj: dict[str, Any] = {
        "version": a.version,
        "partitions": as_json(a.partitions),
        "adding_replicas": as_json({p: r for p, r in a.adding_replicas.items() if r}),
        "removing_replicas": as_json({p: r for p, r in a.removing_replicas.items() if r}),
    }
    if a.topic_id is not None:
        obj["topic_id"] = kafka_uuid_str(a.topic_id)
    return _dumps(obj)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    what = topic_path(topic)
    obj = _loads(data, what)

    def as_map(key: str) -> dict[int, list[int]]:
        return {int(p): [int(b) for b in r] for p, r in (obj.get(key) or {}).items()}

    try:
        tid = obj.get("topic_id")
        return TopicAssignment(as_map("partitions"), parse_kafka_uuid(tid) if tid else None,
                               as_map("adding_replicas"), as_map("removing_replicas"),
                               int(obj.get("version", 1)))
    except (TypeError, ValueError) as e:
        if isinstance(e, ZkDataError):
            raise
        raise ZkDataError(f"{what}: bad assignment {data[:300]!r}: {e}") from e


# ------------------------------------------------------------------ partition state

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass
class PartitionState:
    """/brokers/topics/<t>/partitions/<p>/state: Kafka's LeaderIsrAndControllerEpoch.

    The znode's version (not stored in the JSON) is what makes updates conditional."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED


def encode_partition_state(s: PartitionState) -> bytes:
    obj: dict[str, Any] = {
        "controller_epoch": s.controller_epoch,
        "leader": s.leader,
        "version": 1,
        "leader_epoch": s.leader_epoch,
        "isr": list(s.isr),
    }
    # Kafka writes the field only when it is not the default (RECOVERED).
    if s.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        obj["leader_recovery_state"] = s.leader_recovery_state
    return _dumps(obj)


def decode_partition_state(data: bytes, what: str = "partition state") -> PartitionState:
    obj = _loads(data, what)
    try:
        return PartitionState(int(obj["leader"]), int(obj["leader_epoch"]),
                              [int(b) for b in obj["isr"]], int(obj["controller_epoch"]),
                              int(obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)))
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"{what}: bad partition state {data[:300]!r}: {e}") from e


# ------------------------------------------------------------------ /controller, epoch

@dataclass
class ControllerRegistration:
    broker_id: int
    timestamp: int = field(default_factory=now_ms)
    kraft_controller_epoch: int = -1
    version: int = 2


def encode_controller(c: ControllerRegistration) -> bytes:
    return _dumps({"version": c.version, "brokerid": c.broker_id, "timestamp": str(c.timestamp),
                   "kraftControllerEpoch": c.kraft_controller_epoch})


def decode_controller(data: bytes) -> ControllerRegistration:
    obj = _loads(data, CONTROLLER)
    try:
        ts = obj.get("timestamp")
        return ControllerRegistration(int(obj["brokerid"]), int(ts) if ts not in (None, "") else 0,
                                      int(obj.get("kraftControllerEpoch", -1)),
                                      int(obj.get("version", 1)))
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"{CONTROLLER}: bad registration {data[:200]!r}: {e}") from e


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode().strip())
    except (ValueError, UnicodeDecodeError) as e:
        raise ZkDataError(f"{CONTROLLER_EPOCH}: not an integer: {data[:50]!r}") from e


# ------------------------------------------------------------------ /config/<type>/<name>

def encode_entity_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """Kafka reads an empty or null node as no overrides."""
    if not data:
        return {}
    obj = _loads(data, "entity config")
    cfg = obj.get("config") or {}
    if not isinstance(cfg, dict):
        raise ZkDataError(f"entity config: 'config' is not an object: {data[:200]!r}")
    return {k: str(v) for k, v in cfg.items()}


@dataclass
class ConfigChangeNotification:
    """/config/changes/config_change_<seq>: which entity's config changed.
    Version 2 (Kafka 1.1+) carries `entity_path` like `topics/my-topic`."""

    entity_path: str

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    @property
    def entity_name(self) -> str:
        return self.entity_path.split("/", 1)[1]


def encode_config_change(n: ConfigChangeNotification) -> bytes:
    return _dumps({"version": 2, "entity_path": n.entity_path})


def decode_config_change(data: bytes) -> ConfigChangeNotification:
    obj = _loads(data, CONFIG_CHANGES)
    if obj.get("version") == 1:      # {"version":1,"entity_type":"topics","entity_name":"t"}
        return ConfigChangeNotification(f"{obj['entity_type']}/{obj['entity_name']}")
    if not isinstance(obj.get("entity_path"), str):
        raise ZkDataError(f"{CONFIG_CHANGES}: no entity_path in {data[:200]!r}")
    return ConfigChangeNotification(obj["entity_path"])


# ------------------------------------------------------------------ partition-list nodes

def _encode_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p}
                                                for t, p in sorted(set(partitions))]})


def _decode_partitions(data: bytes, what: str) -> set[TopicPartition]:
    obj = _loads(data, what)
    try:
        return {(str(e["topic"]), int(e["partition"])) for e in obj["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"{what}: bad partition list {data[:200]!r}: {e}") from e


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    """/isr_change_notification/isr_change_<seq>: partitions whose ISR a leader changed."""
    return _encode_partitions(partitions)


def decode_isr_change(data: bytes) -> set[TopicPartition]:
    return _decode_partitions(data, ISR_CHANGE_NOTIFICATION)


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partitions(partitions)


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    return _decode_partitions(data, PREFERRED_REPLICA_ELECTION)


def encode_reassign_partitions(targets: Mapping[TopicPartition, list[int]]) -> bytes:
    """/admin/reassign_partitions: the legacy tools' request (Kafka's
    {"version":1,"partitions":[{"topic","partition","replicas"}]})."""
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]})


def decode_reassign_partitions(data: bytes) -> dict[TopicPartition, list[int]]:
    obj = _loads(data, REASSIGN_PARTITIONS)
    try:
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]]
                for e in obj["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"{REASSIGN_PARTITIONS}: bad partition list {data[:200]!r}: {e}") from e


# ------------------------------------------------------------------ producer id blocks

@dataclass(frozen=True)
class ProducerIdBlock:
    """/latest_producer_id_block: the last block handed out, bounds inclusive."""

    broker_id: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def next_block(self, broker_id: int, size: int) -> "ProducerIdBlock":
        start = self.block_end + 1
        return ProducerIdBlock(broker_id, start, start + size - 1)


def encode_producer_id_block(b: ProducerIdBlock) -> bytes:
    return _dumps({"version": 1, "broker": b.broker_id, "block_start": str(b.block_start),
                   "block_end": str(b.block_end)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    obj = _loads(data, LATEST_PRODUCER_ID_BLOCK)
    try:
        return ProducerIdBlock(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ZkDataError(f"{LATEST_PRODUCER_ID_BLOCK}: bad block {data[:200]!r}: {e}") from e


# ------------------------------------------------------------------ ACLs (Kafka's ZkAclStore)
#
# Literal patterns live under /kafka-acl/<Type>/<name>, other patterns under
# /kafka-acl-extended/<pattern type, lower case>/<Type>/<name> (Kafka's LiteralAclStore and
# ExtendedAclStore). A change to a resource's ACLs is announced by a sequence node:
# /kafka-acl-changes/acl_changes_<seq> holding "<TYPE>:<name>" for literal patterns (Kafka's
# LiteralAclChangeStore writes ResourceType.toString, the Java enum name: "TOPIC:orders"),
# /kafka-acl-extended-changes/acl_changes_<seq> holding Kafka's ExtendedAclChangeEvent JSON
# {"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"} for the others.

# Kafka's AclEntry.ResourceTypes: every concrete resource type, one path each per store.
ACL_RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN, ResourceType.USER)
# The pattern types a stored ACL has (Kafka's PatternType.isSpecific).
ACL_PATTERN_TYPES: tuple[PatternType, ...] = (PatternType.LITERAL, PatternType.PREFIXED)
ACL_CHANGE_ROOTS: tuple[str, ...] = (KAFKA_ACL_CHANGES, KAFKA_ACL_EXTENDED_CHANGES)


@dataclass(frozen=True)
class AclResource:
    """What one ACL znode is about: Kafka's ResourcePattern."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, order=True)
class AclEntry:
    """One element of an ACL znode's "acls" array: Kafka's AclEntry."""

    principal: str
    permission: AclPermissionType
    operation: AclOperation
    host: str


def acl_store_path(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return KAFKA_ACL
    if pattern_type in ACL_PATTERN_TYPES:
        return f"{KAFKA_ACL_EXTENDED}/{pattern_type.name.lower()}"
    raise ValueError(f"ACLs are stored for literal or prefixed patterns, not {pattern_type.name}")


def acl_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """/kafka-acl/Topic: Kafka names the type as SecurityUtils.resourceTypeName does."""
    return f"{acl_store_path(pattern_type)}/{resource_type.title}"


def acl_resource_path(resource: AclResource) -> str:
    check_znode_name(resource.name, "resource name")
    return f"{acl_type_path(resource.pattern_type, resource.resource_type)}/{resource.name}"


def acl_change_root(pattern_type: PatternType) -> str:
    acl_store_path(pattern_type)            # refuses a pattern type that is never stored
    return KAFKA_ACL_CHANGES if pattern_type == PatternType.LITERAL else KAFKA_ACL_EXTENDED_CHANGES


def acl_change_create_path(pattern_type: PatternType) -> str:
    """Prefix to create a PERSISTENT_SEQUENTIAL node with (ZooKeeper appends 10 digits)."""
    return f"{acl_change_root(pattern_type)}/{ACL_CHANGE_PREFIX}"


# What Kafka's KafkaZkClient.createAclPaths makes: each store, its type paths, the change paths.
ACL_PERSISTENT_PATHS: tuple[str, ...] = tuple(
    acl_type_path(p, t) for p in ACL_PATTERN_TYPES for t in ACL_RESOURCE_TYPES) + ACL_CHANGE_ROOTS


def check_znode_name(name: str, what: str) -> None:
    """A name that must be one znode (an ACL's resource name, a sanitized user)."""
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"{what} {name!r} cannot be stored in ZooKeeper")


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    """Kafka's ResourceZNode.encode (AclEntry.toJsonCompatibleMap)."""
    return _dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission.title,
         "operation": e.operation.title, "host": e.host} for e in sorted(set(entries))]})


def decode_acls(data: bytes | None, what: str = KAFKA_ACL) -> frozenset[AclEntry]:
    """Kafka's AclEntry.fromBytes: an empty node holds no ACLs."""
    if not data:
        return frozenset()
    obj = _loads(data, what)
    try:
        if int(obj["version"]) != 1:
            raise ZkDataError(f"{what}: unsupported ACL version {obj['version']}")
        return frozenset(
            AclEntry(str(e["principal"]),
                     AclPermissionType(parse_title(AclPermissionType, str(e["permissionType"]))),
                     AclOperation(parse_title(AclOperation, str(e["operation"]))),
                     str(e["host"]))
            for e in obj["acls"])
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ZkDataError):
            raise
        raise ZkDataError(f"{what}: bad ACLs {data[:300]!r}: {e}") from e


def encode_acl_change(resource: AclResource) -> bytes:
    if resource.pattern_type == PatternType.LITERAL:
        return f"{resource.resource_type.name}:{resource.name}".encode()
    acl_store_path(resource.pattern_type)
    return _dumps({"version": 1, "resourceType": resource.resource_type.name,
                   "name": resource.name, "patternType": resource.pattern_type.name})


def decode_acl_change(change_root: str, data: bytes) -> AclResource:
    """The resource a change notification under `change_root` names. Literal notifications are
    split at the first ':' (a name may hold more); the type is read as Kafka's
    ResourceType.fromString reads it, or as the older title ("Topic", "TransactionalId")."""
    try:
        if change_root == KAFKA_ACL_CHANGES:
            rtype, sep, name = data.decode().partition(":")
            if not sep:
                raise ZkDataError(f"{change_root}: expected '<type>:<name>', got {data[:200]!r}")
            return AclResource(ResourceType(parse_title(ResourceType, rtype)), name,
                               PatternType.LITERAL)
        obj = _loads(data, change_root)
        if int(obj.get("version", 1)) > 1:
            raise ZkDataError(f"{change_root}: unsupported change version {obj['version']}")
        return AclResource(ResourceType(parse_title(ResourceType, str(obj["resourceType"]))),
                           str(obj["name"]),
                           PatternType(parse_title(PatternType, str(obj["patternType"]))))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, ZkDataError):
            raise
        raise ZkDataError(f"{change_root}: bad ACL change {data[:200]!r}: {e}") from e


# ------------------------------------------------------------------ users (SCRAM credentials)

# URL-encoding leaves these as they are (Java's URLEncoder: letters, digits and ".-*_"; Kafka's
# Sanitizer then writes '*' as %2A and a space as %20).
_SANITIZE_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user principal as a znode name ("alice" stays "alice",
    "a b/c" becomes "a%20b%2Fc")."""
    return "".join(chr(b) if b in _SANITIZE_SAFE else f"%{b:02X}" for b in name.encode())


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space)."""
    return urllib.parse.unquote_plus(name, errors="strict")


def user_entity_path(user: str) -> str:
    """The entity_path of a user's change notification: users/<sanitized user>."""
    return f"{CONFIG_TYPE_USER}/{sanitize(user)}"


def user_config_path(user: str) -> str:
    return config_entity_path(CONFIG_TYPE_USER, sanitize(user))


def user_of_entity_path(entity_path: str) -> str | None:
    """The user a config change notification is about; None for other entities (topics,
    brokers, a user's client-id quotas users/<u>/clients/<c>)."""
    kind, _, rest = entity_path.partition("/")
    if kind != CONFIG_TYPE_USER or not rest or "/" in rest:
        return None
    return desanitize(rest)
