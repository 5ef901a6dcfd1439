"""A FrameReceiver uses a large frame's buffer again for a later large frame, once nothing
refers to the first frame any more: a new buffer of megabytes costs page faults on every page
(glibc gives freed megabytes back to the kernel), which a consumer of 1 KiB records paid on
each fetch answer. A frame still referred to (records not yet handed out, a produce request
being written) is never overwritten."""
from __future__ import annotations

import gc
import random
import struct

from clients.protocol.framing import _IDLE_FRAMES, FrameReceiver

KIB = 1024


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def body(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def feed(r: FrameReceiver, data: bytes, read_size: int = 64 * KIB) -> list[memoryview]:
    out: list[memoryview] = []
    pos = 0
    while pos < len(data):
        buf = r.get_buffer()
        n = min(len(buf), read_size, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        out += r.buffer_updated(n)
    return out


def receiver() -> FrameReceiver:
    return FrameReceiver(64 << 20, scratch=256 * KIB, big_start=64 << 20)


def test_a_large_frames_buffer_is_used_again_once_nothing_refers_to_it():
    r = receiver()
    [first] = feed(r, frame(body(1 << 20, 1)))
    first_buffer = id(first.obj)            # an id: a reference would keep it in use
    del first
    gc.collect()
    [second] = feed(r, frame(body(1 << 20, 2)))
    assert id(second.obj) == first_buffer
    assert bytes(second) == body(1 << 20, 2)


def test_a_frame_still_referred_to_is_never_overwritten():
    r = receiver()
    [first] = feed(r, frame(body(1 << 20, 1)))
    records = first[1000:5000]              # a record set sliced from the frame, still held
    del first
    for seed in range(2, 8):
        [later] = feed(r, frame(body(1 << 20, seed)))
        assert later.obj is not records.obj
        assert bytes(later) == body(1 << 20, seed)
        del later
    assert bytes(records) == body(1 << 20, 1)[1000:5000]


def test_a_larger_spare_holds_a_smaller_frame_and_the_stream_goes_on():
    r = receiver()
    [big] = feed(r, frame(body(3 << 20, 1)))
    big_buffer = id(big.obj)
    del big
    # A smaller large frame, a small one and another large one in a single stream, read in
    # chunks that cross their boundaries: the spare (3 MiB) must not swallow what follows.
    sizes = [(1 << 20) + 17, 100, 700 * KIB]
    stream = b"".join(frame(body(s, 10 + i)) for i, s in enumerate(sizes))
    for read_size in (4 * KIB, 1 << 20, 8 << 20):
        frames = feed(r, stream, read_size)
        assert [len(f) for f in frames] == sizes
        assert [bytes(f) for f in frames] == [body(s, 10 + i) for i, s in enumerate(sizes)]
        # The first large frame goes into the 3 MiB spare (it is the only one).
        assert id(frames[0].obj) == big_buffer and len(frames[0].obj) == 3 << 20
        del frames


def test_a_growing_frame_keeps_its_bytes_and_leaves_its_smaller_buffer_as_a_spare():
    r = FrameReceiver(64 << 20, scratch=256 * KIB)          # the broker's: doubling from 1 MiB
    [grown] = feed(r, frame(body(5 << 20, 3)))
    assert bytes(grown) == body(5 << 20, 3)
    del grown
    [again] = feed(r, frame(body(5 << 20, 4)))
    assert bytes(again) == body(5 << 20, 4)


def test_the_spares_are_let_go_when_only_small_frames_come():
    r = receiver()
    [first] = feed(r, frame(body(1 << 20, 1)))
    del first
    assert r._spares
    feed(r, b"".join(frame(b"x" * 100) for _ in range(_IDLE_FRAMES - 1)))
    assert r._spares, "a few small frames between large ones keep the spares"
    feed(r, frame(b"x" * 100))
    assert r._spares == []


def test_at_most_max_spares_are_kept():
    r = receiver()
    held = [feed(r, frame(body(1 << 20, seed)))[0] for seed in range(10)]
    assert len(r._spares) == r.max_spares
    assert [bytes(h) for h in held] == [body(1 << 20, seed) for seed in range(10)]


def test_spares_stay_under_their_byte_cap_and_a_receiver_may_keep_none():
    r = FrameReceiver(64 << 20, scratch=256 * KIB, big_start=64 << 20, max_spare_bytes=5 << 20)
    held = [feed(r, frame(body(2 << 20, seed)))[0] for seed in range(4)]   # each a new buffer
    assert sum(map(len, r._spares)) <= 5 << 20 and len(r._spares) == 2
    assert [bytes(h) for h in held] == [body(2 << 20, seed) for seed in range(4)]
    none = FrameReceiver(64 << 20, scratch=256 * KIB, big_start=64 << 20, max_spares=0)
    [first] = feed(none, frame(body(1 << 20, 1)))
    del first
    assert none._spares == []
    [second] = feed(none, frame(body(1 << 20, 2)))
    assert bytes(second) == body(1 << 20, 2)
