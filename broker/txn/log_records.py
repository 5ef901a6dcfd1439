"""Records of the `__transaction_state` topic, in Kafka's formats, declared as data.

Each record is a versioned key and a versioned value (an int16 version, then the struct), as
Kafka's transaction-coordinator TransactionLogKey.json / TransactionLogValue.json declare them:

    key   v0: transactional_id                                    (not flexible)
    value v0: producer_id, producer_epoch, transaction_timeout_ms, transaction_status,
              transaction_partitions? [topic, [partition_id]], last_update_ms, start_ms
    value v1: the same, flexible (compact strings/arrays, tagged fields), with tagged fields
              0 previous_producer_id (-1), 1 next_producer_id (-1),
              2 client_transaction_version (0), 3 next_producer_epoch (-1)

A null value is a tombstone: the transactional id expired and was removed, so compaction
drops it. strom writes value v1 and reads v0 and v1. Written at v0, a value carries none of
the v1 tagged fields (Kafka's TransactionLog.valueToBytes sets them only for log version 1+);
they read back as their defaults.

As Kafka does, an Empty transaction is written with null partitions (and must have none),
and the partitions of an Empty transaction are ignored on read.

The partition of transactional id T is Utils.abs(T.hashCode) % partitions (Kafka's
TransactionStateManager.partitionFor), with the Java String.hashCode helpers the group
coordinator already uses for `__consumer_offsets`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clients.protocol.errors import CorruptMessageError
from clients.protocol.schema import NULL, F, Struct, VersionedCodecs
from clients.protocol.types import Reader

from ..key_hash import partition_for_key
from .metadata import TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"


_STATUSES = frozenset(int(s) for s in TxnState)

KEY_FIELDS = [F("transactional_id", "string")]

# Kafka's declaration order; tagged fields are written after the plain ones, by tag.
VALUE_FIELDS = [
    F("producer_id", "int64"),
    F("previous_producer_id", "int64", versions="1+", tag=0, default=-1),
    F("next_producer_id", "int64", versions="1+", tag=1, default=-1),
    F("producer_epoch", "int16"),
    F("next_producer_epoch", "int16", versions="1+", tag=3, default=-1),
    F("transaction_timeout_ms", "int32"),
    F("transaction_status", "int8"),
    F("transaction_partitions", [
        F("topic", "string"),
        F("partition_ids", "[]int32"),
    ], nullable="0+", default=NULL),
    F("transaction_last_update_timestamp_ms", "int64"),
    F("transaction_start_timestamp_ms", "int64"),
    F("client_transaction_version", "int16", versions="1+", tag=2, default=0),
]

KEY_VERSION = 0
VALUE_VERSION = 1       # what strom writes
VALUE_VERSIONS = (0, 1)  # what strom reads
_FLEXIBLE_FROM = 1

_CODECS = VersionedCodecs({"key": (KEY_FIELDS, None), "value": (VALUE_FIELDS, _FLEXIBLE_FROM)})
_codec = _CODECS.codec
_encode = _CODECS.encode


def _decode(kind: str, data: bytes | memoryview, versions: tuple[int, ...]) -> tuple[int, Struct]:
    """(version, struct) of a whole key or value; CorruptMessageError for anything else."""
    try:
        r = Reader(data)
        version = r.int16()
        if version not in versions:
            raise CorruptMessageError(
                f"{TRANSACTION_STATE_TOPIC}: unknown {kind} version {version}")
        s = _codec(kind, version).read(r)
        if r.remaining():
            raise CorruptMessageError(
                f"{TRANSACTION_STATE_TOPIC}: {r.remaining()} trailing bytes after a {kind} v{version}")
    except (ValueError, UnicodeDecodeError) as e:      # DecodeError is a ValueError
        raise CorruptMessageError(f"{TRANSACTION_STATE_TOPIC}: bad {kind}: {e}") from e
    return version, s


@dataclass(frozen=True)
class TxnLogKey:
    transactional_id: str


@dataclass(frozen=True)
class TxnPartitions:
    topic: str
    partition_ids: tuple[int, ...]


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[TxnPartitions, ...]
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    client_transaction_version: int = 0


def encode_key(key: TxnLogKey) -> bytes:
    return _encode("key", KEY_VERSION, {"transactional_id": key.transactional_id})


def encode_value(value: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in VALUE_VERSIONS:
        raise ValueError(f"{TRANSACTION_STATE_TOPIC}: cannot write value version {version}")
    partitions: list[dict[str, Any]] | None
    if value.transaction_status == TxnState.EMPTY:
        if value.transaction_partitions:
            raise ValueError(f"an Empty transaction has no partitions: {value}")
        partitions = None
    else:
        partitions = [{"topic": p.topic, "partition_ids": list(p.partition_ids)}
                      for p in value.transaction_partitions]
    return _encode("value", version, {
        "producer_id": value.producer_id,
        "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id,
        "producer_epoch": value.producer_epoch,
        "next_producer_epoch": value.next_producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": value.transaction_status,
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.transaction_last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.transaction_start_timestamp_ms,
        "client_transaction_version": value.client_transaction_version,
    })


def decode_key(data: bytes | memoryview) -> TxnLogKey:
    """Raises CorruptMessageError for a key version other than 0 or bytes that are no key."""
    _, s = _decode("key", data, (KEY_VERSION,))
    return TxnLogKey(s.transactional_id)


def decode_value(data: bytes | memoryview | None) -> TxnLogValue | None:
    """None for a tombstone; raises CorruptMessageError for an unknown version or garbage."""
    if data is None:
        return None
    version, s = _decode("value", data, VALUE_VERSIONS)
    status = s.transaction_status
    if status not in _STATUSES:
        raise CorruptMessageError(f"{TRANSACTION_STATE_TOPIC}: unknown transaction status {status}")
    parts: tuple[TxnPartitions, ...] = ()
    if status != TxnState.EMPTY and s.transaction_partitions is not None:
        parts = tuple(TxnPartitions(p.topic, tuple(p.partition_ids)) for p in s.transaction_partitions)
    return TxnLogValue(
        producer_id=s.producer_id,
        producer_epoch=s.producer_epoch,
        transaction_timeout_ms=s.transaction_timeout_ms,
        transaction_status=status,
        transaction_partitions=parts,
        transaction_last_update_timestamp_ms=s.transaction_last_update_timestamp_ms,
        transaction_start_timestamp_ms=s.transaction_start_timestamp_ms,
        previous_producer_id=s.previous_producer_id,
        next_producer_id=s.next_producer_id,
        next_producer_epoch=s.next_producer_epoch,
        client_transaction_version=s.client_transaction_version,
    )


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor: Utils.abs(id.hashCode) % partitions.

    Utils.abs is Math.abs except that Integer.MIN_VALUE maps to 0 (not `n & 0x7fffffff`,
    which is Utils.toPositive and differs for every other negative hash)."""
    return partition_for_key(transactional_id, partitions)
