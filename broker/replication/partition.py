"""One partition's replication state on this broker: leadership, ISR, high watermark.

The leader tracks every follower's fetch offset and when it last caught up; the high
watermark is the smallest log end offset among the in-sync replicas (Kafka's Partition).
ISR changes are decided here but only applied after the coordinator's conditional write
succeeds (`ReplicaManager` does the write), so a deposed leader whose partition epoch is
stale can neither shrink the ISR to itself nor advance the high watermark past what the
real ISR holds (invariant 4). While a write is pending, the high watermark counts the
replicas of the pending ISR too: the coordinator may hold it already.

Single event-loop thread; methods are synchronous except where the caller awaits a write.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from clients.protocol.errors import Code, NotEnoughReplicasError, NotLeaderOrFollowerError

from ..log import ORIGIN_CLIENT

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass
class FollowerState:
    """The leader's view of one follower (Kafka's Replica)."""

    broker_id: int
    log_end_offset: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_time: float = 0.0
    last_caught_up_time: float = 0.0


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Any                                  # broker.log.PartitionLog
    broker_id: int
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0                  # the coordinator's version of the partition state (zk_version)
    controller_epoch: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # The ISR a conditional write is carrying, until its outcome is known: the coordinator
    # (and so the controller's next election) may already hold it, so the high watermark
    # counts the replicas of both (Kafka's maximal ISR, KIP-497). One write at a time.
    pending_isr: list[int] | None = None
    epoch_start_offset: int = 0               # log end when this broker became leader of this epoch
    # Follower side, for the metrics: the leader's high watermark minus this log's end after
    # the latest fetch (Kafka's FetcherLagMetrics ConsumerLag). Stale on a leader.
    fetch_lag: int = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def isr_change_in_flight(self) -> bool:
        return self.pending_isr is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def min_isr(self) -> int:
        return self.log.config.min_insync_replicas

    def last_offset_for(self, isolation_level: int) -> int:
        """The offset a consumer may read up to (exclusive)."""
        if isolation_level == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.log.high_watermark

    # ------------------------------------------------------------------ transitions
    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int],
                    partition_epoch: int, now: float) -> None:
        if leader_epoch != self.leader_epoch or not self.is_leader:
            # A new epoch: no write of ours can land any more (the controller's write moved
            # the znode's version on), so nothing is pending. The same epoch again (a
            # resent state) keeps a write in flight and what it may have written.
            self.pending_isr = None
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.partition_epoch = partition_epoch
        self.followers = {r: FollowerState(r, last_caught_up_time=now if r in isr else 0.0)
                          for r in replicas if r != self.broker_id}
        # Followers ask where this epoch starts (OffsetForLeaderEpoch): record it now.
        self.epoch_start_offset = self.log.log_end_offset
        self.log.leader_epochs.assign(leader_epoch, self.epoch_start_offset)
        self.maybe_advance_high_watermark()

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.followers = {}

    # ------------------------------------------------------------------ leader side
    def append_as_leader(self, records: Any, required_acks: int, origin: str = ORIGIN_CLIENT) -> Any:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {self.topic}-{self.index}")
        if required_acks == -1 and len(self.isr) < self.min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_isr} for partition {self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        self.maybe_advance_high_watermark()
        return info

    def update_follower(self, replica_id: int, fetch_offset: int, now: float) -> bool:
        """Record a follower's fetch; True if the high watermark moved."""
        st = self.followers.get(replica_id)
        if st is None:
            return False
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_time = now
        elif fetch_offset >= st.last_fetch_leader_leo:
            # It has everything the leader had at its previous fetch.
            st.last_caught_up_time = max(st.last_caught_up_time, st.last_fetch_time)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_leo = leo
        st.last_fetch_time = now
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        pending = self.pending_isr
        for r in self.isr if pending is None else (*self.isr, *pending):
            if r != self.broker_id:
                st = self.followers.get(r)
                new_hw = min(new_hw, st.log_end_offset if st else -1)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    def should_join_isr(self, replica_id: int) -> bool:
        """The follower whose fetch was just recorded is outside the ISR and has caught up to
        the high watermark and to the start of this leader's epoch (Kafka's
        isFollowerInSync). Only that follower: another's log end offset may be stale (it
        stopped fetching, which is why it left the ISR)."""
        st = self.followers.get(replica_id)
        return st is not None and replica_id not in self.isr and replica_id in self.replicas \
            and st.log_end_offset >= self.log.high_watermark \
            and st.log_end_offset >= self.epoch_start_offset

    def isr_to_shrink(self, now: float, lag_max_s: float) -> list[int]:
        """Followers in the ISR that have not caught up within replica.lag.time.max.ms."""
        return [r for r in self.isr if r != self.broker_id
                and now - self.followers.get(r, FollowerState(r)).last_caught_up_time > lag_max_s]

    def replicated_to(self, offset: int) -> int | None:
        """For acks=all: None while waiting, else the error code (0 = fully replicated)."""
        if not self.is_leader:
            return Code.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= offset:
            return 0 if len(self.isr) >= self.min_isr else Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None
