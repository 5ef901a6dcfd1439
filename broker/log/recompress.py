"""A topic's `compression.type`, applied to what producers send (Kafka's LogValidator with
BrokerCompression.targetCompression).

`producer` (the default) keeps every batch as it came, and this module is never called: the
hot path stays free of decompression (records are never decoded there). Any other value (`uncompressed`,
`gzip`, `snappy`, `lz4`, `zstd`) is the codec batches are stored in; a batch in another codec
is rewritten. Only the records section changes hands between codecs: it is the same
sequence of records compressed or not, so offsets deltas, timestamps, producer id, epoch and
sequence, and the transactional flag stay as the producer wrote them; the header gets the new
codec bits, length and CRC. Records are never parsed one by one. Pure functions.
"""
from __future__ import annotations

import struct
from functools import lru_cache

from clients.protocol import compression
from clients.protocol.batch_header import (ATTRIBUTES_OFFSET, COMPRESSION_MASK, HEADER_SIZE,
                                           LOG_OVERHEAD, BatchHeader, write_crc)

from .errors import MessageTooLargeError

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_LENGTH_OFFSET = 8


@lru_cache(maxsize=16)    # called for every append: the config string maps to a codec once
def target_codec(compression_type: str) -> int | None:
    """The codec a topic stores batches in; None for `producer` (keep the producer's)."""
    name = compression_type.strip().lower()
    if name == "producer":
        return None
    return compression.codec_for_name(name)      # "uncompressed" is an alias of none


def decompression_budget(max_message_bytes: int) -> int:
    """How many decompressed bytes one record set may expand to while it is rewritten: a
    generous ratio over max.message.bytes, capped, so that a small request cannot make the
    broker allocate gigabytes (memory stays bounded by configuration, not by input)."""
    return min(compression.DEFAULT_MAX_DECOMPRESSED, max(64 << 20, 32 * max_message_bytes))


def recompress_batches(buf: memoryview, batches: list[tuple[int, BatchHeader]], codec: int,
                       max_message_bytes: int) -> bytearray | None:
    """The record set with every batch in `codec`, or None if all of them already are (the
    common case: nothing is copied). Control batches are left as they are.

    Raises CorruptMessageError for a records section that does not decompress (the CRC was
    fine, so the producer compressed garbage) or that expands beyond
    `decompression_budget`, and MessageTooLargeError as soon as a rewritten batch is larger
    than `max_message_bytes`."""
    if all(h.compression == codec or h.is_control for _, h in batches):
        return None
    budget = decompression_budget(max_message_bytes)
    out = bytearray()
    for pos, h in batches:
        end = pos + h.total_size
        if h.compression == codec or h.is_control:
            out += buf[pos:end]
            continue
        section = buf[pos + HEADER_SIZE:end]
        raw: bytes | memoryview
        if h.compression == compression.NONE:
            raw = section
        else:
            raw = compression.decompress(h.compression, section, budget)
            budget -= len(raw)
        # An empty records section stays empty in any codec (a batch without records).
        if codec != compression.NONE and len(raw):
            raw = compression.compress(codec, raw)
        start = len(out)
        out += buf[pos:pos + HEADER_SIZE]
        out += raw
        total = len(out) - start
        if total > max_message_bytes:
            raise MessageTooLargeError(
                f"the record batch is {total} bytes in {compression.codec_name(codec)}, larger "
                f"than max.message.bytes {max_message_bytes}")
        _INT32.pack_into(out, start + _LENGTH_OFFSET, total - LOG_OVERHEAD)
        _INT16.pack_into(out, start + ATTRIBUTES_OFFSET,
                         (h.attributes & ~COMPRESSION_MASK) | codec)
        write_crc(out, start, total)
    return out
