"""Compression codecs of RecordBatch v2 (attribute bits 0-2), bounded on the way in.

Sans-io: bytes in, bytes out. The algorithms are the libraries' (zlib, python-snappy, lz4,
zstandard); this module only adds the framing Kafka puts around them and a size limit on
decompression so that a small batch cannot expand into gigabytes (a "decompression bomb").

Codec facts (Kafka's `compress/*.java`, librdkafka):
- gzip: a standard gzip stream (RFC 1952); Java's GZIPInputStream also reads concatenated
  members, so we do too.
- snappy: the Java client writes xerial framing: magic `\\x82SNAPPY\\x00`, int32 version 1,
  int32 compat 1, then `[int32 length][raw snappy block]` chunks of at most 32 KiB of input.
  librdkafka writes raw (unframed) snappy. Both are read; xerial framing is written.
- lz4: the LZ4 frame format with independent blocks (Java's reader refuses linked blocks),
  64 KiB block size, no content size and no content checksum, as Java writes it.
- zstd: a standard frame. Java and librdkafka stream their output, so the frame header may
  carry no content size: decompression never relies on it.

Thread safety: every function may be called from any thread; zstd contexts, which are not
thread-safe, are kept per thread.
"""
from __future__ import annotations

import struct
import threading
import zlib
from typing import Any

import lz4.frame
import snappy
import zstandard

from .errors import BY_NAME

CorruptMessageError = BY_NAME["CORRUPT_MESSAGE"]
UnsupportedCompressionTypeError = BY_NAME["UNSUPPORTED_COMPRESSION_TYPE"]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
_CODES: dict[str, int] = {name: code for code, name in enumerate(CODEC_NAMES)}
_CODES["uncompressed"] = NONE      # the broker/topic config spelling of "none"

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024

# Library defaults match Kafka's defaults: gzip 6 (Deflater.DEFAULT_COMPRESSION), zstd 3,
# lz4 0 = the fast compressor (Kafka's default level 9 also selects the fast compressor).
_DEFAULT_LEVEL = {GZIP: 6, LZ4: 0, ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)     # 16
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS


def codec_for_name(name: str) -> int:
    """'gzip' -> 1 etc. (case-insensitive; 'uncompressed' is an alias of 'none')."""
    try:
        return _CODES[name.strip().lower()]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}") from None


def codec_name(codec: int) -> str:
    """1 -> 'gzip' etc."""
    if 0 <= codec < len(CODEC_NAMES):
        return CODEC_NAMES[codec]
    raise UnsupportedCompressionTypeError(f"unknown compression type id {codec}")


# ---------------------------------------------------------------------------------------------
# compress

def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress `data` the way Kafka's own clients frame it for `codec`."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(_level(GZIP, level, 0, 9), zlib.DEFLATED, _GZIP_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        framed: bytes = lz4.frame.compress(
            data, compression_level=_level(LZ4, level, 0, 16),
            block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
            content_checksum=False, store_size=False)
        return framed
    if codec == ZSTD:
        return _zstd_compressor(_level(ZSTD, level, -(1 << 17), 22)).compress(data)
    raise UnsupportedCompressionTypeError(f"unknown compression type id {codec}")


def _level(codec: int, level: int | None, lo: int, hi: int) -> int:
    if level is None:
        return _DEFAULT_LEVEL[codec]
    return max(lo, min(hi, level))


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    parts = [_XERIAL_HEADER]
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = snappy.compress(mv[i:i + _XERIAL_BLOCK])   # python-snappy >= 0.7 takes buffers
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zc", None)
    if cache is None:
        cache = _local.zc = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = zstandard.ZstdCompressor(level=level)
    return c


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    d: zstandard.ZstdDecompressor | None = getattr(_local, "zd", None)
    if d is None:
        d = _local.zd = zstandard.ZstdDecompressor()
    return d


# ---------------------------------------------------------------------------------------------
# decompress

def decompress(codec: int, data: bytes | bytearray | memoryview,
               limit: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress `data`; CorruptMessageError if it is invalid or would exceed `limit` bytes.

    Unknown codec ids raise UnsupportedCompressionTypeError.
    """
    if codec == NONE:
        if len(data) > limit:
            raise _too_big(limit)
        return bytes(data)
    try:
        if codec == GZIP:
            return _gunzip(data, limit)
        if codec == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec == LZ4:
            return _lz4_decompress(data, limit)
        if codec == ZSTD:
            return _zstd_decompress(data, limit)
    except CorruptMessageError:
        raise
    except (zlib.error, snappy.UncompressError, RuntimeError, zstandard.ZstdError,
            ValueError, struct.error) as e:
        # lz4 raises RuntimeError; the others their own error classes
        raise CorruptMessageError(f"invalid {codec_name(codec)} data: {e}") from None
    raise UnsupportedCompressionTypeError(f"unknown compression type id {codec}")


def _too_big(limit: int) -> Exception:
    return CorruptMessageError(f"decompressed size exceeds the limit of {limit} bytes")


def _gunzip(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    rest: Any = data
    while True:
        d = zlib.decompressobj(_GZIP_WBITS)
        # max_length bounds the output; zlib grows its buffer, it does not preallocate it
        out = d.decompress(rest, limit - total + 1)
        total += len(out)
        if total > limit:
            raise _too_big(limit)
        chunks.append(out)
        if not d.eof:
            raise CorruptMessageError("truncated gzip stream")
        rest = d.unused_data
        # Another member follows (concatenated gzip); anything else after the end is ignored,
        # as Java's GZIPInputStream does.
        if not rest.startswith(_GZIP_MAGIC):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _snappy_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    buf = bytes(data)
    if len(buf) >= _XERIAL_HEADER_SIZE and buf.startswith(XERIAL_MAGIC):
        return _xerial_decompress(buf, limit)
    if _snappy_length(buf, 0, len(buf)) > limit:
        raise _too_big(limit)
    out: bytes = snappy.uncompress(buf)
    return out


def _xerial_decompress(buf: bytes, limit: int) -> bytes:
    # Version and compat are not checked: there is only one block format, and some
    # producers are known to write them little-endian.
    n = len(buf)
    pos = _XERIAL_HEADER_SIZE
    blocks: list[tuple[int, int]] = []
    total = 0
    while pos < n:
        # concatenated xerial streams repeat the header; a block length never starts with 0x82
        if buf.startswith(XERIAL_MAGIC, pos):
            pos += _XERIAL_HEADER_SIZE
            continue
        if pos + 4 > n:
            raise CorruptMessageError("truncated xerial snappy block length")
        size = _INT32.unpack_from(buf, pos)[0]
        pos += 4
        end = pos + size
        if size < 0 or end > n:
            raise CorruptMessageError(f"xerial snappy block of {size} bytes overruns the data")
        # check the declared sizes before decompressing anything
        total += _snappy_length(buf, pos, end)
        if total > limit:
            raise _too_big(limit)
        blocks.append((pos, end))
        pos = end
    mv = memoryview(buf)
    out = [snappy.uncompress(mv[s:e]) for s, e in blocks]
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_length(buf: bytes, pos: int, end: int) -> int:
    """The uncompressed length a raw snappy block declares in its uvarint preamble."""
    value = 0
    shift = 0
    while True:
        if pos >= end or shift > 28:
            raise CorruptMessageError("invalid snappy length preamble")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value
        shift += 7


def _lz4_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    # python-lz4 preallocates max_length bytes, so ask for output in growing steps
    step = max(4 * len(data), 1 << 16)
    chunks: list[bytes] = []
    total = 0
    out = d.decompress(data, max_length=min(step, limit + 1))
    while True:
        total += len(out)
        if total > limit:
            raise _too_big(limit)
        chunks.append(out)
        if d.eof:
            break
        if d.needs_input:
            raise CorruptMessageError("truncated lz4 frame")
        step = min(step * 2, 1 << 24)
        out = d.decompress(b"", max_length=min(step, limit + 1 - total))
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _zstd_decompress(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    dctx = _zstd_decompressor()
    declared = zstandard.frame_content_size(data)   # -1 when the header does not say
    if declared > limit:
        raise _too_big(limit)
    if declared >= 0:
        try:
            # one frame with a known size: one call; anything else falls through
            return dctx.decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass
    chunks: list[bytes] = []
    total = 0
    step = max(4 * len(data), 1 << 16)
    with dctx.stream_reader(data, read_across_frames=True) as reader:
        while True:
            out = reader.read(min(step, limit + 1 - total))
            if not out:
                break
            total += len(out)
            if total > limit:
                raise _too_big(limit)
            chunks.append(out)
            step = min(step * 2, 1 << 24)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
