"""Registering a broker's id (ephemeral /brokers/ids/<id>) when a previous run of the same
broker may still hold it.

A broker killed with kill -9 leaves its ZooKeeper session, and the registration that lives
with it, until the session times out (zookeeper.session.timeout.ms). Kafka exits when it
meets that znode; strom instead gets the id back, in one of two ways:

- **End the previous run's session.** A running broker records its session (id and password,
  kazoo's `client_id`) in `SESSION_FILE` of its first log dir as soon as it is connected. A
  broker that holds its log dirs' locks (broker/log/dir_lock.py) knows no live process uses
  these dirs, so when the znode's owner is the session recorded there, that session belongs
  to a dead process: connecting with its id and password and closing makes ZooKeeper delete
  its ephemerals at once.
- **Wait for it to expire**, watching the znode, up to the session timeout and a margin,
  when the owner is any other session (a run whose record is lost, or a live broker with the
  same broker.id: that one keeps its session, and this broker then fails with one line).

Each case is announced with ONE log line, so an operator knows why the start pauses.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from .zk_errors import BrokerIdInUseError
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

SESSION_FILE = "zookeeper-session.json"

__all__ = ["SESSION_FILE", "SavedSession", "SessionRecord", "register_broker", "expiry_wait"]


@dataclass(frozen=True)
class SavedSession:
    session_id: int
    password: bytes


class SessionRecord:
    """The file in a log dir that names the ZooKeeper session of the broker using the dir.

    `previous` is what the file held when this object was made: the last run's session. Make
    it only while holding the dir's lock (after broker/log/dir_lock.lock_log_dirs), which is
    what makes `previous` a dead process's session."""

    def __init__(self, log_dir: str | Path):
        self.path = Path(log_dir) / SESSION_FILE
        self.previous = self._read()

    def _read(self) -> SavedSession | None:
        try:
            doc = json.loads(self.path.read_text())
            return SavedSession(int(doc["session_id"], 16), bytes.fromhex(doc["password"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, client_id: tuple[int, bytes]) -> None:
        """Record this run's session (mode 0600: its password can end the session)."""
        session_id, password = client_id
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"session_id": f"0x{session_id:x}", "password": password.hex()}, f)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)


def expiry_wait(session_timeout_s: float) -> float:
    """How long to wait for another session's registration to go: ZooKeeper expires a session
    up to a tick after its timeout, and the owner may have negotiated a little more."""
    return session_timeout_s + max(2.0, 0.2 * session_timeout_s)


def _end_session(connect: str, saved: SavedSession, timeout_s: float) -> None:
    """Take over `saved` and close it (blocking: run in a thread). If it already expired,
    kazoo gets a fresh session instead, and closing that is harmless."""
    client = KazooClient(hosts=connect, client_id=(saved.session_id, saved.password),
                         timeout=timeout_s)
    client.start(timeout=timeout_s)
    try:
        client.stop()
    finally:
        client.close()


async def _wait_gone(session: ZkSession, path: str, limit_s: float) -> bool:
    """True once `path` does not exist (watched, not polled); False after `limit_s`."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + limit_s
    while True:
        changed = asyncio.Event()

        def watch(_event: Any) -> None:        # kazoo's thread
            try:
                loop.call_soon_threadsafe(changed.set)
            except RuntimeError:
                pass

        stat = await session.call(lambda: session.client.exists_async(path, watch=watch))
        if stat is None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(changed.wait(), left)
        except asyncio.TimeoutError:
            pass                               # one last look above, then give up


async def register_broker(session: ZkSession, broker_id: int, path: str, data: bytes,
                          record: SessionRecord | None, session_timeout_s: float) -> None:
    """Create the ephemeral registration `path`, getting it back from a previous run as the
    module docstring says. NODEEXISTS owned by this very session (a retried create after a
    dropped connection) is success (Kafka's checkedEphemeralCreate). BrokerIdInUseError, one
    line, when another session still holds it after the wait."""
    if record is not None:
        try:
            record.save(session.client.client_id)
        except OSError as e:
            # A full (or failing) log dir must not keep the broker out of the cluster: the
            # record only spares a restart the wait for this session to expire.
            log.warning("cannot record ZooKeeper session 0x%x in %s (a restart will wait for it to "
                        "expire instead): %s", session.client.client_id[0], record.path, e)
    ended: int | None = None
    waited = False
    while True:
        try:
            await session.create(path, data, ephemeral=True, makepath=True)
            return
        except NodeExistsError:
            pass
        got = await session.get(path)
        if got is None:
            continue                            # gone in between: create again
        stat = got[1]
        if session.is_own_ephemeral(stat):
            return
        owner = stat.ephemeralOwner
        previous = record.previous if record is not None else None
        if previous is not None and previous.session_id == owner and ended != owner:
            ended = owner
            log.warning("broker.id %d is still registered by session 0x%x of this broker's "
                        "previous run (its log dirs were free, so that process is gone): "
                        "ending that session", broker_id, owner)
            await asyncio.to_thread(_end_session, session.connect, previous,
                                    session.connection_timeout)
            if await _wait_gone(session, path, 5.0):
                continue
        if waited:
            raise BrokerIdInUseError(
                f"broker.id {broker_id} is registered in ZooKeeper by another live broker "
                f"(session 0x{owner:x}, still there after {expiry_wait(session_timeout_s):.0f} s): "
                f"stop the broker that uses this id, or give this one another broker.id")
        waited = True
        limit = expiry_wait(session_timeout_s)
        log.warning("broker.id %d is still registered by session 0x%x (a previous run?); "
                    "waiting up to %.0f s for it to expire", broker_id, owner, limit)
        await _wait_gone(session, path, limit)
