"""The kill -9 scenario of test_groups_kafka_python / test_groups_aiokafka: four member
processes of one client library share an 8-partition topic; one is killed with SIGKILL
while records are flowing; its partitions must move to the others after the session timeout
with nothing lost, and the only duplicates must be its uncommitted tail."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support.groups2_harness import (Member, MemberLog, check_all_seen, check_exclusive_ownership,
                                           current_assignment, seen_by_member, stderr_problems, uncommitted_tail,
                                           wait_for)

PARTITIONS = 8
MEMBERS = 4
N = 20_000
CHUNK = 500
CHUNK_PAUSE_S = 0.15        # 40 chunks: records flow for ~6 s, before and after the kill
KILL_AFTER = 1_500          # records the victim has processed (at least) when it is killed
SESSION_MS = 6_000
HEARTBEAT_MS = 1_000
COMMIT_EVERY = 1_000        # records between a member's synchronous commits ...
COMMIT_IDLE_S = 3.0         # ... or this long idle: the victim dies with an uncommitted tail


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="groups2-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                            timeout_ms=30_000)
    finally:
        admin.close()


def value_of(i: int) -> str:
    return f"v-{i}"


@dataclass
class Result:
    move_s: float               # kill -9 -> the last of the victim's partitions assigned elsewhere
    rebalance_start_s: float    # kill -9 -> the first survivor's revoke (the session expired)
    victim_partitions: list[int]
    victim_records: int
    tail_at_kill: int           # the victim's records after its last acknowledged commit
    duplicates: int
    duplicates_by_partition: dict[int, int]
    initial_assignment: dict[str, list[int]]
    final_assignment: dict[str, list[int]]


def run_kill9_scenario(bootstrap: str, workdir: Path, client: str, tag: str, kill_leader: bool) -> Result:
    """Member 0 joins first and alone, so it is the group leader (the coordinator keeps a
    leader that rejoins); the victim is member 0 if kill_leader, else member 1."""
    topic, group = f"groups2-{tag}", f"groups2-{tag}-group"
    create_topic(bootstrap, topic, PARTITIONS)
    members = [Member(workdir, f"{tag}-m{i}", client, bootstrap, topic, group,
                      session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS, commit_every=COMMIT_EVERY,
                      commit_idle_s=COMMIT_IDLE_S) for i in range(MEMBERS)]
    producer = None
    try:
        def stable(ms):
            for m in ms:
                assert m.alive(), f"{m.name} exited:\n{m.stderr()}"
            return current_assignment(ms, PARTITIONS)

        members[0].start()
        wait_for(lambda: stable(members[:1]), 30, "the first member to own every partition")
        for m in members[1:]:
            m.start()
        initial = wait_for(lambda: stable(members), 40, "4 members to share the 8 partitions")
        # Each member holds 2: the default assignors spread 8 partitions over 4 members evenly.
        assert sorted(len(s) for s in initial.values()) == [2] * MEMBERS, initial

        victim = members[0] if kill_leader else members[1]
        survivors = [m for m in members if m is not victim]
        # kill -9 the victim from a watcher thread while records flow, at a moment when it
        # has processed KILL_AFTER records and some of them are not committed yet.
        kill: dict = {}
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                n, tail = uncommitted_tail(victim.log_path)
                if n >= KILL_AFTER and tail > 0:
                    kill["parts"] = victim.log().owned
                    kill["at"] = victim.kill9()
                    kill["tail"] = tail
                    return
                time.sleep(0.01)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        futures = []
        for start in range(0, N, CHUNK):
            for i in range(start, start + CHUNK):
                futures.append(producer.send(topic, key=b"k-%d" % (i % 1000), value=value_of(i).encode()))
            producer.flush(30)
            time.sleep(CHUNK_PAUSE_S)
        done.set()
        watcher.join(10)
        if "at" not in kill:        # no uncommitted moment was caught: kill it as it is
            kill["parts"] = victim.log().owned
            kill["at"] = victim.kill9()
            kill["tail"] = uncommitted_tail(victim.log_path)[1]
        killed_at, victim_parts = kill["at"], kill["parts"]
        produced = {}
        for i, f in enumerate(futures):
            md = f.get(timeout=0)
            produced[(md.partition, md.offset)] = value_of(i)
        assert victim_parts == initial[victim.name], (victim_parts, initial)

        # The victim's partitions move to the survivors once its session expires.
        def moved():
            for m in survivors:
                assert m.alive(), f"{m.name} exited:\n{m.stderr()}"
            logs = {m.name: m.log() for m in survivors}
            got: dict[int, float] = {}
            for name, log in logs.items():
                for e in log.of("assign"):
                    if e.ts > killed_at:
                        for p in e.parts() & victim_parts:
                            got.setdefault(p, e.ts)
            return got if set(got) == victim_parts else None

        got = wait_for(moved, SESSION_MS / 1000 + 20, "the victim's partitions to move")
        move_s = max(got.values()) - killed_at
        final = wait_for(lambda: stable(survivors), 20, "3 survivors to share the 8 partitions")

        # Everything produced is consumed by somebody.
        def all_consumed():
            for m in survivors:
                assert m.alive(), f"{m.name} exited:\n{m.stderr()}"
            seen: set[tuple[int, int]] = set()
            for m in members:
                seen.update((p, o) for p, o, _, _ in m.log().records)
            return seen >= set(produced)

        wait_for(all_consumed, 30, "every produced record to be consumed", interval=0.2)
        for m in survivors:
            rc = m.stop()
            assert rc == 0, f"{m.name} exited {rc}:\n{m.stderr()}"
            problems = stderr_problems(m.stderr(), until=m.log().of("closing")[-1].ts)
            assert not problems, f"{m.name}: {problems}"
    finally:
        if producer is not None:
            producer.close(5)
        for m in members:
            m.cleanup()

    logs = {m.name: m.log() for m in members}
    ends = {m.name: (killed_at if m is victim else logs[m.name].of("closed")[-1].ts) for m in members}
    check_exclusive_ownership(logs, ends)
    seen = seen_by_member(logs)
    check_all_seen(seen, produced)

    vlog = logs[victim.name]
    resume = check_resume_points(vlog, {n: logs[n] for n in (m.name for m in survivors)}, victim_parts, killed_at)
    dups = check_duplicates(seen, vlog, victim.name, resume)

    rebalance_start = min(e.ts for m in survivors for e in logs[m.name].of("revoke") if e.ts > killed_at)
    return Result(move_s=move_s, rebalance_start_s=rebalance_start - killed_at,
                  victim_partitions=sorted(victim_parts), victim_records=len(vlog.records), tail_at_kill=kill["tail"],
                  duplicates=sum(dups.values()), duplicates_by_partition=dups,
                  initial_assignment={k: sorted(v) for k, v in initial.items()},
                  final_assignment={k: sorted(v) for k, v in final.items()})


def _last_period_commits(vlog: MemberLog, kind: str) -> dict[int, int]:
    last_assign = vlog.of("assign")[-1].ts
    out: dict[int, int] = {}
    for e in vlog.of(kind):
        if e.ts >= last_assign:
            for p, o in e.offsets().items():
                out[p] = max(o, out.get(p, -1))
    return out


def check_resume_points(vlog: MemberLog, survivors: dict[str, MemberLog], victim_parts: set[int],
                        killed_at: float) -> dict[int, int]:
    """Each of the victim's partitions resumes, at its new owner, from an offset the victim
    committed: between its last acknowledged commit and its last attempted one (a commit the
    broker took just before the kill may not have been logged). Returns partition -> resume offset."""
    last = len(vlog.of("assign"))
    committed = _last_period_commits(vlog, "commit")
    tried = _last_period_commits(vlog, "commit-try")
    period: dict[int, list[int]] = {}
    for p, o, _, seg in vlog.records:
        if seg == last:
            period.setdefault(p, []).append(o)
    resume: dict[int, int] = {}
    for p in victim_parts:
        owner: tuple[str, float] | None = None
        seg = 0
        for name, log in survivors.items():
            assigns = log.of("assign")
            for k, e in enumerate(assigns, start=1):
                if e.ts > killed_at and p in e.parts() and (owner is None or e.ts < owner[1]):
                    owner, seg = (name, e.ts), k
        assert owner is not None, f"partition {p} never moved"
        firsts = [o for q, o, _, s in survivors[owner[0]].records if q == p and s == seg]
        assert firsts, f"{owner[0]} consumed nothing of partition {p} after taking it over"
        resume[p] = firsts[0]
        start = period[p][0] if p in period else None
        lo = committed.get(p, start)
        hi = tried.get(p, start)
        if lo is not None and hi is not None:
            assert lo <= resume[p] <= hi, (
                f"partition {p}: {owner[0]} resumed at {resume[p]}, the victim had committed "
                f"{committed.get(p)} (tried {tried.get(p)}), started at {start}")
    return resume


def check_duplicates(seen, vlog: MemberLog, victim: str, resume: dict[int, int]) -> dict[int, int]:
    """Duplicates are exactly the victim's records past the offset its partition resumed from."""
    dups: dict[int, int] = {}
    for (p, o), copies in seen.items():
        if len(copies) == 1:
            continue
        names = sorted(n for n, _ in copies)
        assert len(copies) == 2 and victim in names and names.count(victim) == 1, \
            f"{(p, o)} consumed by {names}: only the killed member's tail may be read twice"
        assert p in resume and o >= resume[p], \
            f"{(p, o)} read twice, but its partition resumed at {resume.get(p)} after the kill"
        dups[p] = dups.get(p, 0) + 1
    last = len(vlog.of("assign"))
    for p, r in resume.items():
        tail = sum(1 for q, o, _, s in vlog.records if q == p and s == last and o >= r)
        assert dups.get(p, 0) == tail, f"partition {p}: {dups.get(p, 0)} duplicates, the victim's tail was {tail}"
    return dups
