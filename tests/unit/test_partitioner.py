"""The producer's partitioner: murmur2 bit-exact with Kafka's Java client, sticky
partitioning for null keys (KIP-480), partitioner.ignore.keys, custom partitioners."""
from __future__ import annotations

import asyncio
import json
import random

import pytest

from clients.aio.metadata import BrokerInfo, ClusterMetadata, PartitionInfo, TopicInfo
from clients.aio.producer import AsyncProducer, ProducerClosedError
from clients.partitioner import DefaultPartitioner, murmur2, partition_for_key, to_positive
from clients.types import TopicPartition

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils/), then
# Java Utils.murmur2 values that librdkafka's rdmurmur2.c unit test checks against.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
    b"kafka": 0xD067CF64 - 2**32,
    b"giberish123456789": 0x8F552B0C - 2**32,
    b"234": 0xE7C009CA - 2**32,
    b"34": 0x873930DA - 2**32,
    b"4": 0x5A4B5CA1,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x78424F1C,
    b"": 0x106E08D9,
}


@pytest.mark.parametrize("data,expected", sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(data, expected):
    assert murmur2(data) == expected


def test_murmur2_vectors_cover_every_tail_length_and_any_buffer_type():
    # 0..3 trailing bytes each take a different branch of the tail handling.
    assert {len(d) % 4 for d in JAVA_MURMUR2} == {0, 1, 2, 3}
    assert any(v < 0 for v in JAVA_MURMUR2.values()) and any(v > 0 for v in JAVA_MURMUR2.values())
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_and_partition_for_key():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-2**31) == 0
    assert to_positive(5) == 5
    # toPositive(-973932308) % 16 computed the Java way: (h & 0x7fffffff) % n
    assert partition_for_key(b"21", 16) == (-973932308 & 0x7FFFFFFF) % 16 == 12
    assert partition_for_key(b"abc", 7) == 479470107 % 7


def cluster(partitions: int = 6, leaderless: tuple[int, ...] = ()) -> ClusterMetadata:
    parts = {p: PartitionInfo("t", p, -1 if p in leaderless else 0, 0, (0,), (0,))
             for p in range(partitions)}
    return ClusterMetadata({0: BrokerInfo(0, "127.0.0.1", 1)}, {"t": TopicInfo("t", parts)})


def test_keyed_records_use_murmur2_over_all_partitions_even_leaderless_ones():
    c = cluster(16, leaderless=(12,))
    part = DefaultPartitioner()
    assert part("t", "21", b"21", None, None, c) == 12       # leaderless, still chosen


def test_sticky_partition_for_null_keys_until_new_batch():
    c = cluster(6, leaderless=(0, 1))
    part = DefaultPartitioner(rng=random.Random(1))
    first = part("t", None, None, b"v", b"v", c)
    assert first in (2, 3, 4, 5)                             # only partitions with a leader
    assert all(part("t", None, None, b"v", b"v", c) == first for _ in range(100))
    seen = [first]
    for _ in range(50):
        part.on_new_batch("t", c, seen[-1])
        nxt = part("t", None, None, b"v", b"v", c)
        assert nxt != seen[-1] and nxt in (2, 3, 4, 5)       # moves, to an available one
        seen.append(nxt)
    assert set(seen) == {2, 3, 4, 5}
    # A stale notification (the topic already moved on) does not move it again.
    current = seen[-1]
    part.on_new_batch("t", c, seen[-2])
    assert part("t", None, None, b"v", b"v", c) == current


def test_ignore_keys_makes_keyed_records_sticky():
    c = cluster(8)
    part = DefaultPartitioner(ignore_keys=True, rng=random.Random(3))
    got = {part("t", k, k, None, None, c) for k in (b"a", b"b", b"c", b"21")}
    assert len(got) == 1
    normal = DefaultPartitioner()
    assert len({normal("t", k, k, None, None, c) for k in (b"a", b"b", b"c", b"21", b"x")}) > 1


def fake_producer(**config) -> AsyncProducer:
    """An AsyncProducer that believes it is connected: metadata is the fake cluster and no
    sender runs, so records stay in the accumulator."""
    p = AsyncProducer(bootstrap_servers="127.0.0.1:1", **config)
    p._client.metadata.cluster = cluster(6)
    p._started = True
    return p


def test_custom_partitioner_gets_kafkas_arguments():
    calls = []

    def my_partitioner(topic, key, key_bytes, value, value_bytes, cluster_md):
        calls.append((topic, key, key_bytes, value, value_bytes, cluster_md))
        return 4

    async def main():
        p = fake_producer(partitioner=my_partitioner,
                          key_serializer=lambda topic, k: k.upper().encode(),
                          value_serializer=lambda topic, v: json.dumps(v).encode())
        fut = await p.send("t", {"n": 1}, key="user-7")
        assert TopicPartition("t", 4) in p._acc.batches
        # An explicit partition bypasses the partitioner.
        await p.send("t", {"n": 2}, key="user-8", partition=1)
        assert len(calls) == 1
        await p.close(0)
        with pytest.raises(ProducerClosedError):
            await fut
        return p

    p = asyncio.run(main())
    topic, key, key_bytes, value, value_bytes, md = calls[0]
    assert (topic, key, key_bytes, value, value_bytes) == (
        "t", "user-7", b"USER-7", {"n": 1}, b'{"n": 1}')
    assert md is p._client.cluster and md.partitions_for("t") == list(range(6))


def test_producer_sticks_null_key_records_to_one_partition_per_batch():
    async def main():
        # ~95-byte records, batches of 1000 bytes: about 10 records a batch.
        p = fake_producer(batch_size=1000, linger_ms=1000)
        for i in range(300):
            await p.send("t", b"x" * 70)
        batches = [(b.tp.partition, b.record_count, b.size)
                   for dq in p._acc.batches.values() for b in dq]
        await p.close(0)
        return batches

    batches = asyncio.run(main())
    assert sum(n for _, n, _ in batches) == 300
    # Every batch but the newest of each partition was filled before the partitioner
    # moved on: no half-empty batches spread over all partitions.
    not_full = [size for _, _, size in batches if size + 95 <= 1000]
    assert len(not_full) <= 6, batches
    assert len(batches) >= 28 and len({p for p, _, _ in batches}) > 1
