"""GroupMember.commit against a scripted coordinator (no sockets): a commit that has to
retry never lands under a generation it did not start in, no commit is sent between
JoinGroup and SyncGroup, and the answer to a commit of an older membership does not
disturb the newer one (each such answer used to start one more rebalance round)."""
import asyncio

import pytest

from clients.aio.assignors import RangeAssignor
from clients.aio.group import GroupMember
from clients.config import resolve
from clients.protocol.errors import Code, KafkaError, RebalanceInProgressError, for_code
from clients.protocol.schema import Struct
from clients.types import OffsetAndMetadata, TopicPartition


class ScriptedClient:
    """Answers OffsetCommit with the next code of `codes`; records what was sent."""

    retry_backoff = 0.001

    def __init__(self, codes, on_request=None):
        self.codes = list(codes)
        self.sent = []
        self.on_request = on_request

    async def coordinator(self, key, key_type=0):
        return 0

    def forget_coordinator(self, key, key_type=0):
        pass

    async def request(self, node, api, body, timeout=None):
        self.sent.append(dict(body))
        if self.on_request:
            self.on_request(len(self.sent))
        code = self.codes.pop(0)
        return Struct(topics=[Struct(partitions=[Struct(error_code=code)])])


def member(client) -> GroupMember:
    cfg = resolve("consumer", bootstrap_servers="127.0.0.1:1", group_id="g")
    m = GroupMember(client, cfg, [RangeAssignor()])
    m.member_id, m.generation = "m-1", 7
    return m


OFFSETS = {TopicPartition("t", 0): OffsetAndMetadata(100)}


def test_retries_keep_the_generation_and_member_the_commit_started_with():
    async def main():
        client = ScriptedClient([Code.NOT_COORDINATOR, Code.NONE])
        await member(client).commit(OFFSETS, timeout=5)
        assert [(b["generation_id_or_member_epoch"], b["member_id"]) for b in client.sent] \
            == [(7, "m-1"), (7, "m-1")]
    asyncio.run(main())


def test_a_commit_is_abandoned_when_the_group_rebalanced_while_it_retried():
    async def main():
        m = None

        def rebalance_after_first(n):
            if n == 1:          # a rebalance completes while the commit waits to retry
                m.generation, m.member_id = 8, "m-1"

        client = ScriptedClient([Code.NOT_COORDINATOR, Code.NONE], rebalance_after_first)
        m = member(client)
        with pytest.raises(RebalanceInProgressError, match="rebalanced"):
            await m.commit(OFFSETS, timeout=5)
        # The old offsets were never sent under the new generation.
        assert [b["generation_id_or_member_epoch"] for b in client.sent] == [7]
    asyncio.run(main())


def test_no_member_commit_is_sent_while_the_member_is_joining():
    # Between JoinGroup and SyncGroup the coordinator answers REBALANCE_IN_PROGRESS, and
    # before that the commit races the join (Kafka's Java client does not send it either).
    async def main():
        client = ScriptedClient([Code.NONE])
        m = member(client)
        m._joining, m.need_rejoin = True, False
        with pytest.raises(RebalanceInProgressError):
            await m.commit(OFFSETS, timeout=5)
        assert client.sent == []
        assert (m.need_rejoin, m.lost, m.generation) == (False, False, 7)
        # assign() mode stores offsets outside the group protocol: not affected.
        await m.commit(OFFSETS, timeout=5, as_member=False)
        assert len(client.sent) == 1
    asyncio.run(main())


@pytest.mark.parametrize("code", [Code.ILLEGAL_GENERATION, Code.REBALANCE_IN_PROGRESS,
                                  Code.UNKNOWN_MEMBER_ID], ids=lambda c: for_code(c).__name__)
def test_an_answer_for_an_older_generation_leaves_the_new_membership_alone(code):
    async def main():
        m = None

        def join_completes_meanwhile(n):
            m.generation = 8            # the member joined generation 8 before the answer

        client = ScriptedClient([code], join_completes_meanwhile)
        m = member(client)
        m.need_rejoin = False
        with pytest.raises(KafkaError):
            await m.commit(OFFSETS, timeout=5)
        assert (m.generation, m.member_id, m.need_rejoin, m.lost) == (8, "m-1", False, False)
    asyncio.run(main())


@pytest.mark.parametrize("code, generation, member_id", [
    (Code.ILLEGAL_GENERATION, -1, "m-1"), (Code.UNKNOWN_MEMBER_ID, -1, "")])
def test_a_fenced_member_learns_it_from_its_commit(code, generation, member_id):
    async def main():
        m = member(ScriptedClient([code]))
        m.need_rejoin = False
        with pytest.raises(KafkaError):
            await m.commit(OFFSETS, timeout=5)
        assert (m.generation, m.member_id, m.need_rejoin, m.lost) \
            == (generation, member_id, True, True)
    asyncio.run(main())


def test_a_commit_finding_the_group_rebalancing_asks_to_rejoin():
    async def main():
        m = member(ScriptedClient([Code.REBALANCE_IN_PROGRESS]))
        m.need_rejoin = False
        with pytest.raises(RebalanceInProgressError):
            await m.commit(OFFSETS, timeout=5)
        assert (m.need_rejoin, m.lost, m.generation) == (True, False, 7)
    asyncio.run(main())


def test_an_auto_commit_skipped_for_a_rebalance_is_due_right_after_it():
    # Skipping must not push the timer a whole auto.commit.interval.ms on: in a
    # cooperative rebalance the kept partitions are consumed throughout the join.
    from clients.aio.consumer import AsyncConsumer

    async def main():
        c = AsyncConsumer(config={"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                                  "auto.commit.interval.ms": 5000})
        commits = []

        async def commit_quietly(tps):
            commits.append(sorted(tps))
        c._commit_positions_quietly = commit_quietly
        c._positions = lambda tps: {tp: OffsetAndMetadata(10) for tp in tps}
        c._subscribed, c._assignment = True, {TopicPartition("t", 0)}
        c._group = member(ScriptedClient([]))
        c._group.need_rejoin = False
        c._join_task = object()                  # a join in flight
        c._maybe_auto_commit(100.0)
        assert commits == [] and c._next_auto_commit == 0.0
        c._join_task = None                      # the rebalance is over
        c._maybe_auto_commit(100.1)
        await asyncio.sleep(0)
        assert commits == [[TopicPartition("t", 0)]]
        assert c._next_auto_commit == 105.1
    asyncio.run(main())
