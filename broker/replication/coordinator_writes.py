"""What a failed acks=all write of a coordinator's internal topic (`__consumer_offsets`,
`__transaction_state`) means to its client, as Kafka's coordinators map it: too few
replicas, a timeout or a missing partition are "coordinator not available" (retry), a
partition this broker no longer leads is "not coordinator" (look it up again)."""
from __future__ import annotations

from clients.protocol.errors import Code

COORDINATOR_WRITE_ERRORS = {
    Code.UNKNOWN_TOPIC_OR_PARTITION: Code.COORDINATOR_NOT_AVAILABLE,
    Code.NOT_ENOUGH_REPLICAS: Code.COORDINATOR_NOT_AVAILABLE,
    Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Code.COORDINATOR_NOT_AVAILABLE,
    Code.REQUEST_TIMED_OUT: Code.COORDINATOR_NOT_AVAILABLE,
    Code.NOT_LEADER_OR_FOLLOWER: Code.NOT_COORDINATOR,
    Code.KAFKA_STORAGE_ERROR: Code.NOT_COORDINATOR,
}
