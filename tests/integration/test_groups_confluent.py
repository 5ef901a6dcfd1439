"""Consumer groups with confluent-kafka (librdkafka, classic protocol) against a real broker
process: members in separate OS processes, kill -9 of a member, committed offsets and
metadata across a broker restart, static membership, cooperative-sticky, group admin APIs.

Members run tests/support/groups_consumer.py; see tests/support/groups_harness.py."""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import (ConsumerGroupState, ConsumerGroupTopicPartitions, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.groups_harness import ConsumerProc, assignments_settled, wait_until

pytestmark = pytest.mark.integration

QUIET = {"log_level": 0}          # librdkafka logs nothing (clients may outlive a broker)
SESSION_S = 6.0                   # session.timeout.ms of the members (= group.min.session.timeout.ms)


# ====================================================================== helpers
def admin_for(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    wait_until(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == partitions,
               10, f"metadata of {topic}")


def produce(bootstrap: str, topic: str, values: list[tuple[int, str]]) -> None:
    """Records (partition, value) with explicit partitions; waits for every ack."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for part, value in values:
        p.produce(topic, value=value.encode(), partition=part,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def describe(admin: AdminClient, group: str):
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def broker_assignment(desc) -> dict[str, set[int]]:
    """client.id -> partitions, as the coordinator has them."""
    return {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in desc.members}


def committed(admin: AdminClient, group: str, topic: str, partitions) -> dict[int, TopicPartition]:
    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])]
    res = admin.list_consumer_group_offsets(req, request_timeout=10)[group].result(15)
    return {tp.partition: tp for tp in res.topic_partitions}


def stable_with(admin: AdminClient, group: str, members: list[ConsumerProc], partitions: int):
    """The group is Stable with exactly these members, each member's callbacks agree with the
    coordinator, and the partitions are split among them with no overlap: the assignment."""
    files = assignments_settled(members, partitions)
    if files is None:
        return None
    desc = describe(admin, group)
    if desc.state != ConsumerGroupState.STABLE or len(desc.members) != len(members):
        return None
    if broker_assignment(desc) != files:
        return None
    return files


def cleanup(members: list[ConsumerProc]) -> None:
    for m in members:
        m.ensure_dead()


# ====================================================================== 1. processes + kill -9
def test_four_member_processes_survive_kill9_of_one(broker, tmp_path):
    topic, group, P, N = "grp-kill9", "grp-kill9-g", 8, 20_000
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    members = [ConsumerProc(tmp_path / "m", f"c{i}", broker.bootstrap, group, topic,
                            commit_every=500, commit_interval=1.0) for i in range(4)]
    victim = members[1]
    survivors = [m for m in members if m is not victim]
    try:
        for m in members:
            m.start()
        first = wait_until(lambda: stable_with(admin, group, members, P), 40, "4 members Stable")
        assert all(len(a) == 2 for a in first.values()), first       # 8 partitions over 4 members

        # Produce 20,000 keyed records (~2,000/s) while the group consumes.
        produced: dict[tuple[int, int], str] = {}
        errors: list = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                produced[(msg.partition(), msg.offset())] = msg.value().decode()

        def producer_thread():
            p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
            for i in range(N):
                p.produce(topic, key=f"key-{i}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
                if i % 200 == 199:
                    p.poll(0)
                    time.sleep(0.1)
            assert p.flush(30) == 0

        t = threading.Thread(target=producer_thread, daemon=True)
        t.start()

        # kill -9 one member mid-stream, once it has processed a fair share.
        wait_until(lambda: len(produced) >= 6000 and victim.record_count() >= 600, 30,
                   "the victim to process records")
        victim.kill9()
        t_kill = time.time()
        victim_parts = victim.assignment()
        assert victim_parts == first["c1"]
        time.sleep(0.2)     # a commit the victim had fully sent is applied before we read offsets
        at_kill = {p: tp.offset for p, tp in committed(admin, group, topic, victim_parts).items()}
        resume = {p: max(o, 0) for p, o in at_kill.items()}           # no commit: earliest
        victim_commits = [e for e in victim.events() if e["ev"] == "commit"]
        for e in victim_commits:      # what the victim saw committed never exceeds the broker's
            for p, o in e["offsets"].items():
                assert o <= resume[int(p)]

        # Its partitions move to the survivors within the session timeout (+ a margin).
        def moved():
            when = {}
            for m in survivors:
                for e in m.events():
                    if e["ev"] == "assign" and e["t"] > t_kill:
                        for p in set(e["parts"]) & victim_parts:
                            when.setdefault(p, e["t"])
            return when if set(when) == victim_parts else None

        when = wait_until(moved, SESSION_S + 10, "the victim's partitions to move")
        move_s = max(when.values()) - t_kill
        print(f"\npartitions {sorted(victim_parts)} moved {move_s:.2f}s after kill -9 "
              f"(session.timeout.ms={SESSION_S * 1000:.0f}); committed at kill: {at_kill}")
        assert move_s <= SESSION_S + 3.0, move_s
        after = wait_until(lambda: stable_with(admin, group, survivors, P), 20, "3 survivors Stable")
        assert sorted(len(a) for a in after.values()) == [2, 3, 3]

        t.join(60)
        assert not t.is_alive() and errors == [] and len(produced) == N

        def all_processed():
            seen = set()
            for m in members:
                seen.update((p, o) for p, o, _ in m.records())
            return seen >= produced.keys()

        wait_until(all_processed, 60, "every record to be processed", interval=0.5)
        for m in survivors:
            m.stop()

        # No loss, values intact, at least once.
        counts: Counter = Counter()
        for m in members:
            own = Counter()
            for p, o, v in m.records():
                assert produced.get((p, o)) == v, (m.name, p, o, v)
                counts[(p, o)] += 1
                own[(p, o)] += 1
            assert max(own.values(), default=1) == 1, f"{m.name} processed a record twice"
        assert set(counts) == set(produced)

        # Every duplicate is the victim's uncommitted tail: exactly the records it processed
        # at or past its partitions' committed offsets, which the new owners processed again.
        dups = {k for k, c in counts.items() if c > 1}
        victim_records = victim.records()
        tail = {(p, o) for p, o, _ in victim_records if o >= resume[p]}
        assert max(counts.values()) <= 2
        assert dups == tail, (sorted(dups - tail)[:10], sorted(tail - dups)[:10])
        for p in victim_parts:     # the new owners started exactly at the committed offset
            offsets = sorted(o for m in survivors for pp, o, _ in m.records() if pp == p)
            if offsets:
                assert offsets[0] == resume[p], (p, offsets[0], resume[p])
        failed = [e for m in survivors for e in m.events() if e["ev"] == "commit_failed"]
        assert failed == []
        print(f"victim processed {len(victim_records)} records, {len(dups)} reprocessed "
              f"(its uncommitted tail); {len(produced)} produced, none lost")
    finally:
        cleanup(members)


# ====================================================================== 2. commits across a restart
@pytest.mark.parametrize("how", ["stop", "kill9"])
def test_committed_offsets_and_metadata_survive_broker_restart(broker, how):
    topic, group, P = f"grp-restart-{how}", f"grp-restart-{how}-g", 3
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    produce(broker.bootstrap, topic, [(p, f"p{p}-{i}") for p in range(P) for i in range(50)])
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            **QUIET}
    target = {p: 10 + 7 * p for p in range(P)}
    meta = {p: f"checkpoint p{p} \u00fc\u2713 #{10 + 7 * p}" for p in range(P)}

    # Two members consume, then each commits its own partitions with metadata.
    consumers = [Consumer(dict(conf, **{"client.id": f"r{i}"})) for i in range(2)]
    owned: dict[int, set[int]] = {0: set(), 1: set()}
    seen: dict[int, set[int]] = {0: set(), 1: set()}

    def callbacks(i: int):
        def on_assign(consumer, parts):
            owned[i] = {tp.partition for tp in parts}

        def on_revoke(consumer, parts):
            owned[i] = set()
        return on_assign, on_revoke

    for i, c in enumerate(consumers):
        on_assign, on_revoke = callbacks(i)
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def both_consuming():
        for i, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen[i].add(m.partition())
        return (owned[0] and owned[1] and not owned[0] & owned[1] and owned[0] | owned[1] == set(range(P))
                and all(owned[i] <= seen[i] for i in range(2)))

    wait_until(both_consuming, 40, "two members consuming", interval=0)
    for i, c in enumerate(consumers):
        res = c.commit(offsets=[TopicPartition(topic, p, target[p], metadata=meta[p]) for p in sorted(owned[i])],
                       asynchronous=False)
        assert all(tp.error is None for tp in res)
    got = consumers[0].committed([TopicPartition(topic, p) for p in range(P)], timeout=10)
    assert {tp.partition: (tp.offset, tp.metadata) for tp in got} == {p: (target[p], meta[p]) for p in range(P)}
    for c in consumers:
        c.close()
    wait_until(lambda: describe(admin, group).state == ConsumerGroupState.EMPTY, 10, "group Empty")

    if how == "stop":
        broker.stop()
    else:
        broker.kill9()          # an acknowledged commit must survive a crash too
    broker.start()

    admin = admin_for(broker)
    c = Consumer(dict(conf, **{"client.id": "r-after"}))
    first: dict[int, int] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 40
        while len(first) < P and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                first.setdefault(m.partition(), m.offset())
        assert first == target            # resumes exactly at the committed offsets
        got = c.committed([TopicPartition(topic, p) for p in range(P)], timeout=10)
        assert {tp.partition: (tp.offset, tp.metadata) for tp in got} == {p: (target[p], meta[p]) for p in range(P)}
        via_admin = committed(admin, group, topic, range(P))
        assert {p: (tp.offset, tp.metadata) for p, tp in via_admin.items()} == \
            {p: (target[p], meta[p]) for p in range(P)}
    finally:
        c.close()


# ====================================================================== 3. static membership
def rebalances_logged(broker, group: str) -> int:
    return broker.output().count(f"group {group}: preparing to rebalance")


def static_member(tmp_path: Path, broker, group: str, topic: str, i: int, session_ms: int) -> ConsumerProc:
    return ConsumerProc(tmp_path / "m", f"s{i}", broker.bootstrap, group, topic,
                        conf={"group.instance.id": f"{group}-s{i}", "session.timeout.ms": session_ms})


def start_static_group(admin, tmp_path, broker, group, topic, P, session_ms) -> tuple[list[ConsumerProc], dict]:
    members = [static_member(tmp_path, broker, group, topic, i, session_ms) for i in range(3)]
    members[0].start()           # s0 joins first: it is the leader, and stays the leader
    wait_until(lambda: members[0].assignment(), 30, "s0's first assignment")
    for m in members[1:]:
        m.start()
    before = wait_until(lambda: stable_with(admin, group, members, P), 40, "3 static members Stable")
    desc = describe(admin, group)
    assert {m.group_instance_id for m in desc.members} == {f"{group}-s{i}" for i in range(3)}
    return members, before


def test_static_member_restart_within_session_timeout_does_not_rebalance(broker, tmp_path):
    """Close a static member (no LeaveGroup) and start it again with the same
    group.instance.id within session.timeout.ms: no rebalance, same partitions. Done for the
    leader (KIP-345/KIP-814: its JoinGroup must not make it reassign) and for a follower."""
    topic, group, P = "grp-static", "grp-static-g", 6
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    members, before = start_static_group(admin, tmp_path, broker, group, topic, P, 10000)
    try:
        for idx, role in ((0, "leader"), (2, "follower")):
            desc = describe(admin, group)
            ids = {m.client_id: m.member_id for m in desc.members}
            others = [m for m in members if m is not members[idx]]
            counts = {m.name: len(m.rebalance_events()) for m in others}
            logged = rebalances_logged(broker, group)
            name = members[idx].name

            # Close it without leaving (librdkafka static members send no LeaveGroup) ...
            members[idx].stop()
            t_closed = time.monotonic()
            desc = describe(admin, group)
            assert desc.state == ConsumerGroupState.STABLE
            assert {m.client_id: m.member_id for m in desc.members} == ids, f"static {role} left on close"

            # ... and bring it back with the same group.instance.id well within the session timeout.
            members[idx] = static_member(tmp_path, broker, group, topic, idx, 10000)
            members[idx].start()
            got = wait_until(lambda: members[idx].assignment(), 20, f"the restarted {role}'s assignment")
            back_s = time.monotonic() - t_closed
            assert back_s < 10.0, back_s
            assert got == before[name]               # its previous partitions

            # No rebalance: the others get 6 heartbeats to hear of one; they never do.
            quiet_until = time.monotonic() + 3.0
            while time.monotonic() < quiet_until:
                assert {m.name: len(m.rebalance_events()) for m in others} == counts, \
                    [m.rebalance_events()[counts[m.name]:] for m in others]
                time.sleep(0.1)
            assert rebalances_logged(broker, group) == logged
            desc = describe(admin, group)
            assert desc.state == ConsumerGroupState.STABLE
            now_ids = {m.client_id: m.member_id for m in desc.members}
            assert {k: v for k, v in now_ids.items() if k != name} == {k: v for k, v in ids.items() if k != name}
            assert now_ids[name] != ids[name]            # a new incarnation took the instance's place
            assert broker_assignment(desc) == before
            print(f"\nstatic {role} back with {sorted(got)} {back_s:.2f}s after close, no rebalance")
    finally:
        cleanup(members)


@pytest.mark.alone
def test_static_member_gone_past_session_timeout_is_replaced(broker, tmp_path):
    """A static member that does not come back is removed when its session expires, and
    its partitions go to the others."""
    topic, group, P = "grp-static-gone", "grp-static-gone-g", 6
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    members, before = start_static_group(admin, tmp_path, broker, group, topic, P, 6000)
    try:
        gone = members[1]
        gone.stop()
        t_closed = time.time()
        assert len(describe(admin, group).members) == 3          # still a member: no LeaveGroup
        after = wait_until(lambda: stable_with(admin, group, [members[0], members[2]], P),
                           SESSION_S + 10, "the others to take over")
        took = max(e["t"] for m in (members[0], members[2]) for e in m.rebalance_events()) - t_closed
        print(f"\nstatic member's partitions {sorted(before['s1'])} reassigned {took:.2f}s after it closed")
        assert SESSION_S - 0.5 <= took <= SESSION_S + 3.0, took
        assert after["s0"] | after["s2"] == set(range(P))
    finally:
        cleanup(members)


# ====================================================================== 4. cooperative-sticky
def test_cooperative_sticky_revokes_only_what_moves(broker, tmp_path):
    topic, group, P = "grp-coop", "grp-coop-g", 6
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [ConsumerProc(tmp_path / "m", f"k{i}", broker.bootstrap, group, topic, conf=conf)
               for i in range(3)]
    try:
        for m in members[:2]:
            m.start()
        before = wait_until(lambda: stable_with(admin, group, members[:2], P), 40, "2 members Stable")
        assert sorted(len(a) for a in before.values()) == [3, 3]
        marks = {m.name: len(m.rebalance_events()) for m in members[:2]}

        members[2].start()
        after = wait_until(lambda: stable_with(admin, group, members, P) if members[2].assignment() else None,
                           40, "3 members Stable")
        assert sorted(len(a) for a in after.values()) == [2, 2, 2]
        new = after["k2"]
        revoked: set[int] = set()
        for m in members[:2]:
            evs = m.rebalance_events()[marks[m.name]:]
            assert not [e for e in evs if e["ev"] == "lost"]
            mine = set()
            for e in evs:
                if e["ev"] == "revoke":
                    mine |= set(e["parts"])
                    assert set(e["parts"]) < before[m.name], ("full revoke", m.name, e)
                if e["ev"] == "assign":
                    assert e["parts"] == [], ("unexpected assignment", m.name, e)
            assert after[m.name] == before[m.name] - mine     # kept everything else throughout
            revoked |= mine
        assert revoked == new, (revoked, new)
        print(f"\ncooperative: revoked {sorted(revoked)} moved to the new member; nothing else revoked")
    finally:
        cleanup(members)


# ====================================================================== 5. admin APIs
def test_group_admin_describe_list_delete_offsets(broker, tmp_path):
    topic, group, P = "grp-admin", "grp-admin-g", 3
    admin = admin_for(broker)
    create_topic(admin, topic, P)
    produce(broker.bootstrap, topic, [(p, f"p{p}-{i}") for p in range(P) for i in range(10)])
    members = [ConsumerProc(tmp_path / "m", f"a{i}", broker.bootstrap, group, topic, commit_every=1)
               for i in range(2)]
    try:
        for m in members:
            m.start()
        files = wait_until(lambda: stable_with(admin, group, members, P), 40, "2 members Stable")
        wait_until(lambda: all(tp.offset == 10 for tp in committed(admin, group, topic, range(P)).values()),
                   20, "every record committed")

        desc = describe(admin, group)
        assert desc.state == ConsumerGroupState.STABLE and not desc.is_simple_consumer_group
        assert sorted(m.client_id for m in desc.members) == ["a0", "a1"]
        assert all(m.member_id.startswith(m.client_id) and m.host for m in desc.members)
        assert desc.partition_assignor in ("range", "roundrobin")
        assert broker_assignment(desc) == files

        listed = admin.list_consumer_groups(request_timeout=10).result(15)
        assert listed.errors == []
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].state == ConsumerGroupState.STABLE
        assert not mine[0].is_simple_consumer_group
        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
        assert group in [g.group_id for g in stable.valid]
        empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15)
        assert group not in [g.group_id for g in empty.valid]

        with pytest.raises(KafkaException) as e:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)
        assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

        # An active group takes no offsets from outside its members (Kafka: UNKNOWN_MEMBER_ID,
        # see test_admin_offset_commit_to_active_group_fails_with_unknown_member_id).
        res = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])])[group].result(15)
        assert [tp.error is not None for tp in res.topic_partitions] == [True]
        assert {p: tp.offset for p, tp in committed(admin, group, topic, range(P)).items()} == {0: 10, 1: 10, 2: 10}

        for m in members:
            m.stop()
        desc = wait_until(lambda: (d := describe(admin, group)).state == ConsumerGroupState.EMPTY and d,
                          10, "group Empty")
        assert desc.members == []
        assert {p: tp.offset for p, tp in committed(admin, group, topic, range(P)).items()} == {0: 10, 1: 10, 2: 10}

        res = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 2, 7)])]
        )[group].result(15)
        assert all(tp.error is None for tp in res.topic_partitions)
        assert {p: tp.offset for p, tp in committed(admin, group, topic, range(P)).items()} == {0: 3, 1: 10, 2: 7}
        everything = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
        assert {(tp.topic, tp.partition, tp.offset) for tp in everything.topic_partitions} == \
            {(topic, 0, 3), (topic, 1, 10), (topic, 2, 7)}

        assert admin.delete_consumer_groups([group], request_timeout=10)[group].result(15) is None
        listed = admin.list_consumer_groups(request_timeout=10).result(15)
        assert group not in [g.group_id for g in listed.valid]
        assert all(tp.offset < 0 for tp in committed(admin, group, topic, range(P)).values())
        with pytest.raises(KafkaException) as e:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)
        assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        cleanup(members)


def test_admin_offset_commit_to_active_group_fails_with_unknown_member_id(broker):
    """Kafka (GroupCoordinator.validateOffsetCommit): an OffsetCommit without member id and
    generation (the admin client's alter_consumer_group_offsets) to a non-empty group fails
    with UNKNOWN_MEMBER_ID ("when the group is non-empty, only members can commit offsets")."""
    topic, group = "grp-admin-commit", "grp-admin-commit-g"
    admin = admin_for(broker)
    create_topic(admin, topic, 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, **QUIET})
    assigned = []
    try:
        c.subscribe([topic], on_assign=lambda c, ps: assigned.extend(ps))
        wait_until(lambda: c.poll(0.05) is None and assigned, 30, "the member's assignment", interval=0)
        res = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3)])])[group].result(15)
        [tp] = res.topic_partitions
        assert tp.error is not None and tp.error.code() == KafkaError.UNKNOWN_MEMBER_ID, tp.error
    finally:
        c.close()
