"""PartitionLog and LogManager on real files: offsets, reads, validation, retention,
truncation, timestamps, leader epochs, follower appends, flushing."""
from __future__ import annotations

import os
import random

import pytest

from broker.log import LogConfig, LogManager, PartitionLog
from broker.log import checkpoints
from broker.log.errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError,
                               MessageTooLargeError, OffsetOutOfRangeError,
                               RecordListTooLargeError, UnexpectedAppendOffsetError,
                               UnsupportedForMessageFormatError)
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from broker.log.segment import LogSegment
from clients.protocol import errors
from clients.protocol.batch_header import HEADER_SIZE, TIMESTAMP_TYPE_LOG_APPEND, write_crc
from clients.protocol.records import (CREATE_TIME, LOG_APPEND_TIME, Record, build_batch,
                                      build_control_batch, iter_batches, records_from_fetch)


def batch(n: int = 1, *, ts: int | None = None, value: bytes = b"v" * 10, base_offset: int = 0,
          epoch: int = -1, compression: int = 0, timestamps: list[int] | None = None) -> bytes:
    stamps = timestamps or [ts] * n
    return build_batch([Record(b"k", value, [], t) for t in stamps], base_offset=base_offset,
                       partition_leader_epoch=epoch, compression=compression, now_ms=ts)


def open_log(tmp_path, name: str = "topic-0", **cfg) -> PartitionLog:
    return PartitionLog(str(tmp_path / name), LogConfig(**cfg))


def fetched(info) -> bytes:
    return b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)


def batch_offsets(info) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(fetched(info))]


def record_offsets(info, from_offset: int = 0) -> list[int]:
    return [r.offset for r in records_from_fetch(fetched(info), from_offset=from_offset)]


def append_n(log: PartitionLog, count: int, per_batch: int = 1, epoch: int = 0, **kw) -> list:
    infos = [log.append_as_leader(batch(per_batch, **kw), epoch) for _ in range(count)]
    log.high_watermark = log.log_end_offset
    return infos


# ============================================================================ appends
def test_dense_offsets_across_appends_and_rolls(tmp_path):
    log = open_log(tmp_path, segment_bytes=2_000, index_interval_bytes=100)
    rng = random.Random(7)
    expected = 0
    for _ in range(300):
        n = rng.randint(1, 6)
        info = log.append_as_leader(batch(n, value=b"x" * rng.randint(0, 60)), 4)
        assert (info.first_offset, info.last_offset, info.record_count) == (expected, expected + n - 1, n)
        assert info.log_append_time == -1 and not info.duplicate
        expected += n
    assert log.log_end_offset == expected
    assert len(log.segments) > 5
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    for prev, nxt in zip(log.segments, log.segments[1:]):
        assert prev.next_offset == nxt.base_offset            # no gap between segments
    log.high_watermark = log.log_end_offset
    info = log.read(0, 10**9)
    assert record_offsets(info) == list(range(expected))
    for b in iter_batches(fetched(info)):                     # patched in place, CRC intact
        assert b.partition_leader_epoch == 4


def test_multi_batch_record_set_one_write(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    data = batch(2) + batch(3) + batch(1)
    writes = []
    real = os.write
    seg_fd = log.active_segment.fd
    monkeypatch.setattr(os, "write", lambda fd, b: (fd == seg_fd and writes.append(len(b))) or real(fd, b))
    info = log.append_as_leader(data, 0)
    assert writes == [len(data)]
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    log.high_watermark = 6
    assert batch_offsets(log.read(0, 10**6)) == [(0, 1), (2, 4), (5, 5)]


def _corrupt_crc(b: bytes) -> bytes:
    buf = bytearray(b)
    buf[-1] ^= 0x55
    return bytes(buf)


def _magic(b: bytes, magic: int) -> bytes:
    buf = bytearray(b)
    buf[16] = magic
    return bytes(buf)


def _with_count(b: bytes, count: int) -> bytes:
    buf = bytearray(b)
    buf[57:61] = count.to_bytes(4, "big", signed=True)
    write_crc(buf, 0, len(buf))
    return bytes(buf)


@pytest.mark.parametrize("bad, error", [
    (lambda: _corrupt_crc(batch(3)), CorruptMessageError),
    (lambda: _magic(batch(1), 1), UnsupportedForMessageFormatError),
    (lambda: _magic(batch(1), 0), UnsupportedForMessageFormatError),
    (lambda: _magic(batch(1), 7), CorruptMessageError),
    (lambda: batch(2)[:-3], CorruptMessageError),
    (lambda: batch(1) + b"\x00\x00\x00", CorruptMessageError),
    (lambda: b"", InvalidRecordError),
    (lambda: _with_count(batch(3), 2), InvalidRecordError),
    (lambda: _with_count(batch(1), 0), InvalidRecordError),
    (lambda: batch(1, base_offset=5), InvalidRecordError),
    (lambda: build_control_batch(1, producer_id=1, producer_epoch=0), InvalidRecordError),
    (lambda: build_batch([Record(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=-1),
     InvalidRecordError),
    (lambda: batch(1, value=b"x" * 2_000), MessageTooLargeError),
])
def test_invalid_produce_data_rejected_and_nothing_appended(tmp_path, bad, error):
    log = open_log(tmp_path, max_message_bytes=1_000)
    append_n(log, 3)
    size, leo = log.size_in_bytes, log.log_end_offset
    if bad():
        with pytest.raises(error):
            log.append_as_leader(batch(1) + bad(), 0)       # a good batch first: all or nothing
    with pytest.raises(error):
        log.append_as_leader(bad(), 0)
    assert (log.size_in_bytes, log.log_end_offset) == (size, leo)
    assert os.path.getsize(log.active_segment.log_path) == size
    assert log.append_as_leader(batch(1), 0).first_offset == leo


def test_errors_map_to_kafka_codes():
    assert CorruptMessageError is errors.CorruptMessageError and CorruptMessageError.code == 2
    assert MessageTooLargeError.code == 10 and RecordListTooLargeError.code == 18
    assert InvalidRecordError.code == 87 and UnsupportedForMessageFormatError.code == 43


def test_record_set_larger_than_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(b"".join(batch(1) for _ in range(5)), 0)


def test_timestamp_limits(tmp_path):
    log = open_log(tmp_path, message_timestamp_before_max_ms=1_000, message_timestamp_after_max_ms=500)
    now = 1_000_000
    log.append_as_leader(batch(1, ts=now - 1_000), 0, now_ms=now)
    log.append_as_leader(batch(1, ts=now + 500), 0, now_ms=now)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, ts=now - 1_001), 0, now_ms=now)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(1, ts=now + 501), 0, now_ms=now)
    assert log.log_end_offset == 2


def test_log_append_time_patches_header_and_keeps_crc(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=1_000), 0, now_ms=777_000)
    assert info.log_append_time == 777_000 and info.max_timestamp == 777_000
    info2 = log.append_as_leader(batch(2, ts=1_000, compression=1), 0, now_ms=778_000)   # gzip
    assert info2.first_offset == 3
    log.high_watermark = log.log_end_offset
    parsed = list(iter_batches(fetched(log.read(0, 10**6)), verify_crc=True))
    assert [b.max_timestamp for b in parsed] == [777_000, 778_000]
    assert all(b.header.attributes & TIMESTAMP_TYPE_LOG_APPEND for b in parsed)
    recs = [r for b in parsed for r in b.records]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in recs] == \
        [(0, 777_000, 1), (1, 777_000, 1), (2, 777_000, 1), (3, 778_000, 1), (4, 778_000, 1)]
    with pytest.raises(InvalidTimestampError):                 # producers may not pre-set it
        log.append_as_leader(build_batch([Record(b"k", b"v")], timestamp_type=LOG_APPEND_TIME), 0)


def test_create_time_leaves_timestamps(tmp_path):
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(2, ts=5_000), 0)
    assert info.log_append_time == -1 and info.max_timestamp == 5_000
    log.high_watermark = 2
    assert [b.header.attributes & TIMESTAMP_TYPE_LOG_APPEND for b in iter_batches(fetched(log.read(0, 999)))] == [0]
    assert CREATE_TIME == 0


# ============================================================================ reads
def test_read_inside_batch_returns_whole_batch(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 10, per_batch=5)
    info = log.read(23, 10**6)
    assert batch_offsets(info)[0] == (20, 24)
    assert info.offset_metadata.offset == 23 and info.offset_metadata.segment_base_offset == 0
    assert record_offsets(info, from_offset=23)[0] == 23


def test_read_bounded_by_max_offset_max_bytes_min_one(tmp_path):
    log = open_log(tmp_path, segment_bytes=10**6)
    append_n(log, 20, per_batch=5)
    size = len(batch(5))
    assert batch_offsets(log.read(0, 10**6, max_offset=50)) == [(i, i + 4) for i in range(0, 50, 5)]
    # the batch holding the high watermark is not returned, even partly
    assert batch_offsets(log.read(0, 10**6, max_offset=52)) == [(i, i + 4) for i in range(0, 50, 5)]
    assert log.read(50, 10**6, max_offset=52).size == 0
    assert log.read(60, 10**6, max_offset=52).size == 0
    # max_bytes rounds down to whole batches
    info = log.read(10, 3 * size + size - 1)
    assert batch_offsets(info) == [(10, 14), (15, 19), (20, 24)] and info.size == 3 * size
    # min_one_batch: the first batch even if larger than max_bytes (KIP-74)
    assert batch_offsets(log.read(10, 1)) == [(10, 14)]
    assert log.read(10, 1, min_one_batch=False).size == 0
    assert log.read(10, 0).size == size
    # at the log end: empty; beyond / below: out of range
    info = log.read(100, 10**6)
    assert info.size == 0 and info.log_end_offset == 100 and info.high_watermark == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.read(101, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_read_spans_segments_in_regions(tmp_path):
    log = open_log(tmp_path, segment_bytes=1_000)
    append_n(log, 60, per_batch=2)
    assert len(log.segments) > 3
    info = log.read(3, 10**9)
    assert len(info.regions) == len(log.segments) - log.local_log.floor_index(3)
    assert record_offsets(info, 3) == list(range(3, 120))
    info = log.read(3, 10**9, max_offset=41)
    assert record_offsets(info, 3) == list(range(3, 40))
    seg_of_39 = [s for s in log.segments if s.base_offset <= 39][-1]
    assert info.regions[-1].file is seg_of_39.file


def _count_preads(monkeypatch):
    calls: list[int] = []
    real = os.pread

    def spy(fd, n, pos):
        calls.append(n)
        return real(fd, n, pos)
    monkeypatch.setattr(os, "pread", spy)
    return calls


def test_lookup_is_logarithmic_not_a_scan(tmp_path, monkeypatch):
    log = open_log(tmp_path, segment_bytes=3_000_000, index_interval_bytes=4096)
    one = batch(1, value=b"x" * 300)
    for _ in range(10):                                      # 10k batches, 1k per request
        log.append_as_leader(one * 1_000, 0)
    assert log.log_end_offset == 10_000 and len(log.segments) >= 2
    log.high_watermark = 9_000
    per_entry = 4096 // len(one) + 2
    calls = _count_preads(monkeypatch)
    for offset in (0, 4_321, 7_777, 9_998):
        calls.clear()
        info = log.read(offset, 5 * len(one), max_offset=9_000 if offset < 9_000 else None)
        assert len(calls) <= 3 * per_entry, (offset, len(calls))
        assert set(calls) <= {HEADER_SIZE}
    calls.clear()
    assert log.offset_for_timestamp(0) is not None
    assert len(calls) <= per_entry + 1


class _NoReadFile:
    """A segment file object that fails if anything reads record bytes through it."""

    def __init__(self, f):
        self._f = f

    def __getattr__(self, name):
        if name.startswith("read"):
            raise AssertionError(f"file.{name} called on segment data")
        return getattr(self._f, name)


def test_read_never_reads_record_bytes(tmp_path, monkeypatch):
    log = open_log(tmp_path, segment_bytes=5_000)
    append_n(log, 200, per_batch=3, compression=2)
    for seg in log.segments:
        seg.file = _NoReadFile(seg.file)

    def no_read(*a, **k):
        raise AssertionError("os.read called")
    monkeypatch.setattr(os, "read", no_read)
    monkeypatch.setattr(os, "readv", no_read)
    calls = _count_preads(monkeypatch)
    for offset in (0, 1, 250, 598, 599, 600):
        info = log.read(offset, 3_000, max_offset=500 if offset < 500 else None)
        assert all(r.size >= 0 for r in info.regions)
        log.offset_metadata(offset)
    assert calls and max(calls) == HEADER_SIZE
    # ListOffsets by time is off the fetch path and decodes the one batch it lands in.


# ============================================================================ retention
def _segment_log(tmp_path, count=40, **cfg):
    log = open_log(tmp_path, segment_bytes=600, **cfg)
    for i in range(count):
        log.append_as_leader(batch(2, ts=10_000 + i * 1_000), 0)
    log.high_watermark = log.log_end_offset
    return log


def test_retention_by_size_deletes_oldest_whole_segments(tmp_path):
    log = _segment_log(tmp_path, retention_bytes=2_000)
    before = len(log.segments)
    active = log.active_segment
    deleted = log.delete_retention_segments(now_ms=0)
    assert deleted > 0 and len(log.segments) == before - deleted
    assert log.size_in_bytes <= 2_000 + 600
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert log.active_segment is active
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_start_offset - 1, 100)
    assert log.read(log.log_start_offset, 100).size > 0
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert log.deleter.run_due(2**62) == deleted
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    # retention.bytes=0: everything, the active segment too (as Kafka); offsets go on
    log.update_config(LogConfig(segment_bytes=600, retention_bytes=0))
    log.delete_retention_segments(now_ms=0)
    assert len(log.segments) == 1 and log.active_segment is not active
    assert log.active_segment.size == 0
    assert log.log_start_offset == log.active_segment.base_offset == log.log_end_offset == 80
    assert log.read(80, 100).size == 0
    assert log.append_as_leader(batch(1), 0).first_offset == 80


def test_retention_by_time_stops_at_first_young_segment_then_takes_the_active_one(tmp_path):
    log = _segment_log(tmp_path, retention_ms=10_000)
    last_ts = 10_000 + 39 * 1_000
    young = [s for s in log.segments if s.largest_timestamp >= last_ts - 10_000]
    expired = len(log.segments) - len(young)
    assert expired > 0
    assert log.delete_retention_segments(now_ms=last_ts) == expired
    assert log.segments == young
    assert log.log_start_offset == log.segments[0].base_offset
    assert all(last_ts - s.largest_timestamp <= 10_000 for s in log.segments)
    # everything expired, the active segment too: an idle topic keeps no expired record
    # (Kafka rolls the active segment and deletes it); offsets go on at the log end
    active = log.active_segment
    assert active.size > 0
    assert log.delete_retention_segments(now_ms=10**12) == len(young)
    assert len(log.segments) == 1 and log.active_segment is not active
    assert log.log_start_offset == log.log_end_offset == 80 == log.active_segment.base_offset
    assert log.earliest_offset() == 80
    assert log.delete_retention_segments(now_ms=10**12) == 0     # the empty one stays
    assert log.append_as_leader(batch(1), 0).first_offset == 80
    log.deleter.run_all()
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == \
        ["00000000000000000080.log"]


def test_retention_keeps_an_active_segment_with_unreplicated_records(tmp_path):
    log = _segment_log(tmp_path, retention_ms=0)
    active = log.active_segment
    before = len(log.segments)
    log.high_watermark = log.log_end_offset - 1        # the last record not yet replicated
    assert log.delete_retention_segments(now_ms=10**12) == before - 1
    assert log.segments == [active] and log.log_start_offset == active.base_offset


def test_retention_respects_high_watermark_and_policy(tmp_path):
    log = _segment_log(tmp_path, retention_bytes=0)
    log.high_watermark = 0
    assert log.delete_retention_segments(now_ms=0) == 0
    log.high_watermark = log.segments[2].base_offset
    assert log.delete_retention_segments(now_ms=0) == 2
    log2 = _segment_log(tmp_path / "x", retention_bytes=0, retention_ms=0, cleanup_policy="compact")
    assert log2.delete_retention_segments(now_ms=10**12) == 0


# ============================================================================ timestamps
def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, segment_bytes=700, index_interval_bytes=50)
    for i in range(30):                                    # batch i: offsets 3i..3i+2, ts 1000i+{0,10,20}
        t = 1_000 * (i + 1)
        log.append_as_leader(batch(timestamps=[t, t + 10, t + 20], ts=t), 2)
    log.high_watermark = log.log_end_offset
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1_000, 2)
    assert log.offset_for_timestamp(1_000) == (0, 1_000, 2)
    assert log.offset_for_timestamp(5_000) == (12, 5_000, 2)       # exact: first record qualifies
    # inside a batch: the first record at or after the target, as Kafka answers
    assert log.offset_for_timestamp(5_005) == (13, 5_010, 2)
    assert log.offset_for_timestamp(5_011) == (14, 5_020, 2)
    assert log.offset_for_timestamp(5_021) == (15, 6_000, 2)
    assert log.offset_for_timestamp(30_020) == (89, 30_020, 2)
    assert log.offset_for_timestamp(30_021) is None
    assert log.fetch_offset_by_timestamp(-1) == (90, -1, 2)
    assert log.fetch_offset_by_timestamp(-2) == (0, -1, 2)
    assert log.fetch_offset_by_timestamp(-3) == (89, 30_020, 2)
    assert log.max_timestamp_offset() == (89, 30_020, 2)
    log.delete_records_before(20)
    assert log.offset_for_timestamp(0) == (20, 7_020, 2)
    assert log.fetch_offset_by_timestamp(-2) == (20, -1, 2)


def test_max_timestamp_offset_not_last_batch(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, ts=5_000), 0)
    log.append_as_leader(batch(timestamps=[9_000, 1_000], ts=9_000), 0)   # first record has the max
    log.append_as_leader(batch(2, ts=3_000), 0)
    assert log.max_timestamp_offset() == (2, 9_000, 0)
    assert open_log(tmp_path, "empty-0").max_timestamp_offset() is None


# ============================================================================ truncation
def test_truncate_to(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    for e in range(4):
        for _ in range(10):
            log.append_as_leader(batch(3), e)
    log.high_watermark = log.log_end_offset
    assert log.log_end_offset == 120 and len(log.segments) > 3
    assert not log.truncate_to(120)
    assert log.truncate_to(65)                             # mid-batch: the batch 63..65 goes
    assert log.log_end_offset == 63 and log.high_watermark == 63
    assert log.leader_epochs.entries == [(0, 0), (1, 30), (2, 60)]
    assert all(s.base_offset < 63 for s in log.segments)
    assert record_offsets(log.read(0, 10**9)) == list(range(63))
    assert log.append_as_leader(batch(2), 7).first_offset == 63
    assert log.leader_epochs.entries[-1] == (7, 63)
    assert log.truncate_to(0)
    assert log.log_end_offset == 0 and log.leader_epochs.entries == []
    assert log.append_as_leader(batch(1), 8).first_offset == 0


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    append_n(log, 30, per_batch=3)
    log.truncate_fully_and_start_at(1_000)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1_000, 1_000, 1_000)
    assert [s.base_offset for s in log.segments] == [1_000]
    assert log.append_as_leader(batch(2), 3).first_offset == 1_000
    with pytest.raises(OffsetOutOfRangeError):
        log.read(999, 10)
    log.deleter.run_all()
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == ["00000000000000001000.log"]


def test_delete_records_before(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    append_n(log, 30, per_batch=3)
    first_segments = len(log.segments)
    assert log.delete_records_before(4) == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    info = log.read(4, 10**6)
    assert batch_offsets(info)[0] == (3, 5)                # the batch holding 4, whole
    assert record_offsets(info, 4)[0] == 4
    assert log.earliest_offset() == 4
    target = log.segments[2].base_offset + 1
    assert log.delete_records_before(target) == target
    assert log.segments[0].base_offset == target - 1 and len(log.segments) == first_segments - 2
    assert log.delete_records_before(2) == target          # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)
    log.high_watermark = 50
    assert log.delete_records_before(-1) == 50
    # Up to the log end: the log start moves into the active segment, which stays (Kafka).
    log.high_watermark = log.log_end_offset
    active = log.active_segment
    assert log.delete_records_before(-1) == log.log_end_offset == 90
    assert log.segments == [active] and log.earliest_offset() == 90


# ============================================================================ leader epochs
def test_leader_epoch_cache(tmp_path):
    log = open_log(tmp_path)
    for epoch, n in [(0, 3), (0, 2), (2, 4), (5, 1)]:
        log.append_as_leader(batch(n), epoch)
    assert log.leader_epochs.entries == [(0, 0), (2, 5), (5, 9)]
    assert log.latest_epoch == 5
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(1) == (0, 5)           # largest epoch <= 1 is 0
    assert log.end_offset_for_epoch(2) == (2, 9)
    assert log.end_offset_for_epoch(5) == (5, 10)          # latest: the log end
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    with open(os.path.join(log.dir, checkpoints.LEADER_EPOCH_FILE)) as f:
        assert f.read() == "0\n3\n0 0\n2 5\n5 9\n"
    log.truncate_to(9)
    assert log.leader_epochs.entries == [(0, 0), (2, 5)]
    log.high_watermark = 9
    log.delete_records_before(7)
    assert log.leader_epochs.entries == [(2, 7)]
    assert log.end_offset_for_epoch(1) == (1, 7)           # below the first known epoch
    log.close()
    again = PartitionLog(log.dir, LogConfig(), log_start_offset=7)   # as the LogManager would
    assert again.leader_epochs.entries == [(2, 7)]
    assert again.fetch_offset_by_timestamp(-2) == (7, -1, 2)


# ============================================================================ followers
def test_append_as_follower_keeps_leader_offsets(tmp_path):
    log = open_log(tmp_path)
    data = batch(3, base_offset=0, epoch=1) + batch(2, base_offset=3, epoch=1) + batch(4, base_offset=5, epoch=3)
    info = log.append_as_follower(data + batch(1, base_offset=9)[:30])   # partial tail ignored
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 8, 9)
    assert log.log_end_offset == 9
    assert log.leader_epochs.entries == [(1, 0), (3, 5)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch(1, base_offset=8))
    with pytest.raises(CorruptMessageError):
        log.append_as_follower(_corrupt_crc(batch(1, base_offset=9)))
    with pytest.raises(CorruptMessageError):
        log.append_as_follower(batch(2, base_offset=9) + batch(1, base_offset=10))
    assert log.append_as_follower(b"").record_count == 0
    log.append_as_follower(batch(1, base_offset=9, epoch=3))
    log.high_watermark = 10
    assert record_offsets(log.read(0, 10**6)) == list(range(10))


# ============================================================================ rolling / flushing
def test_roll_on_segment_ms_and_full_index(tmp_path):
    log = open_log(tmp_path, segment_ms=10_000)
    log.append_as_leader(batch(1, ts=1_000), 0, now_ms=1_000)
    log.append_as_leader(batch(1, ts=11_000), 0, now_ms=11_000)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=11_001), 0, now_ms=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log2 = open_log(tmp_path, "idx-0", segment_index_bytes=8 * 3, index_interval_bytes=0)
    for _ in range(10):
        log2.append_as_leader(batch(1), 0)
    assert len(log2.segments) > 2
    assert all(len(s.index) <= 3 for s in log2.segments)


def test_flush_moves_recovery_point(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    append_n(log, 10, per_batch=2)
    assert log.recovery_point == 0 and log.unflushed_messages == 20
    assert log.pending_flush_offset == log.active_segment.base_offset
    log.flush(log.pending_flush_offset)
    assert log.recovery_point == log.active_segment.base_offset and log.pending_flush_offset is None
    log.flush()
    assert log.recovery_point == 20 and log.unflushed_messages == 0
    every = open_log(tmp_path, "fm-0", flush_messages=1)
    every.append_as_leader(batch(3), 0)
    assert every.recovery_point == 3


def test_config_from_topic_configs():
    cfg = LogConfig.from_topic_configs({"segment.bytes": "1000", "retention.ms": "-1",
                                        "cleanup.policy": "compact,delete", "unknown.key": "x",
                                        "message.timestamp.type": "LogAppendTime",
                                        "preallocate": "true"})
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.cleanup_policy) == (1000, -1, "compact,delete")
    assert cfg.log_append_time and cfg.compact and cfg.delete_enabled and cfg.preallocate
    assert LogConfig().max_message_bytes == 1048588 and LogConfig().segment_bytes == 1073741824
    with pytest.raises(ValueError, match="segment.bytes"):
        LogConfig.from_topic_configs({"segment.bytes": "big"})
    with pytest.raises(ValueError, match="message.timestamp.type"):
        LogConfig.from_topic_configs({"message.timestamp.type": "Whenever"})


# ============================================================================ LogManager
def test_log_manager_lifecycle(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    mgr = LogManager(dirs, LogConfig(segment_bytes=600))
    logs = [mgr.create_log("my-topic", p) for p in range(4)]
    assert mgr.create_log("my-topic", 0) is logs[0]
    assert sorted(mgr.log_dir_of("my-topic", p) for p in range(4)) == sorted(dirs * 2)
    for lg in logs:
        append_n(lg, 10, per_batch=2)
    assert mgr.get_log("my-topic", 3) is logs[3] and mgr.get_log("nope", 0) is None
    assert mgr.flush_due(now_ms=0) == 4                      # rolled segments get flushed
    mgr.checkpoint_recovery_points()
    d1_rp = checkpoints.read_offsets(os.path.join(dirs[0], checkpoints.RECOVERY_POINT_FILE))
    assert set(d1_rp) == {("my-topic", p) for p in range(4) if mgr.log_dir_of("my-topic", p) == dirs[0]}
    assert all(v > 0 for v in d1_rp.values())
    # delete: renamed now, removed after file.delete.delay.ms
    gone_dir = mgr.log_dir_of("my-topic", 1)
    assert mgr.delete_log("my-topic", 1, now_ms=1_000)
    assert mgr.get_log("my-topic", 1) is None
    assert any(n.endswith("-delete") for n in os.listdir(gone_dir))
    assert mgr.tick(now_ms=1_000 + 59_999) == 0
    assert mgr.tick(1_000 + 60_000) == 1
    assert not any(n.endswith("-delete") for n in os.listdir(gone_dir))
    # retention through the manager
    mgr.get_log("my-topic", 0).update_config(LogConfig(segment_bytes=600, retention_bytes=0))
    assert mgr.run_retention(now_ms=0) > 0
    mgr.close()
    for d in dirs:
        assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    again = LogManager(dirs, LogConfig(segment_bytes=600))
    assert sorted((lg.topic, lg.partition) for lg in again.all_logs()) == [("my-topic", p) for p in (0, 2, 3)]
    assert again.get_log("my-topic", 2).log_end_offset == 20
    assert again.get_log("my-topic", 0).log_start_offset == again.get_log("my-topic", 0).segments[0].base_offset > 0
    for d in dirs:
        assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    again.close()


def test_log_manager_clean_start_skips_recovery(tmp_path, monkeypatch):
    d = str(tmp_path / "logs")
    mgr = LogManager([d], LogConfig(segment_bytes=600))
    append_n(mgr.create_log("t", 0), 20, per_batch=2)
    mgr.close()
    recovered = []
    real = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self, *a: recovered.append(self) or real(self, *a))
    again = LogManager([d], LogConfig(segment_bytes=600))
    assert recovered == [] and again.get_log("t", 0).log_end_offset == 40
    again.get_log("t", 0).append_as_leader(batch(1), 0)
    # no close: the next start recovers the unflushed tail only
    third = LogManager([d], LogConfig(segment_bytes=600))
    assert len(recovered) == 1 and third.get_log("t", 0).log_end_offset == 41


def test_producer_state_outlives_the_segments_retention_deletes(tmp_path):
    """KIP-360: a producer's state stays when retention deletes all its batches (until
    producer.id.expiration.ms), so its retry of the last batch is still a duplicate and an
    older epoch is still fenced, also after a restart."""
    def idem(seq: int, epoch: int = 3) -> bytes:
        return build_batch([Record(b"k", b"v", [], 10_000), Record(b"k", b"w", [], 10_000)],
                           producer_id=7, producer_epoch=epoch, base_sequence=seq, now_ms=10_000)
    log = open_log(tmp_path, retention_ms=1000)
    log.append_as_leader(idem(0), 0)
    log.append_as_leader(idem(2), 0)
    log.high_watermark = log.log_end_offset
    assert log.delete_retention_segments(now_ms=10**12) == 1
    assert log.log_start_offset == log.log_end_offset == 4
    again = log.append_as_leader(idem(2), 0)                 # the producer's retry
    assert again.duplicate and (again.first_offset, again.last_offset) == (2, 3)
    with pytest.raises(errors.BY_NAME["INVALID_PRODUCER_EPOCH"]):
        log.append_as_leader(idem(0, epoch=1), 0)             # a zombie of an older epoch
    log.close()
    reopened = PartitionLog(log.dir, LogConfig(retention_ms=1000), log_start_offset=4)
    try:
        assert reopened.append_as_leader(idem(2), 0).duplicate
        assert reopened.append_as_leader(idem(4), 0).first_offset == 4
    finally:
        reopened.close()


def test_cleanup_policies_are_those_of_the_config_they_were_made_with():
    """cleanup.policy is parsed once per LogConfig (every append asks `compact`): a config
    made by replace() or from topic configs answers for its own policy, never a stale one."""
    from dataclasses import replace as dc_replace
    base = LogConfig()
    assert base.cleanup_policies == ("delete",) and not base.compact and base.delete_enabled
    both = dc_replace(base, cleanup_policy=" compact , delete")
    assert both.cleanup_policies == ("compact", "delete") and both.compact and both.delete_enabled
    compacted = LogConfig.from_topic_configs({"cleanup.policy": "compact"}, base)
    assert compacted.compact and not compacted.delete_enabled
    assert compacted == LogConfig(cleanup_policy="compact")
    assert LogConfig.from_topic_configs({"_policies": "compact"}).cleanup_policies == ("delete",)
