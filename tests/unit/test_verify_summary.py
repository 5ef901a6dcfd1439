"""strom-verify's counting and verdict without sockets: event streams of the faults a cluster
can commit (a truncated log, an unclean election overwriting acknowledged offsets, a retry
written twice, a reordered retry) go through the shared Checker, and the summary's rows, the
verdict, the JSON and the exit code say what happened."""
from __future__ import annotations

import json
import re
from collections import Counter

from broker.testing.verify.checker import Checker, make_value
from broker.testing.verify.summary import (COULD_NOT_RUN, OK, VIOLATION, RunFacts, as_json,
                                           exit_code, table)


def facts(idempotence: bool = True, **faults: int) -> RunFacts:
    return RunFacts(topic="t", partitions=1, acks="all" if idempotence else "1",
                    idempotence=idempotence, rate=100, duration=5, faults=Counter(faults))


def produced(n: int, partition: int = 0, producer: str = "v1") -> tuple[Checker, list]:
    """n records of one producer, acknowledged at offsets 0..n-1 of one partition."""
    c = Checker()
    log = []
    for seq in range(n):
        v = make_value(producer, seq)
        c.record_sent(b"k", v)
        c.record_acked(partition, seq, b"k", v)
        log.append((partition, seq, v))
    return c, log


def rows(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^  ([a-z][a-z ]+?)\s+(\d+)", text, re.M)}


def test_a_clean_run_passes_with_every_row_shown():
    c, log = produced(20)
    for p, o, v in log:
        c.record_read(p, o, b"k", v)
    r = c.report()
    out = table(r, facts(kill9=2, pause=1))
    assert rows(out) == {"acknowledged": 20, "lost": 0, "duplicated": 0, "reordered": 0,
                         "conflicting": 0, "failed sends": 0, "unacked but read": 0,
                         "read back": 20, "faults done": 3}
    assert "(kill9 2, pause 1)" in out
    assert "result: OK" in out
    assert exit_code(r, facts()) == OK


def test_a_truncated_log_is_a_loss():
    c, log = produced(20)
    for p, o, v in log[:15]:                  # the last 5 acknowledged records are gone
        c.record_read(p, o, b"k", v)
    r = c.report()
    out = table(r, facts())
    assert rows(out)["lost"] == 5 and rows(out)["conflicting"] == 0
    assert "result: FAILED: 5 lost" in out
    assert "v1-15 acked at 0/15, never read" in out          # an example of each violation
    assert exit_code(r, facts()) == VIOLATION


def test_an_unclean_election_is_loss_and_conflict():
    # offsets 10..14 acknowledged by a leader that died; the new leader, which never had
    # them, acknowledged the producer's next records at the same offsets
    c, _ = produced(15)
    for seq in range(15, 20):
        v = make_value("v1", seq)
        c.record_acked(0, seq - 5, b"k", v)
    for offset in range(10):
        c.record_read(0, offset, b"k", make_value("v1", offset))
    for offset in range(10, 15):
        c.record_read(0, offset, b"k", make_value("v1", offset + 5))
    r = c.report()
    assert (r.lost, r.conflicting_offsets, r.duplicated, r.out_of_order) == (5, 5, 0, 0)
    out = table(r, facts(idempotence=False, **{"leader-ahead": 1}))
    assert "result: FAILED: 5 lost, 5 conflicting" in out
    assert exit_code(r, facts(idempotence=False)) == VIOLATION   # whatever the producer


def test_duplicates_and_reordering_fail_an_idempotent_run_only():
    c, log = produced(4)
    for p, o, v in log:
        c.record_read(p, o, b"k", v)
    # a retry written again at offset 4 (duplicate) and seq 1 read after seq 3 (reordered)
    c.record_read(0, 4, b"k", make_value("v1", 1))
    r = c.report()
    assert (r.lost, r.duplicated, r.out_of_order, r.conflicting_offsets) == (0, 1, 1, 0)
    assert exit_code(r, facts(idempotence=True)) == VIOLATION
    assert "FAILED: 1 duplicated, 1 reordered" in table(r, facts(idempotence=True))
    # plain retries may do both (Kafka's at-least-once): counted, not held against the cluster
    assert exit_code(r, facts(idempotence=False)) == OK
    out = table(r, facts(idempotence=False))
    assert rows(out)["duplicated"] == 1 and rows(out)["reordered"] == 1 and "result: OK" in out


def test_failed_and_unacknowledged_records_are_not_faults():
    c, log = produced(3)
    c.record_failed(b"k", make_value("v1", 3), "REQUEST_TIMED_OUT")   # failed, but written
    c.record_sent(b"k", make_value("v1", 4))                           # never answered
    for p, o, v in log:
        c.record_read(p, o, b"k", v)
    c.record_read(0, 3, b"k", make_value("v1", 3))
    r = c.report()
    got = rows(table(r, facts()))
    assert (got["failed sends"], got["unacked but read"], got["read back"]) == (1, 1, 4)
    assert exit_code(r, facts()) == OK


def test_a_run_that_acknowledged_nothing_proves_nothing():
    c = Checker()
    c.record_failed(b"k", make_value("v1", 0), "NOT_ENOUGH_REPLICAS")
    r = c.report()
    assert exit_code(r, facts()) == COULD_NOT_RUN
    assert "NOTHING CHECKED" in table(r, facts())


def test_json_carries_the_same_counts_and_verdict():
    c, log = produced(10)
    for p, o, v in log[:9]:
        c.record_read(p, o, b"k", v)
    r = c.report()
    doc = json.loads(as_json(r, facts(kill9=1)))
    assert doc["counts"] == {"acknowledged": 10, "lost": 1, "duplicated": 0, "reordered": 0,
                             "conflicting": 0, "failed_sends": 0, "unacked_but_read": 0,
                             "read_back": 9}
    assert doc["violations"] == {"lost": 1}
    assert doc["faults_done"] == {"kill9": 1}
    assert doc["exit_code"] == VIOLATION and doc["result"].startswith("FAILED")
    assert doc["examples"]["lost"] == ["v1-9 acked at 0/9, never read"]


def test_an_ack_without_an_offset_is_lost_only_when_never_read():
    from broker.testing.verify.checker import Checker, make_value
    c = Checker()
    kept, gone = make_value("p0", 0), make_value("p0", 1)
    c.record_acked(0, None, None, kept)
    c.record_acked(0, None, None, gone)
    c.record_read(0, 7, None, kept)
    report = c.report()
    assert (report.acknowledged, report.lost, report.conflicting_offsets) == (2, 1, 0)
    assert report.unacked_but_present == 0
