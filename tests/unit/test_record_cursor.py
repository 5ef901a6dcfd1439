"""RecordCursor, the consumer's face of the record decoder: the same records and the same
refusals as iter_batches (the broker's face) and decode_batch_columns (Spark's), taken whole
or a few at a time, straight into ConsumerRecords."""
from __future__ import annotations

import random
import re

import pytest

from clients.protocol import compression as C
from clients.protocol import errors
from clients.protocol.read_committed import aborted_batches, aborted_filter
from clients.protocol.records import (ABORT, COMMIT, LOG_APPEND_TIME, ROW_FIELDS, Record,
                                      RecordColumns, RecordCursor, build_batch,
                                      build_control_batch, decode_batch_columns,
                                      fetch_batches, fetch_rows, iter_batch_headers,
                                      iter_batches)
from clients.types import ConsumerRecord
from tests.unit.test_records import (_BAD_SECTIONS, _OK, CODECS, NOW, SAMPLE, _mutated_batches,
                                     _patched, _raw_record, _with_section)


def expected(buf: bytes, from_offset: int = 0) -> list[ConsumerRecord]:
    """What a consumer should get, from the broker's face of the decoder."""
    return [ConsumerRecord("t", 3, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                           r.headers or (), r.leader_epoch,
                           -1 if r.key is None else len(r.key),
                           -1 if r.value is None else len(r.value))
            for b in iter_batches(buf) if not b.is_control
            for r in b.records if r.offset >= from_offset]


def taken(buf: bytes, n: int, from_offset: int = 0, **kw) -> list[ConsumerRecord]:
    batches, _ = fetch_batches(buf, from_offset)
    cursor = RecordCursor(buf, batches, ConsumerRecord, "t", 3, from_offset=from_offset, **kw)
    out: list[ConsumerRecord] = []
    while not cursor.done:
        got = cursor.take(n)
        assert len(got) <= n
        out += got
    assert cursor.take(n) == []
    return out


def test_rows_are_consumer_records():
    assert ConsumerRecord._fields == ROW_FIELDS


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("n", [1, 3, 1000])
def test_same_records_as_iter_batches_in_any_portions(codec, n):
    buf = (build_batch(SAMPLE, base_offset=10, compression=codec, now_ms=NOW,
                       partition_leader_epoch=7)
           + build_batch(SAMPLE[:4], base_offset=20, compression=codec, now_ms=NOW))
    want = expected(buf)
    got = taken(buf, n)
    assert got == want and [type(r) for r in got] == [ConsumerRecord] * len(want)
    assert got[0].leader_epoch == 7 and got[-1].leader_epoch == -1
    assert got[3].headers == () and got[5].headers == list(SAMPLE[5].headers)
    assert (got[3].serialized_key_size, got[3].serialized_value_size) == (-1, -1)


def test_log_append_time_gives_every_record_the_max_timestamp():
    buf = build_batch([Record(None, b"a", timestamp=NOW - 9), Record(None, b"b", timestamp=NOW)],
                      timestamp_type=LOG_APPEND_TIME, now_ms=NOW + 5)
    got = taken(buf, 1)
    assert [(r.timestamp, r.timestamp_type) for r in got] == [(NOW + 5, 1)] * 2
    assert got == expected(buf)


@pytest.mark.parametrize("n", [1, 2, 100])
def test_from_offset_inside_a_batch_and_control_batches(n):
    buf = (build_batch([Record(None, b"%d" % i) for i in range(5)], base_offset=10)
           + build_control_batch(COMMIT, producer_id=1, producer_epoch=0, base_offset=15)
           + build_batch([Record(None, b"16")], base_offset=16))
    for start in (0, 12, 15, 16, 17):
        assert taken(buf, n, start) == expected(buf, start), start
    batches, next_offset = fetch_batches(buf, 13)
    assert next_offset == 17 and [h.base_offset for _, h in batches] == [10, 15, 16]
    assert fetch_batches(buf, 17)[1] == 17        # never below the fetch offset
    rows, next_offset = fetch_rows(buf, ConsumerRecord, "t", 3, from_offset=13)
    assert [r.offset for r in rows] == [13, 14, 16] and next_offset == 17


def test_compacted_offset_gaps():
    buf = _with_section(_raw_record(0) + _raw_record(4), 2, 7)
    assert [r.offset for r in taken(buf, 1)] == [0, 4]
    assert [r.offset for r in taken(buf, 1, 3)] == [4]
    with pytest.raises(errors.CorruptMessageError, match="offset delta"):
        taken(_with_section(_raw_record(1) + _raw_record(1), 2, 1), 5)


@pytest.mark.parametrize("name", sorted(_BAD_SECTIONS))
def test_refuses_what_iter_batches_refuses(name):
    with pytest.raises(errors.CorruptMessageError):
        taken(_with_section(_BAD_SECTIONS[name], 1, 0), 10)


# One decoder behind every face, so each refusal reads the same from all of them.
_REFUSALS = [
    (_BAD_SECTIONS["negative record length"], 1, 0, "record length -1 is negative"),
    (_BAD_SECTIONS["record length overruns"], 1, 0, "record fields end at 9, its length says 64"),
    (_BAD_SECTIONS["trailing bytes in record"], 1, 0,
     "record fields end at 9, its length says 10"),
    (_BAD_SECTIONS["trailing bytes after records"], 1, 0, "1 bytes left after 1 records"),
    (_BAD_SECTIONS["key overruns"], 1, 0, "records section is malformed (index out of range)"),
    (_BAD_SECTIONS["truncated varint"], 1, 0, "records section is malformed (index out of range)"),
    (_BAD_SECTIONS["negative header count"], 1, 0, "invalid header count -1"),
    (_BAD_SECTIONS["header count too large"], 1, 0, "invalid header count 63"),
    (_BAD_SECTIONS["header key overruns"], 1, 0, "invalid header key length 16"),
    (_BAD_SECTIONS["header value overruns"], 1, 0, "header value overruns record"),
    (_BAD_SECTIONS["invalid utf-8 header key"], 1, 0,
     "records section is malformed ('utf-8' codec can't decode byte 0xff"),
    (_BAD_SECTIONS["overlong varint"], 1, 0, "varint longer than 10 bytes"),
    (_raw_record(1) + _raw_record(1), 2, 1,
     "offset delta 1 at record 0 (last offset delta 1, 2 records)"),
    (_raw_record(1) + _raw_record(1), 2, 5, "offset delta 1 after 1 (last offset delta 5)"),
    (_raw_record(0) + _raw_record(6), 2, 5, "offset delta 6 after 0 (last offset delta 5)"),
    (b"", 1, 0, "claims 1 records in 0 bytes"),
    (_OK, 0, 0, f"{len(_OK)} bytes left after 0 records"),
]


@pytest.mark.parametrize("section,count,last_delta,message", _REFUSALS)
def test_each_refusal_says_the_same_through_every_face(section, count, last_delta, message):
    buf = _with_section(section, count, last_delta)
    match = re.escape(message)
    with pytest.raises(errors.CorruptMessageError, match=match):
        list(iter_batches(buf))
    with pytest.raises(errors.CorruptMessageError, match=match):
        taken(buf, 1)
    (pos, h), = iter_batch_headers(buf)
    columns = RecordColumns()
    with pytest.raises(errors.CorruptMessageError, match=match):
        decode_batch_columns(buf, pos, h, columns)
    assert len(columns) == 0 and columns.headers == []      # nothing of a refused batch


@pytest.mark.parametrize("codec", CODECS)
def test_record_count_and_crc(codec):
    buf = build_batch([Record(None, b"a"), Record(None, b"b")], compression=codec)
    for count in (1, 3, 100, -1):
        with pytest.raises(errors.CorruptMessageError):
            taken(_patched(buf, records_count=count), 10)
    flipped = bytearray(buf)
    flipped[-2] ^= 1                          # the value b"b"
    with pytest.raises(errors.CorruptMessageError, match="CRC"):
        taken(bytes(flipped), 10)
    if codec == C.NONE:                       # without the check the bytes are read as sent
        assert [r.value for r in taken(bytes(flipped), 10, verify_crc=False)] == [b"a", b"c"]


def test_records_before_a_corrupt_batch_come_out_first():
    good = build_batch([Record(None, b"a"), Record(None, b"b")])
    bad = bytearray(build_batch([Record(None, b"c")], base_offset=2))
    bad[-1] ^= 1
    buf = good + bytes(bad)
    batches, _ = fetch_batches(buf)
    cursor = RecordCursor(buf, batches, ConsumerRecord, "t", 3)
    assert [r.value for r in cursor.take(2)] == [b"a", b"b"]
    with pytest.raises(errors.CorruptMessageError, match="CRC"):
        cursor.take(2)


@pytest.mark.parametrize("codec,seed", [(C.NONE, 1), (C.NONE, 2), (C.GZIP, 3)])
def test_mutations_decode_or_fail_exactly_as_iter_batches(codec, seed):
    rng = random.Random(seed)                   # the portions taken
    for buf in _mutated_batches(codec, seed):
        try:
            want = expected(buf)
        except errors.CorruptMessageError:
            with pytest.raises(errors.CorruptMessageError):
                taken(buf, rng.choice([1, 3, 100]))
        else:
            assert taken(buf, rng.choice([1, 3, 100])) == want


def test_aborted_batches_are_skipped():
    def txn(offset: int, pid: int, value: bytes) -> bytes:
        return build_batch([Record(None, value)], base_offset=offset, producer_id=pid,
                           producer_epoch=0, is_transactional=True)
    buf = (txn(0, 1, b"aborted") + txn(1, 2, b"committed")
           + build_control_batch(ABORT, producer_id=1, producer_epoch=0, base_offset=2)
           + build_control_batch(COMMIT, producer_id=2, producer_epoch=0, base_offset=3)
           + txn(4, 1, b"after the abort"))
    aborted = [{"producer_id": 1, "first_offset": 0}]
    skip = aborted_batches(buf, aborted)
    batches, _ = fetch_batches(buf)
    assert skip == {batches[0][0]}
    got = RecordCursor(buf, batches, ConsumerRecord, "t", 3, skip=skip).take(10)
    assert [r.value for r in got] == [b"committed", b"after the abort"]
    assert [r.value for r in aborted_filter(buf, 0, aborted)] == [r.value for r in got]
