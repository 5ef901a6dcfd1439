"""Log dir event notifications (KIP-112), as Kafka keeps them in ZooKeeper.

A broker whose log dir failed creates the sequential znode
`/log_dir_event_notification/log_dir_event_<10-digit seq>` holding
`{"version":1,"broker":<id>,"event":1}` (event 1: LogDirFailure). The controller watches the
directory's children; for each notification it sends LeaderAndIsr for every replica of that
broker, learns from the KAFKA_STORAGE_ERROR answers which replicas are offline, marks them
offline and elects new leaders elsewhere; then it deletes the notifications it handled
(Kafka's LogDirEventNotificationHandler and KafkaController.onBrokerLogDirFailure).
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Iterable

from . import zk_paths as zp
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT) -> bytes:
    return json.dumps({"version": 1, "broker": broker_id, "event": event},
                      separators=(",", ":")).encode()


def decode_log_dir_event(data: bytes) -> tuple[int, int]:
    """(broker id, event) of a notification; ZkDataError if it is not one."""
    try:
        doc = json.loads(data)
        return int(doc["broker"]), int(doc.get("event", LOG_DIR_FAILURE_EVENT))
    except (ValueError, KeyError, TypeError) as e:
        raise zp.ZkDataError(f"not a log dir event: {data[:100]!r}") from e


async def announce_log_dir_failure(session: ZkSession, broker_id: int) -> str:
    """This broker's log dir failed: tell the controller. Returns the notification's name."""
    path = await session.create(f"{zp.LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}",
                                encode_log_dir_event(broker_id), sequence=True, makepath=True)
    name = zp.parent_and_name(path)[1]
    log.info("broker %d announced a log dir failure (%s)", broker_id, name)
    return name


async def log_dir_failure_events(session: ZkSession) -> dict[str, int]:
    """The controller's read: pending failure notifications, name -> broker id, oldest
    first. An unreadable one maps to -1 (delete it all the same)."""
    names = sorted(n for n in await session.children(zp.LOG_DIR_EVENT_NOTIFICATION)
                   if n.startswith(LOG_DIR_EVENT_PREFIX))
    datas = await asyncio.gather(*(session.get(f"{zp.LOG_DIR_EVENT_NOTIFICATION}/{n}") for n in names))
    out: dict[str, int] = {}
    for name, got in zip(names, datas):
        if got is None:
            continue                    # deleted meanwhile
        try:
            broker, event = decode_log_dir_event(got[0])
        except zp.ZkDataError as e:
            log.error("unreadable log dir event %s: %s", name, e)
            broker, event = -1, LOG_DIR_FAILURE_EVENT
        out[name] = broker if event == LOG_DIR_FAILURE_EVENT else -1
    return out


async def delete_log_dir_events(session: ZkSession, names: Iterable[str]) -> None:
    await asyncio.gather(*(session.delete_if_exists(f"{zp.LOG_DIR_EVENT_NOTIFICATION}/{n}")
                           for n in names))
