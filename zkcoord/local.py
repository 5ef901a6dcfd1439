"""The standalone metadata store: one broker, metadata in a JSON file under the first log dir.

Every change is written atomically (temp file, fsync, rename, fsync of the directory), so a
crash leaves either the old or the new metadata, never a torn file. Subscribers hear of ACL and
SCRAM credential changes before the call that made them returns.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping

from clients.protocol.acl import (AclOperation, AclPermissionType, PatternType, ResourceType,
                                  parse_title)
from clients.protocol.errors import (InvalidRequestError, TopicAlreadyExistsError,
                                     UnknownTopicOrPartitionError)

from .store import (AclBinding, AclsChanged, BrokerInfo, MetadataStore, StoreEvent,
                    TopicMetadata, UserScramCredentialsChanged)

log = logging.getLogger("strom.zkcoord")

META_FILE = "__strom_metadata.json"


def new_cluster_id() -> str:
    """Kafka's form: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalMetadataStore(MetadataStore):
    def __init__(self, log_dir: str | Path, broker: BrokerInfo):
        self.dir = Path(log_dir)
        self.broker = broker
        self.path = self.dir / META_FILE
        self._topics: dict[str, TopicMetadata] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}   # "<default>" or the id
        self._next_producer_id = 0
        self._acls: set[AclBinding] = set()
        self._scram: dict[str, dict[str, str]] = {}              # user -> mechanism -> credential
        self._subscribers: list[Callable[[Any], Any]] = []
        # Client quota configs: entity (sorted (type, name) pairs, None a default) -> key -> value.
        self._quotas: dict[tuple[tuple[str, str | None], ...], dict[str, str]] = {}
        self._quota_subscribers: list[Callable[[], None]] = []
        self.cluster_id = ""

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            self.cluster_id = doc["cluster_id"]
            self._next_producer_id = doc.get("next_producer_id", 0)
            self._broker_configs = {k: dict(v) for k, v in doc.get("broker_configs", {}).items()}
            self._acls = {_decode_acl(a) for a in doc.get("acls", [])}
            self._scram = {u: dict(c) for u, c in doc.get("scram_credentials", {}).items() if c}
            self._quotas = {tuple((t, n) for t, n in q["entity"]): dict(q["config"])
                            for q in doc.get("client_quotas", [])}
            for name, t in doc.get("topics", {}).items():
                self._topics[name] = TopicMetadata(
                    name, uuid.UUID(t["id"]),
                    {int(p): list(r) for p, r in t["partitions"].items()}, dict(t.get("configs", {})))
        else:
            self.cluster_id = new_cluster_id()
            self._save()
        self._write_meta_properties()

    def _write_meta_properties(self) -> None:
        # Kafka's own marker of which cluster and broker a log dir belongs to.
        text = f"version=0\nbroker.id={self.broker.broker_id}\ncluster.id={self.cluster_id}\n"
        p = self.dir / "meta.properties"
        if not p.exists() or p.read_text() != text:
            atomic_write(p, text.encode())

    async def stop(self) -> None:
        self._save()

    def _save(self) -> None:
        doc = {
            "cluster_id": self.cluster_id,
            "next_producer_id": self._next_producer_id,
            "broker_configs": self._broker_configs,
            "acls": sorted((_encode_acl(a) for a in self._acls),
                           key=lambda a: json.dumps(a, sort_keys=True)),
            "scram_credentials": self._scram,
            "client_quotas": [{"entity": [list(p) for p in e], "config": c}
                              for e, c in sorted(self._quotas.items(), key=lambda ec: repr(ec[0]))],
            "topics": {
                n: {"id": str(t.topic_id), "partitions": {str(p): r for p, r in t.partitions.items()},
                    "configs": t.configs}
                for n, t in self._topics.items()
            },
        }
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def topics(self) -> dict[str, TopicMetadata]:
        return self._topics

    async def create_topic(self, name: str, partitions: dict[int, list[int]],
                           configs: dict[str, str]) -> TopicMetadata:
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        t = TopicMetadata(name, uuid.uuid4(), dict(partitions), dict(configs))
        self._topics[name] = t
        self._save()
        return t

    async def delete_topic(self, name: str) -> None:
        if self._topics.pop(name, None) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        self._save()

    async def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata:
        t = self._topics[name]
        t.partitions.update(new)
        self._save()
        return t

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        t = self._topics[name]
        t.configs = dict(configs)
        self._save()
        return t

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        return dict(self._broker_configs.get(_entity(broker_id), {}))

    async def set_broker_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        if configs:
            self._broker_configs[_entity(broker_id)] = dict(configs)
        else:
            self._broker_configs.pop(_entity(broker_id), None)
        self._save()

    def live_brokers(self) -> list[BrokerInfo]:
        return [self.broker]

    # ------------------------------------------------------------ events

    def subscribe(self, callback: Callable[[Any], Any]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
        return unsubscribe

    def _emit(self, event: StoreEvent) -> None:
        for cb in list(self._subscribers):
            try:
                cb(event)
            except Exception:
                log.exception("metadata store subscriber %r failed on %r", cb, event)

    # ------------------------------------------------------------ ACLs

    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    async def create_acls(self, bindings: list[AclBinding]) -> None:
        for b in bindings:
            if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                raise InvalidRequestError(f"ACLs are stored for literal or prefixed patterns, not "
                                 f"{b.pattern_type.name}")
        new = set(bindings) - self._acls
        if new:
            self._acls |= new
            self._save()
            self._emit(AclsChanged())

    async def delete_acls(self, bindings: list[AclBinding]) -> None:
        gone = self._acls & set(bindings)
        if gone:
            self._acls -= gone
            self._save()
            self._emit(AclsChanged())

    # ------------------------------------------------------------ SCRAM credentials

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {user: dict(creds) for user, creds in self._scram.items()}

    def user_scram_credentials(self, user: str) -> dict[str, str]:
        return dict(self._scram.get(user, {}))

    async def alter_user_scram_credentials(self, user: str,
                                           changes: Mapping[str, str | None]) -> None:
        old = self._scram.get(user, {})
        new = _changed(old, changes)
        if new == old:
            return
        if new:
            self._scram[user] = new
        else:
            del self._scram[user]
        self._save()
        self._emit(UserScramCredentialsChanged(user))

    # ------------------------------------------------------------ client quotas (as zk_quotas)

    def client_quota_configs(self) -> dict[tuple[tuple[str, str | None], ...], dict[str, str]]:
        return {e: dict(c) for e, c in self._quotas.items()}

    def subscribe_client_quotas(self, callback: Callable[[], None]) -> Callable[[], None]:
        self._quota_subscribers.append(callback)
        return lambda: (self._quota_subscribers.remove(callback)
                        if callback in self._quota_subscribers else None)

    async def alter_client_quotas(self, entity: tuple[tuple[str, str | None], ...],
                                  changes: Mapping[str, str | None]) -> None:
        old = self._quotas.get(entity, {})
        new = _changed(old, changes)
        if new == old:
            return
        if new:
            self._quotas[entity] = new
        else:
            del self._quotas[entity]
        self._save()
        for cb in list(self._quota_subscribers):
            try:
                cb()
            except Exception:
                log.exception("client quota subscriber %r failed", cb)

    @property
    def controller_id(self) -> int:
        return self.broker.broker_id

    async def allocate_producer_ids(self, count: int) -> int:
        first = self._next_producer_id
        self._next_producer_id += count
        self._save()
        return first


def _changed(config: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """`config` with `changes` applied: a value sets its key, None removes it."""
    new = dict(config)
    for key, value in changes.items():
        if value is None:
            new.pop(key, None)
        else:
            new[key] = value
    return new


def _entity(broker_id: int | None) -> str:
    return "<default>" if broker_id is None else str(broker_id)


def _encode_acl(a: AclBinding) -> dict[str, str]:
    # Kafka's names, as kafka-acls.sh prints them.
    return {"resource_type": a.resource_type.title, "resource_name": a.resource_name,
            "pattern_type": a.pattern_type.name, "principal": a.principal, "host": a.host,
            "operation": a.operation.title, "permission": a.permission.title}


def _decode_acl(d: Mapping[str, str]) -> AclBinding:
    return AclBinding(ResourceType(parse_title(ResourceType, d["resource_type"])),
                      d["resource_name"],
                      PatternType(parse_title(PatternType, d["pattern_type"])),
                      d["principal"], d["host"],
                      AclOperation(parse_title(AclOperation, d["operation"])),
                      AclPermissionType(parse_title(AclPermissionType, d["permission"])))
