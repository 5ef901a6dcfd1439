"""A connection's requests in, responses out (broker.server.network._FrameProtocol) with a
scripted dispatcher and a transport that records writes: order, eagerness, closing."""
from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from broker.server.network import CloseConnection, KafkaServer, Response, _FrameProtocol

EAGER, LAZY = 0, 99     # API keys: Produce is eager here, 99 is not


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closing = False
        self.aborted = False
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_reading(self) -> bool:
        return not self.paused

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def responses(self) -> list[bytes]:
        data = b"".join(self.written)
        out, pos = [], 0
        while pos < len(data):
            n = struct.unpack_from(">i", data, pos)[0]
            out.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
        return out


def _frame(api_key: int, tag: bytes) -> bytes:
    body = struct.pack(">hhi", api_key, 0, 1) + tag
    return struct.pack(">i", len(body)) + body


def _connect(dispatch) -> tuple[_FrameProtocol, _Transport]:
    server = KafkaServer("127.0.0.1", 0, dispatch, eager_api_keys=frozenset({EAGER}))
    proto = _FrameProtocol(server)
    transport = _Transport()
    proto.connection_made(transport)
    return proto, transport


def _feed(proto: _FrameProtocol, data: bytes) -> None:
    buf = proto.get_buffer(-1)
    buf[:len(data)] = data
    del buf
    proto.buffer_updated(len(data))


def _tag(frame: memoryview) -> bytes:
    return bytes(frame[8:])


def test_an_eager_request_is_answered_before_buffer_updated_returns() -> None:
    async def main() -> None:
        def dispatch(frame, conn):
            return Response([b"re:" + _tag(frame)])
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER, b"a"))
        assert t.responses() == [b"re:a"]           # no event-loop pass in between
        _feed(proto, _frame(LAZY, b"b"))
        assert t.responses() == [b"re:a"]           # a lazy one runs as a task
        await asyncio.sleep(0)
        assert t.responses() == [b"re:a", b"re:b"]
    asyncio.run(main())


def test_responses_go_out_in_request_order_whatever_finishes_first() -> None:
    async def main() -> None:
        async def dispatch(frame, conn):
            tag = _tag(frame)
            if tag == b"slow":
                await asyncio.sleep(0.05)
            return Response([tag])
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER, b"slow") + _frame(EAGER, b"fast") + _frame(LAZY, b"lazy"))
        assert t.responses() == []                 # "fast" waits behind "slow"
        await asyncio.sleep(0.2)
        assert t.responses() == [b"slow", b"fast", b"lazy"]
    asyncio.run(main())


def test_behind_an_unfinished_lazy_request_eager_frames_start_in_order() -> None:
    """Effects apply in request order: a Produce behind, say, an InitProducerId still
    running must not run before it."""
    async def main() -> None:
        started: list[bytes] = []

        async def answer(tag: bytes) -> Response:
            await asyncio.sleep(0)
            return Response([tag])

        def dispatch(frame, conn):
            started.append(_tag(frame))         # its effects, before any wait
            return answer(_tag(frame))
        proto, t = _connect(dispatch)
        _feed(proto, _frame(LAZY, b"first") + _frame(EAGER, b"second"))
        assert started == []
        await asyncio.sleep(0.01)
        assert started == [b"first", b"second"]
        assert t.responses() == [b"first", b"second"]
        _feed(proto, _frame(EAGER, b"third"))     # nothing lazy left: eager again
        assert started[-1] == b"third"
    asyncio.run(main())


def test_a_waiting_eager_request_continues_in_a_task_and_is_cancelled_with_the_connection(recwarn) -> None:
    async def main() -> None:
        cleaned: list[str] = []
        gate = asyncio.get_running_loop().create_future()

        async def after_gate() -> Response:
            try:
                await gate
                return Response([b"done"])
            finally:
                cleaned.append("finally")

        def dispatch(frame, conn):
            return after_gate()                 # it must wait: the rest runs in a task
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER, b"x") + _frame(EAGER, b"y"))
        await asyncio.sleep(0)
        assert t.responses() == []
        gate.set_result(None)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert t.responses() == [b"done", b"done"] and cleaned == ["finally", "finally"]

        gate2 = asyncio.get_running_loop().create_future()

        async def forever() -> None:
            try:
                await gate2
            finally:
                cleaned.append("cancelled")

        def waits_forever(frame, conn):
            return forever()
        # Cancelled before its task's first step: the rest never starts and is closed
        # with the task (no "never awaited" warning), and the connection closes.
        cleaned.clear()
        proto, t = _connect(waits_forever)
        _feed(proto, _frame(EAGER, b"z"))
        proto.connection_lost(None)
        await asyncio.sleep(0)
        assert cleaned == [] and not gate2.done() and proto.closed.done()
        # Cancelled once its task waits: its cleanup runs and what it waited on goes too.
        proto, t = _connect(waits_forever)
        _feed(proto, _frame(EAGER, b"z"))
        await asyncio.sleep(0)
        proto.connection_lost(None)
        await asyncio.sleep(0)
        assert cleaned == ["cancelled"] and gate2.cancelled()
    asyncio.run(main())
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_a_request_that_closes_the_connection_drops_the_rest() -> None:
    async def main() -> None:
        def dispatch(frame, conn):
            if _tag(frame) == b"bad":
                raise CloseConnection("scripted")
            return Response([_tag(frame)])
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER, b"ok") + _frame(EAGER, b"bad") + _frame(EAGER, b"never"))
        assert t.responses() == [b"ok"] and t.aborted
    asyncio.run(main())


def test_end_of_stream_answers_what_was_asked_then_closes() -> None:
    async def main() -> None:
        async def dispatch(frame, conn):
            await asyncio.sleep(0.01)
            return Response([_tag(frame)])
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER, b"a") + _frame(LAZY, b"b"))
        proto.eof_received()
        assert not t.closing
        await asyncio.sleep(0.1)
        assert t.responses() == [b"a", b"b"] and t.closing and not t.aborted
    asyncio.run(main())


def test_a_full_queue_stops_reading_until_it_drains() -> None:
    from broker.server.network import MAX_QUEUED_REQUESTS

    async def main() -> None:
        gate = asyncio.get_running_loop().create_future()

        async def dispatch(frame, conn):
            await gate
            return Response([b"."])
        proto, t = _connect(dispatch)
        for _ in range(MAX_QUEUED_REQUESTS):
            _feed(proto, _frame(EAGER, b"q"))
        assert t.paused
        gate.set_result(None)
        await asyncio.sleep(0.01)
        assert len(t.responses()) == MAX_QUEUED_REQUESTS and not t.paused
    asyncio.run(main())


@pytest.mark.parametrize("eager", [True, False])
def test_an_unexpected_error_closes_the_connection_loudly(eager: bool, caplog) -> None:
    async def main() -> None:
        async def dispatch(frame, conn):
            raise RuntimeError("bug")
        proto, t = _connect(dispatch)
        _feed(proto, _frame(EAGER if eager else LAZY, b"x"))
        await asyncio.sleep(0)
        assert t.aborted and t.responses() == []
    asyncio.run(main())
    assert "request failed unexpectedly" in caplog.text


@pytest.mark.parametrize("when", ["eager-at-once", "eager-later", "lazy"])
def test_a_handler_cancelled_from_outside_closes_the_connection(when: str, caplog) -> None:
    """A review found the connection wedged (the answer never came, nothing else was
    written, it never closed) or asyncio's "Fatal error" from buffer_updated."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = loop.create_future()
        if when == "eager-at-once":
            gate.cancel()

        async def dispatch(frame, conn):
            await gate
            return Response([b"never"])
        proto, t = _connect(dispatch)
        _feed(proto, _frame(LAZY if when == "lazy" else EAGER, b"x") + _frame(EAGER, b"y"))
        await asyncio.sleep(0)
        if when != "eager-at-once":
            gate.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert t.aborted and t.responses() == []
    asyncio.run(main())
    assert "Fatal error" not in caplog.text


def test_no_more_than_the_queue_limit_runs_at_once_however_many_frames_one_read_holds() -> None:
    """A review found every frame of a 256 KiB read dispatched at once (5,000 parked
    fetches from one connection); the old reader stopped at the queue limit."""
    from broker.server.network import MAX_QUEUED_REQUESTS

    async def main() -> None:
        running = peak = 0
        gate = asyncio.get_running_loop().create_future()

        async def after_gate(tag: bytes) -> Response:
            nonlocal running
            await gate
            running -= 1
            return Response([tag])

        def dispatch(frame, conn):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            return after_gate(_tag(frame))
        proto, t = _connect(dispatch)
        n = 5 * MAX_QUEUED_REQUESTS
        _feed(proto, b"".join(_frame(EAGER, b"%d" % i) for i in range(n)))
        assert peak == MAX_QUEUED_REQUESTS and t.paused
        gate.set_result(None)
        for _ in range(20):
            await asyncio.sleep(0)
        assert t.responses() == [b"%d" % i for i in range(n)]
        assert peak == MAX_QUEUED_REQUESTS and not t.paused
    asyncio.run(main())


def test_a_peer_gone_during_a_direct_sendfile_closes_quietly(tmp_path, caplog) -> None:
    """A follower or consumer killed mid-fetch is routine: the broken pipe os.sendfile
    raises is not a broker bug, so no ERROR with a traceback (as chaos runs logged)."""
    import socket

    from broker.log.segment import FileRegion

    path = tmp_path / "segment"
    path.write_bytes(b"x" * 4096)
    listener = socket.create_server(("127.0.0.1", 0))
    peer = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    listener.close()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()                            # the reader is gone (reset): sendfile fails

    class _SocketTransport(_Transport):
        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return ours if name == "socket" else super().get_extra_info(name, default)

    async def main() -> None:
        with open(path, "rb", buffering=0) as f:
            async def dispatch(frame, conn):
                return Response([b"head", FileRegion(f, f.fileno(), 0, 4096)])
            server = KafkaServer("127.0.0.1", 0, dispatch, eager_api_keys=frozenset({EAGER}))
            proto = _FrameProtocol(server)
            t = _SocketTransport()
            proto.connection_made(t)
            _feed(proto, _frame(EAGER, b"x"))
            await asyncio.sleep(0)
            assert t.aborted
    try:
        with caplog.at_level("DEBUG"):
            asyncio.run(main())
    finally:
        ours.close()
    assert not [r for r in caplog.records if r.levelno >= 40], caplog.text
