"""The Kafka clients the REST proxy's routes share: one admin client and one producer per
principal, made on first use.

Without authentication every request is the proxy's own principal (its config's security
keys). With `authentication.method=BASIC` the request's HTTP basic credentials become the
SASL PLAIN user of the clients made for that request, so the broker's ACLs apply to the
HTTP user (what Confluent's security plugin calls credential propagation); a request
without credentials is 401 before any client is made, one whose credentials the broker
refuses is 401 with Confluent's code 40101.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from clients.aio.admin import AsyncAdminClient
from clients.aio.producer import AsyncProducer
from clients.rest.config import RestProxyConfig
from clients.rest.errors import RestError, from_kafka

__all__ = ["Principal", "KafkaClients", "ClientPool", "ANONYMOUS"]

log = logging.getLogger("strom.rest.kafka")

# Beyond this many principals with clients, those of the least recently used principal that
# no request is using are closed (a request in flight, a stream above all, keeps its own).
MAX_PRINCIPALS = 64


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: `user` None is the proxy's own configured identity."""

    user: str | None = None
    password: str | None = None

    def overlay(self, config: dict[str, Any]) -> dict[str, Any]:
        """`config` with this principal's SASL PLAIN credentials (unchanged when anonymous)."""
        if self.user is None:
            return config
        out = {k: v for k, v in config.items() if k not in ("sasl.jaas.config", "sasl.mechanisms")}
        protocol = str(out.get("security.protocol", "PLAINTEXT")).upper()
        out["security.protocol"] = "SASL_SSL" if protocol in ("SSL", "SASL_SSL") else "SASL_PLAINTEXT"
        out["sasl.mechanism"] = "PLAIN"
        out["sasl.username"] = self.user
        out["sasl.password"] = self.password or ""
        return out


ANONYMOUS = Principal()


@dataclass
class KafkaClients:
    """One principal's admin client and producer, both started."""

    principal: Principal
    admin: AsyncAdminClient
    producer: AsyncProducer


def _unauthorized(realm: str, message: str = "Unauthorized") -> RestError:
    return RestError(401, 401, message, {"WWW-Authenticate": f'Basic realm="{realm}"'})


class ClientPool:
    """Clients by principal. `for_request` is what a route calls; `consumer_config` gives
    the config a v2 consumer instance of that principal starts with. The server wraps each
    request in `using()`, which is what keeps a principal's clients open while it runs."""

    def __init__(self, config: RestProxyConfig):
        self.config = config
        self._clients: OrderedDict[Principal, KafkaClients] = OrderedDict()
        self._starting: dict[Principal, asyncio.Future[KafkaClients]] = {}
        self._in_use: dict[Principal, int] = {}         # requests running, by principal
        self._closing: set[asyncio.Task[None]] = set()  # evicted clients being closed
        self._cluster_id: str | None = None
        self._closed = False

    @contextlib.asynccontextmanager
    async def using(self, request: web.Request) -> AsyncIterator[Principal]:
        """The request's principal (401 as `principal()`), counted as in use until the
        request is done: its clients are not closed to make room for another principal's."""
        principal = self.principal(request)
        self._in_use[principal] = self._in_use.get(principal, 0) + 1
        try:
            yield principal
        finally:
            left = self._in_use[principal] - 1
            if left:
                self._in_use[principal] = left
            else:
                del self._in_use[principal]
                self._evict()

    def _evict(self) -> None:
        """Close the least recently used principals' clients beyond MAX_PRINCIPALS, skipping
        those a request is using (they are looked at again when that request ends)."""
        excess = len(self._clients) - MAX_PRINCIPALS
        for principal in list(self._clients):
            if excess <= 0:
                break
            if principal in self._in_use:
                continue
            old = self._clients.pop(principal)
            task = asyncio.ensure_future(_close_quietly(old.admin, old.producer))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            excess -= 1

    def principal(self, request: web.Request) -> Principal:
        """The request's principal; 401 when basic authentication is on and the request
        carries no (well-formed) credentials."""
        if self.config.authentication_method != "BASIC":
            return ANONYMOUS
        header = request.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic" or not encoded.strip():
            raise _unauthorized(self.config.authentication_realm)
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized(self.config.authentication_realm) from None
        if not sep or not user:
            raise _unauthorized(self.config.authentication_realm)
        return Principal(user, password)

    async def for_request(self, request: web.Request) -> KafkaClients:
        return await self.clients(self.principal(request))

    async def clients(self, principal: Principal) -> KafkaClients:
        """The principal's started clients, made on first use (concurrent first requests
        share one start); refused credentials are 401/40101 and nothing is kept."""
        if self._closed:
            raise _shutting_down()
        found = self._clients.get(principal)
        if found is not None:
            self._clients.move_to_end(principal)
            return found
        pending = self._starting.get(principal)
        if pending is None:
            pending = asyncio.ensure_future(self._start(principal))
            self._starting[principal] = pending
            pending.add_done_callback(lambda _f: self._starting.pop(principal, None))
        return await asyncio.shield(pending)

    async def _start(self, principal: Principal) -> KafkaClients:
        admin = AsyncAdminClient(self.admin_config(principal))
        producer = AsyncProducer(principal.overlay(self.config.client_config("producer")))
        try:
            await admin.start()
            await producer.start()
            if principal.user is not None:
                await admin.describe_cluster()      # the broker checks the credentials here
        except BaseException as e:
            await _close_quietly(admin, producer)
            if isinstance(e, asyncio.CancelledError) or self._closed:
                raise _shutting_down() from None
            if not isinstance(e, Exception):
                raise
            raise from_kafka(e) from e
        if self._closed:                # close() ran meanwhile: keep nothing it cannot close
            await _close_quietly(admin, producer)
            raise _shutting_down()
        clients = KafkaClients(principal, admin, producer)
        self._clients[principal] = clients
        self._evict()
        return clients

    def admin_config(self, principal: Principal = ANONYMOUS) -> dict[str, Any]:
        return principal.overlay(self.config.client_config("admin"))

    def consumer_config(self, principal: Principal = ANONYMOUS) -> dict[str, Any]:
        return principal.overlay(self.config.client_config("consumer"))

    async def cluster_id(self, clients: KafkaClients) -> str:
        """The Kafka cluster's id (asked once; a cluster keeps its id)."""
        if self._cluster_id is None:
            try:
                described = await clients.admin.describe_cluster()
            except Exception as e:
                raise from_kafka(e) from e
            self._cluster_id = described.cluster_id or ""
        return self._cluster_id

    async def close(self) -> None:
        """Close every client: those starting (cancelled; their waiters get 503), those
        started, and evicted ones still closing."""
        self._closed = True
        starting = list(self._starting.values())
        for pending in starting:
            pending.cancel()
        await asyncio.gather(*starting, return_exceptions=True)
        clients, self._clients = list(self._clients.values()), OrderedDict()
        await asyncio.gather(*(_close_quietly(c.admin, c.producer) for c in clients),
                             *self._closing)


def _shutting_down() -> RestError:
    return RestError(503, 503, "The REST proxy is shutting down")


async def _close_quietly(admin: AsyncAdminClient, producer: AsyncProducer) -> None:
    for close in (producer.close, admin.close):
        try:
            await close()
        except Exception:
            log.debug("closing a client failed", exc_info=True)
