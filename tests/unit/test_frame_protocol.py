"""The broker's receive path (_FrameProtocol) fed by hand, as asyncio feeds it."""
import asyncio
import collections
import struct
from types import SimpleNamespace

from broker.server.network import _FrameProtocol


def feed(proto: _FrameProtocol, data: bytes, chunk: int) -> None:
    """What the event loop does with incoming bytes: get_buffer, copy in, buffer_updated."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        n = min(len(buf), chunk, len(data) - pos)
        assert n > 0, "the protocol offered no buffer space"
        buf[:n] = data[pos:pos + n]
        del buf
        proto.buffer_updated(n)
        pos += n


class _Collecting(_FrameProtocol):
    """Keeps the frames instead of dispatching them."""

    def __init__(self, server):
        super().__init__(server)
        self.frames: collections.deque = collections.deque()

    def _dispatch(self, frame):
        self.frames.append(frame)


def make(max_request_size: int = 100 << 20) -> _Collecting:
    return _Collecting(SimpleNamespace(max_request_size=max_request_size, bytes_in=0,
                                       listener_name="PLAINTEXT", security_protocol="PLAINTEXT",
                                       ssl_principal=None, ssl_context=None))


def test_a_claimed_huge_frame_does_not_allocate_its_size_up_front():
    async def main():
        proto = make()
        feed(proto, struct.pack(">i", 90 << 20) + b"x" * 100, chunk=4096)
        # A client that only claims 90 MiB must not cost 90 MiB (it may never send them).
        big = proto.receiver._big
        assert big is not None and len(big) <= 2 << 20
    asyncio.run(main())


def test_large_and_small_frames_come_out_whole_whatever_the_read_sizes():
    async def main():
        bodies = [bytes([i % 251]) * size for i, size in
                  enumerate([10, 70_000, 3 << 20, 5, (1 << 20) + 7, 65_536, 200_000])]
        stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
        for chunk in (997, 65_536, 1 << 20):
            proto = make()
            got = []
            pos = 0
            while pos < len(stream):
                n = min(len(stream) - pos, chunk * 64)
                feed(proto, stream[pos:pos + n], chunk)
                pos += n
                while proto.frames:
                    got.append(bytes(proto.frames.popleft()))
            assert got == bodies, f"chunk {chunk}"
    asyncio.run(main())


def test_frames_arriving_a_byte_at_a_time():
    async def main():
        bodies = [b"a" * 3, b"b" * 70_000, b"c"]
        stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
        proto = make()
        feed(proto, stream, chunk=1)
        assert [bytes(f) for f in proto.frames] == bodies
    asyncio.run(main())
