"""Incremental fetch sessions (KIP-227): a fetcher names its partitions once, then sends
only what changed, and the answer carries only partitions with something new.

A follower fetching from a leader names every partition it follows in every request, and
the answer names every one of them again, data or not: with `__consumer_offsets` (50
partitions) beside a busy topic, most of each replica fetch was encoding, decoding and
reading idle partitions. With a session the leader remembers each partition's fetch
position and what it last told the fetcher (high watermark, last stable offset, log start).

The request's (session_id, session_epoch), as Kafka's FetchMetadata reads them:
- (any, -1): no session; a named session is closed. Every partition, every time.
- (0, 0): full fetch that opens a session (if the cache has room); the answer carries its id.
- (id, 0): the old session is closed and a new one opened, as (0, 0).
- (id, n > 0): incremental. `n` must be the epoch the session expects
  (INVALID_FETCH_SESSION_EPOCH otherwise; an unknown id is FETCH_SESSION_ID_NOT_FOUND). The
  request's partitions are added or updated, `forgotten_topics_data` removed, the others
  keep their cached position.

An incremental answer includes a partition when it has records, an error, or a high
watermark / last stable offset / log start offset different from what was last sent (a
partition new to the session has sent nothing yet, so it is always included once).
Partitions that brought records move to the back of the session. From Fetch v13 a session
keys partitions by topic id and looks their names up on every request. A request answered
after another one on the same session moved its epoch on gets INVALID_FETCH_SESSION_EPOCH.

Sessions are in memory only, per broker, at most `max.incremental.fetch.session.cache.slots`
of them; when full, the least recently used one is evicted if it has been idle for
`min.incremental.fetch.session.eviction.ms`, else no session is made and the fetcher goes on
with full fetches (its answer says session id 0). Single event-loop thread; no locking.
"""
from __future__ import annotations

import random
import time
from collections import OrderedDict
from typing import Any, Callable

from clients.protocol.errors import Code

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0
_INT32_MAX = 2 ** 31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 0 -> 1 -> ... -> MAX -> 1 (never back to 0)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class CachedPartition:
    """A partition of a session: where to read next and what the fetcher was last told.
    Carries the attribute names of a request partition, so the fetch plan reads either."""

    __slots__ = ("topic", "topic_id", "partition", "fetch_offset", "partition_max_bytes",
                 "current_leader_epoch", "log_start_offset", "sent_hw", "sent_lso",
                 "sent_log_start")

    def __init__(self, topic: Any, topic_id: Any, rp: Any):
        self.topic = topic              # None while a topic id is unknown to this broker
        self.topic_id = topic_id        # None below Fetch v13 (topics by name)
        self.partition = rp.partition
        self.sent_hw = self.sent_lso = self.sent_log_start = None   # nothing sent yet
        self.update(rp)

    def update(self, rp: Any) -> None:
        self.fetch_offset = rp.fetch_offset
        self.partition_max_bytes = rp.partition_max_bytes
        self.current_leader_epoch = getattr(rp, "current_leader_epoch", -1)
        self.log_start_offset = getattr(rp, "log_start_offset", -1)

    def must_respond(self, entry: dict) -> bool:
        """Whether an incremental answer includes this partition's `entry`; remembers what
        it sends. After an error the high watermark is forgotten so the next answer
        carries the partition again (as Kafka does)."""
        changed = bool(entry["records"]) or entry["error_code"] != 0 \
            or entry["high_watermark"] != self.sent_hw \
            or entry["last_stable_offset"] != self.sent_lso \
            or entry["log_start_offset"] != self.sent_log_start
        self.sent(entry)
        return changed

    def sent(self, entry: dict) -> None:
        if entry["error_code"]:
            self.sent_hw = None
        else:
            self.sent_hw = entry["high_watermark"]
            self.sent_lso = entry["last_stable_offset"]
            self.sent_log_start = entry["log_start_offset"]


class FetchSession:
    """One fetcher's session: its partitions in the order they were added."""

    __slots__ = ("id", "epoch", "is_follower", "partitions", "last_used")

    def __init__(self, session_id: int, is_follower: bool, now: float):
        self.id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)   # the epoch the next request must carry
        self.is_follower = is_follower
        self.partitions: dict[tuple[str, int], CachedPartition] = {}
        self.last_used = now

    def apply(self, topics: list[tuple[Any, Any, list[Any]]],
              forgotten: list[tuple[Any, list[int]]]) -> None:
        """Add or update the request's partitions (topic name, topic id, partitions), then
        drop the forgotten ones (topic id from Fetch v13 on, else name)."""
        for name, topic_id, parts in topics:
            topic_key = name if topic_id is None else topic_id
            for rp in parts:
                key = (topic_key, rp.partition)
                cached = self.partitions.get(key)
                if cached is None:
                    self.partitions[key] = CachedPartition(name, topic_id, rp)
                else:
                    cached.update(rp)
        for topic_key, indexes in forgotten:
            for i in indexes:
                self.partitions.pop((topic_key, i), None)

    def move_to_end(self, cp: CachedPartition) -> None:
        key = (cp.topic if cp.topic_id is None else cp.topic_id, cp.partition)
        if self.partitions.get(key) is cp:
            self.partitions[key] = self.partitions.pop(key)

    def topics(self, name_of: Callable[[Any], Any] | None = None
               ) -> list[tuple[Any, Any, list[CachedPartition]]]:
        """The session's partitions in session order, neighbours of one topic grouped (a
        topic may come back later in the list: grouping them all would undo the rotation
        across topics). `name_of` (topic id -> name or None) looks names up again for a
        session keyed by topic id, so a topic this broker learns later is found."""
        out: list[tuple[Any, Any, list[CachedPartition]]] = []
        for cp in self.partitions.values():
            if name_of is not None and cp.topic_id is not None:
                cp.topic = name_of(cp.topic_id)
            if out and out[-1][0] == cp.topic and out[-1][1] == cp.topic_id:
                out[-1][2].append(cp)
            else:
                out.append((cp.topic, cp.topic_id, [cp]))
        return out


class FetchSessionCache:
    """The broker's sessions by id, least recently used first."""

    def __init__(self, max_sessions: int = 1000, eviction_ms: int = 120_000,
                 clock: Callable[[], float] = time.monotonic):
        self.max_sessions = max_sessions
        self.eviction_s = eviction_ms / 1000.0
        self.clock = clock
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def sessions(self) -> list[FetchSession]:
        return list(self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used = self.clock()
        if session.id in self._sessions:
            self._sessions.move_to_end(session.id)

    def create(self, is_follower: bool) -> FetchSession | None:
        """A new session, or None when the cache is full of sessions still in use. When
        full, the least recently used session idle past the eviction time goes; failing
        that, a follower's new session takes the least recently used consumer's (Kafka
        privileges followers: their sessions carry replication)."""
        now = self.clock()
        if self.max_sessions <= 0:
            return None
        if len(self._sessions) >= self.max_sessions:
            oldest = next(iter(self._sessions.values()))
            victim: FetchSession | None = oldest
            if now - oldest.last_used < self.eviction_s:
                victim = None
                if is_follower:
                    victim = next((s for s in self._sessions.values() if not s.is_follower), None)
            if victim is None:
                return None
            del self._sessions[victim.id]
            self.evictions += 1
        session_id = 0
        while session_id == NO_SESSION or session_id in self._sessions:
            session_id = random.randint(1, _INT32_MAX)
        s = self._sessions[session_id] = FetchSession(session_id, is_follower, now)
        return s


class SessionContext:
    """How one fetch request uses sessions: `error` (a top-level error code, 0 if none),
    `session` (to read from and answer with, or None) and `incremental` (answer only what
    changed)."""

    __slots__ = ("error", "session", "incremental", "expected_epoch")

    def __init__(self, error: int = 0, session: FetchSession | None = None,
                 incremental: bool = False):
        self.error = error
        self.session = session
        self.incremental = incremental
        # The session's epoch once this request was taken; if another request moved it on
        # while this one long-polled, this answer is refused (Kafka checks the same).
        self.expected_epoch = session.epoch if session is not None else None

    def still_current(self, cache: "FetchSessionCache") -> bool:
        s = self.session
        return s is None or (cache.get(s.id) is s and s.epoch == self.expected_epoch)

    @property
    def response_session_id(self) -> int:
        return self.session.id if self.session is not None else NO_SESSION


def open_context(cache: FetchSessionCache, session_id: int, epoch: int, is_follower: bool,
                 topics: list[tuple[str, Any, list[Any]]],
                 forgotten: list[tuple[str, list[int]]]) -> SessionContext:
    """Resolve a request's session fields against the cache (see the module docstring)."""
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != NO_SESSION:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return SessionContext()
        session = cache.create(is_follower)
        if session is not None:
            session.apply(topics, [])
        return SessionContext(session=session)
    session = cache.get(session_id) if session_id != NO_SESSION else None
    if session is None:
        return SessionContext(Code.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return SessionContext(Code.INVALID_FETCH_SESSION_EPOCH)
    session.apply(topics, forgotten)
    session.epoch = next_epoch(session.epoch)
    cache.touch(session)
    return SessionContext(session=session, incremental=True)
