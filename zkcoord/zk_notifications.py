"""Following a directory of change-notification sequence nodes, as Kafka's
ZkNodeChangeNotificationListener does (/config/changes, /kafka-acl-changes,
/kafka-acl-extended-changes).

A writer changes some znode, then creates `<root>/<prefix><10-digit seq>` naming what it
changed. Followers watch the directory's children; each notification with a sequence number
above the last one seen is read and handed back, so the follower re-reads what it names.
Notifications older than 15 minutes (ZooKeeper's ctime) are deleted by whichever follower sees
them first, so the directory never grows without bound.

Used by the cluster view's one consumer task only: not safe to call concurrently.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from . import zk_paths as zp
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")


class ChangeNotifications:
    """The notifications under `root` (names `<prefix><seq>`). `watcher` is the kazoo watcher
    that re-arms the children watch (the cluster view's, so a new child becomes an item on its
    queue)."""

    def __init__(self, session: ZkSession, root: str, prefix: str,
                 watcher: Callable[[Any], None],
                 expiry_ms: int = zp.CHANGE_NOTIFICATION_EXPIRY_MS):
        self.session = session
        self.root = root
        self.prefix = prefix
        self.watcher = watcher
        self.expiry_ms = expiry_ms
        self.last_seq = -1
        self._ctimes: dict[str, int] = {}       # creation time (ms) of the nodes seen

    def reset(self) -> None:
        self.last_seq = -1
        self._ctimes.clear()

    async def skip_existing(self) -> None:
        """Watch the directory and mark every notification in it as seen: the caller is about
        to read everything the notifications could name."""
        children = await self._children()
        seqs = [self._seq(n) for n in children]
        self.last_seq = max([self.last_seq, *(s for s in seqs if s is not None)])
        await self._purge(children)

    async def read_new(self) -> list[bytes]:
        """Re-watch the directory; the data of each notification not seen yet, oldest first."""
        children = await self._children()
        fresh = sorted((s, n) for n in children
                       if (s := self._seq(n)) is not None and s > self.last_seq)
        reads = await asyncio.gather(*(self._read(n) for _, n in fresh))
        out: list[bytes] = []
        for (seq, name), got in zip(fresh, reads):
            self.last_seq = max(self.last_seq, seq)
            if got is None:
                continue                       # purged already: its change was long ago
            data, stat = got
            self._ctimes[name] = stat.ctime
            out.append(data)
        await self._purge(children)
        return out

    async def _purge(self, children: list[str]) -> None:
        try:
            await self._purge_expired(children)
        except Exception as e:       # noqa: BLE001 - housekeeping; the next change retries it
            log.warning("purging old change notifications under %s failed: %r", self.root, e)

    async def _children(self) -> list[str]:
        c = self.session.client
        try:
            children: list[str] = await self.session.read(
                lambda: c.get_children_async(self.root, self.watcher))
        except NoNodeError:
            # Watch for the directory's creation; the store creates it at start anyway.
            await self.session.read(lambda: c.exists_async(self.root, self.watcher))
            return []
        return children

    async def _read(self, name: str) -> tuple[bytes, ZnodeStat] | None:
        c = self.session.client
        path = f"{self.root}/{name}"
        try:
            got: tuple[bytes, ZnodeStat] = await self.session.read(lambda: c.get_async(path))
        except NoNodeError:
            return None
        return got

    def _seq(self, name: str) -> int | None:
        if not name.startswith(self.prefix):
            return None
        try:
            return zp.sequence_number(name, self.prefix)
        except ValueError:
            return None

    async def _purge_expired(self, children: list[str]) -> None:
        """Delete the notifications older than the expiry (Kafka's purgeObsoleteNotifications)."""
        present = set(children)
        for gone in set(self._ctimes) - present:
            del self._ctimes[gone]
        unknown = [n for n in children if n not in self._ctimes]
        stats = await asyncio.gather(*(self.session.exists(f"{self.root}/{n}") for n in unknown))
        for name, stat in zip(unknown, stats):
            if stat is not None:
                self._ctimes[name] = stat.ctime
        cutoff = zp.now_ms() - self.expiry_ms
        old = [n for n, ctime in self._ctimes.items() if ctime < cutoff]
        if not old:
            return
        await asyncio.gather(*(self.session.delete_if_exists(f"{self.root}/{n}") for n in old))
        for name in old:
            self._ctimes.pop(name, None)
        log.debug("purged %d change notifications older than %d ms from %s",
                  len(old), self.expiry_ms, self.root)
