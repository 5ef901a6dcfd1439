"""RecordCursor, the consumer's decoder: the same records and the same refusals as
iter_batches (the broker's), taken whole or a few at a time, straight into ConsumerRecords."""
from __future__ import annotations

import random

import pytest

from clients.protocol import compression as C
from clients.protocol import errors
from clients.protocol.batch_header import HEADER_SIZE
from clients.protocol.read_committed import aborted_batches, aborted_filter
from clients.protocol.records import (ABORT, COMMIT, LOG_APPEND_TIME, ROW_FIELDS, Record,
                                      RecordCursor, build_batch, build_control_batch,
                                      fetch_batches, fetch_rows, iter_batches)
from clients.types import ConsumerRecord
from tests.unit.test_records import (_BAD_SECTIONS, CODECS, NOW, SAMPLE, _patched,
                                     _raw_record, _recompress, _with_section)


def expected(buf: bytes, from_offset: int = 0) -> list[ConsumerRecord]:
    """What a consumer should get, from the broker's decoder."""
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
    rng = random.Random(seed)
    plain = build_batch(SAMPLE[:7], now_ms=NOW)
    section = plain[HEADER_SIZE:]
    for _ in range(1500):
        mutated = bytearray(section)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)):]
        payload = C.compress(codec, bytes(mutated)) if codec else bytes(mutated)
        buf = _recompress(plain, codec, payload)
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
