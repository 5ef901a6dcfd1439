"""ConnectionPool without sockets: failed attempts are paced by the reconnect backoff."""
import asyncio

import pytest

from clients.aio.errors import KafkaConnectionError
from clients.aio.pool import ConnectionPool


def test_a_broker_without_a_known_address_counts_as_a_failed_attempt():
    # A leader id that metadata names but whose address is unknown (a dead broker): each
    # attempt fails at once, so without backoff every caller that retries would spin.
    async def main():
        pool = ConnectionPool(reconnect_backoff_ms=200, reconnect_backoff_max_ms=1000)
        with pytest.raises(KafkaConnectionError, match="no address known"):
            await pool.get(7)
        first_backoff = pool.backoff_remaining(7)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(KafkaConnectionError):
            await pool.get(7)
        return first_backoff, loop.time() - t0

    first_backoff, second_attempt_took = asyncio.run(main())
    assert first_backoff > 0.1
    assert second_attempt_took > 0.1
