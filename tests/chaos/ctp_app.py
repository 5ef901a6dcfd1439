"""A consume-transform-produce application with confluent-kafka transactions, run as its own
process by test_txn_exactly_once.py (which kills it with SIGKILL at random moments).

Reads `in` (read_committed, group `--group`), writes for each input record one output record to
the same partition of `out` whose value names the input record and this attempt:
`<partition>:<offset>:<attempt>`, commits the input offsets in the same transaction. After
each commit or abort returns it appends `{"attempt": ..., "status": ...}` to the attempts
log (a kill between the return and the line leaves the outcome unknown, which the checker
allows). Exits 0 once the group's position reaches `--end` on every partition.

A run that stops making progress says why: every STALL_REPORT_S seconds without a consumed
record it prints one `ctp_app: stalled` line (the group's state, and per input partition its
leader, fetch state, positions, committed offset, high watermark and last stable offset as
librdkafka sees them and as the brokers answer them now, and the clients' last errors).

A client call that blocks is reported every 10 s, and one that outlives its own timeout
ends the process for a restart (call_watchdog.py: librdkafka's send_offsets_to_transaction
can block forever once its group coordinator's broker was killed)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from tests.chaos.call_watchdog import CallWatchdog

STALL_REPORT_S = 10.0


class StallReport:
    """Remembers what the clients last said (statistics, errors) and, once nothing was
    consumed for STALL_REPORT_S, prints why the application may be stuck."""

    def __init__(self, bootstrap: str, partitions: int):
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.stats: dict = {}
        self.errors: dict[str, str] = {}
        self.progress_at = time.monotonic()
        self.reported_at = self.progress_at
        self.uncommitted_reader: Consumer | None = None

    def on_stats(self, text: str) -> None:
        self.stats = json.loads(text)

    def on_error(self, who: str, err: object) -> None:
        self.errors[who] = str(err)

    def progressed(self) -> None:
        self.progress_at = time.monotonic()

    def maybe_report(self, consumer: Consumer, committed: list[TopicPartition]) -> None:
        now = time.monotonic()
        if now - max(self.progress_at, self.reported_at) < STALL_REPORT_S:
            return
        self.reported_at = now
        print(self.describe(consumer, committed, now - self.progress_at), flush=True)

    def describe(self, consumer: Consumer, committed: list[TopicPartition], stalled_s: float) -> str:
        cgrp = self.stats.get("cgrp", {})
        parts = self.stats.get("topics", {}).get("in", {}).get("partitions", {})
        assigned = sorted(tp.partition for tp in consumer.assignment())
        # An offset whose transaction is not decided yet comes back as -1001 with an error.
        offsets = {tp.partition: f"{tp.offset}" + (f"/{tp.error.name()}" if tp.error else "") for tp in committed}
        fields = []
        for p in range(self.partitions):
            st = parts.get(str(p), {})
            hw, lso = self.query_ends(consumer, p)
            fields.append(f"in[{p}] leader={st.get('leader')} fetch={st.get('fetch_state')} "
                          f"next={st.get('next_offset')} app={st.get('app_offset')} fetchq={st.get('fetchq_cnt')} "
                          f"committed={offsets.get(p)} seen_hi={st.get('hi_offset')} seen_ls={st.get('ls_offset')} "
                          f"hw={hw} lso={lso}")
        return (f"ctp_app: stalled {stalled_s:.0f} s at {time.strftime('%H:%M:%S')}: group state={cgrp.get('state')} join={cgrp.get('join_state')} "
                f"rebalances={cgrp.get('rebalance_cnt')} last_reason={cgrp.get('rebalance_reason')!r} "
                f"assigned={assigned}; " + "; ".join(fields) + f"; last errors {self.errors or 'none'}")

    def query_ends(self, consumer: Consumer, partition: int) -> tuple[object, object]:
        """The partition's high watermark and last stable offset as its leader answers now."""
        if self.uncommitted_reader is None:
            self.uncommitted_reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "ctp-stall-report",
                                                "isolation.level": "read_uncommitted", "log_level": 0})
        tp = TopicPartition("in", partition)
        ends: list[object] = []
        for reader in (self.uncommitted_reader, consumer):
            try:
                ends.append(reader.get_watermark_offsets(tp, timeout=5, cached=False)[1])
            except KafkaException as e:
                ends.append(f"error:{e.args[0].name()}")
        return ends[0], ends[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--end", type=int, required=True, help="records per input partition")
    ap.add_argument("--attempts-log", required=True)
    ap.add_argument("--max-batch", type=int, default=200, help="input records per transaction")
    ap.add_argument("--pace", type=float, default=0.0, help="seconds to pause after each commit")
    ap.add_argument("--debug", default="", help="librdkafka debug contexts, logged to stderr (e.g. cgrp,eos,fetch)")
    ap.add_argument("--group", default="ctp")
    ap.add_argument("--transactional-id", default="ctp-app")
    ap.add_argument("--call-timeout", type=float, default=30.0,
                    help="seconds each transactional call and committed-offsets lookup may take")
    a = ap.parse_args()
    stall = StallReport(a.bootstrap, a.partitions)
    watchdog = CallWatchdog("ctp_app")
    limit = a.call_timeout

    def committed_offsets() -> list[TopicPartition]:
        with watchdog.call("committed", limit):
            return consumer.committed([TopicPartition("in", p) for p in range(a.partitions)], limit)
    logging = {"log_level": 7, "debug": a.debug} if a.debug else {"log_level": 0}
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "statistics.interval.ms": 1000, "stats_cb": stall.on_stats,
                         "error_cb": lambda err: stall.on_error("consumer", err), **logging})
    consumer.subscribe(["in"])
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": a.transactional_id,
                         "transaction.timeout.ms": 20000, "socket.connection.setup.timeout.ms": 1000,
                         "error_cb": lambda err: stall.on_error("producer", err), **logging})
    with watchdog.call("init_transactions", limit):
        producer.init_transactions(limit)
    print(f"ctp_app: started at {time.strftime('%H:%M:%S')}", flush=True)
    log = open(a.attempts_log, "a", buffering=1)
    positions: dict[int, int] = {}
    while True:
        msgs = []
        for m in consumer.consume(a.max_batch, 1.0):
            if m.error() is None:
                msgs.append(m)
            else:
                stall.on_error("consume", m.error())
        if not msgs:
            committed = committed_offsets()
            if all(tp.offset >= a.end for tp in committed):
                print(f"ctp_app: finished at {time.strftime('%H:%M:%S')}", flush=True)
                return 0
            stall.maybe_report(consumer, committed)
            continue
        stall.progressed()
        attempt = uuid.uuid4().hex[:12]
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce("out", f"{m.partition()}:{m.offset()}:{attempt}".encode(), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
            offsets = [TopicPartition("in", p, o) for p, o in positions.items()]
            with watchdog.call("send_offsets_to_transaction", limit):
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), limit)
            with watchdog.call("commit_transaction", limit):
                producer.commit_transaction(limit)
            log.write(json.dumps({"attempt": attempt, "status": "committed"}) + "\n")
            if a.pace:
                time.sleep(a.pace)
        except KafkaException as e:
            err = e.args[0]
            stall.on_error("transaction", err)
            if err.txn_requires_abort():
                with watchdog.call("abort_transaction", limit):
                    producer.abort_transaction(limit)
                log.write(json.dumps({"attempt": attempt, "status": "aborted"}) + "\n")
            else:
                print(f"ctp_app: fatal {err}; exiting for a restart", flush=True)
                os._exit(3)
            # Rewind to the committed offsets: the aborted records are read again.
            for tp in committed_offsets():
                consumer.seek(TopicPartition("in", tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            positions.clear()


if __name__ == "__main__":
    sys.exit(main())
