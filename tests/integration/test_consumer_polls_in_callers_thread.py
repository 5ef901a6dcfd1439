"""The sync Consumer takes records already fetched in the caller's thread
(`AsyncConsumer.poll_buffered`), against a real broker process.

A round trip to the consumer's I/O thread costs two thread switches (~70 us on this kind of
VM) per poll(); records that are buffered and a poll() with nothing else to do skip it. What
a poll() must still do is still done:

- records already fetched come back without a round trip to the loop's thread, and every
  record comes back once, in order, while fetch answers land concurrently (16 partitions,
  polls of 7 records);
- a partition added by assign() has its position looked up at the next poll();
- a commit_async callback runs at the first poll() after the commit finished;
- auto-commit commits on time;
- a member that only polls buffered records stays in its group past max.poll.interval.ms,
  and a rebalance another member starts is run by the next poll().

The tests that check what poll() must not skip widen the window after which a poll() on the
loop is due anyway (`_BUFFERED_WINDOW`) to a minute, so that only the check under test can
send the poll() to the loop.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer as CKProducer

import clients.aio.consumer as aio_consumer
from clients.consumer import Consumer
from clients.types import TopicPartition
from tests.support.broker_process import BrokerProcess
from tests.support.topics import create_topic

pytestmark = pytest.mark.integration

QUIET = {"log_level": 0}
GROUP_TIMING = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("callers-thread") / "b0").start()
    yield b
    b.stop()


@pytest.fixture
def wide_window(monkeypatch):
    monkeypatch.setattr(aio_consumer, "_BUFFERED_WINDOW", 60.0)


def produce(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    """`n` records per partition, values b"<partition>:<i>"."""
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for i in range(n):
        for part in range(partitions):
            while True:
                try:
                    p.produce(topic, value=b"%d:%d" % (part, i), partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
    assert p.flush(60) == 0


class SpawnCounter:
    """Counts the coroutines a sync Consumer hands to its I/O thread."""

    def __init__(self, consumer: Consumer):
        self.count = 0
        lt = consumer._lt
        spawn = lt.spawn

        def counted(coro):
            self.count += 1
            return spawn(coro)
        lt.spawn = counted                  # type: ignore[method-assign]


def poll_until(consumer: Consumer, n: int, timeout: float = 30.0, max_records: int | None = None
               ) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records"
        got += consumer.poll(0.5, max_records)
    return got


def test_buffered_records_skip_the_round_trip_and_come_back_once_in_order(broker):
    topic, parts, per_part = "callers-thread-order", 16, 2_500
    create_topic(broker.bootstrap, topic, parts)
    produce(broker.bootstrap, topic, parts, per_part)
    with Consumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                  auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(parts)]
        c.assign(tps)
        spawned = SpawnCounter(c)
        polls = 0
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < parts * per_part:
            assert time.monotonic() < deadline, f"{len(got)} records"
            got += c.poll(0.5, 7)
            polls += 1
        assert len(got) == parts * per_part
        by_partition: dict[int, list[int]] = {}
        for r in got:
            by_partition.setdefault(r.partition, []).append(r.offset)
            assert r.value == b"%d:%d" % (r.partition, r.offset)
        assert {p: offsets for p, offsets in by_partition.items()} == {
            p: list(range(per_part)) for p in range(parts)}
        # Most polls took buffered records in this thread; the others waited for a fetch
        # or were the loop's periodic poll().
        assert spawned.count < polls / 4, (spawned.count, polls)
        # And then: nothing buffered, so poll() waits on the loop as before.
        before = spawned.count
        assert c.poll(0.2) == []
        assert spawned.count == before + 1


def test_an_assigned_partition_is_looked_up_at_the_next_poll(broker, wide_window):
    topic = "callers-thread-assign"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 2, 3_000)
    with Consumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                  auto_offset_reset="earliest") as c:
        first = TopicPartition(topic, 0)
        c.assign([first])
        poll_until(c, 10, max_records=10)
        spawned = SpawnCounter(c)
        c.poll(0.5, 10)
        assert spawned.count == 0, "records of partition 0 are buffered: no round trip"
        c.assign([first, TopicPartition(topic, 1)])
        spawned.count = 0
        assert len(c.poll(0.5, 10)) == 10
        assert spawned.count == 1, "the new partition's position is looked up by this poll()"
        got = poll_until(c, 6_000 - 30, max_records=100)
        assert len(got) == 6_000 - 30 and {r.partition for r in got} == {0, 1}


def test_a_commit_async_callback_runs_at_the_next_poll(broker, wide_window):
    topic = "callers-thread-commit-async"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 1, 20_000)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g-callers-async",
                  enable_auto_commit=False, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        poll_until(c, 10, max_records=10)
        told: list = []
        c.commit_async(callback=lambda err, offsets: told.append((threading.current_thread(),
                                                                  err, dict(offsets))))
        deadline = time.monotonic() + 10
        while not told:
            assert time.monotonic() < deadline, "the callback never ran"
            assert c.poll(0.5, 1), "records stay buffered through the test"
            time.sleep(0.01)
        thread, err, offsets = told[0]
        assert thread is threading.current_thread() and err is None
        assert offsets[TopicPartition(topic, 0)].offset >= 10


def test_auto_commit_commits_on_time(broker, wide_window):
    topic = "callers-thread-auto-commit"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 1, 20_000)
    tp = TopicPartition(topic, 0)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g-callers-auto",
                  enable_auto_commit=True, auto_commit_interval_ms=200,
                  auto_offset_reset="earliest") as c:
        c.assign([tp])
        poll_until(c, 10, max_records=10)
        deadline = time.monotonic() + 10
        while True:
            assert c.poll(0.5, 1)
            committed = c.committed([tp])[tp]
            if committed is not None and committed.offset > 10:
                break
            assert time.monotonic() < deadline, "auto-commit never committed"
            time.sleep(0.05)


def test_a_member_polling_buffered_records_stays_and_rebalances(broker, wide_window):
    topic, group = "callers-thread-group", "g-callers-group"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, 4, 25_000)
    conf = dict(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", max_poll_interval_ms=1_500, **GROUP_TIMING)
    with Consumer(topic, **conf) as a:
        poll_until(a, 10, max_records=10)
        assert len(a.assignment()) == 4
        generation = a.group_metadata().generation_id
        # Past max.poll.interval.ms on buffered records alone: still the same member.
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            assert a.poll(0.5, 1)
            time.sleep(0.002)
        assert a.group_metadata().generation_id == generation
        assert len(a.assignment()) == 4

        # A second member joins: the first keeps polling buffered records and still runs
        # the rebalance, giving up two partitions.
        joined: list[set] = []
        stop = threading.Event()

        def second() -> None:
            with Consumer(topic, **conf) as b:
                while not stop.is_set():
                    b.poll(0.2, 10)
                    if b.assignment() and not joined:
                        joined.append(b.assignment())
        t = threading.Thread(target=second, daemon=True)
        t.start()
        try:
            deadline = time.monotonic() + 30
            while not (joined and len(a.assignment()) == 2):
                assert time.monotonic() < deadline, (a.assignment(), joined)
                a.poll(0.5, 1)
                time.sleep(0.002)
            assert a.assignment() | joined[0] == {TopicPartition(topic, p) for p in range(4)}
        finally:
            stop.set()
            t.join(30)
