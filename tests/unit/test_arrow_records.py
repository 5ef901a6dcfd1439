"""The Spark source's ColumnBuilder decodes with the clients' record decoder: the same rows
as the consumer's `records_from_fetch`, and the same CorruptMessageError where it refuses."""
from __future__ import annotations

import pytest

from clients.protocol import compression as C
from clients.protocol import errors
from clients.protocol.batch_header import HEADER_SIZE, BatchHeader, pack_header, write_crc
from clients.protocol.records import (COMMIT, LOG_APPEND_TIME, ConsumedRecord, Record,
                                      append_record, build_batch, build_control_batch,
                                      records_from_fetch)

pa = pytest.importorskip("pyarrow")

from spark_jobs.source.arrow_records import ColumnBuilder  # noqa: E402  (needs pyarrow)

NOW = 1_700_000_000_000
KAFKA_ERRORS = (errors.CorruptMessageError, errors.UnsupportedCompressionTypeError)

RECORDS = [
    Record(b"k0", b"v0"),
    Record(None, b"null key"),
    Record(b"null value", None),
    Record(b"h", b"x", [("h1", b"one"), ("h-null", None), ("", b"")]),
    Record(b"unicode", "é😀".encode(), [("clé-😀", "välue".encode())]),
    Record(b"early", b"e", timestamp=NOW - 5_000),
    Record(b"big", b"z" * 20_000, [("big", b"h" * 9_000)]),     # multi-byte varints
]


def _section_batch(records: list[bytes], base_offset: int, last_delta: int,
                   trailing: bytes = b"") -> bytes:
    """A batch around hand-made records (each a length-prefixed DefaultRecord)."""
    section = b"".join(records) + trailing
    h = BatchHeader(base_offset, HEADER_SIZE - 12 + len(section), -1, 2, 0, 0, last_delta,
                    NOW, NOW, -1, -1, -1, len(records))
    out = bytearray(pack_header(h)) + section
    write_crc(out, 0, len(out))
    return bytes(out)


def _record(offset_delta: int, key: bytes | None, value: bytes | None,
            headers: list[tuple[str, bytes | None]] | None = None) -> bytes:
    out = bytearray()
    append_record(out, offset_delta, 0, key, value, headers or [])
    return bytes(out)


def _record_set(codec: int = C.NONE) -> bytes:
    """Batches with every shape a fetch returns: headers, nulls, LogAppendTime, a control
    batch, a compacted batch with offset gaps."""
    return (build_batch(RECORDS, base_offset=0, compression=codec, now_ms=NOW)
            + build_batch(RECORDS[:3], base_offset=7, compression=codec, now_ms=NOW,
                          timestamp_type=LOG_APPEND_TIME)
            + build_control_batch(COMMIT, producer_id=5, producer_epoch=0, base_offset=10)
            + _section_batch([_record(0, b"a", b"1"), _record(3, b"b", b"2"),
                              _record(6, b"c", None, [("k", b"v")])], 11, 6))


def _rows(builder: ColumnBuilder) -> list[tuple]:
    t = builder.to_record_batch().to_pydict()
    headers = t.get("headers") or [None] * len(t["offset"])
    return [(o, k, v, ts.timestamp() * 1000 if ts else None, tt,
             [(h["key"], h["value"]) for h in hs] if hs is not None else None)
            for o, k, v, ts, tt, hs in zip(t["offset"], t["key"], t["value"], t["timestamp"],
                                           t["timestampType"], headers)]


def _expected(recs: list[ConsumedRecord], with_headers: bool) -> list[tuple]:
    return [(r.offset, r.key, r.value, float(r.timestamp), r.timestamp_type,
             r.headers if with_headers else None) for r in recs]


@pytest.mark.parametrize("codec", [C.NONE, C.GZIP, C.LZ4, C.ZSTD])
@pytest.mark.parametrize("with_headers", [False, True])
def test_same_rows_as_the_consumer_decoder(codec: int, with_headers: bool) -> None:
    buf = _record_set(codec)
    b = ColumnBuilder("t", 3, include_headers=with_headers)
    assert b.add_record_set(buf, 0, 100) == 18
    got = _rows(b)
    assert got == _expected(list(records_from_fetch(buf)), with_headers)
    assert [o for o, *_ in got] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 14, 17]


@pytest.mark.parametrize("lo,hi", [(2, 5), (5, 12), (8, 15), (0, 1), (6, 7), (12, 14),
                                   (10, 11), (18, 30)])
def test_a_range_cuts_through_batches(lo: int, hi: int) -> None:
    buf = _record_set()
    b = ColumnBuilder("t", 0, include_headers=True)
    b.add_record_set(buf, lo, hi)
    want = [r for r in records_from_fetch(buf) if lo <= r.offset < hi]
    assert len(b) == len(want)
    assert _rows(b) == _expected(want, True)


def test_records_added_one_by_one_join_the_columns() -> None:
    buf = _record_set()
    b = ColumnBuilder("t", 0, include_headers=True)
    b.add_record_set(buf, 0, 3)
    later = [r for r in records_from_fetch(buf) if 3 <= r.offset < 9]
    b.add_records(later)
    assert _rows(b) == _expected([r for r in records_from_fetch(buf) if r.offset < 9], True)


def test_a_value_overrunning_its_record_is_corrupt() -> None:
    good = _record(0, None, b"abc")
    bad = bytearray(good)
    bad[bad.index(b"abc") - 1] = 20                      # value length 10 > the 3 bytes left
    buf = _section_batch([bytes(bad)], 0, 0)
    with pytest.raises(errors.CorruptMessageError):
        list(records_from_fetch(buf))
    with pytest.raises(errors.CorruptMessageError):
        ColumnBuilder("t", 0).add_record_set(buf, 0, 10)


def test_bytes_after_the_last_record_are_corrupt() -> None:
    buf = _section_batch([_record(0, b"k", b"v")], 0, 0, trailing=b"\x00\x00")
    with pytest.raises(errors.CorruptMessageError):
        ColumnBuilder("t", 0).add_record_set(buf, 0, 10)


def test_any_negative_key_length_is_a_null_key_as_for_the_consumer() -> None:
    rec = bytearray(_record(0, None, b"v"))    # length, attributes, ts, offset, key, ...
    assert rec[4] == 0x01                             # key length -1 (zigzag 1)
    rec[4] = 0x03                                     # -2: still no key
    buf = _section_batch([bytes(rec)], 0, 0)
    assert [r.key for r in records_from_fetch(buf)] == [None]
    b = ColumnBuilder("t", 0)
    b.add_record_set(buf, 0, 10)
    assert _rows(b)[0][1] is None


@pytest.mark.parametrize("codec", [C.NONE, C.ZSTD])
def test_flipped_bytes_decode_or_fail_exactly_as_for_the_consumer(codec: int) -> None:
    buf = build_batch(RECORDS[:5], compression=codec, now_ms=NOW)
    for i in range(len(buf)):
        bad = bytearray(buf)
        bad[i] ^= 0xFF
        try:
            want: list[ConsumedRecord] | None = list(records_from_fetch(bytes(bad), verify_crc=False))
        except KAFKA_ERRORS:
            want = None
        b = ColumnBuilder("t", 0, include_headers=True, verify_crc=False)
        try:
            b.add_record_set(bytes(bad), 0, 2**62)
        except KAFKA_ERRORS:
            assert want is None, f"byte {i}: the consumer decodes what the builder refuses"
            continue
        assert want is not None, f"byte {i}: the builder decodes what the consumer refuses"
        cols = b.columns
        assert list(cols.offsets) == [r.offset for r in want], i
        assert list(cols.timestamps) == [r.timestamp for r in want], i
        assert cols.keys == [r.key for r in want] and cols.values == [r.value for r in want], i
        assert cols.headers == [r.headers for r in want], i
