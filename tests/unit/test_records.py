"""RecordBatch v2 codec: round trips, cross-implementation interop (kafka-python, aiokafka),
control batches, partial batches, corruption and decompression bombs."""
from __future__ import annotations

import io
import random
import struct
from typing import Iterator

import pytest
import snappy
import zstandard
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from clients.protocol import compression as C
from clients.protocol import errors
from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, HEADER_SIZE, BatchHeader,
                                           pack_header, read_header, write_crc)
from clients.protocol.records import (ABORT, COMMIT, ConsumedRecord, Record, RecordBatch,
                                      build_batch, build_control_batch, iter_batch_headers,
                                      iter_batches, parse_control_record, records_from_fetch)

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
NOW = 1_700_000_000_000

SAMPLE = [
    Record(b"key-0", b"value-0"),
    Record(None, b"null key"),
    Record(b"null value", None),
    Record(None, None),
    Record(b"", b""),
    Record(b"k", b"v", [("h1", b"one"), ("h-null", None), ("", b""), ("h1", b"dup")]),
    Record(b"unicode", "é∑😀".encode(), [("clé-ünï-😀", "välue".encode())]),
    Record(b"ts-explicit-low", b"x", timestamp=NOW - 5_000),     # negative delta
    Record(b"ts-explicit-high", b"y", timestamp=NOW + 12_345),
    Record(b"big", b"z" * 20_000, [("big-header", b"h" * 9_000)]),  # multi-byte varints
]


def _one(buf) -> RecordBatch:
    batches = list(iter_batches(buf))
    assert len(batches) == 1
    return batches[0]


def _expected_ts(rec: Record) -> int:
    return NOW if rec.timestamp is None else rec.timestamp


def _assert_records(got: list[ConsumedRecord], sent: list[Record], base_offset: int) -> None:
    assert len(got) == len(sent)
    for i, (g, s) in enumerate(zip(got, sent)):
        assert g.offset == base_offset + i
        assert g.key == s.key and g.value == s.value
        assert g.headers == list(s.headers)
        assert g.timestamp == _expected_ts(s)
        assert g.timestamp_type == 0


# --- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec):
    buf = build_batch(SAMPLE, base_offset=1000, compression=codec, now_ms=NOW,
                      partition_leader_epoch=7)
    assert isinstance(buf, bytes)
    b = _one(buf)
    h = b.header
    assert (h.magic, h.base_offset, h.partition_leader_epoch) == (2, 1000, 7)
    assert b.compression == codec and h.attributes == codec
    assert h.records_count == len(SAMPLE) == b.records_count
    assert h.last_offset_delta == len(SAMPLE) - 1
    assert b.base_offset == 1000 and b.last_offset == 1000 + len(SAMPLE) - 1
    assert b.next_offset == b.last_offset + 1 and b.size == len(buf)
    assert h.base_timestamp == NOW == b.base_timestamp
    assert h.max_timestamp == NOW + 12_345 == b.max_timestamp
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert not b.is_control and not b.is_transactional and b.timestamp_type == 0
    _assert_records(b.records, SAMPLE, 1000)
    for r in b.records:
        assert (r.leader_epoch, r.producer_id, r.producer_epoch, r.sequence) == (7, -1, -1, -1)
    # bytes, bytearray and memoryview inputs give the same result
    assert list(iter_batches(bytearray(buf))) == [b]
    assert list(iter_batches(memoryview(buf))) == [b]


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_and_transactional_fields(codec):
    recs = [Record(b"k%d" % i, b"v%d" % i) for i in range(5)]
    buf = build_batch(recs, compression=codec, producer_id=4242, producer_epoch=3,
                      base_sequence=17, is_transactional=True, now_ms=NOW)
    b = _one(buf)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (4242, 3, 17)
    assert b.is_transactional and not b.is_control
    assert [r.sequence for r in b.records] == [17, 18, 19, 20, 21]
    assert all((r.producer_id, r.producer_epoch) == (4242, 3) for r in b.records)
    assert b.header.last_sequence == 21


def test_sequence_wraps_like_java():
    recs = [Record(None, b"x")] * 3
    b = _one(build_batch(recs, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert [r.sequence for r in b.records] == [2**31 - 2, 2**31 - 1, 0]


def test_timestamps_default_to_now_and_first_record_is_base():
    recs = [Record(b"a", b"1", timestamp=NOW - 10), Record(b"b", b"2"), Record(b"c", b"3")]
    b = _one(build_batch(recs, now_ms=NOW))
    assert b.base_timestamp == NOW - 10 and b.max_timestamp == NOW
    assert [r.timestamp for r in b.records] == [NOW - 10, NOW, NOW]
    # now_ms omitted: the wall clock
    import time
    before = int(time.time() * 1000)
    b = _one(build_batch([Record(None, b"x")]))
    assert before <= b.records[0].timestamp <= int(time.time() * 1000)


def test_log_append_time():
    recs = [Record(b"a", b"1", timestamp=5), Record(b"b", b"2", timestamp=6)]
    b = _one(build_batch(recs, timestamp_type=1, now_ms=NOW))
    assert b.timestamp_type == 1 and b.header.attributes & 0x08
    assert b.max_timestamp == NOW
    assert [(r.timestamp, r.timestamp_type) for r in b.records] == [(NOW, 1), (NOW, 1)]


@pytest.mark.parametrize("codec", CODECS)
def test_empty_batch(codec):
    buf = build_batch([], base_offset=50, compression=codec, now_ms=NOW)
    assert len(buf) == HEADER_SIZE
    b = _one(buf)
    assert b.records == [] and b.records_count == 0
    assert b.base_offset == 50 and b.last_offset == 50
    assert b.base_timestamp == b.max_timestamp == NOW
    assert list(records_from_fetch(buf)) == []


@pytest.mark.parametrize("codec", CODECS)
def test_many_records(codec):
    # offset deltas and lengths past the cached varint range, large negative/positive deltas
    rng = random.Random(codec)
    recs = [Record(rng.randbytes(rng.randint(0, 40)) if i % 7 else None,
                   rng.randbytes(rng.randint(0, 300)),
                   [("i", str(i).encode())] if i % 3 == 0 else [],
                   timestamp=NOW + rng.randint(-10**9, 10**9) if i % 5 == 0 else None)
            for i in range(12_000)]
    buf = build_batch(recs, compression=codec, now_ms=NOW)
    b = _one(buf)
    _assert_records(b.records, recs, 0)
    assert b.max_timestamp == max(_expected_ts(r) for r in recs)


def test_header_keys_may_be_bytes():
    b = _one(build_batch([Record(None, b"v", [(b"raw", b"1")])]))   # type: ignore[list-item]
    assert b.records[0].headers == [("raw", b"1")]


def test_build_rejects_bad_arguments():
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        build_batch([Record(None, b"x")], compression=5)
    with pytest.raises(ValueError):
        build_batch([Record(None, b"x")], timestamp_type=2)
    with pytest.raises(ValueError):
        build_batch([Record(None, b"x")], producer_epoch=1 << 20)


def test_record_defaults():
    r = Record(b"k", b"v")
    assert r.headers == [] and r.timestamp is None
    assert Record(b"k", b"v").headers is not r.headers


# --- several batches, partial batches, headers only ---------------------------------------------

def _three_batches() -> list[bytes]:
    return [build_batch([Record(b"a", b"1"), Record(b"b", b"2")], base_offset=0, now_ms=NOW),
            build_batch([Record(b"c", b"3")], base_offset=2, compression=C.LZ4, now_ms=NOW),
            build_batch([Record(b"d", b"4"), Record(b"e", b"5")], base_offset=3,
                        compression=C.ZSTD, now_ms=NOW)]


def test_consecutive_batches_and_positions():
    parts = _three_batches()
    buf = b"".join(parts)
    batches = list(iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 2, 3]
    assert [r.value for b in batches for r in b.records] == [b"1", b"2", b"3", b"4", b"5"]
    positions = [pos for pos, _ in iter_batch_headers(buf)]
    assert positions == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert [h for _, h in iter_batch_headers(buf)] == [b.header for b in batches]
    assert read_header(buf, positions[2]).records_count == 2


def test_trailing_partial_batch_is_ignored_at_every_cut():
    parts = _three_batches()
    complete = parts[0] + parts[1]
    last = parts[2]
    for cut in range(len(last)):
        buf = complete + last[:cut]
        assert [b.base_offset for b in iter_batches(buf)] == [0, 2]
        assert [h.base_offset for _, h in iter_batch_headers(buf)] == [0, 2]
        assert [r.offset for r in records_from_fetch(buf)] == [0, 1, 2]
        # a buffer holding only a partial batch yields nothing
        assert list(iter_batches(last[:cut])) == []
    assert list(iter_batches(b"")) == []


def test_records_from_fetch_offsets_and_control_batches():
    parts = [build_batch([Record(None, b"%d" % i) for i in range(5)], base_offset=10,
                         producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True),
             build_control_batch(COMMIT, producer_id=9, producer_epoch=0, base_offset=15),
             build_batch([Record(None, b"x")], base_offset=16, compression=C.GZIP)]
    buf = b"".join(parts)
    assert [r.offset for r in records_from_fetch(buf)] == [10, 11, 12, 13, 14, 16]
    # a fetch starting inside a batch returns the whole batch; the leading records are skipped
    assert [r.offset for r in records_from_fetch(buf, from_offset=13)] == [13, 14, 16]
    assert [r.offset for r in records_from_fetch(buf, from_offset=15)] == [16]
    assert [r.offset for r in records_from_fetch(buf, from_offset=17)] == []


# --- control batches ----------------------------------------------------------------------------

@pytest.mark.parametrize("ctype", [ABORT, COMMIT])
def test_control_batch(ctype):
    buf = build_control_batch(ctype, producer_id=77, producer_epoch=5, coordinator_epoch=12,
                              base_offset=300, timestamp_ms=NOW, partition_leader_epoch=4)
    b = _one(buf)
    assert b.is_control and b.is_transactional
    assert b.header.attributes == 0x30
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (77, 5, -1)
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (300, 300, 4)
    assert b.base_timestamp == b.max_timestamp == NOW
    (rec,) = b.records
    assert rec.key == struct.pack(">hh", 0, ctype)
    assert rec.value == struct.pack(">hi", 0, 12)
    assert parse_control_record(rec) == (ctype, 12)


def test_parse_control_record_validation():
    def rec(key, value):
        return ConsumedRecord(0, 0, 0, key, value, [])
    assert parse_control_record(rec(struct.pack(">hh", 0, 2), b"leader change")) == (2, -1)
    assert parse_control_record(rec(struct.pack(">hh", 1, 1), struct.pack(">hih", 1, 3, 0))) == (1, 3)
    for key, value in [(None, b"\x00" * 6), (b"\x00\x00\x00", b"\x00" * 6),
                       (struct.pack(">hh", -1, 1), b"\x00" * 6),
                       (struct.pack(">hh", 0, 1), None), (struct.pack(">hh", 0, 0), b"\x00" * 5),
                       (struct.pack(">hh", 0, 0), struct.pack(">hi", -1, 0))]:
        with pytest.raises(errors.CorruptMessageError):
            parse_control_record(rec(key, value))


# --- interop: kafka-python ----------------------------------------------------------------------

def _kp_build(codec: int, recs: list[tuple], *, transactional=False, pid=-1, epoch=-1, seq=-1):
    builder = KpBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        batch_size=1 << 30)
    for offset, ts, key, value, headers in recs:
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


KP_RECORDS = [
    (0, NOW, b"key", b"value " * 50, []),
    (1, NOW + 1, None, b"null key " * 50, [("h", b"v"), ("null", None)]),
    (2, NOW - 3, b"null value", None, [("ünï", "cödé".encode())]),
    (3, NOW + 9, b"", b"", []),
] + [(i, NOW + i, b"k%d" % i, b"repeated value " * 20, [("n", b"%d" % i)]) for i in range(4, 200)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_with_ours(codec):
    buf = _kp_build(codec, KP_RECORDS, transactional=True, pid=31, epoch=2, seq=100)
    b = _one(buf)
    assert b.compression == codec          # the payload compresses, so kafka-python kept the codec
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (31, 2, 100)
    assert b.is_transactional
    assert len(b.records) == len(KP_RECORDS)
    for got, (offset, ts, key, value, headers) in zip(b.records, KP_RECORDS):
        assert (got.offset, got.timestamp, got.key, got.value, got.headers) == \
            (offset, ts, key, value, headers)
        assert got.sequence == 100 + offset
    assert b.max_timestamp == NOW + 199


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_parse_with_kafka_python(codec):
    buf = build_batch(SAMPLE, base_offset=77, compression=codec, now_ms=NOW, producer_id=5,
                      producer_epoch=1, base_sequence=9, is_transactional=True,
                      partition_leader_epoch=3)
    kb = KpBatch(buf)
    assert kb.validate_crc()
    assert (kb.base_offset, kb.leader_epoch, kb.magic, kb.compression_type) == (77, 3, 2, codec)
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence) == (5, 1, 9)
    assert kb.is_transactional and not kb.is_control_batch
    assert kb.first_timestamp == NOW and kb.max_timestamp == NOW + 12_345
    got = list(kb)
    assert len(got) == len(SAMPLE)
    for i, (g, s) in enumerate(zip(got, SAMPLE)):
        assert (g.offset, g.timestamp, g.key, g.value, g.headers) == \
            (77 + i, _expected_ts(s), s.key, s.value, list(s.headers))


def test_kafka_python_memory_records_reads_our_stream_with_partial_tail():
    parts = _three_batches()
    control = build_control_batch(ABORT, producer_id=1, producer_epoch=0, base_offset=5)
    buf = b"".join(parts) + control + parts[0][:30]
    mr = KpMemoryRecords(buf)
    seen = []
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        seen.append((batch.base_offset, [(r.offset, getattr(r, "type", None), r.value)
                                         for r in batch]))
    assert seen == [(0, [(0, None, b"1"), (1, None, b"2")]), (2, [(2, None, b"3")]),
                    (3, [(3, None, b"4"), (4, None, b"5")]),
                    (5, [(5, ABORT, struct.pack(">hi", 0, 0))])]


def test_kafka_python_control_batch_reader_agrees():
    kb = KpBatch(build_control_batch(COMMIT, producer_id=8, producer_epoch=1,
                                     coordinator_epoch=3))
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    (rec,) = list(kb)
    assert rec.commit and rec.version == 0


def test_legacy_magic_1_from_kafka_python_is_refused():
    builder = KpLegacyBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=NOW, key=b"k", value=b"v")
    legacy = bytes(builder.build())
    assert legacy[16] == 1
    with pytest.raises(errors.UnsupportedForMessageFormatError):
        list(iter_batches(legacy))
    with pytest.raises(errors.UnsupportedForMessageFormatError):
        list(iter_batch_headers(legacy))
    # also after a valid v2 batch
    with pytest.raises(errors.UnsupportedForMessageFormatError):
        list(iter_batches(_three_batches()[0] + legacy))


def test_magic_0_is_refused():
    builder = KpLegacyBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=None, value=b"v")
    with pytest.raises(errors.UnsupportedForMessageFormatError):
        list(iter_batches(bytes(builder.build())))


# --- interop: aiokafka (its own, C-accelerated, implementation) --------------------------------

def test_aiokafka_builder_and_reader_interop():
    aio = pytest.importorskip("aiokafka.record.default_records")
    for codec in CODECS:
        builder = aio.DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for offset, ts, key, value, headers in KP_RECORDS:
            builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
        b = _one(bytes(builder.build()))
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records] == \
            [(o, t, k, v, h) for o, t, k, v, h in KP_RECORDS]
        theirs = aio.DefaultRecordBatch(build_batch(SAMPLE, compression=codec, now_ms=NOW))
        assert theirs.validate_crc()
        assert [(r.offset, r.key, r.value, list(r.headers)) for r in theirs] == \
            [(i, s.key, s.value, list(s.headers)) for i, s in enumerate(SAMPLE)]


# --- other implementations' framings inside batches ---------------------------------------------

def _recompress(buf: bytes, codec: int, section: bytes) -> bytes:
    """`buf` (an uncompressed batch) with its records section replaced, CRC recomputed."""
    h = read_header(buf)
    out = bytearray(pack_header(h._replace(batch_length=HEADER_SIZE - 12 + len(section),
                                           attributes=h.attributes | codec)))
    out += section
    write_crc(out, 0, len(out))
    return bytes(out)


def test_raw_snappy_batch_as_librdkafka_writes():
    plain = build_batch(SAMPLE, now_ms=NOW)
    buf = _recompress(plain, C.SNAPPY, snappy.compress(plain[HEADER_SIZE:]))
    b = _one(buf)
    assert b.compression == C.SNAPPY
    _assert_records(b.records, SAMPLE, 0)


def test_zstd_batch_without_content_size_as_java_writes():
    plain = build_batch(SAMPLE, now_ms=NOW)
    out = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(out, closefd=False) as w:
        w.write(plain[HEADER_SIZE:])
    assert zstandard.frame_content_size(out.getvalue()) == -1
    b = _one(_recompress(plain, C.ZSTD, out.getvalue()))
    _assert_records(b.records, SAMPLE, 0)


# --- corruption ---------------------------------------------------------------------------------

KAFKA_ERRORS = (errors.CorruptMessageError, errors.UnsupportedCompressionTypeError)


@pytest.mark.parametrize("codec", CODECS)
def test_any_flipped_byte_in_crc_region_is_detected(codec):
    buf = build_batch(SAMPLE[:7], compression=codec, now_ms=NOW, producer_id=1,
                      producer_epoch=0, base_sequence=0)
    for i in range(ATTRIBUTES_OFFSET, len(buf)):
        bad = bytearray(buf)
        bad[i] ^= 0xFF
        with pytest.raises(errors.CorruptMessageError):
            list(iter_batches(bytes(bad)))
        # without the CRC check: a Kafka error or a parse, never a leaked IndexError etc.
        try:
            list(iter_batches(bytes(bad), verify_crc=False))
        except KAFKA_ERRORS:
            pass


def test_crc_field_itself_and_uncovered_fields():
    buf = build_batch(SAMPLE[:3], now_ms=NOW)
    for i in range(17, 21):                              # the CRC
        bad = bytearray(buf)
        bad[i] ^= 0x01
        with pytest.raises(errors.CorruptMessageError, match="CRC"):
            list(iter_batches(bytes(bad)))
    # baseOffset and partitionLeaderEpoch are outside the CRC (patched by the broker)
    bad = bytearray(buf)
    bad[7] = 9
    bad[15] = 2
    b = _one(bytes(bad))
    assert b.base_offset == 9 and b.partition_leader_epoch == -254


def test_invalid_length_and_magic():
    buf = build_batch([Record(None, b"x")])
    bad = bytearray(buf)
    bad[8:12] = struct.pack(">i", 13)
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(bytes(bad)))
    bad = bytearray(buf)
    bad[8:12] = struct.pack(">i", -5)
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batch_headers(bytes(bad)))
    bad = bytearray(buf)
    bad[8:12] = struct.pack(">i", 30)                    # long enough for v0, not for v2
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(bytes(bad)))
    bad = bytearray(buf)
    bad[16] = 3
    with pytest.raises(errors.CorruptMessageError, match="magic"):
        list(iter_batches(bytes(bad)))


def _patched(buf: bytes, **fields) -> bytes:
    h = read_header(buf)._replace(**fields)
    out = bytearray(buf)
    out[:HEADER_SIZE] = pack_header(h)
    write_crc(out, 0, len(out))
    return bytes(out)


def _with_section(section: bytes, count: int, last_delta: int) -> bytes:
    h = BatchHeader(0, HEADER_SIZE - 12 + len(section), -1, 2, 0, 0, last_delta, NOW, NOW,
                    -1, -1, -1, count)
    out = bytearray(pack_header(h)) + section
    write_crc(out, 0, len(out))
    return bytes(out)


def _raw_record(offset_delta: int, key: bytes | None = b"k", extra: bytes = b"",
                headers: bytes = b"\x00", attrs: bytes = b"\x00") -> bytes:
    def v(n: int) -> bytes:
        zz, out = (n << 1) ^ (n >> 63), bytearray()
        while zz >= 0x80:
            out.append(zz & 0x7F | 0x80)
            zz >>= 7
        out.append(zz)
        return bytes(out)
    body = attrs + v(0) + v(offset_delta)
    body += v(-1) if key is None else v(len(key)) + key
    body += v(1) + b"x" + headers + extra
    return v(len(body)) + body


@pytest.mark.parametrize("codec", CODECS)
def test_record_count_mismatch(codec):
    buf = build_batch([Record(None, b"a"), Record(None, b"b")], compression=codec)
    for count in (1, 3, 100, -1):
        with pytest.raises(errors.CorruptMessageError):
            list(iter_batches(_patched(buf, records_count=count)))


def test_offset_delta_validation():
    with pytest.raises(errors.CorruptMessageError, match="offset delta"):
        list(iter_batches(_patched(build_batch([Record(None, b"a")] * 3), last_offset_delta=1)))
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(_patched(build_batch([Record(None, b"a")]), last_offset_delta=-1)))
    # deltas must increase
    two = _raw_record(1) + _raw_record(1)
    with pytest.raises(errors.CorruptMessageError, match="offset delta"):
        list(iter_batches(_with_section(two, 2, 1)))
    # gaps (what compaction leaves) are fine
    gappy = _raw_record(0) + _raw_record(4)
    b = _one(_with_section(gappy, 2, 7))
    assert [r.offset for r in b.records] == [0, 4] and b.last_offset == 7


def test_hand_made_record_parses():
    b = _one(_with_section(_raw_record(0), 1, 0))
    assert (b.records[0].key, b.records[0].value, b.records[0].headers) == (b"k", b"x", [])


_OK = _raw_record(0)
_BAD_SECTIONS = {
    "trailing bytes in record": _raw_record(0, extra=b"\x00"),
    "trailing bytes after records": _OK + b"\x00",
    "record length overruns": b"\x7e" + _OK[1:],
    "negative record length": b"\x01" + _OK[1:],
    "negative header count": _raw_record(0, headers=b"\x01"),
    "header count too large": _raw_record(0, headers=b"\x7e"),
    "negative header key length": _raw_record(0, headers=b"\x02\x01\x00"),
    "header key overruns": _raw_record(0, headers=b"\x02\x20ab\x00"),
    "header value overruns": _raw_record(0, headers=b"\x02\x02a\x40"),
    "invalid utf-8 header key": _raw_record(0, headers=b"\x02\x02\xff\x00"),
    "key overruns": _OK[:4] + b"\x40" + _OK[5:],
    "overlong varint": _raw_record(0, attrs=b"\x00" + b"\xff" * 11),
    "truncated varint": b"\x80",
}


@pytest.mark.parametrize("name", sorted(_BAD_SECTIONS))
def test_record_level_inconsistencies(name):
    with pytest.raises(errors.CorruptMessageError):
        list(iter_batches(_with_section(_BAD_SECTIONS[name], 1, 0)))


def _mutated_batches(codec: int, seed: int, n: int = 1500) -> Iterator[bytes]:
    """A batch whose records section has 1-3 random bytes changed (and sometimes its end
    cut off), re-signed so that the parser, not the CRC, must catch it."""
    rng = random.Random(seed)
    plain = build_batch(SAMPLE[:7], now_ms=NOW)
    section = plain[HEADER_SIZE:]
    for _ in range(n):
        mutated = bytearray(section)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)):]
        payload = C.compress(codec, bytes(mutated)) if codec else bytes(mutated)
        yield _recompress(plain, codec, payload)


@pytest.mark.parametrize("codec,seed", [(C.NONE, 1), (C.NONE, 2), (C.GZIP, 3)])
def test_mutation_fuzz_never_leaks_other_exceptions(codec, seed):
    for buf in _mutated_batches(codec, seed):
        try:
            list(iter_batches(buf))
        except errors.CorruptMessageError:
            pass


def test_unknown_compression_codec_in_batch():
    buf = _patched(build_batch([Record(None, b"x")]), attributes=6)
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        list(iter_batches(buf))


def test_garbage_compressed_section():
    plain = build_batch([Record(None, b"x")])
    for codec in (C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD):
        with pytest.raises(errors.CorruptMessageError):
            list(iter_batches(_recompress(plain, codec, b"\xff" * 40)))


# --- decompression bombs ------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_bomb_batch_refused(codec):
    buf = build_batch([Record(None, bytes(3 << 20))], compression=codec)
    assert len(buf) < 200_000
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        list(iter_batches(buf, max_decompressed=1 << 20))
    assert len(_one(buf).records[0].value) == 3 << 20


def test_bomb_batch_over_default_limit_refused():
    # a zstd section declaring 300 MiB; the default 256 MiB limit refuses it up front
    plain = build_batch([Record(None, b"x")])
    cobj = zstandard.ZstdCompressor(level=1).compressobj(size=300 << 20)
    chunk = bytes(1 << 20)
    section = b"".join(cobj.compress(chunk) for _ in range(300)) + cobj.flush()
    buf = _recompress(plain, C.ZSTD, section)
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        list(iter_batches(buf))
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        list(records_from_fetch(buf))
