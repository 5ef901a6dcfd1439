"""A consumer's fetch session with one broker (KIP-227; Kafka's FetchSessionHandler).

With Fetch v7+, the first (full) request lists every partition with session epoch 0 and the
broker answers with a session id. After that each request is incremental: it names only
the partitions that are new or whose fetch offset, max bytes or leader epoch changed, and
"forgets" the ones the consumer no longer fetches from this broker; the broker remembers
the rest, and answers only for partitions with records or news. A consumer of many mostly
idle partitions then sends and receives little per fetch.

The session restarts with a full request after any doubt: FETCH_SESSION_ID_NOT_FOUND or
INVALID_FETCH_SESSION_EPOCH from the broker, a failed or unanswered request (the broker may
or may not have moved the epoch on). A broker that answers a full request with session id
0 has no room for a session: requests stay full. Sans-io: no sockets, no asyncio.
"""
from __future__ import annotations

from dataclasses import dataclass

from clients.types import TopicPartition

__all__ = ["FetchSessionHandler", "SessionRequest", "PartitionData", "INITIAL_EPOCH",
           "FINAL_EPOCH", "NO_SESSION"]

NO_SESSION = 0
INITIAL_EPOCH = 0       # a full request: (re)create the session
FINAL_EPOCH = -1        # no session at all, or close it
_MAX_EPOCH = 2 ** 31 - 1

# What the broker keeps per partition of a session.
PartitionData = tuple[int, int, int]    # (fetch offset, partition max bytes, current leader epoch)


@dataclass(frozen=True)
class SessionRequest:
    """One request's session fields and partitions; `wanted` is the session after it."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicPartition]
    wanted: dict[TopicPartition, PartitionData]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, PartitionData] = {}
        self.full_requests = 0           # for tests and logs
        self.incremental_requests = 0

    def build(self, wanted: dict[TopicPartition, PartitionData]) -> SessionRequest:
        """The request for fetching `wanted` (every partition this consumer fetches from
        the broker now, with what it would send for each)."""
        if self.session_id == NO_SESSION or self.epoch == INITIAL_EPOCH:
            self.full_requests += 1
            # A session id with epoch 0 closes that session and opens a new one.
            return SessionRequest(self.session_id, INITIAL_EPOCH, dict(wanted), [], dict(wanted))
        self.incremental_requests += 1
        changed = {tp: d for tp, d in wanted.items() if self.partitions.get(tp) != d}
        forget = [tp for tp in self.partitions if tp not in wanted]
        return SessionRequest(self.session_id, self.epoch, changed, forget, dict(wanted))

    def on_response(self, request: SessionRequest, session_id: int) -> None:
        """The broker answered `request` without a top-level error."""
        if request.full:
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == NO_SESSION else 1
        elif session_id != self.session_id:
            # The broker closed the session (Kafka's handler reads it so): start over.
            self.session_id = NO_SESSION
            self.reset()
            return
        else:
            self.epoch = next_epoch(self.epoch)
        self.partitions = dict(request.wanted) if self.session_id != NO_SESSION else {}

    def reset(self) -> None:
        """Start over with a full request (a session error, a failed request, a new leader)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
