"""Errors of the ZooKeeper metadata store, raised to its callers (the broker, the controller)."""
from __future__ import annotations


class ZkStoreError(Exception):
    """Base of the ZooKeeper metadata store's own errors."""


class ZkNotConnectedError(ZkStoreError):
    """No ZooKeeper connection within the connection timeout."""


class BrokerIdInUseError(ZkStoreError):
    """NODEEXISTS on /brokers/ids/<id>: another live broker (another session) holds this id."""


class StaleZkVersionError(ZkStoreError):
    """BADVERSION on a conditional write: the znode changed since it was read. The caller
    holds stale state (e.g. a deposed leader or controller) and must re-read, not retry."""

    def __init__(self, path: str, expected_version: int, message: str = ""):
        self.path = path
        self.expected_version = expected_version
        super().__init__(message or f"BADVERSION: {path} is no longer at zk version "
                                    f"{expected_version}; someone wrote a newer value")


class ControllerMovedError(ZkStoreError):
    """The /controller_epoch version check failed: another broker became controller since."""


class PartitionStateExistsError(ZkStoreError):
    pass


class NoPartitionStateError(ZkStoreError):
    pass
