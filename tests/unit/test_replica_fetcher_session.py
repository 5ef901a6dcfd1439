"""The replica fetcher (broker.replication.fetcher) when the leader has lost its fetch
session: it starts a new session with the next fetch, without an error on the way (a
review found the log line naming the error code raising TypeError instead)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

from broker.replication.fetcher import LeaderFetcher
from clients.protocol.errors import Code
from broker.server.fetch_sessions import INITIAL_EPOCH, NO_SESSION


class _LostSessionLeader:
    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def request(self, api, body, version=None, timeout=None):
        self.bodies.append(body)
        return NS(error_code=Code.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])


def test_a_lost_session_is_dropped_and_the_next_fetch_starts_a_new_one() -> None:
    async def main() -> None:
        manager = NS(broker_id=2, config={"wait_ms": 10, "response_max_bytes": 1 << 20,
                                          "max_bytes": 1 << 20})
        f = LeaderFetcher(manager, leader_id=1)
        try:
            f.session_id, f.session_epoch = 55, 3
            f._in_session[("t", 0)] = (10, 0)
            leader = _LostSessionLeader()
            await f._fetch(leader, [])
            assert leader.bodies[0]["session_id"] == 55
            assert f.session_id == NO_SESSION and not f._in_session
            assert f.session_epoch == INITIAL_EPOCH      # the next fetch is a full one
        finally:
            await f.stop()
    asyncio.run(main())
