"""Users' SCRAM credentials in ZooKeeper as Kafka keeps them: in the user's entity config
/config/users/<sanitized user> ({"version":1,"config":{"SCRAM-SHA-256":"salt=...,..."}}, beside
any quota configs of that user), each change announced by a config change notification
/config/changes/config_change_<seq> {"version":2,"entity_path":"users/<sanitized user>"}
(Kafka's AdminZkClient.changeConfigs, followed by DynamicConfigManager on every broker).

The cache is changed only by the cluster view's consumer task (`resync`, `on_watch`,
`refresh`), which tells subscribers `UserScramCredentialsChanged(user)` per changed user.
"""
from __future__ import annotations

import asyncio
import logging
import random
from typing import Awaitable, Callable, Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from clients.protocol.errors import InvalidRequestError

from . import zk_paths as zp
from .store import SCRAM_MECHANISMS, UserScramCredentialsChanged
from .zk_cluster_view import ClusterView
from .zk_errors import ZkStoreError
from .zk_notifications import ChangeNotifications
from .entity_cache import merge_reads
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

MAX_UPDATE_ATTEMPTS = 50
_BACKOFF_S = (0.005, 0.05)


def scram_credentials(config: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM part of a user's entity config."""
    return {k: v for k, v in config.items() if k in SCRAM_MECHANISMS}


async def update_entity_config(session: ZkSession, path: str,
                               changes: Mapping[str, str | None]) -> bool:
    """Set (or, for None, remove) keys of the entity config at `path`, keeping every other key
    (a user's SCRAM credentials and quotas share one znode): read, change, write back
    conditionally on the version read, again while another writer gets in between. Whether
    anything changed."""
    for _ in range(MAX_UPDATE_ATTEMPTS):
        got = await session.get(path)
        config = zp.decode_entity_config(got[0]) if got is not None else {}
        new = dict(config)
        for key, value in changes.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value
        if new == config:
            return False
        try:
            if got is None:
                await session.create(path, zp.encode_entity_config(new), makepath=True)
            else:
                await session.set(path, zp.encode_entity_config(new), got[1].version)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            await asyncio.sleep(random.uniform(*_BACKOFF_S))   # another writer: read again
    raise ZkStoreError(f"{path} kept changing: not updated after {MAX_UPDATE_ATTEMPTS} attempts")


class ZkUsers:
    """Every user's SCRAM credentials: cached, written, and followed through /config/changes."""

    watched_paths = frozenset({zp.CONFIG_CHANGES})

    def __init__(self, session: ZkSession, view: ClusterView):
        self.session = session
        self.view = view
        self.cache: dict[str, dict[str, str]] = {}      # only users that have credentials
        self.changes = ChangeNotifications(session, zp.CONFIG_CHANGES, zp.CONFIG_CHANGE_PREFIX,
                                           view.watcher)
        # Told the entity path of every config change notification read (users', clients'
        # and their quotas': zk_quotas), on the view's consumer task: this part owns the
        # reading of /config/changes, and the view hands a path's watch to one part only.
        self.entity_listeners: list[Callable[[list[str]], Awaitable[None]]] = []

    # ------------------------------------------------------------ reads

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {user: dict(creds) for user, creds in self.cache.items()}

    # ------------------------------------------------------------ writes

    async def alter(self, user: str, changes: Mapping[str, str | None]) -> None:
        """Kafka's ZkAdminManager.alterUserScramCredentials: read the user's config, change the
        given mechanisms, write it back (conditionally on its version, so concurrent changes
        to other mechanisms or quotas are not lost), then notify."""
        try:
            path = zp.user_config_path(user)
            zp.check_znode_name(zp.sanitize(user), "user")
        except ValueError as e:
            raise InvalidRequestError(str(e)) from None
        if not await update_entity_config(self.session, path, changes):
            return
        note = zp.encode_config_change(zp.ConfigChangeNotification(zp.user_entity_path(user)))
        await self.session.create(zp.config_change_create_path(), note, sequence=True,
                                  makepath=True)
        await self.view.catch_up(lambda: self.refresh([user]))

    # ------------------------------------------------------------ the view's consumer

    def reset(self) -> None:
        self.cache = {}
        self.changes.reset()

    async def resync(self) -> None:
        """Watch /config/changes, then read every user's config; tell subscribers about each
        user whose credentials differ from the cache."""
        await self.changes.skip_existing()
        names = await self.session.read_children(zp.USER_CONFIGS)
        users = []
        for name in names:
            try:
                users.append(zp.desanitize(name))
            except UnicodeDecodeError:
                log.error("ignoring user config with an unreadable name %r", name)
        await self.refresh(set(users) | set(self.cache))

    async def on_watch(self, path: str) -> None:
        """New config change notifications: re-read the users they name (other entities'
        notifications are for other watchers)."""
        if path != zp.CONFIG_CHANGES:
            return
        users: list[str] = []
        paths: list[str] = []
        for data in await self.changes.read_new():
            try:
                path = zp.decode_config_change(data).entity_path
                user = zp.user_of_entity_path(path)
            except (zp.ZkDataError, KeyError, UnicodeDecodeError) as e:
                log.error("ignoring unreadable config change notification: %r", e)
                continue
            paths.append(path)
            if user is not None:
                users.append(user)
        await self.refresh(users)
        for listener in self.entity_listeners:
            await listener(paths)

    async def refresh(self, users: Iterable[str]) -> None:
        unique = list(dict.fromkeys(users))
        read = await asyncio.gather(*(self._read(u) for u in unique))
        for user in merge_reads(self.cache, unique, read):
            self.view.emit(UserScramCredentialsChanged(user))

    async def _read(self, user: str) -> dict[str, str]:
        path = zp.user_config_path(user)
        data = await self.session.read_data(path)
        if data is None:
            return {}
        try:
            return scram_credentials(zp.decode_entity_config(data))
        except zp.ZkDataError as e:
            log.error("ignoring unreadable user config: %s", e)
            return {}
