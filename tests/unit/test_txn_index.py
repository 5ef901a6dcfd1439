"""The aborted-transaction index (broker/log/txn_index.py) on real files under tmp_path."""
from __future__ import annotations

import logging
import os

import pytest

from broker.log.txn_index import ENTRY_SIZE, TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex


def txn(first: int, last: int, lso: int, pid: int = 7) -> AbortedTxn:
    return AbortedTxn(producer_id=pid, first_offset=first, last_offset=last, last_stable_offset=lso)


def raw(version: int, pid: int, first: int, last: int, lso: int) -> bytes:
    """One entry built by hand, independently of the module's struct."""
    return version.to_bytes(2, "big", signed=True) + b"".join(
        v.to_bytes(8, "big", signed=True) for v in (pid, first, last, lso))


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / f"{100:020d}{TXN_INDEX_SUFFIX}")


def test_entry_layout_on_disk_is_kafkas_34_bytes_big_endian(path):
    idx = TransactionIndex(path, 100)
    idx.append(AbortedTxn(0x0102030405060708, 0x1112131415161718, 0x2122232425262728, 0x3132333435363738))
    idx.close()
    with open(path, "rb") as f:
        data = f.read()
    assert ENTRY_SIZE == 34
    assert data == bytes.fromhex("0000" "0102030405060708" "1112131415161718"
                                 "2122232425262728" "3132333435363738")


def test_append_and_reload_round_trip(path):
    written = [txn(100, 105, 100, pid=1), txn(103, 110, 106, pid=-1), txn(111, 110 + 2**40, 2**40, pid=2**62)]
    idx = TransactionIndex(path, 100)
    for t in written:
        idx.append(t)
    assert idx.entries == written
    idx.entries.clear()                            # a copy: the index is untouched
    assert idx.entries == written
    idx.close()
    assert os.path.getsize(path) == 3 * ENTRY_SIZE

    again = TransactionIndex(path, 100)
    assert again.entries == written
    assert again.path == path and again.start_offset == 100
    again.append(txn(2**41, 2**41 + 5, 2**41))     # appends after the loaded entries
    again.close()
    assert TransactionIndex(path, 100).entries == written + [txn(2**41, 2**41 + 5, 2**41)]


def test_no_file_until_the_first_append(path):
    idx = TransactionIndex(path, 100)
    assert idx.entries == []
    assert idx.collect(0, 1000) == ([], False)
    idx.truncate_to(0)
    idx.flush()
    idx.close()
    assert not os.path.exists(path)

    idx.append(txn(100, 101, 100))                 # after close(): opens (creates) the file again
    assert os.path.getsize(path) == ENTRY_SIZE
    idx.flush()
    idx.close()
    idx.close()                                    # idempotent


def test_out_of_order_append_raises_and_writes_nothing(path):
    idx = TransactionIndex(path, 0)
    idx.append(txn(0, 10, 0))
    idx.append(txn(5, 10, 0, pid=8))               # an equal last offset is in order
    with pytest.raises(ValueError, match="9"):
        idx.append(txn(1, 9, 0))
    assert [t.last_offset for t in idx.entries] == [10, 10]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    idx.close()


@pytest.fixture
def three(path):
    """Three aborted transactions: [10, 20] (LSO 10), [15, 30] (LSO 21), [40, 50] (LSO 51)."""
    idx = TransactionIndex(path, 0)
    for t in (txn(10, 20, 10), txn(15, 30, 21), txn(40, 50, 51)):
        idx.append(t)
    yield idx
    idx.close()


def test_collect_excludes_entries_ending_before_the_fetch_offset(three):
    assert three.collect(21, 100) == ([txn(15, 30, 21), txn(40, 50, 51)], False)
    assert three.collect(20, 100) == ([txn(10, 20, 10), txn(15, 30, 21), txn(40, 50, 51)], False)
    assert three.collect(51, 100) == ([], False)


def test_collect_excludes_entries_starting_at_or_after_the_upper_bound(three):
    assert three.collect(0, 15) == ([txn(10, 20, 10)], True)                     # [15, 30] starts at 15
    assert three.collect(0, 16) == ([txn(10, 20, 10), txn(15, 30, 21)], True)
    assert three.collect(0, 10) == ([], True)                                    # LSO 10 >= 10
    assert three.collect(22, 40) == ([txn(15, 30, 21)], True)                     # [40, 50] starts at 40


def test_collect_completeness_flag(three):
    # No LSO reaches 52: incomplete, every matching entry returned.
    assert three.collect(0, 52) == ([txn(10, 20, 10), txn(15, 30, 21), txn(40, 50, 51)], False)
    # LSO 51 >= 51: complete, and the entry that completed it is included.
    assert three.collect(0, 51) == ([txn(10, 20, 10), txn(15, 30, 21), txn(40, 50, 51)], True)
    assert three.collect(25, 45) == ([txn(15, 30, 21), txn(40, 50, 51)], True)
    # The completing entry ([15, 30], LSO 21) ends before the fetch offset: excluded, still complete.
    assert three.collect(31, 21) == ([], True)


def test_collect_stops_at_the_entry_that_completes_it(path):
    # Synthetic (a real log cannot have a later transaction start below an earlier LSO, which
    # is why Kafka may stop): the second entry would match but is not reached.
    idx = TransactionIndex(path, 0)
    idx.append(txn(10, 20, 25))
    idx.append(txn(12, 30, 12))
    assert idx.collect(0, 25) == ([txn(10, 20, 25)], True)
    assert idx.collect(0, 26) == ([txn(10, 20, 25), txn(12, 30, 12)], False)
    idx.close()


def test_truncate_to_drops_entries_ending_at_or_after_the_offset(path):
    idx = TransactionIndex(path, 0)
    for t in (txn(0, 10, 0), txn(5, 20, 11), txn(21, 30, 21), txn(31, 40, 31)):
        idx.append(t)
    idx.truncate_to(41)                            # nothing at or after 41
    assert len(idx.entries) == 4
    idx.truncate_to(30)
    assert idx.entries == [txn(0, 10, 0), txn(5, 20, 11)]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    idx.append(txn(25, 29, 21))                    # appends go after the truncated end
    idx.close()
    assert TransactionIndex(path, 0).entries == [txn(0, 10, 0), txn(5, 20, 11), txn(25, 29, 21)]

    idx.truncate_to(10)                            # after close(): the file is truncated too
    assert idx.entries == []
    assert os.path.getsize(path) == 0
    assert TransactionIndex(path, 0).entries == []


@pytest.mark.parametrize("method", ["reset", "delete"])
def test_reset_and_delete_drop_the_entries_and_the_file(path, method):
    idx = TransactionIndex(path, 0)
    idx.append(txn(0, 10, 0))
    getattr(idx, method)()
    assert idx.entries == []
    assert not os.path.exists(path)
    getattr(idx, method)()                         # no file: fine
    idx.append(txn(20, 30, 20))                    # recovery rebuilds into a new file
    assert TransactionIndex(path, 0).entries == [txn(20, 30, 20)]
    idx.close()
    getattr(idx, method)()                         # after close()
    assert not os.path.exists(path)


def test_rename_moves_the_file_and_keeps_appending_to_it(path):
    idx = TransactionIndex(path, 100)
    idx.append(txn(100, 110, 100))
    swap = path + ".swap"
    idx.rename(swap)
    assert idx.path == swap
    assert not os.path.exists(path)
    idx.append(txn(111, 120, 111))                 # through the descriptor opened before the move
    idx.flush()
    assert not os.path.exists(path)
    assert TransactionIndex(swap, 100).entries == [txn(100, 110, 100), txn(111, 120, 111)]

    idx.close()
    deleted = path + ".deleted"
    idx.rename(deleted)                            # after close()
    assert os.path.exists(deleted) and not os.path.exists(swap)
    idx.delete()
    assert not os.path.exists(deleted)


def test_rename_without_a_file_updates_the_path_only(path):
    idx = TransactionIndex(path, 0)
    cleaned = path + ".cleaned"
    idx.rename(cleaned)
    assert idx.path == cleaned
    assert not os.path.exists(path) and not os.path.exists(cleaned)
    idx.append(txn(0, 1, 0))                       # created under the new name
    assert os.path.exists(cleaned) and not os.path.exists(path)
    idx.close()


def test_torn_trailing_entry_is_truncated_on_load(path, caplog):
    whole = raw(0, 5, 100, 120, 121)
    with open(path, "wb") as f:
        f.write(whole + raw(0, 6, 130, 140, 141)[:10])
    with caplog.at_level(logging.WARNING, logger="broker.log.txn_index"):
        idx = TransactionIndex(path, 100)
    assert idx.entries == [AbortedTxn(5, 100, 120, 121)]
    assert os.path.getsize(path) == ENTRY_SIZE
    assert any(path in r.getMessage() and "10 bytes" in r.getMessage() for r in caplog.records)
    idx.append(txn(130, 140, 141, pid=6))           # lands right after the whole entry
    idx.close()
    with open(path, "rb") as f:
        assert f.read() == whole + raw(0, 6, 130, 140, 141)


def test_unknown_version_is_a_corrupt_index(path):
    with open(path, "wb") as f:
        f.write(raw(0, 5, 100, 120, 121) + raw(1, 6, 130, 140, 141))
    with pytest.raises(ValueError, match=r"\.txnindex.*version 1"):
        TransactionIndex(path, 100)
    assert os.path.getsize(path) == 2 * ENTRY_SIZE   # left as it was
