"""close() of a producer whose produce request is never answered (its broker frozen with
SIGSTOP): close(timeout) returns, the record in flight fails with ProducerClosedError, and
nothing is left running. The sender handles each request's answer in a done callback of
the request's future (no task per request); close() cancels those futures."""
from __future__ import annotations

import asyncio
import signal
import time

import pytest

from clients.aio import AsyncProducer, ProducerClosedError
from clients.producer import Producer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _frozen(broker):
    broker.proc.send_signal(signal.SIGSTOP)
    return lambda: broker.proc.send_signal(signal.SIGCONT)


def test_async_close_fails_a_request_in_flight_and_returns(broker):
    async def main() -> None:
        p = AsyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks="all",
                          request_timeout_ms=30000)
        await p.start()
        await (await p.send("frozen", b"before"))     # topic created, connection open
        thaw = _frozen(broker)
        try:
            fut = await p.send("frozen", b"in flight")
            await asyncio.sleep(0.3)
            assert not fut.done() and p._requests       # written, no answer
            t0 = time.monotonic()
            await p.close(timeout=0.5)
            assert time.monotonic() - t0 < 5
            assert isinstance(fut.exception(), ProducerClosedError)
            assert not p._requests
            assert asyncio.all_tasks() == {asyncio.current_task()}
        finally:
            thaw()
    asyncio.run(main())


def test_sync_close_fails_a_request_in_flight_and_returns(broker):
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks="all",
                 request_timeout_ms=30000)
    p.send("frozen-sync", b"before").result(30)
    thaw = _frozen(broker)
    try:
        fut = p.send("frozen-sync", b"in flight")
        time.sleep(0.3)
        assert not fut.done()
        t0 = time.monotonic()
        p.close(timeout=0.5)
        assert time.monotonic() - t0 < 5
        assert isinstance(fut.exception(timeout=0), ProducerClosedError)
    finally:
        thaw()
