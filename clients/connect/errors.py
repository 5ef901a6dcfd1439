"""What a herder answers instead of a result; the REST layer maps each to Kafka Connect's
status code and `{"error_code": ..., "message": ...}` body."""
from __future__ import annotations

__all__ = ["ConnectRestError", "NotFoundError", "AlreadyExistsError", "BadRequestError",
           "ConflictError", "NotLeaderError", "RequestTimeoutError"]


class ConnectRestError(Exception):
    status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFoundError(ConnectRestError):
    status = 404          # "Connector x not found", "Unknown task", "Unknown plugin"


class AlreadyExistsError(ConnectRestError):
    status = 409          # "Connector x already exists"


class BadRequestError(ConnectRestError):
    status = 400          # a malformed body, a config that does not validate


class ConflictError(ConnectRestError):
    status = 409          # a rebalance is under way, or the request needs a stopped connector


class RequestTimeoutError(ConnectRestError):
    status = 500          # "Request timed out"


class NotLeaderError(ConnectRestError):
    """Only the group's leader may do this; the REST layer forwards the request to
    `leader_url` (None: no leader known yet, answered 409)."""

    status = 409

    def __init__(self, message: str, leader_url: str | None):
        super().__init__(message)
        self.leader_url = leader_url
