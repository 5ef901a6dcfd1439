"""What a request costs against its client's quotas, and the throttle time that goes into its
response (KIP-219: the answer goes out at once with throttle_time_ms set; the listener then
mutes the connection for that long).

As Kafka accounts: a Produce request counts its size in bytes against producer_byte_rate; a
consumer's Fetch counts its response's size against consumer_byte_rate (a follower's fetch,
replica_id >= 0, is exempt); every request that is not an inter-broker cluster action or part
of the SASL handshake counts the time the broker spent on it, as a percentage of one thread,
against request_percentage. The larger throttle wins. Nothing is looked at when no quota of
a type is configured.
"""
from __future__ import annotations

import struct
import time
from typing import Any

from clients.protocol.schema import Api

from ..quota.manager import ClientQuotaManagers
from .network import ConnectionInfo, Response

PRODUCE, FETCH = 0, 1
# Kafka exempts the controller's and brokers' own requests (ClusterAction APIs), and the
# requests of a connection that is not authenticated yet.
EXEMPT_FROM_REQUEST_QUOTA = frozenset({4, 5, 6, 7, 27, 17, 18, 36})

_I32 = struct.Struct(">i")


def principal_name(principal: str) -> str:
    """The user of quota entities: the principal's name ("User:alice" -> "alice")."""
    return principal.partition(":")[2] or principal


def fetch_from_follower(request: Any, version: int) -> bool:
    replica = request.replica_state.replica_id if version >= 15 else request.replica_id
    return bool(replica >= 0)


class RequestThrottle:
    """The quota accounting of the request path (see the module docstring)."""

    def __init__(self, managers: ClientQuotaManagers, clock_ms: Any = None):
        self.managers = managers
        self.clock_ms = clock_ms or (lambda: time.monotonic() * 1000.0)

    def before_encoding(self, api_key: int, version: int, request: Any, conn: ConnectionInfo,
                        frame_size: int, busy_s: float) -> int:
        """Produce bytes and request time: their throttle, known before the response is
        encoded (so the handler's answer carries it)."""
        m = self.managers
        throttle = 0
        now = self.clock_ms()
        user = principal_name(conn.principal)
        client = conn.client_id or ""
        if api_key == PRODUCE and m.produce.enabled:
            throttle = m.produce.record(user, client, frame_size, now)
        if m.request.enabled and api_key not in EXEMPT_FROM_REQUEST_QUOTA \
                and not (api_key == FETCH and fetch_from_follower(request, version)):
            throttle = max(throttle, m.request.record(user, client, busy_s * 100.0, now))
        return throttle

    def after_encoding(self, api: Api, version: int, request: Any, conn: ConnectionInfo,
                       response: Response, throttle: int) -> int:
        """Fetch bytes: the response's size counts; a larger throttle than the one encoded is
        written into the response's throttle_time_ms (the first field of Fetch v1+)."""
        m = self.managers
        if api.key != FETCH or not m.fetch.enabled or version < 1 \
                or fetch_from_follower(request, version):
            return throttle
        fetched = m.fetch.record(principal_name(conn.principal), conn.client_id or "",
                                 response.size, self.clock_ms())
        if fetched > throttle:
            _patch_throttle(api, version, response, fetched)
            return fetched
        return throttle


def _patch_throttle(api: Api, version: int, response: Response, throttle_ms: int) -> None:
    """Overwrite throttle_time_ms right after the response header (correlation id, and a
    tagged-field count in header v1)."""
    at = 4 if api.response_header_version(version) == 0 else 5
    head = response.chunks[0]
    response.chunks[0] = bytes(head[:at]) + _I32.pack(throttle_ms) + bytes(head[at + 4:])
