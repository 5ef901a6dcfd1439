"""Incremental fetch sessions (KIP-227) on a real broker, over the wire: a full fetch opens a
session, incremental fetches name only what changed and are answered with only the
partitions that have something new, forgotten partitions leave, epochs are checked, the
partition that brought records goes to the back of the session; followers of a 3-broker
cluster replicate through sessions (and kafka-python's consumer uses them, in its
round-trip tests)."""
from __future__ import annotations

import time
import urllib.request

import pytest

from clients.protocol.errors import Code
from clients.protocol.records import Record, build_batch
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

TOPIC = "sess"


def fetch(c: WireClient, session_id: int, epoch: int, parts: dict[int, int], forgotten=(),
          max_wait_ms: int = 0, max_bytes: int = 10_000_000, partition_max_bytes: int = 1_000_000):
    """Fetch v11; `parts` maps partition -> fetch offset."""
    return c.request("Fetch", 11, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": TOPIC, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
             "log_start_offset": -1, "partition_max_bytes": partition_max_bytes}
            for p, off in parts.items()]}] if parts else [],
        "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forgotten)}] if forgotten else [],
        "rack_id": ""})


def answered(r) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, bytes of records) of an answer."""
    return {p.partition_index: (p.high_watermark, len(p.records or b""))
            for t in r.responses for p in t.partitions}


def produce(c: WireClient, partition: int, n: int, size: int = 100) -> None:
    batch = build_batch([Record(None, b"v" * size) for _ in range(n)])
    r = c.request("Produce", 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                 "topic_data": [{"name": TOPIC, "partition_data": [
                                     {"index": partition, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code == 0


@pytest.fixture
def session_broker(broker_factory):
    b = broker_factory({"num.partitions": "4", "auto.create.topics.enable": "true"})
    with WireClient("127.0.0.1", b.port) as c:
        deadline = time.monotonic() + 10
        while True:      # auto-create the topic and wait for its leaders
            md = c.request("Metadata", 4, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": True})
            t = md.topics[0]
            if t.error_code == 0 and len(t.partitions) == 4:
                break
            assert time.monotonic() < deadline, t
            time.sleep(0.05)
    return b


def test_full_fetch_opens_a_session_and_incremental_fetches_carry_only_news(session_broker):
    with WireClient("127.0.0.1", session_broker.port) as c:
        produce(c, 0, 10)
        produce(c, 2, 5)
        r = fetch(c, 0, 0, {0: 0, 1: 0, 2: 0, 3: 0})
        sid = r.session_id
        assert r.error_code == 0 and sid != 0
        full = answered(r)
        assert set(full) == {0, 1, 2, 3} and full[0][0] == 10 and full[2][0] == 5
        assert full[0][1] > 0 and full[2][1] > 0 and full[1] == (0, 0)

        # The session still reads 0 and 2 from offset 0: an incremental request with
        # nothing named would get their records again. Named at their new positions,
        # with nothing new anywhere, the answer is empty (after max_wait).
        t0 = time.monotonic()
        r = fetch(c, sid, 1, {0: 10, 2: 5}, max_wait_ms=300)
        assert (r.error_code, r.session_id, answered(r)) == (0, sid, {})
        assert time.monotonic() - t0 >= 0.25          # it long-polled on the whole session

        # New records on partition 1 only, which the request does not name: only it answers.
        produce(c, 1, 3)
        r = fetch(c, sid, 2, {})
        assert set(answered(r)) == {1} and answered(r)[1][0] == 3 and answered(r)[1][1] > 0

        # Partition 1's position is cached at 0: told where it is now, it answers nothing.
        r = fetch(c, sid, 3, {1: 3}, max_wait_ms=0)
        assert answered(r) == {}

        # Forget partition 3; records there are no longer answered, while 0 still is.
        r = fetch(c, sid, 4, {}, forgotten=[3])
        assert answered(r) == {}
        produce(c, 3, 2)
        produce(c, 0, 1)
        r = fetch(c, sid, 5, {})
        assert set(answered(r)) == {0} and answered(r)[0][0] == 11
        print(f"session {sid}: full answer {sorted(full)}, incremental answers carried only news")


def test_a_long_poll_on_a_session_wakes_on_a_partition_not_named_in_the_request(session_broker):
    import threading
    with WireClient("127.0.0.1", session_broker.port) as c:
        r = fetch(c, 0, 0, {0: 0, 1: 0, 2: 0, 3: 0})
        sid = r.session_id
        timer = threading.Timer(0.3, lambda: produce(WireClient("127.0.0.1", session_broker.port), 3, 1))
        timer.start()
        t0 = time.monotonic()
        r = fetch(c, sid, 1, {}, max_wait_ms=5000)
        waited = time.monotonic() - t0
        timer.join()
        assert set(answered(r)) == {3} and 0.2 < waited < 3, (answered(r), waited)


def test_wrong_epochs_and_unknown_sessions_are_refused_and_change_nothing(session_broker):
    with WireClient("127.0.0.1", session_broker.port) as c:
        sid = fetch(c, 0, 0, {0: 0}).session_id
        assert fetch(c, sid, 2, {}).error_code == Code.INVALID_FETCH_SESSION_EPOCH
        assert fetch(c, sid + 1 if sid < 2 ** 31 - 1 else 1, 1, {}).error_code == \
            Code.FETCH_SESSION_ID_NOT_FOUND
        assert fetch(c, 0, 1, {}).error_code == Code.FETCH_SESSION_ID_NOT_FOUND
        r = fetch(c, sid, 1, {})
        assert (r.error_code, r.session_id) == (0, sid)
        # Epoch -1 closes it: sessionless answer, and the id is gone.
        r = fetch(c, sid, -1, {0: 0})
        assert (r.error_code, r.session_id, set(answered(r))) == (0, 0, {0})
        assert fetch(c, sid, 2, {}).error_code == Code.FETCH_SESSION_ID_NOT_FOUND


def test_partitions_that_brought_records_go_to_the_back_of_the_session(session_broker):
    with WireClient("127.0.0.1", session_broker.port) as c:
        for p in range(4):
            produce(c, p, 10, size=1000)        # ~10 KB per partition
        # Room for about one partition per answer: without rotation partition 0 would
        # answer every time and 1-3 would starve.
        sid = fetch(c, 0, 0, {p: 0 for p in range(4)}, max_bytes=1,
                    partition_max_bytes=1).session_id
        order = []
        pos = {p: 0 for p in range(4)}
        for epoch in range(1, 5):
            r = fetch(c, sid, epoch, {}, max_bytes=1, partition_max_bytes=1)
            with_records = [p for p, (_, n) in answered(r).items() if n]
            assert len(with_records) == 1, answered(r)
            order.append(with_records[0])
        assert sorted(order) == [0, 1, 2, 3], order
        del pos


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not found")


def test_followers_replicate_through_incremental_sessions(tmp_path):
    """Followers open one session per leader and keep it: the leader's cache holds a
    session per follower with every followed partition, and a produce with acks=all to
    each partition is acknowledged and readable from every replica's log."""
    from confluent_kafka import Producer
    from tests.support.broker_process import free_port
    from tests.support.cluster import Cluster

    ports = [free_port() for _ in range(3)]
    cluster = Cluster(tmp_path / "c", brokers=3,
                      broker_overrides={i: {"metrics.port": str(ports[i])} for i in range(3)}).start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic("busy", 6, 3), NewTopic("idle", 20, 3)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(3000):
            p.produce("busy", b"r%d" % i, partition=i % 6)
        assert p.flush(30) == 0
        # Each broker leads about a third of the 26 partitions and has 2 followers: 2
        # sessions per broker, every partition cached once per follower.
        deadline = time.monotonic() + 15
        while True:
            sessions = [_metric(port, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
                        for port in ports]
            cached = [_metric(port, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
                      for port in ports]
            if sessions == [2.0, 2.0, 2.0] and sum(cached) == 2 * 26:
                break
            assert time.monotonic() < deadline, (sessions, cached)
            time.sleep(0.2)
        # Every replica of every busy partition holds the same bytes.
        def logs(i: int, part: int) -> bytes:
            d = cluster.broker(i).log_dir / f"busy-{part}"
            return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
        deadline = time.monotonic() + 15
        while not all(logs(0, q) == logs(1, q) == logs(2, q) and logs(0, q) for q in range(6)):
            assert time.monotonic() < deadline, "replicas differ"
            time.sleep(0.2)
        sizes = [len(logs(0, q)) for q in range(6)]
        print(f"sessions per broker {sessions}, partitions cached {cached}; "
              f"replicas identical, log bytes per partition {sizes}")
    finally:
        cluster.stop()


def test_a_request_answered_after_another_moved_its_session_on_is_refused(session_broker):
    """Two fetches on one session from two connections: the first long-polls, the second
    (next epoch) arrives meanwhile. When records wake both, the first gets
    INVALID_FETCH_SESSION_EPOCH and the second its answer, as Kafka does."""
    import threading
    with WireClient("127.0.0.1", session_broker.port) as c1, \
            WireClient("127.0.0.1", session_broker.port) as c2:
        sid = fetch(c1, 0, 0, {0: 0, 1: 0}).session_id
        out = {}
        t1 = threading.Thread(target=lambda: out.update(first=fetch(c1, sid, 1, {}, max_wait_ms=3000)))
        t1.start()
        time.sleep(0.3)
        t2 = threading.Thread(target=lambda: out.update(second=fetch(c2, sid, 2, {}, max_wait_ms=3000)))
        t2.start()
        time.sleep(0.3)
        with WireClient("127.0.0.1", session_broker.port) as c3:
            produce(c3, 1, 2)
        t1.join(10)
        t2.join(10)
        assert out["first"].error_code == Code.INVALID_FETCH_SESSION_EPOCH
        assert out["second"].error_code == 0 and set(answered(out["second"])) == {1}


def test_sessions_on_fetch_v13_key_partitions_by_topic_id(session_broker):
    with WireClient("127.0.0.1", session_broker.port) as c:
        md = c.request("Metadata", 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
        tid = md.topics[0].topic_id

        def fetch13(sid, epoch, parts, forgotten=()):
            return c.request("Fetch", 13, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 10_000_000,
                "isolation_level": 0, "session_id": sid, "session_epoch": epoch,
                "topics": [{"topic_id": tid, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": off,
                     "last_fetched_epoch": -1, "log_start_offset": -1,
                     "partition_max_bytes": 1_000_000} for p, off in parts.items()]}] if parts else [],
                "forgotten_topics_data": [{"topic_id": tid, "partitions": list(forgotten)}]
                if forgotten else [],
                "rack_id": ""})

        def got(r):
            return {(t.topic_id, p.partition_index): p.high_watermark
                    for t in r.responses for p in t.partitions}

        produce(c, 0, 3)
        r = fetch13(0, 0, {0: 0, 1: 0})
        sid = r.session_id
        assert sid and got(r) == {(tid, 0): 3, (tid, 1): 0}
        r = fetch13(sid, 1, {0: 3}, forgotten=[1])       # partition 1 forgotten by id
        assert r.error_code == 0 and got(r) == {}
        produce(c, 1, 1)
        produce(c, 0, 1)
        r = fetch13(sid, 2, {})
        assert got(r) == {(tid, 0): 4}
