"""BatchWriter (records encoded as they are appended) writes the same bytes as build_batch
for the same records, and what it writes decodes back to them. Sans-io."""
from __future__ import annotations

import random

import pytest

from clients.protocol import compression
from clients.protocol.batch_header import read_header
from clients.protocol.record_writer import BatchWriter, encode_headers
from clients.protocol.records import Record, build_batch, records_from_fetch


def _write(records: list[Record], **finish: object) -> bytes:
    w = BatchWriter()
    for r in records:
        w.append(r.timestamp, r.key, r.value, encode_headers(r.headers))
    return w.finish(**finish)  # type: ignore[arg-type]


def _random_records(rng: random.Random, n: int) -> list[Record]:
    out = []
    ts = 1_700_000_000_000
    for _ in range(n):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice((0, 3, 200, 9000)))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice((0, 100, 1024, 20000)))
        headers = [] if rng.random() < 0.6 else [
            (rng.choice(("h", "trace-id", "ünïcode")),
             None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 40)))
            for _ in range(rng.randint(1, 3))]
        # Timestamps go back and forth (negative deltas) and jump far (multi-byte varints).
        ts += rng.choice((0, 1, -5, 10_000, -3_000_000, 86_400_000))
        out.append(Record(key, value, headers, ts))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_same_bytes_as_build_batch(seed: int) -> None:
    rng = random.Random(seed)
    records = _random_records(rng, rng.choice((1, 7, 60)))
    ident = dict(producer_id=rng.randint(0, 1 << 40), producer_epoch=rng.randint(0, 300),
                 base_sequence=rng.randint(0, 1 << 30))
    expected = build_batch(records, **ident)    # type: ignore[arg-type]
    assert _write(records, **ident) == expected
    back = list(records_from_fetch(expected))
    assert [(r.key, r.value, r.timestamp) for r in back] == [
        (r.key, r.value, r.timestamp) for r in records]


def test_offset_deltas_past_the_cached_varints() -> None:
    records = [Record(None, b"%d" % i, [], 5) for i in range(9000)]
    data = _write(records)
    assert data == build_batch(records)
    assert [r.offset for r in records_from_fetch(data)][-3:] == [8997, 8998, 8999]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_decode_to_the_records(codec: str) -> None:
    records = _random_records(random.Random(codec), 40)
    cid = compression.codec_for_name(codec)
    data = _write(records, compression=cid, transactional=True)
    h = read_header(data, 0)
    assert h.attributes & 0x07 == cid and h.attributes & 0x10
    back = list(records_from_fetch(data))
    assert [(r.key, r.value, r.timestamp, list(r.headers)) for r in back] == [
        (r.key, r.value, r.timestamp, [(k, v) for k, v in r.headers]) for r in records]


def test_finishing_again_after_a_new_sequence_keeps_the_records() -> None:
    w = BatchWriter()
    for i in range(5):
        w.append(100 + i, None, b"v%d" % i)
    first = w.finish(producer_id=9, producer_epoch=0, base_sequence=0)
    again = w.finish(producer_id=9, producer_epoch=1, base_sequence=0)
    assert first[61:] == again[61:]
    assert read_header(again, 0).producer_epoch == 1
    assert [r.value for r in records_from_fetch(again)] == [b"v%d" % i for i in range(5)]
