"""The controller: exactly one broker at a time (the holder of ephemeral /controller)
elects partition leaders and tells brokers, as Kafka's ZooKeeper-mode controller does.

Every broker runs a `Controller`; it acts only while elected. ZooKeeper watch events and
requests (controlled shutdown) go through ONE queue processed in order by one task, so the
controller's logic is single-threaded. Every partition-state write is conditional on both
the partition state's znode version and the /controller_epoch znode version, so a deposed
controller can change nothing (invariant 4 of docs/ARCHITECTURE.md), and every request to
brokers carries the controller epoch, which brokers check.

Leader election (Kafka's OfflinePartitionLeaderElectionStrategy): the first replica, in
assignment order, that is alive and in the ISR; if none and unclean.leader.election.enable,
the first alive replica; otherwise the partition stays offline (leader -1) with its ISR.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Set
from dataclasses import dataclass
from typing import Callable, Protocol, Union

from clients.aio.security import PLAINTEXT, ClientSecurity

from . import zk_paths as zp
from .controller_channels import BrokerChannels
from .liveness import ProcessWatch, RevivalWatch
from .reassignment import Reassignment, invalid_target
from .store import TopicConfigChanged
from .zk_errors import ControllerMovedError, StaleZkVersionError
from .zk_events import (BrokerModified, BrokersChanged, ControllerChanged, IsrChangesNotified,
                        LogDirEventsNotified, ReassignPartitionsRequested,
                        PreferredReplicaElectionRequested, SessionReestablished,
                        TopicDeletionsRequested, TopicModified, TopicsChanged, ZkEvent)
from .zookeeper import ZkMetadataStore

# Kafka's SecurityProtocol ids, as UpdateMetadata carries them.
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LEADER_DURING_DELETE = -2
LEADER_AND_ISR_VERSION = 6
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3


@dataclass
class PState:
    state: zp.PartitionState
    zk_version: int


@dataclass(frozen=True)
class ControllerSettings:
    """What the controller reads of its broker's configuration, once at start."""
    broker_id: int
    listener_name: str                  # the listener it reaches brokers on
    auto_leader_rebalance: bool         # auto.leader.rebalance.enable
    imbalance_check_interval_s: float   # leader.imbalance.check.interval.seconds
    imbalance_ratio: float              # leader.imbalance.per.broker.percentage / 100
    security: ClientSecurity = PLAINTEXT  # how it connects to brokers (the inter-broker security)


# Work the controller gives itself, queued with the store's events so all run in one order.
@dataclass(frozen=True)
class _Elect:
    pass


@dataclass(frozen=True)
class _PreferredElection:
    pass


@dataclass(frozen=True)
class _UncleanEnabled:
    pass


@dataclass(frozen=True)
class _ProcessDied:
    """A broker's listener refused connections (liveness.py): the process registered at
    `registered_at` (its registration's timestamp) is gone."""
    broker_id: int
    registered_at: int


@dataclass(frozen=True)
class _ProcessAlive:
    """A fenced broker's listener accepts connections again (liveness.RevivalWatch)."""
    broker_id: int
    registered_at: int


@dataclass(frozen=True)
class _ReplicasOffline:
    """A broker answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these partitions: their
    replicas there sit in a failed log dir (KIP-112)."""
    broker_id: int
    partitions: "frozenset[TopicPartition]"


@dataclass(frozen=True)
class _ControlledShutdown:
    broker_id: int
    answer: "asyncio.Future[list[TopicPartition] | None]"


# ElectLeaders' election types (Kafka's ElectionType).
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1
# Kafka's error codes of an election result, as ElectLeaders answers them per partition.
_UNKNOWN_TOPIC_OR_PARTITION = 3
_INVALID_REPLICA_ASSIGNMENT = 39
_NO_REASSIGNMENT_IN_PROGRESS = 85
_KAFKA_STORAGE_ERROR = 56
_PREFERRED_LEADER_NOT_AVAILABLE = 80
_ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
_ELECTION_NOT_NEEDED = 84

ElectionResult = tuple[int, "str | None"]      # (error code, message) of one partition


@dataclass(frozen=True)
class _RequestedElection:
    """An ElectLeaders request (or /admin/preferred_replica_election): `partitions` None
    means every partition."""
    election_type: int
    partitions: "tuple[TopicPartition, ...] | None"
    answer: "asyncio.Future[dict[TopicPartition, ElectionResult] | None]"


@dataclass(frozen=True)
class _AlterReassignments:
    """AlterPartitionReassignments: a target replica list per partition, None to cancel."""
    targets: "tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]"
    answer: "asyncio.Future[dict[TopicPartition, ElectionResult] | None]"


@dataclass(frozen=True)
class _ListReassignments:
    partitions: "tuple[TopicPartition, ...] | None"
    answer: "asyncio.Future[dict[TopicPartition, Reassignment] | None]"


ControllerEvent = Union[ZkEvent, _Elect, _PreferredElection, _UncleanEnabled, _ControlledShutdown,
                        _RequestedElection, _ProcessDied, _ProcessAlive, _AlterReassignments,
                        _ListReassignments, _ReplicasOffline]


class ElectionTimes(Protocol):
    def observe(self, value: float) -> None: ...


class ElectionStats(Protocol):
    """Kafka's ControllerStats as the controller updates them (the broker's metrics own them)."""
    @property
    def election_ms(self) -> ElectionTimes: ...
    unclean_elections: int


class Controller:
    """`unclean_leader_election()` is the broker's unclean.leader.election.enable, asked at
    each election (a dynamic config: it may change while the broker runs); `on_elected(epoch)`
    is called the moment this broker wins an election, before the failover's work."""

    def __init__(self, settings: ControllerSettings, zk: ZkMetadataStore, stats: ElectionStats,
                 unclean_leader_election: Callable[[], bool],
                 on_elected: Callable[[int], None] = lambda epoch: None):
        self.zk = zk
        self.on_elected = on_elected
        self.broker_id = settings.broker_id
        self.auto_rebalance = settings.auto_leader_rebalance
        self.imbalance_interval_s = settings.imbalance_check_interval_s
        self.imbalance_ratio = settings.imbalance_ratio
        self.unclean_leader_election = unclean_leader_election
        self._rebalance_task: asyncio.Task | None = None
        self.epoch: int | None = None
        self.epoch_zk_version: int | None = None
        self.live: set[int] = set()
        self.states: dict[TopicPartition, PState] = {}
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.shutting_down: set[int] = set()
        self.reassigning: dict[TopicPartition, Reassignment] = {}
        # Moves asked through /admin/reassign_partitions: taken out of it as they complete.
        self.zk_requested_moves: set[TopicPartition] = set()
        self.incarnations: dict[int, int] = {}
        # Replicas in a failed log dir, per broker, until that broker registers anew.
        self.offline_replicas: dict[int, set[TopicPartition]] = {}
        # Brokers whose process is gone while ZooKeeper still holds their registration:
        # broker id -> the fenced registration's timestamp (a new process registers anew).
        self.fenced: dict[int, int] = {}
        # While active: a ProcessWatch per other live broker; otherwise one on the controller.
        self._watches: dict[tuple[int, int], ProcessWatch] = {}
        # While active: a RevivalWatch per fenced broker still registered as when fenced.
        self._revivals: dict[tuple[int, int], RevivalWatch] = {}
        self.channels = BrokerChannels(f"controller-{self.broker_id}", settings.listener_name, settings.security,
                                       zk.broker_registrations, lambda b: b in self.live)
        self.events: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.stats = stats

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def offline_partition_count(self) -> int:
        """Partitions whose leader is none or not a live broker (Kafka's
        OfflinePartitionsCount); meaningful on the active controller only."""
        live = self.live
        return sum(1 for ps in self.states.values()
                   if ps.state.leader == zp.NO_LEADER or ps.state.leader not in live)

    # ================================================================== lifecycle
    async def start(self) -> None:
        self._unsubscribe = self.zk.subscribe(self.events.put_nowait)
        self._task = asyncio.ensure_future(self._process())
        self.events.put_nowait(_Elect())

    async def stop(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()
        if self._task:
            self._task.cancel()
        self._stand_down()
        self._stop_watches()
        await self.channels.close_connections()

    async def _process(self) -> None:
        while True:
            event = await self.events.get()
            try:
                await self._handle(event)
                self._sync_watches()
            except ControllerMovedError:
                log.warning("controller %d: another broker became controller; standing down", self.broker_id)
                self._stand_down()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %d: event %r failed", self.broker_id, event)

    async def _handle(self, event: ControllerEvent) -> None:
        if isinstance(event, _Elect) or (isinstance(event, ControllerChanged)
                                         and event.controller_id == zp.NO_LEADER):
            if not self.active:
                await self._elect()
            return
        if isinstance(event, ControllerChanged):
            if self.active and event.controller_id != self.broker_id:
                self._stand_down()
            return
        if isinstance(event, _ProcessDied):
            await self._on_process_died(event.broker_id, event.registered_at)
            return
        if isinstance(event, _ProcessAlive):
            await self._on_process_alive(event.broker_id, event.registered_at)
            return
        if isinstance(event, SessionReestablished):
            self._stand_down()
            await self._elect()
            return
        if isinstance(event, _PreferredElection):
            if self.active:
                await self._preferred_election()
            return
        if isinstance(event, _ControlledShutdown):
            try:
                remaining = await self._controlled_shutdown(event.broker_id) if self.active else None
            except BaseException as e:
                if not event.answer.done():
                    event.answer.set_exception(e if isinstance(e, Exception) else asyncio.CancelledError())
                raise
            if not event.answer.done():
                event.answer.set_result(remaining)
            return
        if isinstance(event, (_RequestedElection, _AlterReassignments, _ListReassignments)):
            await self._answer(event)
            return
        if not self.active:
            return
        if isinstance(event, _UncleanEnabled):
            if self.unclean_leader_election():
                await self._elect_offline(None)
            return
        if isinstance(event, TopicConfigChanged):
            if str(event.configs.get("unclean.leader.election.enable", "")).strip().lower() == "true":
                await self._elect_offline(event.name)
            return
        if isinstance(event, BrokersChanged):
            await self._on_brokers_changed(set(event.added), set(event.removed))
        elif isinstance(event, BrokerModified):
            # A new process registered in the same breath as the old registration went (a
            # restart that ended its predecessor's session): no membership change was seen,
            # but it is a new broker. A fenced one simply joins; a live one is bounced, as
            # Kafka's controller does on a newer broker epoch: failed over (its leadership
            # and ISR places go), then started.
            b, registered_at = event.broker_id, event.registration.timestamp
            if b in self.fenced:
                if self.fenced[b] != registered_at:
                    await self._on_brokers_changed({b}, set())
            elif b in self.live and self.incarnations.get(b, registered_at) != registered_at:
                await self._on_brokers_changed(set(), set(), bounced={b})
        elif isinstance(event, (TopicsChanged, TopicModified)):
            await self._on_topics_changed()
        elif isinstance(event, TopicDeletionsRequested):
            await self._on_deletions(set(event.topics))
        elif isinstance(event, IsrChangesNotified):
            await self._on_isr_changes()
        elif isinstance(event, ReassignPartitionsRequested):
            await self._on_reassign_partitions_znode()
        elif isinstance(event, LogDirEventsNotified):
            await self._on_log_dir_events()
        elif isinstance(event, _ReplicasOffline):
            await self._on_replicas_offline(event.broker_id, set(event.partitions))
        elif isinstance(event, PreferredReplicaElectionRequested):
            await self._on_preferred_replica_election_znode()

    def _stand_down(self) -> None:
        if self.epoch is not None:
            log.info("controller %d: resigning at epoch %d", self.broker_id, self.epoch)
        self.epoch = None
        self.epoch_zk_version = None
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self.channels.close_all()

    # ================================================================== election
    async def _elect(self) -> None:
        epoch = await self.zk.try_elect_controller(self.broker_id)
        if epoch is None:
            return
        self.epoch = epoch
        self.epoch_zk_version = self.zk.controller_epoch_zk_version
        log.info("controller %d: elected at epoch %d", self.broker_id, epoch)
        self.on_elected(epoch)
        await self._on_become_controller()

    async def _on_become_controller(self) -> None:
        # What a previous term learned may be stale (this broker ignored membership events
        # while not active): the full LeaderAndIsr below rediscovers failed log dirs, the
        # topic znodes and /admin/reassign_partitions the moves, the watches dead processes.
        self.offline_replicas.clear()
        self.zk_requested_moves.clear()
        self.shutting_down.clear()
        self.fenced.clear()
        self.live = self._zk_live()
        self._note_incarnations()
        self._sync_watches()        # a dead predecessor is found while the rest goes on
        for b in self.live:
            self.channels.open(b)
        # Tell every broker at once who the controller is now (live brokers, no partitions):
        # until then their Metadata answers still name the old, dead controller, and a client
        # such as librdkafka's AdminClient waits for it. Kafka's onControllerFailover also
        # sends this UpdateMetadata before its state machines start electing.
        self._send_update_metadata(self.live, [])
        self.assignments = {name: dict(t.partitions) for name, t in self.zk.topics().items()}
        self._resume_reassignments()
        tps = [(t, p) for t, parts in self.assignments.items() for p in parts]
        got = await self.zk.get_partition_states(tps)
        self.states = {tp: PState(s, v) for tp, (s, v) in got.items()}
        await self._initialize_new_partitions()
        # Partitions whose leader is gone (or that have none) get one now, and replicas that
        # died while there was no controller leave the ISRs (Kafka's failover does both).
        await self._elect_leaders([tp for tp, ps in self.states.items() if ps.state.leader not in self.live])
        dead = {r for tp in self.states for r in self._replicas(tp)} - self.live
        if dead:
            await self._remove_from_isr([tp for tp, ps in self.states.items() if set(ps.state.isr) & dead], dead)
        self._send_update_metadata(self.live, list(self.states))
        for b in self.live:
            self._send_leader_and_isr(b, [tp for tp in self.states if b in self._replicas(tp)])
        pending = await self.zk.topics_marked_for_deletion()
        if pending:
            await self._on_deletions(pending)
        await self._on_isr_changes()
        await self._on_log_dir_events()
        await self._on_preferred_replica_election_znode()
        await self._complete_reassignments(list(self.reassigning))
        await self._on_reassign_partitions_znode()
        if self.auto_rebalance:
            self._rebalance_task = asyncio.ensure_future(self._rebalance_timer())

    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self.imbalance_interval_s)
            self.events.put_nowait(_PreferredElection())

    async def _preferred_election(self) -> list[TopicPartition]:
        """auto.leader.rebalance.enable: move leadership back to each partition's preferred
        (first) replica, for brokers whose share of partitions led elsewhere exceeds
        leader.imbalance.per.broker.percentage, when that replica is alive and in sync."""
        moves: dict[TopicPartition, zp.PartitionState] = {}
        for b in sorted(self.live - self.shutting_down):
            preferred = [tp for tp in self.states if self._replicas(tp)[:1] == [b]]
            away = [tp for tp in preferred if self.states[tp].state.leader != b]
            if not preferred or len(away) / len(preferred) <= self.imbalance_ratio:
                continue
            for tp in away:
                s = self.states[tp].state
                if b in s.isr and self._online(b, tp):
                    moves[tp] = zp.PartitionState(b, s.leader_epoch + 1, s.isr, self._acting_epoch())
        changed = await self._write_states(moves)
        if changed:
            log.info("controller: preferred replica election moved %d leaders", len(changed))
            self._announce(changed)
        return changed

    async def _answer(self, event: "_RequestedElection | _AlterReassignments | _ListReassignments") -> None:
        """Run an operator's request and resolve its future (None: not the controller); a
        failure is handed to the waiting handler too, never left unanswered."""
        answer: asyncio.Future = event.answer
        try:
            result: object = None
            if self.active:
                if isinstance(event, _RequestedElection):
                    result = await self._requested_election(event.election_type, event.partitions)
                elif isinstance(event, _AlterReassignments):
                    result = await self._alter_reassignments(event.targets)
                else:
                    result = self._list_reassignments(event.partitions)
        except BaseException as e:
            if not answer.done():
                answer.set_exception(e if isinstance(e, Exception) else asyncio.CancelledError())
            raise
        if not answer.done():
            answer.set_result(result)

    async def _requested_election(self, election_type: int, partitions: tuple[TopicPartition, ...] | None
                                  ) -> dict[TopicPartition, ElectionResult]:
        """Kafka's KafkaController.onReplicaElection for ElectLeaders: per partition, success
        (0, None) or why not. Preferred: the first replica, if alive and in the ISR.
        Unclean: only a partition without a live leader, from the ISR if a member is alive,
        else any live replica (the operator asked for it, whatever the topic's setting)."""
        results: dict[TopicPartition, ElectionResult] = {}
        deleting = self.zk.topics_pending_deletion()
        if partitions is None:
            pending = [tp for tp in self.states if tp[0] not in deleting]
        else:
            pending = []
            for tp in dict.fromkeys(partitions):
                if tp in self.states and tp[0] not in deleting:
                    pending.append(tp)
                else:
                    results[tp] = (_UNKNOWN_TOPIC_OR_PARTITION,
                                   "This server does not host this topic-partition.")
        started = time.perf_counter()
        elected: list[TopicPartition] = []
        for _ in range(3):     # a write that met a newer state is decided again from it
            updates: dict[TopicPartition, zp.PartitionState] = {}
            for tp in pending:
                decided = self._decide_election(election_type, tp)
                if isinstance(decided, zp.PartitionState):
                    updates[tp] = decided
                else:
                    results[tp] = decided
            written, stale = await self._write_states_reporting_stale(updates)
            for tp in written:
                results[tp] = (0, None)
                if updates[tp].leader_recovery_state == zp.LEADER_RECOVERY_RECOVERING:
                    log.warning("controller: UNCLEAN leader election of %s-%d: %d (requested)",
                                tp[0], tp[1], updates[tp].leader)
                    self.stats.unclean_elections += 1
            elected += written
            pending = stale
            if not pending:
                break
        for tp in pending:
            results[tp] = (_ELIGIBLE_LEADERS_NOT_AVAILABLE, f"Partition {tp[0]}-{tp[1]} changed while electing")
        if elected:
            self.stats.election_ms.observe((time.perf_counter() - started) * 1000.0)
            log.info("controller: %s leader election moved %d leaders",
                     "preferred" if election_type == PREFERRED_ELECTION else "unclean", len(elected))
            self._announce(elected)
        return results

    def _decide_election(self, election_type: int, tp: TopicPartition) -> zp.PartitionState | ElectionResult:
        s = self.states[tp].state
        replicas = self._replicas(tp)
        name = f"{tp[0]}-{tp[1]}"
        if election_type == PREFERRED_ELECTION:
            preferred = replicas[0] if replicas else zp.NO_LEADER
            if s.leader == preferred and self._online(preferred, tp):
                return (_ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            if self._online(preferred, tp) and preferred in s.isr and preferred not in self.shutting_down:
                return zp.PartitionState(preferred, s.leader_epoch + 1, s.isr, self._acting_epoch())
            return (_PREFERRED_LEADER_NOT_AVAILABLE, f"Failed to elect leader for partition {name} under "
                    "strategy PreferredReplicaPartitionLeaderElectionStrategy")
        if s.leader != zp.NO_LEADER and self._online(s.leader, tp):
            return (_ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        alive = [r for r in replicas if self._online(r, tp) and r not in self.shutting_down]
        in_sync = [r for r in alive if r in s.isr]
        if in_sync:
            return zp.PartitionState(in_sync[0], s.leader_epoch + 1, [r for r in s.isr if r in self.live],
                                     self._acting_epoch())
        if alive:
            return zp.PartitionState(alive[0], s.leader_epoch + 1, [alive[0]], self._acting_epoch(),
                                     zp.LEADER_RECOVERY_RECOVERING)
        return (_ELIGIBLE_LEADERS_NOT_AVAILABLE, f"Failed to elect leader for partition {name} under "
                "strategy OfflinePartitionLeaderElectionStrategy(true)")

    def _announce(self, changed: list[TopicPartition]) -> None:
        """New partition states to every live broker, LeaderAndIsr to each one's replicas."""
        self._send_update_metadata(self.live, changed)
        for b in self.live:
            tps = [tp for tp in changed if b in self._replicas(tp)]
            if tps:
                self._send_leader_and_isr(b, tps)

    async def _on_preferred_replica_election_znode(self) -> None:
        """/admin/preferred_replica_election (the legacy tool's request): elect, then delete
        the znode, as Kafka's controller does."""
        requested = await self.zk.preferred_replica_election()
        if requested is None:
            return
        results = await self._requested_election(PREFERRED_ELECTION, tuple(sorted(requested)))
        failed = {tp: r for tp, r in results.items() if r[0] not in (0, _ELECTION_NOT_NEEDED)}
        if failed:
            log.warning("controller: preferred replica election failed for %s",
                        ", ".join(f"{t}-{p}" for t, p in sorted(failed)))
        await self.zk.clear_preferred_replica_election()

    async def elect_leaders(self, election_type: int, partitions: list[TopicPartition] | None
                            ) -> dict[TopicPartition, ElectionResult] | None:
        """For the ElectLeaders handler: the result per partition (None: not controller)."""
        fut: asyncio.Future[dict[TopicPartition, ElectionResult] | None] = \
            asyncio.get_running_loop().create_future()
        self.events.put_nowait(_RequestedElection(
            election_type, tuple(partitions) if partitions is not None else None, fut))
        return await fut

    # ================================================================== reassignment
    async def _alter_reassignments(self, targets: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
                                   ) -> dict[TopicPartition, ElectionResult]:
        """Kafka's onPartitionReassignment, first half: RS = TRS ++ (ORS - TRS) written to the
        topic znode with adding/removing, a leader epoch bump, LeaderAndIsr to RS. A move
        whose targets are already in sync completes at once (`_complete_reassignments`).
        A target of None cancels: the partition goes back to its original replicas."""
        results: dict[TopicPartition, ElectionResult] = {}
        deleting = self.zk.topics_pending_deletion()
        registered = set(self.zk.broker_registrations())
        moves: dict[TopicPartition, Reassignment] = {}
        for tp, target in targets:
            name = f"{tp[0]}-{tp[1]}"
            if tp not in self.states or tp[0] in deleting:
                results[tp] = (_UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}.")
                continue
            current = self.reassigning.get(tp)
            if target is None:
                if current is None:
                    results[tp] = (_NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment in progress for partition {name}.")
                else:
                    moves[tp] = Reassignment(current.original, current.original)
                continue
            why = invalid_target(list(target), registered)
            if why is not None:
                results[tp] = (_INVALID_REPLICA_ASSIGNMENT, why)
                continue
            original = current.original if current is not None else tuple(self._replicas(tp))
            moves[tp] = Reassignment(original, tuple(target))
        started = [tp for tp in moves if await self._start_move(tp, moves[tp])]
        for tp in moves:
            results[tp] = (0, None) if tp in started else \
                (_INVALID_REPLICA_ASSIGNMENT, f"Partition {tp[0]}-{tp[1]} changed while being reassigned; retry.")
        await self._complete_reassignments(started)
        return results

    async def _start_move(self, tp: TopicPartition, move: Reassignment) -> bool:
        old_rs = self._replicas(tp)
        finished = move.target == move.original
        if not await self._write_assignment(tp, move):
            return False
        new_rs = list(move.target) if finished else move.replicas
        if finished:
            self.reassigning.pop(tp, None)
            if tp in self.zk_requested_moves:      # cancelled: no longer asked for in the znode
                self.zk_requested_moves.discard(tp)
                await self.zk.finish_reassign_partitions([tp])
        else:
            self.reassigning[tp] = move
        dropped = [r for r in old_rs if r not in new_rs]      # e.g. the additions of a cancelled move
        if not await self._bump_for_replicas(tp, new_rs):
            # The replica set is written but the leader could not be told at a new epoch:
            # stop nothing (it may lead), the next ISR change or election carries it on.
            log.warning("controller: reassignment of %s-%d: partition state kept changing", *tp)
            return True
        self._announce([tp])
        self._stop_replicas(tp, dropped)
        log.info("controller: reassignment of %s-%d %s: replicas %s -> %s", tp[0], tp[1],
                 "reverted" if finished and old_rs != new_rs else "started", old_rs, new_rs)
        return True

    async def _bump_for_replicas(self, tp: TopicPartition, replicas: list[int]) -> bool:
        """A new leader epoch for the replica set `replicas` (Kafka's step A3), so the leader
        takes it in; a leader outside it hands over to an online in-sync member. Decided
        again from a newer state if the write met one."""
        for _ in range(3):
            s = self.states[tp].state
            isr = [r for r in s.isr if r in replicas] or [r for r in replicas if self._online(r, tp)][:1]
            leader = s.leader
            if leader not in replicas:
                leader = next((r for r in replicas if r in isr and self._online(r, tp)), zp.NO_LEADER)
            written, stale = await self._write_states_reporting_stale(
                {tp: zp.PartitionState(leader, s.leader_epoch + 1, isr, self._acting_epoch())})
            if written:
                return True
            if not stale:
                return False
        return False

    def _online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Alive, and the replica not in a failed log dir (Kafka's isReplicaOnline)."""
        return broker_id in self.live and tp not in self.offline_replicas.get(broker_id, ())

    async def _complete_reassignments(self, tps: list[TopicPartition]) -> None:
        """The second half, for each move whose target replicas are all in the ISR: a leader
        from the target if the current one leaves, the ISR without the removed replicas
        (one conditional write), RS = TRS in the topic znode, StopReplica(delete) to the
        removed replicas."""
        for tp in tps:
            move = self.reassigning.get(tp)
            ps = self.states.get(tp)
            if move is None or ps is None or not move.complete(ps.state.isr):
                continue
            s = ps.state
            isr = [r for r in s.isr if r in move.target]
            leader = s.leader
            if leader not in move.target or not self._online(leader, tp):
                leader = next((r for r in move.target if r in isr and self._online(r, tp)), zp.NO_LEADER)
                if leader == zp.NO_LEADER:
                    continue             # no live target in sync yet: an ISR change will retry
            if not await self._write_states({tp: zp.PartitionState(leader, s.leader_epoch + 1, isr,
                                                                   self._acting_epoch())}):
                continue
            done = Reassignment(move.target, move.target)
            if not await self._write_assignment(tp, done):
                continue
            self.reassigning.pop(tp, None)
            self._announce([tp])
            self._stop_replicas(tp, move.removing)
            if tp in self.zk_requested_moves:
                self.zk_requested_moves.discard(tp)
                await self.zk.finish_reassign_partitions([tp])
            log.info("controller: reassignment of %s-%d completed: replicas %s (leader %d)",
                     tp[0], tp[1], list(move.target), leader)

    async def _write_assignment(self, tp: TopicPartition, move: Reassignment) -> bool:
        """The topic znode with `move` applied to partition tp[1] (a finished move clears its
        adding/removing); re-read and retried when it changed underneath."""
        topic, p = tp
        assert self.epoch_zk_version is not None
        for _ in range(5):
            got = await self.zk.topic_assignment(topic)
            if got is None:
                return False
            assignment, version = got
            if move.target == move.original:
                assignment.partitions[p] = list(move.target)
                assignment.adding_replicas.pop(p, None)
                assignment.removing_replicas.pop(p, None)
            else:
                assignment.partitions[p] = move.replicas
                assignment.adding_replicas[p] = move.adding
                assignment.removing_replicas[p] = move.removing
            if await self.zk.write_topic_assignment(topic, assignment, version,
                                                    controller_epoch_zk_version=self.epoch_zk_version) is not None:
                self.assignments.setdefault(topic, {})[p] = list(assignment.partitions[p])
                return True
        return False

    async def _on_reassign_partitions_znode(self) -> None:
        """/admin/reassign_partitions (the legacy tools' request, Kafka's JSON): each listed
        partition starts moving as if asked by AlterPartitionReassignments; a partition that
        cannot move, or already sits on its target, leaves the znode at once, the others as
        they complete, and the znode goes when it is empty."""
        got = await self.zk.reassign_partitions_request()
        if got is None:
            return
        targets, _ = got
        # Already moving there (e.g. a new controller resuming): only followed to the end.
        self.zk_requested_moves |= {tp for tp, r in targets.items()
                                    if tp in self.reassigning and list(self.reassigning[tp].target) == r}
        fresh = {tp: r for tp, r in targets.items() if tp not in self.zk_requested_moves}
        if not fresh:
            return
        results = await self._alter_reassignments(tuple((tp, tuple(r)) for tp, r in fresh.items()))
        failed = {tp: r for tp, r in results.items() if r[0] != 0}
        for tp, (_, message) in failed.items():
            log.warning("controller: /admin/reassign_partitions: %s-%d: %s", tp[0], tp[1], message)
        moving = {tp for tp in fresh if tp in self.reassigning}
        self.zk_requested_moves |= moving
        await self.zk.finish_reassign_partitions(set(fresh) - moving)

    def _stop_replicas(self, tp: TopicPartition, brokers: list[int]) -> None:
        for b in brokers:
            if b in self.live:
                self._send_stop_replica(b, [tp], delete=True)

    def _list_reassignments(self, partitions: tuple[TopicPartition, ...] | None) -> dict[TopicPartition, Reassignment]:
        if partitions is None:
            return dict(self.reassigning)
        return {tp: self.reassigning[tp] for tp in partitions if tp in self.reassigning}

    def _resume_reassignments(self) -> None:
        """A new controller takes over the moves its predecessor left in the topic znodes."""
        self.reassigning = {}
        for name, meta in self.zk.topics().items():
            for p in set(meta.adding_replicas) | set(meta.removing_replicas):
                replicas = meta.partitions.get(p)
                if replicas:
                    self.reassigning[(name, p)] = Reassignment.from_assignment(
                        replicas, meta.adding_replicas.get(p, []), meta.removing_replicas.get(p, []))

    async def alter_reassignments(self, targets: list[tuple[TopicPartition, list[int] | None]]
                                  ) -> dict[TopicPartition, ElectionResult] | None:
        """For the AlterPartitionReassignments handler (None: not the controller)."""
        fut: asyncio.Future[dict[TopicPartition, ElectionResult] | None] = \
            asyncio.get_running_loop().create_future()
        self.events.put_nowait(_AlterReassignments(
            tuple((tp, None if t is None else tuple(t)) for tp, t in targets), fut))
        return await fut

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, Reassignment] | None:
        """For the ListPartitionReassignments handler (None: not the controller)."""
        fut: asyncio.Future[dict[TopicPartition, Reassignment] | None] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(_ListReassignments(None if partitions is None else tuple(partitions), fut))
        return await fut

    # ================================================================== failed log dirs (KIP-112)
    async def _on_log_dir_events(self) -> None:
        """Kafka's onBrokerLogDirFailure: a broker said one of its log dirs failed; it is
        sent LeaderAndIsr for every replica it holds, and its KAFKA_STORAGE_ERROR answers
        name the replicas that went with the dir (`_on_replicas_offline`)."""
        events = await self.zk.log_dir_failure_events()
        if not events:
            return
        for b in sorted({b for b in events.values() if b in self.live}):
            log.warning("controller: broker %d reports a failed log dir; asking which replicas it lost", b)
            tps = [tp for tp in self.states if b in self._replicas(tp)]
            if tps:
                self._send_leader_and_isr(b, tps)
        await self.zk.delete_log_dir_events(list(events))

    def _read_leader_and_isr_answer(self, broker_id: int) -> Callable[[object], None]:
        def read(answer: object) -> None:
            names = {meta.topic_id: name for name, meta in self.zk.topics().items()}
            offline = frozenset(
                (names[t.topic_id], e.partition_index)
                for t in getattr(answer, "topics", None) or () if t.topic_id in names
                for e in t.partition_errors if e.error_code == _KAFKA_STORAGE_ERROR)
            if offline:
                self.events.put_nowait(_ReplicasOffline(broker_id, offline))
        return read

    async def _on_replicas_offline(self, broker_id: int, tps: set[TopicPartition]) -> None:
        """Kafka's onReplicasBecomeOffline: leaders elsewhere (from the ISR), the replica out of
        the ISR, StopReplica without deleting, and never elected while its dir is offline."""
        known = self.offline_replicas.setdefault(broker_id, set())
        new = {tp for tp in tps - known if tp in self.states}
        known |= new
        if not new or broker_id not in self.live:
            return
        log.warning("controller: broker %d lost %d replicas with a failed log dir: %s", broker_id, len(new),
                    ", ".join(f"{t}-{p}" for t, p in sorted(new)))
        led = [tp for tp in new if self.states[tp].state.leader == broker_id]
        changed = set(await self._elect_leaders(led, exclude={broker_id}))
        followed = [tp for tp in new if broker_id in self.states[tp].state.isr]
        changed |= set(await self._remove_from_isr(followed, {broker_id}))
        self._send_stop_replica(broker_id, sorted(new), delete=False)
        self._announce(sorted(changed | new))

    # ================================================================== process liveness
    def _zk_live(self) -> set[int]:
        """Registered brokers, less those fenced whose registration is still the fenced one."""
        regs = self.zk.broker_registrations()
        for b, registered_at in list(self.fenced.items()):
            if b not in regs or regs[b].timestamp != registered_at:
                del self.fenced[b]      # gone from ZooKeeper, or a new process registered
        return set(regs) - set(self.fenced)

    def _sync_watches(self) -> None:
        """Active: watch every other live broker's process. Otherwise: watch the controller's."""
        regs = self.zk.broker_registrations()
        if self.active:
            wanted = {b for b in self.live if b != self.broker_id}
        else:
            c = self.zk.controller_id
            wanted = {c} if c not in (zp.NO_LEADER, self.broker_id) and c not in self.fenced else set()
        keys = {(b, regs[b].timestamp) for b in wanted if b in regs}
        for key in set(self._watches) - keys:
            self._watches.pop(key).stop()
        for b, registered_at in keys - set(self._watches):
            host, port = self.channels.endpoint(regs[b])
            self._watches[(b, registered_at)] = ProcessWatch(
                f"broker {b}", host, port, self._report_death(b, registered_at)).start()
        fenced = {(b, t) for b, t in self.fenced.items() if b in regs and regs[b].timestamp == t} \
            if self.active else set()
        for key in set(self._revivals) - fenced:
            self._revivals.pop(key).stop()
        for b, registered_at in fenced - set(self._revivals):
            host, port = self.channels.endpoint(regs[b])
            revival = RevivalWatch(f"broker {b}", host, port, self._report_alive(b, registered_at))
            self._revivals[(b, registered_at)] = revival
            revival.start()

    def _report_death(self, broker_id: int, registered_at: int) -> Callable[[], None]:
        return lambda: self.events.put_nowait(_ProcessDied(broker_id, registered_at))

    def _report_alive(self, broker_id: int, registered_at: int) -> Callable[[], None]:
        return lambda: self.events.put_nowait(_ProcessAlive(broker_id, registered_at))

    def _stop_watches(self) -> None:
        for w in [*self._watches.values(), *self._revivals.values()]:
            w.stop()
        self._watches.clear()
        self._revivals.clear()

    async def _on_process_died(self, broker_id: int, registered_at: int) -> None:
        """The broker's process is gone though its ZooKeeper session lives on (it expires
        only after zookeeper.session.timeout.ms). The controller fences it at once: treated
        as removed, its partitions get new leaders from their ISRs and it leaves the ISRs.
        Any other broker, seeing the controller die, deletes /controller so that an election
        starts now."""
        self._watches.pop((broker_id, registered_at), None)
        reg = self.zk.broker_registrations().get(broker_id)
        if reg is None or reg.timestamp != registered_at:
            return                      # already gone, or a new process registered
        if not self.active:
            if self.zk.controller_id == broker_id and await self.zk.remove_dead_controller(broker_id):
                log.warning("controller %d's process is gone; removed /controller so that a new "
                            "controller is elected now", broker_id)
            return
        if broker_id not in self.live:
            return
        log.warning("controller: broker %d's process is gone (its listener refuses connections); "
                    "fencing it now instead of waiting for its ZooKeeper session to expire", broker_id)
        self.fenced[broker_id] = registered_at
        await self._on_brokers_changed(set(), {broker_id})

    async def _on_process_alive(self, broker_id: int, registered_at: int) -> None:
        """A broker fenced on a refused connection answers again under the registration it was
        fenced with: the refusals came from the network (a firewall rejecting, resets), not
        from its death. Without this it would stay fenced for as long as that registration
        lives, never told of a leader again. It joins as a starting broker does."""
        self._revivals.pop((broker_id, registered_at), None)
        reg = self.zk.broker_registrations().get(broker_id)
        if not self.active or self.fenced.get(broker_id) != registered_at \
                or reg is None or reg.timestamp != registered_at:
            return
        log.warning("controller: fenced broker %d accepts connections again under the same "
                    "registration: it was cut off, not dead; it joins again", broker_id)
        del self.fenced[broker_id]
        await self._on_brokers_changed({broker_id}, set())

    # ================================================================== state changes
    def _replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    async def _initialize_new_partitions(self) -> list[TopicPartition]:
        new = {}
        for topic, parts in self.assignments.items():
            if topic in self.zk.topics_pending_deletion():
                continue
            for p, replicas in parts.items():
                if (topic, p) not in self.states:
                    alive = [r for r in replicas if r in self.live]
                    leader = alive[0] if alive else zp.NO_LEADER
                    new[(topic, p)] = zp.PartitionState(leader, 0, alive, self._acting_epoch())
        if not new:
            return []
        results = await self.zk.create_partition_states(new, controller_epoch_zk_version=self.epoch_zk_version)
        created = []
        for tp, r in results.items():
            if isinstance(r, ControllerMovedError):
                raise r
            if isinstance(r, Exception):
                got = await self.zk.get_partition_state(*tp)
                if got is not None:
                    self.states[tp] = PState(*got)
                continue
            self.states[tp] = PState(new[tp], r)
            created.append(tp)
        return created

    def _unclean_allowed(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable if it sets one, else the broker's
        (read at each election: a dynamic broker config may change it)."""
        meta = self.zk.topics().get(topic)
        value = meta.configs.get("unclean.leader.election.enable") if meta is not None else None
        if value is None:
            return self.unclean_leader_election()
        return value.strip().lower() == "true"

    def unclean_default_changed(self) -> None:
        """The broker's unclean.leader.election.enable changed (a dynamic config)."""
        self.events.put_nowait(_UncleanEnabled())

    async def _elect_offline(self, topic: str | None) -> None:
        """Elect leaders for offline partitions (of `topic`, or all), as Kafka does when
        unclean leader election is turned on (enableDefault/TopicUncleanLeaderElection)."""
        offline = [tp for tp, ps in self.states.items()
                   if (topic is None or tp[0] == topic)
                   and (ps.state.leader == zp.NO_LEADER or ps.state.leader not in self.live)]
        if not offline:
            return
        changed = await self._elect_leaders(offline)
        log.info("controller: unclean leader election enabled; %d of %d offline partitions "
                 "have a leader", len(changed), len(offline))
        if changed:
            self._send_update_metadata(self.live, list(self.states))
            for b in self.live:
                tps = [tp for tp in changed if b in self._replicas(tp)]
                if tps:
                    self._send_leader_and_isr(b, tps)

    def _acting_epoch(self) -> int:
        """The controller epoch this controller was elected with (set while it acts)."""
        assert self.epoch is not None, "not the controller"
        return self.epoch

    def _choose_leader(self, tp: TopicPartition, isr: list[int], exclude: Set[int] = frozenset()) -> tuple[int, bool]:
        replicas = [r for r in self._replicas(tp) if self._online(r, tp) and r not in exclude]
        for r in replicas:
            if r in isr:
                return r, False
        if replicas and self._unclean_allowed(tp[0]):
            return replicas[0], True
        return zp.NO_LEADER, False

    async def _write_states(self, updates: dict[TopicPartition, zp.PartitionState]) -> list[TopicPartition]:
        return (await self._write_states_reporting_stale(updates))[0]

    async def _write_states_reporting_stale(self, updates: dict[TopicPartition, zp.PartitionState]
                                            ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Conditional writes: (written, stale). A stale partition was re-read, so the caller
        can decide again from what is really there."""
        if not updates:
            return [], []
        req = {tp: (s, self.states[tp].zk_version) for tp, s in updates.items()}
        results = await self.zk.update_partition_states(req, controller_epoch_zk_version=self.epoch_zk_version)
        done = []
        stale = []
        for tp, r in results.items():
            if isinstance(r, ControllerMovedError):
                raise r
            if isinstance(r, StaleZkVersionError):
                got = await self.zk.get_partition_state(*tp)
                if got is not None:
                    self.states[tp] = PState(*got)
                    stale.append(tp)
                continue
            if isinstance(r, Exception):
                log.warning("controller: writing %s failed: %s", tp, r)
                continue
            self.states[tp] = PState(updates[tp], r)
            done.append(tp)
        return done, stale

    async def _elect_leaders(self, tps: list[TopicPartition], exclude: Set[int] = frozenset()) -> list[TopicPartition]:
        """Elect where needed; a write that met a newer partition state (re-read by
        _write_states) is decided again from that state, as Kafka retries."""
        done: list[TopicPartition] = []
        pending = list(tps)
        started = time.perf_counter()
        for _ in range(3):
            written, stale = await self._elect_leaders_once(pending, exclude)
            done += written
            if not stale:
                break
            pending = stale
        if done:   # Kafka's LeaderElectionRateAndTimeMs: one timed round that elected leaders
            self.stats.election_ms.observe((time.perf_counter() - started) * 1000.0)
        return done

    async def _elect_leaders_once(self, tps: list[TopicPartition], exclude: Set[int]
                                  ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        updates = {}
        unclean_tps = set()
        for tp in tps:
            ps = self.states.get(tp)
            if ps is None:
                continue
            s = ps.state
            leader, unclean = self._choose_leader(tp, s.isr, exclude)
            if leader == s.leader and leader != zp.NO_LEADER:
                continue
            if leader == zp.NO_LEADER:
                if s.leader == zp.NO_LEADER:
                    continue
                # Offline: keep the ISR as it was (it tells who may be elected cleanly later).
                updates[tp] = zp.PartitionState(zp.NO_LEADER, s.leader_epoch + 1, s.isr, self._acting_epoch())
                continue
            isr = [leader] if unclean else [r for r in s.isr if r in self.live and r not in exclude]
            updates[tp] = zp.PartitionState(leader, s.leader_epoch + 1, isr, self._acting_epoch(),
                                            zp.LEADER_RECOVERY_RECOVERING if unclean else zp.LEADER_RECOVERY_RECOVERED)
            if unclean:
                log.warning("controller: UNCLEAN leader election of %s-%d: %d", tp[0], tp[1], leader)
                unclean_tps.add(tp)
        written, stale = await self._write_states_reporting_stale(updates)
        self.stats.unclean_elections += len(unclean_tps.intersection(written))
        return written, stale

    async def _remove_from_isr(self, tps: list[TopicPartition], brokers: set[int]) -> list[TopicPartition]:
        done: list[TopicPartition] = []
        pending = list(tps)
        for _ in range(3):
            updates = {}
            for tp in pending:
                s = self.states[tp].state
                if s.leader in brokers or not (set(s.isr) & brokers):
                    continue
                new_isr = [r for r in s.isr if r not in brokers]
                if not new_isr:
                    # Kafka never empties an ISR: its last member is the only replica that
                    # may later be elected without losing acknowledged records.
                    continue
                updates[tp] = zp.PartitionState(s.leader, s.leader_epoch + 1, new_isr, self._acting_epoch())
            written, stale = await self._write_states_reporting_stale(updates)
            done += written
            if not stale:
                break
            pending = stale
        return done

    # ================================================================== events
    async def _on_brokers_changed(self, added: set[int], removed: set[int],
                                  bounced: Set[int] = frozenset()) -> None:
        """`bounced`: registered again by a new process without ever leaving the cluster's
        view; failed over like `removed` (never elected in that step) and started like `added`."""
        self.live = self._zk_live()
        regs = self.zk.broker_registrations()
        bounced = set(bounced) | {b for b in self.live - added if b in regs and b in self.incarnations
                                  and regs[b].timestamp != self.incarnations[b]}
        for b in removed | bounced | added:
            self.offline_replicas.pop(b, None)     # a new process reports its dirs anew
        for b in removed | bounced:
            self.channels.close(b)
            self.shutting_down.discard(b)
        for b in added | bounced:
            self.channels.open(b)
        changed: set[TopicPartition] = set()
        gone = removed | bounced
        if gone:
            led = [tp for tp, ps in self.states.items() if ps.state.leader in gone]
            changed |= set(await self._elect_leaders(led, exclude=bounced))
            followed = [tp for tp, ps in self.states.items() if set(ps.state.isr) & gone]
            changed |= set(await self._remove_from_isr(followed, set(gone)))
        if added or bounced:
            # Offline partitions may have a leader again.
            offline = [tp for tp, ps in self.states.items() if ps.state.leader == zp.NO_LEADER]
            changed |= set(await self._elect_leaders(offline))
        self._note_incarnations()
        log.info("controller: brokers +%s -%s bounced %s live %s; %d partitions changed", sorted(added),
                 sorted(removed), sorted(bounced), sorted(self.live), len(changed))
        self._send_update_metadata(self.live, list(self.states))
        started = added | bounced
        for b in self.live:
            tps = [tp for tp in self.states if b in self._replicas(tp) and (b in started or tp in changed)]
            if tps:
                self._send_leader_and_isr(b, tps)

    def _note_incarnations(self) -> None:
        """The registration (timestamp) of each broker as membership was last handled."""
        regs = self.zk.broker_registrations()
        self.incarnations = {b: regs[b].timestamp for b in self.live if b in regs}

    async def _on_topics_changed(self) -> None:
        self.assignments = {name: dict(t.partitions) for name, t in self.zk.topics().items()}
        created = await self._initialize_new_partitions()
        if created:
            self._send_update_metadata(self.live, created)
            for b in self.live:
                tps = [tp for tp in created if b in self._replicas(tp)]
                if tps:
                    self._send_leader_and_isr(b, tps)

    async def _on_deletions(self, topics: set[str]) -> None:
        for topic in topics:
            tps = [tp for tp in self.states if tp[0] == topic]
            for b in self.live:
                mine = [tp for tp in tps if b in self._replicas(tp)]
                if mine:
                    self._send_stop_replica(b, mine, delete=True)
            self._send_update_metadata(self.live, tps, deleting=True)
            await self.zk.complete_topic_deletion(topic, controller_epoch_zk_version=self.epoch_zk_version)
            for tp in tps:
                self.states.pop(tp, None)
                self.reassigning.pop(tp, None)
            if self.zk_requested_moves & set(tps):
                self.zk_requested_moves -= set(tps)
                await self.zk.finish_reassign_partitions(tps)
            self.assignments.pop(topic, None)
            log.info("controller: deleted topic %s", topic)

    async def _on_isr_changes(self) -> None:
        notes = await self.zk.isr_change_notifications()
        if not notes:
            return
        tps = set().union(*notes.values())
        got = await self.zk.get_partition_states([tp for tp in tps if tp[0] in self.assignments])
        for tp, (s, v) in got.items():
            self.states[tp] = PState(s, v)
        await self.zk.delete_isr_change_notifications(notes)
        self._send_update_metadata(self.live, list(got))
        await self._complete_reassignments([tp for tp in got if tp in self.reassigning])

    async def _controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        """Move leadership off `broker_id` and take it out of ISRs; the partitions it still
        leads (no other in-sync replica) are returned."""
        self.shutting_down.add(broker_id)
        led = [tp for tp, ps in self.states.items() if ps.state.leader == broker_id and len(self._replicas(tp)) > 1]
        changed = set(await self._elect_leaders(led, exclude={broker_id}))
        followed = [tp for tp, ps in self.states.items() if broker_id in ps.state.isr and ps.state.leader != broker_id]
        changed |= set(await self._remove_from_isr(followed, {broker_id}))
        self._announce(list(changed))
        return [tp for tp, ps in self.states.items() if ps.state.leader == broker_id]

    async def controlled_shutdown(self, broker_id: int) -> list[TopicPartition] | None:
        """For the ControlledShutdown handler: None when this broker is not controller."""
        fut: asyncio.Future[list[TopicPartition] | None] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(_ControlledShutdown(broker_id, fut))
        return await fut

    async def drain(self, timeout_s: float) -> None:
        """Wait until every queued request reached its broker (or `timeout_s`): a controller
        shutting itself down must deliver the LeaderAndIsr that moved its leadership away."""
        if not await self.channels.drain(timeout_s):
            log.warning("controller %d: requests still undelivered after %.1f s", self.broker_id, timeout_s)

    # ================================================================== requests to brokers
    def _partition_state(self, tp: TopicPartition, deleting: bool = False) -> dict:
        s = self.states[tp].state
        return {"partition_index": tp[1], "controller_epoch": s.controller_epoch,
                "leader": LEADER_DURING_DELETE if deleting else s.leader, "leader_epoch": s.leader_epoch,
                "isr": list(s.isr), "zk_version": self.states[tp].zk_version, "replicas": self._replicas(tp),
                "offline_replicas": [r for r in self._replicas(tp)
                                     if r not in self.live or tp in self.offline_replicas.get(r, ())],
                "adding_replicas": move.adding if (move := self.reassigning.get(tp)) else [],
                "removing_replicas": move.removing if move else [], "is_new": False,
                "leader_recovery_state": s.leader_recovery_state}

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        meta = self.zk.topics().get(topic)
        return meta.topic_id if meta else None

    def _by_topic(self, tps: list[TopicPartition], deleting: bool = False) -> list[dict]:
        topics: dict[str, list[dict]] = {}
        for tp in tps:
            if tp in self.states:
                topics.setdefault(tp[0], []).append(self._partition_state(tp, deleting))
        return [{"topic_name": t, "topic_id": self._topic_id(t), "partition_states": ps} for t, ps in topics.items()]

    def _send_leader_and_isr(self, broker_id: int, tps: list[TopicPartition]) -> None:
        leaders = {self.states[tp].state.leader for tp in tps if tp in self.states} - {zp.NO_LEADER}
        regs = self.zk.broker_registrations()
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch, "broker_epoch": -1,
                "type": 0, "topic_states": self._by_topic(tps),
                "live_leaders": [{"broker_id": b, "host_name": self.channels.endpoint(regs[b])[0],
                                  "port": self.channels.endpoint(regs[b])[1]} for b in leaders if b in regs]}
        self.channels.send(broker_id, "LeaderAndIsr", LEADER_AND_ISR_VERSION, body,
                           self._read_leader_and_isr_answer(broker_id))

    def _send_update_metadata(self, brokers: set[int], tps: list[TopicPartition], deleting: bool = False) -> None:
        regs = self.zk.broker_registrations()
        live = [{"id": b, "endpoints": [{"port": ep.port, "host": ep.host, "listener": ep.listener_name,
                                         "security_protocol": _PROTOCOL_IDS.get(ep.security_protocol, 0)}
                                        for ep in regs[b].endpoints],
                 "rack": regs[b].rack} for b in sorted(self.live) if b in regs]
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch, "broker_epoch": -1,
                "live_brokers": live, "topic_states": self._by_topic(tps, deleting)}
        for b in brokers:
            self.channels.send(b, "UpdateMetadata", UPDATE_METADATA_VERSION, body)

    def _send_stop_replica(self, broker_id: int, tps: list[TopicPartition], delete: bool) -> None:
        topics: dict[str, list[dict]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append({"partition_index": p, "leader_epoch": -1, "delete_partition": delete})
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch, "broker_epoch": -1,
                "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()]}
        self.channels.send(broker_id, "StopReplica", STOP_REPLICA_VERSION, body)
