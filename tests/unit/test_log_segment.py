"""Segment, indexes and checkpoint files of broker/log, on real files under tmp_path."""
from __future__ import annotations

import os

import pytest

from broker.log import checkpoints
from broker.log.errors import CheckpointError
from broker.log.index import OffsetIndex, TimeIndex
from broker.log.segment import FileRegion, LogSegment, SegmentDeleter
from clients.protocol.batch_header import HEADER_SIZE, read_header
from clients.protocol.records import Record, build_batch, iter_batches
from clients.protocol.types import DeferredBytes


def make_batch(base: int, n: int = 1, ts: int = 1_000, value: bytes = b"v" * 20) -> bytes:
    return build_batch([Record(b"k", value, [], ts) for _ in range(n)], base_offset=base, now_ms=ts)


def append(seg: LogSegment, batches: list[bytes]) -> None:
    data = b"".join(batches)
    infos = []
    pos = 0
    for b in batches:
        h = read_header(b)
        infos.append((pos, h.last_offset, h.max_timestamp, len(b)))
        pos += len(b)
    seg.append(data, infos)


def fill(seg: LogSegment, count: int, per_batch: int = 2, start: int = 0, ts0: int = 1_000) -> list[bytes]:
    out = []
    off = start
    for i in range(count):
        b = make_batch(off, per_batch, ts=ts0 + i)
        append(seg, [b])
        out.append(b)
        off += per_batch
    return out


@pytest.fixture
def seg(tmp_path):
    s = LogSegment.open(str(tmp_path), 0, index_interval_bytes=200, max_index_size=1 << 20, create=True)
    yield s
    if not s.file.closed:
        s.close()


# ------------------------------------------------------------------------- indexes
def test_offset_index_lookup_truncate_and_file_round_trip(tmp_path):
    path = str(tmp_path / "x.index")
    idx = OffsetIndex(path, 100, 1 << 10)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 11):
        idx.append(100 + i * 10, i * 1000)
    idx.append(150, 99)                               # not increasing: ignored
    assert len(idx) == 10
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(119) == (110, 1000)
    assert idx.lookup(10**9) == (200, 10000)
    assert idx.floor_position(2500) == 2000
    assert idx.floor_position(10) == 0
    idx.write(fsync=True)
    assert os.path.getsize(path) == 80
    with open(path, "rb") as f:
        assert f.read(8) == (10).to_bytes(4, "big") + (1000).to_bytes(4, "big")   # Kafka's layout
    idx.truncate_to(150)
    assert idx.last_entry() == (140, 4000)
    idx.write()
    assert os.path.getsize(path) == 32
    again = OffsetIndex(path, 100, 1 << 10)
    assert again.load() and again.lookup(10**9) == (140, 4000)
    assert not OffsetIndex(path, 100, 1 << 10).is_full
    assert OffsetIndex(path, 100, 8 * 4).load() and OffsetIndex(path, 100, 32).max_entries == 4


def test_offset_index_rejects_corrupt_file(tmp_path):
    path = tmp_path / "y.index"
    path.write_bytes(b"\x00" * 12)                     # not a multiple of 8
    assert not OffsetIndex(str(path), 0, 1024).load()
    path.write_bytes((5).to_bytes(4, "big") + (10).to_bytes(4, "big") +
                     (4).to_bytes(4, "big") + (20).to_bytes(4, "big"))   # offsets go backwards
    assert not OffsetIndex(str(path), 0, 1024).load()
    assert not OffsetIndex(str(tmp_path / "missing.index"), 0, 1024).load()


def test_time_index_lookup_and_truncate(tmp_path):
    path = str(tmp_path / "x.timeindex")
    ti = TimeIndex(path, 0, 1 << 10)
    for ts, off in [(100, 5), (100, 9), (90, 12), (200, 20), (300, 30)]:
        ti.maybe_append(ts, off)
    assert len(ti) == 3                                # only increasing timestamps
    assert ti.last_entry_before(100) is None
    assert ti.last_entry_before(101) == (100, 5)
    assert ti.last_entry_before(10**6) == (300, 30)
    ti.write()
    assert os.path.getsize(path) == 36
    ti.truncate_to(30)
    assert ti.last_entry() == (200, 20)
    ti.write()
    again = TimeIndex(path, 0, 1 << 10)
    assert again.load() and again.last_entry() == (200, 20)


# ------------------------------------------------------------------------- segment
def test_segment_file_names_and_append(tmp_path):
    s = LogSegment.open(str(tmp_path), 1234, 4096, 1 << 20, create=True)
    assert sorted(os.listdir(tmp_path)) == ["00000000000000001234.index", "00000000000000001234.log",
                                            "00000000000000001234.timeindex"]
    assert s.next_offset == 1234
    b = make_batch(1234, 3)
    append(s, [b])
    assert s.size == len(b) and s.next_offset == 1237
    with open(s.log_path, "rb") as f:
        assert f.read() == b
    s.close()


def test_sparse_index_every_interval_bytes(seg):
    batches = fill(seg, 100)
    size = len(batches[0])
    # Kafka's rule: an entry before a batch once more than index.interval.bytes were written
    # since the previous entry.
    expected = 0
    since = 0
    for _ in batches:
        if since > 200:
            expected += 1
            since = 0
        since += size
    assert len(seg.index) == expected > 10
    for off in range(0, 200):
        pos, h = seg.translate_offset(off)
        assert h.base_offset <= off <= h.last_offset
        assert pos == (off // 2) * size
    assert seg.translate_offset(200) is None


def test_segment_read_whole_batches(seg):
    batches = fill(seg, 20, per_batch=3)
    size = len(batches[0])
    r = seg.read(4, 10**6, None, True)               # inside the second batch
    assert isinstance(r, FileRegion) and isinstance(r, DeferredBytes)
    assert r.position == size and r.size == 19 * size
    r = seg.read(3, size * 2 + size // 2, None, True)   # rounded down to whole batches
    assert r.size == 2 * size
    r = seg.read(3, 10, None, True)                  # smaller than a batch: one batch anyway
    assert r.size == size
    r = seg.read(3, 10, None, False)
    assert r.size == 0
    r = seg.read(0, 10**6, 9, True)                  # max offset inside batch 3 (9..11): excluded
    assert r.size == 3 * size
    r = seg.read(9, 10**6, 9, True)
    assert r.size == 0 and r.position == 3 * size
    assert seg.read(60, 100, None, True) is None
    data = os.pread(r.fileno, 2 * size, size)
    assert [b.base_offset for b in iter_batches(data)] == [3, 6]


def test_find_batch_by_timestamp(seg):
    fill(seg, 50, per_batch=1, ts0=10_000)           # timestamps 10000..10049
    assert seg.find_batch_by_timestamp(10_020, 0).base_offset == 20
    assert seg.find_batch_by_timestamp(0, 0).base_offset == 0
    assert seg.find_batch_by_timestamp(0, 7).base_offset == 7
    assert seg.find_batch_by_timestamp(10_050, 0) is None
    assert seg.max_timestamp == 10_049 and seg.offset_of_max_timestamp == 49


def test_recover_rebuilds_indexes_and_truncates_garbage(seg):
    fill(seg, 40)
    entries = len(seg.index)
    good = seg.size
    os.write(seg.fd, b"\x00" * 5 + b"\xff" * 70)
    for p in (seg.index.path, seg.time_index.path):
        os.unlink(p)
    assert seg.recover() == 75
    assert seg.size == good == os.path.getsize(seg.log_path)
    assert len(seg.index) == entries and seg.next_offset == 80
    assert seg.max_timestamp == 1_039
    assert os.path.getsize(seg.index.path) == entries * 8


def test_truncate_to_mid_batch_drops_whole_batch(seg):
    batches = fill(seg, 30, per_batch=4)
    size = len(batches[0])
    assert seg.truncate_to(41) == 20 * size           # batch 40..43 and after
    assert seg.size == 10 * size and seg.next_offset == 40
    assert seg.max_timestamp == 1_009
    assert all(off < 40 for off, _ in [seg.index.last_entry()])
    append(seg, [make_batch(40, 4, ts=5)])
    assert seg.next_offset == 44
    assert seg.truncate_to(0) == 11 * size
    assert seg.size == 0 and seg.next_offset == 0 and seg.max_timestamp == -1


def test_load_indexes_sanity_check(tmp_path, seg):
    fill(seg, 40)
    seg.flush()
    reopened = LogSegment.open(str(tmp_path), 0, 200, 1 << 20)
    assert reopened.load_indexes()
    assert reopened.next_offset == 80 and reopened.max_timestamp == 1_039
    reopened.close()
    # an index pointing past the data is rejected
    with open(seg.index.path, "ab") as f:
        f.write((500).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    bad = LogSegment.open(str(tmp_path), 0, 200, 1 << 20)
    assert not bad.load_indexes()
    bad.close()


def test_header_reads_use_pread_of_header_size(seg, monkeypatch):
    fill(seg, 30)
    calls = []
    real = os.pread

    def spy(fd, n, pos):
        calls.append(n)
        return real(fd, n, pos)
    monkeypatch.setattr(os, "pread", spy)
    seg.read(33, 1000, None, True)
    assert calls and set(calls) == {HEADER_SIZE}


def test_should_roll_rules(seg):
    assert not seg.should_roll(100, 5_000, 10, 0, 1000, 10_000)
    fill(seg, 1, ts0=1_000)
    assert seg.should_roll(10**6, 1_000, 10, 0, 1000, 10_000)          # size
    assert seg.should_roll(10, 11_001, 10, 0, 1000, 10_000)            # segment.ms from first batch
    assert not seg.should_roll(10, 11_000, 10, 0, 1000, 10_000)
    assert seg.should_roll(10, 1_000, 2**31, 0, 10**9, 10**9)          # relative offset overflow


def test_deleter_renames_now_and_unlinks_later(tmp_path, seg):
    fill(seg, 3)
    deleter = SegmentDeleter()
    deleter.schedule(seg, due_ms=1_000)
    names = sorted(os.listdir(tmp_path))
    assert names == ["00000000000000000000.index.deleted", "00000000000000000000.log.deleted",
                     "00000000000000000000.timeindex.deleted"]
    assert seg.read(0, 10**6, None, True).size == seg.size            # fd still usable
    assert deleter.run_due(999) == 0
    assert deleter.run_due(1_000) == 1
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------- checkpoints
def test_offset_checkpoint_format(tmp_path):
    path = str(tmp_path / checkpoints.RECOVERY_POINT_FILE)
    checkpoints.write_offsets(path, {("b", 1): 7, ("a", 0): 42})
    assert open(path).read() == "0\n2\na 0 42\nb 1 7\n"
    assert checkpoints.read_offsets(path) == {("a", 0): 42, ("b", 1): 7}
    assert not os.path.exists(path + ".tmp")
    assert checkpoints.read_offsets(str(tmp_path / "missing")) == {}
    with open(path, "w") as f:
        f.write("0\n3\na 0 42\n")
    with pytest.raises(CheckpointError):
        checkpoints.read_offsets(path)
    with open(path, "w") as f:
        f.write("1\n0\n")
    with pytest.raises(CheckpointError):
        checkpoints.read_offsets(path)


def test_epoch_checkpoint_format(tmp_path):
    path = str(tmp_path / checkpoints.LEADER_EPOCH_FILE)
    checkpoints.write_epochs(path, [(0, 0), (3, 150)])
    assert open(path).read() == "0\n2\n0 0\n3 150\n"
    assert checkpoints.read_epochs(path) == [(0, 0), (3, 150)]
