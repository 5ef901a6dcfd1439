"""The asyncio connection and pool against a real broker process (and, for behaviours a
correct broker never shows, a scripted in-process server speaking the wire protocol)."""
from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, Callable, Coroutine

import pytest

from clients.aio import (BrokerConnection, ConnectionPool, KafkaConnectionError,
                         KafkaTimeoutError, UnsupportedVersionError)
from clients.protocol.errors import Code, KafkaError
from clients.protocol.headers import decode_request_header, encode_response_header, peek_api
from clients.protocol.messages import api
from clients.protocol.records import Record, build_batch, iter_batches
from clients.protocol.types import Reader, Writer
from tests.support.broker_process import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

HOST = "127.0.0.1"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def create_topic(conn: BrokerConnection, name: str, partitions: int = 1) -> Any:
    resp = await conn.request("CreateTopics", {"topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": 1}],
        "timeout_ms": 10000})
    (t,) = resp.topics
    assert t.error_code == 0, t
    return t


def fetch_body(topic_id: Any, offset: int = 0, max_wait_ms: int = 0, min_bytes: int = 1) -> dict:
    return {"max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}


# ---------------------------------------------------------------- against a real broker

def test_connect_negotiates_versions(broker):
    async def main() -> None:
        conn = await BrokerConnection.connect(HOST, broker.port, client_id="aio-test")
        try:
            assert not conn.closed
            assert conn.api_versions_version == 4
            versions = conn.broker_versions
            assert versions[18] == (0, 4)
            # Highest common version: ours is the declaration's max, theirs the advertised.
            for name in ("Metadata", "Produce", "Fetch", "CreateTopics", "ApiVersions"):
                a = api(name)
                assert conn.version_for(name) == min(a.max_version, versions[a.key][1])
            # Asking for a version outside the broker's range fails locally and leaves the
            # connection usable (the broker would close it).
            with pytest.raises(UnsupportedVersionError):
                await conn.request("Metadata", {"topics": []}, version=99)
            # version_for's answer is remembered per API: a request at another version is
            # still checked against both ranges
            with pytest.raises(UnsupportedVersionError):
                await conn.request("Metadata", {"topics": []},
                                   version=versions[api("Metadata").key][1] + 1)
            assert (await conn.request("ApiVersions", {}, version=0)).error_code == 0
            assert not conn.closed
        finally:
            await conn.close()
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await conn.request("Metadata", {"topics": []})
    run(main())


def test_connect_refused_is_a_connection_error():
    async def main() -> None:
        t0 = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            await BrokerConnection.connect(HOST, free_port(), timeout=5)
        assert time.monotonic() - t0 < 2
    run(main())


def test_metadata(broker):
    async def main() -> None:
        async with await BrokerConnection.connect(HOST, broker.port) as conn:
            resp = await conn.request("Metadata", {"topics": None})
            assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(0, HOST, broker.port)]
            assert resp.controller_id == 0
            # Pinned older versions work on the same connection.
            for v in (0, 1, 4, 9):
                r = await conn.request("Metadata", {"topics": [] if v == 0 else None}, version=v)
                assert [b.port for b in r.brokers] == [broker.port]
    run(main())


def test_create_topics_produce_fetch_round_trip(broker):
    async def main() -> None:
        async with await BrokerConnection.connect(HOST, broker.port) as conn:
            created = await create_topic(conn, "aio-rt")
            md = await conn.request("Metadata", {"topics": [{"name": "aio-rt"}]})
            (t,) = md.topics
            assert t.error_code == 0 and len(t.partitions) == 1
            topic_id = t.topic_id
            if conn.version_for("CreateTopics") >= 7:
                assert created.topic_id == topic_id

            records = [Record(b"k%d" % i, b"value-%d" % i, [("h", b"x")]) for i in range(3)]
            resp = await conn.request("Produce", {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": "aio-rt", "partition_data": [{"index": 0, "records": build_batch(records)}]}]})
            (p,) = resp.responses[0].partition_responses
            assert (p.error_code, p.base_offset) == (0, 0)

            # acks=0: no response; send() returns once written, request() refuses it.
            more = build_batch([Record(None, b"fire-and-forget")])
            body = {"acks": 0, "timeout_ms": 5000, "topic_data": [
                {"name": "aio-rt", "partition_data": [{"index": 0, "records": more}]}]}
            with pytest.raises(ValueError):
                await conn.request("Produce", body)
            await conn.send("Produce", body)
            assert conn.in_flight == 0

            # Negotiated Fetch (v16: by topic id); wait for all 4 records.
            assert conn.version_for("Fetch") >= 13
            values: list[bytes | None] = []
            deadline = time.monotonic() + 10
            while len(values) < 4 and time.monotonic() < deadline:
                f = await conn.request("Fetch", fetch_body(topic_id, offset=len(values),
                                                           max_wait_ms=500))
                assert f.error_code == 0
                part = f.responses[0].partitions[0]
                assert part.error_code == 0
                assert isinstance(part.records, memoryview)  # a slice, not a copy
                for batch in iter_batches(part.records):
                    values += [r.value for r in batch.records if r.offset >= len(values)]
            assert values == [b"value-0", b"value-1", b"value-2", b"fire-and-forget"]
            assert part.high_watermark == 4

            # The same data by topic name at Fetch v12.
            f12 = await conn.request("Fetch", {"max_wait_ms": 0, "min_bytes": 1, "topics": [
                {"topic": "aio-rt", "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
                version=12)
            got = [r.value for b in iter_batches(f12.responses[0].partitions[0].records)
                   for r in b.records]
            assert got == values
    run(main())


def test_100_pipelined_requests_are_matched(broker):
    async def main() -> None:
        async with await BrokerConnection.connect(HOST, broker.port) as conn:
            await create_topic(conn, "pipelined")
            n = 100

            async def one(i: int) -> Any:
                if i % 3 == 0:
                    return await conn.request("ApiVersions", {}, version=i % 4)
                if i % 3 == 1:
                    return await conn.request("Metadata", {"topics": [{"name": f"missing-{i}"}],
                                                           "allow_auto_topic_creation": False})
                return await conn.request("ListOffsets", {"replica_id": -1, "topics": [
                    {"name": "pipelined", "partitions": [{"partition_index": 0,
                                                          "timestamp": -(i % 2) - 1}]}]})

            tasks = [asyncio.create_task(one(i)) for i in range(n)]
            await asyncio.sleep(0)
            # Every task has written its frame before any response was read: all in flight.
            assert conn.in_flight == n
            results = await asyncio.gather(*tasks)
            assert conn.in_flight == 0
            for i, r in enumerate(results):
                if i % 3 == 0:
                    assert r.error_code == 0 and any(k.api_key == 18 for k in r.api_keys)
                elif i % 3 == 1:
                    assert [(t.name, t.error_code) for t in r.topics] == [
                        (f"missing-{i}", Code.UNKNOWN_TOPIC_OR_PARTITION)]
                else:
                    (p,) = r.topics[0].partitions
                    assert r.topics[0].name == "pipelined" and p.error_code == 0
                    assert p.offset == 0
    run(main())


@pytest.mark.alone
def test_kill9_fails_in_flight_promptly_and_pool_reconnects(broker):
    async def main() -> None:
        pool = ConnectionPool(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
        node = (HOST, broker.port)
        try:
            conn = await pool.get(node)
            assert await pool.get(node) is conn
            t = await create_topic(conn, "killed")
            md = await conn.request("Metadata", {"topics": [{"name": "killed"}]})
            topic_id = md.topics[0].topic_id
            # A long poll (nothing to fetch) with requests queued behind it, all in flight.
            inflight = [asyncio.create_task(conn.request(
                "Fetch", fetch_body(topic_id, max_wait_ms=20000), timeout=60))]
            inflight += [asyncio.create_task(conn.request("Metadata", {"topics": None}, timeout=60))
                         for _ in range(5)]
            await asyncio.sleep(0.3)
            assert conn.in_flight == 6
            t0 = time.monotonic()
            await asyncio.to_thread(broker.kill9)
            results = await asyncio.gather(*inflight, return_exceptions=True)
            elapsed = time.monotonic() - t0
            assert all(isinstance(r, KafkaConnectionError) for r in results), results
            assert not any(isinstance(r, KafkaError) for r in results)
            assert elapsed < 2.0, elapsed
            assert conn.closed

            # Down: the pool tries, fails, and backs off.
            with pytest.raises(KafkaConnectionError):
                await pool.get(node)
            assert pool.backoff_remaining(node) > 0
            with pytest.raises(KafkaConnectionError):
                await pool.get(node)

            broker.stop()  # reaps the dead process's bookkeeping (log file)
            await asyncio.to_thread(broker.start)
            conn2 = await pool.get(node)
            assert conn2 is not conn and not conn2.closed
            md = await conn2.request("Metadata", {"topics": [{"name": "killed"}]})
            assert md.topics[0].error_code == 0
            assert t.name == "killed"
        finally:
            await pool.close_all()
        with pytest.raises(KafkaConnectionError):
            await pool.get(node)
    run(main())


def test_request_timeout_closes_the_connection(broker):
    async def main() -> None:
        conn = await BrokerConnection.connect(HOST, broker.port, request_timeout=5.0)
        await create_topic(conn, "slow")
        md = await conn.request("Metadata", {"topics": [{"name": "slow"}]})
        topic_id = md.topics[0].topic_id
        # Within its timeout, a long poll completes normally.
        f = await conn.request("Fetch", fetch_body(topic_id, max_wait_ms=200), timeout=5)
        assert f.responses[0].partitions[0].error_code == 0

        # A 5 s long poll with a 0.3 s timeout, and a request pipelined behind it.
        slow = asyncio.create_task(conn.request("Fetch", fetch_body(topic_id, max_wait_ms=5000),
                                                timeout=0.3))
        behind = asyncio.create_task(conn.request("Metadata", {"topics": None}, timeout=30))
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            await slow
        assert 0.25 < time.monotonic() - t0 < 1.5
        assert isinstance(info.value, TimeoutError) and not isinstance(info.value, KafkaError)
        # Kafka semantics: the timeout closed the connection, failing the request behind it.
        with pytest.raises(KafkaConnectionError):
            await behind
        assert conn.closed and "timed out" in str(conn.close_reason)
        with pytest.raises(KafkaConnectionError):
            await conn.request("Metadata", {"topics": None})
        await conn.close()
    run(main())


@pytest.mark.alone
def test_a_shorter_timeout_behind_a_longer_one_fires_on_time(broker):
    """request_nowait's deadlines are watched by one timer at the earliest: a request with
    a short timeout sent behind one with a long timeout re-arms it. The timed-out request
    fails with KafkaTimeoutError, closing the connection as request() does."""
    async def main() -> None:
        conn = await BrokerConnection.connect(HOST, broker.port, request_timeout=30.0)
        await create_topic(conn, "short-behind-long")
        md = await conn.request("Metadata", {"topics": [{"name": "short-behind-long"}]})
        topic_id = md.topics[0].topic_id
        long_poll = conn.request_nowait("Fetch", fetch_body(topic_id, max_wait_ms=3000),
                                        timeout=20)
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            await conn.request_nowait("Metadata", {"topics": None}, timeout=0.3)
        assert 0.25 < time.monotonic() - t0 < 1.5
        with pytest.raises(KafkaConnectionError):
            await long_poll
        assert conn.closed and "timed out" in str(conn.close_reason)
        await conn.close()
    run(main())


def test_answered_requests_leave_no_deadline_and_one_timer_behind(broker):
    """Thousands of requests a second (a producer's, through request_nowait) must not
    leave a timer each in the loop, nor keep their answers until a timeout would have
    fired."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with await BrokerConnection.connect(HOST, broker.port) as conn:
            before = sum(1 for h in loop._scheduled if not h.cancelled())
            futures = [conn.request_nowait("Metadata", {"topics": None}) for _ in range(300)]
            assert conn.in_flight == 300
            assert sum(1 for h in loop._scheduled if not h.cancelled()) <= before + 1
            answers = await asyncio.gather(*futures)
            assert all(a.brokers for a in answers)
            assert conn._deadlines == []
            assert sum(1 for h in loop._scheduled if not h.cancelled()) <= before + 1
    run(main())


def test_cancelled_request_does_not_break_matching(broker):
    async def main() -> None:
        async with await BrokerConnection.connect(HOST, broker.port) as conn:
            await create_topic(conn, "cancel")
            md = await conn.request("Metadata", {"topics": [{"name": "cancel"}]})
            poll = asyncio.create_task(conn.request(
                "Fetch", fetch_body(md.topics[0].topic_id, max_wait_ms=500)))
            after = asyncio.create_task(conn.request("Metadata", {"topics": [{"name": "cancel"}]}))
            await asyncio.sleep(0.05)
            poll.cancel()
            r = await after  # its response still matches although the one before was dropped
            assert r.topics[0].name == "cancel"
            assert not conn.closed and conn.in_flight == 0
    run(main())


# ---------------------------------------------------------------- scripted servers

# handler(api_key, version, correlation_id, request) -> bytes to write (None: nothing);
# (bytes, True): write them, then close the connection.
Handler = Callable[[int, int, int, Any], "bytes | tuple[bytes, bool] | None"]


def frame(api_name: str, version: int, cid: int, body: Any, *, body_version: int | None = None) -> bytes:
    a = api(api_name)
    w = Writer()
    encode_response_header(w, cid, a.response_header_version(version))
    a.encode_response(body, version if body_version is None else body_version, w)
    payload = w.getvalue()
    return struct.pack(">i", len(payload)) + payload


async def scripted_server(handler: Handler) -> tuple[asyncio.Server, int, list[tuple[int, int]]]:
    """A server that decodes each request and writes what `handler(key, version, cid,
    body)` returns (nothing if None). Returns the server, its port and the (key, version)
    of every request received."""
    seen: list[tuple[int, int]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                data = await reader.readexactly(size)
                key, version, cid = peek_api(data)
                seen.append((key, version))
                a = api(key)
                r = Reader(data)
                decode_request_header(r, a.request_header_version(version))
                out = handler(key, version, cid, a.decode_request(r, version))
                close = False
                if isinstance(out, tuple):
                    out, close = out
                if out:
                    writer.write(out)
                    await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, HOST, 0)
    return server, server.sockets[0].getsockname()[1], seen


def api_versions_ok(version: int, cid: int, max_av: int = 3) -> bytes:
    return frame("ApiVersions", version, cid, {"error_code": 0, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": max_av},
        {"api_key": 3, "min_version": 0, "max_version": 12}]})


def test_api_versions_fallback_retries_at_the_brokers_version():
    """An old broker knows ApiVersions up to v2: it answers our v4 with error 35 in the v0
    format, and the client retries at v2."""
    def handler(key: int, version: int, cid: int, body: Any) -> bytes | None:
        if version > 2:
            return frame("ApiVersions", 0, cid, {"error_code": 35, "api_keys": [
                {"api_key": 18, "min_version": 0, "max_version": 2}]})
        return api_versions_ok(version, cid, max_av=2)

    async def main() -> None:
        server, port, seen = await scripted_server(handler)
        async with server:
            async with await BrokerConnection.connect(HOST, port) as conn:
                assert seen == [(18, 4), (18, 2)]
                assert conn.api_versions_version == 2
                assert conn.version_for("ApiVersions") == 2
                assert conn.version_for("Metadata") == 12
                with pytest.raises(UnsupportedVersionError):     # an API it does not advertise
                    conn.version_for("ElectLeaders")
                with pytest.raises(UnsupportedVersionError):
                    conn.version_for("Produce")
    run(main())


def test_correlation_mismatch_closes_the_connection():
    def handler(key: int, version: int, cid: int, body: Any) -> bytes | None:
        if key == 18:
            return api_versions_ok(version, cid)
        return frame("Metadata", version, cid + 1000, {"brokers": [], "topics": []})

    async def main() -> None:
        server, port, _ = await scripted_server(handler)
        async with server:
            conn = await BrokerConnection.connect(HOST, port)
            with pytest.raises(KafkaConnectionError) as info:
                await conn.request("Metadata", {"topics": None}, timeout=5)
            assert "correlation id mismatch" in str(info.value)
            assert conn.closed
            await conn.close()
    run(main())


def test_connection_lost_mid_frame_fails_in_flight():
    def handler(key: int, version: int, cid: int, body: Any) -> bytes | tuple[bytes, bool] | None:
        if key == 18:
            return api_versions_ok(version, cid)
        whole = frame("Metadata", version, cid, {"brokers": [], "topics": []})
        return whole[:len(whole) // 2], True  # half a frame, then the server closes

    async def main() -> None:
        server, port, _ = await scripted_server(handler)
        async with server:
            conn = await BrokerConnection.connect(HOST, port)
            t0 = time.monotonic()
            with pytest.raises(KafkaConnectionError):
                await conn.request("Metadata", {"topics": None}, timeout=10)
            assert time.monotonic() - t0 < 1
            assert conn.closed
            await conn.close()
    run(main())


def test_api_versions_without_answer_is_a_connect_failure():
    async def main() -> None:
        server, port, _ = await scripted_server(lambda *a: None)
        async with server:
            t0 = time.monotonic()
            with pytest.raises(KafkaConnectionError):
                await BrokerConnection.connect(HOST, port, timeout=0.5)
            assert time.monotonic() - t0 < 2
    run(main())


# ---------------------------------------------------------------- pool, no sockets

class _FakeConn:
    def __init__(self, host: str, port: int):
        self.host, self.port, self.closed = host, port, False

    async def close(self) -> None:
        self.closed = True


def test_pool_backoff_and_shared_attempts():
    async def main() -> None:
        attempts: list[tuple[float, str, int]] = []
        fail = True

        async def connector(host: str, port: int) -> Any:
            attempts.append((asyncio.get_running_loop().time(), host, port))
            await asyncio.sleep(0.01)
            if fail:
                raise KafkaConnectionError("refused")
            return _FakeConn(host, port)

        pool = ConnectionPool(connector=connector, reconnect_backoff_ms=50,
                              reconnect_backoff_max_ms=1000)
        # Backoff doubles from 50 ms to the 1 s cap (with +-20% jitter).
        for failures, base in [(0, 0.05), (1, 0.1), (2, 0.2), (4, 0.8), (5, 1.0), (40, 1.0)]:
            assert base * 0.8 <= pool.backoff(failures) <= base * 1.2

        pool.set_address(1, "h1", 9092)
        for _ in range(3):
            with pytest.raises(KafkaConnectionError):
                await pool.get(1)
        gaps = [b[0] - a[0] for a, b in zip(attempts, attempts[1:])]
        assert gaps[0] >= 0.1 * 0.8 and gaps[1] >= 0.2 * 0.8, gaps

        fail = False
        attempts.clear()
        c1, c2 = await asyncio.gather(pool.get(1), pool.get(1))
        assert c1 is c2 and len(attempts) == 1  # concurrent gets share one attempt
        assert await pool.get(1) is c1

        # A new address for the node replaces the connection at the next get.
        pool.set_address(1, "h2", 9093)
        c3 = await pool.get(1)
        assert (c3.host, c3.port) == ("h2", 9093) and c1.closed

        # A closed connection is replaced lazily.
        await c3.close()
        c4 = await pool.get(1)
        assert c4 is not c3 and not c4.closed

        with pytest.raises(KafkaConnectionError):
            await pool.get(7)  # no address known

        await pool.close_all()
        assert c4.closed and pool.closed
        with pytest.raises(KafkaConnectionError):
            await pool.get(1)
    run(main())
