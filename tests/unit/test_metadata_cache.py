"""The metadata cache's wait for the first word from a controller (Metadata and
DescribeCluster wait on it at start-up; see broker/server/handlers/metadata.py)."""
from __future__ import annotations

import asyncio

from broker.metadata_cache import MetadataCache


def test_waiting_for_the_controller_ends_with_its_first_update_or_the_time_limit() -> None:
    async def main() -> None:
        cache = MetadataCache()
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, cache.set_controller, 2, 7)
        started = loop.time()
        await cache.wait_for_controller(5.0)
        assert cache.controller_id == 2 and cache.controller_epoch == 7
        assert loop.time() - started < 1.0
        await asyncio.wait_for(cache.wait_for_controller(5.0), 0.01)    # known: no wait at all
        started = loop.time()
        await MetadataCache().wait_for_controller(0.05)                   # nobody says: bounded
        assert 0.04 <= loop.time() - started < 1.0
    asyncio.run(main())
