"""The proxy's per-principal clients (clients/rest/kafka.py) against a real SASL broker:
clients a request is still using are never closed to make room for another user's, and a
pool closed while a user's clients are starting closes those too."""
from __future__ import annotations

import asyncio
import base64

import pytest
from aiohttp.test_utils import make_mocked_request

import clients.rest.kafka as rest_kafka
from clients.properties import parse_properties
from clients.rest.config import rest_config_from
from clients.rest.errors import RestError
from clients.rest.kafka import ClientPool, Principal
from tests.support.security import USERS, sasl_plain_overrides

SASL = sasl_plain_overrides()


def _pool(bootstrap: str) -> ClientPool:
    text = (f"bootstrap.servers={bootstrap}\nauthentication.method=BASIC\n"
            "client.security.protocol=SASL_PLAINTEXT\n")
    return ClientPool(rest_config_from(parse_properties(text)))


def _request(user: str):
    token = base64.b64encode(f"{user}:{USERS[user]}".encode()).decode()
    return make_mocked_request("GET", "/v3/clusters", headers={"Authorization": f"Basic {token}"})


def test_clients_in_use_are_not_evicted(broker_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = broker_factory(SASL)
    monkeypatch.setattr(rest_kafka, "MAX_PRINCIPALS", 1)

    async def scenario() -> None:
        pool = _pool(broker.bootstrap)
        try:
            async with pool.using(_request("alice")) as alice:
                alice_clients = await pool.clients(alice)
                async with pool.using(_request("bob")) as bob:
                    await pool.clients(bob)          # over the limit while alice's are in use
                    # A long request of alice's (a stream) still produces through them.
                    meta = await (await alice_clients.producer.send("pool-t", b"still open"))
                    assert meta.offset >= 0
                assert await pool.clients(alice) is alice_clients
            # Nobody uses them now: the least recently used user's clients go.
            async with pool.using(_request("admin")) as admin:
                await pool.clients(admin)
            await asyncio.sleep(0)
            assert len(pool._clients) <= 2
        finally:
            await pool.close()
        assert pool._clients == {} and not pool._closing

    asyncio.run(scenario())


def test_close_while_a_users_clients_start(broker_factory) -> None:
    broker = broker_factory(SASL)

    async def scenario() -> None:
        pool = _pool(broker.bootstrap)
        starting = asyncio.ensure_future(pool.clients(Principal("alice", USERS["alice"])))
        await asyncio.sleep(0.01)              # the start is under way
        await pool.close()
        with pytest.raises(RestError) as e:
            await starting
        assert e.value.status == 503
        assert pool._clients == {}

    asyncio.run(scenario())
