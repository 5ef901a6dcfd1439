"""Codecs of RecordBatch v2: round trips, Kafka's framings, other implementations' output,
corrupt input and decompression bombs."""
from __future__ import annotations

import gzip
import io
import random
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from kafka import codec as kp_codec

from clients.protocol import compression as C
from clients.protocol import errors

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]
COMPRESSED = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]

_rng = random.Random(1234)
SAMPLES = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 500,
    "random": bytes(_rng.getrandbits(8) for _ in range(70_000)),
    "zeros_1m": bytes(1 << 20),
    "block_edges": bytes(range(256)) * 256 + b"tail",  # 65 540: crosses the 32 KiB/64 KiB blocks
}


def test_codes_and_names():
    assert C.CODEC_NAMES == ("none", "gzip", "snappy", "lz4", "zstd")
    for code, name in enumerate(C.CODEC_NAMES):
        assert C.codec_for_name(name) == code
        assert C.codec_for_name(name.upper()) == code
        assert C.codec_name(code) == name
    assert C.codec_for_name("uncompressed") == C.NONE
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        C.codec_for_name("brotli")
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        C.codec_name(5)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip(codec, name):
    data = SAMPLES[name]
    packed = C.compress(codec, data)
    assert isinstance(packed, bytes)
    assert C.decompress(codec, packed) == data
    # memoryview and bytearray inputs work too
    assert C.decompress(codec, memoryview(packed)) == data
    assert C.compress(codec, bytearray(data)) == packed


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("level", [1, 5, 9, 100, -5])
def test_levels(codec, level):
    data = SAMPLES["text"]
    assert C.decompress(codec, C.compress(codec, data, level=level)) == data


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        C.compress(codec, b"x")
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        C.decompress(codec, b"x")


# --- snappy -----------------------------------------------------------------------------------

def test_snappy_writes_xerial_framing():
    data = SAMPLES["block_edges"]
    out = C.compress(C.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # [int32 length][raw snappy block] chunks of at most 32 KiB of input
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.uncompress(out[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768, 32768, 4]
    assert b"".join(blocks) == data


@pytest.mark.parametrize("name", ["text", "random", "block_edges", "one"])
def test_snappy_interop_with_kafka_python(name):
    data = SAMPLES[name]
    # kafka-python's xerial writer -> ours; ours -> kafka-python's xerial reader
    assert C.decompress(C.SNAPPY, kp_codec.snappy_encode(data)) == data
    assert kp_codec.snappy_decode(C.compress(C.SNAPPY, data)) == data
    # raw (unframed) snappy, as librdkafka writes it
    assert C.decompress(C.SNAPPY, kp_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert C.decompress(C.SNAPPY, snappy.compress(data)) == data


def test_snappy_concatenated_xerial_streams():
    a, b = SAMPLES["text"], SAMPLES["random"]
    assert C.decompress(C.SNAPPY, C.compress(C.SNAPPY, a) + C.compress(C.SNAPPY, b)) == a + b


def test_snappy_xerial_little_endian_version_is_accepted():
    data = SAMPLES["text"]
    framed = C.compress(C.SNAPPY, data)
    odd = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + framed[16:]
    assert C.decompress(C.SNAPPY, odd) == data


# --- lz4 ----------------------------------------------------------------------------------------

def test_lz4_frame_is_what_java_reads():
    out = C.compress(C.LZ4, SAMPLES["block_edges"])
    info = lz4.frame.get_frame_info(out)
    # Java's reader refuses dependent blocks; Java writes 64 KiB blocks, no size, no checksum
    assert info["block_linked"] is False
    assert info["block_size_id"] == 4
    assert info["content_checksum"] is False
    assert info["content_size"] == 0
    assert out[:4] == struct.pack("<I", 0x184D2204)


@pytest.mark.parametrize("kwargs", [
    {}, {"block_linked": True}, {"content_checksum": True}, {"store_size": True},
    {"block_checksum": True}, {"block_size": lz4.frame.BLOCKSIZE_MAX4MB},
])
def test_lz4_reads_every_frame_variant(kwargs):
    data = SAMPLES["block_edges"] * 3
    assert C.decompress(C.LZ4, lz4.frame.compress(data, **kwargs)) == data


def test_lz4_interop_with_kafka_python():
    data = SAMPLES["text"]
    assert C.decompress(C.LZ4, kp_codec.lz4_encode(data)) == data
    assert kp_codec.lz4_decode(C.compress(C.LZ4, data)) == data


# --- zstd ---------------------------------------------------------------------------------------

def _zstd_stream(data: bytes) -> bytes:
    """A frame without content size, as the Java client and librdkafka write it."""
    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as w:
        w.write(data)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["text", "random", "zeros_1m", "one"])
def test_zstd_frame_without_content_size(name):
    data = SAMPLES[name]
    framed = _zstd_stream(data)
    assert zstandard.frame_content_size(framed) == -1
    assert C.decompress(C.ZSTD, framed) == data


def test_zstd_several_frames():
    a, b = SAMPLES["text"], SAMPLES["random"]
    assert C.decompress(C.ZSTD, C.compress(C.ZSTD, a) + _zstd_stream(b)) == a + b
    assert C.decompress(C.ZSTD, C.compress(C.ZSTD, a) + C.compress(C.ZSTD, b)) == a + b


def test_zstd_interop_with_kafka_python():
    data = SAMPLES["text"]
    assert C.decompress(C.ZSTD, kp_codec.zstd_encode(data)) == data
    assert kp_codec.zstd_decode(C.compress(C.ZSTD, data)) == data


# --- gzip ---------------------------------------------------------------------------------------

def test_gzip_standard_stream_and_members():
    a, b = SAMPLES["text"], SAMPLES["random"]
    out = C.compress(C.GZIP, a)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == a
    assert C.decompress(C.GZIP, gzip.compress(a)) == a
    assert C.decompress(C.GZIP, kp_codec.gzip_encode(a)) == a
    # Java's GZIPInputStream reads concatenated members
    assert C.decompress(C.GZIP, gzip.compress(a) + gzip.compress(b)) == a + b


# --- corrupt input ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("garbage", [
    b"", b"\x05", b"\xff" * 64, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",
    bytes(random.Random(7).getrandbits(8) for _ in range(300)),
])
def test_garbage_raises_corrupt(codec, garbage):
    with pytest.raises(errors.CorruptMessageError):
        C.decompress(codec, garbage)


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4])
def test_truncated_stream_raises_corrupt(codec):
    packed = C.compress(codec, SAMPLES["random"])
    for cut in (1, 10, len(packed) // 2, len(packed) - 1):
        with pytest.raises(errors.CorruptMessageError):
            C.decompress(codec, packed[:cut])


def test_truncated_zstd_never_leaks_library_errors():
    # zstandard's streaming reader returns what it decoded from a truncated frame; the
    # records parser then finds the records missing. It must never raise anything else.
    packed = _zstd_stream(SAMPLES["random"])
    for cut in (1, 5, 10, len(packed) // 2, len(packed) - 1):
        try:
            out = C.decompress(C.ZSTD, packed[:cut])
        except errors.CorruptMessageError:
            continue
        assert SAMPLES["random"].startswith(out) and len(out) < len(SAMPLES["random"])


@pytest.mark.parametrize("codec", COMPRESSED)
def test_random_bytes_fuzz(codec):
    rng = random.Random(codec)
    packed = C.compress(codec, SAMPLES["text"])
    for _ in range(300):
        mutated = bytearray(packed)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
        try:
            C.decompress(codec, bytes(mutated), limit=1 << 20)
        except errors.CorruptMessageError:
            pass


# --- decompression bombs ------------------------------------------------------------------------

@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_refused_and_limit_is_inclusive(codec):
    data = bytes(4 << 20)
    packed = C.compress(codec, data)
    assert len(packed) < 300_000
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(codec, packed, limit=1 << 20)
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(codec, packed, limit=len(data) - 1)
    assert C.decompress(codec, packed, limit=len(data)) == data


def test_bomb_none_codec_limit():
    with pytest.raises(errors.CorruptMessageError):
        C.decompress(C.NONE, b"x" * 11, limit=10)


def test_zstd_stream_bomb_refused():
    packed = _zstd_stream(bytes(8 << 20))
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(C.ZSTD, packed, limit=1 << 20)


def test_zstd_declared_size_over_default_limit_refused_without_decompressing():
    # a frame declaring 300 MiB of content: refused from the header, default limit 256 MiB
    cobj = zstandard.ZstdCompressor(level=1).compressobj(size=300 << 20)
    chunk = bytes(1 << 20)
    packed = b"".join(cobj.compress(chunk) for _ in range(300)) + cobj.flush()
    assert zstandard.frame_content_size(packed) == 300 << 20
    assert C.DEFAULT_MAX_DECOMPRESSED == 256 << 20
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(C.ZSTD, packed)


def test_snappy_xerial_bomb_refused_from_block_preambles():
    # 20 000 copies of a 32 KiB zero block declare 655 MB: refused before decompressing
    block = snappy.compress(bytes(32768))
    framed = C.compress(C.SNAPPY, b"")[:16] + (struct.pack(">i", len(block)) + block) * 20_000
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(C.SNAPPY, framed)


def test_raw_snappy_bomb_refused():
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(C.SNAPPY, snappy.compress(bytes(2 << 20)), limit=1 << 20)


def test_gzip_bomb_over_default_limit():
    # 300 MiB of zeros deflate to ~300 KB; refused once 256 MiB have come out
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(4 << 20)
    packed = b"".join(c.compress(chunk) for _ in range(75)) + c.flush()
    with pytest.raises(errors.CorruptMessageError, match="limit"):
        C.decompress(C.GZIP, packed)
