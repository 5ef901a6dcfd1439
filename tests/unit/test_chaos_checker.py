"""The shared delivery checker (broker/testing/verify/checker.py) against synthetic event streams: a clean run is clean, and
each fault counter (lost, duplicated, out of order, conflicting offsets) detects exactly the
fault it is named after, while unacknowledged-but-present records stay informational."""
from __future__ import annotations

import threading

import pytest

from broker.testing.verify import Checker, CheckReport, make_value, parse_value


def clean_run(n: int = 10, partitions: int = 2, producer: str = "p0") -> tuple[Checker, list]:
    """n records of one producer, spread round-robin over `partitions`, all acked and read."""
    c = Checker()
    next_offset = [0] * partitions
    log = []
    for seq in range(n):
        v = make_value(producer, seq)
        p = seq % partitions
        c.record_sent(b"k", v)
        c.record_acked(p, next_offset[p], b"k", v)
        log.append((p, next_offset[p], v))
        next_offset[p] += 1
    return c, log


def read_all(c: Checker, log) -> None:
    for p, o, v in log:
        c.record_read(p, o, b"k", v)


def only(r: CheckReport, **expected: int) -> None:
    """The four fault counts are 0 except those given."""
    faults = {"lost": 0, "duplicated": 0, "out_of_order": 0, "conflicting_offsets": 0}
    faults.update(expected)
    assert {k: getattr(r, k) for k in faults} == faults, r.details()


def test_values_round_trip():
    assert make_value("p0", 17) == b"p0-17"
    assert parse_value(b"p0-17") == ("p0", 17)
    assert parse_value(b"chaos-a-3") == ("chaos-a", 3)
    for bad in (b"", None, b"p0", b"-3", b"p0-", b"p0-x"):
        assert parse_value(bad) is None


def test_clean_run_is_ok():
    c, log = clean_run()
    read_all(c, log)
    r = c.report()
    assert r.ok
    assert (r.sent, r.acknowledged, r.failed, r.read_back) == (10, 10, 0, 10)
    only(r)
    assert r.unacked_but_present == 0
    r.assert_ok(min_acked=10)
    assert str(r).endswith("| OK") and "\n" not in str(r)


def test_reading_twice_is_not_a_fault():
    # two consumers (or two passes) reading the same log agree: no duplicate, no conflict
    c, log = clean_run()
    read_all(c, log)
    read_all(c, log)
    r = c.report()
    assert r.ok and r.read_back == 10


def test_lost_when_an_acked_record_is_never_read():
    c, log = clean_run()
    read_all(c, log[:-2])          # the last two acked records are gone (truncated log)
    r = c.report()
    only(r, lost=2)
    assert not r.ok
    assert "never read" in r.examples["lost"][0]


def test_lost_when_the_acked_offset_holds_another_value():
    # a new leader truncated offset 4 of partition 0 and wrote someone else's record there:
    # the acked value is nowhere, and the acked position reads another value
    c, log = clean_run()
    truncated = [(p, o, v) for p, o, v in log if not (p == 0 and o == 4)]
    read_all(c, truncated)
    c.record_read(0, 4, b"k", b"q-0")
    r = c.report()
    only(r, lost=1)
    assert r.unacked_but_present == 1      # q-0 was never acked by this run


def test_lost_by_offset_when_the_value_moved():
    # the acked value survives, but not at the offset it was acknowledged at: the ack lied
    c = Checker()
    for seq in range(3):
        c.record_acked(0, seq, None, make_value("p0", seq))
    c.record_read(0, 0, None, b"p0-0")
    c.record_read(0, 1, None, b"p0-2")     # p0-1's offset now holds p0-2 ...
    c.record_read(0, 2, None, b"p0-1")     # ... and p0-1 moved to offset 2 (and vice versa)
    r = c.report()
    assert r.lost == 2
    assert r.duplicated == 0 and r.conflicting_offsets == 0
    assert r.out_of_order == 1             # p0-1 after p0-2
    assert "but read at 0/2" in " ".join(r.examples["lost"])


def test_duplicated_when_a_value_is_read_at_two_offsets():
    c, log = clean_run()
    read_all(c, log)
    p, o, v = log[-1]
    c.record_read(p, o + 1, b"k", v)       # a non-idempotent retry appended the same record again
    r = c.report()
    only(r, duplicated=1)
    assert r.read_back == 11


def test_duplicate_of_an_older_record_is_also_out_of_order():
    c, log = clean_run(n=6, partitions=1)
    read_all(c, log)
    c.record_read(0, 6, b"k", make_value("p0", 2))   # a retried old batch lands after newer ones
    only(c.report(), duplicated=1, out_of_order=1)


def test_out_of_order_within_a_partition():
    c = Checker()
    order = [0, 1, 3, 2, 4]                # seq 3 was written before seq 2
    for offset, seq in enumerate(order):
        v = make_value("p0", seq)
        c.record_acked(0, offset, None, v)
        c.record_read(0, offset, None, v)
    r = c.report()
    only(r, out_of_order=1)
    assert "seq 2 at offset 3 after seq 3 at offset 2" in r.examples["out_of_order"][0]


def test_order_is_per_partition_and_per_producer():
    c = Checker()
    # partition 0 gets odd seqs, partition 1 even: gaps and interleaving are fine
    # two producers interleave in one partition, each in its own order
    events = [(0, 0, "a", 1), (1, 0, "a", 0), (0, 1, "b", 9), (0, 2, "a", 3), (1, 1, "a", 2),
              (0, 3, "b", 10), (1, 2, "b", 1)]
    for p, o, prod, seq in events:
        v = make_value(prod, seq)
        c.record_acked(p, o, None, v)
        c.record_read(p, o, None, v)
    assert c.report().ok


def test_reads_arriving_in_any_order_are_checked_in_offset_order():
    c, log = clean_run(n=8, partitions=1)
    read_all(c, reversed(log))
    assert c.report().ok


def test_conflicting_offsets_across_reads():
    # two consumers read offset 3 of partition 1 and got different records (divergent replicas)
    c, log = clean_run(n=10, partitions=2)
    read_all(c, log)
    c.record_read(1, 3, b"k", b"other-0")
    r = c.report()
    only(r, conflicting_offsets=1)
    assert r.read_back == 10
    assert "1/3 read as" in r.examples["conflicting_offsets"][0]


def test_conflicting_offsets_across_acks():
    # two leaders both acknowledged offset 5 (split brain): a conflict, and the loser is lost
    c, log = clean_run(n=10, partitions=1)
    c.record_acked(0, 5, b"k", b"p1-0")
    read_all(c, log)
    r = c.report()
    only(r, conflicting_offsets=1, lost=1)


def test_unacked_but_present_is_informational():
    c, log = clean_run()
    read_all(c, log)
    c.record_sent(b"k", b"p0-10")
    c.record_failed(b"k", b"p0-10", "_MSG_TIMED_OUT")   # timed out, yet it was written
    c.record_read(0, 5, b"k", b"p0-10")
    c.record_sent(b"k", b"p0-11")                        # in flight when the producer stopped
    c.record_read(1, 5, b"k", b"p0-11")
    r = c.report()
    assert r.ok
    assert r.unacked_but_present == 2 and r.failed == 1 and r.sent == 12
    text = " ".join(r.examples["unacked_but_present"])
    assert "failed: _MSG_TIMED_OUT" in text and "no ack or failure seen" in text


def test_failed_then_never_read_is_not_lost():
    c, log = clean_run()
    read_all(c, log)
    c.record_failed(None, b"p0-99", "_MSG_TIMED_OUT")
    r = c.report()
    assert r.ok and r.failed == 1


def test_assert_ok_raises_with_examples():
    c, log = clean_run()
    read_all(c, log[1:])
    with pytest.raises(AssertionError) as e:
        c.assert_ok()
    text = str(e.value)
    assert "lost 1" in text and "FAULTS" in text and "p0-0 acked at 0/0, never read" in text


def test_assert_ok_wants_something_acknowledged():
    c = Checker()
    assert c.report().ok
    with pytest.raises(AssertionError, match="only 0 records acknowledged"):
        c.assert_ok()
    c.assert_ok(min_acked=0)


def test_one_line_table():
    c, log = clean_run(n=4)
    read_all(c, log[:3])
    line = str(c.report())
    assert line == ("sent 4 | acknowledged 4 | failed 0 | read back 3 | lost 1 | duplicated 0 | "
                    "out of order 0 | conflicting offsets 0 | unacked but present 0 | FAULTS")


def test_examples_are_capped():
    c = Checker()
    for seq in range(50):
        c.record_acked(0, seq, None, make_value("p0", seq))
    r = c.report()
    assert r.lost == 50 and len(r.examples["lost"]) == 10


def test_values_without_a_sequence_are_checked_for_everything_but_order():
    c = Checker()
    for o, v in enumerate([b"zeta", b"alpha", b"mid"]):
        c.record_acked(0, o, None, v)
        c.record_read(0, o, None, v)
    assert c.report().ok
    c.record_read(0, 3, None, b"alpha")
    only(c.report(), duplicated=1)


def test_thread_safe_recording():
    c = Checker()

    def produce(i: int) -> None:
        for seq in range(2000):
            v = make_value(f"t{i}", seq)
            c.record_sent(None, v)
            c.record_acked(i, seq, None, v)
            c.record_read(i, seq, None, v)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.acked_count == 8000
    r = c.report()
    assert r.ok and r.read_back == 8000
