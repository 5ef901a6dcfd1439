"""A refused authentication is final for the user's calls too: once the last attempt to
connect to a broker was refused, send() and poll() raise it (Kafka's clients throw their
AuthenticationException there) instead of retrying until a timeout."""
from __future__ import annotations

import asyncio

import pytest

from clients.aio.consumer import AsyncConsumer
from clients.aio.producer import AsyncProducer
from clients.aio.security import AuthenticationError


def test_send_raises_the_refusal():
    async def main():
        p = AsyncProducer({"bootstrap.servers": "127.0.0.1:9"})
        p._client.pool.authentication_error = AuthenticationError("Authentication failed: nope")
        with pytest.raises(AuthenticationError, match="nope"):
            await p.send("t", b"v")
    asyncio.run(main())


def test_poll_raises_the_refusal(monkeypatch):
    async def main():
        c = AsyncConsumer(config={"bootstrap.servers": "127.0.0.1:9"})

        async def started():
            return None
        monkeypatch.setattr(c, "start", started)
        c._client.pool.authentication_error = AuthenticationError("Authentication failed: nope")
        with pytest.raises(AuthenticationError, match="nope"):
            await c.poll(0.1)
    asyncio.run(main())
