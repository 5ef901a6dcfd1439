"""GroupMember.commit against a scripted coordinator (no sockets): a commit that has to
retry never lands under a generation it did not start in."""
import asyncio

import pytest

from clients.aio.assignors import RangeAssignor
from clients.aio.group import GroupMember
from clients.config import resolve
from clients.protocol.errors import Code, RebalanceInProgressError
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
