"""Admin writes of topics and configs, in Kafka's znodes and Kafka's order (AdminZkClient):
create, mark for deletion, add partitions, topic and broker config overrides with their
change notifications, and the controller's last step of a deletion.

After each write the cluster view is brought up to date (`catch_up`), so the caller's next
read of the cache sees its own write.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from kazoo.exceptions import (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError,
                              RolledBackError)

from clients.protocol.errors import (InvalidPartitionsError, InvalidTopicExceptionError,
                                     TopicAlreadyExistsError, UnknownTopicOrPartitionError)

from . import zk_paths as zp
from .store import TopicMetadata
from .zk_cluster_view import ClusterView
from .zk_errors import ControllerMovedError, ZkStoreError
from .zk_paths import TopicAssignment
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")

_ZERO_UUID = uuid.UUID(int=0)


def _check_topic_name(name: str) -> None:
    # The broker validates names fully (Kafka's Topic.validate); a name that is not a single
    # znode name must never reach a path.
    if not name or "/" in name or name in (".", ".."):
        raise InvalidTopicExceptionError(f"Topic name '{name}' is illegal")


class TopicWrites:
    def __init__(self, session: ZkSession, view: ClusterView):
        self.session = session
        self.view = view

    async def create_topic(self, name: str, partitions: dict[int, list[int]],
                           configs: dict[str, str]) -> TopicMetadata:
        """Kafka's order: /config/topics/<t> first, then /brokers/topics/<t> (the node the
        controller watches). Partition states are the controller's to create."""
        _check_topic_name(name)
        session, view = self.session, self.view
        # Kafka's validateTopicCreate order: pending deletion first, then existence.
        if await session.exists(zp.delete_topic_path(name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' is marked for deletion.")
        if name in view.topic_names or await session.exists(zp.topic_path(name)) is not None:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        await session.set_or_create(zp.topic_config_path(name), zp.encode_entity_config(configs))
        topic_id = zp.new_kafka_uuid()
        data = zp.encode_topic(TopicAssignment(dict(partitions), topic_id))
        try:
            await session.create(zp.topic_path(name), data, makepath=True)
        except NodeExistsError:
            got = await session.get(zp.topic_path(name))
            if got is None or got[0] != data:     # not our own create, retried
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
        await view.catch_up(view.refresh_topic_names)
        return view.topics.get(name) or TopicMetadata(name, topic_id, dict(partitions),
                                                      dict(configs))

    async def delete_topic(self, name: str) -> None:
        """Mark for deletion (/admin/delete_topics/<t>); the controller deletes the topic,
        after which it leaves topics(). Marking twice is not an error."""
        if await self.session.exists(zp.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        try:
            await self.session.create(zp.delete_topic_path(name), b"", makepath=True)
        except NodeExistsError:
            pass
        await self.view.catch_up(self.view.refresh_deletions)

    async def add_partitions(self, name: str, new: dict[int, list[int]]) -> TopicMetadata:
        path = zp.topic_path(name)
        while True:
            got = await self.session.get(path)
            if got is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            assignment = zp.decode_topic(name, got[0])
            clash = sorted(set(new) & set(assignment.partitions))
            if clash:
                raise InvalidPartitionsError(f"Topic '{name}' already has partitions {clash}.")
            assignment.partitions.update({p: list(r) for p, r in new.items()})
            try:
                await self.session.set(path, zp.encode_topic(assignment), got[1].version)
                break
            except BadVersionError:
                continue          # changed concurrently: re-read and re-check
        await self.view.catch_up(lambda: self.view.refresh_topic(name))
        return self.view.topics.get(name) or TopicMetadata(
            name, assignment.topic_id or _ZERO_UUID, dict(assignment.partitions), {})

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicMetadata:
        """Replace the topic's overrides, then write Kafka's change notification
        (/config/changes/config_change_<seq>, entity_path topics/<t>)."""
        session, view = self.session, self.view
        if name not in view.topic_names and await session.exists(zp.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        await session.set_or_create(zp.topic_config_path(name), zp.encode_entity_config(configs))
        note = zp.encode_config_change(zp.ConfigChangeNotification(f"{zp.CONFIG_TYPE_TOPIC}/{name}"))
        await session.create(zp.config_change_create_path(), note, sequence=True, makepath=True)
        await view.catch_up(lambda: view.refresh_topic_config(name))
        meta = view.topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        if meta.configs != configs:        # cache behind (or a newer write): report ours
            meta = TopicMetadata(name, meta.topic_id, meta.partitions, dict(configs))
        return meta

    async def fetch_broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """/config/brokers/<entity> as stored now (no watch): the base of an incremental
        change, as Kafka's fetchEntityConfig."""
        got = await self.session.get(zp.broker_config_path(broker_id))
        if got is None:
            return {}
        try:
            return zp.decode_entity_config(got[0])
        except zp.ZkDataError as e:
            log.error("ignoring unreadable broker config: %s", e)
            return {}

    async def set_broker_configs(self, broker_id: int | None, configs: dict[str, str]) -> None:
        """Kafka's AdminZkClient.changeBrokerConfig: write /config/brokers/<entity>, then the
        change notification (entity_path brokers/<entity>) other tools and brokers follow."""
        path = zp.broker_config_path(broker_id)
        await self.session.set_or_create(path, zp.encode_entity_config(configs))
        entity = zp.DEFAULT_BROKER_ENTITY if broker_id is None else str(broker_id)
        note = zp.encode_config_change(zp.ConfigChangeNotification(f"{zp.CONFIG_TYPE_BROKER}/{entity}"))
        await self.session.create(zp.config_change_create_path(), note, sequence=True, makepath=True)
        if broker_id is None or broker_id == self.view.broker_id:
            await self.view.catch_up(self.view.refresh_broker_configs)

    async def topic_assignment(self, name: str) -> tuple[TopicAssignment, int] | None:
        """/brokers/topics/<t> as stored, with its zk version."""
        got = await self.session.get(zp.topic_path(name))
        return None if got is None else (zp.decode_topic(name, got[0]), got[1].version)

    async def write_topic_assignment(self, name: str, assignment: TopicAssignment, expected_version: int,
                                     *, controller_epoch_zk_version: int) -> int | None:
        """The controller's rewrite of /brokers/topics/<t> (a reassignment's steps), in one
        transaction with its epoch check: the new zk version, or None when the znode is no
        longer at `expected_version`. ControllerMovedError when the epoch moved on."""
        c = self.session.client
        path = zp.topic_path(name)
        data = zp.encode_topic(assignment)

        def make() -> Any:
            t = c.transaction()
            t.check(zp.CONTROLLER_EPOCH, controller_epoch_zk_version)
            t.set_data(path, data, expected_version)
            return t.commit_async()

        check, written = await self.session.call(make)
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(f"controller epoch zk version is no longer {controller_epoch_zk_version}")
        if isinstance(written, (BadVersionError, NoNodeError)):
            return None
        if isinstance(written, Exception):
            raise written
        await self.view.catch_up(lambda: self.view.refresh_topic(name))
        return int(written.version)

    async def topics_marked_for_deletion(self) -> set[str]:
        return set(await self.session.children(zp.DELETE_TOPICS))

    async def complete_topic_deletion(self, name: str, *,
                                      controller_epoch_zk_version: int | None = None) -> None:
        """The controller's last step of a deletion: remove /brokers/topics/<t> (with its
        partition states), /config/topics/<t> and /admin/delete_topics/<t> in one
        transaction, so the topic disappears at once or not at all."""
        session = self.session
        c = session.client
        for _ in range(10):
            paths = await self._subtree(zp.topic_path(name))
            for p in (zp.topic_config_path(name), zp.delete_topic_path(name)):
                if await session.exists(p) is not None:
                    paths.append(p)
            if not paths:
                return

            def make(paths: list[str] = paths) -> Any:
                t = c.transaction()
                if controller_epoch_zk_version is not None:
                    t.check(zp.CONTROLLER_EPOCH, controller_epoch_zk_version)
                for p in paths:
                    t.delete(p)
                return t.commit_async()

            results = await session.call(make)
            if controller_epoch_zk_version is not None:
                check, results = results[0], results[1:]
                if isinstance(check, Exception) and not isinstance(check, RolledBackError):
                    raise ControllerMovedError(
                        f"controller epoch zk version is no longer {controller_epoch_zk_version}")
            failure = next((r for r in results if isinstance(r, Exception)
                            and not isinstance(r, RolledBackError)), None)
            if failure is None:
                await self.view.catch_up(self.view.refresh_topic_names)
                return
            if not isinstance(failure, (NotEmptyError, NoNodeError)):
                raise failure
            # a node appeared or vanished since the listing: list again
        raise ZkStoreError(f"topic '{name}' kept changing while being deleted")

    async def _subtree(self, root: str) -> list[str]:
        """All paths under and including `root`, children before parents."""
        c = self.session.client
        try:
            children = await self.session.call(lambda: c.get_children_async(root))
        except NoNodeError:
            return []
        out: list[str] = []
        for sub in await asyncio.gather(*(self._subtree(f"{root}/{ch}") for ch in children)):
            out.extend(sub)
        out.append(root)
        return out
