"""Log compaction (broker/log/cleaner.py) on real files: latest value per key at unchanged
offsets, the active segment untouched, tombstones and the delete horizon, the dirty ratio
and compaction lags, every codec, crashes at every rename of a swap, reads and appends
after cleaning, the cleaner checkpoint, and keyless records refused by compacted topics."""
from __future__ import annotations

import os

import pytest

from broker.log import ORIGIN_COORDINATOR, LogConfig, LogManager, PartitionLog
from broker.log import checkpoints
from broker.log.cleaner import LogCleaner, cleanable_range
from broker.log.errors import InvalidRecordError
from clients.protocol import compression
from clients.protocol.batch_header import DELETE_HORIZON, TIMESTAMP_TYPE_LOG_APPEND
from clients.protocol.records import (ABORT, COMMIT, RecordBatch, Record, build_batch,
                                      build_control_batch, iter_batches)

T0 = 1_700_000_000_000
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
          compression.ZSTD]


def compact_config(**cfg) -> LogConfig:
    base = dict(cleanup_policy="compact", segment_bytes=1200, index_interval_bytes=100,
                file_delete_delay_ms=1000)
    base.update(cfg)
    return LogConfig(**base)


def open_log(tmp_path, name: str = "topic-0", **cfg) -> PartitionLog:
    return PartitionLog(str(tmp_path / name), compact_config(**cfg))


def kv_batch(pairs, ts: int = T0, codec: int = 0, **kw) -> bytes:
    return build_batch([Record(k, v, [("h", b"x")], ts) for k, v in pairs], compression=codec,
                       now_ms=ts, **kw)


def put(log: PartitionLog, pairs, ts: int = T0, codec: int = 0, **kw) -> None:
    log.append_as_leader(kv_batch(pairs, ts, codec, **kw), 3, now_ms=ts)
    log.high_watermark = log.log_end_offset


def fill(log: PartitionLog, n: int, keys: int, ts: int = T0, codec: int = 0,
         start: int = 0) -> None:
    """`n` single-record batches cycling over `keys` keys, value = key + sequence number."""
    for i in range(start, start + n):
        k = b"k%02d" % (i % keys)
        put(log, [(k, k + b"=%d" % i)], ts, codec)


def batches(log: PartitionLog, offset: int | None = None) -> list[RecordBatch]:
    info = log.read(log.log_start_offset if offset is None else offset, 1 << 30)
    data = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    return list(iter_batches(data))


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches(log) if not b.is_control for r in b.records]


def latest(recs) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for off, k, v in recs:
        out[k] = (off, v)
    return out


def live(recs) -> dict:
    return {k: ov for k, ov in latest(recs).items() if ov[1] is not None}


def clean(log: PartitionLog, now: int = T0) -> bool:
    return LogCleaner().clean_filthiest([log], now) is log


def file_bytes(seg) -> bytes:
    return os.pread(seg.fd, seg.size, 0)


def dir_names(log: PartitionLog) -> list[str]:
    return sorted(os.listdir(log.dir))


# ============================================================================ basics
def test_latest_value_per_key_at_original_offsets_active_untouched(tmp_path):
    log = open_log(tmp_path)
    fill(log, 300, keys=12)
    before = records(log)
    assert len(log.segments) > 10
    active = log.active_segment
    active_bytes = file_bytes(active)
    active_files = {n: (tmp_path / "topic-0" / n).read_bytes() for n in os.listdir(log.dir)
                    if n.startswith(f"{active.base_offset:020d}.")}
    leo = log.log_end_offset
    cleaned_part = {(o, k, v) for o, k, v in before if o < active.base_offset}

    assert clean(log)

    after = records(log)
    assert live(after) == live(before)
    assert set(after) <= set(before)                       # same offsets, same records
    offs = [o for o, _, _ in after]
    assert offs == sorted(set(offs))
    below = [(o, k) for o, k, _ in after if o < active.base_offset]
    assert len(below) == len({k for _, k in below})         # one record per key below it
    want = latest(sorted(cleaned_part))
    assert {k: o for o, k in below} == {k: ov[0] for k, ov in want.items()}
    assert log.active_segment is active and file_bytes(active) == active_bytes
    for n, data in active_files.items():
        if n.endswith(".log"):
            assert (tmp_path / "topic-0" / n).read_bytes() == data
    assert log.log_end_offset == leo
    assert log.first_dirty_offset == active.base_offset
    for prev, nxt in zip(log.segments, log.segments[1:]):  # each ends where the next begins
        assert prev.next_offset == nxt.base_offset
    assert not [n for n in dir_names(log) if n.endswith((".cleaned", ".swap"))]
    # groups are formed from the sizes before cleaning (as Kafka): the now small segments
    # are merged by the next cleaning
    n = len(log.segments)
    fill(log, 30, keys=12, start=1000)
    log.roll()
    assert clean(log)
    assert len(log.segments) < n // 3
    assert live(records(log)) == live(before + [(o, k, v) for o, k, v in records(log)
                                                 if o >= leo])
    assert len(records(log)) == 12


def test_unchanged_segments_are_not_rewritten(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.0)
    fill(log, 100, keys=100)                                # every key once
    old = list(log.segments)
    names = dir_names(log)
    assert clean(log)
    assert len(old) >= 4 and all(a is b for a, b in zip(old, log.segments))
    assert dir_names(log) == names
    fill(log, 40, keys=1000, start=100)                     # keys k100..k139: all new
    log.roll()
    assert clean(log)
    assert all(a is b for a, b in zip(old[:-2], log.segments))
    assert len(records(log)) == 140


# ============================================================================ tombstones
def put_keys(log: PartitionLog, keys: list[bytes], rounds: int, tag: bytes) -> None:
    for i in range(rounds):
        for k in keys:
            put(log, [(k, k + b"=" + tag + b"%d" % i)])
    log.roll()


def test_tombstone_survives_one_clean_and_goes_after_delete_retention(tmp_path):
    log = open_log(tmp_path, delete_retention_ms=10_000, min_cleanable_dirty_ratio=0.01)
    fill(log, 40, keys=4)
    put(log, [(b"k01", None)], ts=T0 + 5)
    log.roll()
    assert clean(log, now=T0 + 100)
    recs = records(log)
    assert latest(recs)[b"k01"] == (40, None)
    assert [k for _, k, _ in recs].count(b"k01") == 1       # older values of k01 went
    [tomb_batch] = [b for b in batches(log) if any(r.key == b"k01" for r in b.records)]
    assert tomb_batch.header.attributes & DELETE_HORIZON
    assert tomb_batch.base_timestamp == T0 + 100 + 10_000   # KIP-534: baseTimestamp = horizon
    assert tomb_batch.records[0].timestamp == T0 + 5        # record timestamps unchanged

    others = [b"k00", b"k02", b"k03"]
    put_keys(log, others, 5, b"a")                           # new dirty data, other keys
    assert clean(log, now=T0 + 100 + 9_999)                 # one ms before the horizon
    assert latest(records(log))[b"k01"] == (40, None)
    put_keys(log, others, 5, b"b")
    assert clean(log, now=T0 + 100 + 10_000)                # at the horizon: gone
    recs = records(log)
    assert b"k01" not in {k for _, k, _ in recs}
    assert live(recs) == latest(recs) and set(live(recs)) == set(others)


def test_tombstone_in_batch_with_values_keeps_values_and_horizon(tmp_path):
    log = open_log(tmp_path, delete_retention_ms=1_000, min_cleanable_dirty_ratio=0.0)
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", None), (b"c", b"1")], ts=T0 + 1)
    log.roll()
    assert clean(log, now=T0)
    b = batches(log)[-1]
    assert [(r.key, r.value) for r in b.records] == [(b"a", None), (b"c", b"1")]
    assert b.header.attributes & DELETE_HORIZON and b.base_timestamp == T0 + 1_000
    assert [r.timestamp for r in b.records] == [T0 + 1, T0 + 1]
    put(log, [(b"d", b"1")], ts=T0 + 2)
    log.roll()
    assert clean(log, now=T0 + 1_000)
    assert live(records(log)) == {b"b": (1, b"1"), b"c": (3, b"1"), b"d": (4, b"1")}
    assert b"a" not in {k for _, k, _ in records(log)}


# ============================================================================ when to clean
def test_below_min_cleanable_dirty_ratio_not_cleaned(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    fill(log, 200, keys=200)                 # unique keys: cleaning removes nothing
    log.roll()
    assert clean(log)
    clean_bytes = log.size_in_bytes
    fill(log, 30, keys=5, start=1000)        # a dirty part much smaller than the clean part
    log.roll()
    ltc = cleanable_range(log, T0)
    assert ltc is not None and 0 < ltc.ratio < 0.5
    before = (dir_names(log), records(log))
    assert not clean(log)
    assert (dir_names(log), records(log)) == before
    fill(log, 400, keys=5, start=2000)       # now mostly dirty
    log.roll()
    assert cleanable_range(log, T0).ratio > 0.5
    assert clean(log)
    assert len(records(log)) == 200          # k00..k04 superseded, once each
    assert log.size_in_bytes < clean_bytes + 61 * 40


def test_ratio_equal_to_minimum_is_not_enough(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=1.0)
    fill(log, 20, keys=2)
    log.roll()
    assert cleanable_range(log, T0).ratio == 1.0
    assert not clean(log)                    # Kafka: cleanableRatio > minCleanableRatio


def test_min_compaction_lag_keeps_recent_records(tmp_path):
    lag = 60_000
    log = open_log(tmp_path, min_compaction_lag_ms=lag, min_cleanable_dirty_ratio=0.0)
    fill(log, 30, keys=3, ts=T0)             # old
    log.roll()
    old_end = log.log_end_offset
    fill(log, 30, keys=3, ts=T0 + 50_000, start=100)   # recent at T0 + lag
    log.roll()
    assert clean(log, now=T0 + lag)
    recs = records(log)
    old = [(o, k) for o, k, _ in recs if o < old_end]
    assert sorted(k for _, k in old) == [b"k00", b"k01", b"k02"]   # old part compacted alone
    assert len([o for o, _, _ in recs if o >= old_end]) == 30     # recent part untouched
    assert log.first_dirty_offset == old_end
    assert not clean(log, now=T0 + lag)                # nothing more may be cleaned yet
    assert clean(log, now=T0 + 50_000 + lag)
    assert sorted(k for _, k, _ in records(log)) == [b"k00", b"k01", b"k02"]


def test_max_compaction_lag_forces_cleaning(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=3_600_000)
    fill(log, 200, keys=200)
    log.roll()
    assert clean(log, now=T0)                # all dirty at first
    fill(log, 10, keys=2, start=500, ts=T0 + 1000)
    log.roll()
    assert not clean(log, now=T0 + 1000)
    assert clean(log, now=T0 + 1000 + 3_600_001)
    assert len([k for _, k, _ in records(log) if k in (b"k00", b"k01")]) == 2


def test_max_compaction_lag_bounds_the_active_segment_age():
    cfg = compact_config(segment_ms=100_000, max_compaction_lag_ms=5_000)
    assert cfg.max_segment_ms == 5_000
    assert LogConfig(segment_ms=100_000, max_compaction_lag_ms=5_000).max_segment_ms == 100_000


def test_nothing_above_high_watermark_or_in_active_segment_is_cleaned(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.0)
    fill(log, 60, keys=3)
    log.roll()
    fill(log, 60, keys=3, start=100)
    log.high_watermark = 60                  # the second half is not replicated yet
    assert clean(log)
    recs = records(log)
    assert len([o for o, _, _ in recs if o >= 60]) == 60
    assert log.first_dirty_offset <= 60


def test_delete_policy_logs_are_never_cleaned(tmp_path):
    log = open_log(tmp_path, cleanup_policy="delete")
    fill(log, 60, keys=3)
    log.roll()
    assert not clean(log)


# ============================================================================ codecs
@pytest.mark.parametrize("codec", CODECS, ids=[compression.codec_name(c) for c in CODECS])
def test_every_codec_round_trips_through_cleaning(tmp_path, codec):
    log = open_log(tmp_path, segment_bytes=4000, min_cleanable_dirty_ratio=0.0)
    seq = 0
    for i in range(30):
        pairs = [(b"k%d" % ((i * 7 + j) % 9), b"v%d-%d" % (i, j) * 3) for j in range(5)]
        log.append_as_leader(kv_batch(pairs, T0 + i, codec, producer_id=77, producer_epoch=2,
                                      base_sequence=seq), 3, now_ms=T0 + i)
        seq += 5
    log.high_watermark = log.log_end_offset
    log.roll()
    before = records(log)
    assert clean(log)
    after = records(log)
    assert live(after) == live(before) and set(after) <= set(before)
    assert len(after) == 9
    for b in batches(log):
        if b.records_count == 0:
            continue
        assert b.compression == codec
        assert (b.producer_id, b.producer_epoch) == (77, 2)
        assert b.base_sequence == b.base_offset            # sequence kept with the batch
        assert b.header.last_offset_delta == 4             # last offset kept: 5 records each
        assert b.partition_leader_epoch == 3
        assert b.timestamp_type == 0
        for r in b.records:
            assert r.headers == [("h", b"x")]
            assert r.timestamp == T0 + (r.offset // 5)


def test_log_append_time_batches_keep_their_timestamp_type(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime", min_cleanable_dirty_ratio=0.0)
    for i in range(10):
        log.append_as_leader(kv_batch([(b"a", b"%d" % i), (b"b%d" % i, b"x")], T0), 0,
                             now_ms=T0 + 100 + i)
    log.high_watermark = log.log_end_offset
    log.roll()
    assert clean(log)
    bs = [b for b in batches(log) if b.records]
    assert all(b.header.attributes & TIMESTAMP_TYPE_LOG_APPEND for b in bs)
    for b in bs:
        assert all(r.timestamp == b.max_timestamp == T0 + 100 + b.base_offset // 2
                   for r in b.records)
    assert latest(records(log))[b"a"] == (18, b"9")


# ============================================================================ crash safety
class _Crash(BaseException):
    pass


def _crashing_replace(monkeypatch, at: int) -> list[int]:
    calls = [0]
    real = os.replace

    def replace(src, dst, *a, **kw):
        if calls[0] == at:
            raise _Crash(f"crash before rename #{at}: {src} -> {dst}")
        calls[0] += 1
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "replace", replace)
    return calls


def _seed(tmp_path) -> PartitionLog:
    """About 30 segments of 4 batches, cleaned in groups of 3 (segment.bytes raised)."""
    log = open_log(tmp_path, segment_bytes=400, min_cleanable_dirty_ratio=0.0)
    fill(log, 120, keys=6)
    put(log, [(b"k03", None)])
    fill(log, 9, keys=3, start=500)
    log.roll()
    log.update_config(compact_config(segment_bytes=1200, min_cleanable_dirty_ratio=0.0))
    return log


@pytest.mark.parametrize("trust_indexes", [False, True], ids=["recover", "trusted"])
@pytest.mark.parametrize("at", range(0, 40))
def test_crash_at_any_rename_of_a_clean_recovers(tmp_path, monkeypatch, at, trust_indexes):
    log = _seed(tmp_path)
    before = records(log)
    leo = log.log_end_offset
    calls = _crashing_replace(monkeypatch, at)
    try:
        LogCleaner().clean(cleanable_range(log, T0), T0)
        crashed = False
    except _Crash:
        crashed = True
    monkeypatch.undo()
    if not crashed:
        assert calls[0] < at
        pytest.skip(f"the clean took only {calls[0]} renames")
    # reopen without closing (as after kill -9)
    again = PartitionLog(log.dir, log.config, recovery_point=leo if trust_indexes else 0)
    names = os.listdir(again.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    assert again.log_end_offset == leo
    again.high_watermark = leo
    after = records(again)
    assert live(after) == live(before)
    assert set(after) <= set(before)
    offs = [o for o, _, _ in after]
    assert offs == sorted(set(offs))
    assert sorted(n for n in names if n.endswith(".log")) == \
        [f"{s.base_offset:020d}.log" for s in again.segments]
    for prev, nxt in zip(again.segments, again.segments[1:]):
        assert prev.next_offset <= nxt.base_offset
    for seg in again.segments:                    # indexes agree with the data
        for off, _, _ in after:
            if seg.base_offset <= off < seg.next_offset:
                pos, h = seg.translate_offset(off)
                assert h.base_offset <= off <= h.last_offset
    put(again, [(b"new", b"1")])
    assert records(again)[-1] == (leo, b"new", b"1")
    assert clean(again)                           # and it cleans fully afterwards
    final = records(again)
    assert live(final) == {**live(before), b"new": (leo, b"1")}
    assert len(final) == len(live(final)) + 1    # + the k03 tombstone (horizon not passed)


def test_leftover_cleaned_and_swap_files_are_rolled_back(tmp_path):
    log = _seed(tmp_path)
    before = records(log)
    d = tmp_path / "topic-0"
    base = f"{log.segments[1].base_offset:020d}"
    (d / f"{base}.log.cleaned").write_bytes(b"garbage")
    (d / f"{base}.index.swap").write_bytes(b"x" * 8)
    (d / f"{base}.timeindex.cleaned").write_bytes(b"")
    again = PartitionLog(log.dir, log.config)
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    again.high_watermark = again.log_end_offset
    assert records(again) == before


def test_committed_swap_is_finished_on_open(tmp_path):
    """A `.log.swap` left with the old segments still present: the swap wins."""
    log = _seed(tmp_path)
    before = records(log)
    old_first = log.segments[0]
    d = tmp_path / "topic-0"
    saved = {n: (d / n).read_bytes() for n in os.listdir(d)
             if n.endswith((".log", ".index", ".timeindex"))}
    assert clean(log)
    new_first = log.segments[0]
    assert new_first.base_offset == old_first.base_offset
    cleaned = {n: (d / n).read_bytes() for n in os.listdir(d)
               if n.startswith(f"{new_first.base_offset:020d}.")
               and n.endswith((".log", ".index", ".timeindex"))}
    for n in os.listdir(d):                       # back to the old files + the swap files
        if n.endswith((".log", ".index", ".timeindex", ".deleted")):
            os.unlink(d / n)
    for n, data in saved.items():
        (d / n).write_bytes(data)
    for n, data in cleaned.items():
        (d / (n + ".swap")).write_bytes(data)
    again = PartitionLog(log.dir, log.config)
    again.high_watermark = again.log_end_offset
    after = records(again)
    assert live(after) == live(before)
    assert (d / f"{new_first.base_offset:020d}.log").read_bytes() == \
        cleaned[f"{new_first.base_offset:020d}.log"]
    # the old segments the swap covered are gone, the second group's are back
    assert len(after) < len(before)


# ============================================================================ reads / appends
def test_reads_and_appends_after_cleaning(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.0)
    fill(log, 100, keys=5)
    log.roll()
    leo = log.log_end_offset
    assert clean(log)
    survivors = [o for o, _, _ in records(log)]
    assert survivors == [95, 96, 97, 98, 99]
    # a fetch from an offset compacted away starts at the next batch that remains
    first = batches(log, 10)[0]
    assert first.base_offset <= 95 <= first.last_offset or first.records_count == 0
    assert [r.offset for r in first.records if r.offset >= 10][:1] in ([95], [])
    assert [o for b in batches(log, 10) for o in (r.offset for r in b.records)] == survivors
    assert [o for b in batches(log, 96) for o in (r.offset for r in b.records)] == survivors[1:]
    assert log.offset_metadata(50).segment_base_offset <= 50
    # appends continue densely at the log end
    for i in range(20):
        put(log, [(b"x%d" % i, b"y")])
    assert [o for o, _, _ in records(log)][-20:] == list(range(leo, leo + 20))
    assert log.fetch_offset_by_timestamp(T0)[0] == 95
    # and the log reopens to the same state
    log.close()
    again = PartitionLog(log.dir, log.config, clean_shutdown=True)
    again.high_watermark = again.log_end_offset
    assert again.log_end_offset == leo + 20
    assert [o for o, _, _ in records(again)] == survivors + list(range(leo, leo + 20))


def test_region_handed_out_before_a_clean_stays_readable(tmp_path):
    mgr = LogManager([str(tmp_path / "d")], compact_config(min_cleanable_dirty_ratio=0.0))
    log = mgr.create_log("t", 0)
    fill(log, 100, keys=5)
    log.roll()
    info = log.read(0, 1 << 30)
    old = b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)
    assert mgr.run_cleaner(T0) == 1
    assert any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions) == old
    mgr.tick(2**62)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    mgr.close()


def test_empty_batch_keeps_producer_sequence(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.0)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")], producer_id=9, producer_epoch=0,
                                  base_sequence=0), 0, now_ms=T0)
    put(log, [(b"a", b"2"), (b"b", b"2")])          # supersedes the producer's only batch
    log.roll()
    assert clean(log)
    first = batches(log)[0]
    assert (first.records_count, first.base_offset, first.last_offset) == (0, 0, 1)
    assert (first.producer_id, first.base_sequence) == (9, 0)
    # rebuilt from the log alone (no snapshots), the producer's next sequence is 2
    log.close()
    for n in os.listdir(log.dir):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, n))
    again = PartitionLog(log.dir, log.config)
    assert again.producers.last_entry(9).last_seq == 1
    info = again.append_as_leader(kv_batch([(b"c", b"1")], producer_id=9, producer_epoch=0,
                                           base_sequence=2), 0, now_ms=T0)
    assert info.first_offset == 4


def txn(log: PartitionLog, pid: int, pairs, seq: int, end: int | None, epoch: int = 0) -> None:
    """A transaction of producer `pid` with `pairs`; `end` ABORT/COMMIT writes its marker
    (None leaves it open)."""
    log.append_as_leader(kv_batch(pairs, producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, is_transactional=True), 0, now_ms=T0)
    if end is not None:
        log.append_as_leader(build_control_batch(end, producer_id=pid, producer_epoch=epoch,
                                                 timestamp_ms=T0), 0, now_ms=T0,
                             origin=ORIGIN_COORDINATOR)
    log.high_watermark = log.log_end_offset


def markers(log: PartitionLog) -> list[tuple[int, int, bool]]:
    """(offset, producer id, delete horizon set) of every control batch."""
    return [(b.header.base_offset, b.header.producer_id,
             bool(b.header.attributes & DELETE_HORIZON)) for b in batches(log) if b.is_control]


def index_entries(log: PartitionLog) -> list[tuple[int, int, int]]:
    return [(t.producer_id, t.first_offset, t.last_offset)
            for seg in log.segments for t in seg.txn_index.entries]


def test_aborted_records_go_and_never_hide_a_committed_value(tmp_path):
    log = open_log(tmp_path, delete_retention_ms=100, min_cleanable_dirty_ratio=0.0)
    put(log, [(b"k", b"plain")])                                # 0
    txn(log, 5, [(b"k", b"aborted"), (b"x", b"aborted")], 0, ABORT)    # 1-2, marker 3
    txn(log, 6, [(b"y", b"committed")], 0, COMMIT)              # 4, marker 5
    txn(log, 5, [(b"z", b"committed")], 2, COMMIT, epoch=0)     # 6, marker 7
    put(log, [(b"end", b"1")])
    log.roll()
    assert index_entries(log) == [(5, 1, 3)]
    assert clean(log)
    assert live(records(log)) == {b"k": (0, b"plain"), b"y": (4, b"committed"),
                                  b"z": (6, b"committed"), b"end": (8, b"1")}
    # the ABORT marker saw its batch in this pass: it stays, with its index entry
    assert [m[:2] for m in markers(log)] == [(3, 5), (5, 6), (7, 5)]
    assert index_entries(log) == [(5, 1, 3)]


def test_markers_of_emptied_transactions_go_after_their_delete_horizon(tmp_path):
    log = open_log(tmp_path, delete_retention_ms=100, min_cleanable_dirty_ratio=0.0)
    txn(log, 5, [(b"a", b"aborted")], 0, ABORT)                 # 0, marker 1
    txn(log, 6, [(b"b", b"old")], 0, COMMIT)                    # 2, marker 3
    put(log, [(b"b", b"new")])                                  # 4: b's committed value goes
    txn(log, 5, [(b"p5", b"1")], 1, COMMIT)                     # 5, marker 6 } the producers'
    txn(log, 6, [(b"p6", b"1")], 1, COMMIT)                     # 7, marker 8 } last batches
    put(log, [(b"c", b"1")])
    log.roll()
    assert clean(log, now=T0)
    # first pass: aborted data and the shadowed committed value are removed; their markers
    # still met batches of their transactions, so they stay as they are
    assert [m[:2] for m in markers(log)] == [(1, 5), (3, 6), (6, 5), (8, 6)]
    assert not any(m[2] for m in markers(log))
    put(log, [(b"c", b"2")])
    log.roll()
    assert clean(log, now=T0 + 10)
    # second pass: no batch of either transaction left: each marker gets a delete horizon
    # (the index entry goes: nothing aborted is left to skip)
    assert markers(log) == [(1, 5, True), (3, 6, True), (6, 5, False), (8, 6, False)]
    assert index_entries(log) == []
    put(log, [(b"c", b"3")])
    log.roll()
    assert clean(log, now=T0 + 50)                              # horizon T0 + 10 + 100 not yet
    assert len(markers(log)) == 4
    put(log, [(b"c", b"4")])
    log.roll()
    assert clean(log, now=T0 + 200)
    assert [m[:2] for m in markers(log)] == [(6, 5), (8, 6)]    # their data is still there
    assert live(records(log)) == {b"b": (4, b"new"), b"p5": (5, b"1"), b"p6": (7, b"1"),
                                  b"c": (12, b"4")}
    # read back from the files alone, the producers have no open transaction
    log.close()
    for n in os.listdir(log.dir):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, n))
    again = PartitionLog(log.dir, log.config)
    again.high_watermark = again.log_end_offset
    assert again.last_stable_offset == again.log_end_offset


def test_a_tombstone_after_a_committed_value_removes_it_and_then_goes(tmp_path):
    log = open_log(tmp_path, delete_retention_ms=0, min_cleanable_dirty_ratio=0.0)
    txn(log, 5, [(b"t", b"txn")], 0, COMMIT)                    # 0, marker 1
    put(log, [(b"t", None)])                                    # 2: a tombstone
    put(log, [(b"u", b"1")])
    put(log, [(b"u", b"2")])
    log.roll()
    assert clean(log, now=T0)
    put(log, [(b"v", b"1")])
    log.roll()
    assert clean(log, now=T0 + 10)                              # past the tombstone's horizon
    assert live(records(log)) == {b"u": (4, b"2"), b"v": (5, b"1")}
    assert (b"t", None) not in [(k, v) for _, k, v in records(log)]
    assert not [v for _, k, v in records(log) if k == b"t"]     # b"txn" does not come back


def test_keyless_records_in_compacted_log_are_dropped_by_cleaner(tmp_path):
    """Written while the topic was delete-policy, then switched to compact (as Kafka)."""
    log = open_log(tmp_path, cleanup_policy="delete")
    put(log, [(None, b"no key"), (b"a", b"1")])
    put(log, [(b"a", b"2")])
    log.roll()
    log.update_config(compact_config(min_cleanable_dirty_ratio=0.0))
    assert clean(log)
    assert records(log) == [(2, b"a", b"2")]


# ============================================================================ produce validation
@pytest.mark.parametrize("codec", [compression.NONE, compression.ZSTD], ids=["plain", "zstd"])
def test_keyless_record_refused_by_compacted_topic(tmp_path, codec):
    log = open_log(tmp_path)
    data = build_batch([Record(b"k", b"v"), Record(None, b"v")], compression=codec)
    with pytest.raises(InvalidRecordError, match="cannot accept message without key"):
        log.append_as_leader(data, 0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.append_as_leader(build_batch([Record(b"k", None)], compression=codec), 0)   # tombstone ok
    marker = build_control_batch(COMMIT, producer_id=1, producer_epoch=0)
    log.append_as_leader(marker, 0, origin=ORIGIN_COORDINATOR)                     # markers ok
    plain = open_log(tmp_path, "plain-0", cleanup_policy="delete")
    assert plain.append_as_leader(data, 0).last_offset == 1
    both = open_log(tmp_path, "both-0", cleanup_policy="compact,delete")
    with pytest.raises(InvalidRecordError):
        both.append_as_leader(data, 0)


# ============================================================================ manager / checkpoint
def test_manager_runs_one_log_per_call_and_checkpoints(tmp_path):
    d = str(tmp_path / "d")
    cfg = compact_config(min_cleanable_dirty_ratio=0.0)
    mgr = LogManager([d], cfg)
    logs = [mgr.create_log("c", p) for p in range(2)]
    plain = mgr.create_log("p", 0, LogConfig(segment_bytes=1200))
    for lg in logs + [plain]:
        fill(lg, 60, keys=3)
        lg.roll()
    plain_names = dir_names(plain)
    assert mgr.run_cleaner(T0) == 1
    assert mgr.run_cleaner(T0) == 1
    assert mgr.run_cleaner(T0) == 0
    assert dir_names(plain) == plain_names
    path = os.path.join(d, checkpoints.CLEANER_OFFSET_FILE)
    assert checkpoints.read_offsets(path) == {("c", 0): 60, ("c", 1): 60}
    with open(path) as f:
        assert f.read() == "0\n2\nc 0 60\nc 1 60\n"
    mgr.close()
    again = LogManager([d], cfg, {"p": LogConfig(segment_bytes=1200)})
    assert again.get_log("c", 0).first_dirty_offset == 60
    assert again.run_cleaner(T0) == 0              # nothing dirty since
    again.close()


def test_manager_cleaner_disabled(tmp_path):
    d = str(tmp_path / "d")
    mgr = LogManager([d], compact_config(min_cleanable_dirty_ratio=0.0), cleaner_enabled=False)
    lg = mgr.create_log("c", 0)
    fill(lg, 60, keys=3)
    lg.roll()
    assert mgr.run_cleaner(T0) == 0
    mgr.checkpoint_recovery_points()
    assert not os.path.exists(os.path.join(d, checkpoints.CLEANER_OFFSET_FILE))
    mgr.close()


def test_dedupe_buffer_bounds_the_dirty_part_mapped_per_call(tmp_path):
    d = str(tmp_path / "d")
    mgr = LogManager([d], compact_config(min_cleanable_dirty_ratio=0.0),
                     cleaner_dedupe_buffer_size=24 * 4)        # about 3 keys
    lg = mgr.create_log("c", 0)
    fill(lg, 120, keys=40)
    lg.roll()
    steps = []
    while mgr.run_cleaner(T0):
        steps.append(lg.first_dirty_offset)
    assert len(steps) > 2 and steps == sorted(steps) and steps[-1] == 120
    assert sorted(k for _, k, _ in records(lg)) == sorted(b"k%02d" % i for i in range(40))
    mgr.close()


def test_truncation_lowers_the_first_dirty_offset(tmp_path):
    d = str(tmp_path / "d")
    mgr = LogManager([d], compact_config(min_cleanable_dirty_ratio=0.0))
    lg = mgr.create_log("c", 0)
    fill(lg, 100, keys=5)
    lg.roll()
    assert mgr.run_cleaner(T0) == 1 and lg.first_dirty_offset == 100
    assert lg.recovery_point == 0                # so only the cleaner checkpoint is lowered
    assert lg.truncate_to(97)
    assert lg.log_end_offset == 97 and lg.first_dirty_offset == 97
    path = os.path.join(d, checkpoints.CLEANER_OFFSET_FILE)
    assert checkpoints.read_offsets(path) == {("c", 0): 97}
    assert lg.truncate_to(50)                    # inside a gap the cleaner left
    assert lg.log_end_offset == 50               # the truncation point (as Kafka's truncateTo),
                                                 # not the end of the last batch left (< 50)
    put(lg, [(b"z", b"1")])
    assert records(lg)[-1][0] == 50
    mgr.close()
