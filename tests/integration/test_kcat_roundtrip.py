"""Debian's kcat 1.7.1 (librdkafka 2.0.2) against a real broker process: produce 100,000
keyed records with headers per codec, consume them all back and verify them.

librdkafka 2.0.2 enables a feature only when the broker's advertised ranges contain exact
versions (docs/COMPATIBILITY.md); when one is missing it does not fail, it quietly
drops timestamps or headers, skips idempotence or sends a batch uncompressed. This test is
there to catch that: it runs the idempotent producer and checks the stored batches carry
the requested codec, a producer id, and the headers.

What kcat cannot do, and how the test copes:
- kcat cannot create topics. The broker is started with num.partitions=3 and the topic is
  auto-created by the producer's first Metadata request.
- kcat's -H sets the same headers on every record; there is no per-record header input. The
  records carry [("codec", <codec>), ("producer", "kcat")]: `verify_kcat` checks exactly those,
  then hands the records to roundtrip.verify with the headers every other client sends, so all
  the remaining checks (keys, values, order, dense offsets) are verify's own.
- kcat cannot set per-record timestamps: verify runs with check_timestamps=False and every
  timestamp must lie within the test's wall-clock window around the produce instead.
"""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clients.protocol.records import iter_batch_headers
from tests.support.roundtrip import CODECS, Seen, headers_of, key_of, value_of, verify
from tests.support.wire import WireClient

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")]

N = 100_000
PARTITIONS = 3
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
KEY_SEP = b"\x1f"     # between key and value on produce; between fields on consume
RECORD_SEP = b"\x1e"  # between records on consume
# Bytes kcat's -K / -f accept in \xNN form; none occurs in keys, values or headers.
assert all(KEY_SEP not in x and RECORD_SEP not in x for x in (key_of(1), value_of(1, "gzip")))


def kcat_headers(codec: str) -> list[tuple[str, bytes]]:
    return [("codec", codec.encode()), ("producer", b"kcat")]


def kcat(bootstrap: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", "-b", bootstrap, *args], capture_output=True, timeout=timeout)


def produce_all(bootstrap: str, topic: str, codec: str, n: int, workdir: Path) -> None:
    path = workdir / f"in-{codec}.txt"
    with open(path, "wb") as f:
        f.writelines(key_of(i) + KEY_SEP + value_of(i, codec) + b"\n" for i in range(n))
    headers = [a for name, value in kcat_headers(codec) for a in ("-H", f"{name}={value.decode()}")]
    r = kcat(bootstrap, "-P", "-t", topic, "-K", r"\x1f", "-z", codec, *headers,
             "-X", "enable.idempotence=true", "-X", "linger.ms=20", "-X", "batch.size=262144",
             "-l", str(path))
    # kcat prints "% Delivery failed" (and may still exit 0) when a record is not acknowledged.
    assert r.returncode == 0 and b"failed" not in r.stderr.lower(), r.stderr.decode(errors="replace")


def parse_headers(field: bytes) -> list[tuple[str, bytes]]:
    """kcat's %h: `name=value` pairs joined by commas (empty when there are none)."""
    if not field:
        return []
    out = []
    for pair in field.split(b","):
        name, _, value = pair.partition(b"=")
        out.append((name.decode(), value))
    return out


def consume_all(bootstrap: str, topic: str) -> list[Seen]:
    fmt = r"%p\x1f%o\x1f%T\x1f%k\x1f%h\x1f%s\x1e"
    r = kcat(bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-f", fmt,
             "-X", "fetch.max.bytes=8388608")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    seen = []
    chunks = r.stdout.split(RECORD_SEP)
    assert chunks[-1] == b"", f"trailing garbage after the last record: {chunks[-1][:200]!r}"
    for chunk in chunks[:-1]:
        fields = chunk.split(KEY_SEP)
        assert len(fields) == 6, chunk
        partition, offset, ts, key, hdrs, value = fields
        seen.append(Seen(int(partition), int(offset), key, value, parse_headers(hdrs), int(ts)))
    return seen


def verify_kcat(seen: list[Seen], n: int, codec: str, t0: int, t1: int) -> None:
    """kcat's fixed headers and wall-clock timestamps, then everything else via verify."""
    expected = kcat_headers(codec)
    for r in seen:
        assert r.headers == expected, (r.offset, r.headers)
        assert t0 <= r.timestamp <= t1, f"timestamp {r.timestamp} outside [{t0}, {t1}]"
    # verify derives each record's index from its value and checks headers against
    # headers_of(index): give it those, the kcat headers having been checked above.
    as_verify_expects = [dataclasses.replace(r, headers=headers_of(int(r.value.split(b"-")[1]), codec))
                         for r in seen]
    verify(as_verify_expects, n, codec, partitions=PARTITIONS, check_timestamps=False)


def stored_batches(bootstrap: str, topic: str, partitions: int) -> list:
    """The batch headers of each partition, fetched from offset 0 over the wire."""
    headers = []
    host, port = bootstrap.rsplit(":", 1)
    with WireClient(host, int(port)) as c:
        for p in range(partitions):
            offset = 0
            while True:
                resp = c.request("Fetch", 4, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 * 2**20,
                    "isolation_level": 0,
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "fetch_offset": offset, "partition_max_bytes": 64 * 2**20}]}]})
                part = resp.responses[0].partitions[0]
                assert part.error_code == 0, part
                batch = [h for _, h in iter_batch_headers(bytes(part.records or b""))]
                if not batch:
                    break
                headers.extend(batch)
                offset = batch[-1].last_offset + 1
                if offset >= part.high_watermark:
                    break
    return headers


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_roundtrip(broker_factory, tmp_path, codec):
    broker = broker_factory({"num.partitions": str(PARTITIONS)})
    topic = f"kcat-{codec}"
    t0 = int(time.time() * 1000)
    produce_all(broker.bootstrap, topic, codec, N, tmp_path)
    t1 = int(time.time() * 1000)

    batches = stored_batches(broker.bootstrap, topic, PARTITIONS)
    assert sum(h.records_count for h in batches) == N
    # librdkafka 2.0.2 falls back to no compression, or to no idempotence, without an error
    # when the broker's advertised versions miss the exact ones it looks for.
    stored = sorted({h.compression for h in batches})
    assert stored == [CODEC_IDS[codec]], f"asked for {codec}, batches stored with codecs {stored}"
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in batches), "not idempotent"

    verify_kcat(consume_all(broker.bootstrap, topic), N, codec, t0, t1)
