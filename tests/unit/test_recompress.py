"""A topic's compression.type applied to produced batches (broker/log/recompress.py and
PartitionLog.append_as_leader): every codec into every other, producer fields kept, the
common case (`producer`, or the codec already right) untouched, sizes checked after."""
from __future__ import annotations

import os

import pytest

from broker.log import LogConfig, PartitionLog
from broker.log.errors import CorruptMessageError, MessageTooLargeError
from broker.log.recompress import decompression_budget, recompress_batches, target_codec
from broker.log.validation import scan_batches
from clients.protocol import compression
from clients.protocol.batch_header import HEADER_SIZE, write_crc
from clients.protocol.records import Record, build_batch, build_control_batch, iter_batches

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MAX = 1048588            # max.message.bytes, Kafka's default


def records(n: int = 50) -> list[Record]:
    return [Record(b"key-%d" % (i % 7) if i % 5 else None, b"value-%d-" % i + b"x" * 200,
                   [("h", b"%d" % i), ("nil", None)], 1_700_000_000_000 + 3 * i)
            for i in range(n)]


def producer_batch(codec: str, n: int = 50, **kw) -> bytes:
    args = dict(producer_id=7, producer_epoch=2, base_sequence=40)
    args.update(kw)
    return build_batch(records(n), compression=compression.codec_for_name(codec), **args)


def content(buf: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.producer_id, r.producer_epoch,
             r.sequence) for b in iter_batches(buf) for r in b.records]


def test_target_codec():
    assert target_codec("producer") is None
    assert target_codec("uncompressed") == compression.NONE
    assert [target_codec(c) for c in CODECS[1:]] == [1, 2, 3, 4]


@pytest.mark.parametrize("src", CODECS)
@pytest.mark.parametrize("dst", ["uncompressed"] + CODECS[1:])
def test_every_codec_into_every_other(src, dst):
    original = producer_batch(src, is_transactional=True)
    view = memoryview(original)
    codec = target_codec(dst)
    out = recompress_batches(view, scan_batches(view), codec, MAX)
    if compression.codec_for_name(src) == codec:
        assert out is None                                 # nothing to do, nothing copied
        return
    rebuilt = bytes(out)
    (_, old), = scan_batches(memoryview(original))
    (_, new), = scan_batches(memoryview(rebuilt))         # framing and CRC valid
    assert new.compression == codec
    assert new._replace(attributes=0, batch_length=0, crc=0) == \
        old._replace(attributes=0, batch_length=0, crc=0)  # producer fields, counts, times kept
    assert new.is_transactional and new.attributes & ~7 == old.attributes & ~7
    assert content(rebuilt) == content(original)


def test_control_batches_and_right_codecs_are_copied_as_they_are():
    marker = build_control_batch(1, producer_id=7, producer_epoch=2)
    lz4 = producer_batch("lz4")
    gz = producer_batch("gzip")
    view = memoryview(marker + lz4 + gz)
    out = recompress_batches(view, scan_batches(view), compression.LZ4, MAX)
    assert out is not None and bytes(out[:len(marker) + len(lz4)]) == marker + lz4
    assert [h.compression for _, h in scan_batches(memoryview(out))] == [0, 3, 3]
    assert recompress_batches(memoryview(marker + lz4), scan_batches(memoryview(marker + lz4)),
                              compression.LZ4, MAX) is None


def test_garbage_behind_a_valid_crc_is_corrupt():
    bad = bytearray(producer_batch("lz4"))
    bad[HEADER_SIZE:] = b"\x00" * (len(bad) - HEADER_SIZE)
    write_crc(bad, 0, len(bad))
    view = memoryview(bytes(bad))
    with pytest.raises(CorruptMessageError):
        recompress_batches(view, scan_batches(view), compression.GZIP, MAX)


def stored(log: PartitionLog) -> bytes:
    info = log.read(0, 1 << 30)
    return b"".join(os.pread(r.fileno, r.size, r.position) for r in info.regions)


def test_a_topic_codec_is_what_the_log_stores(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(compression_type="zstd"))
    try:
        first = log.append_as_leader(producer_batch("none", 50, base_sequence=0), 3)
        second = log.append_as_leader(producer_batch("gzip", 50, base_sequence=50), 3)
        assert (first.first_offset, first.last_offset, second.last_offset) == (0, 49, 99)
        data = stored(log)
        assert [(b.header.compression, b.base_offset) for b in iter_batches(data)] == \
            [(compression.ZSTD, 0), (compression.ZSTD, 50)]
        got = [(r.offset, r.key, r.value, r.sequence) for b in iter_batches(data) for r in b.records]
        assert got[:50] == [(i, r.key, r.value, i) for i, r in enumerate(records(50))]
        assert got[50:] == [(50 + i, r.key, r.value, 50 + i) for i, r in enumerate(records(50))]
        # The producer's retry of its last batch is still recognised after the rewrite.
        again = log.append_as_leader(producer_batch("gzip", 50, base_sequence=50), 3)
        assert again.duplicate and (again.first_offset, again.last_offset) == (50, 99)
        assert log.log_end_offset == 100
    finally:
        log.close()


def test_producer_keeps_batches_byte_for_byte(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    try:
        sent = producer_batch("snappy")
        log.append_as_leader(sent, 0)
        data = stored(log)
        # Only the broker's fields differ (leader epoch, CRC); the records section is the same.
        assert data[HEADER_SIZE:] == sent[HEADER_SIZE:]
        assert next(iter_batches(data)).header.compression == compression.SNAPPY
    finally:
        log.close()


def test_a_batch_that_grows_past_max_message_bytes_is_refused(tmp_path):
    sent = producer_batch("zstd", 200)
    assert len(sent) < 4000
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(compression_type="uncompressed",
                                                        max_message_bytes=4000))
    try:
        with pytest.raises(MessageTooLargeError):
            log.append_as_leader(sent, 0)
        assert log.log_end_offset == 0
    finally:
        log.close()


def test_a_small_request_cannot_expand_without_bound():
    """Batches of zeros that gzip 1000:1 (Kafka's produce path would take one per request;
    strom takes several): decompression stops at the budget, long before memory runs out,
    and a rewritten batch over max.message.bytes is refused at once."""
    bomb = build_batch([Record(None, bytes(8 << 20))], compression=compression.GZIP)
    assert len(bomb) < 20_000
    view = memoryview(bomb * 20)                               # 160 MiB of records in 0.4 MB
    assert decompression_budget(MAX) == 64 << 20
    with pytest.raises(CorruptMessageError, match="exceeds the limit"):
        recompress_batches(view, scan_batches(view), compression.LZ4, MAX)
    one = memoryview(bomb)
    with pytest.raises(MessageTooLargeError):
        recompress_batches(one, scan_batches(one), compression.NONE, MAX)
