"""A standalone Broker inside the test's event loop, driven through its real Dispatcher
(no sockets): for tests of request handling that need the whole broker behind them."""
from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from broker.config import BrokerConfig
from broker.main import Broker
from broker.server.dispatch import Dispatcher
from broker.server.network import ConnectionInfo, Response
from clients.protocol.headers import RequestHeader, encode_request_header
from clients.protocol.messages import API_BY_NAME
from clients.protocol.types import Writer


@asynccontextmanager
async def standalone_broker(log_dir: Path, topics: dict[str, int]
                            ) -> AsyncIterator[tuple[Broker, Dispatcher, ConnectionInfo]]:
    """(broker, dispatcher, a client connection's info) with `topics` (name -> partition
    count, replication factor 1) created; logs and coordinator closed on the way out."""
    broker = Broker(BrokerConfig.from_dict({"log.dirs": str(log_dir),
                                            "listeners": "PLAINTEXT://127.0.0.1:0"}))
    await broker.store.start()
    try:
        for name, partitions in topics.items():
            await broker.topic_admin.create(name, partitions, 1)
        yield broker, Dispatcher(broker.services, broker.request_stats), ConnectionInfo(("127.0.0.1", 1), "PLAINTEXT")
    finally:
        broker.log_manager.close()
        await broker.store.stop()


async def answer(dispatch: Dispatcher, frame: memoryview, conn: ConnectionInfo) -> Response | None:
    """The Dispatcher's answer to `frame`, waited for when the handler must wait."""
    result = dispatch(frame, conn)
    return result if result is None or isinstance(result, Response) else await result


def request_frame(api_name: str, body: dict, version: int, client_id: str = "test",
                  correlation_id: int = 1) -> memoryview:
    """A request as the network layer hands it to the Dispatcher: header and body."""
    api = API_BY_NAME[api_name]
    w = Writer()
    encode_request_header(w, RequestHeader(api.key, version, correlation_id, client_id),
                          api.request_header_version(version))
    api.encode_request(body, version, w)
    return memoryview(w.getvalue())
