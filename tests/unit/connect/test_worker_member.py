"""WorkerGroupMember's own logic, sans-io: the group's JoinGroup+SyncGroup round trip is
replaced by a script of assignments (the wire part is the integration test's), so what is
checked is what the member does with them: the cooperative rule, rejoins after a
revocation or a delay, CONFIG_MISMATCH and config catch-up, eager revoke-first, the
metadata it offers and the leader's step."""
import asyncio

import pytest

from clients.aio.errors import KafkaConnectionError
from clients.connect.runtime.connect_protocol import (
    CONFIG_MISMATCH, NO_ERROR, ConnectAssignment, WorkerMetadata, decode_assignment,
    decode_metadata, encode_assignment, encode_metadata)
from clients.connect.runtime.member import WorkerGroupMember


class NoBroker:
    retry_backoff = 0.001

    async def coordinator(self, key, key_type=0):
        raise KafkaConnectionError("no broker in this test")

    def forget_coordinator(self, key, key_type=0):
        pass


class Scripted(WorkerGroupMember):
    """Each join answers the next (protocol, assignment) of the script."""

    def __init__(self, script=(), protocol="sessioned", offset=10, reachable=10**9,
                 counts=None):
        self.offset, self.reachable, self.catch_ups = offset, reachable, []
        self.counts = counts or {}

        async def catch_up(target):
            self.catch_ups.append(target)
            self.offset = max(self.offset, min(target, self.reachable))
            return self.offset >= target

        super().__init__(NoBroker(), "g", "http://me:8083", protocol=protocol,
                         config_snapshot=lambda: (self.offset, dict(self.counts)),
                         catch_up=catch_up, unsync_backoff_ms=1)
        self.script = list(script)
        self.offered = []

    async def _join(self):
        self.offered.append(self._join_protocols())
        self.need_rejoin = False
        self.changed.clear()
        self.protocol_name, a = self.script.pop(0)
        self.member_id, self.generation = "me", self.generation + 2
        return encode_assignment(a)


def assigned(connectors=(), tasks=(), revoked_connectors=(), revoked_tasks=(), **kw):
    return ConnectAssignment(NO_ERROR, "me", "http://me:8083", kw.pop("config_offset", 10),
                             list(connectors), list(tasks), list(revoked_connectors),
                             list(revoked_tasks), **kw)


def run(coro):
    return asyncio.run(coro)


def test_the_cooperative_rule_and_the_rejoin_a_revocation_asks_for():
    async def main():
        m = Scripted([
            ("sessioned", assigned(["c1"], [("c1", 0), ("c1", 1)])),
            ("sessioned", assigned([], [("c2", 0)], [], [("c1", 1)])),
            ("sessioned", assigned()),
        ])
        a = await m.ensure_active()
        assert (a.connectors, m.assignment.tasks) == (["c1"], [("c1", 0), ("c1", 1)])
        assert not m.need_rejoin and m.leader_url == "http://me:8083"
        assert (await m.ensure_active()).tasks == []        # nothing to do: no join
        assert len(m.offered) == 1
        m.request_rejoin("test")
        a = await m.ensure_active()
        assert a.revoked_tasks == [("c1", 1)] and a.tasks == [("c2", 0)]
        assert m.assignment.connectors == ["c1"]
        assert m.assignment.tasks == [("c1", 0), ("c2", 0)]
        assert m.need_rejoin and m.changed.is_set()          # stop, then rejoin
        await m.ensure_active()
        assert len(m.offered) == 3 and not m.need_rejoin
    run(main())


def test_the_metadata_offers_the_protocols_and_what_the_worker_runs():
    async def main():
        m = Scripted([("compatible", assigned(["c1"], [("c1", 0)])),
                      ("compatible", assigned())], protocol="compatible")
        await m.ensure_active()
        m.request_rejoin("test")
        await m.ensure_active()
        first, second = m.offered
        assert [n for n, _ in first] == ["compatible", "default"]
        meta = decode_metadata(first[0][1])
        assert (meta.url, meta.config_offset, meta.allocation, meta.version) == \
            ("http://me:8083", 10, None, 1)
        assert decode_metadata(first[1][1]).version == 0
        allocation = decode_metadata(second[0][1]).allocation
        assert (allocation.connectors, allocation.tasks) == (["c1"], [("c1", 0)])
    run(main())


def test_a_delay_schedules_a_rejoin_and_a_new_assignment_cancels_it():
    async def main():
        m = Scripted([("sessioned", assigned(delay_ms=30)),
                      ("sessioned", assigned(delay_ms=30)),
                      ("sessioned", assigned())])
        await m.ensure_active()
        assert not m.need_rejoin
        await asyncio.wait_for(m.changed.wait(), 1)
        assert m.need_rejoin and "delay" in m.rejoin_reason
        await m.ensure_active()
        m.request_rejoin("sooner")
        await m.ensure_active()                  # delay 0: the earlier timer is gone
        await asyncio.sleep(0.06)
        assert not m.need_rejoin
    run(main())


def test_config_mismatch_reads_the_config_topic_and_rejoins():
    async def main():
        m = Scripted([
            ("sessioned", ConnectAssignment(CONFIG_MISMATCH, "l", "http://l", 12)),
            ("sessioned", assigned(["c1"], config_offset=12)),
        ])
        a = await m.ensure_active()
        assert a.connectors == ["c1"] and m.catch_ups == [12] and len(m.offered) == 2
        assert decode_metadata(m.offered[1][0][1]).config_offset == 12
    run(main())


def test_an_assignment_ahead_of_the_config_waits_for_it_or_leaves_and_rejoins():
    async def main():
        m = Scripted([("sessioned", assigned(["c1"], config_offset=15))])
        await m.ensure_active()
        assert m.catch_ups == [15] and m.offset == 15
        # Unreachable: leave, back off, rejoin (the units still count as held).
        m = Scripted([("sessioned", assigned(["c1"], config_offset=15)),
                      ("sessioned", assigned(config_offset=12))], reachable=12)
        a = await m.ensure_active()
        assert a.config_offset == 12 and m.catch_ups == [15]
        assert len(m.offered) == 2 and m.assignment.connectors == ["c1"]
    run(main())


def test_eager_revokes_everything_before_rejoining():
    async def main():
        m = Scripted([("default", assigned(["c1"], [("c1", 0)], version=0)),
                      ("default", assigned(["c2"], [("c1", 0)], version=0))],
                     protocol="eager")
        await m.ensure_active()
        m.request_rejoin("test")
        a = await m.ensure_active()              # first: stop everything, no join yet
        assert (a.revoked_connectors, a.revoked_tasks) == (["c1"], [("c1", 0)])
        assert (a.connectors, a.tasks, len(m.offered)) == ([], [], 1)
        assert m.assignment.connectors == [] and m.need_rejoin
        a = await m.ensure_active()
        assert (a.connectors, m.assignment.connectors) == (["c2"], ["c2"])
        assert [n for n, _ in m.offered[0]] == ["default"]
    run(main())


def members(*offsets):
    return [(f"m{i}", encode_metadata(WorkerMetadata(f"http://m{i}", o)))
            for i, o in enumerate(offsets)]


@pytest.mark.parametrize("reachable, error", [(12, NO_ERROR), (11, CONFIG_MISMATCH)])
def test_the_leader_reads_up_to_the_newest_member_before_assigning(reachable, error):
    async def main():
        m = Scripted(offset=10, reachable=reachable, counts={"c1": 2})
        m.member_id, m.leader_id, m.generation = "m0", "m0", 3
        out = {k: decode_assignment(v) for k, v in
               (await m._assign("sessioned", members(10, 12))).items()}
        assert m.catch_ups == [12]
        assert {a.error for a in out.values()} == {error}
        assert {a.config_offset for a in out.values()} == {12}
        assert {a.leader_url for a in out.values()} == {"http://m0"}
        units = [u for a in out.values() for u in a.connectors + a.tasks]
        assert sorted(map(str, units)) == (sorted(map(str, ["c1", ("c1", 0), ("c1", 1)]))
                                           if error == NO_ERROR else [])
        if error == NO_ERROR:
            owner = next(k for k, a in out.items() if "c1" in a.connectors)
            assert m.owner_url("c1") == f"http://{owner}"
    run(main())


def test_the_leader_of_an_eager_group_deals_everything():
    async def main():
        m = Scripted(counts={"c1": 1})
        m.member_id, m.leader_id = "m0", "m0"
        out = {k: decode_assignment(v) for k, v in
               (await m._assign("default", members(10, 10))).items()}
        assert {a.version for a in out.values()} == {0}
        assert out["m0"].connectors == ["c1"] and out["m1"].tasks == [("c1", 0)]
    run(main())
