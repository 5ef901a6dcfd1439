"""FindCoordinator: which broker coordinates a consumer group or a transactional id.

No group or transaction coordinator exists yet, so every lookup answers
COORDINATOR_NOT_AVAILABLE: the retriable error Kafka gives while __consumer_offsets or
__transaction_state is not ready, which clients back off on and retry. The API is advertised
all the same because clients key features to it: librdkafka < 2.11.1 (Debian's kcat) enables
LZ4 compression only if FindCoordinator v0 is advertised, and otherwise silently sends `-z lz4`
batches uncompressed.
"""
from __future__ import annotations

from clients.protocol.errors import Code
from clients.protocol.messages.group import COORDINATOR_GROUP, COORDINATOR_TRANSACTION

from ..dispatch import handles

_NOT_AVAILABLE = {
    COORDINATOR_GROUP: "The group coordinator is not available.",
    COORDINATOR_TRANSACTION: "The transaction coordinator is not available.",
}


def _lookup(key_type: int) -> tuple[int, str]:
    """(error code, message) for one key: Kafka refuses key types it does not know."""
    if key_type not in _NOT_AVAILABLE:
        return Code.INVALID_REQUEST, f"Unknown coordinator key type {key_type}."
    return Code.COORDINATOR_NOT_AVAILABLE, _NOT_AVAILABLE[key_type]


@handles("FindCoordinator", (0, 4))
def find_coordinator(broker, request, ctx) -> dict:
    key_type = request.key_type if ctx.version >= 1 else COORDINATOR_GROUP
    code, message = _lookup(key_type)
    if ctx.version >= 4:
        # KIP-699: one answer per key, no top-level error.
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, "node_id": -1, "host": "", "port": -1,
             "error_code": code, "error_message": message}
            for key in request.coordinator_keys]}
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "node_id": -1, "host": "", "port": -1}
