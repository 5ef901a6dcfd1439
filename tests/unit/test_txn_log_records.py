"""Records of `__transaction_state`: golden bytes written by hand from Kafka's formats, round
trips of what strom writes, and the partition of a transactional id.

The formats are Kafka's transaction-coordinator/src/main/resources/common/message/
TransactionLogKey.json and TransactionLogValue.json; every key and value starts with an
int16 version:

    TransactionLogKey   v0: transactional_id                        (not flexible)
    TransactionLogValue v0: producer_id int64, producer_epoch int16,
                            transaction_timeout_ms int32, transaction_status int8,
                            transaction_partitions? [topic string, partition_ids []int32],
                            transaction_last_update_timestamp_ms int64,
                            transaction_start_timestamp_ms int64
                        v1: v0, flexible (compact strings and arrays, a tagged-field section
                            after every struct), tagged fields written in tag order:
                            0 previous_producer_id int64 (default -1)
                            1 next_producer_id     int64 (default -1)
                            2 client_transaction_version int16 (default 0)
                            3 next_producer_epoch  int16 (default -1)

The expected partitions come from Java itself (String.hashCode, then Kafka's Utils.abs:
Math.abs with Integer.MIN_VALUE -> 0).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from broker.txn import log_records as T
from broker.txn.log_records import TxnLogKey, TxnLogValue, TxnPartitions
from broker.txn.metadata import TxnState as TxnStatus
from clients.protocol.errors import CorruptMessageError

from tests.support.hex_layout import TS, TS2, cs, h, s16  # noqa: F401


PARTS = (TxnPartitions("orders", (0, 2)), TxnPartitions("pay", (1,)))


def value(**kw: object) -> TxnLogValue:
    base: dict = dict(producer_id=1000, producer_epoch=5, transaction_timeout_ms=60000,
                      transaction_status=TxnStatus.ONGOING, transaction_partitions=PARTS,
                      transaction_last_update_timestamp_ms=1700000600000,
                      transaction_start_timestamp_ms=1700000000000)
    base.update(kw)
    return TxnLogValue(**base)


# ---------------------------------------------------------------- key

def test_key_golden_bytes() -> None:
    key = h("0000", "0005 74786e2d31")                     # version 0, "txn-1"
    assert key == h("0000", s16("txn-1"))
    assert T.encode_key(TxnLogKey("txn-1")) == key
    assert T.decode_key(key) == TxnLogKey("txn-1")
    assert T.decode_key(memoryview(key)) == TxnLogKey("txn-1")


def test_key_round_trip_non_ascii() -> None:
    for tid in ("", "été", "\U0001F600-txn", "x" * 300):
        data = T.encode_key(TxnLogKey(tid))
        assert data[:2] == b"\x00\x00"
        assert int.from_bytes(data[2:4], "big") == len(tid.encode())
        assert T.decode_key(data) == TxnLogKey(tid)


@pytest.mark.parametrize("data", [
    h("0001", s16("txn-1")),           # key version 1: not a transaction log key
    h("ffff", s16("txn-1")),
    h("0000 0005 74786e"),             # truncated string
    h("0000 ffff"),                    # null transactional id
    h("00"),                           # not even a version
    h("0000", s16("txn-1"), "00"),     # trailing garbage
])
def test_key_decode_rejects_unknown_versions_and_garbage(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        T.decode_key(data)


# ---------------------------------------------------------------- value v0

VALUE_V0 = h(
    "0000",                                    # version 0
    "00000000000003e8",                        # producer_id 1000
    "0005",                                    # producer_epoch 5
    "0000ea60",                                # transaction_timeout_ms 60000
    "01",                                      # status Ongoing
    "00000002",                                # 2 topics
    s16("orders"), "00000002 00000000 00000002",
    s16("pay"), "00000001 00000001",
    TS2,                                       # last update
    TS,                                        # start
)


def test_value_v0_golden_bytes() -> None:
    assert T.encode_value(value(), version=0) == VALUE_V0
    assert T.decode_value(VALUE_V0) == value()


def test_value_v0_carries_no_tagged_fields() -> None:
    """At v0 the v1 tagged fields are not written (Kafka sets them only for log version 1+);
    they read back as their defaults."""
    v = value(previous_producer_id=7, next_producer_id=8, next_producer_epoch=1,
              client_transaction_version=2)
    assert T.encode_value(v, version=0) == VALUE_V0
    back = T.decode_value(VALUE_V0)
    assert back is not None
    assert (back.previous_producer_id, back.next_producer_id, back.next_producer_epoch,
            back.client_transaction_version) == (-1, -1, -1, 0)


def test_value_v0_empty_writes_null_partitions() -> None:
    v = value(transaction_status=TxnStatus.EMPTY, transaction_partitions=())
    data = h("0000 00000000000003e8 0005 0000ea60", "00", "ffffffff", TS2, TS)
    assert T.encode_value(v, version=0) == data
    assert T.decode_value(data) == v


# ---------------------------------------------------------------- value v1

VALUE_V1 = h(
    "0001",                                    # version 1
    "00000000000003e8",                        # producer_id 1000
    "0005",                                    # producer_epoch 5
    "0000ea60",                                # transaction_timeout_ms 60000
    "02",                                      # status PrepareCommit
    "03",                                      # compact array: 2 topics
    cs("orders"), "03 00000000 00000002", "00",    # partition ids, no tagged fields
    cs("pay"), "02 00000001", "00",
    TS2,                                       # last update
    TS,                                        # start
    "04",                                      # 4 tagged fields, in tag order
    "00 08 00000000000003e7",                  # 0 previous_producer_id 999
    "01 08 00000000000003e9",                  # 1 next_producer_id 1001
    "02 02 0002",                              # 2 client_transaction_version 2
    "03 02 0000",                              # 3 next_producer_epoch 0
)


def test_value_v1_golden_bytes_with_tagged_fields() -> None:
    v = value(transaction_status=TxnStatus.PREPARE_COMMIT, previous_producer_id=999,
              next_producer_id=1001, next_producer_epoch=0, client_transaction_version=2)
    assert T.VALUE_VERSION == 1
    assert T.encode_value(v) == VALUE_V1
    assert T.decode_value(VALUE_V1) == v
    assert T.decode_value(memoryview(VALUE_V1)) == v


def test_value_v1_default_tagged_fields_are_not_written() -> None:
    v = value(transaction_status=TxnStatus.EMPTY, transaction_partitions=())
    data = h("0001 00000000000003e8 0005 0000ea60", "00", "00", TS2, TS, "00")
    assert T.encode_value(v) == data
    assert T.decode_value(data) == v


def test_value_v1_some_tagged_fields() -> None:
    v = value(transaction_status=TxnStatus.COMPLETE_COMMIT, transaction_partitions=(),
              client_transaction_version=2)
    data = h("0001 00000000000003e8 0005 0000ea60", "04", "01", TS2, TS, "01", "02 02 0002")
    assert T.encode_value(v) == data
    assert T.decode_value(data) == v


def test_value_v1_unknown_tags_are_skipped() -> None:
    """A tag this version does not know (a newer Kafka's) is skipped, as Kafka does."""
    data = h("0001 00000000000003e8 0005 0000ea60", "04", "01", TS2, TS,
             "02", "02 02 0002", "09 03 aabbcc")
    back = T.decode_value(data)
    assert back == value(transaction_status=TxnStatus.COMPLETE_COMMIT, transaction_partitions=(),
                         client_transaction_version=2)


# ---------------------------------------------------------------- partitions, null

def test_empty_transaction_with_partitions_is_refused() -> None:
    with pytest.raises(ValueError):
        T.encode_value(value(transaction_status=TxnStatus.EMPTY))


def test_null_partitions_read_as_none_and_empty_state_ignores_partitions() -> None:
    # Ongoing with null partitions (v0 int32 -1): read as no partitions.
    ongoing_null = h("0000 00000000000003e8 0005 0000ea60", "01", "ffffffff", TS2, TS)
    back = T.decode_value(ongoing_null)
    assert back is not None and back.transaction_partitions == ()
    # Empty with partitions written by someone else: Kafka ignores them on read.
    empty_with = h("0000 00000000000003e8 0005 0000ea60", "00",
                   "00000001", s16("pay"), "00000001 00000001", TS2, TS)
    back = T.decode_value(empty_with)
    assert back is not None
    assert back.transaction_status == TxnStatus.EMPTY and back.transaction_partitions == ()


def test_complete_state_writes_an_empty_array_not_null() -> None:
    v = value(transaction_status=TxnStatus.COMPLETE_ABORT, transaction_partitions=())
    assert T.encode_value(v, version=0)[17:21] == h("00000000")
    assert T.encode_value(v)[17:18] == h("01")


# ---------------------------------------------------------------- round trips, tombstone

@pytest.mark.parametrize("version", [0, 1])
def test_round_trips_every_status(version: int) -> None:
    for status in range(8):
        parts = () if status == TxnStatus.EMPTY else (
            TxnPartitions("t\u00e9", tuple(range(40))), TxnPartitions("u", ()))
        v = value(transaction_status=status, transaction_partitions=parts,
                  producer_id=2**63 - 1, producer_epoch=32767, transaction_timeout_ms=2**31 - 1,
                  transaction_last_update_timestamp_ms=-1, transaction_start_timestamp_ms=-1)
        if version == 1:
            v = replace(v, previous_producer_id=3, next_producer_id=2**62,
                        next_producer_epoch=32767, client_transaction_version=1)
        assert T.decode_value(T.encode_value(v, version)) == v


def test_tombstone() -> None:
    assert T.decode_value(None) is None


# ---------------------------------------------------------------- bad values

@pytest.mark.parametrize("data", [
    h("0002", VALUE_V1[2:].hex()),             # value version 2
    h("ffff", VALUE_V0[2:].hex()),             # value version -1
    VALUE_V0[:-1],                             # truncated
    VALUE_V1[:20],
    VALUE_V1 + b"\x00",                        # trailing garbage
    h("0001 00000000000003e8 0005 0000ea60", "08", "00", TS2, TS, "00"),   # status 8
    h("0001 00000000000003e8 0005 0000ea60", "ff", "00", TS2, TS, "00"),   # status -1
    b"",
])
def test_value_decode_rejects_unknown_versions_and_garbage(data: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        T.decode_value(data)


def test_encode_refuses_unknown_version() -> None:
    with pytest.raises(ValueError):
        T.encode_value(value(), version=2)


# ---------------------------------------------------------------- partition_for

@pytest.mark.parametrize("tid, abs_hash, p50", [
    # (transactional id, Utils.abs(String.hashCode) as Java prints it, partition of 50)
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("txn-1", 110810510, 10),
    ("transactional", 448241545, 45),
    ("\u00e9t\u00e9", 227742, 42),                # non-ASCII: UTF-16 code units
    ("\U0001F600", 1772899, 49),                   # a surrogate pair: two code units
    ("polygenelubricants", 0, 0),                  # hashCode Integer.MIN_VALUE -> 0
    ("my-transactional-id", 959806496, 46),        # hashCode -959806496
    ("producer-42", 1504649575, 25),               # hashCode -1504649575
    ("zzzzzzzz", 1910022912, 12),                  # hashCode -1910022912
])
def test_partition_for_matches_kafka(tid: str, abs_hash: int, p50: int) -> None:
    # With Integer.MAX_VALUE partitions the modulo keeps Utils.abs(hashCode) itself.
    assert T.partition_for(tid, 2**31 - 1) == abs_hash
    assert T.partition_for(tid, 50) == p50
    assert T.partition_for(tid, 1) == 0


def test_partition_for_is_abs_not_mask() -> None:
    """Utils.abs(-959806496) is 959806496; masking with 0x7fffffff (Utils.toPositive) would
    give 1187677152 and so partition 2 of 50 instead of 46."""
    assert T.partition_for("my-transactional-id", 50) == 46
    assert (-959806496 & 0x7FFFFFFF) % 50 == 2
