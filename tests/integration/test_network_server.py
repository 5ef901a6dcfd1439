"""The listener in-process with a scripted dispatcher, over real loopback sockets: what
happens to a connection's pipeline when one request closes the connection."""
from __future__ import annotations

import asyncio
import os
import struct

import pytest

from broker.server.network import MAX_QUEUED_REQUESTS, CloseConnection, KafkaServer, Response

pytestmark = pytest.mark.integration


async def _connections_left_after_closing(server: KafkaServer, timeout: float = 5.0) -> int:
    """Connections the server still holds once they had `timeout` to go; stops it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while server.connection_count and loop.time() < deadline:
        await asyncio.sleep(0.05)
    left = server.connection_count
    await server.stop()
    return left


def test_a_closing_request_behind_a_full_pipeline_releases_the_connection():
    """The first request closes the connection while the client has pipelined more
    requests than the per-connection queue holds: the reader was waiting for room in that
    queue and nothing would ever take from it again, so the connection's task (and every
    queued request with its frame) lived until the broker stopped."""

    async def scenario() -> tuple[int, int]:
        calls = 0

        async def dispatch(frame, conn):
            nonlocal calls
            calls += 1
            if calls == 1:
                await asyncio.sleep(0.3)        # the rest of the pipeline arrives meanwhile
                raise CloseConnection("scripted: this request closes the connection")
            return Response([b"ok"])

        server = KafkaServer("127.0.0.1", 0, dispatch)
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        frames = (MAX_QUEUED_REQUESTS + 40)
        writer.write((struct.pack(">i", 4) + b"ping") * frames)
        await writer.drain()
        try:
            await asyncio.wait_for(reader.read(), 5)
        except (ConnectionError, asyncio.TimeoutError):
            pass
        writer.close()
        left = await _connections_left_after_closing(server)
        return left, calls

    left, calls = asyncio.run(scenario())
    assert calls >= MAX_QUEUED_REQUESTS     # the pipeline really was full
    assert left == 0, "the connection's task is still waiting for room in its queue"


def test_an_error_while_sending_a_file_region_closes_the_connection():
    """os.sendfile failing with something other than a connection error (here EBADF) used
    to kill the connection's sender silently: the client waited for the rest of a frame
    whose head it had received, and the connection stayed open."""
    from broker.log.segment import FileRegion

    async def scenario() -> tuple[bytes | None, int]:
        async def dispatch(frame, conn):
            with open(__file__, "rb") as f:
                pass                            # a closed file, and a descriptor nobody has
            return Response([b"head", FileRegion(f, 999_999, 0, 10)])

        server = KafkaServer("127.0.0.1", 0, dispatch)
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(struct.pack(">i", 4) + b"ping")
        await writer.drain()
        try:
            got = await asyncio.wait_for(reader.read(), 3)
        except ConnectionError:
            got = b""
        except asyncio.TimeoutError:
            got = None                          # still open after 3 s
        writer.close()
        left = await _connections_left_after_closing(server)
        return got, left

    got, left = asyncio.run(scenario())
    assert got is not None, "the connection stayed open after its response failed"
    assert len(got) < 4 + 14                    # never a whole frame
    assert left == 0


def test_a_file_region_too_big_for_the_socket_goes_out_whole_and_in_order(tmp_path):
    """A region the socket cannot take at once continues in the sender task: a review
    found that continuation closing the connection instead (every large fetch answer)."""
    from broker.log.segment import FileRegion
    data = os.urandom(8 << 20)
    path = tmp_path / "seg"
    path.write_bytes(data)

    async def scenario() -> bytes:
        f = open(path, "rb")

        async def dispatch(frame, conn):
            if frame[8:] == b"big":
                return Response([b"head", FileRegion(f, f.fileno(), 0, len(data)), b"tail"])
            return Response([b"small"])

        server = KafkaServer("127.0.0.1", 0, dispatch, eager_api_keys=frozenset({0}))
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        req = struct.pack(">hhi", 0, 0, 1)
        writer.write(struct.pack(">i", len(req) + 3) + req + b"big" +
                     struct.pack(">i", len(req) + 5) + req + b"other")
        await writer.drain()
        await asyncio.sleep(0.2)            # the server's socket buffer fills meanwhile
        got = await asyncio.wait_for(reader.readexactly(4 + 4 + len(data) + 4 + 4 + 5), 10)
        writer.close()
        await server.stop()
        f.close()
        return got

    got = asyncio.run(scenario())
    assert got == struct.pack(">i", 8 + len(data)) + b"head" + data + b"tail" + \
        struct.pack(">i", 5) + b"small"


def test_stopping_the_server_answers_what_was_asked_first():
    """Broker.stop answers acks=all waits with NOT_LEADER just before stopping its
    listeners so clients retry elsewhere at once: those answers must still go out."""
    async def scenario() -> bytes:
        gate = asyncio.get_running_loop().create_future()

        async def dispatch(frame, conn):
            return Response([await gate])

        server = KafkaServer("127.0.0.1", 0, dispatch, eager_api_keys=frozenset({0}))
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        req = struct.pack(">hhi", 0, 0, 1)
        writer.write(struct.pack(">i", len(req)) + req)
        await writer.drain()
        await asyncio.sleep(0.05)
        gate.set_result(b"NOT_LEADER")      # what fail_waiters does
        await server.stop()
        got = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return got

    assert asyncio.run(scenario()) == struct.pack(">i", 10) + b"NOT_LEADER"
