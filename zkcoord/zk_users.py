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
from typing import Iterable, Mapping

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from clients.protocol.errors import InvalidRequestError

from . import zk_paths as zp
from .store import SCRAM_MECHANISMS, UserScramCredentialsChanged
from .zk_cluster_view import ClusterView
from .zk_errors import ZkStoreError
from .zk_notifications import ChangeNotifications
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

MAX_UPDATE_ATTEMPTS = 50
_BACKOFF_S = (0.005, 0.05)


def scram_credentials(config: Mapping[str, str]) -> dict[str, str]:
    """The SCRAM part of a user's entity config."""
    return {k: v for k, v in config.items() if k in SCRAM_MECHANISMS}


class ZkUsers:
    """Every user's SCRAM credentials: cached, written, and followed through /config/changes."""

    watched_paths = frozenset({zp.CONFIG_CHANGES})

    def __init__(self, session: ZkSession, view: ClusterView):
        self.session = session
        self.view = view
        self.cache: dict[str, dict[str, str]] = {}      # only users that have credentials
        self.changes = ChangeNotifications(session, zp.CONFIG_CHANGES, zp.CONFIG_CHANGE_PREFIX,
                                           view.watcher)

    # ------------------------------------------------------------ reads

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {user: dict(creds) for user, creds in self.cache.items()}

    # ------------------------------------------------------------ writes

    async def alter(self, user: str, changes: Mapping[str, str | None]) -> None:
        """Kafka's ZkAdminManager.alterUserScramCredentials: read the user's config, change the
        given mechanisms, write it back (here conditionally on its version, so concurrent
        changes to other mechanisms or quotas are not lost), then notify."""
        try:
            path = zp.user_config_path(user)
            zp.check_znode_name(zp.sanitize(user), "user")
        except ValueError as e:
            raise InvalidRequestError(str(e)) from None
        sent = False
        for _ in range(MAX_UPDATE_ATTEMPTS):
            got = await self.session.get(path)
            config = zp.decode_entity_config(got[0]) if got is not None else {}
            new = dict(config)
            for mechanism, credential in changes.items():
                if credential is None:
                    new.pop(mechanism, None)
                else:
                    new[mechanism] = credential
            if new == config:
                break
            sent = True
            try:
                if got is None:
                    await self.session.create(path, zp.encode_entity_config(new), makepath=True)
                else:
                    await self.session.set(path, zp.encode_entity_config(new), got[1].version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                await asyncio.sleep(random.uniform(*_BACKOFF_S))   # another writer: read again
        else:
            raise ZkStoreError(f"{path} kept changing: not updated after "
                               f"{MAX_UPDATE_ATTEMPTS} attempts")
        if not sent:
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
        c = self.session.client
        try:
            names: list[str] = await self.session.read(
                lambda: c.get_children_async(zp.USER_CONFIGS))
        except NoNodeError:
            names = []
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
        for data in await self.changes.read_new():
            try:
                user = zp.user_of_entity_path(zp.decode_config_change(data).entity_path)
            except (zp.ZkDataError, KeyError, UnicodeDecodeError) as e:
                log.error("ignoring unreadable config change notification: %r", e)
                continue
            if user is not None:
                users.append(user)
        await self.refresh(users)

    async def refresh(self, users: Iterable[str]) -> None:
        unique = list(dict.fromkeys(users))
        read = await asyncio.gather(*(self._read(u) for u in unique))
        for user, creds in zip(unique, read):
            if self.cache.get(user, {}) == creds:
                continue
            if creds:
                self.cache[user] = creds
            else:
                del self.cache[user]
            self.view.emit(UserScramCredentialsChanged(user))

    async def _read(self, user: str) -> dict[str, str]:
        c = self.session.client
        path = zp.user_config_path(user)
        try:
            data, _ = await self.session.read(lambda: c.get_async(path))
        except NoNodeError:
            return {}
        try:
            return scram_credentials(zp.decode_entity_config(data))
        except zp.ZkDataError as e:
            log.error("ignoring unreadable user config: %s", e)
            return {}
