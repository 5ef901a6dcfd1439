"""Running for controller: ephemeral /controller and the /controller_epoch counter, as in
Kafka's ZooKeeper mode (KafkaZkClient.registerControllerAndIncrementControllerEpoch).

A won election leaves `controller_epoch_zk_version`: the controller passes it to its writes,
which then run in a transaction with a check of /controller_epoch, so a deposed controller's
write fails with ControllerMovedError (invariant 4 of docs/ARCHITECTURE.md). The election is
forgotten as soon as a read of /controller shows another holder (or none), or the session
is replaced.
"""
from __future__ import annotations

import logging
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from . import zk_paths as zp
from .zk_cluster_view import ClusterView
from .zk_paths import ControllerRegistration
from .zk_session import ZkSession

log = logging.getLogger("strom.zkcoord")


class ControllerElection:
    def __init__(self, session: ZkSession, view: ClusterView):
        self.session = session
        self.view = view
        # Set by a won election (on the view's consumer); passed to controller writes by the
        # controller. Cleared when /controller stops being ours.
        self.controller_epoch_zk_version: int | None = None
        self.elected_controller_epoch: int | None = None
        self._elected_as: int | None = None
        view.on_controller_read = self._controller_read

    @property
    def is_controller(self) -> bool:
        return (self._elected_as is not None and self.view.controller_id == self._elected_as
                and self.controller_epoch_zk_version is not None)

    def clear(self) -> None:
        if self._elected_as is not None:
            log.info("broker %d is no longer controller (epoch %s)", self._elected_as,
                     self.elected_controller_epoch)
        self._elected_as = None
        self.controller_epoch_zk_version = None
        self.elected_controller_epoch = None

    def _controller_read(self, controller_id: int) -> None:
        if self._elected_as is not None and controller_id != self._elected_as:
            self.clear()

    async def try_elect(self, bid: int) -> int | None:
        """Kafka's registerControllerAndIncrementControllerEpoch, in one transaction: create
        ephemeral /controller and set /controller_epoch to epoch+1 at the version just read.
        Returns the new epoch, or None when another broker is (or just became) controller.
        On success `controller_epoch_zk_version` holds the version to guard writes with."""
        if bid < 0:
            raise ValueError("a broker id is needed to run for controller")
        session = self.session
        c = session.client
        try:
            await session.create(zp.CONTROLLER_EPOCH,
                                 zp.encode_controller_epoch(zp.INITIAL_CONTROLLER_EPOCH - 1))
        except NodeExistsError:
            pass
        got = await session.get(zp.CONTROLLER_EPOCH)
        if got is None:
            return None
        epoch, epoch_version = zp.decode_controller_epoch(got[0]), got[1].version
        new_epoch = epoch + 1
        reg = zp.encode_controller(ControllerRegistration(bid))

        def make() -> Any:
            t = c.transaction()
            t.create(zp.CONTROLLER, reg, ephemeral=True)
            t.set_data(zp.CONTROLLER_EPOCH, zp.encode_controller_epoch(new_epoch), epoch_version)
            return t.commit_async()

        created, stat = await session.call(make)
        if isinstance(created, Exception) or isinstance(stat, Exception):
            # Lost the race, unless this is our own transaction retried after a dropped
            # connection (then /controller is ours and the epoch is the one we wrote).
            ctl = await session.get(zp.CONTROLLER)
            if ctl is None or not session.is_own_ephemeral(ctl[1]):
                return None
            if zp.decode_controller(ctl[0]).broker_id != bid:
                return None
            now = await session.get(zp.CONTROLLER_EPOCH)
            if now is None:
                return None
            new_epoch, version = zp.decode_controller_epoch(now[0]), now[1].version
        else:
            version = stat.version

        async def won() -> bool:
            # On the consumer, so no refresh that read /controller before our write can
            # interleave and undo this; the refresh clears it if /controller is gone again.
            self._elected_as = bid
            self.elected_controller_epoch = new_epoch
            self.controller_epoch_zk_version = version
            await self.view.refresh_controller()
            return self._elected_as == bid

        if not await self.view.sync(won):
            return None
        log.info("broker %d elected controller, epoch %d (zk version %d)", bid, new_epoch, version)
        return new_epoch

    async def resign(self) -> bool:
        """Delete /controller if this session holds it. True if it did."""
        got = await self.session.get(zp.CONTROLLER)
        self.clear()
        if got is None or not self.session.is_own_ephemeral(got[1]):
            return False
        try:
            deleted = await self.session.delete_if_exists(zp.CONTROLLER, got[1].version)
        except BadVersionError:
            deleted = False
        await self.view.catch_up(self.view.refresh_controller)
        return deleted

    async def controller_epoch(self) -> int:
        """/controller_epoch (0 before any election)."""
        got = await self.session.get(zp.CONTROLLER_EPOCH)
        return zp.INITIAL_CONTROLLER_EPOCH - 1 if got is None else zp.decode_controller_epoch(got[0])

    async def controller_epoch_and_zk_version(self) -> tuple[int, int] | None:
        got = await self.session.get(zp.CONTROLLER_EPOCH)
        return None if got is None else (zp.decode_controller_epoch(got[0]), got[1].version)

    async def remove_dead_controller(self, broker_id: int) -> bool:
        """Delete /controller while it still names `broker_id`, whose process is gone (see
        liveness.py), so an election starts without waiting for that broker's session to
        expire. True if it did. A newer controller's node is left alone unless it was
        recreated between the read and the delete (same version): then one more election
        runs, which the controller epoch keeps safe."""
        got = await self.session.get(zp.CONTROLLER)
        if got is None or self.session.is_own_ephemeral(got[1]):
            return False
        if zp.decode_controller(got[0]).broker_id != broker_id:
            return False
        try:
            return await self.session.delete_if_exists(zp.CONTROLLER, got[1].version)
        except BadVersionError:
            return False

    async def read_controller(self) -> ControllerRegistration | None:
        got = await self.session.get(zp.CONTROLLER)
        return None if got is None else zp.decode_controller(got[0])
