"""IncrementalCooperativeAssignor, sans-io with a fake clock: a simulated group of workers
that apply each assignment as a Connect worker does (running = previous - revoked + new)
and rejoin; after every rebalance no connector or task runs on two workers."""
import pytest

from clients.connect.runtime.assignor import IncrementalCooperativeAssignor, eager_assign
from clients.connect.runtime.connect_protocol import (CONFIG_MISMATCH, NO_ERROR,
                                                      ConnectAssignment, WorkerMetadata)

MAX_DELAY = 10_000


class Group:
    """Workers (name -> running units, None before their first assignment), the leader's
    config snapshot and a fake clock."""

    def __init__(self, workers, counts, max_delay=MAX_DELAY):
        self.assignor = IncrementalCooperativeAssignor(max_delay)
        self.running = {w: None for w in workers}
        self.counts = dict(counts)
        self.offset = 10
        self.generation = 0
        self.now = 1_000_000
        self.history = []

    def metadata(self, w):
        r = self.running[w]
        allocation = None if r is None else ConnectAssignment(
            connectors=sorted(r[0]), tasks=sorted(r[1]))
        return WorkerMetadata(f"http://{w}:8083", self.offset, allocation)

    def rebalance(self, leader=None):
        self.generation += 1
        members = {w: self.metadata(w) for w in self.running}
        leader = leader or min(members)
        out = self.assignor.assign(leader, members, self.offset, self.counts, self.now,
                                   self.generation, self.generation - 1)
        assert set(out) == set(members)
        for w, a in out.items():
            assert a.error == NO_ERROR and a.leader == leader
            assert a.leader_url == f"http://{leader}:8083"
            connectors, tasks = self.running[w] or (set(), set())
            assert set(a.revoked_connectors) <= connectors and set(a.revoked_tasks) <= tasks
            assert not set(a.connectors) & connectors and not set(a.tasks) & tasks
            self.running[w] = ((connectors - set(a.revoked_connectors)) | set(a.connectors),
                               (tasks - set(a.revoked_tasks)) | set(a.tasks))
        self.check_no_duplicates()
        self.history.append(out)
        return out

    def check_no_duplicates(self):
        seen = set()
        for r in self.running.values():
            for u in list(r[0]) + list(r[1]):
                assert u not in seen, f"{u} runs twice"
                seen.add(u)

    def everything(self):
        return (set(self.counts),
                {(c, i) for c, n in self.counts.items() for i in range(n)})

    def assigned(self):
        c, t = set(), set()
        for r in self.running.values():
            c |= r[0]
            t |= r[1]
        return c, t

    def loads(self):
        return {w: (len(r[0]), len(r[1])) for w, r in self.running.items()}

    def revoked_any(self, out):
        return any(a.revoked_connectors or a.revoked_tasks for a in out.values())


def balanced(values):
    return max(values) - min(values) <= 1


def check_balanced(g):
    loads = g.loads().values()
    assert balanced([c for c, _ in loads]) and balanced([t for _, t in loads]), g.loads()


def started(g):
    g.rebalance()
    assert g.assigned() == g.everything()
    return g


def test_new_units_go_to_the_least_loaded_workers_round_robin():
    g = Group(["a", "b", "c"], {"c1": 3, "c2": 3})
    out = g.rebalance()
    assert g.assigned() == g.everything()
    assert g.loads() == {"a": (1, 2), "b": (1, 2), "c": (0, 2)}
    assert out["a"].tasks == [("c1", 0), ("c2", 0)] and out["c"].connectors == []
    assert not g.revoked_any(out) and all(a.delay_ms == 0 for a in out.values())
    # A new connector: its connector to the worker without one, one task each.
    g.counts["c3"] = 3
    out = g.rebalance()
    assert out["c"].connectors == ["c3"] and out["a"].connectors == []
    assert sorted(len(a.tasks) for a in out.values()) == [1, 1, 1]
    assert not g.revoked_any(out)
    assert g.assigned() == g.everything()
    check_balanced(g)


def test_deleted_connectors_and_tasks_are_revoked():
    g = started(Group(["a", "b"], {"c1": 3, "c2": 2}))
    owner = next(w for w, r in g.running.items() if "c2" in r[0])
    del g.counts["c2"]
    g.counts["c1"] = 2                       # c1's task 2 went too
    out = g.rebalance()
    revoked = {(w, u) for w, a in out.items() for u in a.revoked_connectors + a.revoked_tasks}
    assert ("c2", 0) in {u for _, u in revoked} and ("c2", 1) in {u for _, u in revoked}
    assert (owner, "c2") in revoked
    assert ("c1", 2) in {u for _, u in revoked}
    assert not any(a.connectors or a.tasks for a in out.values())
    assert g.assigned() == g.everything()
    # The revoking workers rejoin: nothing deleted comes back, the rest stays balanced.
    out = g.rebalance()
    assert g.assigned() == g.everything()
    check_balanced(g)


def test_a_departed_workers_units_wait_for_the_delay_then_go_to_the_survivors():
    g = started(Group(["a", "b", "c"], {"c1": 3, "c2": 3}))
    lost = g.running.pop("c")
    assert lost[1]
    out = g.rebalance()                      # c's session expired
    assert all(a.delay_ms == MAX_DELAY for a in out.values())
    assert not any(a.connectors or a.tasks or a.revoked_tasks for a in out.values())
    g.now += 4_000                           # someone rejoined early: the rest of the delay
    out = g.rebalance()
    assert all(a.delay_ms == MAX_DELAY - 4_000 for a in out.values())
    assert g.assigned()[1] == g.everything()[1] - lost[1]
    g.now += MAX_DELAY - 4_000               # the delay ended: members rejoin
    out = g.rebalance()
    assert all(a.delay_ms == 0 for a in out.values())
    started_now = {u for a in out.values() for u in a.connectors + a.tasks}
    assert started_now == lost[0] | lost[1]
    assert g.assigned() == g.everything()
    check_balanced(g)


def test_a_worker_that_joins_during_the_delay_gets_the_lost_units():
    g = started(Group(["a", "b", "c"], {"c1": 3, "c2": 3}))
    lost = g.running.pop("c")
    g.rebalance()
    g.now += 1_000
    g.running["d"] = None                    # a new worker joins while the delay runs
    out = g.rebalance()
    assert out["d"].tasks == [] and out["d"].delay_ms == MAX_DELAY - 1_000
    assert not g.revoked_any(out)            # no balancing while a delay is pending
    g.now += MAX_DELAY
    out = g.rebalance()
    assert set(out["d"].connectors) | set(out["d"].tasks) == lost[0] | lost[1]
    assert not any(a.connectors or a.tasks for w, a in out.items() if w != "d")
    assert g.assigned() == g.everything()
    check_balanced(g)


def test_lost_units_beyond_a_late_candidates_share_go_to_the_least_loaded():
    # d joined during the delay and gets the lost units, but not more than its share:
    # e, which joined as the delay ended, gets the rest at once (nothing is revoked).
    g = started(Group(["a", "b", "c"], {"c1": 3, "c2": 3}))
    lost = g.running.pop("c")
    g.rebalance()
    g.now += 1_000
    g.running["d"] = None
    g.rebalance()
    g.now += MAX_DELAY
    g.running["e"] = None                    # joins just as the delay ends
    out = g.rebalance()
    assert len(out["d"].tasks) == 1 and len(out["e"].tasks) == 1
    assert set(out["d"].tasks) | set(out["e"].tasks) == lost[1]
    assert not g.revoked_any(out)
    assert g.assigned() == g.everything()
    check_balanced(g)


def test_a_worker_back_within_the_delay_keeps_its_units():
    g = started(Group(["a", "b", "c"], {"c1": 3, "c2": 3}))
    back = g.running.pop("c")
    g.rebalance()
    g.now += 2_000
    g.running["c"] = back                    # rejoined (new member, same allocation)
    out = g.rebalance()
    assert all(a.delay_ms == 0 and not (a.tasks or a.revoked_tasks) for a in out.values())
    assert g.running["c"] == back
    g.now += MAX_DELAY                       # nothing is pending any more
    out = g.rebalance()
    assert not any(a.tasks or a.revoked_tasks for a in out.values())


@pytest.mark.parametrize("counts, workers", [
    ({"c1": 3, "c2": 3, "c3": 2}, 3),        # 8 tasks, 3 connectors -> d: 2 tasks
    ({"c1": 4, "c2": 3}, 3),                 # 7 tasks (3, 2, 2) -> d: 1 task
    ({f"c{i}": 1 for i in range(6)}, 2),     # 6 and 6 -> d: 2 connectors, 2 tasks
])
def test_a_joining_worker_gets_its_share_in_two_rebalances_revoking_no_more_than_needed(
        counts, workers):
    g = started(Group(["a", "b", "c"][:workers], counts))
    check_balanced(g)
    before = dict(g.running)
    g.running["d"] = None
    out = g.rebalance()                      # 1: only revocations
    assert not any(a.connectors or a.tasks for a in out.values())
    revoked_tasks = [t for a in out.values() for t in a.revoked_tasks]
    revoked_connectors = [c for a in out.values() for c in a.revoked_connectors]
    # Exactly the new worker's share moves: floor(total / workers).
    all_connectors, all_tasks = g.everything()
    assert len(revoked_tasks) == len(all_tasks) // (workers + 1)
    assert len(revoked_connectors) == len(all_connectors) // (workers + 1)
    assert all(g.running[w][1] <= before[w][1] for w in before)
    out = g.rebalance()                      # 2: the revoking workers rejoined
    assert sorted(out["d"].tasks) == sorted(revoked_tasks)
    assert sorted(out["d"].connectors) == sorted(revoked_connectors)
    assert not g.revoked_any(out)
    assert g.assigned() == g.everything()
    check_balanced(g)
    out = g.rebalance()                      # stable: nothing moves any more
    assert not any(a.connectors or a.tasks or a.revoked_tasks for a in out.values())


def test_two_revoking_rebalances_in_a_row_wait_before_revoking_again():
    g = started(Group(["a"], {"c1": 4}))
    g.running["b"] = None
    out = g.rebalance()                      # revokes 2 tasks from a
    assert len(out["a"].revoked_tasks) == 2
    g.running["a"] = (g.running["a"][0], g.running["a"][1] | set(out["a"].revoked_tasks))
    g.running["c"] = None                    # a ignored it, and c joined: revoke again?
    out = g.rebalance()
    assert not g.revoked_any(out) and {a.delay_ms for a in out.values()} == {40}
    g.now += 40
    out = g.rebalance()
    assert g.revoked_any(out)


def test_a_revocation_that_did_not_happen_is_not_forgotten():
    g = started(Group(["a"], {"c1": 2}))
    g.running["b"] = None
    out = g.rebalance()
    assert out["a"].revoked_tasks == [("c1", 0)]
    g.running["a"] = (g.running["a"][0], g.running["a"][1] | {("c1", 0)})   # not applied
    del g.counts["c1"]
    out = g.rebalance()                      # what a still runs is deleted: revoked
    assert ("c1", 0) in out["a"].revoked_tasks and out["a"].revoked_connectors == ["c1"]


def test_connectors_and_tasks_are_balanced_separately():
    g = started(Group(["a"], {f"c{i}": 1 for i in range(4)}))
    g.running["b"] = None
    g.rebalance()
    g.rebalance()
    assert g.loads() == {"a": (2, 2), "b": (2, 2)}


def test_units_run_twice_are_revoked_from_every_holder_then_reassigned_once():
    g = started(Group(["a", "b"], {"c1": 2}))
    task = next(iter(g.running["a"][1]))
    g.running["b"][1].add(task)              # e.g. a zombie that came back
    out = g.rebalance()
    assert task in out["a"].revoked_tasks and task in out["b"].revoked_tasks
    g.rebalance()
    assert g.assigned() == g.everything()


def test_a_leader_behind_a_members_config_fails_everyones_assignment():
    g = Group(["a", "b"], {"c1": 1})
    members = {w: g.metadata(w) for w in g.running}
    members["b"].config_offset = 12
    out = g.assignor.assign("a", members, 10, g.counts, g.now, 1, 0)
    assert {a.error for a in out.values()} == {CONFIG_MISMATCH}
    assert {a.config_offset for a in out.values()} == {12}
    assert not any(a.connectors or a.tasks for a in out.values())
    # Caught up (the snapshot reached 12): a normal assignment at the snapshot's offset.
    out = g.assignor.assign("a", members, 12, g.counts, g.now, 1, 0)
    assert {a.error for a in out.values()} == {NO_ERROR}
    assert {a.config_offset for a in out.values()} == {12}


def test_a_stale_leader_memory_is_forgotten():
    g = started(Group(["a", "b"], {"c1": 2}))
    g.running.pop("b")
    # The leader's last completed generation is not the one it assigned: it cannot tell
    # b's units are lost, so no delay; they look new and are assigned at once.
    members = {w: g.metadata(w) for w in g.running}
    out = g.assignor.assign("a", members, g.offset, g.counts, g.now, 5, 3)
    assert out["a"].delay_ms == 0
    assert set(out["a"].tasks) | g.running["a"][1] == g.everything()[1]


def test_zero_max_delay_reassigns_lost_units_at_once():
    g = started(Group(["a", "b"], {"c1": 2}, max_delay=0))
    g.running.pop("b")
    out = g.rebalance()
    assert out["a"].delay_ms == 0 and g.assigned() == g.everything()


@pytest.mark.parametrize("workers", [["a"], ["a", "b", "c"]])
def test_eager_assignment_deals_everything_round_robin(workers):
    members = {w: WorkerMetadata(f"http://{w}", 3, None, 0) for w in workers}
    out = eager_assign("a", members, 3, {"x": 2, "y": 1})
    assert {a.version for a in out.values()} == {0}
    connectors = [c for a in out.values() for c in a.connectors]
    tasks = [t for a in out.values() for t in a.tasks]
    assert sorted(connectors) == ["x", "y"] and sorted(tasks) == [("x", 0), ("x", 1), ("y", 0)]
    if len(workers) == 3:
        assert out["a"].connectors == ["x"] and out["b"].connectors == ["y"]
        assert out["c"].tasks == [("x", 0)] and out["a"].tasks == [("x", 1)]
