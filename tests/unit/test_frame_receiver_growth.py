"""A FrameReceiver starts with a small scratch buffer and grows it only while reads fill it,
so an idle or unauthenticated connection costs a few KiB, not 256 (a flood of connections
must not exhaust the broker's memory), and frames still come out whole at every size."""
from __future__ import annotations

import random
import struct

from clients.protocol.framing import FrameReceiver


def _feed(r: FrameReceiver, data: bytes, read_size: int) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        buf = r.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), read_size, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        out += [bytes(f) for f in r.buffer_updated(n)]
    return out


def _frames(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    rnd = random.Random(7)
    bodies = [bytes(rnd.getrandbits(8) for _ in range(s)) for s in sizes]
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies), bodies


def test_a_new_receiver_holds_a_small_buffer():
    r = FrameReceiver(1 << 20, scratch=256 * 1024, initial_scratch=8 * 1024)
    assert len(r.get_buffer()) <= 8 * 1024


def test_the_buffer_grows_while_reads_fill_it_up_to_scratch():
    r = FrameReceiver(1 << 20, scratch=256 * 1024, initial_scratch=8 * 1024)
    data, bodies = _frames([100] * 6000)
    assert _feed(r, data, 1 << 20) == bodies
    assert len(r.get_buffer()) > 64 * 1024


def test_frames_of_every_size_come_out_whole_from_a_small_start():
    sizes = [0, 1, 3, 2047, 2048, 2049, 4095, 9000, 70000, 5, 300000, 17]
    data, bodies = _frames(sizes)
    for read_size in (1, 7, 1000, 4096, 1 << 20):
        r = FrameReceiver(1 << 20, scratch=256 * 1024, initial_scratch=8 * 1024)
        assert _feed(r, data, read_size) == bodies, read_size
