"""Fetch sends record bytes with sendfile: segment data never enters Python (invariant 6).

The broker runs in this process (in a thread with its own event loop) so the test can
make every Python-level way of reading file data fail — os.read/readv, os.pread beyond a
batch header, asyncio's read-into-memory sendfile fallback — and count os.sendfile bytes.
A real librdkafka consumer then reads everything back through that broker.
"""
from __future__ import annotations

import asyncio
import os
import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.config import BrokerConfig
from broker.main import Broker
from clients.protocol.batch_header import HEADER_SIZE
from tests.support.broker_process import free_port

pytestmark = pytest.mark.integration

N = 20_000
VALUE = b"s" * 500


class InProcessBroker:
    def __init__(self, tmp_path):
        self.port = free_port()
        cfg = BrokerConfig.from_dict({
            "broker.id": "0", "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(tmp_path / "logs"), "num.partitions": "1",
        })
        self.loop = asyncio.new_event_loop()
        self.broker = Broker.__new__(Broker)
        self._cfg = cfg
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main():
            Broker.__init__(self.broker, self._cfg)
            await self.broker.start()
            self._ready.set()
            self._stop = asyncio.Event()
            await self._stop.wait()
            await self.broker.stop()
        self.loop.run_until_complete(main())

    def start(self) -> "InProcessBroker":
        self.thread.start()
        assert self._ready.wait(20)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(20)


@pytest.fixture
def inproc_broker(tmp_path):
    b = InProcessBroker(tmp_path).start()
    yield b
    b.stop()


def test_fetch_never_reads_segment_data_into_python(inproc_broker, monkeypatch):
    bootstrap = f"127.0.0.1:{inproc_broker.port}"
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    for i in range(N):
        p.produce("zero-copy", key=b"%d" % i, value=VALUE)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0

    forbidden = []

    def refuse(name):
        def fail(*a, **k):
            forbidden.append(name)
            raise AssertionError(f"{name} called on the fetch path")
        return fail

    real_pread = os.pread

    def header_only_pread(fd, n, offset):
        if n > HEADER_SIZE:
            forbidden.append(f"os.pread({n})")
            raise AssertionError(f"os.pread of {n} bytes: segment data read into Python")
        return real_pread(fd, n, offset)

    sent = {"bytes": 0, "calls": 0}
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd, in_fd, offset, count, *a, **k):
        n = real_sendfile(out_fd, in_fd, offset, count, *a, **k)
        sent["bytes"] += n
        sent["calls"] += 1
        return n

    monkeypatch.setattr(os, "read", refuse("os.read"))
    monkeypatch.setattr(os, "readv", refuse("os.readv"))
    monkeypatch.setattr(os, "preadv", refuse("os.preadv"))
    monkeypatch.setattr(os, "pread", header_only_pread)
    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "_sendfile_fallback", refuse("sendfile fallback"))
    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "_sock_sendfile_fallback",
                        refuse("sock_sendfile fallback"), raising=False)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition("zero-copy", 0, 0)])
    got = 0
    last = -1
    try:
        while True:
            m = c.poll(5.0)
            assert m is not None, f"stalled after {got} records"
            if m.error():
                if m.error().code() == -191:
                    break
                raise AssertionError(m.error())
            assert m.offset() == last + 1 and m.value() == VALUE
            last = m.offset()
            got += 1
    finally:
        c.close()
    assert forbidden == []
    assert got == N
    # Every record byte went out through os.sendfile.
    assert sent["bytes"] >= N * len(VALUE), sent
    print(f"fetched {got} records; os.sendfile sent {sent['bytes']} bytes in {sent['calls']} calls")


# ---- the network layer's region sender: os.sendfile first, loop.sendfile for the rest ----

def _send_through_server(tmp_path, prefix: bytes, file_bytes: bytes, position: int, size: int,
                         suffix: bytes, monkeypatch) -> tuple[bytes, int, dict]:
    """Serve one connection that writes prefix, the file region, suffix, then closes; the
    client reads only after a pause, so the socket buffer fills. Returns what the client
    received, what _send_region returned, and how often each path ran."""
    from broker.server import network
    from broker.log.segment import FileRegion

    path = tmp_path / "region.bin"
    path.write_bytes(file_bytes)
    calls = {"os.sendfile": 0, "loop.sendfile": 0}
    real_os_sendfile = os.sendfile

    def counting_os_sendfile(*a):
        calls["os.sendfile"] += 1
        return real_os_sendfile(*a)
    monkeypatch.setattr(network.os, "sendfile", counting_os_sendfile)

    async def main():
        loop = asyncio.get_running_loop()
        real_loop_sendfile = loop.sendfile

        async def counting_loop_sendfile(*a, **k):
            calls["loop.sendfile"] += 1
            return await real_loop_sendfile(*a, **k)
        loop.sendfile = counting_loop_sendfile
        result = {}
        f = open(path, "rb")

        class Proto(network._FrameProtocol):
            def connection_made(self, transport):
                self.transport = transport
                result["task"] = loop.create_task(serve(self, transport))

        async def serve(proto, transport):
            sock = transport.get_extra_info("socket")
            import socket as _s
            sock.setsockopt(_s.SOL_SOCKET, _s.SO_SNDBUF, 64 * 1024)
            transport.write(prefix)
            region = FileRegion(f, f.fileno(), position, size)
            result["sent"] = await network._send_region(loop, proto, transport, region)
            transport.write(suffix)
            await proto.drain()
            transport.close()

        server = await loop.create_server(
            lambda: Proto(SimpleNamespace(max_request_size=1 << 20, bytes_in=0, listener_name="PLAINTEXT",
                                  security_protocol="PLAINTEXT", ssl_principal=None, ssl_context=None)),
            "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.2)        # let the server fill its socket buffer first
        got = await reader.read()
        await result["task"]
        writer.close()
        server.close()
        f.close()
        return got, result["sent"]

    got, sent = asyncio.run(main())
    return got, sent, calls


@pytest.mark.parametrize("prefix_size", [10, 4 << 20], ids=["empty-buffer", "buffered-prefix"])
def test_region_sender_keeps_order_and_bytes_when_the_socket_fills(tmp_path, monkeypatch, prefix_size):
    data = os.urandom(8 << 20)
    prefix, suffix = b"P" * prefix_size, b"S" * 100
    got, sent, calls = _send_through_server(tmp_path, prefix, data, 12345, 6 << 20, suffix,
                                            monkeypatch)
    assert sent == 6 << 20
    assert got == prefix + data[12345:12345 + (6 << 20)] + suffix
    # 6 MiB cannot fit a 64 KiB send buffer: the rest waited in loop.sendfile.
    assert calls["loop.sendfile"] == 1
    if prefix_size == 10:
        assert calls["os.sendfile"] >= 1      # the direct path went first
    print(f"prefix {prefix_size} B: {calls}")


def test_region_sender_sends_small_regions_with_one_direct_sendfile(tmp_path, monkeypatch):
    data = os.urandom(64 * 1024)
    got, sent, calls = _send_through_server(tmp_path, b"head", data, 100, 3000, b"tail", monkeypatch)
    assert (sent, got) == (3000, b"head" + data[100:3100] + b"tail")
    assert calls == {"os.sendfile": 1, "loop.sendfile": 0}


def test_region_sender_reports_a_short_file(tmp_path, monkeypatch):
    data = os.urandom(10_000)
    got, sent, calls = _send_through_server(tmp_path, b"", data, 9_000, 5_000, b"", monkeypatch)
    assert sent == 1_000 and got == data[9_000:]
