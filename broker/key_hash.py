"""How Kafka's coordinators map a key (a group id, a transactional id) to a partition of
their internal topic: abs(Java's String.hashCode) % partitions, computed exactly as Kafka
does, so a key keeps its partition across brokers and implementations."""
from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except that Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for_key(key: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % num_partitions
