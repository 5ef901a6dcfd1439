"""Fetching records for a consumer: positions, a prefetch buffer and background fetches.

`Fetcher` keeps one `PartitionState` per assigned partition (position = the offset of the
next record poll() returns, paused flag, pending offset reset) and a background task that
sends one Fetch request per partition leader for all assigned, unpaused partitions that
have room in the buffer (at most `_PREFETCH` completed fetches per partition), one request
in flight per broker. While the user processes what poll() returned, the next fetch is
already on its way: a partition becomes fetchable again as soon as its buffer has room.
A fetch that would name only partitions at their end (offset at the last high watermark
seen) is not sent while another partition of that broker has a full buffer: the broker
would hold it for fetch.max.wait.ms, and that partition's next fetch behind it while poll()
empties the buffer; they go together once the full partition has room.
With Fetch v7+ each broker gets a fetch session (fetch_session.py, KIP-227): after the
first request, only partitions whose fetch position changed are named, and close() ends
the sessions.

Responses: a fetched record set is kept as bytes and decoded by poll() (drain()), a poll's
worth at a time (RecordCursor: straight into ConsumerRecords, then deserialized when there
are deserializers), from the fetch offset on (a fetch starting inside a batch gets the
whole batch). Control batches are always skipped; with read_committed the broker stops at
the last stable offset and the batches of the aborted transactions it lists are dropped
(Kafka's rule: a producer id is aborted from its first offset until its ABORT marker).
NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION and lost
connections ask for a metadata update and fetch again from the same position, from
whichever broker leads then. OFFSET_OUT_OF_RANGE resets the position (auto.offset.reset),
or, with "none", raises from poll().

Positions to look up (auto.offset.reset, seek_to_beginning/end): poll() starts the lookups
and does not wait for them (start_position_resets, as Kafka's consumer): a background task
per batch sends ListOffsets to the leaders, each position found is used at once, and a
partition that has no leader (one that does not exist yet) or a retriable error is asked
about again, with backoff, while the others are fetched; an error that is not retriable is
raised by poll(). `list_offsets` (ListOffsets to each leader, waiting up to a timeout)
serves position(), offsets_for_times and beginning/end offsets.

Threads: everything runs on the consumer's event loop except `drain_in_thread`, which the
sync Consumer's poll() calls in the user's thread so that taking buffered records is not a
round trip to the loop's thread (~70 us on this kind of VM, two thread switches). `lock`
keeps that drain and the fetcher's background steps (planning fetches, handling their
responses, applying looked-up positions) apart; every other change to the partitions'
state (assign, seek, pause, request_reset from the user) runs on the loop while the user's
thread waits for it, so it needs no lock.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import AbstractSet as Set, Any, Iterable, Mapping

from clients.config import ClientConfig
from clients.protocol.errors import Code, KafkaError, for_code
from clients.protocol.read_committed import aborted_batches
from clients.protocol.records import RecordCursor, fetch_batches
from clients.protocol.schema import Struct
from clients.serde import as_deserializer
from clients.types import ConsumerRecord, TopicPartition

from .client import KafkaClient
from .fetch_session import FINAL_EPOCH, NO_SESSION, FetchSessionHandler, SessionRequest
from .errors import KafkaConnectionError, KafkaTimeoutError, RecordDeserializationError

__all__ = ["Fetcher", "PartitionState", "EARLIEST", "LATEST"]

log = logging.getLogger("strom.client.fetcher")

EARLIEST = -2          # ListOffsets timestamps
LATEST = -1
_FETCH_MAX_VERSION = 12     # topic names on the wire (13+ identifies topics by id)
_PREFETCH = 2               # completed fetches buffered per partition
_REFRESH_METADATA = {Code.NOT_LEADER_OR_FOLLOWER, Code.FENCED_LEADER_EPOCH,
                     Code.UNKNOWN_LEADER_EPOCH, Code.UNKNOWN_TOPIC_OR_PARTITION,
                     Code.LEADER_NOT_AVAILABLE, Code.REPLICA_NOT_AVAILABLE,
                     Code.KAFKA_STORAGE_ERROR, Code.OFFSET_NOT_AVAILABLE,
                     Code.NOT_ENOUGH_REPLICAS, Code.UNKNOWN_TOPIC_ID,
                     Code.INCONSISTENT_TOPIC_ID}
_CONNECTION_ERRORS = (KafkaConnectionError, KafkaTimeoutError)
OffsetOutOfRangeError = for_code(Code.OFFSET_OUT_OF_RANGE)


@dataclass
class PartitionState:
    """What the consumer knows of one assigned partition."""

    position: int | None = None     # next offset poll() returns; None until known
    epoch: int = -1                 # leader epoch of the last record returned
    paused: bool = False
    reset: str | None = None        # "earliest"/"latest" when the position must be looked up
    version: int = 0                # bumped by seeks: responses for older versions are dropped
    error: Exception | None = None  # raised by the next poll()
    high_watermark: int = -1
    retry_at: float = 0.0           # after a leader error, wait for fresher metadata
    buffer: deque = field(default_factory=deque)


@dataclass
class _Completed:
    """One partition's part of one fetch response, its records decoded as poll() takes
    them (RecordCursor: a poll's worth at a time)."""

    version: int
    start: int                      # the position these records continue from
    records: RecordCursor
    next_offset: int                # position after the last batch (skips control batches)
    # Taken from the cursor but not handed out: from a record a deserializer failed on.
    pending: list[ConsumerRecord] = field(default_factory=list)


class Fetcher:
    """Positions and prefetched records of the assigned partitions; see the module doc."""

    def __init__(self, client: KafkaClient, config: ClientConfig):
        self.client = client
        self.config = config
        self.max_wait_ms: int = config["fetch.max.wait.ms"]
        self.min_bytes: int = config["fetch.min.bytes"]
        self.max_bytes: int = config["fetch.max.bytes"]
        self.partition_max_bytes: int = config["max.partition.fetch.bytes"]
        self.read_committed = config["isolation.level"] == "read_committed"
        self.check_crcs: bool = config["check.crcs"]
        self.reset_strategy: str = config["auto.offset.reset"]
        kd, vd = config["key.deserializer"], config["value.deserializer"]
        self.key_deserializer = as_deserializer(kd) if kd is not None else None
        self.value_deserializer = as_deserializer(vd) if vd is not None else None
        self.states: dict[TopicPartition, PartitionState] = {}
        self.data_ready = asyncio.Event()          # set when a fetch buffered records/errors
        self.lock = threading.Lock()               # see the module doc, "Threads"
        # Bumped whenever a partition's position is to be looked up (assign, reset): a poll
        # that skips the loop (drain_in_thread) must not skip starting that lookup.
        self.lookups_wanted = 0
        self._wake = asyncio.Event()
        self._busy: set[int] = set()               # brokers with a fetch in flight
        self._backoff_until: dict[int, float] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}     # per broker (Fetch v7+)
        self._tasks: set[asyncio.Task[None]] = set()
        self._resetting: set[TopicPartition] = set()   # partitions a lookup task owns
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ assignment + positions

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Track exactly `tps` (states of partitions kept stay as they are)."""
        wanted = set(tps)
        for tp in list(self.states):
            if tp not in wanted:
                del self.states[tp]
        for tp in wanted:
            if tp not in self.states:
                self.states[tp] = PartitionState()
                self.lookups_wanted += 1
        self.wake()

    def seek(self, tp: TopicPartition, offset: int, epoch: int = -1) -> None:
        st = self._state(tp)
        st.position = offset
        st.epoch = epoch
        st.reset = None
        st.error = None
        self._invalidate(st)

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        st = self._state(tp)
        st.position = None
        st.reset = strategy
        self.lookups_wanted += 1
        self._invalidate(st)

    def _invalidate(self, st: PartitionState) -> None:
        st.version += 1
        st.buffer.clear()
        st.retry_at = 0.0
        self.wake()

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.states.get(tp)
        if st is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return st

    def position(self, tp: TopicPartition) -> int | None:
        return self._state(tp).position

    def needs_position(self) -> list[TopicPartition]:
        return [tp for tp, st in self.states.items() if st.position is None]

    def pause(self, tp: TopicPartition, paused: bool) -> None:
        self._state(tp).paused = paused
        self.wake()

    def consumed_offsets(self) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: (position, leader epoch)} of partitions with a known position."""
        return {tp: (st.position, st.epoch) for tp, st in self.states.items()
                if st.position is not None}

    # ------------------------------------------------------------------ draining

    def has_buffered(self) -> bool:
        return any((st.buffer and not st.paused) or st.error is not None
                   for st in self.states.values())

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` buffered records in offset order per partition, advancing
        positions; raises a partition's pending error (once). Records are decoded (and
        deserialized) here, as many as are handed out (RecordCursor). On the loop."""
        try:
            with self.lock:
                return self._take(max_records, [])
        finally:
            # Drained partitions have room again: fetch their next records while the user works.
            self.wake()

    def drain_in_thread(self, max_records: int, loop: asyncio.AbstractEventLoop
                        ) -> list[ConsumerRecord]:
        """drain() from a thread that is not the loop's. The fetcher is woken (a system
        call and a switch to the loop's thread) only when it has something new to fetch: a
        partition that had no room, or held an error, has room again. Any other partition
        with room already has a fetch planned or in flight."""
        watched: list[PartitionState] = []
        try:
            with self.lock:
                return self._take(max_records, watched)
        finally:
            if any(len(st.buffer) < _PREFETCH and st.error is None for st in watched):
                loop.call_soon_threadsafe(self.wake)

    def _take(self, max_records: int, watched: list[PartitionState]) -> list[ConsumerRecord]:
        """drain()'s work, under the lock; `watched` gets the partitions the fetcher was
        not fetching for want of room or because of an error."""
        out: list[ConsumerRecord] = []
        convert = self.key_deserializer is not None or self.value_deserializer is not None
        for tp, st in list(self.states.items()):
            if st.error is not None or len(st.buffer) >= _PREFETCH:
                watched.append(st)
            if st.error is not None:
                err, st.error = st.error, None
                if out:                      # hand out what we have; raise next time
                    st.error = err
                    break
                raise err
            if st.paused:
                continue
            buffer = st.buffer
            while buffer and len(out) < max_records:
                c: _Completed = buffer[0]
                if c.version != st.version or c.start != st.position:
                    buffer.clear()           # a seek overtook this fetch
                    break
                failure: Exception | None = None
                room = max_records - len(out)
                if c.pending:
                    take = c.pending[:room]
                    del c.pending[:room]
                else:
                    try:
                        take = c.records.take(room)
                    except KafkaError as e:  # a corrupt batch: what came before is kept
                        take, failure = [], e
                if convert and take:
                    raw = take
                    take, failure = self._deserialize(tp, raw)
                    if failure is not None:
                        c.pending[:0] = raw[len(take):]
                if take:
                    out += take
                    last = take[-1]
                    st.position = c.start = last.offset + 1
                    st.epoch = last.leader_epoch
                if failure is not None:
                    # Kafka's rule: what came before the bad record is handed out, the
                    # position stays on it and every poll() raises until a seek moves on
                    # (a corrupt batch is fetched again, and fails again).
                    if isinstance(failure, KafkaError):
                        buffer.clear()
                    if out:
                        st.error = failure
                        return out
                    raise failure
                if not c.pending and c.records.done:
                    st.position = max(st.position, c.next_offset)
                    buffer.popleft()
                    if buffer and buffer[0].start != st.position:
                        buffer.clear()
            if len(out) >= max_records:
                break
        if out or not self.has_buffered():
            self.data_ready.clear()
        if out:
            # Rotate so the next poll starts with other partitions (fairness).
            first = out[0]
            tp0 = TopicPartition(first.topic, first.partition)
            st0 = self.states.pop(tp0, None)
            if st0 is not None:
                self.states[tp0] = st0
        return out

    def _deserialize(self, tp: TopicPartition, records: list[ConsumerRecord]
                     ) -> tuple[list[ConsumerRecord], RecordDeserializationError | None]:
        """`records` with keys and values deserialized, up to the first that fails (and
        that failure)."""
        kd = self.key_deserializer
        vd = self.value_deserializer
        topic = tp.topic
        new = tuple.__new__
        out: list[ConsumerRecord] = []
        for r in records:
            key: Any = r.key                # bytes | None as fetched
            value: Any = r.value
            try:
                if kd is not None:
                    key = kd.deserialize(topic, key)
                if vd is not None:
                    value = vd.deserialize(topic, value)
            except Exception as e:
                failure = RecordDeserializationError(tp, r.offset, e)
                failure.__cause__ = e
                return out, failure
            out.append(new(ConsumerRecord, (*r[:5], key, value, *r[7:])))
        return out, None

    # ------------------------------------------------------------------ background fetching

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="strom-fetcher")

    def wake(self) -> None:
        self._wake.set()

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._task, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        await self._close_sessions()

    async def _close_sessions(self, timeout: float = 0.3) -> None:
        """Tell each broker its fetch session with us is over (epoch -1), as Kafka's
        consumer does on close, so the slot is free at once. Best effort, bounded."""
        async def close_one(node: int, session_id: int) -> None:
            conn = await self.client.connection(node)
            version = min(conn.version_for("Fetch"), _FETCH_MAX_VERSION)
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1,
                    "max_bytes": self.max_bytes, "isolation_level": 0,
                    "session_id": session_id, "session_epoch": FINAL_EPOCH, "topics": [],
                    "forgotten_topics_data": [], "rack_id": ""}
            await conn.request("Fetch", body, version=version, timeout=timeout)
        closing = [(node, s.session_id) for node, s in self._sessions.items()
                   if s.session_id != NO_SESSION]
        self._sessions.clear()
        if closing:
            await asyncio.gather(*(asyncio.wait_for(close_one(n, sid), timeout)
                                   for n, sid in closing), return_exceptions=True)

    def _fetch_offset(self, st: PartitionState) -> int | None:
        if st.position is None or st.paused or st.error is not None or len(st.buffer) >= _PREFETCH:
            return None
        return st.buffer[-1].next_offset if st.buffer else st.position

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            self._wake.clear()
            now = loop.time()
            cluster = self.client.cluster
            plan: dict[int, list[tuple[TopicPartition, PartitionState, int]]] = {}
            full: set[int] = set()          # leaders of partitions whose buffers are full
            next_retry = None
            with self.lock:
                for tp, st in self.states.items():
                    offset = self._fetch_offset(st)
                    if offset is None:
                        if len(st.buffer) >= _PREFETCH and st.error is None and not st.paused:
                            full.add(cluster.leader_for(tp.topic, tp.partition))
                        continue
                    if st.retry_at > now:
                        next_retry = min(next_retry or st.retry_at, st.retry_at)
                        continue
                    leader = cluster.leader_for(tp.topic, tp.partition)
                    if leader < 0:
                        self.client.metadata.add_topics([tp.topic])
                        self.client.metadata.request_update()
                        st.retry_at = now + self.client.retry_backoff
                        next_retry = min(next_retry or st.retry_at, st.retry_at)
                        continue
                    until = self._backoff_until.get(leader, 0.0)
                    if until > now:
                        next_retry = min(next_retry or until, until)
                        continue
                    if leader in self._busy:
                        continue
                    plan.setdefault(leader, []).append((tp, st, offset))
            for node, parts in plan.items():
                if node in full and all(0 <= st.high_watermark <= offset for _, st, offset in parts):
                    # Only partitions at their end, as far as the last answers said: the
                    # broker would hold this fetch up to fetch.max.wait.ms, and the full
                    # partitions' next fetch behind it while poll() empties their buffers.
                    # They go with that fetch instead (poll() making room wakes this loop).
                    continue
                self._busy.add(node)
                t = loop.create_task(self._fetch(node, parts), name=f"strom-fetch-{node}")
                self._tasks.add(t)
                t.add_done_callback(self._tasks.discard)
            timeout = None if next_retry is None else max(0.005, next_retry - loop.time())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, PartitionState, int]]) -> None:
        loop = asyncio.get_running_loop()
        sent = {tp: (st.version, offset) for tp, st, offset in parts}
        try:
            conn = await self.client.connection(node)
            version = min(conn.version_for("Fetch"), _FETCH_MAX_VERSION)
            cluster = self.client.cluster
            wanted: dict[TopicPartition, tuple[int, int, int]] = {}
            for tp, st, offset in parts:
                info = cluster.partition(tp.topic, tp.partition)
                wanted[tp] = (offset, self.partition_max_bytes,
                              info.leader_epoch if info is not None else -1)
            session = self._sessions.setdefault(node, FetchSessionHandler()) if version >= 7 else None
            req: SessionRequest | None = session.build(wanted) if session is not None else None
            body = self._fetch_body(req, wanted)
            try:
                resp = await conn.request("Fetch", body, version=version,
                                          timeout=self.client.request_timeout + self.max_wait_ms / 1000)
            except BaseException:
                if session is not None:
                    session.reset()          # did the broker move the epoch on? start over
                raise
            self._backoff_until.pop(node, None)
            code = resp.get("error_code")
            if session is not None and req is not None:
                if not req.full and code in (Code.FETCH_SESSION_ID_NOT_FOUND,
                                             Code.INVALID_FETCH_SESSION_EPOCH):
                    log.info("fetch session with broker %s: %s; starting a new one", node,
                             for_code(code).name)
                    session.reset()
                    return                   # the finally clause fetches again at once
                if code:
                    session.reset()
                else:
                    session.on_response(req, resp.session_id)
            if code:
                raise for_code(code)(f"Fetch from broker {node}")
            now = loop.time()
            with self.lock:
                for t in resp.responses:
                    for p in t.partitions:
                        tp = TopicPartition(t.topic, p.partition_index)
                        if tp in sent:
                            self._handle(tp, p, *sent[tp], now=now)
        except asyncio.CancelledError:
            raise
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.info("fetch from broker %s failed: %s; refreshing metadata", node, e)
            self._backoff_until[node] = loop.time() + self.client.retry_backoff
            self.client.metadata.request_update()
        except KafkaError as e:
            log.info("fetch from broker %s failed: %s", node, e)
            self._backoff_until[node] = loop.time() + self.client.retry_backoff
            self.client.metadata.request_update()
        except Exception as e:                  # a bug or a corrupt response: surface it
            log.exception("fetch from broker %s failed", node)
            with self.lock:
                for tp in sent:
                    failed = self.states.get(tp)
                    if failed is not None:
                        failed.error = e
                        self.data_ready.set()
        finally:
            self._busy.discard(node)
            self.wake()

    def _fetch_body(self, req: SessionRequest | None,
                    wanted: dict[TopicPartition, tuple[int, int, int]]) -> dict[str, Any]:
        """A Fetch request: every wanted partition without a session, else the session's
        changes (see fetch_session)."""
        send = wanted if req is None else req.to_send
        topics: dict[str, list[dict]] = {}
        for tp, (offset, max_bytes, leader_epoch) in send.items():
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "fetch_offset": offset,
                "current_leader_epoch": leader_epoch, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": max_bytes})
        forgotten: dict[str, list[int]] = {}
        for tp in (req.to_forget if req is not None else ()):
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        return {"replica_id": -1, "max_wait_ms": self.max_wait_ms,
                "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "isolation_level": 1 if self.read_committed else 0,
                "session_id": req.session_id if req is not None else NO_SESSION,
                "session_epoch": req.epoch if req is not None else FINAL_EPOCH,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps}
                                          for t, ps in forgotten.items()],
                "rack_id": ""}

    def _handle(self, tp: TopicPartition, p: Struct, version: int, offset: int, now: float) -> None:
        st = self.states.get(tp)
        if st is None or st.version != version:
            return                          # unassigned or sought meanwhile
        expected = st.buffer[-1].next_offset if st.buffer else st.position
        if expected != offset:
            return
        code = p.error_code
        if code == 0:
            st.high_watermark = p.high_watermark
            buf = p.records
            if not buf:
                return
            try:
                batches, next_offset = fetch_batches(buf, offset)
                skip: Set[int] = frozenset()
                if self.read_committed and p.get("aborted_transactions"):
                    skip = aborted_batches(buf, p.aborted_transactions)
            except KafkaError as e:
                st.error = e
                self.data_ready.set()
                return
            if next_offset > offset:
                records = RecordCursor(buf, batches, ConsumerRecord, tp.topic, tp.partition,
                                       from_offset=offset, verify_crc=self.check_crcs,
                                       skip=skip)
                st.buffer.append(_Completed(version, offset, records, next_offset))
                if any(h.records_count and not h.is_control and pos not in skip
                       for pos, h in batches):
                    self.data_ready.set()
            return
        if code in _REFRESH_METADATA:
            log.info("fetch %s: %s; refreshing metadata and fetching from offset %d again",
                     tp, for_code(code).name, offset)
            self.client.metadata.request_update()
            st.retry_at = now + self.client.retry_backoff
            return
        if code == Code.OFFSET_OUT_OF_RANGE:
            if st.buffer:
                # Only the position itself can be out of range: wait for poll() to drain
                # the buffer (the broker answers an error at once, so retrying now spins).
                st.retry_at = now + self.client.retry_backoff
                return
            if self.reset_strategy in ("earliest", "latest"):
                log.info("fetch %s: offset %d out of range; resetting to %s", tp, offset,
                         self.reset_strategy)
                self.request_reset(tp, self.reset_strategy)
                self.data_ready.set()       # poll() looks the new position up
            else:
                st.error = OffsetOutOfRangeError(
                    f"{tp}: fetch position {offset} is out of range (auto.offset.reset=none)")
                self.data_ready.set()
            return
        err = for_code(code)
        if err.retriable:
            st.retry_at = now + self.client.retry_backoff
            return
        st.error = err(f"fetch {tp} at offset {offset}")
        self.data_ready.set()

    # ------------------------------------------------------------------ ListOffsets

    async def list_offsets(self, specs: Mapping[TopicPartition, int], timeout: float
                           ) -> dict[TopicPartition, tuple[int, int, int]]:
        """{tp: (offset, timestamp, leader_epoch)} for each tp's timestamp spec (EARLIEST,
        LATEST or ms); offset -1 where no record has that timestamp or later. Retries
        leader errors with fresh metadata until `timeout` (then KafkaTimeoutError); a
        partition's error that is not retriable (TOPIC_AUTHORIZATION_FAILED, ...) is raised."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        remaining = dict(specs)
        out: dict[TopicPartition, tuple[int, int, int]] = {}
        self.client.metadata.add_topics({tp.topic for tp in remaining})
        rounds = 0
        while remaining:
            found, errors = await self._list_offsets_round(
                remaining, max(0.05, deadline - loop.time()), topic_errors=rounds > 0)
            if errors:
                raise errors[min(errors)]
            for tp, value in found.items():
                remaining.pop(tp, None)
                out[tp] = value
            if not remaining:
                break
            if loop.time() >= deadline:
                raise KafkaTimeoutError(
                    f"ListOffsets for {', '.join(map(str, sorted(remaining)))} did not "
                    f"succeed within {timeout:.1f}s")
            rounds += 1
            await self._metadata_update(max(0.05, min(deadline - loop.time(), 1.0)))
        return out

    async def _list_offsets_round(self, specs: Mapping[TopicPartition, int], timeout: float,
                                  topic_errors: bool
                                  ) -> tuple[dict[TopicPartition, tuple[int, int, int]],
                                             dict[TopicPartition, KafkaError]]:
        """One ListOffsets to the leader of each partition of `specs`, all at once: (offsets
        found, errors not worth retrying). The other partitions (no leader known, a
        retriable error, a lost connection) asked for a metadata update, for a later round.
        `topic_errors` (a round after the first, so the metadata has had a refresh): a
        partition of a topic the metadata refuses, as TOPIC_AUTHORIZATION_FAILED (unlike
        UNKNOWN_TOPIC_OR_PARTITION, not retriable), fails with that error."""
        cluster = self.client.cluster
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        errors: dict[TopicPartition, KafkaError] = {}
        for tp, ts in specs.items():
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader >= 0:
                by_leader.setdefault(leader, {})[tp] = ts
                continue
            self.client.metadata.request_update()
            code = cluster.topic_error(tp.topic)
            if topic_errors and code and not for_code(code).retriable:
                errors[tp] = for_code(code)(f"ListOffsets {tp}: topic {tp.topic!r}")
        results = await asyncio.gather(
            *(self._list_offsets_from(node, tps, timeout) for node, tps in by_leader.items()),
            return_exceptions=True)
        found: dict[TopicPartition, tuple[int, int, int]] = {}
        for r in results:
            if isinstance(r, _CONNECTION_ERRORS):
                self.client.metadata.request_update()
            elif isinstance(r, BaseException):
                raise r
            else:
                found.update(r[0])
                errors.update(r[1])
        return found, errors

    async def _list_offsets_from(self, node: int, tps: Mapping[TopicPartition, int], timeout: float
                                 ) -> tuple[dict[TopicPartition, tuple[int, int, int]],
                                            dict[TopicPartition, KafkaError]]:
        topics: dict[str, list[dict]] = {}
        for tp, ts in tps.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": ts})
        body = {"replica_id": -1, "isolation_level": 1 if self.read_committed else 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        resp = await self.client.request(node, "ListOffsets", body, timeout=timeout)
        out = {}
        errors: dict[TopicPartition, KafkaError] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code == 0:
                    out[tp] = (p.offset, p.timestamp, p.get("leader_epoch", -1))
                elif for_code(p.error_code).retriable or p.error_code in _REFRESH_METADATA:
                    self.client.metadata.request_update()
                else:
                    errors[tp] = for_code(p.error_code)(f"ListOffsets {tp}")
        return out, errors

    async def _metadata_update(self, timeout: float) -> None:
        """Wait up to `timeout` for the next metadata snapshot (after a failed refresh, the
        retry backoff too). With asyncio.wait, not wait_for: Python 3.11's wait_for returns
        normally when its caller's cancellation arrives in the loop iteration in which the
        update lands, and the cancelled lookup would go on until its timeout."""
        update = asyncio.ensure_future(self.client.metadata.wait_for_update())
        failed = False
        try:
            await asyncio.wait({update}, timeout=timeout)
        finally:
            if not update.done():
                update.cancel()
            elif not update.cancelled():
                failed = update.exception() is not None     # retrieved either way
        if failed:
            await asyncio.sleep(self.client.retry_backoff)

    # ------------------------------------------------------------------ position resets

    def _reset_to(self, st: PartitionState, offset: int) -> None:
        st.position = offset
        st.reset = None
        st.version += 1

    async def reset_positions(self, tps: Iterable[TopicPartition], timeout: float) -> None:
        """Look up the positions of those of `tps` waiting for a reset (earliest/latest) now,
        waiting up to `timeout` (position(); poll() uses start_position_resets())."""
        pending: dict[TopicPartition, int] = {}
        for tp in tps:
            st = self.states.get(tp)
            if st is not None and st.position is None and st.reset:
                pending[tp] = EARLIEST if st.reset == "earliest" else LATEST
        if not pending:
            return
        found = await self.list_offsets(pending, timeout)
        with self.lock:
            for tp, (offset, _, _) in found.items():
                st = self.states.get(tp)
                if st is not None and st.position is None:
                    self._reset_to(st, offset)
        self.wake()

    def start_position_resets(self) -> None:
        """Start looking up the positions of partitions waiting for a reset (earliest/latest)
        that no lookup has yet, and return (poll() calls it: as Kafka's consumer, poll()
        never waits for a position past its own timeout). See _reset_until_found."""
        todo = [tp for tp, st in self.states.items()
                if st.position is None and st.reset is not None and st.error is None
                and tp not in self._resetting]
        if not todo:
            return
        self._resetting.update(todo)
        t = asyncio.get_running_loop().create_task(self._reset_until_found(set(todo)),
                                                   name="strom-reset-positions")
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _reset_until_found(self, tps: set[TopicPartition]) -> None:
        """ListOffsets for `tps`, round after round, until each has a position, is sought
        elsewhere or unassigned. A position found is used at once (the fetcher starts from
        it) whatever the other partitions do; one without a leader (a partition that does not
        exist yet) or with a retriable error is asked about again after a backoff growing to
        retry.backoff.max.ms, for as long as it is assigned, as Kafka's consumer asks again
        on every poll; an error that is not retriable is raised by the next poll()."""
        backoff = self.client.retry_backoff
        rounds = 0
        try:
            while True:
                sent: dict[TopicPartition, tuple[int, int]] = {}    # tp: (version, spec)
                for tp in list(tps):
                    st = self.states.get(tp)
                    if st is None or st.position is not None or st.reset is None:
                        tps.discard(tp)             # unassigned, found or sought
                        self._resetting.discard(tp)
                    else:
                        sent[tp] = (st.version, EARLIEST if st.reset == "earliest" else LATEST)
                if not sent:
                    return
                found, errors = await self._list_offsets_round(
                    {tp: spec for tp, (_, spec) in sent.items()}, self.client.request_timeout,
                    topic_errors=rounds > 0)
                with self.lock:
                    for tp, (offset, _, _) in found.items():
                        st = self.states.get(tp)
                        if st is not None and st.version == sent[tp][0] and st.position is None:
                            self._reset_to(st, offset)
                    for tp, err in errors.items():
                        st = self.states.get(tp)
                        if st is not None and st.version == sent[tp][0]:
                            st.error = err
                            self.data_ready.set()
                        tps.discard(tp)             # the next poll() starts over
                        self._resetting.discard(tp)
                if found:
                    self.wake()
                if any(tp not in found for tp in tps):
                    rounds += 1
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, max(self.client.retry_backoff_max, backoff))
        except asyncio.CancelledError:
            raise
        except Exception as e:                  # an authentication failure, a bug: poll() raises it
            log.warning("looking up the positions of %s failed: %r", sorted(tps), e)
            with self.lock:
                for tp in tps:
                    st = self.states.get(tp)
                    if st is not None and st.position is None:
                        st.error = e
                        self.data_ready.set()
        finally:
            self._resetting.difference_update(tps)
