"""Crash recovery of PartitionLog: torn tails at every byte, flipped bytes, garbage, lost
indexes, the recovery point, and real SIGKILLs of a writing process."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from broker.log import LogConfig, PartitionLog
from broker.log.segment import LogSegment
from clients.protocol.batch_header import read_header
from clients.protocol.records import Record, build_batch, iter_batches, records_from_fetch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CFG = LogConfig(segment_bytes=1_500, index_interval_bytes=64)


def batch(n: int = 1, value: bytes = b"v", compression: int = 0) -> bytes:
    return build_batch([Record(b"key", value, [("h", b"x")]) for _ in range(n)], compression=compression)


def all_offsets(log: PartitionLog) -> list[int]:
    if log.log_end_offset == log.log_start_offset:
        return []
    info = log.read(log.log_start_offset, 10**9)
    data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    return [r.offset for r in records_from_fetch(data, verify_crc=True)]


def batch_spans(path: str) -> list[tuple[int, int, int]]:
    """(start position, end position, next offset) of every batch in a segment file."""
    data = open(path, "rb").read()
    out = []
    pos = 0
    while pos < len(data):
        h = read_header(data, pos)
        out.append((pos, pos + h.total_size, h.last_offset + 1))
        pos += h.total_size
    return out


@pytest.fixture
def written(tmp_path):
    """A log of several segments whose last two batches are of epoch 1 and then 2."""
    src = tmp_path / "src" / "t-0"
    log = PartitionLog(str(src), CFG)
    rng = random.Random(3)
    for _ in range(40):
        log.append_as_leader(batch(rng.randint(1, 4), b"x" * rng.randint(0, 40)), 1)
    log.append_as_leader(batch(3, b"y" * 30, compression=2), 1)
    log.append_as_leader(batch(2, b"z" * 10), 2)
    assert len(log.segments) > 2
    last = log.active_segment
    spans = batch_spans(last.log_path)
    assert len(spans) >= 2
    return src, last.base_offset, spans, log.log_end_offset


def reopen_with_cut(src, tmp_path, name: str, base: int, cut: int | None = None,
                    flip: int | None = None) -> PartitionLog:
    dst = tmp_path / name / "t-0"
    shutil.copytree(src, dst)
    path = dst / f"{base:020d}.log"
    if cut is not None:
        os.truncate(path, cut)
    if flip is not None:
        data = bytearray(path.read_bytes())
        data[flip] ^= 0x40
        path.write_bytes(bytes(data))
    return PartitionLog(str(dst), CFG)                    # no clean shutdown, recovery point 0


def test_torn_tail_at_every_byte_of_the_last_two_batches(written, tmp_path):
    src, base, spans, leo = written
    (s1, e1, n1), (s2, e2, n2) = spans[-2], spans[-1]
    prev_end = spans[-3][2] if len(spans) > 2 else base
    assert e2 == os.path.getsize(src / f"{base:020d}.log") and n2 == leo
    for cut in range(s1, e2 + 1):
        log = reopen_with_cut(src, tmp_path, f"cut{cut}", base, cut=cut)
        if cut == e2:
            expect_end, expect_size = n2, e2
        elif cut >= e1:
            expect_end, expect_size = n1, e1
        else:
            expect_end, expect_size = prev_end, s1
        assert log.log_end_offset == expect_end, cut
        assert os.path.getsize(log.active_segment.log_path) == expect_size, cut
        assert all_offsets(log) == list(range(expect_end)), cut
        assert log.latest_epoch == (2 if cut == e2 else 1), cut
        assert log.end_offset_for_epoch(1) == (1, expect_end if cut < e2 else n1)
        info = log.append_as_leader(batch(2), 3)
        assert (info.first_offset, info.last_offset) == (expect_end, expect_end + 1), cut
        log.high_watermark = log.log_end_offset
        assert all_offsets(log) == list(range(expect_end + 2)), cut
        log.close()
        shutil.rmtree(tmp_path / f"cut{cut}")


def test_flipped_byte_in_last_batch_is_truncated(written, tmp_path):
    src, base, spans, leo = written
    start, end, _ = spans[-1]
    prev_next = spans[-2][2]
    # every byte the batch's integrity covers: length, magic, CRC and everything after it
    # (baseOffset and partitionLeaderEpoch are outside the CRC in the v2 format, as in Kafka)
    positions = [start + i for i in (8, 9, 10, 11, 16)] + list(range(start + 17, end))
    for flip in positions:
        log = reopen_with_cut(src, tmp_path, f"flip{flip}", base, flip=flip)
        assert log.log_end_offset == prev_next, flip
        assert os.path.getsize(log.active_segment.log_path) == start, flip
        assert log.append_as_leader(batch(1), 3).first_offset == prev_next
        log.close()
        shutil.rmtree(tmp_path / f"flip{flip}")


def test_garbage_after_the_end_is_truncated(written, tmp_path):
    src, base, spans, leo = written
    for junk in (b"\x00" * 4096, bytes(random.Random(1).randrange(256) for _ in range(300)), b"\x00\x00\x00"):
        dst = tmp_path / f"junk{len(junk)}" / "t-0"
        shutil.copytree(src, dst)
        with open(dst / f"{base:020d}.log", "ab") as f:
            f.write(junk)
        log = PartitionLog(str(dst), CFG)
        assert log.log_end_offset == leo
        assert all_offsets(log) == list(range(leo))


def test_corrupt_middle_segment_drops_later_unflushed_segments(written, tmp_path):
    src, _, _, _ = written
    dst = tmp_path / "mid" / "t-0"
    shutil.copytree(src, dst)
    logs = sorted(p for p in os.listdir(dst) if p.endswith(".log"))
    middle = dst / logs[1]
    spans = batch_spans(str(middle))
    data = bytearray(middle.read_bytes())
    data[spans[2][0] + 30] ^= 0xFF                        # third batch of the second segment
    middle.write_bytes(bytes(data))
    log = PartitionLog(str(dst), CFG)
    assert [s.base_offset for s in log.segments] == [int(logs[0][:20]), int(logs[1][:20])]
    assert log.log_end_offset == spans[1][2]
    assert all_offsets(log) == list(range(spans[1][2]))
    assert log.append_as_leader(batch(1), 5).first_offset == spans[1][2]
    assert sorted(p for p in os.listdir(dst) if p.endswith(".log")) == logs[:2]


def test_only_segments_from_the_recovery_point_are_scanned(written, tmp_path, monkeypatch):
    src, base, spans, leo = written
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, *a: recovered.append(self.base_offset) or real(self, *a))
    log = PartitionLog(str(src), CFG, recovery_point=base)
    assert recovered == [base] and log.log_end_offset == leo
    recovered.clear()
    bases = [s.base_offset for s in log.segments]
    log2 = PartitionLog(str(src), CFG, recovery_point=bases[1] + 1)   # inside the second segment
    assert recovered == bases[1:] and log2.recovery_point == bases[1] + 1


def test_missing_or_bad_index_of_flushed_segment_is_rebuilt(written, tmp_path):
    src, base, spans, leo = written
    first = f"{0:020d}"
    os.unlink(src / f"{first}.index")
    with open(src / f"{first}.timeindex", "wb") as f:
        f.write(b"\x01" * 13)
    log = PartitionLog(str(src), CFG, recovery_point=leo)
    assert log.log_end_offset == leo and all_offsets(log) == list(range(leo))
    assert os.path.getsize(src / f"{first}.index") == 8 * len(log.segments[0].index) > 0
    assert os.path.getsize(src / f"{first}.timeindex") % 12 == 0


def test_leader_epoch_checkpoint_rebuilt_when_missing(written, tmp_path):
    src, _, _, leo = written
    os.unlink(src / "leader-epoch-checkpoint")
    log = PartitionLog(str(src), CFG)
    assert log.leader_epochs.entries[-1][0] == 2 and log.leader_epochs.entries[0] == (1, 0)


def test_empty_segment_files_and_leftovers(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d), CFG)
    log.append_as_leader(batch(3), 0)
    log.roll()
    (d / "00000000000000000003.log").write_bytes(b"")   # empty active segment
    (d / "00000000000000000099.index").write_bytes(b"") # orphan index
    (d / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"x")
    again = PartitionLog(str(d), CFG)
    assert again.log_end_offset == 3
    names = set(os.listdir(d))
    assert "00000000000000000099.index" not in names
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)
    assert again.append_as_leader(batch(1), 0).first_offset == 3


_WRITER = textwrap.dedent("""
    import random, sys
    sys.path.insert(0, {root!r})
    from broker.log import LogConfig, PartitionLog
    from clients.protocol.records import Record, build_batch
    log = PartitionLog({path!r}, LogConfig(segment_bytes=20_000, index_interval_bytes=256))
    rng = random.Random({seed})
    print(log.log_end_offset, flush=True)
    while True:
        n = rng.randint(1, 3)
        data = b"".join(build_batch([Record(b"k", b"v" * rng.randint(0, 3000))
                                     for _ in range(rng.randint(1, 5))]) for _ in range(n))
        log.append_as_leader(data, 0)
""")


def test_sigkill_while_appending(tmp_path):
    path = str(tmp_path / "t-0")
    ends = []
    for seed in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER.format(root=ROOT, path=path, seed=seed)],
                                stdout=subprocess.PIPE)
        start = int(proc.stdout.readline())
        assert start == (ends[-1] if ends else 0)
        time.sleep(0.2 + 0.1 * seed)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        log = PartitionLog(path, LogConfig(segment_bytes=20_000, index_interval_bytes=256))
        assert log.log_end_offset > start
        assert all_offsets(log) == list(range(log.log_end_offset))
        for seg in log.segments:
            for b in iter_batches(open(seg.log_path, "rb").read(), verify_crc=True):
                assert b.header.partition_leader_epoch == 0
        ends.append(log.log_end_offset)
        log.close_handlers()
