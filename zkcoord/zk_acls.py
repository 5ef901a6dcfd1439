"""ACLs in ZooKeeper as Kafka's AclAuthorizer keeps them: one znode per resource pattern
holding all its ACLs (paths and JSON in `zk_paths`), every change announced by a change
notification, every broker's cache kept current by following those notifications.

Writes follow AclAuthorizer.updateResourceAcls: read the resource's node with its version,
compute the new set, then write conditionally (set at that version, create if absent, delete
at that version when no ACL is left) and start again from a fresh read when another writer got
there first. So two brokers adding ACLs to one resource at the same instant both land.

The cache is changed only by the cluster view's consumer task (`resync`, `on_watch`,
`refresh`), which tells subscribers `AclsChanged` after each change.
"""
from __future__ import annotations

import asyncio
import logging
import random
from collections import defaultdict
from typing import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from clients.protocol.errors import InvalidRequestError

from . import zk_paths as zp
from .store import AclBinding, AclsChanged
from .zk_cluster_view import ClusterView
from .zk_errors import ZkStoreError
from .zk_notifications import ChangeNotifications
from .zk_paths import AclEntry, AclResource
from .entity_cache import merge_reads
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

# Conditional writes of one resource retried this often before giving up (Kafka: 10, with a
# 100-300 ms backoff; contention between brokers is short-lived, so retry sooner and longer).
MAX_UPDATE_ATTEMPTS = 50
_BACKOFF_S = (0.005, 0.05)

AclSet = frozenset[AclEntry]


def resource_of(b: AclBinding) -> AclResource:
    return AclResource(b.resource_type, b.resource_name, b.pattern_type)


def entry_of(b: AclBinding) -> AclEntry:
    return AclEntry(b.principal, b.permission, b.operation, b.host)


def binding(resource: AclResource, e: AclEntry) -> AclBinding:
    return AclBinding(resource.resource_type, resource.name, resource.pattern_type, e.principal,
                      e.host, e.operation, e.permission)


def by_resource(bindings: Iterable[AclBinding]) -> dict[AclResource, AclSet]:
    grouped: dict[AclResource, set[AclEntry]] = defaultdict(set)
    for b in bindings:
        grouped[resource_of(b)].add(entry_of(b))
    return {r: frozenset(es) for r, es in grouped.items()}


class ZkAcls:
    """Every ACL of the cluster: cached, written, and followed through change notifications."""

    watched_paths = frozenset(zp.ACL_CHANGE_ROOTS)

    def __init__(self, session: ZkSession, view: ClusterView):
        self.session = session
        self.view = view
        self.cache: dict[AclResource, AclSet] = {}
        self.changes = {root: ChangeNotifications(session, root, zp.ACL_CHANGE_PREFIX,
                                                  view.watcher)
                        for root in zp.ACL_CHANGE_ROOTS}

    # ------------------------------------------------------------ reads

    def bindings(self) -> list[AclBinding]:
        return [binding(r, e) for r, entries in self.cache.items() for e in sorted(entries)]

    # ------------------------------------------------------------ writes

    async def ensure_paths(self) -> None:
        """Kafka's KafkaZkClient.createAclPaths: each store's type paths and the change paths."""
        await asyncio.gather(*(self.session.ensure_path(p) for p in zp.ACL_PERSISTENT_PATHS))

    async def create(self, bindings: list[AclBinding]) -> None:
        await self._apply(by_resource(bindings), lambda current, given: current | given)

    async def delete(self, bindings: list[AclBinding]) -> None:
        await self._apply(by_resource(bindings), lambda current, given: current - given)

    async def _apply(self, wanted: dict[AclResource, AclSet],
                     change: Callable[[AclSet, AclSet], AclSet]) -> None:
        for resource in wanted:
            try:
                zp.acl_resource_path(resource)
            except ValueError as e:
                raise InvalidRequestError(str(e)) from None
        async def update(resource: AclResource) -> bool:
            return await self._update(resource, lambda current: change(current, wanted[resource]))

        resources = list(wanted)
        written = await asyncio.gather(*(update(r) for r in resources))
        changed = [r for r, w in zip(resources, written) if w]
        if not changed:
            return
        # Kafka's updateAclChangedFlag: one notification per changed resource, after its write.
        await asyncio.gather(*(
            self.session.create(zp.acl_change_create_path(r.pattern_type),
                                zp.encode_acl_change(r), sequence=True, makepath=True)
            for r in changed))
        await self.view.catch_up(lambda: self.refresh(changed))

    async def _update(self, resource: AclResource, change: Callable[[AclSet], AclSet]) -> bool:
        """One resource's read-modify-write, conditional on the node's version. True when a
        write was sent (even one whose answer was lost and retried: a spare notification is
        harmless, a missing one is not)."""
        path = zp.acl_resource_path(resource)
        c = self.session.client
        sent = False
        for _ in range(MAX_UPDATE_ATTEMPTS):
            got = await self.session.get(path)
            current = zp.decode_acls(got[0], path) if got is not None else frozenset()
            new = change(current)
            if new == current:
                return sent
            sent = True
            try:
                if got is None:
                    await self.session.create(path, zp.encode_acls(new), makepath=True)
                elif new:
                    await self.session.set(path, zp.encode_acls(new), got[1].version)
                else:
                    version = got[1].version
                    await self.session.call(lambda: c.delete_async(path, version))
                return True
            except (BadVersionError, NodeExistsError, NoNodeError):
                await asyncio.sleep(random.uniform(*_BACKOFF_S))   # another writer: read again
        raise ZkStoreError(f"ACLs of {path} kept changing: not updated after "
                           f"{MAX_UPDATE_ATTEMPTS} attempts")

    # ------------------------------------------------------------ the view's consumer

    def reset(self) -> None:
        self.cache = {}
        for notes in self.changes.values():
            notes.reset()

    async def resync(self) -> None:
        """Watch the change paths, then read every ACL node; tell subscribers if the cache
        differs. Notifications already present are covered by the full read."""
        for notes in self.changes.values():
            await notes.skip_existing()
        stores = [(p, t) for p in zp.ACL_PATTERN_TYPES for t in zp.ACL_RESOURCE_TYPES]
        names = await asyncio.gather(*(self.session.read_children(zp.acl_type_path(p, t))
                                       for p, t in stores))
        resources = [AclResource(t, name, p) for (p, t), ns in zip(stores, names) for name in ns]
        read = await asyncio.gather(*(self._read(r) for r in resources))
        fresh = {r: acls for r, acls in zip(resources, read) if acls}
        if fresh != self.cache:
            self.cache = fresh
            self.view.emit(AclsChanged())

    async def on_watch(self, path: str) -> None:
        """New notifications under one change path: re-read the resources they name."""
        notes = self.changes.get(path)
        if notes is None:
            return
        resources: list[AclResource] = []
        for data in await notes.read_new():
            try:
                resources.append(zp.decode_acl_change(path, data))
            except zp.ZkDataError as e:
                log.error("ignoring unreadable ACL change notification: %s", e)
        await self.refresh(resources)

    async def refresh(self, resources: Iterable[AclResource]) -> None:
        """Re-read these resources' nodes into the cache (Kafka's AclChangedNotificationHandler)."""
        unique = list(dict.fromkeys(resources))
        read = await asyncio.gather(*(self._read(r) for r in unique))
        if merge_reads(self.cache, unique, read):
            self.view.emit(AclsChanged())

    async def _read(self, resource: AclResource) -> AclSet:
        try:
            path = zp.acl_resource_path(resource)
        except ValueError as e:
            log.error("ignoring ACLs of an unusable resource name: %s", e)
            return frozenset()
        data = await self.session.read_data(path)
        if data is None:
            return frozenset()
        try:
            return zp.decode_acls(data, path)
        except zp.ZkDataError as e:
            log.error("ignoring unreadable ACLs: %s", e)
            return frozenset()
