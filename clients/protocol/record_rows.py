"""The records section of a RecordBatch v2, record by record: the consumer's hot loop (a
records section into one tuple per record) and the producer's (one record onto the end of
a batch being written).

Split out of records.py (which documents the format and calls these) so that it can be
compiled: where a C compiler is at hand, installing strom compiles this module with mypyc
(setup.py), and the compiled module, about 2.7 times as fast at decoding 100-byte records
and at appending them to a batch, is imported in its place. The source stays the reference and
the fallback; `native.py` decides which one is loaded. Plain Python that mypy checks, so
keep it so: annotated arguments are checked at the call when compiled (`data` must be
bytes; a key, value and headers to encode must be bytes or None).
"""
from __future__ import annotations

from typing import Final, Sequence

from .batch_header import TIMESTAMP_TYPE_LOG_APPEND, BatchHeader
from .errors import BY_NAME

CorruptMessageError = BY_NAME["CORRUPT_MESSAGE"]

CREATE_TIME = 0
LOG_APPEND_TIME = 1


def read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`: (value, new position). IndexError past the end."""
    value = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise CorruptMessageError("varint longer than 10 bytes")


def decode_rows(data: bytes, h: BatchHeader, pos: int, index: int, stop: int,
                 prev_delta: int, out: list, row_type: type[tuple], topic: str,
                 partition: int) -> tuple[int, int]:
    """The record decoder: append records index..stop-1 of the records section `data`
    (_records_section's; record `index` at `pos`; `prev_delta` the offset delta of the one
    before, -1 for none) to `out` as ROW_FIELDS tuples of `row_type`, built with
    tuple.__new__ (`tuple` itself for plain rows): (position, offset delta) after the last
    one. Every check of the records section is here; anything inconsistent raises
    CorruptMessageError, after which `out` may hold the records before it.

    The consumer's hot loop, so everything is inline: varints of one or two bytes (values
    below 8192), no call per record without headers (those get one shared empty tuple),
    the record built at once. Fields that overrun their record are caught by the one check
    that each record ends where its length says (slicing past the end cannot fail, and a
    read past it raises IndexError)."""
    count = h.records_count
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    last_delta = h.last_offset_delta
    gaps = count != last_delta + 1              # compacted: deltas increase, with holes
    ts_type = LOG_APPEND_TIME if h.attributes & TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
    epoch = h.partition_leader_epoch
    new = tuple.__new__
    start = len(out)
    append = out.append
    read_uv = read_uvarint
    no_headers: tuple[()] = ()
    headers: Sequence[tuple[str, bytes | None]]
    ts_x = -1
    ts = base_ts
    offset = base_offset + index - 1
    try:
        for zz in range(index << 1, stop << 1, 2):  # record i's offset delta, zigzag
            x = data[pos]                            # length
            if x < 0x80:
                pos += 1
            elif (y := data[pos + 1]) < 0x80:
                x = (x & 0x7F) | (y << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            if x & 1:
                raise CorruptMessageError(
                    f"batch at offset {base_offset}: record length {(x >> 1) ^ -1} is negative")
            rec_end = pos + (x >> 1)
            x = data[pos + 1]                        # timestamp delta (after attributes)
            if x < 0x80:
                pos += 2
            elif (y := data[pos + 2]) < 0x80:
                x = (x & 0x7F) | (y << 7)
                pos += 3
            else:
                x, pos = read_uv(data, pos + 1)
            if x != ts_x:                            # records of one ms share one int
                ts_x = x
                ts = base_ts + ((x >> 1) ^ -(x & 1))
            x = data[pos]                            # offset delta
            if x < 0x80:
                pos += 1
            elif (y := data[pos + 1]) < 0x80:
                x = (x & 0x7F) | (y << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            if gaps:
                delta = (x >> 1) ^ -(x & 1)
                if delta <= prev_delta or delta > last_delta:
                    raise CorruptMessageError(
                        f"batch at offset {base_offset}: offset delta {delta} after "
                        f"{prev_delta} (last offset delta {last_delta})")
                prev_delta = delta
                offset = base_offset + delta
            elif x == zz:
                offset += 1
            else:
                raise CorruptMessageError(
                    f"batch at offset {base_offset}: offset delta {(x >> 1) ^ -(x & 1)} at "
                    f"record {zz >> 1} (last offset delta {last_delta}, {count} records)")
            x = data[pos]                            # key
            if x == 1:                               # -1: null
                pos += 1
                key = None
                key_size = -1
            else:
                if x < 0x80:
                    pos += 1
                elif (y := data[pos + 1]) < 0x80:
                    x = (x & 0x7F) | (y << 7)
                    pos += 2
                else:
                    x, pos = read_uv(data, pos)
                if x & 1:                            # other negative lengths: null too
                    key = None
                    key_size = -1
                else:
                    key_size = x >> 1
                    key = data[pos:pos + key_size]
                    pos += key_size
            x = data[pos]                            # value
            if x < 0x80:
                pos += 1
            elif (y := data[pos + 1]) < 0x80:
                x = (x & 0x7F) | (y << 7)
                pos += 2
            else:
                x, pos = read_uv(data, pos)
            if x & 1:
                value = None
                value_size = -1
            else:
                value_size = x >> 1
                value = data[pos:pos + value_size]
                pos += value_size
            if data[pos]:                            # header count
                x = data[pos]
                if x < 0x80:
                    pos += 1
                else:
                    x, pos = read_uv(data, pos)
                n = (x >> 1) ^ -(x & 1)
                if n < 0 or n > rec_end - pos:
                    raise CorruptMessageError(
                        f"batch at offset {base_offset}: invalid header count {n}")
                parsed: list[tuple[str, bytes | None]] = []
                pos = parse_headers(data, pos, rec_end, n, parsed, base_offset)
                headers = parsed
            else:
                pos += 1
                headers = no_headers                 # shared: no list per record
            if pos != rec_end:
                raise CorruptMessageError(
                    f"batch at offset {base_offset}: record fields end at {pos}, its length "
                    f"says {rec_end}")
            append(new(row_type, (topic, partition, offset, ts, ts_type, key, value, headers,
                                  epoch, key_size, value_size)))
        if stop == count and pos != len(data):
            raise CorruptMessageError(f"batch at offset {base_offset}: {len(data) - pos} "
                                      f"bytes left after {count} records")
        if ts_type == LOG_APPEND_TIME:
            # Every record reports the batch's max timestamp (rare: fixed up, not in the loop).
            max_ts = h.max_timestamp
            out[start:] = [new(row_type, (*r[:3], max_ts, *r[4:])) for r in out[start:]]
        return pos, prev_delta
    except (IndexError, UnicodeDecodeError) as e:   # truncated, or a key not utf-8
        raise CorruptMessageError(
            f"batch at offset {base_offset}: records section is malformed ({e})") from None


def parse_headers(data: bytes, pos: int, rec_end: int, n: int,
                   headers: list[tuple[str, bytes | None]], base_offset: int) -> int:
    append = headers.append
    for _ in range(n):
        x = data[pos]
        if x < 0x80:                                 # one-byte varints inline, as above
            pos += 1
        else:
            x, pos = read_uvarint(data, pos)
        klen = (x >> 1) ^ -(x & 1)
        stop = pos + klen
        if klen < 0 or stop > rec_end:
            raise CorruptMessageError(
                f"batch at offset {base_offset}: invalid header key length {klen}")
        hkey = str(data[pos:stop], "utf-8")
        pos = stop
        x = data[pos]
        if x < 0x80:
            pos += 1
        else:
            x, pos = read_uvarint(data, pos)
        if x & 1:                                    # a negative length: null
            append((hkey, None))
            continue
        stop = pos + (x >> 1)
        if stop > rec_end:
            raise CorruptMessageError(
                f"batch at offset {base_offset}: header value overruns record")
        append((hkey, data[pos:stop]))
        pos = stop
    return pos


# ---------------------------------------------------------------------------------------------
# encoding

def uvarint_bytes(v: int) -> bytes:
    """An unsigned varint (v >= 0)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


# Encoded unsigned varints of every zigzag value below this bound, so that the common small
# lengths, deltas and counts cost one list lookup instead of a loop.
UV_CACHED: Final = 1 << 14
UV: Final[list[bytes]] = [uvarint_bytes(i) for i in range(UV_CACHED)]

NULL: Final = b"\x01"            # varint -1: a null key, value or header value
NO_HEADERS: Final = b"\x00"      # a header count of 0


def _uv(zz: int) -> bytes:
    return UV[zz] if zz < UV_CACHED else uvarint_bytes(zz)


def encode_headers(headers: Sequence[tuple[str | bytes, bytes | None]]) -> bytes:
    """A record's headers section: count, then each key (utf-8) and value (null: -1)."""
    if not headers:
        return NO_HEADERS
    parts = [_uv(len(headers) << 1)]
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else hk
        parts.append(_uv(len(hkb) << 1))
        parts.append(hkb)
        if hv is None:
            parts.append(NULL)
        else:
            parts.append(_uv(len(hv) << 1))
            parts.append(hv)
    return b"".join(parts)


def encode_row(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
               value: bytes | None, headers: bytes) -> None:
    """Append one length-prefixed record (DefaultRecord) to `out`: attributes 0, the
    deltas as varints (zigzag), key and value with their lengths (null: -1), then
    `headers` as encode_headers gives them. The producer's per-record step: one bytes
    formatting, the varints from the table."""
    zz = (timestamp_delta << 1) ^ (timestamp_delta >> 63)
    tsd = UV[zz] if zz < UV_CACHED else uvarint_bytes(zz)
    zz = offset_delta << 1
    od = UV[zz] if zz < UV_CACHED else uvarint_bytes(zz)
    kl = NULL if key is None else _uv(len(key) << 1)
    vl = NULL if value is None else _uv(len(value) << 1)
    key = b"" if key is None else key
    value = b"" if value is None else value
    body = 1 + len(tsd) + len(od) + len(kl) + len(key) + len(vl) + len(value) + len(headers)
    zz = body << 1
    out += b"%b\x00%b%b%b%b%b%b%b" % (UV[zz] if zz < UV_CACHED else uvarint_bytes(zz),
                                     tsd, od, kl, key, vl, value, headers)
