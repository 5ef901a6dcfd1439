"""The exactly-once checker finds each kind of violation it names (tests/chaos/txn_checker.py)."""
from __future__ import annotations

from tests.chaos.txn_checker import check, written_by_attempt

GOOD = {0: ["0:0:a", "0:1:a", "0:2:b"], 1: ["1:0:a", "1:1:b"]}
ATTEMPTS = {"a": "committed", "b": "committed"}


def test_a_clean_run_passes():
    r = check(GOOD, 0, ATTEMPTS, written_by_attempt(GOOD))
    assert r.ok and r.visible == 5


def test_each_violation_is_reported():
    aborted = check({0: ["0:0:a", "0:1:x"]}, 2, {"a": "committed", "x": "aborted"})
    assert aborted.aborted_reads == ["0:1:x"] and not aborted.ok
    dup = check({0: ["0:0:a", "0:0:b", "0:1:b"]}, 2, ATTEMPTS)
    assert dup.duplicates == ["0:0"]
    missing = check({0: ["0:0:a"]}, 2, ATTEMPTS)
    assert missing.missing == ["0:1"]
    order = check({0: ["0:1:a", "0:0:b"]}, 2, ATTEMPTS)
    assert order.out_of_order == [0]
    everything = {0: ["0:0:a", "0:1:b"], 1: ["1:0:b", "1:1:c"]}
    torn = check({0: ["0:0:a", "0:1:b"], 1: ["1:1:c"]}, 0, {"a": "committed"}, written_by_attempt(everything))
    assert torn.torn == ["b"]
    lost = check({0: ["0:0:a"]}, 0, {"a": "committed", "c": "committed"},
                 written_by_attempt({0: ["0:0:a", "0:1:c"]}))
    assert lost.lost_writes == ["c"]
