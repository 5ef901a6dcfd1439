"""The records every client round-trip test produces, and the one check they all pass.

Record i has key `key-<i % 997>`, a value naming i, two headers, and timestamp
BASE_TS + i, so every consumed record can be checked on its own and its producer order
recovered.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

BASE_TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PAD = b"." * 60


def key_of(i: int) -> bytes:
    return b"key-%d" % (i % 997)


def value_of(i: int, codec: str) -> bytes:
    return b"value-%d-%s-" % (i, codec.encode()) + PAD


def headers_of(i: int, codec: str) -> list[tuple[str, bytes]]:
    return [("seq", str(i).encode()), ("codec", codec.encode())]


def timestamp_of(i: int) -> int:
    return BASE_TS + i


@dataclass
class Seen:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int


def verify(seen: list[Seen], n: int, codec: str, partitions: int = 3, check_timestamps: bool = True) -> None:
    """All n records present once, intact, in producer order per partition, offsets dense."""
    assert len(seen) == n, f"consumed {len(seen)} records, expected {n}"
    by_partition: dict[int, list[Seen]] = defaultdict(list)
    indices = set()
    key_partition: dict[bytes, int] = {}
    for r in seen:
        assert r.value is not None
        i = int(r.value.split(b"-")[1])
        assert i not in indices, f"record {i} consumed twice"
        indices.add(i)
        assert r.key == key_of(i), (i, r.key)
        assert r.value == value_of(i, codec), (i, r.value)
        assert [(k, bytes(v) if v is not None else None) for k, v in r.headers] == headers_of(i, codec), (i, r.headers)
        if check_timestamps:
            assert r.timestamp == timestamp_of(i), (i, r.timestamp)
        assert key_partition.setdefault(r.key, r.partition) == r.partition, f"key {r.key!r} in two partitions"
        by_partition[r.partition].append(r)
    assert indices == set(range(n))
    assert set(by_partition) <= set(range(partitions))
    assert len(by_partition) == partitions, f"only partitions {sorted(by_partition)} got records"
    for p, recs in by_partition.items():
        recs.sort(key=lambda r: r.offset)
        offsets = [r.offset for r in recs]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), f"partition {p}: offsets not dense"
        assert offsets[0] == 0, f"partition {p} starts at {offsets[0]}"
        order = [int(r.value.split(b"-")[1]) for r in recs]
        assert order == sorted(order), f"partition {p}: producer order not kept"
