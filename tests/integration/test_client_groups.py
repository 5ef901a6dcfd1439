"""strom's Consumer in consumer groups against a real broker process.

- One group, five members: three strom Consumers and two confluent-kafka (librdkafka)
  consumers with a common protocol (range, then cooperative-sticky). Every partition is
  owned by exactly one member (as each member's listener sees it and as DescribeGroups
  reports), every record is consumed exactly once across both client kinds, and the
  commits are visible with OffsetFetch (confluent's AdminClient) and in
  `kafka-consumer-groups --describe`, run as a subprocess. A strom member leaving
  hands its partitions to the others, again without a record read twice.
- A regex subscription picks up a newly created matching topic; with cooperative-sticky
  the listener sees exactly the partitions that are added or move, nothing else.
"""
from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clients.consumer import Consumer
from clients.types import TopicPartition

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

QUIET = {"log_level": 0}
GROUP_TIMING = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                "auto.commit.interval.ms": 500}


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    wait_until(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == partitions,
               20, f"metadata of {topic}")


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for i in range(start, start + n):
        p.produce(topic, key=b"key-%d" % i, value=b"%d" % i)
    assert p.flush(30) == 0


class Member(threading.Thread):
    """A consumer polling in a thread of its own; `assigned` is what its listener says it
    owns, `records` what it consumed as (member, partition, offset, value)."""

    kind = ""

    def __init__(self, name: str, sink: list, errors: list):
        super().__init__(name=name, daemon=True)
        self.sink = sink
        self.errors = errors
        self.assigned: set[tuple[str, int]] = set()
        self.stopping = threading.Event()
        self.joined = threading.Event()

    def consumed_by(self) -> list:
        return [r for r in self.sink if r[0] == self.name]


class StromMember(Member):
    kind = "strom"

    def __init__(self, name, bootstrap, group, topic, strategy, sink, errors):
        super().__init__(name, sink, errors)
        self.args = (bootstrap, group, topic, strategy)

    # The rebalance listener (runs in this thread, inside poll()).
    def on_partitions_assigned(self, tps):
        self.assigned |= {(tp.topic, tp.partition) for tp in tps}

    def on_partitions_revoked(self, tps):
        self.assigned -= {(tp.topic, tp.partition) for tp in tps}

    on_partitions_lost = on_partitions_revoked

    def run(self):
        bootstrap, group, topic, strategy = self.args
        try:
            c = Consumer(config={"bootstrap.servers": bootstrap, "group.id": group, "client.id": self.name,
                                 "partition.assignment.strategy": strategy,
                                 "auto.offset.reset": "earliest", **GROUP_TIMING})
            try:
                c.subscribe([topic], listener=self)
                self.joined.set()
                while not self.stopping.is_set():
                    for r in c.poll(0.2):
                        self.sink.append((self.name, r.partition, r.offset, r.value))
            finally:
                c.close()
        except Exception as e:      # reported by the test
            self.errors.append((self.name, e))


class ConfluentMember(Member):
    kind = "confluent"

    def __init__(self, name, bootstrap, group, topic, strategy, sink, errors):
        super().__init__(name, sink, errors)
        self.args = (bootstrap, group, topic, strategy)

    def run(self):
        bootstrap, group, topic, strategy = self.args
        cooperative = strategy == "cooperative-sticky"

        def on_assign(consumer, partitions):
            self.assigned |= {(p.topic, p.partition) for p in partitions}

        def on_revoke(consumer, partitions):
            self.assigned -= {(p.topic, p.partition) for p in partitions}
            if not cooperative:
                self.assigned.clear()
        try:
            c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": self.name,
                            "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                            "enable.auto.commit": True, **GROUP_TIMING, **QUIET})
            try:
                c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
                self.joined.set()
                while not self.stopping.is_set():
                    m = c.poll(0.2)
                    if m is not None and m.error() is None:
                        self.sink.append((self.name, m.partition(), m.offset(), m.value()))
            finally:
                c.close()
        except Exception as e:
            self.errors.append((self.name, e))


def settled(admin: AdminClient, group: str, members: list[Member], topic: str, partitions: int):
    """Stable with exactly `members`, each member's listener agreeing with the coordinator,
    the partitions split with no overlap and none missing: the assignment by client id."""
    owned = [p for m in members for (t, p) in m.assigned if t == topic]
    if sorted(owned) != list(range(partitions)):
        return None
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    if desc.state != ConsumerGroupState.STABLE or len(desc.members) != len(members):
        return None
    by_client = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in desc.members}
    mine = {m.name: {p for (t, p) in m.assigned} for m in members}
    return mine if by_client == mine else None


def committed_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    req = [ConsumerGroupTopicPartitions(group, [CKTopicPartition(topic, p) for p in range(partitions)])]
    res = admin.list_consumer_group_offsets(req, request_timeout=10)[group].result(15)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def describe_with_cli(bootstrap: str, group: str) -> list[dict[str, str]]:
    """`kafka-consumer-groups --describe` run as a user runs it: its rows as dicts."""
    out = subprocess.run([str(REPO / "bin" / "kafka-consumer-groups.sh"), "--bootstrap-server",
                          bootstrap, "--describe", "--group", group],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [ln.split() for ln in out.stdout.splitlines() if ln.strip()]
    header = lines[0]
    assert header[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                          "LAG"], out.stdout
    return [dict(zip(header, ln)) for ln in lines[1:]]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "offsets-probe", **QUIET})
    try:
        return {p: c.get_watermark_offsets(CKTopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def group_history(broker, group: str, caplog) -> str:
    """The rebalances of `group` as the broker logged them, and what each strom member was
    assigned in each generation: for a failure's message (a split that only happens now and
    then is understood from these, not rerun)."""
    text = broker.log_path.read_text(errors="replace")
    broker_lines = [ln for ln in text.splitlines() if f"group {group}:" in ln][-15:]
    strom_lines = [f"{r.threadName}: {r.getMessage()}" for r in caplog.records
                   if r.name == "strom.client.group" and group in r.getMessage()][-15:]
    return "\n".join(["broker:", *broker_lines, "strom members:", *strom_lines])


@pytest.mark.parametrize("first", ["strom", "confluent"])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_strom_and_confluent_members_share_one_group(broker, strategy, first, caplog):
    """`first`: which kind joins first and so leads the group (computes the assignment
    from everyone's subscriptions, the other kind then decodes it)."""
    caplog.set_level(logging.INFO, logger="strom.client.group")
    topic, group, P = f"mixed-{strategy}-{first}", f"mixed-{strategy}-{first}-g", 10
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    create_topic(admin, topic, P)
    sink: list = []
    errors: list = []
    strom = [StromMember(f"strom-{i}", broker.bootstrap, group, topic, strategy, sink, errors) for i in range(3)]
    confluent = [ConfluentMember(f"confluent-{i}", broker.bootstrap, group, topic, strategy, sink, errors)
                 for i in range(2)]
    members: list[Member] = strom + confluent
    try:
        leaders = strom if first == "strom" else confluent
        leaders[0].start()
        wait_until(lambda: errors or leaders[0].assigned, 30, f"{leaders[0].name} alone in the group")
        for m in members:
            if m is not leaders[0]:
                m.start()
        split = wait_until(lambda: errors or settled(admin, group, members, topic, P), 60,
                           "5 members Stable, sharing all partitions")
        assert not errors, errors
        # 10 partitions, 5 members: 2 each (the message whole: pytest cuts a dict's repr short)
        assert all(split[m.name] for m in members), (
            f"a member without partitions: {sorted(split.items())}\n"
            f"{group_history(broker, group, caplog)}")
        assert Counter(len(v) for v in split.values()) == Counter({2: 5})

        produce(broker.bootstrap, topic, 0, 5000)
        wait_until(lambda: errors or len(sink) >= 5000, 60, "5000 records consumed")
        assert not errors, errors
        keys = Counter((p, o) for _, p, o, _ in sink)
        assert len(sink) == 5000 and max(keys.values()) == 1, "a record was consumed twice"
        assert sorted(int(v) for *_, v in sink) == list(range(5000))
        for m in members:                  # both client kinds did their share
            assert m.consumed_by(), f"{m.name} consumed nothing"
        ends = end_offsets(broker.bootstrap, topic, P)
        wait_until(lambda: committed_offsets(admin, group, topic, P) == ends, 30,
                   "commits of every member at the log end")
        # The same commits, and who owns what, as an operator sees them. A cooperative
        # group may take one more rebalance round meanwhile (a member without partitions
        # is a "-" row, as in Kafka): compare with the assignment settled at that moment.
        def cli_view():
            rows = [r for r in describe_with_cli(broker.bootstrap, group) if r["PARTITION"] != "-"]
            now = settled(admin, group, members, topic, P)
            if now is None or sorted(int(r["PARTITION"]) for r in rows) != list(range(P)):
                return None
            return rows, now
        rows, owners = wait_until(cli_view, 60, "kafka-consumer-groups --describe of a Stable group")
        for r in rows:
            p = int(r["PARTITION"])
            assert (r["TOPIC"], int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), r["LAG"]) \
                == (topic, ends[p], ends[p], "0"), r
            assert p in owners[r["CLIENT-ID"]], r   # the owner the member itself saw
            assert r["CONSUMER-ID"].startswith(r["CLIENT-ID"] + "-"), r

        # A strom member leaves: the others take over its partitions.
        leaver = strom[0]
        leaver.stopping.set()
        leaver.join(30)
        assert not leaver.is_alive()
        rest = [m for m in members if m is not leaver]
        split = wait_until(lambda: errors or settled(admin, group, rest, topic, P), 60,
                           "4 members Stable after one left")
        assert not errors, errors
        produce(broker.bootstrap, topic, 5000, 2000)
        wait_until(lambda: errors or len(sink) >= 7000, 60, "7000 records consumed")
        time.sleep(1.0)                    # let any duplicate show up
        assert not errors, errors
        keys = Counter((p, o) for _, p, o, _ in sink)
        assert len(sink) == 7000 and max(keys.values()) == 1, "a record was consumed twice"
        left_behind = {p for p in range(P) if p not in set().union(*split.values())}
        assert not left_behind
        assert not [r for r in sink[5000:] if r[0] == leaver.name]
        ends = end_offsets(broker.bootstrap, topic, P)
        wait_until(lambda: committed_offsets(admin, group, topic, P) == ends, 30, "final commits")
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)
    assert not errors, errors


class Recorder:
    """A listener that logs every callback with its partitions."""

    def __init__(self):
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_assigned(self, tps):
        # Called after every rebalance (Kafka's rule), also with nothing new: not logged.
        if tps:
            self.events.append(("assigned", set(tps)))

    def on_partitions_revoked(self, tps):
        self.events.append(("revoked", set(tps)))

    def on_partitions_lost(self, tps):
        self.events.append(("lost", set(tps)))

    def owned(self) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for kind, tps in self.events:
            out = out | tps if kind == "assigned" else out - tps
        return out


def test_regex_subscription_and_cooperative_listener(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    create_topic(admin, "rx-one", 2)
    create_topic(admin, "other", 1)
    conf = dict(bootstrap_servers=broker.bootstrap, group_id="rx-g", auto_offset_reset="earliest",
                partition_assignment_strategy="cooperative-sticky", metadata_max_age_ms=500,
                session_timeout_ms=6000, heartbeat_interval_ms=500)
    one = [TopicPartition("rx-one", p) for p in range(2)]
    two = [TopicPartition("rx-two", p) for p in range(2)]
    la, lb = Recorder(), Recorder()
    a = Consumer(**conf)
    b = None
    try:
        a.subscribe(pattern=r"rx-.*", listener=la)
        wait_until(lambda: a.poll(0.1) == [] and la.owned() == set(one), 30, "a owns rx-one")
        assert la.events == [("assigned", set(one))]
        assert a.subscription() == {"rx-one"}

        # A new matching topic is picked up on a metadata refresh; cooperative: only the
        # added partitions are announced, nothing is revoked.
        create_topic(admin, "rx-two", 2)
        produce(broker.bootstrap, "rx-two", 0, 50)
        got: list = []
        wait_until(lambda: got.extend(a.poll(0.2)) or len(got) >= 50, 30, "records of rx-two")
        assert {r.topic for r in got} == {"rx-two"} and len(got) == 50
        assert la.events == [("assigned", set(one)), ("assigned", set(two))]
        assert a.subscription() == {"rx-one", "rx-two"} and a.assignment() == set(one + two)

        # A second member: a revokes exactly the partitions that move to b, keeps the rest.
        b = Consumer(**conf)
        b.subscribe(pattern=r"rx-.*", listener=lb)

        def balanced():
            a.poll(0.1)
            b.poll(0.1)
            return len(la.owned()) == 2 and len(lb.owned()) == 2 or None
        wait_until(balanced, 40, "rx partitions split 2 + 2")
        moved = set().union(*(tps for kind, tps in la.events[2:] if kind == "revoked"))
        assert moved == lb.owned(), (la.events, lb.events)
        assert la.owned() | lb.owned() == set(one + two) and not la.owned() & lb.owned()
        assert all(kind != "lost" for kind, _ in la.events + lb.events)
        # b's partitions arrived in one step, after a had revoked them.
        assert lb.events == [("assigned", moved)]
        assert a.assignment() == la.owned() and b.assignment() == lb.owned()
    finally:
        a.close()
        if b is not None:
            b.close()


class Failing(Recorder):
    """Raises from the first assigned and every revoked callback (after recording it)."""

    def __init__(self):
        super().__init__()
        self.failed_assign = False

    def on_partitions_assigned(self, tps):
        super().on_partitions_assigned(tps)
        if tps and not self.failed_assign:
            self.failed_assign = True
            raise ValueError("boom in assigned")

    def on_partitions_revoked(self, tps):
        super().on_partitions_revoked(tps)
        raise KeyError("boom in revoked")


def test_listener_exceptions_reach_the_caller_after_the_rebalance(broker):
    """As Kafka's Java consumer (KAFKA-4600): the rebalance completes, then poll() (or
    close()) raises what the listener raised; nothing is consumed twice or lost."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    create_topic(admin, "lst", 2)
    produce(broker.bootstrap, "lst", 0, 40)
    listener = Failing()
    c = Consumer(bootstrap_servers=broker.bootstrap, group_id="lst-g", auto_offset_reset="earliest",
                 session_timeout_ms=6000, heartbeat_interval_ms=500)
    closed = False
    try:
        c.subscribe(["lst"], listener=listener)
        got: list = []

        def poll_until_raised():
            try:
                got.extend(c.poll(0.2))
            except ValueError as e:
                return e
            return None
        err = wait_until(poll_until_raised, 30, "the listener's exception from poll()")
        assert err.args == ("boom in assigned",)
        # The assignment stands: the next polls consume everything, once.
        all_tps = {TopicPartition("lst", p) for p in range(2)}
        assert c.assignment() == all_tps == listener.owned()
        wait_until(lambda: got.extend(c.poll(0.2)) or len(got) >= 40, 30, "all 40 records")
        assert sorted(int(r.value) for r in got) == list(range(40))
        c.commit()
        with pytest.raises(KeyError, match="boom in revoked"):
            c.close()
        closed = True
        assert listener.events[-1] == ("revoked", all_tps)
        # close() still left the group and committed before raising.
        group = admin.describe_consumer_groups(["lst-g"])["lst-g"].result(30)
        assert group.state == ConsumerGroupState.EMPTY
        assert committed_offsets(admin, "lst-g", "lst", 2) == end_offsets(broker.bootstrap, "lst", 2)
    finally:
        if not closed:
            try:
                c.close()
            except KeyError:
                pass
