"""Incremental fetch sessions (KIP-227), sans-io: the session cache's epochs, errors,
partition bookkeeping and which partitions an incremental answer carries."""
from __future__ import annotations

from types import SimpleNamespace as NS

from broker.server.fetch_sessions import (FINAL_EPOCH, INITIAL_EPOCH, FetchSessionCache,
                                          next_epoch, open_context)
from clients.protocol.errors import Code


def part(i, offset=0, max_bytes=1000):
    return NS(partition=i, fetch_offset=offset, partition_max_bytes=max_bytes,
              current_leader_epoch=-1, log_start_offset=-1)


def entry(hw, records=b"", error=0, lso=None, start=0):
    return {"records": records, "error_code": error, "high_watermark": hw,
            "last_stable_offset": hw if lso is None else lso, "log_start_offset": start}


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2 ** 31 - 1) == 1
    assert next_epoch(-1) == -1


def test_sessionless_fetch_makes_no_session_and_closes_a_named_one():
    cache = FetchSessionCache()
    ctx = open_context(cache, 0, FINAL_EPOCH, False, [("t", None, [part(0)])], [])
    assert ctx.error == 0 and ctx.session is None and len(cache) == 0
    s = open_context(cache, 0, INITIAL_EPOCH, False, [("t", None, [part(0)])], []).session
    assert len(cache) == 1
    ctx = open_context(cache, s.id, FINAL_EPOCH, False, [("t", None, [part(0)])], [])
    assert ctx.session is None and len(cache) == 0


def test_full_fetch_opens_a_session_and_incremental_requests_must_carry_its_epoch():
    cache = FetchSessionCache()
    ctx = open_context(cache, 0, INITIAL_EPOCH, True, [("t", None, [part(0), part(1)])], [])
    s = ctx.session
    assert ctx.error == 0 and not ctx.incremental and s.id > 0 and s.epoch == 1
    assert [k for k in s.partitions] == [("t", 0), ("t", 1)]
    ctx = open_context(cache, s.id, 1, True, [], [])
    assert ctx.incremental and ctx.session is s and s.epoch == 2
    # A replayed or skipped epoch is refused; an unknown id too.
    assert open_context(cache, s.id, 1, True, [], []).error == Code.INVALID_FETCH_SESSION_EPOCH
    assert open_context(cache, s.id, 3, True, [], []).error == Code.INVALID_FETCH_SESSION_EPOCH
    assert open_context(cache, s.id + 1, 2, True, [], []).error == Code.FETCH_SESSION_ID_NOT_FOUND
    assert open_context(cache, 0, 5, True, [], []).error == Code.FETCH_SESSION_ID_NOT_FOUND
    # The refused requests changed nothing: epoch 2 still works.
    assert open_context(cache, s.id, 2, True, [], []).session is s


def test_incremental_requests_update_add_and_forget_partitions():
    cache = FetchSessionCache()
    s = open_context(cache, 0, 0, True, [("a", None, [part(0, 5), part(1, 7)])], []).session
    open_context(cache, s.id, 1, True, [("a", None, [part(1, 9)]), ("b", None, [part(0, 3)])],
                 [("a", [0])])
    assert {k: cp.fetch_offset for k, cp in s.partitions.items()} == {("a", 1): 9, ("b", 0): 3}
    assert [(name, [cp.partition for cp in parts]) for name, _, parts in s.topics()] == \
        [("a", [1]), ("b", [0])]


def test_new_session_id_replaces_the_old_one_on_a_full_fetch_with_its_id():
    cache = FetchSessionCache()
    s1 = open_context(cache, 0, 0, False, [("t", None, [part(0)])], []).session
    s2 = open_context(cache, s1.id, 0, False, [("t", None, [part(0)])], []).session
    assert s2.id != s1.id and cache.get(s1.id) is None and cache.get(s2.id) is s2


def test_incremental_answer_carries_only_partitions_with_something_new():
    cache = FetchSessionCache()
    s = open_context(cache, 0, 0, True, [("t", None, [part(0), part(1)])], []).session
    cp0, cp1 = s.partitions[("t", 0)], s.partitions[("t", 1)]
    # Nothing sent yet: the first answer carries both.
    assert cp0.must_respond(entry(10)) and cp1.must_respond(entry(10))
    # Same watermarks, no records: nothing to say.
    assert not cp0.must_respond(entry(10)) and not cp1.must_respond(entry(10))
    assert cp0.must_respond(entry(10, records=[b"x"]))          # records
    assert cp1.must_respond(entry(11))                          # high watermark moved
    assert cp1.must_respond(entry(11, lso=10))                  # last stable offset moved
    assert cp1.must_respond(entry(11, lso=10, start=4))         # log start moved
    assert not cp1.must_respond(entry(11, lso=10, start=4))
    # An error is always carried, and the partition is carried again afterwards.
    assert cp0.must_respond(entry(-1, error=Code.NOT_LEADER_OR_FOLLOWER))
    assert cp0.must_respond(entry(10))
    assert not cp0.must_respond(entry(10))


def test_full_cache_evicts_only_sessions_idle_past_the_eviction_time():
    clock = Clock()
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000, clock=clock)
    a = cache.create(True)
    clock.t += 0.5
    b = cache.create(True)
    assert cache.create(False) is None          # both used within the last second
    clock.t += 0.6                               # a idle 1.1 s, b 0.6 s
    c = cache.create(False)
    assert c is not None and cache.get(a.id) is None and cache.get(b.id) is b
    assert cache.evictions == 1
    # Using a session makes it the most recent: b is kept, c evicted later.
    clock.t += 2
    cache.touch(b)
    d = cache.create(True)
    assert cache.get(c.id) is None and cache.get(b.id) is b and cache.get(d.id) is d


def test_zero_slots_means_no_sessions():
    cache = FetchSessionCache(max_sessions=0)
    ctx = open_context(cache, 0, 0, False, [("t", None, [part(0)])], [])
    assert ctx.error == 0 and ctx.session is None


def test_sessions_by_topic_id_find_a_topic_learned_later_and_forget_by_id():
    """Fetch v13+: a partition of a topic id the broker does not know yet is kept by id and
    its name is looked up on every request; forgotten_topics_data names it by id."""
    import uuid
    tid = uuid.uuid4()
    cache = FetchSessionCache()
    s = open_context(cache, 0, 0, False, [(None, tid, [part(0), part(1)])], []).session
    known: dict = {}
    assert [(n, [cp.partition for cp in ps]) for n, _, ps in s.topics(known.get)] == [(None, [0, 1])]
    known[tid] = "orders"                     # the broker learns the topic
    assert [(n, i) for n, i, _ in s.topics(known.get)] == [("orders", tid)]
    # Updating it by id (now with its name) changes the same entry.
    open_context(cache, s.id, 1, False, [("orders", tid, [part(1, 42)])], [])
    assert len(s.partitions) == 2 and s.partitions[(tid, 1)].fetch_offset == 42
    open_context(cache, s.id, 2, False, [], [(tid, [0])])
    assert list(s.partitions) == [(tid, 1)]


def test_rotation_moves_a_partition_behind_other_topics():
    """Partitions that brought records go to the back of the whole session, not just of
    their topic: otherwise a busy topic listed first could starve the next one."""
    cache = FetchSessionCache()
    s = open_context(cache, 0, 0, True, [("a", None, [part(0), part(1)]),
                                         ("b", None, [part(0)])], []).session
    s.move_to_end(s.partitions[("a", 0)])
    assert [(n, [cp.partition for cp in ps]) for n, _, ps in s.topics()] == \
        [("a", [1]), ("b", [0]), ("a", [0])]


def test_a_follower_session_may_evict_a_consumer_session_that_is_still_in_use():
    clock = Clock()
    cache = FetchSessionCache(max_sessions=2, eviction_ms=120_000, clock=clock)
    consumer = cache.create(False)
    follower = cache.create(True)
    assert cache.create(False) is None                  # consumers wait for idle sessions
    f2 = cache.create(True)
    assert f2 is not None and cache.get(consumer.id) is None and cache.get(follower.id) is follower
    assert cache.create(True) is None                   # followers never evict followers in use


def test_an_answer_after_another_request_moved_the_session_on_is_refused():
    cache = FetchSessionCache()
    s = open_context(cache, 0, 0, False, [("t", None, [part(0)])], []).session
    a = open_context(cache, s.id, 1, False, [], [])     # long-polls...
    b = open_context(cache, s.id, 2, False, [], [])     # ...while this one arrives
    assert b.still_current(cache) and not a.still_current(cache)
    cache.remove(s.id)
    assert not b.still_current(cache)
