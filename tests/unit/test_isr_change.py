"""A leader's ISR change while its conditional write is in flight, or after it ended with
an unknown outcome.

The coordinator may hold the new ISR before the leader hears back (or without the leader
ever hearing: a dropped connection). The controller elects from the coordinator's ISR, so
until the outcome is known the high watermark must count every replica of either ISR, the
old one and the one being written (Kafka's maximal ISR, KIP-497). Otherwise a replica added
to the ISR in ZooKeeper but not yet in the leader's view could be elected without records
the leader acknowledged with acks=all.
"""
from __future__ import annotations

import asyncio
import uuid

from broker.log import LogConfig, PartitionLog
from broker.replication.replica_manager import ReplicaManager
from broker.replication.purgatory import FetchPurgatory
from clients.protocol.records import Record, build_batch


class Writer:
    """The ISR writer seam of ReplicaManager: holds each write until released, then gives
    the next of `answers` ((ISR held, version), None for stale, or an exception raised);
    the last answer repeats. By default the write lands at version 7."""

    def __init__(self, *answers: object) -> None:
        self.writes: list[list[int]] = []
        self.release = asyncio.Event()
        self.answers = list(answers)

    async def __call__(self, p, new_isr: list[int]) -> tuple[list[int], int] | None:
        self.writes.append(list(new_isr))
        await self.release.wait()
        answer = self.answers.pop(0) if len(self.answers) > 1 else \
            (self.answers[0] if self.answers else (list(new_isr), 7))
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]


def _leader(tmp_path, writer: Writer, replicas: tuple[int, ...] = (0, 1, 2)):
    """Broker 0 leads t-0 with `replicas` and ISR [0, 1]; 5 records appended."""
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    rm = ReplicaManager(0, None, FetchPurgatory(), isr_writer=writer, clock=lambda: 0.0)
    rm.isr_retry_s = 0.01
    rm.logs = type("Logs", (), {"get_log": staticmethod(lambda t, i: plog)})()
    rm.apply_partition_state("t", uuid.uuid4(), 0, leader=0, leader_epoch=1, isr=[0, 1],
                             replicas=list(replicas), partition_epoch=3, log_config=None)
    p = rm.get("t", 0)
    rm.append("t", 0, build_batch([Record(None, b"v")] * 5), required_acks=-1)
    return rm, p


def _expanding(tmp_path, writer: Writer):
    """_leader, then follower 1 at 5 (HW 5), 5 more records, and follower 2 catching up to
    the HW: the leader starts writing ISR [0, 1, 2]."""
    rm, p = _leader(tmp_path, writer)
    rm.record_follower_fetch(p, 1, 5)
    assert p.high_watermark == 5
    rm.append("t", 0, build_batch([Record(None, b"w")] * 5), required_acks=-1)   # 5..9
    rm.record_follower_fetch(p, 2, 5)
    return rm, p


def test_a_replica_being_added_counts_for_the_high_watermark_while_the_write_is_in_flight(tmp_path) -> None:
    async def main() -> None:
        writer = Writer()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0)
        assert writer.writes == [[0, 1, 2]] and p.isr == [0, 1]
        rm.record_follower_fetch(p, 1, 10)          # follower 1 has everything
        # The coordinator may already say [0, 1, 2]: replica 2 (at 5) must hold the HW.
        assert p.high_watermark == 5
        writer.release.set()
        await asyncio.sleep(0.01)
        assert p.isr == [0, 1, 2] and p.partition_epoch == 7
        rm.record_follower_fetch(p, 2, 10)
        assert p.high_watermark == 10

    asyncio.run(main())


def test_an_isr_write_with_an_unknown_outcome_still_holds_the_high_watermark(tmp_path) -> None:
    """The write failed with an error that does not say whether it landed (a lost
    ZooKeeper connection): replica 2 may be in the coordinator's ISR, so it still counts,
    and the write is retried until its outcome is known."""
    async def main() -> None:
        writer = Writer(ConnectionError("connection to ZooKeeper lost"), ([0, 1, 2], 8))
        rm, p = _expanding(tmp_path, writer)
        writer.release.set()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert writer.writes == [[0, 1, 2]] and p.isr == [0, 1]
        rm.record_follower_fetch(p, 1, 10)
        assert p.high_watermark == 5
        await asyncio.sleep(0.05)                   # the retry: this time the outcome is known
        assert writer.writes == [[0, 1, 2], [0, 1, 2]]
        assert p.isr == [0, 1, 2] and p.partition_epoch == 8 and p.high_watermark == 5
        rm.record_follower_fetch(p, 2, 6)
        assert p.high_watermark == 6

    asyncio.run(main())


def test_the_leader_takes_the_isr_the_coordinator_holds_at_its_epoch(tmp_path) -> None:
    """A write refused for its version while the coordinator holds an ISR at this leader's
    epoch (only this leader writes at its epoch: an earlier write of ours whose answer was
    lost) leaves the leader with that ISR, not the one it asked for."""
    async def main() -> None:
        writer = Writer(([0, 2], 11))
        writer.release.set()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0.01)
        assert writer.writes == [[0, 1, 2]]
        assert p.isr == [0, 2] and p.partition_epoch == 11
        rm.record_follower_fetch(p, 1, 10)
        assert p.high_watermark == 5                # replica 2 is in the ISR the controller reads

    asyncio.run(main())


def test_a_refused_isr_write_counts_until_the_controller_says_otherwise(tmp_path) -> None:
    """Refused: the coordinator holds another leader epoch, and what it holds may still be
    our expansion (landed, answer lost, then the controller moved the epoch on keeping it).
    As Kafka, the leader keeps the maximal ISR and writes nothing more until the
    controller's LeaderAndIsr arrives."""
    async def main() -> None:
        writer = Writer(None)
        writer.release.set()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0.01)
        assert p.isr == [0, 1]
        rm.record_follower_fetch(p, 1, 10)
        rm.record_follower_fetch(p, 2, 5)
        assert p.high_watermark == 5 and writer.writes == [[0, 1, 2]]     # no second write
        rm.apply_partition_state("t", p.topic_id, 0, leader=0, leader_epoch=2, isr=[0, 1],
                                 replicas=[0, 1, 2], partition_epoch=9, log_config=None)
        rm.record_follower_fetch(p, 1, 10)
        assert p.high_watermark == 10

    asyncio.run(main())


def test_a_new_leader_epoch_forgets_a_pending_isr_write(tmp_path) -> None:
    async def main() -> None:
        writer = Writer()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0)
        rm.apply_partition_state("t", p.topic_id, 0, leader=0, leader_epoch=2, isr=[0, 1],
                                 replicas=[0, 1, 2], partition_epoch=9, log_config=None)
        writer.release.set()
        await asyncio.sleep(0.01)
        assert p.isr == [0, 1] and p.partition_epoch == 9    # the old epoch's write is ignored
        rm.record_follower_fetch(p, 1, 10)
        assert p.high_watermark == 10

    asyncio.run(main())


def test_a_write_of_unknown_outcome_stops_retrying_once_the_partition_is_gone(tmp_path) -> None:
    async def main() -> None:
        writer = Writer(ConnectionError("connection to ZooKeeper lost"))
        writer.release.set()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0.05)
        assert len(writer.writes) >= 2                  # retried while it leads
        rm.stop_replica("t", 0, delete=False)
        await asyncio.sleep(0.02)
        n = len(writer.writes)
        await asyncio.sleep(0.05)
        assert len(writer.writes) == n and not rm._isr_tasks

    asyncio.run(main())


def test_a_write_of_unknown_outcome_is_not_retried_by_a_follower(tmp_path) -> None:
    """Deposed during the pause before a retry: the retry would write this broker as the
    leader of the new epoch. It must not happen."""
    async def main() -> None:
        writer = Writer(ConnectionError("connection to ZooKeeper lost"))
        writer.release.set()
        rm, p = _leader(tmp_path, writer)
        rm.isr_retry_s = 0.05
        rm.record_follower_fetch(p, 1, 5)
        rm.record_follower_fetch(p, 2, 5)
        await asyncio.sleep(0.01)
        assert writer.writes == [[0, 1, 2]]
        rm.apply_partition_state("t", p.topic_id, 0, leader=1, leader_epoch=2, isr=[1, 2],
                                 replicas=[0, 1, 2], partition_epoch=9, log_config=None)
        await asyncio.sleep(0.1)
        assert writer.writes == [[0, 1, 2]] and not rm._isr_tasks
        assert not p.isr_change_in_flight and p.pending_isr is None

    asyncio.run(main())


def test_two_fetches_in_one_pass_start_one_isr_write(tmp_path) -> None:
    async def main() -> None:
        writer = Writer()
        rm, p = _leader(tmp_path, writer, replicas=(0, 1, 2, 3))
        rm.record_follower_fetch(p, 1, 5)
        rm.append("t", 0, build_batch([Record(None, b"w")] * 5), required_acks=-1)
        rm.record_follower_fetch(p, 2, 5)
        rm.record_follower_fetch(p, 3, 5)           # before the first write's task ran
        await asyncio.sleep(0)
        assert writer.writes == [[0, 1, 2]] and p.pending_isr == [0, 1, 2]
        writer.release.set()
        await asyncio.sleep(0.01)
        assert p.isr == [0, 1, 2]
        rm.record_follower_fetch(p, 3, 5)           # now its turn
        await asyncio.sleep(0.01)
        assert writer.writes[-1] == [0, 1, 2, 3] and p.isr == [0, 1, 2, 3]

    asyncio.run(main())


def test_the_same_epoch_resent_keeps_a_write_in_flight(tmp_path) -> None:
    """A LeaderAndIsr at the same leader epoch with a newer partition epoch (a new
    controller resending the state) can only show our own write: it stays pending."""
    async def main() -> None:
        writer = Writer(([0, 1, 2], 4))
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0)
        rm.apply_partition_state("t", p.topic_id, 0, leader=0, leader_epoch=1, isr=[0, 1, 2],
                                 replicas=[0, 1, 2], partition_epoch=4, log_config=None)
        assert p.pending_isr == [0, 1, 2] and p.isr_change_in_flight
        rm.record_follower_fetch(p, 1, 10)
        rm.record_follower_fetch(p, 2, 5)
        assert p.high_watermark == 5 and writer.writes == [[0, 1, 2]]
        writer.release.set()
        await asyncio.sleep(0.01)
        assert p.isr == [0, 1, 2] and p.partition_epoch == 4 and not p.isr_change_in_flight

    asyncio.run(main())


def test_a_stopping_broker_ends_its_retries_and_starts_no_write(tmp_path) -> None:
    async def main() -> None:
        writer = Writer(ConnectionError("connection to ZooKeeper lost"))
        writer.release.set()
        rm, p = _expanding(tmp_path, writer)
        await asyncio.sleep(0.03)
        assert len(writer.writes) >= 2 and rm._isr_tasks
        rm.stop_isr_changes()
        await asyncio.sleep(0)
        n = len(writer.writes)
        p.pending_isr = None                        # as if nothing were in flight
        rm.record_follower_fetch(p, 2, 10)
        await asyncio.sleep(0.05)
        assert len(writer.writes) == n and not rm._isr_tasks

    asyncio.run(main())


def test_only_the_fetching_follower_can_join_the_isr(tmp_path) -> None:
    """A follower that stopped fetching is shrunk out; the next fetch of *another* follower
    must not add it back on its stale log end offset (Kafka expands the ISR only for the
    replica whose fetch it is handling). Seen in a 3-broker cluster: follower 2 paused,
    shrunk out at 2.5 s, re-added 57 ms later on follower 0's fetch, shrunk again."""
    async def main() -> None:
        writer = Writer()
        writer.release.set()
        rm, p = _leader(tmp_path, writer)
        now = [0.0]
        rm.clock = lambda: now[0]
        rm.apply_partition_state("t", p.topic_id, 0, leader=0, leader_epoch=2, isr=[0, 1, 2],
                                 replicas=[0, 1, 2], partition_epoch=4, log_config=None)
        rm.record_follower_fetch(p, 1, 5)
        rm.record_follower_fetch(p, 2, 5)            # both caught up; then 2 goes silent
        now[0] = 3.0
        rm.record_follower_fetch(p, 1, 5)
        await rm.shrink_isrs(2000)
        await asyncio.sleep(0.01)
        assert writer.writes == [[0, 1]] and p.isr == [0, 1]

        rm.record_follower_fetch(p, 1, 5)            # the healthy follower fetches again
        await asyncio.sleep(0.01)
        assert writer.writes == [[0, 1]] and p.isr == [0, 1]

        rm.record_follower_fetch(p, 2, 5)            # 2 is back and caught up: it joins
        await asyncio.sleep(0.01)
        assert writer.writes == [[0, 1], [0, 1, 2]] and p.isr == [0, 1, 2]

    asyncio.run(main())
