"""Which partition a produced record goes to: Kafka's default partitioner, in pure Python.

- A record with an explicit partition goes there (the producer checks that, not this module).
- A keyed record goes to `toPositive(murmur2(key_bytes)) % number_of_partitions`, over ALL
  partitions of the topic, available or not: exactly what Kafka's Java client
  (`BuiltInPartitioner.partitionForKey`) and librdkafka's `murmur2_random` compute, so a key
  lands in the same partition whichever of these clients wrote it.
- A record without a key (or every record with `partitioner.ignore.keys`) is *sticky*
  (KIP-480): it goes to the topic's current sticky partition, one of the partitions that
  have a leader, chosen at random. The producer calls `on_new_batch` when a record for the
  sticky partition would open a new batch there; the partitioner then moves to another
  partition, so null-key records fill whole batches one partition at a time instead of
  spreading tiny batches over all partitions.

A custom partitioner is any callable with Kafka's `Partitioner.partition` information:
`partitioner(topic, key, key_bytes, value, value_bytes, cluster) -> int`, where key/value
are the objects given to `send` and key_bytes/value_bytes what the serializers made of
them, and `cluster` a `clients.aio.metadata.ClusterMetadata`. If it also has an
`on_new_batch(topic, cluster, prev_partition)` method, the producer calls it as it calls
the default partitioner's.

Concurrency: a `DefaultPartitioner` is used by one producer on its event loop; not
thread-safe. `murmur2` and `partition_for_key` are pure functions.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Protocol

__all__ = ["murmur2", "to_positive", "partition_for_key", "DefaultPartitioner",
           "PartitionerFn", "ClusterView"]

_M = 0x5BD1E995
_SEED = 0x9747B28C   # Kafka passes it as a Java int: the same 32 bits, read as negative
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """32-bit MurmurHash2 of `data` as Kafka's `Utils.murmur2` computes it, returned as a
    signed 32-bit int like the Java method (e.g. murmur2(b"21") == -973932308).

    Java's int arithmetic wraps at 32 bits and `>>>` is an unsigned shift; here every value
    is kept as an unsigned 32-bit number (`& _MASK`), which gives the same bits, and only
    the result is reinterpreted as signed."""
    data = bytes(data)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    # Little-endian 4-byte words, as Java assembles them from (data[i+0] & 0xff) | ...
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    # The last 1-3 bytes fall through from the highest to the lowest, like Java's switch.
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs(): abs(MIN_VALUE) overflows)."""
    return n & 0x7FFFFFFF


def partition_for_key(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record."""
    return to_positive(murmur2(key_bytes)) % num_partitions


class ClusterView(Protocol):
    """What the partitioner needs of the cluster metadata (ClusterMetadata has it)."""

    def partitions_for(self, topic: str) -> list[int]: ...

    def available_partitions_for(self, topic: str) -> list[int]: ...


PartitionerFn = Callable[[str, Any, "bytes | None", Any, "bytes | None", ClusterView], int]


class DefaultPartitioner:
    """murmur2 for keys, sticky for null keys (or for all records with `ignore_keys`).

    Called like a custom partitioner; see the module docstring."""

    def __init__(self, ignore_keys: bool = False, rng: random.Random | None = None):
        self.ignore_keys = ignore_keys
        self._rng = rng or random.Random()
        # The current sticky partition of each topic (the producer reads it directly).
        self.sticky: dict[str, int] = {}

    def __call__(self, topic: str, key: Any, key_bytes: bytes | None, value: Any,
                 value_bytes: bytes | None, cluster: ClusterView) -> int:
        if key_bytes is not None and not self.ignore_keys:
            n = len(cluster.partitions_for(topic))
            if n == 0:
                raise ValueError(f"topic {topic} has no partitions")
            return partition_for_key(key_bytes, n)
        return self.sticky_partition(topic, cluster)

    def uses_sticky(self, key_bytes: bytes | None) -> bool:
        """Whether a record with these key bytes is placed by the sticky rule."""
        return key_bytes is None or self.ignore_keys

    def sticky_partition(self, topic: str, cluster: ClusterView) -> int:
        p = self.sticky.get(topic)
        if p is None:
            p = self._choose(topic, cluster, None)
        return p

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        """A record for `prev_partition` would open a new batch: move on, unless another
        record already moved the topic to a different partition."""
        if self.sticky.get(topic, prev_partition) == prev_partition:
            self._choose(topic, cluster, prev_partition)

    def _choose(self, topic: str, cluster: ClusterView, avoid: int | None) -> int:
        candidates = cluster.available_partitions_for(topic) or cluster.partitions_for(topic)
        if not candidates:
            raise ValueError(f"topic {topic} has no partitions")
        if avoid is not None and len(candidates) > 1:
            candidates = [p for p in candidates if p != avoid]
        p = candidates[self._rng.randrange(len(candidates))]
        self.sticky[topic] = p
        return p
