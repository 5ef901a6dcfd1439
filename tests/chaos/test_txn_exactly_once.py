"""Exactly-once consume-transform-produce under kill -9 (the promise transactions exist for).

A confluent-kafka application (tests/chaos/ctp_app.py, its own process) reads `in` with
read_committed, writes one transformed record per input record to `out` and commits the
input offsets in the same transaction. Meanwhile faults are injected at random moments,
each followed by a restart: kill -9 of the application, of the broker coordinating its
transactional id, and of the leader of an `out` partition. Once the application has
consumed everything, the checker (txn_checker.py) reads `out` with read_committed and finds
no aborted read, lost committed write, torn transaction, duplicate or missing record, and
every partition in input order.

The application is restarted whenever it exits before finishing: after a kill, a fatal
client error, or a client call its watchdog gave up on (librdkafka's send_offsets_to_transaction
can block forever once its group coordinator was killed: call_watchdog.py). A run that does not
finish prints the fault timeline and the application's own lines: its stall reports (group
state, positions, committed offsets, high watermarks and last stable offsets of `in`, last
errors) and the calls it was stuck in.

Short form: 3 faults (one of each kind). `--long` (or STROM_LONG_TESTS=1): 50 faults.
STROM_CTP_DEBUG=cgrp,eos,fetch (librdkafka debug contexts) puts the clients' debug log in
the application's output.
"""
from __future__ import annotations

import random
import time

import pytest

from tests.chaos.ctp_run import PARTITIONS, TRANSACTIONAL_ID, App, check_output, create_topics, fill_input

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The long form paces the application so that its work lasts about as long as 50 faults.
# txn_timeout bounds each transactional call (a call that blocks past it ends the application
# for a restart, see call_watchdog.py): short in the short form, so that such a restart costs
# 20 s of its budget rather than 35.
SHORT = {"per_partition": 3000, "max_batch": 200, "pace": 0.0, "txn_timeout": 15}
LONG = {"per_partition": 10000, "max_batch": 100, "pace": 0.5, "txn_timeout": 30}


def test_consume_transform_produce_is_exactly_once_under_kill9(cluster, tmp_path, long_run):
    create_topics(cluster)
    shape = LONG if long_run else SHORT
    fill_input(cluster, shape["per_partition"])
    app = App(cluster, tmp_path / "attempts.jsonl", tmp_path / "app.out", shape)
    try:
        app.start()
        faults = 50 if long_run else 3
        kinds = ["app", "coordinator", "leader"]
        done_faults = []
        timeline = []         # when each fault struck (wall clock, as the brokers' logs)
        deadline = time.monotonic() + (1800 if long_run else 300)
        for n in range(faults):
            time.sleep(random.uniform(0.5, 2.5))
            app.ensure_running()
            if app.finished:
                break
            kind = kinds[n % 3] if n < 3 else random.choice(kinds)
            timeline.append(f"{time.strftime('%H:%M:%S')} {kind}")
            if kind == "app":
                app.kill9()
                app.start()
            else:
                victim = (cluster.transaction_coordinator(TRANSACTIONAL_ID) if kind == "coordinator"
                          else cluster.leader("out", random.randrange(PARTITIONS)))
                if victim is None or victim < 0:
                    timeline[-1] += ": no broker to kill"
                    continue
                timeline[-1] += f": broker {victim}"
                cluster.kill9(victim)
                # Its ZooKeeper registration outlives it until the session expires; a broker
                # restarted before that refuses to start (broker.id in use), as Kafka's does.
                cluster.wait_for_broker_gone(victim)
                cluster.restart(victim)
            done_faults.append(kind)
        app.run_to_the_end(deadline)
        assert app.finished, f"the application never finished (faults: {timeline}):\n{app.story()}"
    finally:
        app.kill9()       # a failed run must not leave it running against the next test's ports

    attempts = app.attempts()
    report = check_output(cluster, app)
    restarts = [line for line in app.lines() if "exiting for a restart" in line]
    print(f"\n{len(done_faults)} faults ({', '.join(timeline)}), {app.starts} application starts "
          f"({len(restarts)} after a client call hung or failed), "
          f"{sum(s == 'committed' for s in attempts.values())} commits, "
          f"{sum(s == 'aborted' for s in attempts.values())} aborts seen by the app: {report.summary()}")
    assert report.ok, report
