"""Client quota configs in ZooKeeper as Kafka's ZooKeeper mode keeps them (KIP-55):

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>
    /config/clients/<client-id>

names sanitized as Kafka's Sanitizer does, `<default>` for a default entity; a user's znode
also holds that user's SCRAM credentials (zk_users), so every write changes only its own keys.
Each write is announced by /config/changes/config_change_<seq> with the entity path
(`users/<user>/clients/<client-id>`, ...), which every broker follows (Kafka's
DynamicConfigManager with its user and client handlers).

A part of the cluster view: reset and resynced with it; the notifications come from ZkUsers,
which reads /config/changes for every config entity (see `ZkUsers.entity_listeners`). The
cache is changed only on the view's consumer task; subscribers are then called there.

An entity is the wire form of the quota APIs: a sorted tuple of (type, name), name None for a
default, types "client-id" and "user".
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable, Mapping

from clients.protocol.errors import InvalidRequestError

from . import zk_paths as zp
from .store import SCRAM_MECHANISMS
from .zk_cluster_view import ClusterView
from .entity_cache import merge_reads
from .zk_session import ZkSession
from .zk_users import ZkUsers, update_entity_config

log = logging.getLogger("strom.zkcoord")

QuotaEntity = tuple[tuple[str, "str | None"], ...]
DEFAULT = "<default>"           # Kafka's ConfigEntityName.Default
USER, CLIENT_ID = "user", "client-id"
CLIENT_CONFIGS = "/config/clients"


def _znode_name(name: str | None) -> str:
    return DEFAULT if name is None else zp.sanitize(name)


def _entity_name(znode_name: str) -> str | None:
    return None if znode_name == DEFAULT else zp.desanitize(znode_name)


def entity_path(entity: QuotaEntity) -> str:
    """The entity path of a change notification: users/<u>, users/<u>/clients/<c>, clients/<c>."""
    names = dict(entity)
    if USER in names:
        path = f"{zp.CONFIG_TYPE_USER}/{_znode_name(names[USER])}"
        if CLIENT_ID in names:
            path += f"/{zp.CONFIG_TYPE_CLIENT}/{_znode_name(names[CLIENT_ID])}"
        return path
    return f"{zp.CONFIG_TYPE_CLIENT}/{_znode_name(names[CLIENT_ID])}"


def entity_of_path(path: str) -> QuotaEntity | None:
    """The quota entity a notification's entity path names; None for other entities."""
    parts = path.split("/")
    try:
        if len(parts) == 2 and parts[0] == zp.CONFIG_TYPE_CLIENT:
            return ((CLIENT_ID, _entity_name(parts[1])),)
        if len(parts) == 2 and parts[0] == zp.CONFIG_TYPE_USER:
            return ((USER, _entity_name(parts[1])),)
        if len(parts) == 4 and parts[0] == zp.CONFIG_TYPE_USER and parts[2] == zp.CONFIG_TYPE_CLIENT:
            return ((CLIENT_ID, _entity_name(parts[3])), (USER, _entity_name(parts[1])))
    except UnicodeDecodeError:
        return None
    return None


def _quota_keys(config: Mapping[str, str]) -> dict[str, str]:
    """The quota part of an entity config (a user's also holds SCRAM credentials)."""
    return {k: v for k, v in config.items() if k not in SCRAM_MECHANISMS}


class ZkQuotas:
    """Every quota entity's configs: cached, written, followed through /config/changes."""

    watched_paths: frozenset[str] = frozenset()     # its notifications come through ZkUsers

    def __init__(self, session: ZkSession, view: ClusterView, users: ZkUsers):
        self.session = session
        self.view = view
        self.cache: dict[QuotaEntity, dict[str, str]] = {}
        self._subscribers: list[Callable[[], None]] = []
        users.entity_listeners.append(self._on_entity_changes)
        view.add_part(self)

    # ------------------------------------------------------------ the store's interface

    def client_quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        return {e: dict(c) for e, c in self.cache.items()}

    def subscribe_client_quotas(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` on the loop after the cached quota configs changed."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    async def alter_client_quotas(self, entity: QuotaEntity,
                                  changes: Mapping[str, str | None]) -> None:
        """Set (a string) or remove (None) quota keys of one entity, then notify every broker
        (Kafka's AdminZkClient.changeConfigs)."""
        for _, name in entity:
            if name is not None:
                try:
                    zp.check_znode_name(zp.sanitize(name), "quota entity")
                except ValueError as e:
                    raise InvalidRequestError(str(e)) from None
        path = f"{zp.CONFIG}/{entity_path(entity)}"
        if not await update_entity_config(self.session, path, changes):
            return
        note = zp.encode_config_change(zp.ConfigChangeNotification(entity_path(entity)))
        await self.session.create(zp.config_change_create_path(), note, sequence=True,
                                  makepath=True)
        await self.view.catch_up(lambda: self.refresh([entity]))

    # ------------------------------------------------------------ the view's consumer

    def reset(self) -> None:
        self.cache = {}

    async def resync(self) -> None:
        """Read every quota entity under /config/users and /config/clients."""
        users = await self.session.read_children(zp.USER_CONFIGS)
        clients = await self.session.read_children(CLIENT_CONFIGS)
        entities: list[QuotaEntity] = []
        for u in users:
            user = entity_of_path(f"{zp.CONFIG_TYPE_USER}/{u}")
            if user is None:
                log.error("ignoring quota config with an unreadable name %r", u)
                continue
            entities.append(user)
            for c in await self.session.read_children(f"{zp.USER_CONFIGS}/{u}/{zp.CONFIG_TYPE_CLIENT}"):
                both = entity_of_path(f"{zp.CONFIG_TYPE_USER}/{u}/{zp.CONFIG_TYPE_CLIENT}/{c}")
                if both is not None:
                    entities.append(both)
        for c in clients:
            client = entity_of_path(f"{zp.CONFIG_TYPE_CLIENT}/{c}")
            if client is not None:
                entities.append(client)
        await self.refresh(set(entities) | set(self.cache))

    async def on_watch(self, path: str) -> None:
        """Never called: no path is watched by this part itself."""

    async def _on_entity_changes(self, paths: list[str]) -> None:
        entities = [e for e in map(entity_of_path, paths) if e is not None]
        if entities:
            await self.refresh(entities)

    async def refresh(self, entities: Iterable[QuotaEntity]) -> None:
        unique = list(dict.fromkeys(entities))
        read = await asyncio.gather(*(self._read(e) for e in unique))
        if merge_reads(self.cache, unique, read):
            for cb in list(self._subscribers):
                try:
                    cb()
                except Exception:
                    log.exception("client quota subscriber %r failed", cb)

    async def _read(self, entity: QuotaEntity) -> dict[str, str]:
        path = f"{zp.CONFIG}/{entity_path(entity)}"
        data = await self.session.read_data(path)
        if data is None:
            return {}
        try:
            return _quota_keys(zp.decode_entity_config(data))
        except zp.ZkDataError as e:
            log.error("ignoring unreadable quota config %s: %s", path, e)
            return {}
